"""Secrets named in words (prose, notes, Markdown tables) and provider tokens with no label are
redacted by :func:`warden.sanitize.redact_secrets`; ordinary prose about keys, tokens and
passwords is not; the new patterns keep the module's gates, quick screen and linear time."""

from __future__ import annotations

import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from warden.sanitize import REDACTED, holds_key, redact_credentials, redact_secrets

HEX = "8f14e45fceea167a5a36dedd4bea2543"
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("text, expected", [
    (f"My API key: {HEX}", "My API key: [REDACTED]"),
    (f"api key: {HEX}", "api key: [REDACTED]"),
    (f"API_KEY: {HEX}", "API_KEY: [REDACTED]"),
    (f"Secret key: {HEX}", "Secret key: [REDACTED]"),
    (f"my api key is {HEX}", "my api key is [REDACTED]"),
    (f"the token is {HEX}.", "the token is [REDACTED]."),
    (f"auth token {HEX}", "auth token [REDACTED]"),
    (f"bearer: {HEX}", "bearer: [REDACTED]"),
    (f"key={HEX}", "key=[REDACTED]"),
    (f"authentication failed for API key: {HEX}", "authentication failed for API key: [REDACTED]"),
    (f"**API key:** `{HEX}`", "**API key:** `[REDACTED]`"),
    (f"**Token**: {HEX}", "**Token**: [REDACTED]"),
    (f"access token => {HEX}", "access token => [REDACTED]"),
    (f"| token | {HEX} |", "| token | [REDACTED] |"),
    ("password 'hunter2'", "password '[REDACTED]'"),
    ('password "hunter two"', 'password "[REDACTED]"'),
    ("pw=hunter2", "pw=[REDACTED]"),
    ("pw: hunter2", "pw: [REDACTED]"),
    ("DB_PW=hunter2", "DB_PW=[REDACTED]"),
    ("password -> hunter2", "password -> [REDACTED]"),
    ("| password | hunter2 |", "| password | [REDACTED] |"),
    ("| user | alice |\n| Password | s3cret! |", "| user | alice |\n| Password | [REDACTED] |"),
    ('password = """hunter2"""', 'password = """[REDACTED]"""'),
    ("password = '''two words'''", "password = '''[REDACTED]'''"),
    ("passcode: 123456", "passcode: [REDACTED]"),
    ("my passphrase is correct horse battery staple", "my passphrase is [REDACTED]"),
    ("My passphrase is correct horse battery staple. Keep it safe.", "My passphrase is [REDACTED]. Keep it safe."),
    ("passphrase: correct horse battery staple, then the next step",
     "passphrase: [REDACTED], then the next step"),
    ("the pass phrase -> correct horse battery staple\nnext line", "the pass phrase -> [REDACTED]\nnext line"),
    (f"{AWS_ID} secret {AWS_SECRET}", "[REDACTED] secret [REDACTED]"),
])
def test_a_secret_named_in_words_is_redacted(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


PROVIDER_TOKENS = [
    "gsk_" + "a1B2c3D4e5F6" * 4 + "g7H8",  # Groq: gsk_ and 52
    "r8_" + "a1B2c3D4e5F6" * 3 + "g",  # Replicate: r8_ and 37
    "xai-" + "a1B2c3D4e5F6g7H8" * 5,  # xAI: xai- and 80
    "dop_v1_" + "0a1b2c3d4e5f6a7b" * 4,  # DigitalOcean: 64 hex
    "doo_v1_" + "0a1b2c3d4e5f6a7b" * 4,
    "sq0atp-" + "a1B2c3D4e5F6g7H8i9J0kL",  # Square access token: 22
    "sq0csp-" + "a1B2c3D4e5F6g7H8i9J0kL" * 2,  # Square application secret
    "xapp-1-A0123456789-1234567890123-" + "0a1b2c3d4e5f6a7b" * 4,  # Slack app-level token
    "1//0" + "gA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU-vW_xY" * 2,  # Google OAuth refresh token
]


@pytest.mark.parametrize("token", PROVIDER_TOKENS)
def test_a_provider_token_with_no_label_is_redacted(token: str) -> None:
    """By its form, in any text: an error message's too (redact_credentials), and holds_key sees it."""
    for text in (f"export FOO={token}", f"use {token} now", f"({token})"):
        for out in (redact_secrets(text), redact_credentials(text, {})):
            assert token[8:20] not in out and REDACTED in out, out
    assert holds_key(f"x {token} y")


@pytest.mark.parametrize("text", [
    "xai-grok-integration-notes-for-the-team", "r8_register_bank_selector_value", "gsk_list_of_things",
    "maxai-" + "a1B2" * 12, "dop_v1_not_hex_here_at_all_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "sq0atp-short", "xapp-builder-configuration-files", "see /a/1//0" + "a" * 40, "x1//0" + "a" * 40,
])
def test_words_that_hold_a_new_provider_prefix_are_no_key(text: str) -> None:
    assert redact_secrets(text) == text and not holds_key(text)


@pytest.mark.parametrize("text", [
    # the reviewer's list
    "the key is to read less", "password reset flow", "token budget of 2000", "primary key: id",
    "sort key=lambda x: x", "api key rotation", "token count: 1234",
    # more prose and code about keys, tokens and passwords
    "Fix the password reset email flow", "the token is valid until noon", "my api key is invalid",
    "the secret is out", "the API key is stored in the vault", "auth token expired, log in again",
    "Bearer token authentication is configured", "the access token expires in 3600 seconds",
    "session token 1234567890 minted", "token 12345678901234567890 was counted", "for key, value in d.items():",
    "d[key] = value", "key: str = 'name'", "key -> value mapping", "cache key 'v2'", "| key | value |",
    "| User | Password | Role |", "| password | required |", "echo $PASSWORD | base64 -d",
    "model key claude-3-5-sonnet-20241022", "key build_cache_2024_v2.json", "key gpt-4o-mini-2024-07-18",
    "the key /home/dev/proj2/src/keys/id_1234.pem", "token host:8080 listening", "password policy: 8 chars",
    "the password must be 12 characters long", "Enter passcode:", "keyboard: us", "monkey=banana",
    "tokenizer.json loaded with 32000 tokens", "max_tokens 4096", "the pin is 1234", "passed: 12, failed: 0",
    "Passwort ist zu kurz", "my passphrase is", "mysql -u root -p appdb",
])
def test_prose_about_keys_tokens_and_passwords_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_mysql_dash_p_with_a_space_is_a_database_and_glued_is_a_password() -> None:
    """Deliberately: "mysql -p appdb" prompts for the password, appdb is the database (psql's -p is
    the port); "mysql -pSECRET" and sshpass -p SECRET are the passwords."""
    assert redact_secrets("mysql -u root -p appdb") == "mysql -u root -p appdb"
    assert redact_secrets("mysql -u root -phunter2 appdb") == "mysql -u root -p[REDACTED] appdb"
    assert redact_secrets("sshpass -p hunter2 ssh host") == "sshpass -p [REDACTED] ssh host"
    assert redact_secrets("psql -h db -p 5432 -U app") == "psql -h db -p 5432 -U app"


@pytest.mark.parametrize("text, leak", [
    (f"API k\u200bey: {HEX}", HEX[:12]),  # a zero-width space inside the label
    (f"ＡＰＩ ｋｅｙ： {HEX}", HEX[:12]),  # full-width label and colon
    (f"the t\u043eken is {HEX}", HEX[:12]),  # a Cyrillic o
    (f"the token \u0130s {HEX}", HEX[:12]),  # a dotted capital I ("(?i)" reads it as "i")
    (f"the \u212aey is {HEX}", HEX[:12]),  # a Kelvin sign for k
    ("pa\u017f\u017fword -> hunter2", "hunter2"),  # long s
    ("my pa\u017f\u017fphrase is correct horse battery staple", "horse"),
])
def test_a_disguised_label_still_names_its_secret(text: str, leak: str) -> None:
    import unicodedata

    from warden.sanitize import strip_controls

    out = redact_secrets(text)
    assert leak not in unicodedata.normalize("NFKC", strip_controls(out)) and REDACTED in out


def test_a_redacted_prefix_takes_a_labelled_secret_before_the_cut() -> None:
    from warden.sanitize import redacted_prefix

    text = "x" * 180 + f" my api key is {HEX} and more"
    assert HEX[:4] not in redacted_prefix(text, 200) and "8f14" not in redacted_prefix(text, 203)


def test_a_labelled_secret_never_reaches_a_checkpoint_or_its_fence() -> None:
    import json

    from continuity_fixtures import RunBuilder
    from warden.continuity.capture import capture_checkpoints
    from warden.continuity.fence import fence_checkpoint

    run = (RunBuilder().prompt(f"deploy it; my api key is {HEX} and the passphrase is correct horse battery staple")
           .turn(60_000, f"I'll use the token {HEX[::-1]} from the note: | password | hunter2! |").build())
    cps = capture_checkpoints(run)
    shown = json.dumps([cp.__dict__ for cp in cps], default=str) + "".join(map(fence_checkpoint, cps))
    assert cps and REDACTED in shown
    for leak in (HEX, HEX[::-1], "horse battery", "hunter2!"):
        assert leak not in shown, leak


# ---------------------------------------------------------------- the module's invariants

# Pieces of text the new patterns read, and what can sit beside them: every label and separator,
# values of each kind, the letters "(?i)" matches that lowercasing keeps apart, redactions
_FRAGMENTS = [
    "API key", "api_key", "Secret key", "access-token", "auth token", "client secret", "bearer", "Bearer ", "key",
    "KEY", "token", "secret", "password", "passwd", "pw", "PW", "passcode", "passphrase", "pass phrase", "pwd",
    ": ", "=", "==", " -> ", " => ", " is ", " is: ", "| ", " |", "|", " ", "\t", "\n", "'", '"', '"""', "'''", "`",
    "**", "_", "-", ".", ",", "!", ":", "/", "+",
    HEX, HEX[:16], AWS_ID, AWS_SECRET, "hunter2", "s3cret!", "correct horse battery staple", "a1", "1", "a", "id",
    "lambda", "2000", "claude-3-5-sonnet-20241022", *PROVIDER_TOKENS[:3],
    "\u017f", "\u0131", "\u0130", "\u212a", "\u0307", "\u200b", "ｋｅｙ", REDACTED, "redacted",
]


def _ungated_redaction(text: str, patterns: list) -> str:
    from warden.sanitize import _redact

    return _redact(text, [(pattern, repl, ()) for pattern, repl, _gate in patterns])


def _matches(pattern: object, text: str) -> bool:
    from warden.sanitize import _CommandFlag

    if isinstance(pattern, _CommandFlag):
        return pattern.sub(REDACTED, text) != text
    return pattern.search(text) is not None  # type: ignore[attr-defined]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=10))
@example(["Secret key", "lambda", "claude-3-5-sonnet-20241022", "\u017f"])  # a key that ends at a long s
# a combining dot that follows no "i" ends a word, as "(?i)" reads it: the labels after it start one
@example(["passcode", "passphrase", "\u0307", "client secret", " -> ", "lambda"])
@example(["'", "1", "\u0307", "passphrase", " -> ", "**", "password", HEX, " |", "\u0130"])
@settings(max_examples=500, deadline=None)
def test_the_screen_and_the_gates_never_skip_a_labelled_secret(parts: list[str]) -> None:
    """The quick screen passes whatever a labelled pattern would redact (as written and as the
    text reads), each pattern's gate holds where it matches (after the patterns before it), and so
    the gated redaction is the ungated one."""
    from warden.sanitize import (_LABELLED_VALUE, _PASSPHRASE_VALUE, _SECRET_PATTERNS, _disguise_folded, _gate_open,
                                 _gate_text, _may_hold_secret)

    text = "".join(parts)
    for form in filter(None, (text, _disguise_folded(text))):
        current = form
        gated = _gate_text(form.lower())
        for pattern, repl, gate in _SECRET_PATTERNS:
            if _matches(pattern, current):
                assert _gate_open(gate, gated), (pattern, form)
                if pattern in (_LABELLED_VALUE, _PASSPHRASE_VALUE):
                    assert _may_hold_secret(form.lower()), form
            current = pattern.sub(repl, current)
    assert redact_secrets(text) == _ungated_redaction(text, _SECRET_PATTERNS)


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=10))
@settings(max_examples=500, deadline=None)
def test_the_screen_tries_the_labelled_patterns_wherever_a_search_finds_them(parts: list[str]) -> None:
    """_holds_labelled_value tries the patterns only where a label's first word or a cell bar
    starts: the answer a search of the whole text gives."""
    from warden.sanitize import _PASSPHRASE_SCREEN, _LABELLED_SCREEN, _gate_text, _holds_labelled_value

    lowered = "".join(parts).lower()
    read = _gate_text(lowered)  # "ſ", "ı" and "İ"'s dot as "(?i)" reads them
    assert _holds_labelled_value(lowered) == bool(_LABELLED_SCREEN.search(read) or _PASSPHRASE_SCREEN.search(read))


def test_every_label_is_found_by_the_screen() -> None:
    from warden.sanitize import _holds_labelled_value, _may_hold_secret

    for label in ("password", "passwd", "passcode", "pw", "api key", "api-token", "api_secret", "secret key",
                  "access key", "access token", "auth key", "auth token", "client secret", "bearer token",
                  "refresh token", "session token", "key", "token", "secret", "bearer", "passphrase"):
        for text in (f"{label}: {HEX}", f"the {label.upper()} is {HEX}", f"| {label.title()} | {HEX} |"):
            assert _holds_labelled_value(text.lower()) and _may_hold_secret(text.lower()), text
            assert HEX not in redact_secrets(text), text


_ADVERSARIAL = ["key ", "key=", "key is ", "password 'a", "| password | ", "passphrase: a ", "passphrase: ", "token a1",
                "key=a-", "token is abc1-", "a-key ", "key |", "token is: 'key = \"pw -> ", "password is ",
                "|password|", 'password = """a', "api key: a", "pw=", "key aaaaaaaaaaaaaaaaaaaa1",
                "key=a1" + "b" * 30 + ".", "Api Key Is ", "auth token ", "|"]


@pytest.mark.parametrize("unit", _ADVERSARIAL)
def test_the_labelled_patterns_are_linear(unit: str) -> None:
    """A megabyte of labels, separators and half-values: a pattern that read a value again from
    every label in it (quadratic) would take hours; each pass takes a fraction of a second."""
    from warden.sanitize import _LABELLED_VALUE, _PASSPHRASE_VALUE, _holds_labelled_value

    text = unit * (1_000_000 // len(unit))
    for run in (lambda: _LABELLED_VALUE.sub(REDACTED, text), lambda: _PASSPHRASE_VALUE.sub(REDACTED, text),
                lambda: _holds_labelled_value(text.lower())):
        began = time.perf_counter()
        run()
        assert time.perf_counter() - began < 2, unit


@pytest.mark.parametrize("text", ["key: " + "a" * 1_000_000, "token " + "a1" * 500_000, "password '" + "a" * 1_000_000,
                                  "passphrase: " + "a " * 500_000, "key=a" + "b1" * 500_000 + ".c",
                                  ("| token | " + "a1b2c3d4e5f6g7h8i9j0 ") * 40_000])
def test_redaction_of_a_long_labelled_value_is_linear(text: str) -> None:
    began = time.perf_counter()
    redact_secrets(text)
    assert time.perf_counter() - began < 15, text[:20]  # as test_continuity_capture's: quadratic takes hours
