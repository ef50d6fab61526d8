"""MEMORY.md compile: versions, drift, atomic symlink-refusing writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from warden.config import load_settings
from warden.errors import WardenError
from warden.select.compile import check_drift, compile_memory, memory_path
from warden.select.memory import GENERATED_HEADER
from warden.store.db import open_store
from warden.store.models import Rule, RulesetVersion


@pytest.fixture
def env(warden_home: Path):
    settings = load_settings()
    return settings, open_store(settings)


def _add(store, body: str, state: str = "active", saving: float | None = 100.0) -> int:
    with store.session() as s:
        rule = Rule(agent="backend", body=body, state=state, measured_saving=saving)
        s.add(rule)
        s.flush()
        return rule.id


def _compiled_once(env) -> tuple:
    """(settings, store, MEMORY.md's path, its bytes) after a first compile of one active rule."""
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    with store.session() as s:
        compile_memory(s, settings, "backend")
    path = memory_path(settings, "backend")
    return settings, store, path, path.read_bytes()


def test_compile_versions_only_when_rules_change(env) -> None:
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    _add(store, "A candidate never reaches memory.", state="candidate")
    with store.session() as s:
        first = compile_memory(s, settings, "backend")
    text = memory_path(settings, "backend").read_text()
    assert first.version == 1 and first.changed and text.startswith(GENERATED_HEADER)
    assert "Grep for the symbol" in text and "candidate never" not in text
    with store.session() as s:
        again = compile_memory(s, settings, "backend")
    assert again.version == 1 and not again.changed
    rid = _add(store, "Run only the tests relevant to your change instead of the full test suite.", saving=300)
    with store.session() as s:
        third = compile_memory(s, settings, "backend", extra_sections=["## Recovered checkpoints\n- one"])
    assert third.version == 2 and third.added == [rid]
    lines = memory_path(settings, "backend").read_text().splitlines()
    assert lines.index("- Run only the tests relevant to your change instead of the full test suite.") < \
        lines.index("- Grep for the symbol or text you need before opening any file.")
    # A checkpoint-only change rewrites the file but keeps the ruleset version.
    with store.session() as s:
        fourth = compile_memory(s, settings, "backend", extra_sections=["## Recovered checkpoints\n- two"])
        assert fourth.version == 2 and fourth.changed
        assert s.query(RulesetVersion).count() == 2


def test_drift_is_detected_and_recompiled(env) -> None:
    settings, store, path, _ = _compiled_once(env)
    path.write_text(path.read_text() + "- hand-written rule\n")
    with store.session() as s:
        assert "differs" in (check_drift(s, settings, "backend") or "")
        result = compile_memory(s, settings, "backend")
    assert result.drifted and result.changed and "hand-written" not in path.read_text()
    assert "edited by hand" in result.drift
    with store.session() as s:
        assert check_drift(s, settings, "backend") is None


def test_an_earlier_compile_left_in_place_is_called_stale_not_a_hand_edit(env, capsys) -> None:
    """A compile stopped between its commit and its rename (SIGINT, SIGKILL) leaves the previous
    version's file: the next compile must not tell the user their hand edit is gone."""
    from warden.cli.common import warn_if_drifted

    settings, store, path, v1 = _compiled_once(env)
    _add(store, "Never re-read a file you have already read unless it changed since.")
    with store.session() as s:
        assert compile_memory(s, settings, "backend").version == 2
    path.write_bytes(v1)  # what the interrupted v2 compile left on disk
    with store.session() as s:
        said = check_drift(s, settings, "backend") or ""
        assert "earlier compile v1" in said and "by hand" not in said
        result = compile_memory(s, settings, "backend")
    assert result.drifted and result.version == 2 and "earlier compile v1" in result.drift
    warn_if_drifted(result)
    warning = capsys.readouterr().err
    assert "earlier compile v1" in warning and "edit is gone" not in warning


def test_symlinks_are_refused(env, tmp_path: Path) -> None:
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = memory_path(settings, "backend")
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    with store.session() as s, pytest.raises(WardenError, match="symlink"):
        compile_memory(s, settings, "backend")
    assert victim.read_text() == "keep me"
    with store.session() as s:
        assert s.query(RulesetVersion).count() == 0  # the failed compile left no version behind


def test_symlinked_agent_directory_is_refused(env, tmp_path: Path) -> None:
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings.memory_dir.mkdir(parents=True, exist_ok=True)
    (settings.memory_dir / "backend").symlink_to(elsewhere, target_is_directory=True)
    with store.session() as s, pytest.raises(WardenError, match="symlink"):
        compile_memory(s, settings, "backend")
    assert list(elsewhere.iterdir()) == []


def test_bad_agent_name_is_refused(env) -> None:
    settings, store = env
    with store.session() as s, pytest.raises(WardenError, match="invalid agent name"):
        compile_memory(s, settings, "../etc")


def test_rules_changed_by_hand_reach_memory_at_once(env, capsys) -> None:
    from warden.cli.app import main

    settings, _store = env
    body = "Never commit secrets or credentials to the repository."
    assert main(["rules", "add", "--agent", "backend", "--protected", body]) == 0
    path = memory_path(settings, "backend")
    assert f"- {body}" in path.read_text()
    assert "MEMORY.md v1 created" in capsys.readouterr().out  # the first compile wrote the file
    with _store.session() as s:
        rule_id = s.query(Rule).filter_by(body=body).one().id
    assert main(["rules", "forget", str(rule_id)]) == 0
    assert body not in path.read_text()
    assert "MEMORY.md v2 written" in capsys.readouterr().out


def test_forgetting_a_checkpoint_recompiles_memory(env) -> None:
    from warden.cli.app import main
    from warden.select.selector import recompile_memory
    from warden.store.models import Checkpoint, utcnow

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    with store.session() as s:
        cp = Checkpoint(run_key="s1:main", session_id="s1", agent="backend", project="/p", trigger="fill:20",
                        active_task="Fix the pagination off-by-one in the invoice listing",
                        decisions=["Use keyset pagination"], captured_at=utcnow())
        s.add(cp)
        s.flush()
        cp_id = cp.id
        recompile_memory(s, settings, "backend")
    path = memory_path(settings, "backend")
    assert f"cp-{cp_id}.md" in path.read_text()
    assert main(["checkpoints", "forget", str(cp_id)]) == 0
    assert f"cp-{cp_id}.md" not in path.read_text()


def test_rules_beyond_the_cap_are_not_in_the_ruleset_version(env) -> None:
    settings, store = env
    ids = [_add(store, f"Rule number {i} keeps the agent terse " + "x" * 150, saving=float(1000 - i)) for i in range(200)]
    with store.session() as s:
        result = compile_memory(s, settings, "backend")
    text = memory_path(settings, "backend").read_text()
    assert len(text.encode()) <= 25 * 1024
    assert 0 < len(result.rule_ids) < len(ids)
    assert all(f"Rule number {ids.index(i)} " in text for i in result.rule_ids)
    assert ids[-1] not in result.rule_ids  # the least saving rule did not fit


def test_the_ruleset_version_names_exactly_the_rules_in_the_file_whatever_its_header_length(env) -> None:
    """The fit is checked with the header the file gets ('v100' is two bytes longer than 'v0'): a
    rule that fits only under the shorter header is left out of both the file and the version."""
    from warden.select.compile import memory_rules
    from warden.select.memory import MAX_BYTES, render_memory, rule_line

    settings, store = env
    with store.session() as s:
        s.add(RulesetVersion(agent="backend", version=99, rule_ids=[], rules_sha256="", memory_sha256="",
                             memory_path=""))
    for i in range(200):  # fill to just past the cap
        _add(store, f"Rule number {i:03d} keeps the agent terse " + "x" * 150, saving=float(1000 - i))
    with store.session() as s:
        rules = memory_rules(s, "backend")
        fitted = render_memory("backend", rules, 0).splitlines()
        last = [r for r in rules if rule_line(r) in fitted][-1]
        slack = MAX_BYTES - len(render_memory("backend", rules, 0).encode())
        row = s.get(Rule, last.id)
        row.body = row.body + "y" * slack  # the last rule now fits under 'v0' with 0 bytes to spare
    with store.session() as s:
        result = compile_memory(s, settings, "backend")
    text = memory_path(settings, "backend").read_text()
    assert result.version == 100 and len(text.encode()) <= MAX_BYTES
    assert last.id not in result.rule_ids and last.id in result.left_out
    in_file = {r.id for r in memory_rules_in(text, store)}
    assert set(result.rule_ids) == in_file


def memory_rules_in(text: str, store) -> list:
    from warden.select.compile import memory_rules
    from warden.select.memory import rule_line

    with store.session() as s:
        return [r for r in memory_rules(s, "backend") if rule_line(r) in text.splitlines()]


def test_atomic_writes_refuse_a_directory_or_fifo_in_the_files_place(tmp_path: Path) -> None:
    import os

    from warden.errors import WardenError
    from warden.files import write_atomic

    out = tmp_path / "out"
    (out / "out.json").mkdir(parents=True)
    os.mkfifo(out / "pipe.json")
    for name, why in (("out.json", "it is a directory"), ("pipe.json", "not a regular file")):
        with pytest.raises(WardenError, match=why):
            write_atomic(out / name, b"{}", out)
    assert sorted(p.name for p in out.iterdir()) == ["out.json", "pipe.json"]  # no temp file left
    write_atomic(out / "ok.json", b"{}", out)
    assert (out / "ok.json").read_bytes() == b"{}"


def test_memory_ledger_and_report_writes_share_one_atomic_writer() -> None:
    """write_atomic lives in the neutral warden.files, not borrowed from the MEMORY.md compiler."""
    import warden.cli.report
    import warden.files
    import warden.ledger.service
    import warden.select.compile

    assert "write_atomic" not in vars(warden.select.compile)
    assert warden.ledger.service.write_atomic is warden.files.write_atomic
    assert "warden.files import write_atomic" in Path(warden.cli.report.__file__).read_text()


def test_a_memory_directory_that_cannot_be_written_is_one_line_and_no_version(env, tmp_path: Path) -> None:
    from dataclasses import replace

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the memory directory should be")
    with pytest.raises(WardenError, match=r"^cannot read .*not-a-directory/backend/MEMORY.md: Not a directory$"):
        with store.session() as s:
            compile_memory(s, replace(settings, memory_dir=blocker), "backend")
    with store.session() as s:
        assert s.query(RulesetVersion).count() == 0  # the transaction rolled back whole


def test_memory_md_gets_the_mode_of_any_new_file(env) -> None:
    import os
    import stat as st

    settings, store = env
    with store.session() as s:
        compile_memory(s, settings, "backend")
    mode = st.S_IMODE(memory_path(settings, "backend").stat().st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_detail_files_holding_transcript_text_are_private_and_modes_a_user_set_are_kept(env) -> None:
    """cp-N.md holds prompts and decisions (redacted, but the user's): 0600 in a 0700 folder, as
    the database holding the same text. A mode the user gave a file survives the next compile."""
    import os
    import stat as st

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    with store.session() as s:
        compile_memory(s, settings, "backend", extra_sections=["# Recovered"],
                       extra_files={"checkpoints/cp-1.md": "a prompt"})
    path = memory_path(settings, "backend")
    detail = path.parent / "checkpoints" / "cp-1.md"
    assert st.S_IMODE(detail.stat().st_mode) == 0o600 and st.S_IMODE(detail.parent.stat().st_mode) == 0o700
    os.chmod(path, 0o600)
    _add(store, "Read each file at most once per task and keep notes.")
    with store.session() as s:
        compile_memory(s, settings, "backend", extra_sections=["# Recovered"],
                       extra_files={"checkpoints/cp-1.md": "a prompt, updated"})
    assert st.S_IMODE(path.stat().st_mode) == 0o600 and "Read each file" in path.read_text()
    os.chmod(detail.parent, 0o755)  # as an older warden left them
    os.chmod(detail, 0o644)
    with store.session() as s:
        compile_memory(s, settings, "backend", extra_sections=["# Recovered"],
                       extra_files={"checkpoints/cp-1.md": "a prompt, updated again"})
    assert st.S_IMODE(detail.stat().st_mode) == 0o600 and st.S_IMODE(detail.parent.stat().st_mode) == 0o700


def test_memory_md_changes_only_when_its_transaction_commits(env) -> None:
    """The file follows the database: a compile whose transaction rolls back (the decision was
    not recorded) leaves MEMORY.md as it was and no temp file behind; one that commits installs it."""
    settings, store, path, before = _compiled_once(env)
    _add(store, "Read each file at most once per task and keep notes.")

    class Interrupted(Exception):
        pass

    with pytest.raises(Interrupted), store.session() as s:
        compile_memory(s, settings, "backend")
        assert path.read_bytes() == before  # staged, not yet in place
        raise Interrupted
    assert path.read_bytes() == before and not list(path.parent.glob(".*.tmp"))
    with store.session() as s:
        result = compile_memory(s, settings, "backend")
        assert path.read_bytes() == before
    assert path.read_bytes() != before and "Read each file" in path.read_text() and result.version == 2


def test_a_temp_file_of_a_killed_compile_is_swept_by_the_next(env) -> None:
    import subprocess
    import sys

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    with store.session() as s:
        compile_memory(s, settings, "backend")
    folder = memory_path(settings, "backend").parent
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    from warden.names import pid_namespace, process_tag

    orphan = folder / f".MEMORY.md-pid{dead}-ns{pid_namespace()}-abc123.tmp"
    mine = folder / f".MEMORY.md-{process_tag()}-def456.tmp"  # a live process's: kept
    untagged = folder / ".MEMORY.md.xyz.tmp"  # no owner to ask: kept
    for f in (orphan, mine, untagged):
        f.write_text("partial")
    _add(store, "Read each file at most once per task and keep notes.")
    with store.session() as s:
        compile_memory(s, settings, "backend")
    assert not orphan.exists() and mine.exists() and untagged.exists()


def test_a_rename_that_fails_after_the_commit_is_one_clear_error(env, monkeypatch) -> None:
    """The decision is committed; the file could not be renamed into place: the caller gets the
    one-line WardenError (not a rollback error on a committed session), and the next compile,
    seeing the drift, rewrites the file."""
    import os

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    real_replace = os.replace

    def failing(src, dst):  # type: ignore[no-untyped-def]
        if str(dst).endswith("MEMORY.md"):
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(WardenError, match="the decision is recorded"), store.session() as s:
        compile_memory(s, settings, "backend")
    with store.session() as s:
        assert s.query(RulesetVersion).count() == 1  # committed
    path = memory_path(settings, "backend")
    assert not path.exists() and not list(path.parent.glob(".*.tmp"))
    monkeypatch.setattr(os, "replace", real_replace)
    with store.session() as s:
        compile_memory(s, settings, "backend")
    assert "Grep for the symbol" in path.read_text()


def test_a_savepoint_neither_installs_nor_discards_the_staged_file(env) -> None:
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    path = memory_path(settings, "backend")
    with store.session() as s:
        compile_memory(s, settings, "backend")
        s.begin_nested().commit()
        s.begin_nested().rollback()
        assert not path.exists() and list(path.parent.glob(".*.tmp"))
    assert "Grep for the symbol" in path.read_text() and not list(path.parent.glob(".*.tmp"))


def test_a_commit_that_fails_at_commit_is_rolled_back_and_its_file_discarded(env, monkeypatch) -> None:
    """COMMIT itself fails (a full disk, a busy database, a signal) with the transaction still
    open: it is rolled back — the next session sees none of it and gets a clean connection — and
    the staged MEMORY.md is discarded, never installed."""
    import sqlite3

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    path = memory_path(settings, "backend")
    dialect = store.engine.dialect
    real_commit = dialect.do_commit

    def full_disk(dbapi_connection):  # type: ignore[no-untyped-def]
        monkeypatch.setattr(dialect, "do_commit", real_commit)  # once
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(dialect, "do_commit", full_disk)
    with pytest.raises(Exception, match="disk is full"), store.session() as s:
        compile_memory(s, settings, "backend")
        s.get(Rule, 1).state = "evicted"
    with store.session() as s:
        assert s.query(RulesetVersion).count() == 0 and s.get(Rule, 1).state == "active"
    assert not path.exists() and not list(path.parent.glob(".*.tmp"))


def test_a_block_that_commits_as_it_goes_still_rolls_back_its_last_part(env) -> None:
    """A session committed once and used on: a failure after that rolls the new work back and
    discards what it staged (the first commit's work stays)."""
    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    path = memory_path(settings, "backend")

    class Failed(Exception):
        pass

    with pytest.raises(Failed), store.session() as s:
        compile_memory(s, settings, "backend")
        s.commit()  # installed
        s.get(Rule, 1).state = "evicted"
        compile_memory(s, settings, "backend")
        raise Failed
    with store.session() as s:
        assert s.get(Rule, 1).state == "active" and s.query(RulesetVersion).count() == 1
    assert "Grep for the symbol" in path.read_text() and not list(path.parent.glob(".*.tmp"))


def _kept_on(store, rule_id: int, backend: str, verdict: str = "keep") -> None:
    from warden.select.receipts import write_receipt

    with store.session() as s:
        write_receipt(s, s.get(Rule, rule_id), kind="admission", verdict=verdict, reason="test", state_after="active",
                      estimate=100.0, ci_low=50.0, ci_high=150.0, margin=34.0, k=2.0, n_per_side={}, paired_diffs={},
                      pass_counts={}, tokens_spent=1.0, model="m", backend=backend, suite_hash="a" * 64,
                      fixture_hash="b" * 64)


def _compiled_text(settings, store) -> str:
    with store.session() as s:
        compile_memory(s, settings, "backend")
    return memory_path(settings, "backend").read_text()


def test_memory_says_which_backend_measured_its_rules(env) -> None:
    """The claim "measured to save more tokens than it costs" names what measured it: a real agent
    reading MEMORY.md must not take the simulated agent's result for a real model's."""
    settings, store = env
    grep = _add(store, "Grep for the symbol or text you need before opening any file.")
    _kept_on(store, grep, "sim")
    text = _compiled_text(settings, store)
    assert "Measured on warden's simulated agent (sim backend), not a real model." in text
    with store.session() as s:
        version = compile_memory(s, settings, "backend").version
    assert _compiled_text(settings, store) == text  # recompiling an unchanged ruleset: the same bytes
    tests = _add(store, "Run only the tests relevant to your change instead of the full test suite.")
    _kept_on(store, tests, "anthropic")
    _kept_on(store, tests, "sim", verdict="inconclusive")  # not what kept it in memory
    mixed = _compiled_text(settings, store)
    assert ("Measured on the anthropic and sim backends (sim: warden's simulated agent, not a real model)."
            in mixed)
    with store.session() as s:
        s.get(Rule, grep).state = "evicted"
    assert "Measured on the anthropic backend." in _compiled_text(settings, store)
    with store.session() as s:
        s.get(Rule, tests).state = "protected"  # a person's word, not a measurement
        assert compile_memory(s, settings, "backend").version > version
    only_protected = memory_path(settings, "backend").read_text()
    assert "Measured on" not in only_protected and "except rules a person added as protected" in only_protected
    with store.session() as s:
        assert check_drift(s, settings, "backend") is None


def test_the_backend_note_does_not_bump_the_ruleset_version(env) -> None:
    """A store compiled before the note existed keeps its version: the note is about the
    measurements, the version tracks the rule set."""
    settings, store = env
    grep = _add(store, "Grep for the symbol or text you need before opening any file.")
    with store.session() as s:
        first = compile_memory(s, settings, "backend")
    _kept_on(store, grep, "sim")
    with store.session() as s:
        second = compile_memory(s, settings, "backend")
    assert second.version == first.version and second.changed and "sim backend" in second.text


def test_a_memory_md_warden_never_wrote_is_replaced_and_its_content_kept_beside_it(env, capsys) -> None:
    """The agent's own notes (or anyone's) in a MEMORY.md warden never wrote were destroyed by
    the first compile: they are kept, owner-only, beside the file, and the warning says where."""
    import stat as stat_

    from warden.cli.common import warn_if_drifted

    settings, store = env
    _add(store, "Grep for the symbol or text you need before opening any file.")
    path = memory_path(settings, "backend")
    path.parent.mkdir(parents=True)
    path.write_text("# my own notes\n")
    with store.session() as s:
        result = compile_memory(s, settings, "backend")
    assert result.drifted and "my own notes" not in path.read_text()
    [kept] = path.parent.glob("MEMORY.md.replaced-*")
    assert result.kept == kept and kept.read_text() == "# my own notes\n"
    assert stat_.S_IMODE(kept.stat().st_mode) == 0o600
    warn_if_drifted(result)
    assert f"a MEMORY.md warden did not write: its content is kept at {kept}" in capsys.readouterr().err
    with store.session() as s:  # nothing more to keep: the file is warden's compile now
        assert compile_memory(s, settings, "backend").kept is None
    assert len(list(path.parent.glob("MEMORY.md.replaced-*"))) == 1


def test_a_hand_edit_is_kept_beside_the_recompiled_file_and_an_earlier_compile_is_not(env, capsys) -> None:
    from warden.cli.common import warn_if_drifted

    settings, store, path, v1 = _compiled_once(env)
    path.write_bytes(v1 + b"- my edit\n")
    with store.session() as s:
        result = compile_memory(s, settings, "backend")
    assert result.drifted and result.kept is not None and result.kept.read_bytes() == v1 + b"- my edit\n"
    assert path.read_bytes() == v1
    warn_if_drifted(result)
    assert f"recompiled, the edit kept at {result.kept}" in capsys.readouterr().err
    path.write_bytes(v1 + b"- another\n")
    with store.session() as s:  # a rolled-back compile replaces nothing, so keeps nothing
        compile_memory(s, settings, "backend")
        s.rollback()
    assert path.read_bytes() == v1 + b"- another\n"
    assert len(list(path.parent.glob("MEMORY.md.replaced-*"))) == 1
