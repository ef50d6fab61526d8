"""Simulated sessions are never dated in the future: the demo's and ``warden sim sessions``' by
default end before the moment they are generated (the demo's before its collect, so the learning
curve files every naive session under ruleset v0), whatever the seed and count; an explicit
``--start`` whose sessions would run past now is refused with nothing written.

Most tests replay the real sim: :class:`ReplayBackend` plays each (task, system prompt, seed
parity) once through the real :class:`SimBackend` and hands the same run back for every later
seed of that kind, so 200 sessions cost a few real runs. The timeline (pauses, session lengths
from the simulated clock, the layout) is the real one."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from warden.bench.agents import sim_sessions
from warden.bench.agents.sim_backend import SimBackend
from warden.bench.agents.sim_sessions import DEFAULT_START, TimelineOverrun, encode_project_dir, play_sessions
from warden.bench.fixture import write_manifest
from warden.bench.tasks import AgentSuite

from sim_support import AGENT_MD, TWO_EDIT_TASK, make_project

_CACHE: dict[tuple[str, str, int], tuple[Any, Any]] = {}


class ReplayBackend:
    """SimBackend's interface; each (task, system prompt, seed % variants) is played for real once."""

    variants = 2

    def __init__(self, persona: Any = None, *, fast: bool = False) -> None:
        self.real = SimBackend(persona, fast=fast)
        self.model = self.real.model
        self.last_transport: Any = None

    def run(self, task: Any, workdir: Path, system_prompt: str, seed: int, caps: Any) -> Any:
        key = (task.id, system_prompt, seed % self.variants)
        if key not in _CACHE:
            result = self.real.run(task, workdir, system_prompt, seed, caps)
            _CACHE[key] = (result, self.real.last_transport)
        result, self.last_transport = _CACHE[key]
        return result


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_sessions, "SimBackend", ReplayBackend)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, AgentSuite]]:
    fixture = make_project(tmp_path_factory.mktemp("fixture") / "shop-repo")
    write_manifest(fixture)
    # the agent's own tests are the task's check script: no pytest start-up per run
    task = dataclasses.replace(TWO_EDIT_TASK, sim=dataclasses.replace(TWO_EDIT_TASK.sim,
                                                                     test_command=TWO_EDIT_TASK.success_check))
    return fixture, {"backend": AgentSuite("backend", AGENT_MD, None, (task,), "hash")}


def _stamps(path: str | Path) -> list[str]:
    return [json.loads(line)["timestamp"] for line in Path(path).read_text(encoding="utf-8").splitlines()]


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _all_stamps(root: Path) -> list[str]:
    return [stamp for path in root.rglob("*.jsonl") for stamp in _stamps(path)]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _session_span(played: sim_sessions.PlayedSession) -> tuple[str, str]:
    """First and last timestamp of a session, its subagent's transcript included."""
    stamps = _stamps(played.path)
    if played.delegated:
        stamps += _stamps(Path(played.path).with_suffix("") / "subagents" / f"agent-{played.agent_id}.jsonl")
    return min(stamps), max(stamps)


@pytest.mark.parametrize(("seed", "count"), [(0, 12), (1, 12), (7, 12), (2, 40), (3, 200)])
def test_a_backward_timeline_ends_before_its_end_whatever_the_seed_and_count(
        replay: None, tiny: tuple[Path, dict[str, AgentSuite]], tmp_path: Path, seed: int, count: int) -> None:
    fixture, suites = tiny
    end = datetime.now(timezone.utc)
    played = play_sessions(tmp_path, suites, fixture, sessions=count, seed=seed, end=end)
    assert len(played) == count and len(list(tmp_path.joinpath("projects").rglob("*.jsonl"))) == count + sum(
        p.delegated for p in played)
    assert [p.seed for p in played] == [sim_sessions.SEED_OFFSET + seed * 10_000 + i for i in range(count)]
    spans = [_session_span(p) for p in played]
    # in index order, one after the other, a pause (>= 20 simulated minutes) between them ...
    for (_, last), (first, _) in zip(spans, spans[1:]):
        gap = datetime.fromisoformat(first.replace("Z", "+00:00")) - datetime.fromisoformat(last.replace("Z", "+00:00"))
        assert gap >= timedelta(minutes=20)
    # ... and the last one over a pause before the end, which was the moment they were generated
    assert max(_all_stamps(tmp_path)) <= _iso(end - timedelta(minutes=20))
    assert max(_all_stamps(tmp_path)) < _iso(datetime.now(timezone.utc))


def test_laid_out_backwards_the_sessions_are_the_ones_played_forwards(
        tiny: tuple[Path, dict[str, AgentSuite]], tmp_path: Path) -> None:
    """The real sim (no replay): played last first to be placed, each session is still the
    function of (seed, index) it is forwards — only its dates differ."""
    fixture, suites = tiny
    forward = play_sessions(tmp_path / "f", suites, fixture, sessions=2, seed=4, delegate_share=0.5)
    backward = play_sessions(tmp_path / "b", suites, fixture, sessions=2, seed=4, delegate_share=0.5,
                             end=datetime.now(timezone.utc))
    strip = lambda p: dataclasses.replace(p, path="")  # noqa: E731
    assert [strip(p) for p in forward] == [strip(p) for p in backward]

    def undated(root: Path) -> dict[str, list[dict[str, Any]]]:
        out = {}
        workspace = str((root / "workspace").resolve())
        for path, data in _files(root).items():
            if path.endswith(".jsonl"):
                text = re.sub(r"in \d+\.\d+s", "in Xs", data.decode().replace(workspace, "WS"))  # pytest's wall time
                records = [json.loads(line) for line in text.splitlines()]
                for r in records:
                    r.pop("timestamp")
                    if isinstance(r.get("toolUseResult"), dict):
                        r["toolUseResult"].pop("totalDurationMs", None)
                out[path.replace(encode_project_dir(workspace), "P")] = records
        return out

    assert undated(tmp_path / "f") == undated(tmp_path / "b")
    assert min(_all_stamps(tmp_path / "f")) > _iso(DEFAULT_START)


def test_a_forward_timeline_past_not_after_is_refused_with_nothing_written(
        replay: None, tiny: tuple[Path, dict[str, AgentSuite]], tmp_path: Path) -> None:
    fixture, suites = tiny
    out = tmp_path / "out"
    play_sessions(out, suites, fixture, sessions=2, seed=0)  # an earlier run's files, same paths
    before = _files(out)
    now = datetime.now(timezone.utc)
    with pytest.raises(TimelineOverrun) as refused:
        play_sessions(out, suites, fixture, sessions=12, seed=0, start=now - timedelta(hours=3), not_after=now)
    assert 0 <= refused.value.index < 12 and refused.value.not_after == now
    assert _files(out) == before  # nothing replaced, no staging left behind
    assert sorted(p.name for p in out.iterdir()) == ["projects", "workspace"]
    fresh = tmp_path / "fresh"
    with pytest.raises(TimelineOverrun) as refused:  # a first session that would start after now
        play_sessions(fresh, suites, fixture, sessions=3, seed=0, start=now + timedelta(days=1), not_after=now)
    assert refused.value.index == 0 and not fresh.exists()
    # a timeline that fits is written as usual, dated from its start
    start = now - timedelta(days=60)
    played = play_sessions(fresh, suites, fixture, sessions=40, seed=1, start=start, not_after=now)
    stamps = _all_stamps(fresh)
    assert len(played) == 40 and _iso(start) < min(stamps) and max(stamps) <= _iso(now)
    assert not [p for p in fresh.iterdir() if p.name.startswith(".")]


def test_cli_sessions_are_over_before_today_by_default_and_an_overrunning_start_is_refused(
        replay: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from warden.cli.app import main

    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    for seed, count in ((0, 12), (5, 40)):
        out = tmp_path / f"default-{seed}"
        assert main(["sim", "sessions", "--out", str(out), "--sessions", str(count), "--seed", str(seed),
                     "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["sessions"]) == count
        assert max(_all_stamps(out)) < _iso(today)  # the last one ends before today
    # an explicit start keeps its date ...
    day = (today - timedelta(days=30)).strftime("%Y-%m-%d")
    assert main(["sim", "sessions", "--out", str(tmp_path / "dated"), "--sessions", "12", "--start", day,
                 "--json"]) == 0
    capsys.readouterr()
    stamps = _all_stamps(tmp_path / "dated")
    assert min(stamps).startswith(day + "T") and max(stamps) < _iso(datetime.now(timezone.utc))
    # ... and sessions that would run past now from it are refused, in one line, with nothing written
    for start, count in ((today.strftime("%Y-%m-%d"), 40), ((today + timedelta(days=1)).strftime("%Y-%m-%d"), 1)):
        out = tmp_path / f"refused-{start}"
        assert main(["sim", "sessions", "--out", str(out), "--sessions", str(count), "--start", start]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"warden: --start {start}: {count} sessions from that day would run past now")
        assert err.count("\n") == 1 and "nothing written" in err
        assert not out.exists()


@pytest.mark.parametrize(("seed", "count"), [(0, 12), (3, 12), (1, 60)])
def test_the_demos_sessions_all_fall_under_ruleset_v0(replay: None, monkeypatch: pytest.MonkeyPatch,
                                                       seed: int, count: int) -> None:
    """The demo collects its sessions and then compiles rule sets: every session — played by the
    naive agent before any rule existed — must be filed under v0 (one dated after the compile
    was filed under v2)."""
    from warden.bench.tasks import load_suite
    from warden.config import load_settings
    from warden.demo import play_demo_sessions
    from warden.ingest.collector import collect_paths
    from warden.report.figures import learning_curve
    from warden.store.db import open_store
    from warden.store.models import RulesetVersion, utcnow

    monkeypatch.setattr(ReplayBackend, "variants", 1)  # the shipped suite: one real run per task
    settings = load_settings(backend="sim")
    suite = load_suite(settings.golden_dir, "backend")
    played = play_demo_sessions(settings, "backend", suite, sessions=count, seed=seed)
    generated = datetime.now(timezone.utc)
    assert max(_all_stamps(settings.claude_home / "projects")) < _iso(generated)
    store = open_store(settings)
    collect_paths(settings, store=store)
    with store.session() as session:  # the night compiles v1 and v2 after the collect
        for version in (1, 2):
            session.add(RulesetVersion(agent="backend", version=version, rule_ids=[], memory_sha256="x" * 64,
                                       created_at=utcnow()))
        session.commit()
    with store.session() as session:
        curve = learning_curve(session, "backend")
    assert [(p["ruleset_version"], p["sessions"]) for p in curve] == [(0, len(played))]
