"""Real-work mode: simulated sessions written as Claude Code transcripts, read back by the
collector's own parser and collector (dedupe of streamed lines, sidechains, agent types)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from warden.bench.agents.sim_sessions import encode_project_dir, play_sessions
from warden.bench.fixture import write_manifest
from warden.bench.tasks import AgentSuite
from warden.config import load_settings
from warden.ingest.collector import collect_paths, parse_file, read_meta_sidecar
from warden.store.db import open_store
from warden.store.models import SessionRun

from sim_support import AGENT_MD, TWO_EDIT_TASK, make_project


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    fixture = make_project(tmp_path_factory.mktemp("fixture") / "shop-repo")
    write_manifest(fixture)
    suites = {"backend": AgentSuite("backend", AGENT_MD, None, (TWO_EDIT_TASK,), "hash")}
    out = tmp_path_factory.mktemp("sessions")
    delegated = play_sessions(out, suites, fixture, sessions=1, seed=0, delegate_share=1.0)
    direct = play_sessions(out, suites, fixture, sessions=1, seed=1, delegate_share=0.0)
    return out, fixture, suites, delegated + direct


def test_sessions_land_in_a_claude_code_projects_tree(played) -> None:
    out, _, _, sessions = played
    delegated, direct = sessions
    assert delegated.delegated and delegated.agent == "backend" and delegated.agent_id
    assert not direct.delegated and direct.agent == "main"
    project = out / "projects" / encode_project_dir(str((out / "workspace" / "shop-repo").resolve()))
    sub = project / delegated.session_id / "subagents" / f"agent-{delegated.agent_id}.jsonl"
    assert sub.is_file()
    assert json.loads(sub.with_suffix(".meta.json").read_text())["agentType"] == "backend"
    lines = [json.loads(line) for line in sub.read_text().splitlines()]
    assert all(r["isSidechain"] and r["agentId"] == delegated.agent_id and r["sessionId"] == delegated.session_id
               for r in lines)
    assistant = [r for r in lines if r["type"] == "assistant"]
    by_id: dict[str, list[dict]] = {}
    for r in assistant:
        by_id.setdefault(r["message"]["id"], []).append(r)
    streamed = [group for group in by_id.values() if len(group) > 1]
    assert streamed, "multi-block responses are written one line per block"
    for group in streamed:
        assert len({r["requestId"] for r in group}) == 1
        assert group[0]["message"]["usage"]["output_tokens"] < group[-1]["message"]["usage"]["output_tokens"]
    results = [r for r in lines if r["type"] == "user" and "toolUseResult" in r]
    assert results and all(r["sourceToolAssistantUUID"] for r in results)
    assert all(r["cwd"] == str((out / "workspace" / "shop-repo").resolve()) for r in lines)


def test_the_parser_dedupes_streamed_lines_to_the_sims_usage(played) -> None:
    _, _, _, sessions = played
    for session in sessions:
        path = session.path
        if session.delegated:
            path = str(Path(path).with_suffix("") / "subagents" / f"agent-{session.agent_id}.jsonl")
        run, _, _ = parse_file(path, agent_type=read_meta_sidecar(path))
        assert run.models == ["sim-naive-1"]
        from warden.ingest.pricing import DEFAULT_TABLE

        assert DEFAULT_TABLE.weighted_tokens("sim-naive-1", run.usage) == pytest.approx(session.weighted_tokens)
        assert run.stats.malformed == 0 and run.completed
        assert run.tool_calls and all(c.kind != "other" for c in run.tool_calls)
        if session.delegated:
            assert run.agent_type == "backend" and run.agent_id == session.agent_id


def test_the_collector_ingests_sessions_once(played) -> None:
    out, _, _, sessions = played
    settings = load_settings()
    collect_paths(settings, [out / "projects"])
    collect_paths(settings, [out / "projects"])  # re-ingest: nothing counted twice
    store = open_store(settings)
    with store.session() as db:
        rows = {r.run_key: r for r in db.scalars(select(SessionRun))}
    delegated, direct = sessions
    sub = rows[f"{delegated.session_id}:{delegated.agent_id}"]
    assert sub.agent == "backend" and sub.weighted_tokens == pytest.approx(delegated.weighted_tokens)
    assert rows[f"{direct.session_id}:main"].weighted_tokens == pytest.approx(direct.weighted_tokens)
    assert rows[f"{delegated.session_id}:main"].weighted_tokens < sub.weighted_tokens  # the Task call only
    assert len(rows) == 3


def test_same_arguments_write_the_same_transcripts(played, tmp_path: Path) -> None:
    out, fixture, suites, sessions = played
    again = play_sessions(tmp_path, suites, fixture, sessions=1, seed=1, delegate_share=0.0)
    first = Path(sessions[1].path).read_text()
    second = Path(again[0].path).read_text()
    normalise = lambda text: text.replace(str(out.resolve()), "OUT").replace(str(tmp_path.resolve()), "OUT")  # noqa: E731
    import re

    strip_timing = lambda text: re.sub(r"in \d+\.\d+s", "in Xs", text)  # noqa: E731
    assert strip_timing(normalise(first)) == strip_timing(normalise(second))


def test_cli_writes_sessions_for_the_shipped_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from warden.cli.app import main

    assert main(["sim", "sessions", "--out", str(tmp_path), "--sessions", "1", "--agent", "backend",
                 "--delegate-share", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "not a real model" in report["label"]
    [session] = report["sessions"]
    assert session["agent"] == "backend" and Path(session["path"]).is_file()
    assert main(["sim", "sessions", "--out", str(tmp_path), "--agent", "nobody"]) == 2
    assert "unknown agent" in capsys.readouterr().err
    # --agent a,b names two agents, as nightly's --agents does
    assert main(["sim", "sessions", "--out", str(tmp_path / "two"), "--sessions", "2", "--agent", "backend,sql",
                 "--json"]) == 0
    assert {s["agent"] for s in json.loads(capsys.readouterr().out)["sessions"]} == {"backend", "sql"}
    assert main(["sim", "sessions", "--out", str(tmp_path), "--agent", ","]) == 2
    assert "--agent names no agent" in capsys.readouterr().err


def test_cli_refuses_a_memory_dir_that_is_missing_or_unreadable(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from warden.cli.app import main

    out = tmp_path / "out"
    assert main(["sim", "sessions", "--out", str(out), "--sessions", "1", "--memory-dir", str(tmp_path / "typo")]) == 2
    assert capsys.readouterr().err.strip() == f"warden: --memory-dir {tmp_path / 'typo'}: no such directory"
    assert not out.exists()  # nothing was played without the memory the user asked for
    memory = tmp_path / "mem" / "backend" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_bytes(b"\xff\xfe not utf-8")
    assert main(["sim", "sessions", "--out", str(out), "--sessions", "1", "--agent", "backend",
                 "--memory-dir", str(tmp_path / "mem")]) == 2
    assert capsys.readouterr().err.strip() == f"warden: cannot read {memory}: not UTF-8 text"
    memory.write_text("# memory\n- Grep before reading.\n", encoding="utf-8")
    assert main(["sim", "sessions", "--out", str(out), "--sessions", "1", "--agent", "backend",
                 "--memory-dir", str(tmp_path / "mem"), "--json"]) == 0


def test_a_namespace_keeps_session_ids_apart_from_the_default_ones(played, tmp_path: Path) -> None:
    """The demo plays its sessions in a namespace of its own: `warden sim sessions --seed 0`
    collected into a kept demo home must not reuse the demo's session and message ids (the
    collector would take them for copies of one session and merge unrelated work)."""
    out, fixture, suites, sessions = played
    again = play_sessions(tmp_path / "demo", suites, fixture, sessions=1, seed=0, delegate_share=1.0,
                          namespace="demo")
    assert again[0].session_id != sessions[0].session_id
    same = play_sessions(tmp_path / "plain", suites, fixture, sessions=1, seed=0, delegate_share=1.0)
    assert same[0].session_id == sessions[0].session_id  # without one, ids are as before
    ids = lambda path: {json.loads(line)["message"]["id"] for line in Path(path).read_text().splitlines()  # noqa: E731
                        if json.loads(line).get("type") == "assistant"}
    assert ids(again[0].path).isdisjoint(ids(sessions[0].path))
