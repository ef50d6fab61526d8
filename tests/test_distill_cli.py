"""`warden distill` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from distill_fixtures import naive_session, write_transcript

from warden.cli.app import main
from warden.config import load_settings
from warden.store.db import open_store
from warden.store.models import Rule, SessionRun


def test_dry_run_json_over_the_real_corpus(corpus: Path, capsys) -> None:
    assert main(["distill", "--dry-run", "--json", str(corpus)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True
    assert len(data["runs"]) == len(list(corpus.rglob("*.jsonl")))
    assert all(run["error"] is None for run in data["runs"])
    found = [f for run in data["runs"] for f in run["findings"]]
    assert found and all(f["evidence"] and f["waste_kind"] and f["saving_tokens"] > 0 for f in found)
    assert all("tool_use_id" in e or "turn" in e for f in found for e in f["evidence"])
    with open_store(load_settings()).session() as session:
        assert session.query(Rule).count() == 0  # paths are always a dry run


def test_distill_queued_run_then_nothing_left(tmp_path: Path, capsys) -> None:
    path = write_transcript(tmp_path, naive_session(), session_id="naive")
    store = open_store(load_settings())
    with store.session() as session:
        session.add(SessionRun(run_key="naive:a1", session_id="naive", agent_id="a1", agent="coder",
                               weighted_tokens=120_000, completed=True, source_path=str(path),
                               distill_state="queued"))
    assert main(["distill", "--agent", "coder"]) == 0
    out = capsys.readouterr().out
    assert "admitted rule 1: Grep for the symbol" in out and "blind_read" in out
    assert main(["distill", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == []
    assert main(["distill", "--run", "1", "--agent", "backend"]) == 2  # the run is coder's
    assert "belongs to agent 'coder', not 'backend'" in capsys.readouterr().err
    assert main(["rules", "--agent", "coder", "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    assert rules and all(r["state"] == "candidate" and r["origin"] == "heuristic" for r in rules)


def test_usage_errors(tmp_path: Path, capsys) -> None:
    assert main(["distill", "--distiller", "magic"]) == 2
    assert main(["distill", "--run", "42"]) == 2
    assert main(["distill", str(tmp_path / "nope.jsonl")]) == 2
    assert main(["distill", "--run", "1", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("warden: ") for line in err)
    # the model distiller without a key: a clear one-line error before any work
    path = write_transcript(tmp_path, naive_session(), session_id="n")
    assert main(["distill", "--distiller", "anthropic", str(path)]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err


def test_an_unknown_or_invalid_agent_is_a_usage_error_not_an_empty_queue(tmp_path: Path, capsys) -> None:
    """As `select` and `sessions` say: a typo ("Backend") must not read as "nothing to distill"."""
    store = open_store(load_settings())
    with store.session() as session:
        session.add(SessionRun(run_key="s:main", session_id="s", agent="backend", source_path=str(tmp_path / "s"),
                               distill_state="done"))
    for agent in ("Backend", "a b/c"):
        assert main(["distill", "--agent", agent]) == 2
        err = capsys.readouterr().err
        assert err.startswith("warden: ") and "nothing to distill" not in err
    assert main(["distill", "--agent", "backend"]) == 0
    assert "nothing to distill" in capsys.readouterr().out


def test_a_path_that_cannot_be_read_fails_after_the_others_are_shown(tmp_path: Path, capsys) -> None:
    path = write_transcript(tmp_path, naive_session(), session_id="ok")
    assert main(["distill", "--dry-run", str(path), "/dev/zero"]) == 2
    captured = capsys.readouterr()
    assert "blind_read" in captured.out  # the readable transcript's findings are still shown
    assert captured.err.strip() == ("warden: 1 of 2 transcript(s) could not be distilled: cannot read "
                                    "transcript /dev/zero: not a regular file")


def test_bad_option_values_are_one_line_usage_errors(capsys) -> None:
    """Typer's own parse errors (a non-integer id, a missing option, an unknown command) exit 2
    with one ``warden: …`` line — typer vendors click, so no ``click`` import may be assumed."""
    argvs = [["distill", "--run", "abc"], ["rules", "protect", "abc"], ["rules", "forget", "-1"],
             ["rules", "add", "Grep for symbols before opening any file."], ["rules", "bogus"],
             ["distill", "--bogus"]]
    for argv in argvs:
        assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == len(argvs) and all(line.startswith("warden: ") for line in err)
    assert "Invalid value for '--run'" in err[0] and "Missing option '--agent'" in err[3]
    assert "Traceback" not in "\n".join(err)


def test_a_run_of_a_plugin_subagent_type_is_skipped_and_does_not_block_the_queue(tmp_path: Path, capsys) -> None:
    first = write_transcript(tmp_path, naive_session(), session_id="plug")
    second = write_transcript(tmp_path, naive_session(), session_id="real")
    store = open_store(load_settings())
    with store.session() as session:
        session.add(SessionRun(run_key="plug:a1", session_id="plug", agent_id="a1", agent="feature-dev:code-reviewer",
                               weighted_tokens=120_000, completed=True, source_path=str(first), distill_state="queued"))
        session.add(SessionRun(run_key="real:a2", session_id="real", agent_id="a2", agent="coder",
                               weighted_tokens=120_000, completed=True, source_path=str(second),
                               distill_state="queued"))
    assert main(["distill", "--json"]) == 0
    runs = {r["run_key"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert [runs[k]["state_after"] for k in ("plug:a1", "real:a2")] == ["skipped", "done"]
    assert "cannot hold rules" in runs["plug:a1"]["error"] and runs["real:a2"]["admitted"]


def test_a_run_is_labelled_main_session_or_subagent_with_its_type(tmp_path: Path, capsys) -> None:
    """A bare agent name after the run read like part of it ("run 2 coder", "… .jsonl sql")."""
    main_path = write_transcript(tmp_path, naive_session(), session_id="lead")
    sub_path = write_transcript(tmp_path, naive_session(), session_id="helper")
    with open_store(load_settings()).session() as session:
        session.add(SessionRun(run_key="lead:main", session_id="lead", agent="main", weighted_tokens=120_000,
                               completed=True, source_path=str(main_path), distill_state="queued"))
        session.add(SessionRun(run_key="helper:a1", session_id="helper", agent_id="a1", agent="coder",
                               weighted_tokens=120_000, completed=True, source_path=str(sub_path),
                               distill_state="queued"))
    assert main(["distill", "--dry-run"]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line.startswith("run ")]
    assert sorted(heads) == ["run 1 (main session) — 12 tool calls, 120,000 weighted tokens",
                             "run 2 (subagent coder) — 12 tool calls, 120,000 weighted tokens"]
    assert main(["distill", "--dry-run", str(main_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"{main_path} (main session) — 12 tool calls, ")


def test_the_run_id_distill_takes_is_the_one_sessions_lists(tmp_path: Path, capsys) -> None:
    """`warden distill --run ID` needs a run's id: `warden sessions` (text and --json) shows it."""
    transcripts = tmp_path / "projects"
    transcripts.mkdir()
    write_transcript(transcripts, naive_session(), session_id="naive")
    assert main(["collect", str(transcripts)]) == 0
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert isinstance(row["id"], int)
    assert main(["sessions"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[0] == "id" and table[1].split()[0] == str(row["id"])
    assert main(["distill", "--run", str(row["id"]), "--dry-run", "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)["runs"]
    assert report["run_id"] == row["id"] and report["run_key"] == row["run_key"]


def test_a_file_that_is_no_transcript_is_an_error_not_an_empty_session(tmp_path: Path, capsys) -> None:
    garbage = tmp_path / "passwd.jsonl"
    garbage.write_text("root:x:0:0:root:/root:/bin/bash\nnot json either\n")
    assert main(["distill", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a Claude Code transcript: none of its 2 line(s) is a JSON record" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")  # a session just started: a transcript with nothing in it yet
    assert main(["distill", str(empty)]) == 0


def test_a_dry_run_of_a_run_outside_the_queue_leaves_the_queue_as_it_is(tmp_path: Path, capsys) -> None:
    path = write_transcript(tmp_path, naive_session(), session_id="naive")
    store = open_store(load_settings())
    with store.session() as session:
        session.add(SessionRun(run_key="naive:a1", session_id="naive", agent_id="a1", agent="coder",
                               weighted_tokens=120_000, completed=True, source_path=str(path)))  # not queued
        session.add_all([SessionRun(run_key=f"q{i}:a1", session_id=f"q{i}", agent_id="a1", agent="coder",
                                    weighted_tokens=120_000, completed=True, source_path=str(path),
                                    distill_state="queued") for i in range(3)])
    assert main(["distill", "--dry-run", "--run", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["left_queued"] == 3
    assert main(["distill", "--dry-run", "--run", "2", "--json"]) == 0  # a queued one: a real run would leave 2
    assert json.loads(capsys.readouterr().out)["left_queued"] == 2
