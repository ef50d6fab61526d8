"""Checkpoint capture: thresholds, milestones, content, redaction, storage without duplicates."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from continuity_fixtures import RunBuilder, bash, edit, read, write
from warden.config import load_settings
from warden.continuity.capture import (capture_checkpoints, context_window, path_project, quality_score,
                                       record_checkpoints, redact_secrets)
from warden.sanitize import _PASSWORD_LABELS
from warden.store.db import open_store
from warden.store.models import Checkpoint, CheckpointTerm

W = 200_000


def triggers(run) -> list[str]:
    return [c.trigger for c in capture_checkpoints(run)]


def test_first_seen_at_82_percent_captures_one_checkpoint() -> None:
    run = RunBuilder().prompt("resume the refactor").turn(int(0.82 * W), "Continuing.").build()
    cps = capture_checkpoints(run)
    fills = [c for c in cps if c.trigger.startswith("fill:")]
    assert [c.trigger for c in fills] == ["fill:80"]
    assert fills[0].fill == pytest.approx(82.0)


def test_each_fill_band_is_captured_once_in_order() -> None:
    b = RunBuilder().prompt("build it")
    for frac in (0.10, 0.21, 0.25, 0.36, 0.52, 0.51, 0.66, 0.79, 0.81, 0.90):
        b.turn(int(frac * W), "ok")
    fills = [t for t in triggers(b.build()) if t.startswith("fill:")]
    assert fills == ["fill:20", "fill:35", "fill:50", "fill:65", "fill:80"]


def test_a_jump_over_several_bands_is_one_checkpoint_named_after_the_highest() -> None:
    run = RunBuilder().prompt("x").turn(int(0.1 * W)).turn(int(0.7 * W)).build()
    assert [t for t in triggers(run) if t.startswith("fill:")] == ["fill:65"]


def test_fill_after_compaction_does_not_recapture_crossed_bands() -> None:
    run = (RunBuilder().prompt("x").turn(int(0.55 * W)).turn(int(0.1 * W)).turn(int(0.56 * W)).build())
    assert [t for t in triggers(run) if t.startswith("fill:")] == ["fill:50"]


def test_long_context_model_window_is_inferred_from_observed_prompts() -> None:
    assert context_window(["claude-sonnet-4-5"], 150_000) == 200_000
    assert context_window(["claude-sonnet-4-5"], 300_000) == 1_000_000
    assert context_window(["claude-sonnet-4-5[1m]"], 0) == 1_000_000


def test_quality_score_is_documented_formula() -> None:
    assert quality_score(0.1, 10, 0, 10, 0, 0) == 100.0
    assert quality_score(1.0, 0, 0, 0, 0, 0) == 50.0  # full context costs 50
    assert quality_score(0.4, 8, 4, 10, 0, 0) == 87.5  # half the reads were re-reads
    assert quality_score(0.4, 0, 0, 8, 4, 0) == 87.5  # half the calls failed
    assert quality_score(0.0, 0, 0, 0, 0, 5) == 80.0  # compactions capped at 20
    assert quality_score(1.0, 4, 4, 4, 4, 2) == 0.0


def test_quality_drops_through_bands_once_each() -> None:
    b = RunBuilder().prompt("debug the parser")
    b.turn(int(0.1 * W), "", [bash("pytest -q", "boom", error=True) for _ in range(4)])  # 25 off -> 75
    b.turn(int(0.1 * W), "", [read("/home/dev/proj/a.py"), read("/home/dev/proj/a.py", reread=True)])
    b.turn(int(0.95 * W), "", [])  # fill penalty pushes below 40
    qs = [t for t in triggers(b.build()) if t.startswith("quality:")]
    assert qs[0] == "quality:80"
    assert qs[-1] == "quality:40"
    assert len(qs) == len(set(qs))


def test_edit_burst_and_tests_passing_milestones() -> None:
    b = RunBuilder().prompt("add the feature")
    b.turn(1000, "", [edit("/home/dev/proj/a.py"), edit("/home/dev/proj/b.py")])
    b.turn(1000, "", [edit("/home/dev/proj/a.py"), edit("/home/dev/proj/c.py")])  # 4 writes -> burst
    b.turn(1000, "", [bash("python -m pytest -q", "12 passed in 0.3s")])  # tests pass after edits
    b.turn(1000, "", [bash("python -m pytest -q", "12 passed in 0.3s")])  # no edits since: nothing
    b.turn(1000, "", [write("/home/dev/proj/n1.py"), write("/home/dev/proj/n2.py"),
                      write("/home/dev/proj/n3.py")])  # 3 new files -> burst
    b.turn(1000, "", [bash("pytest", "1 failed, 11 passed")])  # failing run is no milestone
    ms = [t for t in triggers(b.build()) if t.startswith("milestone:")]
    assert [m.rsplit(":", 1)[0] for m in ms] == ["milestone:edits", "milestone:tests", "milestone:edits"]
    assert len(set(ms)) == 3


def test_content_task_decisions_files_questions_errors_and_state() -> None:
    b = RunBuilder(cwd="/home/dev/proj")
    b.prompt("<command-name>/clear</command-name>")
    b.prompt("Make the CSV export stream rows instead of building a list")
    b.turn(int(0.25 * W), "I'll use a generator so the export never holds all rows. Should the header be optional?",
           [read("/home/dev/proj/export.py"), edit("/home/dev/proj/export.py", error=True,
                                                     result="old_string not found in file")])
    b.turn(int(0.26 * W), "Fixed the edit.", [edit("/home/dev/proj/export.py")])
    cp = capture_checkpoints(b.build())[0]
    assert cp.trigger == "fill:20"
    assert cp.active_task == "Make the CSV export stream rows instead of building a list"
    assert cp.decisions[0]["text"].startswith("I'll use a generator")
    assert cp.open_questions[0]["text"] == "Should the header be optional?"
    assert cp.read_files == ["/home/dev/proj/export.py"]
    assert cp.project == "/home/dev/proj" and cp.projects == ["/home/dev/proj"]
    # the checkpoint holds the state at its trigger (turn 1), the fix comes later
    last = capture_checkpoints(b.turn(int(0.4 * W), "Done: rows stream now.").build())[-1]
    assert last.errors[0]["error"] == "old_string not found in file"
    assert last.errors[0]["fix"] == "Edit /home/dev/proj/export.py"
    assert last.edited_files == ["/home/dev/proj/export.py"]
    assert last.last_state == "Done: rows stream now."


def test_projects_its_paths_touch() -> None:
    assert path_project("/home/dev/proj/src/a.py", "/home/dev/proj") == "/home/dev/proj"
    assert path_project("/home/dev/other/src/a.py", "/home/dev/proj") == "/home/dev/other"
    assert path_project("src/a.py", "/home/dev/proj") == "/home/dev/proj"
    assert path_project("/tmp/scratch.txt", "/home/dev/proj") is None
    assert path_project("/home/dev/.claude/settings.json", "/home/dev/proj") is None
    run = (RunBuilder(cwd="/home/dev/proj").prompt("sync both repos")
           .turn(int(0.3 * W), "", [read("/home/dev/other/lib/x.py"), bash("ls /home/dev/third/docs/")]).build())
    assert capture_checkpoints(run)[0].projects == ["/home/dev/proj", "/home/dev/other", "/home/dev/third"]


@pytest.mark.parametrize("secret, leak", [
    ("export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "abcdefghijklmnop"),
    ("aws key AKIAIOSFODNN7EXAMPLE in config", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abcdefghij.klmnopqrst'", "eyJhbGciOiJIUzI1NiJ9"),
    ("use token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnop"),
    ("DATABASE_URL=postgresql://app:hunter2secret@db.internal:5432/prod", "hunter2secret"),
    ("password: correct-horse-battery", "correct-horse-battery"),
    ('{"client_secret": "s3cr3t-value-123"}', "s3cr3t-value-123"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
    ("slack xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy", "pdFZKVeTuE8sk7"),
    ("slack xoxp-1234567890-1234567890-1234567890-" + "ab12" * 8, "ab12ab12"),
    ("slack refresh xoxe-1-" + "My0xLTEy" * 18, "My0xLTEy"),  # a rotating token's refresh token
    ("upload pypi-AgEIcHlwaS5vcmc" + "Q7vX" * 40, "Q7vXQ7vX"),
    ("mysql -u root --password hunter2secret -h db", "hunter2secret"),
    ("deploy --api-key 'k3y-value-123'", "k3y-value-123"),
    ("cache at redis://:hunter2redispw@cache:6379", "hunter2redispw"),
    ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo==", "Zm9vYmFy"),
    ("curl -H 'Cookie: session=abcdef0123456789abcdef0123456789' https://x", "abcdef0123456789"),
    ("Set-Cookie: sid=31d4d96e407aad42; Path=/", "31d4d96e407aad42"),
    ("post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXX"),
    ("the db password hunter2hunter2 works", "hunter2hunter2"),
    ("docker login -u me -p s3cretpw registry.io", "s3cretpw"),
    ("key SG.abcdefghijklmnopqrstu.vwxyzABCDEFGHIJKLMNOP here", "vwxyzABCDEFG"),
    ("the hook signs with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw now", "MfKQ9r8GKYqr"),  # Stripe webhook
    ("client secret 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", "1a2B3c4D5e6F"),  # Google OAuth client
    ("token ya29.a0AfH6SMBx1y2z3w4v5u6t7s8r9q0p expired", "a0AfH6SMBx1y"),  # Google OAuth access
    ("curl 'https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r&sig=Xy7%2BAbCdEfGh1234%3D&se=2026'",
     "Xy7%2BAbCd"),  # Azure SAS
    ("Passwort: Geheim2026", "Geheim2026"),
    ("Kennwort = Geheim2026", "Geheim2026"),
    ("DB_PASSWORT=Geheim2026", "Geheim2026"),
    ("mot de passe : Secret2026", "Secret2026"),
    ("contraseña: Secreto2026", "Secreto2026"),
    ("senha=Segredo2026", "Segredo2026"),
    ('{"senha": "Segredo 2026"}', "Segredo 2026"),
    ("пароль: Parol2026", "Parol2026"),
    # "is" with a sign after it, and a PGP armoured key (its markers end in "KEY BLOCK")
    ("my password is: Tr0ub4dor&3xyz", "Tr0ub4dor"),
    ("the passphrase is = Tr0ub4dor&3xyz", "Tr0ub4dor"),
    ("Password is - Tr0ub4dor&3xyz", "Tr0ub4dor"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGXabcdEFGH\n=x1Yz\n-----END PGP PRIVATE KEY BLOCK-----",
     "lQOYBGXabcdEFGH"),
])
def test_secrets_are_redacted(secret: str, leak: str) -> None:
    out = redact_secrets(secret)
    assert leak not in out and "[REDACTED" in out


def test_redaction_keeps_ordinary_text() -> None:
    for text in ("Fix the token counter in warden/tokens.py and rerun pytest",
                 "Fix the password reset email flow", "open http://localhost:8080/path",
                 "Das Passwort ist zu kurz", "la contraseña expiró", "design?sig=", "日本語のテキスト！（全角）",
                 "zero\u200bwidth and joiner\u200d here", "ｆｕｌｌ ｗｉｄｔｈ ｔｅｘｔ", "a\r\nb\x07c",
                 "Запусти тесты в каталоге /home/dev/проект: токен истёк", "Ελληνικά κείμενα: το κλειδί έληξε",
                 "Сервер: рабочий, ключ = новый"):
        assert redact_secrets(text) == text


_KEY = "sk-ant-api03-" + "Q7vX" * 8
_FULL_WIDTH = {code: code + 0xFEE0 for code in range(0x21, 0x7F)}


def _as_shown(text: str) -> str:
    """Text as a screen, a memory file (fence.defang) and the recall index read it: invisible
    characters dropped, compatibility forms folded."""
    import unicodedata

    from warden.sanitize import strip_controls

    return unicodedata.normalize("NFKC", strip_controls(text))


@pytest.mark.parametrize("text, leak", [
    (f"echo {_KEY[:7]}\u200b{_KEY[7:]}", "Q7vXQ7vX"),  # zero-width space
    (f"key {_KEY[:3]}\u200d{_KEY[3:]} here", "Q7vXQ7vX"),  # zero-width joiner
    (f"key {_KEY[:12]}\u00ad{_KEY[12:]} here", "Q7vXQ7vX"),  # soft hyphen
    (f"key {_KEY[:24]}\u2060{_KEY[24:]} here", "Q7vXQ7vX"),  # word joiner: as written, a prefix is a key
    (f"key {_KEY[:5]}\x07{_KEY[5:]} here", "Q7vXQ7vX"),  # a control
    (f"key {_KEY.translate(_FULL_WIDTH)} here", "Q7vXQ7vX"),  # full-width
    (f"日本語です！ {_KEY[:9]}\u200c{_KEY[9:]}。", "Q7vXQ7vX"),
    ("ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ｘｙ and more", "hunter2xy"),
    ("Ａｕｔｈｏｒｉｚａｔｉｏｎ: Bearer abcdefgh\u200bijklmnop", "ijklmnop"),
    ("whsec\u200b_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqr"),
    (f"key \u0455k-\u0430nt{_KEY[6:]} here", "Q7vXQ7vX"),  # Cyrillic dze and a: "ѕk-аnt-api03-…"
    (f"key {_KEY[:3]}\u0430{_KEY[4:]}", "Q7vXQ7vX"),  # one Cyrillic a
    ("use token ghp_abcdefghijklmn\u03bfpqrstuvwxyz0123456789", "pqrstuvwxyz"),  # a Greek omicron
    ("aws key \u0410KIAIOSFODNN7EXAMPLE in config", "IOSFODNN7EXAMPLE"),  # a Cyrillic capital A
    (f"key \u1d0bey {_KEY[:3]}\u200b\u0430{_KEY[4:]}", "Q7vXQ7vX"),  # small capital, invisible and Cyrillic together
    ("\u0440\u0430ssword=hunter2xy and more", "hunter2xy"),  # "раssword": a Cyrillic r and a
    (f"key {_KEY.replace('-', chr(0x2010))} here", "Q7vXQ7vX"),  # Unicode hyphens for "-"
    (f"key {_KEY[:6]}\u2212{_KEY[7:]} here", "Q7vXQ7vX"),  # a minus sign
])
def test_a_key_disguised_by_invisible_or_full_width_characters_is_redacted(text: str, leak: str) -> None:
    """The patterns read text as it reads: an invisible character inside a key, or the key in
    full-width letters, hides it from them but not from a screen or a memory file (which drop the
    one and fold the other)."""
    from warden.sanitize import holds_key

    out = redact_secrets(text)
    assert leak not in _as_shown(out) and "[REDACTED]" in out
    if leak == "Q7vXQ7vX":
        assert holds_key(text)


_BODY36 = "Q7vX" * 9  # a GitHub or npm token's full length


@pytest.mark.parametrize("text, leak", [
    (f"cat /home/u/other{_KEY}", "Q7vXQ7vX"),
    (f"ls /tmp/x{_KEY.replace('api03', 'oat01')}", "Q7vXQ7vX"),
    (f"echo abcghp_{_BODY36}", "Q7vXQ7vX"),
    (f"git remote add o https://x.io/ABCgho_{_BODY36}", "Q7vXQ7vX"),
    (f"ref mygithub_pat_11ABCDEFG0123456789abc_{_BODY36}", "Q7vXQ7vX"),
    ("aws x_AKIAIOSFODNN7EXAMPLE_old", "IOSFODNN7EXAMPLE"),
    ("aws cfgASIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("slack myxoxb-1234567890-abcdefghij", "1234567890-abcdefghij"),
    ("maps keyAIzaSyA1234567890abcdefghijklmnopqrstuv", "1234567890abcdef"),
    ("gitlab cfgglpat-abcdefghij0123456789", "abcdefghij0123456789"),
    ("zzwhsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqr"),
    ("client xGOCSPX-1a2B3c4D5e6F7g8H9i0J1k2L3m4N", "1a2B3c4D5e6F"),
    ("oauth tokya29." + "a0AfH6SMBx" * 7, "a0AfH6SMBx"),
    (f"npm xnpm_{_BODY36}", "Q7vXQ7vX"),
    ("upload tokpypi-AgEIcHlwaS5vcmc" + "Q7vX" * 12, "Q7vXQ7vX"),
])
def test_a_key_glued_to_the_word_before_it_is_redacted(text: str, leak: str) -> None:
    """Where a prefix and what follows it are a form no word has, a key glued to the word before
    it ("/home/u/othersk-ant-api03-…", "abcghp_…", "x_AKIA…") is a key; an error message's too."""
    from warden.sanitize import holds_key, redact_credentials

    for out in (redact_secrets(text), redact_credentials(text, {})):
        assert leak not in out and "[REDACTED]" in out
    assert holds_key(text)


def test_words_that_hold_a_key_s_prefix_are_no_key() -> None:
    """A prefix some words hold is a key inside a word only where its form is the provider's."""
    from warden.sanitize import holds_key

    for text in ("bin/task-list-manager-and-more-stuff", "bin/task-ant-colony-simulation-v2", "laughs_AndLowsOfTheMarketData",
                 "pnpm_ConfigurationDirectoryPath", "shelf_LifeValueCalculatorV2xyz", "desk_test_ReadWriteThroughput1",
                 "maya29.backup-of-the-project-files", "my_github_pat_expiry_warning_days", "SOUTHEASTASIAPACIFICREGIONS12",
                 "getAIzaStudioConfigurationSettingsForTheUser", "MSG.abcdefghijklmnopqr.abcdefghijklmnopqr",
                 # Slack's and PyPI's prefixes starting a word: no <digits>- after xoxb-, no AgE after pypi-
                 "xoxo-friends-forever-2024", "see xoxb-builder-config-files", "xoxs-and-hugs-for-everyone-today",
                 "pypi-mirror-internal-cache", "pip.conf: index-url pypi-upload-helper-2024-script"):
        assert redact_secrets(text) == text and not holds_key(text), text


@pytest.mark.parametrize("text, leak", [
    (f"bad key {_KEY[:7]}\u200b{_KEY[7:]}", "Q7vXQ7vX"),  # zero-width space
    (f"bad key {_KEY.translate(_FULL_WIDTH)}", "Q7vXQ7vX"),  # full-width
    (f"bad key \u0455k-\u0430nt{_KEY[6:]}", "Q7vXQ7vX"),  # Cyrillic look-alikes
    ("Ａｕｔｈｏｒｉｚａｔｉｏｎ: Bearer abcdefgh\u200bijklmnop", "ijklmnop"),
])
def test_an_error_message_s_disguised_key_is_redacted(text: str, leak: str) -> None:
    """redact_credentials (API and CLI error messages) reads a disguised key as redact_secrets
    does, and still keeps what only a name: value guess would take ("password=…", "x-api-key")."""
    from warden.api_client import describe_api_error
    from warden.sanitize import redact_credentials

    out = redact_credentials(f"HTTP 401 authentication_error: {text}", {})
    assert leak not in _as_shown(out) and "[REDACTED]" in out
    shown = describe_api_error(RuntimeError(f"gateway refused {text}"))
    assert leak not in shown and "[REDACTED]" in shown
    for kept in ("authentication_error: invalid x-api-key", "ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ｘｙ is wrong",
                 "\u0440\u0430ssword=hunter2xy is wrong", "Ошибка: ключ API неверен"):
        assert redact_credentials(kept, {}) == kept
    environ = {"ANTHROPIC_API_KEY": _KEY, "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG"}
    assert redact_credentials(f"echoed {_KEY} and wJalrXUtnFEMI/K7MDENG", environ) == "echoed [REDACTED] and [REDACTED]"


_SECRET_FRAGMENTS = [
    "sk-ant-api03-abcdefghijklmnopqrstuv", "AKIAIOSFODNN7EXAMPLE", "Bearer abcdefghijk", "password=", "hunter2x!",
    "redis://:pw1234@h", "x://u:pw@h", "Cookie: a=b", "ghp_abcdefghijklmnopqrstuvwx", "eyJabcdefghi.eyJabcdefghi.abcdefghij",
    "mysql -pSECRET1", "sshpass -p x", " -u me:pw12", "--token abcd1234", "AccountKey=abcd", "SG.abcdefghijklmnopqr.abcdefghijklmnopqr",
    "hooks.slack.com/services/T1/B2/x", "docker login -p pw", "pass: abcd", "api_key='abcd efgh'", "ls -la", "pytest -q",
    "grep foo", " ", "\n", "=", ":", "'", "\"", "é", "AUTH=abcd", "xoxb-1234567890ab", "npm_abcdefghijklmnopqrstuv",
    "whsec_abcdefghijklmnopqrstuv", "GOCSPX-abcdefghijklmnopqr", "ya29.abcdefghijklmnopqrst", "?sig=ab%2Bcdefgh",
    "&SIG=", "Passwort", "kennwort", "mot de passe", "Mot_De_Passe", "contraseña", "SENHA", "пароль", "密码", "wachtwoord",
    "\u0455k-\u0430nt-api03-abcdefghijklmnopqrstuv", "g\u04bbp_abcdefghijklmnopqrstuvwx", "\u0440\u0430ss: abcd", "\u200b",
    "othersk-ant-api03-abcdefghijklmnopqrstuv", "abcghp_abcdefghijklmnopqrstuvwxyz0123456789", "x_AKIAIOSFODNN7EXAMPLE_",
    "zzwhsec_abcdefghijklmnopqrstuv", "task-", "maya29.abcdefghijklmnopqrst", "password is: abcd", "passphrase is =abcd",
]


@given(st.lists(st.sampled_from(_SECRET_FRAGMENTS), max_size=8))
@settings(max_examples=300, deadline=None)
def test_the_quick_screen_never_skips_text_a_pattern_would_redact(parts: list[str]) -> None:
    """Neither in the text as written nor in the copy as it reads (look-alikes folded, which a key
    may run on into: "…stuvпароль" reads "…stuvnapoль")."""
    from warden.sanitize import _SECRET_PATTERNS, _disguise_folded, _redact_as_written

    def slow(text: str) -> str:
        for pattern, repl, _gate in _SECRET_PATTERNS:
            text = pattern.sub(repl, text)
        return text

    text = "".join(parts)
    folded = _disguise_folded(text)
    assert _redact_as_written(text) == slow(text)
    if folded is None:
        assert redact_secrets(text) == slow(text)
    else:
        assert _redact_as_written(folded) == slow(folded)


# What the quick screen and the patterns' gates are held to besides _SECRET_FRAGMENTS: each
# pattern's own shapes, names in other cases, the letters "(?i)" matches that lowercasing keeps
# apart (ſ, ı, İ, the Kelvin sign, a narrow Cyrillic o), what a redaction writes, and the
# separators the screen's regexes read.
_PATTERN_FRAGMENTS = [
    *_SECRET_FRAGMENTS, "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n", "-----END RSA PRIVATE KEY-----", "PRIVATE KEY",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOY\n", "-----END PGP PRIVATE KEY BLOCK-----",
    "https://hooks.slack.com/workflows/T1/x", "discordapp.com/api/webhooks/1/ab", "Set-Cookie: a=b; c=d",
    "Cookie: abcdef", "Proxy-Authorization: Basic abcdefgh", "Authorization=token abcdefgh", "authorization",
    "BEARER\tabcdefgh", "&sig=abcdefgh", "ASIAIOSFODNN7EXAMPLE", "github_pat_abcdefghij0123456789",
    "xoxe-1-" + "a" * 24, "AIzaSyA1234567890abcdefghijklmnopqrstuv", "glpat-abcdefghij0123456789",
    "rk_live_abcdefghijklmnop", "pk_test_abcdefghijklmnop", "hf_abcdefghijklmnopqrstu", "pypi-AgE" + "x" * 50,
    "mysqldump -u root -pS3cret", "mariadb -pS3cret", "docker login -u me -p pw", " --user me:pw12",
    "Password is hunter22", "the PWD hunter2x!", "PASS = 'abcd'", "Mot de Passe = abcd", "mot de passe: abcd",
    "--client-secret abcd", "--API-KEY abcd", "ŞİFRE: abcd", "Jelszó='abcd'", "SharedAccessKey=abcd",
    "pa\u017f\u017fword=abcd", "\u017fecret: abcd", "AUTHOR\u0130ZAT\u0130ON: abcdefgh", "to\u212aen=abcd",
    "pr\u0131vate_key=abcd", "пар\u1c82ль: abcd", "\u017f", "\u0131", "\u0130", "\u212a", "\u0307", "\u00a0-u",
    "--secret\t", "x-token:", "tokenizer.js", "api/", "[REDACTED]", "redacted", "@", "-", "_", "a", "1", "/", ".",
    ";", "\t", "?", "&", "\u03a3",
    *(f"{prefix}IOSFODNN7EXAMPLE" for prefix in ("AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA")),
    *(f"gh{kind}_" + "Q7vX" * 9 for kind in "pousr"),
    # every name the name patterns know, in each form they read
    *(form.format(name) for name in ("password", "passwd", "passphrase", "pwd", "secret", "token", "api_key", "apikey",
                                     "access-key", "private_key", "account_key", "sharedaccesskey", "client_secret",
                                     "auth", *_PASSWORD_LABELS)
      for form in ("{}=abcd", "{}: abcd", '"{}": "abcd efgh"', "{}='abcd'", "--{} abcd", "{} is abcd", "{} is: abcd",
                   "{} is =abcd", "{} hunter2x")),
]


@given(st.lists(st.sampled_from([*_PATTERN_FRAGMENTS, "\ufe0f", "\u0301", "\uff4b", "\U0001f9ea", "\u0430"]), max_size=8))
@settings(max_examples=300, deadline=None)
def test_the_folded_copy_of_text_to_normalise_is_what_normalising_and_translating_it_gives(parts: list[str]) -> None:
    """(It translates only where a look-alike is: elsewhere the translation changes nothing.)"""
    import unicodedata

    from warden.sanitize import _UNSAFE, LATIN_LOOKALIKES, _disguise_folded

    text = "".join(parts)
    if not text.isascii() and (not unicodedata.is_normalized("NFKC", text) or _UNSAFE.search(text)):
        assert _disguise_folded(text) == unicodedata.normalize("NFKC", _UNSAFE.sub("", text)).translate(LATIN_LOOKALIKES)


def _matches(pattern: object, text: str) -> bool:
    """Whether ``pattern`` finds something in ``text`` (a command flag: whether it redacts)."""
    from warden.sanitize import REDACTED, _CommandFlag

    if isinstance(pattern, _CommandFlag):
        return pattern.sub(REDACTED, text) != text
    return pattern.search(text) is not None  # type: ignore[attr-defined]


def _assert_every_gate_holds(text: str) -> None:
    """Each pattern's gate on ``text`` holds wherever the pattern matches, in the text it is given
    after the patterns before it redacted theirs (all of them run here, ungated and unscreened)."""
    from warden.sanitize import _SECRET_PATTERNS, _STRUCTURED_SECRET_PATTERNS, _gate_open, _gate_text

    gated = _gate_text(text.lower())
    for patterns in (_SECRET_PATTERNS, _STRUCTURED_SECRET_PATTERNS):
        current = text
        for pattern, repl, gate in patterns:
            if _matches(pattern, current):
                assert _gate_open(gate, gated), (pattern, text)
            current = pattern.sub(repl, current)


def _ungated(patterns: list) -> list:
    return [(pattern, repl, ()) for pattern, repl, _gate in patterns]  # no clause: always open


def _assert_gated_is_ungated(text: str) -> None:
    from warden.sanitize import _SECRET_PATTERNS, _STRUCTURED_SECRET_PATTERNS, _redact

    for patterns in (_SECRET_PATTERNS, _STRUCTURED_SECRET_PATTERNS):
        assert _redact(text, patterns) == _redact(text, _ungated(patterns)), text


def test_every_pattern_s_gate_holds_on_its_own_examples() -> None:
    from warden.sanitize import _SECRET_PATTERNS, _disguise_folded

    texts = [form for text in _PATTERN_FRAGMENTS for form in (text, _disguise_folded(text)) if form]
    for text in texts:
        _assert_every_gate_holds(text)
    for pattern, _repl, _gate in _SECRET_PATTERNS:  # the check above is no vacuous one
        assert any(_matches(pattern, text) for text in texts), pattern


@given(st.lists(st.sampled_from(_PATTERN_FRAGMENTS), max_size=10))
@settings(max_examples=400, deadline=None)
def test_every_pattern_s_gate_holds_where_it_matches(parts: list[str]) -> None:
    from warden.sanitize import _disguise_folded

    text = "".join(parts)
    for form in filter(None, (text, _disguise_folded(text))):
        _assert_every_gate_holds(form)


def test_no_redaction_writes_a_later_gate_s_literal() -> None:
    """What a redaction writes ("[REDACTED]", "Bearer [REDACTED]" for a "bearer …", "[REDACTED
    PRIVATE KEY]" where "PRIVATE KEY" was) holds no later gate's literal it did not find, so a
    gate read once, before the first pattern, holds for every pattern after it."""
    from warden.sanitize import _SECRET_PATTERNS

    (_first, first_repl, _), *later = _SECRET_PATTERNS
    assert first_repl == "[REDACTED PRIVATE KEY]"
    assert {repl for _p, repl, _g in later} <= {"[REDACTED]", "Bearer [REDACTED]", r"\g<pre>[REDACTED]",
                                                r"\g<pre>[REDACTED]\g<q>"}
    for _pattern, _repl, gate in later:
        for word in (word for clause in gate for word in clause):
            assert word == word.lower() and not any(ch.isspace() or ch in "[]" for ch in word), word
            assert word not in "redacted" and (word not in "redacted private key" or word in "private key"), word


def test_the_gate_copy_reads_each_letter_as_every_character_ignorecase_matches_to_it() -> None:
    """"(?i)" matches "ſ" to "s", "İ" and "ı" to "i" and more that lowercasing does not give the
    letter: every character that matches a gate literal's character reads as it in the gate copy."""
    import re

    from warden.sanitize import _SECRET_PATTERNS, _gate_text

    everything = "".join(map(chr, range(0x110000)))
    chars = {ch for _p, _r, gate in _SECRET_PATTERNS for clause in gate for word in clause for ch in word}
    candidates = set(re.findall("(?i)[" + re.escape("".join(sorted(chars))) + "]", everything))
    for ch in chars:
        for other in candidates:
            if re.fullmatch("(?i)" + re.escape(ch), other):
                assert _gate_text(other.lower()) == ch, (ch, other)


@given(st.lists(st.sampled_from(_PATTERN_FRAGMENTS), max_size=10))
@settings(max_examples=400, deadline=None)
def test_gated_redaction_is_the_ungated_one(parts: list[str]) -> None:
    _assert_gated_is_ungated("".join(parts))


def _corpus_targets(corpus: Path) -> list[str]:
    """Every tool call's command, file path and pattern in the corpus, once each."""
    import json

    texts: dict[str, None] = {}
    for file in sorted((corpus / "projects").rglob("*.jsonl")):
        for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"tool_use"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            content = (record.get("message") or {}).get("content") if isinstance(record, dict) else None
            for block in content if isinstance(content, list) else ():
                tool_input = block.get("input") if isinstance(block, dict) and block.get("type") == "tool_use" else None
                for key in ("command", "file_path", "pattern"):
                    if isinstance(tool_input, dict) and isinstance(tool_input.get(key), str):
                        texts[tool_input[key]] = None
    return list(texts)


def test_gated_redaction_is_the_ungated_one_on_the_corpus_commands_and_paths(corpus: Path) -> None:
    """As written, cut where redacted_prefix reads, and with secrets spliced in at random places."""
    import random

    from warden.sanitize import REDACT_MARGIN

    texts = _corpus_targets(corpus)
    assert texts
    rng = random.Random(0)
    for text in texts:
        window = 320 + REDACT_MARGIN
        variants = [text, text[:window], text.upper()]
        for _ in range(4):
            at = rng.randrange(len(text) + 1)
            variants.append(text[:at] + rng.choice(_PATTERN_FRAGMENTS) + text[at:])
        for variant in variants:
            _assert_gated_is_ungated(variant)
            _assert_every_gate_holds(variant)


# The quick screen as one regex, as it was before it was split (its literals searched by first
# character, each of its regexes only where its words are): the reference the split one is held
# to, as it decides what goes unredacted.
_ONE_REGEX_SCREEN = (
    r"private key|://|bearer|authorization|a(?:kia|sia|gpa|ida|roa|npa|nva|ipa)|sk-|gh[pousr]_|github_pat|xox|"
    r"aiza|glpat|_live_|_test_|eyj|npm_|hf_|pypi-|sg\.|mysql|mariadb|sshpass|docker|\s-u|--user|cookie|"
    r"hooks\.slack|discord|(?:password|passwd|passphrase|pwd)\s+(?:is[\s:=\-]|[^\s\"']*[\d!@#$%^&*])|"
    r"(?<![\w\-])(?=[\w\-]*?(?:pass|pwd|secret|token|api|access|key|auth|private|account))[\w\-]*+[\"']?\s*[:=]|"
    r"(?<![\w\-])--?(?=[\w\-]*?(?:pass|secret|token|api|access|private|account))[\w\-]*+[ \t]")


def _one_regex_screen(lowered: str) -> bool:
    """The screen as one regex search, plus a plain search of the patterns for secrets named in
    words (their own answer: the quick screen only tries them where a label starts)."""
    import re

    from warden.sanitize import _LABELLED_SCREEN, _PASSPHRASE_SCREEN, _gate_text

    words = ("whsec_", "gocspx-", "ya29.", "sig=", "xapp-", "gsk_", "r8_", "xai-", "dop_v1_", "doo_v1_", "dor_v1_",
             "sq0atp-", "sq0csp-", "1//0", *(w for w in _PASSWORD_LABELS if "pass" not in w and w.isascii()))
    read = _gate_text(lowered)  # as the labelled patterns' "(?i)" reads it: "ſ" is "s", "ı" and "i̇" are "i"
    return (re.search(_ONE_REGEX_SCREEN, lowered) is not None or any(word in lowered for word in words)
            or _LABELLED_SCREEN.search(read) is not None or _PASSPHRASE_SCREEN.search(read) is not None
            or not lowered.isascii() and any(word in lowered for word in _PASSWORD_LABELS if not word.isascii()))


@given(st.lists(st.sampled_from(_PATTERN_FRAGMENTS), max_size=10))
@example(["paſſword=abcd", "--sharedaccesskey abcd"])  # a label with long s: "(?i)" reads it, and redacts
@example(["paſſword=abcd"])  # and alone, its only label word ("pass") read through the long s
@settings(max_examples=400, deadline=None)
def test_the_quick_screen_is_the_one_regex_it_was(parts: list[str]) -> None:
    from warden.sanitize import _disguise_folded, _may_hold_secret

    text = "".join(parts)
    for form in filter(None, (text, _disguise_folded(text))):
        assert _may_hold_secret(form.lower()) == _one_regex_screen(form.lower()), form


def test_the_quick_screen_is_the_one_regex_it_was_on_the_corpus(corpus: Path) -> None:
    from warden.sanitize import _may_hold_secret

    for text in _corpus_targets(corpus):
        for form in (text.lower(), text[:576].lower()):
            assert _may_hold_secret(form) == _one_regex_screen(form), form


def test_secrets_never_reach_a_checkpoint() -> None:
    run = (RunBuilder().prompt("deploy with ANTHROPIC_API_KEY=sk-ant-api03-SECRETSECRETSECRET99 please")
           .turn(int(0.3 * W), "I'll use the password hunter2 from password=hunter2pass.").build())
    cp = capture_checkpoints(run)[0]
    assert "SECRETSECRET" not in cp.active_task and "hunter2pass" not in str(cp.decisions)


def test_secrets_in_paths_never_reach_a_checkpoint_its_terms_its_state_or_its_fence() -> None:
    """Files touched, errors' paths and the projects paths name are stored and shown redacted
    (as the parser's trace digest is); the capture state recognises paths by a digest."""
    import json

    from warden.continuity.capture import capture, searchable_terms
    from warden.continuity.fence import fence_checkpoint

    run = (RunBuilder(cwd="/home/u/proj").prompt("tidy the env files")
           .turn(int(0.3 * W), "Reading them.", [
               read(f"/home/u/.env.{_KEY}"), write("/tmp/token=abcd1234efgh/x"),
               edit(f"/home/u/{_KEY}/src/a.py", error=True, result="permission denied"),
               edit(f"/home/u/{_KEY}/src/a.py"), write(f"/home/u/proj/{_KEY[:7]}\u200b{_KEY[7:]}.txt")])
           .build())
    checkpoints, carry = capture(run)
    cp = checkpoints[0]
    shown = json.dumps([[c.__dict__ for c in checkpoints], carry.to_json(), sorted(searchable_terms(cp)),
                        fence_checkpoint(cp)], default=str, ensure_ascii=False)
    assert "Q7vXQ7vX" not in _as_shown(shown) and "abcd1234efgh" not in shown
    assert cp.read_files == ["/home/u/.env.[REDACTED]"]
    assert cp.edited_files[:2] == ["/tmp/token=[REDACTED]", "/home/u/[REDACTED]/src/a.py"]
    assert cp.projects == ["/home/u/proj", "/home/u/[REDACTED]"]
    assert cp.errors[0]["path"] == "/home/u/[REDACTED]/src/a.py" and cp.errors[0]["project"] == "/home/u/[REDACTED]"


def test_secrets_never_reach_what_collect_stores_nor_what_recover_shows(tmp_path: Path) -> None:
    """Through the real collector: keys in new shapes, a disguised key, a password under another
    language's name and secrets in paths are in no stored row (checkpoints, terms, capture and
    parser state, the run's trace digest) nor in the fenced checkpoint recover prints."""
    import json

    from collect_support import SESSION, assistant, jsonl, prompt, tool_result, tool_use, usage
    from sqlalchemy import inspect

    from warden.continuity.service import recover
    from warden.ingest.collector import collect_paths
    from warden.store.models import CaptureState, IngestOffset, SessionRun

    from warden.store.models import utcnow

    disguised = f"{_KEY[:7]}\u200b{_KEY[7:]}"
    look_alike, glued = "\u0455k-\u0430nt-api03-" + "M3kP" * 8, "/home/u/otherghp_" + "Z9wY" * 9
    ts = (utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # recent: recover looks back days
    lines = [prompt(f"Deploy the exporter with {disguised}; Passwort: Geheim2026", ts=ts),
             assistant("msg_1", "req_1", usage(5, 50, cr=int(0.3 * W)), [
                 {"type": "text", "text": "I'll sign the exporter hook with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw."},
                 tool_use("toolu_1", "Read", file_path=f"/home/u/.env.{_KEY}"),
                 tool_use("toolu_2", "Edit", file_path="/tmp/token=abcd1234efgh/x", old_string="a", new_string="b"),
                 tool_use("toolu_3", "Bash", command=f"az storage blob download --sas-token 'sv=1&sig=Xy7%2BAbCdEfGh1234'"
                                                     f" && export K={disguised}"),
                 tool_use("toolu_4", "Read", file_path=glued), tool_use("toolu_5", "Bash", command=f"echo {look_alike}")],
                       ts=ts, cwd="/proj"),
             tool_result("toolu_1", "ok", ts=ts), tool_result("toolu_2", "edited", ts=ts), tool_result("toolu_3", "ok", ts=ts),
             tool_result("toolu_4", "ok", ts=ts), tool_result("toolu_5", "ok", ts=ts)]
    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(jsonl(lines))
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)

    def assert_nothing_leaks() -> None:
        with store.session() as s:
            rows = [{c.key: getattr(row, c.key) for c in inspect(model).mapper.column_attrs}
                    for model in (Checkpoint, CheckpointTerm, CaptureState, IngestOffset, SessionRun)
                    for row in s.scalars(select(model))]
            assert s.scalar(select(func.count()).select_from(Checkpoint))
            shown = recover(s, settings, prompt="deploy the exporter hook", session_id=None, cwd="/proj").block
        stored = _as_shown(json.dumps(rows, default=str, ensure_ascii=False) + (shown or ""))
        assert shown and "[REDACTED]" in shown
        for leak in ("Q7vXQ7vX", "Geheim2026", "MfKQ9r8GKYqr", "abcd1234efgh", "Xy7%2BAbCd", "M3kPM3kP", "Z9wYZ9wY"):
            assert leak not in stored, leak

    assert_nothing_leaks()
    # what an older warden stored is refreshed when a new parser version reads the transcript again
    with store.session() as s:
        for row in s.scalars(select(Checkpoint)):
            row.read_files, row.active_task = [f"/home/u/.env.{_KEY}"], f"Deploy with {disguised}; Passwort: Geheim2026"
            s.add(CheckpointTerm(checkpoint_id=row.id, term="q7vxq7vxq7vxq7vx", captured_at=row.captured_at,
                                 session_id=row.session_id))
    _read_from_the_start_at_next_collect(store)
    collect_paths(settings, [transcript], store=store)
    assert_nothing_leaks()


def test_reindex_redacts_what_an_older_warden_stored() -> None:
    """A checkpoint whose transcript is gone is never read again: ``checkpoints reindex`` redacts
    its text, files, errors and projects as capture now would, and indexes what is left."""
    import json

    from sqlalchemy import inspect

    from warden.continuity.service import reindex

    store = _store()
    disguised = f"{_KEY[:7]}\u200b{_KEY[7:]}"
    with store.session() as s:
        record_checkpoints(s, None, RunBuilder(session_id="sess-old", cwd="/home/u/proj").prompt("ship it")
                           .turn(int(0.3 * W), "I'll ship it.", [edit("/home/u/proj/a.py")]).build())
        row = s.scalars(select(Checkpoint)).one()
        row.active_task, row.last_state = f"ship with {disguised}", "Passwort: Geheim2026"
        row.decisions = [{"text": "I'll use whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw.", "project": f"/home/u/{_KEY}"}]
        row.edited_files, row.read_files = ["/tmp/token=abcd1234efgh/x"], [f"/home/u/.env.{_KEY}"]
        row.errors = [{"error": "denied", "fix": f"Edit /home/u/{_KEY}/a.py", "tool": "Edit",
                       "path": f"/home/u/{_KEY}/a.py", "project": f"/home/u/{_KEY}"}]
        row.projects = ["/home/u/proj", f"/home/u/{_KEY}"]
    with store.session() as s:
        reindex(s)
    with store.session() as s:
        rows = [{c.key: getattr(r, c.key) for c in inspect(model).mapper.column_attrs}
                for model in (Checkpoint, CheckpointTerm) for r in s.scalars(select(model))]
        row = s.scalars(select(Checkpoint)).one()
        assert row.project == "/home/u/proj" and row.projects == ["/home/u/proj", "/home/u/[REDACTED]"]
        assert row.edited_files == ["/tmp/token=[REDACTED]"] and row.errors[0]["path"] == "/home/u/[REDACTED]/a.py"
    stored = _as_shown(json.dumps(rows, default=str, ensure_ascii=False))
    for leak in ("Q7vXQ7vX", "q7vxq7vx", "Geheim2026", "MfKQ9r8GKYqr", "abcd1234efgh"):
        assert leak not in stored, leak


def _store():
    return open_store(load_settings())


def _rich_run():
    b = RunBuilder(session_id="sess-store").prompt("wire the collector")
    for i, frac in enumerate((0.1, 0.3, 0.5, 0.7, 0.9)):
        b.turn(int(frac * W), f"I'll use step {i}.", [edit(f"/home/dev/proj/f{i}.py")])
    return b.build()


def test_record_checkpoints_is_idempotent_on_reingest() -> None:
    store = _store()
    run = _rich_run()
    with store.session() as s:
        first = record_checkpoints(s, None, run)
    with store.session() as s:
        again = record_checkpoints(s, None, run)
        count = s.scalar(select(func.count()).select_from(Checkpoint))
        terms = s.scalar(select(func.count()).select_from(CheckpointTerm))
    assert first == count and first >= 5
    assert again == 0
    with store.session() as s:
        record_checkpoints(s, None, run)
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == count
        assert s.scalar(select(func.count()).select_from(CheckpointTerm)) == terms


def test_incremental_tail_parse_does_not_recapture_crossed_bands() -> None:
    store = _store()
    full = _rich_run()
    with store.session() as s:
        record_checkpoints(s, None, full)
        before = sorted(s.scalars(select(Checkpoint.trigger)))
    tail = RunBuilder(session_id="sess-store", start=full.ended_at).prompt("go on").turn(int(0.6 * W), "ok").build()
    with store.session() as s:
        assert record_checkpoints(s, None, tail) == 0
        assert sorted(s.scalars(select(Checkpoint.trigger))) == before


def test_capture_over_the_real_corpus_does_not_crash(corpus: Path) -> None:
    parser = pytest.importorskip("warden.ingest.parser")
    store = _store()
    total = 0
    for path in sorted(corpus.rglob("*.jsonl")):
        session_id, agent_id = parser.ids_from_path(str(path))
        run = parser.parse_bytes(path.read_bytes(), session_id=session_id, agent_id=agent_id,
                                 source_path=str(path))
        with store.session() as s:
            total += record_checkpoints(s, None, run)
            record_checkpoints(s, None, run)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == total
    assert total > 0


def test_a_turns_text_belongs_to_the_project_its_own_calls_touch_first() -> None:
    run = (RunBuilder(cwd="/home/dev/shop").prompt("stream the export")
           .turn(int(0.25 * W), "I'll use a generator in export.py.",
                 [read("/home/dev/shop/export.py"), read("/home/dev/billing/api.py")])
           .turn(int(0.26 * W), "Decided to wrap the client rather than patch it.", [])
           .turn(int(0.36 * W), "I will add retries in /home/dev/billing/client.py instead of here.", []).build())
    decisions = capture_checkpoints(run)[-1].decisions
    assert [d["project"] for d in decisions] == ["/home/dev/shop", "/home/dev/billing", "/home/dev/billing"]


@pytest.mark.usefixtures("timeless_retention")
def test_collector_captures_checkpoints_once_across_appends_and_full_reingest(tmp_path: Path) -> None:
    """Through the real collector: a transcript grows (resumed parse), then is re-read from
    scratch; checkpoints are captured at the crossings and never duplicated."""
    from collect_support import SESSION, assistant, jsonl, prompt, tool_result, tool_use, usage

    from warden.ingest.collector import collect_paths
    from warden.store.models import IngestOffset

    def turn(i: int, fill: float, text: str, path: str) -> list[dict]:
        ts = f"2026-01-01T10:{i:02d}:00.000Z"
        return [assistant(f"msg_{i}", f"req_{i}", usage(5, 50, cr=int(fill * W)),
                          [{"type": "text", "text": text}, tool_use(f"toolu_{i}", "Edit", file_path=path,
                                                                     old_string="a", new_string="b")],
                          ts=ts, cwd="/proj"),
                tool_result(f"toolu_{i}", "edited", ts=ts)]

    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    first = [prompt("Make the exporter stream rows")] + turn(1, 0.10, "Reading.", "/proj/a.py") \
        + turn(2, 0.30, "I'll use a generator for the rows.", "/proj/b.py")
    transcript.write_bytes(jsonl(first))
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert sorted(s.scalars(select(Checkpoint.trigger))) == ["fill:20"]
    more = turn(3, 0.55, "Halfway there.", "/proj/c.py") + turn(4, 0.56, "More edits.", "/proj/d.py")
    transcript.write_bytes(jsonl(first + more))
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        triggers_after_append = sorted(s.scalars(select(Checkpoint.trigger)))
        assert [t for t in triggers_after_append if t.startswith("fill:")] == ["fill:20", "fill:50"]
        assert any(t.startswith("milestone:edits:") for t in triggers_after_append)
        task = s.scalar(select(Checkpoint.active_task).where(Checkpoint.trigger == "fill:50"))
        assert task == "Make the exporter stream rows"  # carried over: the appended lines hold no prompt
        s.execute(IngestOffset.__table__.delete())  # forget offsets: the next collect re-reads everything
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert sorted(s.scalars(select(Checkpoint.trigger))) == triggers_after_append
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == len(triggers_after_append)


@pytest.mark.usefixtures("timeless_retention")
def test_forgotten_checkpoints_stay_forgotten_when_the_transcript_is_rewritten(tmp_path: Path) -> None:
    """Forgetting is a tombstone, not just a delete: a rewritten (shortened) transcript parsed
    again from the start must not bring forgotten checkpoints back, by id or by session."""
    from collect_support import SESSION, assistant, jsonl, prompt, tool_result, tool_use, usage

    from warden.continuity.service import forget
    from warden.ingest.collector import collect_paths

    def turn(i: int, fill: float, path: str) -> list[dict]:
        ts = f"2026-01-01T10:{i:02d}:00.000Z"
        return [assistant(f"msg_{i}", f"req_{i}", usage(5, 50, cr=int(fill * W)),
                          [{"type": "text", "text": "Editing."}, tool_use(f"toolu_{i}", "Edit", file_path=path,
                                                                            old_string="a", new_string="b")],
                          ts=ts, cwd="/proj"), tool_result(f"toolu_{i}", "edited", ts=ts)]

    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    lines = [prompt("Make the exporter stream rows")] + turn(1, 0.25, "/proj/a.py") + turn(2, 0.55, "/proj/b.py")
    transcript.write_bytes(jsonl(lines))
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        fill20 = s.scalar(select(Checkpoint.id).where(Checkpoint.trigger == "fill:20"))
        assert forget(s, checkpoint_ids=[fill20]) == 1
    transcript.write_bytes(jsonl(lines[:-2]))  # rewritten shorter: parsed again from the start
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert "fill:20" not in set(s.scalars(select(Checkpoint.trigger)))
        of_session = select(func.count()).select_from(Checkpoint).where(Checkpoint.session_id == SESSION)
        assert s.scalar(of_session) == 1  # fill:50, captured before the rewrite
        assert forget(s, session_id=SESSION) == 1  # the rows it removed
        assert s.scalar(of_session) == 0
    transcript.write_bytes(jsonl(lines))
    collect_paths(settings, [transcript], store=store)
    transcript.write_bytes(jsonl(lines[:-2]))
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == 0


def _session_lines(start: datetime, fills: list[float]) -> list[dict]:
    """A session crossing ``fills`` (one edit each), a minute apart from ``start``."""
    from datetime import timedelta

    from collect_support import assistant, prompt, tool_result, tool_use, usage

    lines = [prompt("Make the exporter stream rows", ts=start.strftime("%Y-%m-%dT%H:%M:%S.000Z"))]
    for i, fill in enumerate(fills, 1):
        ts = (start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        lines += [assistant(f"msg_{i}", f"req_{i}", usage(5, 50, cr=int(fill * W)),
                            [{"type": "text", "text": "Editing."},
                             tool_use(f"toolu_{i}", "Edit", file_path=f"/proj/f{i}.py", old_string="a", new_string="b")],
                            ts=ts, cwd="/proj"), tool_result(f"toolu_{i}", "edited", ts=ts)]
    return lines


def test_checkpoints_older_than_retention_are_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next prune would delete them: a first collect of old history, or a parser upgrade that
    re-reads every transcript, must not (re)fill the store with what retention removes."""
    from datetime import timedelta

    from collect_support import SESSION, jsonl

    from warden.ingest.collector import collect_paths
    from warden.store.models import utcnow

    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(jsonl(_session_lines(utcnow() - timedelta(days=120), [0.25, 0.55])))
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == 0
    monkeypatch.setenv("WARDEN_CHECKPOINT_MAX_AGE_DAYS", "365")
    transcript.write_bytes(jsonl(_session_lines(utcnow() - timedelta(days=120), [0.25])))  # rewritten: read again
    collect_paths(load_settings(), [transcript], store=store)
    with store.session() as s:
        assert list(s.scalars(select(Checkpoint.trigger))) == ["fill:20"]


def test_checkpoints_pruned_by_count_stay_pruned_when_the_transcript_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention keeps the newest ``checkpoint_keep``: a rewritten transcript read again from the
    start does not bring back the older ones the nightly prune removed."""
    from datetime import timedelta

    from collect_support import SESSION, jsonl

    from warden.continuity.service import prune_with_settings
    from warden.ingest.collector import collect_paths
    from warden.store.models import utcnow

    monkeypatch.setenv("WARDEN_CHECKPOINT_KEEP", "1")
    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    lines = _session_lines(utcnow() - timedelta(days=1), [0.25, 0.55, 0.85])
    transcript.write_bytes(jsonl(lines))
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:  # the collect keeps no more than checkpoint_keep: no surplus for the prune
        assert prune_with_settings(s, settings).by_count == 0
        s.commit()
        [kept] = s.scalars(select(Checkpoint.trigger))
    transcript.write_bytes(jsonl(lines[:-2]))  # rewritten shorter, then whole again: read from the start twice
    collect_paths(settings, [transcript], store=store)
    transcript.write_bytes(jsonl(lines))
    collect_paths(settings, [transcript], store=store)
    with store.session() as s:
        assert list(s.scalars(select(Checkpoint.trigger))) == [kept]


def _split(run, cut_after_turns: list[int]):
    """The run as consecutive resumed parts, as an incremental parser would hand them over."""
    import copy

    parts, start = [], 0
    for end in cut_after_turns + [len(run.turns)]:
        part = copy.deepcopy(run)
        part.start_offset = start + 1  # resumed parts start past 0
        turns = run.turns[start:end]
        keep = {ci for t in turns for ci in t.tool_call_indexes}
        remap = {ci: n for n, ci in enumerate(sorted(keep))}
        part.turns = [copy.deepcopy(t) for t in turns]
        for n, t in enumerate(part.turns):
            t.index, t.tool_call_indexes = n, [remap[ci] for ci in t.tool_call_indexes]
        part.tool_calls = []
        for c in run.tool_calls:
            if c.index in keep:
                c2 = copy.deepcopy(c)
                c2.index, c2.turn = remap[c.index], next(n for n, t in enumerate(turns) if c.index in t.tool_call_indexes)
                part.tool_calls.append(c2)
        lo = turns[0].timestamp if start else None
        hi = turns[-1].timestamp
        part.user_prompts = [p for p in run.user_prompts if (lo is None or p.timestamp > run.turns[start - 1].timestamp)
                             and (end == len(run.turns) or p.timestamp <= hi)]
        parts.append(part)
        start = end
    parts[0].start_offset = 0
    return parts


def test_a_run_captured_in_parts_gives_the_same_checkpoints_as_whole() -> None:
    from warden.continuity.capture import capture

    b = RunBuilder(cwd="/home/dev/proj").prompt("Port the exporter to streaming")
    for i in range(12):
        calls = [edit(f"/home/dev/proj/m{i}.py")]
        if i % 3 == 2:
            calls.append(bash("python -m pytest -q", "10 passed"))
        if i in (4, 5):
            calls.append(read("/home/dev/proj/big.py", reread=i == 5))
            calls.append(bash("make lint", "error: bad", error=True))
        b.turn(int((0.05 + 0.07 * i) * W), f"I'll use approach {i} for module m{i}.", calls)
        if i == 6:
            b.prompt("Now also handle the CSV header")
    whole = capture_checkpoints(b.build())
    carry = None
    pieces = []
    for part in _split(b.build(), [1, 2, 5, 6, 7, 10]):
        got, carry = capture(part, carry=carry)
        pieces += got
    key = lambda c: (c.trigger, c.fill, c.quality, c.active_task, [d["text"] for d in c.decisions],  # noqa: E731
                     c.edited_files, c.read_files, len(c.errors), c.last_state)
    assert [key(c) for c in pieces] == [key(c) for c in whole]
    assert {c.trigger.split(":")[0] for c in whole} == {"fill", "quality", "milestone"}


def _as_an_older_warden_left_it(store) -> list[str]:  # type: ignore[no-untyped-def]
    """The run's capture states without a version, its checkpoints deleted without a tombstone (as
    `checkpoints forget` did before tombstones); the triggers that were forgotten."""
    from warden.continuity.capture import STATE_VERSION
    from warden.store.models import CaptureState

    with store.session() as s:
        triggers = sorted(s.scalars(select(Checkpoint.trigger)))
        for row in s.scalars(select(CaptureState)):
            row.state = {k: v for k, v in row.state.items() if k != STATE_VERSION}
        for row in s.scalars(select(Checkpoint)):
            s.delete(row)
    return triggers


def _read_from_the_start_at_next_collect(store) -> None:  # type: ignore[no-untyped-def]
    from warden.store.models import IngestOffset

    with store.session() as s:
        for offset in s.scalars(select(IngestOffset)):
            offset.parser_version = "0"  # an older parser's: the collector reads the file from the start


@pytest.mark.parametrize("then", ["nothing", "a new band", "a line read on from where it stopped"])
def test_checkpoints_an_older_warden_forgot_without_a_tombstone_stay_forgotten_when_read_again(
        tmp_path: Path, then: str) -> None:
    """Before tombstones, `checkpoints forget` only deleted rows; upgrading warden re-reads every
    transcript from the start (a new parser version). What that older parse captured — and the
    user forgot — stays gone, on this re-read and every later one, also when the transcript grew
    (a resumed parse) before it; what the transcript gained since is still captured."""
    from datetime import timedelta

    from collect_support import SESSION, jsonl, prompt

    from warden.ingest.collector import collect_paths
    from warden.store.models import utcnow

    transcript = tmp_path / "projects" / "-proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    lines = _session_lines(utcnow() - timedelta(days=1), [0.25, 0.55, 0.85])
    transcript.write_bytes(jsonl(lines[:-2]))  # the older warden saw the first two edits
    settings = load_settings()
    store = open_store(settings)
    collect_paths(settings, [transcript], store=store)
    forgotten = _as_an_older_warden_left_it(store)
    assert len(forgotten) >= 2
    if then == "a new band":
        transcript.write_bytes(jsonl(lines))
    elif then == "a line read on from where it stopped":
        transcript.write_bytes(jsonl(lines[:-2] + [prompt("And the CSV header?")]))
        collect_paths(settings, [transcript], store=store)  # a resumed parse of the legacy state first
    for _ in range(2):  # the upgrade's re-read, and a later one (another parser version)
        _read_from_the_start_at_next_collect(store)
        collect_paths(settings, [transcript], store=store)
        with store.session() as s:
            after = sorted(s.scalars(select(Checkpoint.trigger)))
        assert not set(after) & set(forgotten) and bool(after) == (then == "a new band")  # only what is new


def test_redaction_stays_linear_on_large_adversarial_input() -> None:
    import time

    from warden.sanitize import redact_credentials

    assert redact_secrets("mysql -u root -pS3cret db") == "mysql -u root -p[REDACTED] db"
    assert redact_secrets("docker login -u me -p pw") == "docker login -u me -p [REDACTED]"
    assert redact_secrets("mysql x | grep -pfoo") == "mysql x | grep -pfoo"
    for text in ["mysql " * 40_000, "docker login " * 20_000, "mysql " * 40_000 + "| -p x", "a-" * 100_000 + "token=",
                 "password" * 25_000 + "=x", "-" + "password" * 25_000, "a-" * 100_000 + "://",
                 "&sig=" * 50_000, "mot de passe " * 20_000 + ": x", "kennwort-" * 25_000 + "=x", "密码" * 100_000 + ":",
                 "ｓｋ－" * 60_000, "s\u200bk-" * 60_000, "a\u200b-" * 100_000 + "token=", "ｔｏｋｅｎ＝ａｂｃｄ " * 20_000,
                 "\u200b" * 200_000 + _KEY, "mysql \u200b" * 40_000 + "| -p x", "\u0455k-" * 60_000,
                 "\u0430" * 200_000 + _KEY, "gh\u0440_" * 50_000, "\u0440\u0430ss=" * 40_000,
                 "xsk-ant-ab12-" * 40_000, "aghp_" * 60_000 + "x", "aAKIA" * 60_000, "axoxb-1" * 60_000, "ya29." * 60_000,
                 "xpypi-AgE" * 40_000, "github_pat_" * 30_000, "AIza-" * 60_000, "1" * 300_000 + "xoxb-"]:
        began = time.perf_counter()
        redact_secrets(text)
        assert time.perf_counter() - began < 15, text[:20]  # quadratic takes minutes
    for text in ["ｓｋ－" * 60_000, "\u200b" * 200_000 + _KEY, "\u0455k-" * 60_000 + _KEY, "Bearer \u200b" * 40_000]:
        began = time.perf_counter()
        redact_credentials(text, {})
        assert time.perf_counter() - began < 15, text[:20]



def _stored_rows(store) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Every checkpoint, index term and capture state, ids as their rank (two writes of one
    store are compared: its ids go on counting)."""
    from warden.store.models import CaptureState

    with store.session() as s:
        rows = list(s.scalars(select(Checkpoint).order_by(Checkpoint.id)))
        rank = {r.id: n for n, r in enumerate(rows)}
        checkpoints = [(rank[r.id], r.run_key, r.trigger, r.captured_at, r.active_task, r.decisions, r.edited_files)
                       for r in rows]
        terms = sorted((rank[cid], term, when, sid) for cid, term, when, sid in s.execute(
            select(CheckpointTerm.checkpoint_id, CheckpointTerm.term, CheckpointTerm.captured_at,
                   CheckpointTerm.session_id)))
        states = [(r.run_key, r.state) for r in s.scalars(select(CaptureState).order_by(CaptureState.run_key))]
    return checkpoints, terms, states


def test_a_deferred_batch_stores_what_one_write_per_run_stores() -> None:
    """The collector's batches write their checkpoints once, at the end (write_pending): the same
    rows, ids and recall index as writing after every run, with a stored run refreshed and a
    run seen twice in the batch (two copies of one transcript)."""
    from sqlalchemy import delete

    from warden.continuity.capture import load_stored_captures, write_pending
    from warden.store.models import CaptureState

    earlier = _rich_run()
    fresh = RunBuilder(session_id="sess-fresh").prompt("port the exporter").turn(int(0.4 * W), "I'll stream it.",
                                                                               [write("/home/dev/x/a.py")]).build()
    twice = RunBuilder(session_id="sess-twice").prompt("fix the flaky test").turn(int(0.55 * W), "Let's pin it.",
                                                                                 [edit("/home/dev/y/t.py")]).build()
    batch = [fresh, earlier, twice, twice]
    store = _store()
    results = []
    for deferred in (False, True):
        with store.session() as s:
            for table in (CheckpointTerm, Checkpoint, CaptureState):
                s.execute(delete(table))
            record_checkpoints(s, None, earlier)
        with store.session() as s:
            if deferred:
                stored = load_stored_captures(s, [run.run_key for run in batch], defer=True)
                for run in batch:
                    record_checkpoints(s, None, run, stored=stored)
                assert s.scalar(select(func.count()).select_from(Checkpoint)) == len(triggers(earlier))  # not yet
                write_pending(s, stored)
            else:
                for run in batch:
                    record_checkpoints(s, None, run)
        results.append(_stored_rows(store))
    per_run, deferred_rows = results
    assert deferred_rows == per_run
    assert len(per_run[0]) > len(triggers(earlier)) and per_run[1]


_GH_KEY = "ghp_" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"  # a GitHub token's shape: 36 letters and digits


@pytest.mark.parametrize("path", ["/home/dev/proj", "/home/dev/proj/", "/w/my app/café-2", "/", "~/x", "relative/dir",
                                  "/home/u/task-list-2024", "/srv/pass/api", "/home/u/tokenizer.js"])
def test_a_project_directory_without_a_secret_is_stored_as_it_is(path: str) -> None:
    from warden.names import stored_project

    assert stored_project(path) == path


@pytest.mark.parametrize(("path", "stored"), [
    (f"/home/u/proj-{_GH_KEY}", "/home/u/proj-[REDACTED]"),
    (f"/home/u/proj-{_GH_KEY}/src", "/home/u/proj-[REDACTED]/src"),
    ("/srv/token=SuperSecretValue123/app", "/srv/token=[REDACTED]"),
    (f"/home/u/{_KEY}", "/home/u/[REDACTED]"),
])
def test_a_project_directory_s_secret_is_redacted_once_and_for_all(path: str, stored: str) -> None:
    """As a file path is (capture's _kept_path), and again the same: a stored value matches itself."""
    from warden.continuity.capture import _kept_path
    from warden.names import stored_project

    assert stored_project(path) == stored == _kept_path(path) and stored_project(stored) == stored


def test_a_secret_in_the_run_s_cwd_never_reaches_its_checkpoints_nor_its_carried_state() -> None:
    """A run parsed before its cwd was redacted (or built by hand) is captured with its project
    redacted as its files are: project, projects, the items' projects and the capture state."""
    import json

    from warden.continuity.capture import capture, project_of

    cwd = f"/home/u/proj-{_GH_KEY}"
    run = (RunBuilder(cwd=cwd).prompt("tidy the exporter")
           .turn(int(0.3 * W), "I'll split the exporter. Should the writer stream?", [
               write(f"{cwd}/a.py"), write(f"{cwd}/b.py"), write("src/c.py"), write("/home/u/other/d.py"),
               edit(f"{cwd}/a.py", error=True, result="permission denied")])
           .build())
    checkpoints, carry = capture(run)
    assert checkpoints
    for cp in checkpoints:
        assert cp.project == "/home/u/proj-[REDACTED]" and cp.projects == ["/home/u/proj-[REDACTED]", "/home/u/other"]
        assert {d["project"] for d in cp.decisions + cp.open_questions} == {"/home/u/proj-[REDACTED]"}
        assert [project_of(f, cp.projects, cp.project) for f in cp.edited_files] == \
            ["/home/u/proj-[REDACTED]", "/home/u/proj-[REDACTED]", "/home/u/proj-[REDACTED]", "/home/u/other"]
    assert _GH_KEY[4:] not in json.dumps([[c.__dict__ for c in checkpoints], carry.to_json()], default=str)
    # a state an earlier warden carried, the raw cwd in it: the next part of the run is redacted too
    carry.projects, carry.last_project = [cwd, "/home/u/other"], cwd
    later = RunBuilder(cwd=cwd, start=run.ended_at).prompt("and the tests").turn(
        int(0.55 * W), "I'll add the tests.", [write(f"{cwd}/t{i}.py") for i in range(4)]).build()
    more, carry = capture(later, carry=carry)
    assert more and _GH_KEY[4:] not in json.dumps([[c.__dict__ for c in more], carry.to_json()], default=str)


def test_reindex_redacts_a_secret_in_the_run_s_own_project() -> None:
    """A checkpoint stored with its cwd as written (before the project was redacted), its
    transcript gone: ``checkpoints reindex`` redacts the project too, and keeps a plain one."""
    from warden.continuity.service import reindex

    store = _store()
    cwd = f"/home/u/proj-{_GH_KEY}"
    with store.session() as s:
        for sid, project in (("sess-secret", "/home/u/proj-x"), ("sess-plain", "/home/u/plain")):
            record_checkpoints(s, None, RunBuilder(session_id=sid, cwd=project).prompt("ship it")
                               .turn(int(0.3 * W), "I'll ship it.", [edit(f"{project}/a.py")]).build())
        row = s.scalars(select(Checkpoint).where(Checkpoint.session_id == "sess-secret")).one()
        row.project, row.projects = cwd, [cwd, "/home/u/other"]
        row.decisions = [{"text": "I'll ship it.", "project": cwd}]
        row.errors = [{"error": "denied", "fix": "", "tool": "Edit", "path": f"{cwd}/a.py", "project": cwd}]
    with store.session() as s:
        reindex(s)
    with store.session() as s:
        row = s.scalars(select(Checkpoint).where(Checkpoint.session_id == "sess-secret")).one()
        assert row.project == "/home/u/proj-[REDACTED]" and row.projects == ["/home/u/proj-[REDACTED]", "/home/u/other"]
        assert row.decisions[0]["project"] == row.errors[0]["project"] == "/home/u/proj-[REDACTED]"
        assert row.errors[0]["path"] == "/home/u/proj-[REDACTED]/a.py"
        plain = s.scalars(select(Checkpoint).where(Checkpoint.session_id == "sess-plain")).one()
        assert plain.project == "/home/u/plain" and plain.projects == ["/home/u/plain"]
        terms = s.scalars(select(CheckpointTerm.term)).all()
        assert terms and not any("abcdefgh" in term for term in terms)


# ---------------------------------------------------------------- test commands

_RUNNER_EXAMPLES = ["pytest -x", "python -m  pytest", "python -m unittest", "tox -e py", "nox", "npm test",
                    "pnpm run test", "yarn test", "bun test", "npx jest", "vitest run", "mocha", "go test ./...",
                    "cargo test", "make check", "make test", "ctest", "mvn test", "./gradlew test", "rspec",
                    "phpunit", "dotnet test", "bash .ci/run"]
_COMMAND_FRAGMENTS = [*_RUNNER_EXAMPLES, " ", "\n", "-", "_", "/", ".", "a", "x", "st", "ing", "go", "-m", "make",
                      "test", "check", "run", "\u017f", "\u0131", "\u0130", "\u212a", "K", "é", "\u0307",
                      "\U0001f9ea", "TEST", "PyTest", "MAKE", "Go", "cd /tmp && ", "echo 'gotest' ; "]


def test_each_test_runner_is_a_test_command_in_any_case() -> None:
    from warden.continuity.capture import _TEST_COMMAND, _is_test_command

    for command in _RUNNER_EXAMPLES:
        for variant in (command, command.upper(), command.title(), f"cd x && {command} -q"):
            assert _is_test_command(variant) and _TEST_COMMAND.search(variant), variant
    for lookalike in ("pyte\u017ft", "ma\u212ae check", "un\u0131ttest", "phpun\u0130t"):  # as IGNORECASE reads them
        assert _is_test_command(lookalike) and _TEST_COMMAND.search(lookalike)
    for other in ("ls", "git status", "gotest", "mypytest", "make build", "echo toxic", "google test"):
        assert not _is_test_command(other) and not _TEST_COMMAND.search(other)


@given(st.lists(st.sampled_from(_COMMAND_FRAGMENTS), max_size=8) | st.text(max_size=40))
@settings(max_examples=600, deadline=None)
@example(["\u0130", "pytest"])
@example(["\u017f", "\u212a", "make check"])
def test_the_test_command_check_is_the_regex_search(parts: list[str] | str) -> None:
    """_is_test_command looks only where an opening is: it finds what the regex's search finds."""
    from warden.continuity.capture import _TEST_COMMAND, _is_test_command

    command = parts if isinstance(parts, str) else "".join(parts)
    assert _is_test_command(command) == bool(_TEST_COMMAND.search(command))


def test_the_ignorecase_fold_is_complete_and_keeps_positions() -> None:
    """Every character besides the ASCII letters that IGNORECASE matches to one is folded to it;
    lower() keeps every other character one character (so an opening's position is the text's)."""
    from warden.continuity.capture import _IGNORECASE_ASCII

    letters = {letter: re.compile(f"(?i){letter}") for letter in "abcdefghijklmnopqrstuvwxyz"}
    any_letter = re.compile("(?i)[a-z]")
    matched = {chr(cp): next(letter for letter, one in letters.items() if one.fullmatch(chr(cp)))
               for cp in range(0x80, 0x110000) if any_letter.fullmatch(chr(cp))}
    assert {char: char.translate(_IGNORECASE_ASCII).lower() for char in matched} == matched
    assert set(map(chr, _IGNORECASE_ASCII)) <= set(matched)
    assert [cp for cp in range(0x110000) if len(chr(cp).lower()) != 1] == [0x130]
