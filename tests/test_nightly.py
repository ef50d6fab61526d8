"""``warden nightly``: usage errors, and a night killed during a bench pass that resumes without
repeating finished runs or decisions, with MEMORY.md never half-written."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Any
from pathlib import Path

import pytest

from tests.conftest import REPO
from warden.select.memory import GENERATED_HEADER

AGENT = "docs"


def _warden(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "warden", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    # A small evidence budget keeps the decision to a few rounds (it may end inconclusive).
    env.update(WARDEN_EVIDENCE_BUDGET_TOKENS="900000", WARDEN_CONCURRENCY="2")
    return env


def test_unknown_agent_is_usage_error(warden_home: Path) -> None:
    proc = _warden(["nightly", "--agents", "nobody"], dict(os.environ))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "unknown agent 'nobody'" in err and len(err.strip().splitlines()) == 1


def test_bad_usage_is_refused_before_the_night_starts(warden_home: Path, capsys) -> None:
    from warden.cli.app import main

    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    for argv, message in ((["--backend", "bogus"], "unknown backend"), (["--distiller", "bogus"], "unknown distiller"),
                          (["--agents", ",,,"], "names no agent"),
                          (["--agent", "nobody"], "unknown agent 'nobody'")):  # --agent, as every other command
        assert main(["nightly", *argv]) == 2, argv
        assert message in capsys.readouterr().err
    proc = _warden(["nightly", "--backend", "anthropic"], env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "ANTHROPIC_API_KEY" in err
    with sqlite3.connect(warden_home / "warden.db") as conn:  # no night was opened, so none resumes
        assert conn.execute("SELECT count(*) FROM nightly_runs").fetchone()[0] == 0


def test_killed_night_resumes_without_repeating_runs(warden_home: Path) -> None:
    env = _env(warden_home)
    add = subprocess.run([sys.executable, "-m", "warden", "rules", "add", "--agent", AGENT,
                          "Grep for the symbol or text you need before opening any file."],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert add.returncode == 0, add.stderr
    db = warden_home / "warden.db"
    proc = _warden(["nightly", "--agents", AGENT], env, start_new_session=True)
    deadline = time.monotonic() + 240
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                done = conn.execute("select count(*) from bench_runs").fetchone()[0]
        except sqlite3.Error:
            continue
        if done >= 3:
            break
    assert proc.poll() is None, "the night finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    memory = Path(env["CLAUDE_CONFIG_DIR"]) / "agent-memory" / AGENT / "MEMORY.md"
    if memory.exists():  # compiled before the kill: must be whole
        text = memory.read_text()
        assert text.startswith(GENERATED_HEADER) and text.endswith("\n")
    with sqlite3.connect(db) as conn:
        before = conn.execute("select id, task_id, config_key, seed from bench_runs").fetchall()
        assert conn.execute("select count(*) from receipts").fetchone()[0] == 0
    rerun = _warden(["nightly", "--agents", AGENT, "--json"], env)
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    with sqlite3.connect(db) as conn:
        after = conn.execute("select id, task_id, config_key, seed from bench_runs where outcome != 'infra_error'").fetchall()
        keys = [(t, c, s) for _, t, c, s in after]
        assert len(keys) == len(set(keys)), "a finished run was repeated"
        assert {r[0] for r in before} <= {r[0] for r in after}
        assert conn.execute("select count(*) from receipts").fetchone()[0] == 1
        assert conn.execute("select status from nightly_runs order by id").fetchall() == [("done",)]
        # the one decision's receipt counts every run bought for it, the killed part's included
        spent = conn.execute("select tokens_spent from receipts").fetchone()[0]
        made = conn.execute("select sum(weighted_tokens) from bench_runs").fetchone()[0]
        assert spent == pytest.approx(made)
    assert memory.read_text().startswith(GENERATED_HEADER)


def test_infra_abort_exits_1_writes_nothing_and_the_next_night_resumes(warden_home: Path, tmp_path: Path,
                                                                      monkeypatch, capsys) -> None:
    """In process over the fake backend: an all-infra-error night exits 1 with no receipt, no
    verdict and no strike; a healthy re-run resumes the same night and decides the rule."""
    import warden.bench.suite_runner as suite_runner
    from test_scheduler_support import AGENT as FAKE, MODEL, FakeBackend, make_workbench
    from warden.cli.app import main
    from warden.config import load_settings
    from warden.store.db import open_store
    from warden.store.models import NightlyRun, Receipt, Rule

    golden = tmp_path / "golden"
    (golden / FAKE).mkdir(parents=True)
    (golden / FAKE / "agent.md").write_text("---\nname: fakeagent\n---\nYou are a fake agent.\n")
    monkeypatch.setenv("WARDEN_GOLDEN_DIR", str(golden))
    monkeypatch.setenv("WARDEN_EVIDENCE_BUDGET_TOKENS", "2000000")
    state = {"factory": lambda: FakeBackend(infra=True)}
    monkeypatch.setattr(suite_runner, "open_workbench",
                        lambda *a, **kw: (make_workbench(tmp_path, lambda: state["factory"]()), MODEL))
    store = open_store(load_settings())
    with store.session() as s:
        rule = Rule(agent=FAKE, body="Keep replies brief: no narration between tool calls.")
        s.add(rule)
        s.flush()
        rule_id = rule.id
    assert main(["nightly", "--agents", FAKE]) == 1
    assert "aborted (infrastructure)" in capsys.readouterr().out
    with store.session() as s:
        assert s.query(Receipt).count() == 0
        rule = s.get(Rule, rule_id)
        assert (rule.state, rule.strikes, rule.decided_at) == ("candidate", 0, None)
        assert [n.status for n in s.query(NightlyRun)] == ["aborted"]
    state["factory"] = FakeBackend
    assert main(["nightly", "--agents", FAKE, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["resumed"] and payload["night_id"] == 1 and payload["aborted"] is None
    with store.session() as s:
        assert s.query(Receipt).filter_by(rule_id=rule_id).count() == 1
        assert [n.status for n in s.query(NightlyRun)] == ["done"]


def test_a_resumed_night_is_charged_for_what_its_interrupted_part_spent(warden_home: Path, monkeypatch) -> None:
    """The budget is the night's, not each invocation's: a re-run after a kill gets what is left."""
    from datetime import timedelta

    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.select.selector import SelectReport
    from warden.store.db import open_store
    from warden.store.models import BenchRun, NightlyRun, utcnow

    store = open_store(load_settings())
    with store.session() as s:
        s.add(NightlyRun(status="running", stage="select", agents=[AGENT], budget_tokens=1_000_000,
                         started_at=utcnow() - timedelta(minutes=5)))
        run = dict(agent=AGENT, task_id="t", config_key="k", backend="sim", model="m", seed=1, suite_hash="h",
                   fixture_hash="f", outcome="completed", completed=True)
        s.add(BenchRun(**run, weighted_tokens=300_000.0))  # spent by the killed part of the night
        s.add(BenchRun(**{**run, "seed": 2}, weighted_tokens=50_000.0, created_at=utcnow() - timedelta(days=1)))
    budgets: list[float | None] = []

    def fake_select(store, settings, agent, *, budget_tokens=None, **kw):  # type: ignore[no-untyped-def]
        budgets.append(budget_tokens)
        return SelectReport(agent=agent, backend="sim", model="m", tokens_spent=100_000.0)

    monkeypatch.setattr(selector, "select_agent", fake_select)
    summary = nightly.run_nightly(store, load_settings(), agents=[AGENT], collect=False)
    assert summary.resumed and budgets == [700_000.0]  # the night's budget minus the earlier 300k
    assert summary.spent_before_resume == 300_000.0 and summary.tokens_spent == 400_000.0
    with store.session() as s:
        assert [(n.status, n.budget_tokens) for n in s.query(NightlyRun)] == [("done", 1_000_000)]


def test_a_resumed_night_does_not_select_an_agent_it_finished_before_the_kill(warden_home: Path,
                                                                               monkeypatch) -> None:
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.select.selector import SelectReport
    from warden.store.db import open_store

    store = open_store(load_settings())
    calls: list[str] = []

    def fake_select(store, settings, agent, **kw):  # type: ignore[no-untyped-def]
        calls.append(agent)
        if agent == "sql" and calls.count("sql") == 1:
            raise KeyboardInterrupt  # killed while deciding sql's rules
        return SelectReport(agent=agent, backend="sim", model="m")

    monkeypatch.setattr(selector, "select_agent", fake_select)
    with pytest.raises(KeyboardInterrupt):
        nightly.run_nightly(store, load_settings(), agents=["docs", "sql"], collect=False)
    summary = nightly.run_nightly(store, load_settings(), agents=["docs", "sql"], collect=False)
    assert summary.resumed and calls == ["docs", "sql", "sql"]  # docs is not decided twice
    # ...and the resumed night still reports it, as decided before the resume
    reported = {a["agent"]: a for a in summary.to_json()["agents"]}
    assert set(reported) == {"docs", "sql"} and reported["docs"]["decided_before_resume"] is True
    assert "decided_before_resume" not in reported["sql"]


def test_every_agent_line_of_a_resumed_night_says_it_counts_since_the_resume(warden_home: Path, monkeypatch,
                                                                             capsys) -> None:
    """sql was killed mid-decision (none of its decisions finished): its line said "spent …
    weighted tokens (62 runs, 14 reused)" as if the night's, though what it spent before the kill
    is in no agent line. Every agent line of a resumed night now says "since the resume", and the
    stored summary marks each decision decided before it, not only the agent."""
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.cli.select import render_select_report
    from warden.config import load_settings
    from warden.select.selector import DecisionSummary, SelectReport
    from warden.store.db import open_store
    from warden.store.models import NightlyRun

    store = open_store(load_settings())
    calls: list[str] = []

    def fake_select(store, settings, agent, **kw):  # type: ignore[no-untyped-def]
        calls.append(agent)
        if agent == "sql" and calls.count("sql") == 1:
            raise KeyboardInterrupt  # killed while deciding sql's first rule
        decision = DecisionSummary(7, "Grep for the symbol before opening any file.", "admission", "keep",
                                   "candidate", "active", 900.0, (100.0, 1500.0), 80.0, 250_000.0, None)
        return SelectReport(agent=agent, backend="sim", model="m", tokens_spent=250_000.0, runs_made=8,
                            runs_reused=3, decisions=[decision] if agent == "docs" else [])

    monkeypatch.setattr(selector, "select_agent", fake_select)
    with pytest.raises(KeyboardInterrupt):
        nightly.run_nightly(store, load_settings(), agents=["docs", "sql"], collect=False)
    summary = nightly.run_nightly(store, load_settings(), agents=["docs", "sql"], collect=False)
    reported = {a["agent"]: a for a in summary.to_json()["agents"]}
    assert reported["sql"]["since_resume"] is True and "since_resume" not in reported["docs"]
    assert [d["decided_before_resume"] for d in reported["docs"]["decisions"]] == [True]
    with store.session() as s:
        stored = s.query(NightlyRun).one().summary
    assert [d.get("decided_before_resume") for a in stored["agents"] if a["agent"] == "docs"
            for d in a["decisions"]] == [True]
    capsys.readouterr()
    render_select_report(reported["sql"])
    out = " ".join(capsys.readouterr().out.split())
    assert "spent 250,000 weighted tokens since the resume (8 runs, 3 reused)" in out
    assert "decided before this night was resumed:" not in out  # none of its decisions was
    render_select_report(reported["docs"])
    out = " ".join(capsys.readouterr().out.split())
    assert "since the resume" not in out and "decided before this night was resumed" in out


def test_a_broken_suite_is_skipped_after_every_other_agent_is_done(warden_home: Path, monkeypatch) -> None:
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.errors import UsageError
    from warden.select.selector import SelectReport
    from warden.store.db import open_store

    def fake_select(store, settings, agent, **kw):  # type: ignore[no-untyped-def]
        if agent == "docs":
            raise UsageError("agent docs has no golden tasks")
        return SelectReport(agent=agent, backend="sim", model="m")

    monkeypatch.setattr(selector, "select_agent", fake_select)
    summary = nightly.run_nightly(open_store(load_settings()), load_settings(), agents=["docs", "sql"], collect=False)
    assert [r.agent for r in summary.selects] == ["sql"] and "docs" in summary.unusable_agents
    assert summary.exit_code == 2


def _distilling(reports: list) -> Any:
    """A stand-in for distill_runs that stores nothing and tells each report, as the real one does."""
    def distill(*a: Any, on_report: Any = lambda r: None, **k: Any) -> list:
        for r in reports:
            on_report(r)
        return reports
    return distill


def test_a_night_whose_distiller_calls_all_failed_does_not_say_it_distilled(warden_home: Path,
                                                                            monkeypatch) -> None:
    import warden.distill.service as service
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.select.selector import SelectReport
    from warden.store.db import open_store

    failed = [service.RunReport(source_path=f"/t/s{i}.jsonl", run_id=i, infra_error=True) for i in range(3)]
    monkeypatch.setattr(service, "distill_runs", _distilling(failed))
    monkeypatch.setattr(selector, "select_agent", lambda store, settings, agent, **kw: SelectReport(agent, "sim", "m"))
    summary = nightly.run_nightly(open_store(load_settings()), load_settings(), agents=["docs"], collect=False)
    assert summary.distilled_runs == 0 and summary.to_json()["distilled_runs"] == 0


def test_the_night_says_what_the_model_distiller_used(warden_home: Path, monkeypatch) -> None:
    """Not bench tokens (the budget is the bench's), but a cost the user pays: the summary says it."""
    import warden.distill.service as service
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.select.selector import SelectReport
    from warden.store.db import open_store

    calls = [service.RunReport(source_path=f"/t/s{i}.jsonl", run_id=i, model_tokens=1000 + i) for i in range(3)]
    monkeypatch.setattr(service, "distill_runs", _distilling(calls))
    monkeypatch.setattr(selector, "select_agent", lambda store, settings, agent, **kw: SelectReport(agent, "sim", "m"))
    summary = nightly.run_nightly(open_store(load_settings()), load_settings(), agents=["docs"], collect=False)
    assert summary.distill_model_tokens == 3003 and summary.to_json()["distill_model_tokens"] == 3003


def test_a_night_without_a_claude_code_directory_collects_nothing_and_goes_on(tmp_path: Path, monkeypatch) -> None:
    """A CI runner deciding the team database's rules has no ~/.claude: the README's recipe. The
    night says so and selects; only `warden collect` itself refuses a missing directory."""
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.select.selector import SelectReport
    from warden.store.db import open_store
    from warden.store.models import NightlyRun

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-claude-here"))
    monkeypatch.setattr(selector, "select_agent", lambda store, settings, agent, **kw: SelectReport(agent, "sim", "m"))
    said: list[str] = []
    store = open_store(load_settings())
    summary = nightly.run_nightly(store, load_settings(), agents=["docs"], log=said.append)
    assert summary.collected_runs == 0 and [r.agent for r in summary.selects] == ["docs"]
    assert any("no Claude Code directory" in line for line in said)
    with store.session() as s:
        assert [n.status for n in s.query(NightlyRun)] == ["done"]


def test_the_first_compile_says_it_created_memory_md(warden_home: Path, capsys) -> None:
    """A first night wrote MEMORY.md: "changed: added none; removed none" said nothing happened."""
    from warden.cli.app import main

    path = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "agent-memory" / AGENT / "MEMORY.md"
    assert main(["nightly", "--agents", AGENT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  MEMORY.md v1 created (no rules in it yet) → {path}" in lines and path.is_file()
    assert main(["nightly", "--agents", AGENT]) == 0
    assert f"  MEMORY.md v1 unchanged → {path}" in capsys.readouterr().out.splitlines()
    path.unlink()  # gone (deleted by hand): the next compile creates it again, and the JSON says so
    assert main(["nightly", "--agents", AGENT, "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["agents"][0]["memory"]
    assert memory["created"] and memory["changed"] and memory["rule_ids"] == [] and path.is_file()


def test_a_compile_names_what_it_did_to_memory_md() -> None:
    from warden.cli.select import memory_change

    base = {"created": False, "changed": True, "rule_ids": [3, 4], "added": [], "removed": []}
    assert memory_change({**base, "created": True, "added": [3, 4]}) == "created with rule 3, rule 4"
    assert memory_change({**base, "added": [4], "removed": [2]}) == "added rule 4; removed rule 2"
    assert memory_change({**base, "removed": [2]}) == "removed rule 2"
    assert memory_change({**base, "changed": False}) == "unchanged"
    assert memory_change(base) == "rewritten (same rules)"  # recovered checkpoints or the backends' note


@pytest.mark.parametrize("killed_after", [4, 5])
def test_a_killed_budget_limited_night_uses_the_runs_it_paid_for(warden_home: Path, tmp_path: Path,
                                                                  monkeypatch, killed_after: int) -> None:
    """A night whose budget is charged for its killed part still buys the rounds those runs
    belong to (they are reused at no cost), and what the killed part spent counts towards the
    rule's undecided tokens: the resumed night ends where the uninterrupted one ends. (Killed
    after 5 runs, the resumed night used to run nothing: the first round, priced in full, no
    longer fitted; after 4, it ran but the killed part's spend was nobody's.)"""
    import warden.bench.suite_runner as suite_runner
    from test_scheduler_support import AGENT as FAKE, MODEL, FakeBackend, make_workbench
    from warden.bench.scheduler import BenchRequest, BenchScheduler, JobSpec
    from warden.config import load_settings
    from warden.select import nightly
    from warden.store.db import open_store
    from warden.store.models import BenchRun, NightlyRun, Rule

    golden = tmp_path / "golden"
    (golden / FAKE).mkdir(parents=True)
    (golden / FAKE / "agent.md").write_text("---\nname: fakeagent\n---\nYou are a fake agent.\n")
    monkeypatch.setenv("WARDEN_GOLDEN_DIR", str(golden))
    monkeypatch.setenv("WARDEN_CONCURRENCY", "1")
    monkeypatch.setenv("WARDEN_EVIDENCE_BUDGET_TOKENS", "100000000")  # the night's budget is what binds
    monkeypatch.setattr(suite_runner, "open_workbench",
                        lambda *a, **kw: (make_workbench(tmp_path, FakeBackend), MODEL))

    def home(name: str):  # type: ignore[no-untyped-def]
        """A fresh warden home with one candidate and a bench pass that prices a round."""
        monkeypatch.setenv("WARDEN_HOME", str(tmp_path / name))
        settings = load_settings()
        store = open_store(settings)
        with store.session() as s:
            rule = Rule(agent=FAKE, body="Grep for the symbol or text you need before opening any file.")
            s.add(rule)
            s.flush()
            rule_id = rule.id
        bench = make_workbench(tmp_path, FakeBackend)
        jobs = tuple(JobSpec(t.id, (), 0) for t in bench.suite.tasks)
        BenchScheduler(store, bench, concurrency=1).run_request(BenchRequest(FAKE, jobs, 5, "sim", MODEL))
        with store.session() as s:
            full_pass = 2 * sum(r.weighted_tokens for r in s.query(BenchRun))
        return store, settings, rule_id, round(1.3 * full_pass)  # a first round and part of a second

    def night_spend(store) -> float:  # type: ignore[no-untyped-def]
        with store.session() as s:
            return float(s.query(NightlyRun).one().summary["tokens_spent"])

    def undecided(store, rule_id: int) -> float:  # type: ignore[no-untyped-def]
        with store.session() as s:
            return float(s.get(Rule, rule_id).undecided_tokens)

    # the uninterrupted night
    store, settings, rule_id, budget = home("whole")
    whole = nightly.run_nightly(store, settings, agents=[FAKE], budget_tokens=budget, collect=False)
    assert whole.selects[0].runs_made >= 8 and not whole.selects[0].decisions  # undecided: budget spent
    assert undecided(store, rule_id) > 0
    expected = (undecided(store, rule_id), night_spend(store))

    # the same night killed in its first round (3 pairs), after its 4th or 5th select run...
    store, settings, rule_id, budget = home("killed")
    original = BenchScheduler._record
    made: list[int] = []

    def killed(self, *args, **kw):  # type: ignore[no-untyped-def]
        record = original(self, *args, **kw)  # stored, as a run finished before a kill is
        made.append(1)
        if len(made) == killed_after:
            raise KeyboardInterrupt
        return record

    monkeypatch.setattr(BenchScheduler, "_record", killed)
    with pytest.raises(KeyboardInterrupt):
        nightly.run_nightly(store, settings, agents=[FAKE], budget_tokens=budget, collect=False)
    monkeypatch.setattr(BenchScheduler, "_record", original)
    # ...and run again: its runs are reused, the rounds they belong to bought with what is left
    resumed = nightly.run_nightly(store, settings, agents=[FAKE], budget_tokens=budget, collect=False)
    assert resumed.resumed and resumed.spent_before_resume > 0
    report = resumed.selects[0]
    assert report.runs_reused == killed_after and report.runs_made > 0
    assert (undecided(store, rule_id), night_spend(store)) == pytest.approx(expected)


def test_a_resumed_night_reports_the_decisions_and_memory_change_of_the_whole_night(
        warden_home: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """Killed after its first decision, the resumed night used to list only the later one and
    call MEMORY.md's change since the resume the night's: its summary (text, --json, the stored
    row) now covers the whole night, the decisions before the resume marked as such."""
    import warden.bench.suite_runner as suite_runner
    from test_scheduler_support import AGENT as FAKE, MODEL, FakeBackend, make_workbench
    from warden.cli.app import main
    from warden.config import load_settings
    from warden.select import nightly
    from warden.select.selector import Selector
    from warden.store.db import open_store
    from warden.store.models import NightlyRun, Receipt, Rule

    golden = tmp_path / "golden"
    (golden / FAKE).mkdir(parents=True)
    (golden / FAKE / "agent.md").write_text("---\nname: fakeagent\n---\nYou are a fake agent.\n")
    monkeypatch.setenv("WARDEN_GOLDEN_DIR", str(golden))
    monkeypatch.setenv("WARDEN_EVIDENCE_BUDGET_TOKENS", "2000000")
    monkeypatch.setattr(suite_runner, "open_workbench",
                        lambda *a, **kw: (make_workbench(tmp_path, FakeBackend), MODEL))
    store = open_store(load_settings())
    with store.session() as s:
        rules = [Rule(agent=FAKE, body="Grep for the symbol or text you need before opening any file."),
                 Rule(agent=FAKE, body="Keep replies brief: no narration between tool calls.")]
        s.add_all(rules)
        s.flush()
        first, second = (r.id for r in rules)
    original = Selector._commit

    def killed(self, *args, **kw):  # type: ignore[no-untyped-def]
        original(self, *args, **kw)  # the first decision's receipt and compile are stored...
        raise KeyboardInterrupt  # ...and the night is killed before the next one

    monkeypatch.setattr(Selector, "_commit", killed)
    with pytest.raises(KeyboardInterrupt):
        nightly.run_nightly(store, load_settings(), agents=[FAKE], collect=False)
    monkeypatch.setattr(Selector, "_commit", original)
    with store.session() as s:
        assert [r.rule_id for r in s.query(Receipt)] == [first]
    assert main(["nightly", "--agents", FAKE]) == 0
    out = capsys.readouterr().out
    with store.session() as s:
        receipts = {r.rule_id: r.id for r in s.query(Receipt)}
        in_memory = sorted(r.id for r in s.query(Rule) if r.state in ("active", "probation"))
        night = s.query(NightlyRun).one()
        stored = night.summary
    assert set(receipts) == {first, second} and night.status == "done"
    assert stored["resumed"] and len(stored["agents"]) == 1
    report = stored["agents"][0]
    assert [(d["rule_id"], d["receipt_id"], d.get("decided_before_resume", False)) for d in report["decisions"]] \
        == [(first, receipts[first], True), (second, receipts[second], False)]
    assert report["decisions"][0]["state_before"] == "candidate"
    memory = report["memory"]  # there was no MEMORY.md when the night started: the night created it
    assert memory["added"] == in_memory and memory["removed"] == [] and memory["changed"] and memory["created"]
    assert f"  decided before this night was resumed: rule {first}" in out.splitlines() and " tokens since the resume (" in out
    assert first in in_memory  # kept before the kill: the resumed part did not add it, the night did
    assert f"MEMORY.md v{memory['version']} created with {', '.join(f'rule {i}' for i in in_memory)} →" in out


def test_a_resumed_night_counts_what_its_interrupted_part_collected_and_distilled(warden_home: Path,
                                                                                  monkeypatch) -> None:
    """Killed while distilling, the re-run said "0 runs collected" and counted only its own
    distillations: the night's counts are kept as they accrue and carried across the resume."""
    import warden.distill.service as service
    import warden.ingest.collector as collector
    import warden.select.nightly as nightly
    import warden.select.selector as selector
    from warden.config import load_settings
    from warden.ingest.collector import CollectSummary
    from warden.select.selector import SelectReport
    from warden.store.db import open_store
    from warden.store.models import NightlyRun

    def report(i: int, admitted: int) -> service.RunReport:
        return service.RunReport(source_path=f"/t/s{i}.jsonl", run_id=i, model_tokens=100,
                                 admitted=[{"body": f"rule {i}.{j}"} for j in range(admitted)])

    collected = iter([155, 0])
    monkeypatch.setattr(collector, "collect_paths",
                        lambda *a, **k: CollectSummary(runs_updated=next(collected)))

    def killed_distill(*a, on_report=lambda r: None, **k):  # type: ignore[no-untyped-def]
        for i in range(3):  # three runs stored, then killed
            on_report(report(i, 2))
        raise KeyboardInterrupt

    rest = _distilling([report(3, 1), service.RunReport(source_path="/t/s4.jsonl", run_id=4, infra_error=True)])

    monkeypatch.setattr(selector, "select_agent", lambda store, settings, agent, **kw: SelectReport(agent, "sim", "m"))
    store = open_store(load_settings())
    monkeypatch.setattr(service, "distill_runs", killed_distill)
    with pytest.raises(KeyboardInterrupt):
        nightly.run_nightly(store, load_settings(), agents=["docs"])
    monkeypatch.setattr(service, "distill_runs", rest)
    summary = nightly.run_nightly(store, load_settings(), agents=["docs"])
    assert summary.resumed
    counts = ("collected_runs", "distilled_runs", "candidates_added", "distill_model_tokens")
    night = {k: summary.to_json()[k] for k in counts}
    assert night == {"collected_runs": 155, "distilled_runs": 4, "candidates_added": 7, "distill_model_tokens": 400}
    with store.session() as s:
        stored = s.query(NightlyRun).one().summary
    assert {k: stored[k] for k in counts} == night
