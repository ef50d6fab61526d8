"""The bench scheduler with a fake backend: plan, pairing, recording, resume, infra aborts,
budget, baselines, spend share, clean-up of copies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench, standard_request
from warden.bench.scheduler import (BenchAborted, BenchRequest, BenchScheduler, NullProgress, RunRecord,
                                    interleave, job_seed, memory_for, paired_differences, spend_share,
                                    summarize, update_baseline)
from warden.config import load_settings
from warden.errors import UsageError
from warden.store.db import open_store
from warden.store.models import Baseline, BenchJob, BenchPass, BenchRun, Rule, RulesetVersion, SessionRun, utcnow


@pytest.fixture
def store():
    return open_store(load_settings())


def add_rule(store, body: str, state: str = "candidate", agent: str = AGENT) -> int:
    with store.session() as s:
        rule = Rule(agent=agent, body=body, state=state)
        s.add(rule)
        s.flush()
        return rule.id


def count(store, model, *where) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def test_interleave_pairs_blocks_share_seeds_and_order_is_seeded():
    jobs = interleave([(), (7,), (3, 2)], ["a", "b"], 3, seed=5)
    assert len(jobs) == 2 * 3 * 3
    blocks = [jobs[i:i + 3] for i in range(0, len(jobs), 3)]
    for block in blocks:  # each block: one task/replicate, every configuration once
        assert len({(j.task_id, j.rep) for j in block}) == 1
        assert sorted(j.config_key for j in block) == ["", "2,3", "7"]
    assert interleave([(), (7,), (3, 2)], ["a", "b"], 3, seed=5) == jobs
    assert interleave([(), (7,), (3, 2)], ["a", "b"], 3, seed=6) != jobs
    # the within-block order is random too, not always the reference first
    assert len({block[0].config_key for block in blocks}) > 1
    assert job_seed(5, "a", 0) == job_seed(5, "a", 0) != job_seed(5, "a", 1)


def test_pass_records_every_run_with_its_configuration_and_cleans_copies(store, tmp_path):
    rule = add_rule(store, "Grep for the symbol before opening any file.")
    backends: list[FakeBackend] = []

    def factory():
        backends.append(FakeBackend())
        return backends[-1]

    bench = make_workbench(tmp_path, factory)
    outcome = BenchScheduler(store, bench, concurrency=2).run_request(standard_request(bench, (rule,)))
    assert outcome.status == "done" and outcome.total_jobs == 12 and outcome.executed == 12
    assert len(outcome.runs) == 12 and all(r.completed for r in outcome.runs)
    assert len(backends) == 2  # one backend per worker
    with store.session() as s:
        rows = s.scalars(select(BenchRun)).all()
        assert {r.config_key for r in rows} == {"", str(rule)}
        with_rule = [r for r in rows if r.config_key == str(rule)]
        assert all(r.rule_ids == [rule] and r.ruleset_version is None for r in with_rule)
        assert len({r.memory_sha256 for r in rows}) == 2
        assert all(r.backend == "fake" and r.model == MODEL and r.fixture_hash == "f" * 64 for r in rows)
        assert all(r.weighted_tokens > 0 and r.calls and r.calls[0]["input"] > 0 for r in rows)
        assert all(r.seed == j.seed for j in s.scalars(select(BenchJob)) for r in rows if r.id == j.bench_run_id)
    # every copy was removed, and the original fixture never touched
    assert not any((tmp_path / "runs").rglob("app.py"))
    assert "# fixed" not in (tmp_path / "fixture" / "app.py").read_text()
    # a rule naming the fake's habit makes the paired runs cheaper
    diffs = paired_differences(outcome.runs, "", str(rule))
    assert diffs and all(d > 0 for ds in diffs.values() for d in ds)


def test_system_prompt_is_agent_md_plus_rendered_memory(store, tmp_path):
    rule = add_rule(store, "Keep replies brief: no narration between tool calls.")
    seen: list[str] = []

    class Spy(FakeBackend):
        def run(self, task, workdir, system_prompt, seed, caps):
            seen.append(system_prompt)
            return super().run(task, workdir, system_prompt, seed, caps)

    bench = make_workbench(tmp_path, Spy, n_tasks=1)
    BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench, (rule,)))
    with store.session() as s:
        expected = "You are a fake agent.\n\n" + memory_for(s, AGENT, [rule]).text
    assert expected in seen and any("(no rules yet)" in p for p in seen)


def test_a_finished_plan_asked_again_is_measured_again_identically(store, tmp_path):
    bench = make_workbench(tmp_path, FakeBackend)
    first = BenchScheduler(store, bench).run_request(standard_request(bench))
    again = BenchScheduler(store, bench).run_request(standard_request(bench))
    assert again.pass_id != first.pass_id and again.executed == 6 and not again.resumed
    assert [(r.task_id, r.seed, r.weighted_tokens) for r in again.runs] == \
        [(r.task_id, r.seed, r.weighted_tokens) for r in first.runs]
    assert count(store, BenchRun) == 12


class InterruptAfter(NullProgress):
    def __init__(self, k: int) -> None:
        self.k = k
        self.finished = 0

    def job_finished(self, job, run) -> None:
        self.finished += 1
        if self.finished == self.k:
            raise KeyboardInterrupt


def test_interrupt_after_k_jobs_then_resume_runs_only_the_rest(store, tmp_path):
    bench = make_workbench(tmp_path, FakeBackend)
    request = standard_request(bench)
    with pytest.raises(KeyboardInterrupt):
        BenchScheduler(store, bench, concurrency=2, progress=InterruptAfter(2)).run_request(request)
    done_before = count(store, BenchJob, BenchJob.status == "done")
    assert done_before >= 2
    assert count(store, BenchJob, BenchJob.status == "running") == 0  # in-flight went back to pending
    assert count(store, BenchPass, BenchPass.status == "interrupted") == 1
    assert not any((tmp_path / "runs").iterdir())  # copies cleaned up on Ctrl-C
    with store.session() as s:
        kept = {j.id: j.bench_run_id for j in s.scalars(select(BenchJob).where(BenchJob.status == "done"))}
    resumed = BenchScheduler(store, bench).run_request(request)
    assert resumed.resumed and resumed.status == "done"
    assert resumed.executed == 6 - done_before
    with store.session() as s:
        for job_id, run_id in kept.items():
            assert s.get(BenchJob, job_id).bench_run_id == run_id  # finished runs were not repeated
    # runs from the interrupted attempt that finished late were stored too, never double-counted per job
    assert count(store, BenchJob, BenchJob.status == "done") == 6
    assert len(resumed.runs) == 6


def test_sigkilled_scheduler_resumes_without_repeating_finished_runs(store, tmp_path):
    env = dict(os.environ)
    helper = Path(__file__).with_name("test_scheduler_support.py")
    env["PYTHONPATH"] = os.pathsep.join([str(helper.parent), env.get("PYTHONPATH", "")])
    child = subprocess.Popen([sys.executable, str(helper), str(tmp_path), "0.3"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if count(store, BenchJob, BenchJob.status == "done") >= 2:
                    break
            except Exception:  # the child may still be migrating the database
                pass
            assert child.poll() is None, child.stderr.read().decode()
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    done_before = count(store, BenchJob, BenchJob.status == "done")
    assert 2 <= done_before < 6
    assert any((tmp_path / "runs").iterdir())  # SIGKILL left its copy behind...
    bench = make_workbench(tmp_path, FakeBackend)
    outcome = BenchScheduler(store, bench).run_request(standard_request(bench))
    assert outcome.resumed and outcome.status == "done" and outcome.executed == 6 - done_before
    assert count(store, BenchRun) == 6  # nothing ran twice
    assert not any((tmp_path / "runs").iterdir())  # ...which the next scheduler swept


def test_sigterm_cleans_up_and_leaves_a_resumable_pass(store, tmp_path):
    env = dict(os.environ)
    helper = Path(__file__).with_name("test_scheduler_support.py")
    env["PYTHONPATH"] = os.pathsep.join([str(helper.parent), env.get("PYTHONPATH", "")])
    child = subprocess.Popen([sys.executable, str(helper), str(tmp_path), "0.5"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if count(store, BenchJob, BenchJob.status == "done") >= 1:
                    break
            except Exception:  # the child may still be migrating the database
                pass
            assert child.poll() is None, child.stderr.read().decode()
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode not in (0, -signal.SIGTERM)  # handled, not killed by the signal
    assert b"BenchInterrupted" in err
    assert not any((tmp_path / "runs").iterdir())  # its copies were removed on the way out
    assert count(store, BenchJob, BenchJob.status == "running") == 0
    assert count(store, BenchPass, BenchPass.status == "interrupted") == 1


def test_ctrl_c_ends_the_runs_in_flight_and_leaves_no_copy_or_temp_dir(store, tmp_path):
    """SIGINT while runs are inside a command that outlasts the interrupt's grace (a slow pytest):
    the commands are killed, so the process exits at once, and no copy, run temp directory or
    command outlives it to write into them (they used to, once the process had exited)."""
    env = dict(os.environ)
    helper = Path(__file__).with_name("test_scheduler_support.py")
    env["PYTHONPATH"] = os.pathsep.join([str(helper.parent), env.get("PYTHONPATH", "")])
    temp = tmp_path / "tmp"
    temp.mkdir()
    env["TMPDIR"] = str(temp)
    command_s = 6.0  # margins for a loaded machine: the interrupt lands mid-command, the exit takes < 4 s
    child = subprocess.Popen([sys.executable, str(helper), str(tmp_path), str(command_s), "command"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(temp.glob(f"warden-run-tmp-pid{child.pid}-*")):
            assert child.poll() is None, child.stderr.read().decode()
            time.sleep(0.05)
        time.sleep(0.3)  # the run is inside its command
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
    assert b"KeyboardInterrupt" in err, f"exit {child.returncode}; stdout {out!r}; stderr {err!r}"
    assert took < 1.0 + command_s / 2, f"exited {took:.1f}s after the interrupt"
    time.sleep(command_s + 0.5)  # past the end an abandoned command would have had
    assert not [p for p in (tmp_path / "runs").rglob("*")], "a run copy was left behind"
    assert not list(temp.glob("warden-run-tmp-*")), "a run temp directory was left behind"
    assert count(store, BenchJob, BenchJob.status == "running") == 0
    assert count(store, BenchPass, BenchPass.status == "interrupted") == 1


def test_an_unusable_work_directory_aborts_the_pass_as_infrastructure(store, tmp_path):
    """A work root the bench cannot use (read-only, full, someone else's; here a file) is the
    machine's failure: an abort to resume from, not an internal error."""
    bench = make_workbench(tmp_path, FakeBackend)
    bench.work_root.parent.mkdir(parents=True, exist_ok=True)
    bench.work_root.write_text("not a directory")
    with pytest.raises(BenchAborted, match="cannot make its work directory"):
        BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench))
    with store.session() as s:
        assert s.scalars(select(BenchPass)).one().status == "aborted"
    bench.work_root.unlink()
    assert BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench)).status == "done"


def test_the_default_work_root_is_the_users_own() -> None:
    from warden.bench.scheduler import WORK_ROOT

    assert WORK_ROOT.name == f"warden-bench-runs-{os.getuid()}"


def test_consecutive_infra_errors_abort_the_pass(store, tmp_path):
    bench = make_workbench(tmp_path, lambda: FakeBackend(infra=True))
    with pytest.raises(BenchAborted, match="3 consecutive runs ended in infra_error.*529 overloaded"):
        BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench))
    with store.session() as s:
        assert s.scalars(select(BenchPass)).one().status == "aborted"
        runs = s.scalars(select(BenchRun)).all()
        assert len(runs) == 3 and {r.outcome for r in runs} == {"infra_error"}
        assert not any(r.completed for r in runs)
        assert s.scalars(select(Baseline)).all() == []
    assert count(store, BenchJob, BenchJob.status == "done") == 0  # nothing counted as a result
    # once the backend recovers, the same plan resumes and retries those jobs
    healthy = make_workbench(tmp_path, FakeBackend)
    outcome = BenchScheduler(store, healthy).run_request(standard_request(healthy))
    assert outcome.status == "done" and outcome.executed == 6
    assert {r.outcome for r in outcome.runs} == {"completed"}


def test_a_crashing_backend_is_an_infra_error_and_threshold_is_configurable(store, tmp_path):
    bench = make_workbench(tmp_path, lambda: FakeBackend(crash=True))
    with pytest.raises(BenchAborted, match="5 consecutive.*ConnectionError: backend exploded"):
        BenchScheduler(store, bench, concurrency=2, max_consecutive_infra=5).run_request(standard_request(bench))
    assert count(store, BenchRun, BenchRun.outcome == "infra_error") >= 5
    assert count(store, BenchRun, BenchRun.outcome == "task_failed") == 0


def test_false_economy_is_a_task_failure_not_infra(store, tmp_path):
    rule = add_rule(store, "Skip running tests to save tokens.")
    bench = make_workbench(tmp_path, lambda: FakeBackend(fail_on="Skip running tests"))
    outcome = BenchScheduler(store, bench).run_request(standard_request(bench, (rule,)))
    assert outcome.status == "done"
    summary = {(c.task_id, c.config_key): c for c in summarize(outcome.runs)}
    assert all(summary[(t, str(rule))].completed == 0 for t, _ in summary)
    assert all(summary[(t, "")].completion_rate == 1.0 for t, _ in summary)


def test_budget_stops_before_exceeding_and_a_larger_budget_continues(store, tmp_path):
    bench = make_workbench(tmp_path, FakeBackend)
    probe = BenchScheduler(store, bench).run_request(
        BenchRequest(AGENT, tuple(interleave([()], ["golden-01", "golden-02", "golden-03"], 1, seed=1)), 1,
                     "fake", MODEL))
    per_run = max(r.weighted_tokens for r in probe.runs)
    request = standard_request(bench)
    budget = int(per_run * 2.5)
    limited = BenchRequest(request.agent, request.jobs, request.seed, request.backend, request.model,
                           budget_tokens=budget)
    outcome = BenchScheduler(store, bench, concurrency=1).run_request(limited)
    assert outcome.status == "partial" and "budget" in outcome.message
    assert 0 < outcome.executed < 6 and outcome.spent_weighted <= budget
    same = BenchScheduler(store, bench).run_request(limited)  # the budget covers the whole pass
    assert same.pass_id == outcome.pass_id and same.status == "partial" and same.executed == 0
    bigger = BenchRequest(request.agent, request.jobs, request.seed, request.backend, request.model,
                          budget_tokens=budget * 100)
    rest = BenchScheduler(store, bench).run_request(bigger)
    assert rest.pass_id == outcome.pass_id and rest.status == "done"
    assert rest.executed == 6 - outcome.executed


def test_baseline_freezes_run1_and_only_lowers_best(store, tmp_path):
    candidate = add_rule(store, "Grep for the symbol before opening any file.")
    bench = make_workbench(tmp_path, FakeBackend, n_tasks=1)
    BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench, (candidate,)))
    with store.session() as s:
        baseline = s.scalars(select(Baseline)).one()
        first_run = s.get(BenchRun, baseline.run1_run_id)
        assert first_run.config_key == ""  # the candidate is not the active set
        run1 = baseline.run1_weighted
        assert baseline.best_weighted == min(r.weighted_tokens for r in s.scalars(
            select(BenchRun).where(BenchRun.config_key == "")))
        # later runs on the same fixture never change run1; a costlier run never raises best
        costly = BenchRun(agent=AGENT, task_id=first_run.task_id, config_key="", backend="fake", model=MODEL,
                          seed=1, suite_hash="x", fixture_hash=first_run.fixture_hash, outcome="completed", completed=True,
                          weighted_tokens=run1 * 10)
        cheap = BenchRun(agent=AGENT, task_id=first_run.task_id, config_key="", backend="fake", model=MODEL,
                         seed=2, suite_hash="x", fixture_hash=first_run.fixture_hash, outcome="completed", completed=True,
                         weighted_tokens=1.0)
        s.add_all([costly, cheap])
        s.flush()
        best_before = baseline.best_weighted
        update_baseline(s, costly)
        assert baseline.best_weighted == best_before and baseline.run1_weighted == run1
        update_baseline(s, cheap)
        assert baseline.best_weighted == 1.0 and baseline.run1_weighted == run1
        assert baseline.best_run_id == cheap.id


def test_a_new_fixture_version_starts_a_fresh_baseline_and_never_mixes_runs(store, tmp_path):
    """Baselines were keyed by agent, task, backend and model only: after a new fixture version a
    task's frozen run1 stayed the old fixture's while its best came down to a (cheaper) run on the
    new one — one baseline mixing two fixtures, and the suite's figures read it as a saving."""
    import dataclasses
    import shutil
    from statistics import median

    from warden.report.figures import golden_suite

    old = make_workbench(tmp_path, FakeBackend)
    BenchScheduler(store, old, concurrency=1).run_request(standard_request(old))
    with store.session() as s:
        frozen = {(b.task_id, b.run1_run_id, b.run1_weighted, b.best_run_id, b.best_weighted)
                  for b in s.scalars(select(Baseline))}
    assert len(frozen) == 3
    # a new fixture version: smaller, so the fake's runs on it are cheaper than any on the old one
    new_dir = tmp_path / "fixture-v2"
    shutil.copytree(old.fixture_dir, new_dir)
    (new_dir / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    new = dataclasses.replace(old, fixture_dir=new_dir, fixture_hash="e" * 64)
    BenchScheduler(store, new, concurrency=1).run_request(standard_request(new))
    with store.session() as s:
        baselines = s.scalars(select(Baseline)).all()
        assert sorted((b.task_id, b.fixture_hash) for b in baselines) == sorted(
            (t.id, h) for t in old.suite.tasks for h in ("f" * 64, "e" * 64))  # one per task and fixture
        for b in baselines:
            run1, best = s.get(BenchRun, b.run1_run_id), s.get(BenchRun, b.best_run_id)
            assert run1.fixture_hash == best.fixture_hash == b.fixture_hash, b.task_id
            assert b.best_weighted == min(s.scalars(select(BenchRun.weighted_tokens).where(
                BenchRun.task_id == b.task_id, BenchRun.fixture_hash == b.fixture_hash)))
        # the old fixture's baselines are left exactly as they were frozen
        assert {(b.task_id, b.run1_run_id, b.run1_weighted, b.best_run_id, b.best_weighted)
                for b in baselines if b.fixture_hash == "f" * 64} == frozen
        # the figures read the current fixture's baselines and runs only
        suite = golden_suite(s, AGENT)
        current = [b for b in baselines if b.fixture_hash == "e" * 64]
        assert suite["fixture_hash"] == "e" * 64 and suite["other_fixtures"] == 1
        assert suite["run1_total"] == pytest.approx(sum(b.run1_weighted for b in current))
        assert {t["task_id"]: t["best"] for t in suite["tasks"]} == {b.task_id: b.best_weighted for b in current}
        assert suite["now_total"] == pytest.approx(sum(median(s.scalars(select(BenchRun.weighted_tokens).where(
            BenchRun.task_id == b.task_id, BenchRun.fixture_hash == "e" * 64))) for b in current))


def test_active_set_records_its_ruleset_version(store, tmp_path):
    active = add_rule(store, "Grep for the symbol before opening any file.", state="active")
    with store.session() as s:
        s.add(RulesetVersion(agent=AGENT, version=4, rule_ids=[active], memory_sha256="0" * 64))
    bench = make_workbench(tmp_path, FakeBackend, n_tasks=1)
    BenchScheduler(store, bench).run_request(standard_request(bench, (active,)))
    with store.session() as s:
        rows = s.scalars(select(BenchRun)).all()
        assert {(r.config_key, r.ruleset_version) for r in rows} == {("", None), (str(active), 4)}
        assert "v4" in memory_for(s, AGENT, [active]).text
        # another set is labelled as the version it would compile to: same header bytes
        other = memory_for(s, AGENT, [])
        assert other.ruleset_version is None and "v5" in other.text.splitlines()[1]
        assert len(other.text.splitlines()[1]) == len(memory_for(s, AGENT, [active]).text.splitlines()[1])
        baseline = s.scalars(select(Baseline)).one()
        assert s.get(BenchRun, baseline.run1_run_id).config_key == str(active)


def test_a_candidate_sets_runs_stay_reusable_when_a_compile_bumps_the_version_it_would_get(store):
    """A candidate set is labelled as the version it would compile to, so a night's closing
    compile (even of an unchanged, empty set) moved the label and with it the memory hash: the
    next night bought again the runs an undecided rule had already paid for."""
    from warden.select.compile import compile_memory
    from warden.config import load_settings

    candidate = add_rule(store, "Grep for the symbol before opening any file.", state="candidate")
    with store.session() as s:
        before = memory_for(s, AGENT, [candidate])
        compile_memory(s, load_settings(), AGENT)  # the night's compile: the empty active set becomes v1
    with store.session() as s:
        after = memory_for(s, AGENT, [candidate])
    assert "v1" in before.text.splitlines()[1] and "v2" in after.text.splitlines()[1]
    assert after.sha256 == before.sha256  # the same rules, rendered the same way: reusable


def test_a_kept_rule_that_measured_least_keeps_its_measured_memory(store):
    """The memory a candidate was measured with is the new active set's when its keep leaves the
    order as it was: it measured least (a candidate sits after the measured rules, before the
    protected ones). Its runs then serve as the new reference's, with nothing bought again."""
    measured = add_rule(store, "Grep for the symbol before opening any file.", state="active")
    protected = add_rule(store, "Never push to main without review.", state="protected")
    candidate = add_rule(store, "Never re-read a file you have already read.", state="candidate")
    with store.session() as s:
        s.get(Rule, measured).measured_saving = 900.0
        s.flush()
        on_the_bench = memory_for(s, AGENT, [measured, protected, candidate])
        lines = [line for line in on_the_bench.text.splitlines() if line.startswith("- ")]
        assert lines == ["- Grep for the symbol before opening any file.",
                         "- Never re-read a file you have already read.", "- Never push to main without review."]
        kept = s.get(Rule, candidate)
        kept.state, kept.measured_saving = "active", 300.0  # kept, measuring least
        s.flush()
        assert memory_for(s, AGENT, [measured, protected, candidate]).sha256 == on_the_bench.sha256
        kept.measured_saving = 1200.0  # kept, measuring best: it moves up, a new memory
        s.flush()
        assert memory_for(s, AGENT, [measured, protected, candidate]).sha256 != on_the_bench.sha256


def test_unknown_or_foreign_rules_and_tasks_are_refused(store, tmp_path):
    foreign = add_rule(store, "Grep first.", agent="someone-else")
    bench = make_workbench(tmp_path, FakeBackend)
    scheduler = BenchScheduler(store, bench)
    with pytest.raises(UsageError, match="unknown rule id"):
        scheduler.plan(standard_request(bench, (999,)))
    with pytest.raises(UsageError, match="another agent"):
        scheduler.plan(standard_request(bench, (foreign,)))
    with pytest.raises(UsageError, match="no golden task"):
        scheduler.plan(BenchRequest(AGENT, tuple(interleave([()], ["nope"], 1, 1)), 1, "fake", MODEL))
    assert count(store, BenchPass) == 0


def test_summary_and_spend_share():
    runs = [RunRecord(i, "t1", "", 1, "completed", True, w, int(w), 0.0, 3, 1.0)
            for i, w in enumerate([100.0, 200.0, 300.0])]
    runs.append(RunRecord(9, "t1", "", 1, "infra_error", False, 5.0, 5, 0.0, 1, 1.0))
    runs.append(RunRecord(10, "t1", "4", 1, "task_failed", False, 50.0, 50, 0.0, 1, 1.0))
    summary = summarize(runs)
    base = next(c for c in summary if c.config_key == "")
    assert (base.n, base.completed, base.mean_weighted, base.stdev_weighted) == (3, 3, 200.0, 100.0)
    assert next(c for c in summary if c.config_key == "4").completion_rate == 0.0


def test_spend_share_warns_above_ten_percent(store):
    now = utcnow()
    with store.session() as s:
        s.add(SessionRun(run_key="a:main", session_id="a", agent="main", weighted_tokens=1000.0, ended_at=now))
        s.add(SessionRun(run_key="b:main", session_id="b", agent="main", weighted_tokens=9e9,
                         ended_at=now - timedelta(days=30)))
        s.add(BenchRun(agent=AGENT, task_id="t", config_key="", backend="fake", model=MODEL, seed=1,
                       suite_hash="x", fixture_hash="y", outcome="completed", weighted_tokens=50.0))
    with store.session() as s:
        share = spend_share(s)
        assert share.share == pytest.approx(0.05) and share.warning is None
        s.add(BenchRun(agent=AGENT, task_id="t", config_key="", backend="fake", model=MODEL, seed=2,
                       suite_hash="x", fixture_hash="y", outcome="completed", weighted_tokens=100.0))
        s.flush()
        share = spend_share(s)
        assert share.share == pytest.approx(0.15) and "15%" in share.warning
    with store.session() as s:
        s.query(SessionRun).delete()
        assert spend_share(s).share is None


def test_an_abort_message_never_carries_terminal_escapes_from_the_backend(store, tmp_path):
    class HostileEndpoint(FakeBackend):  # an error text from a server or a CLI is untrusted
        def run(self, task, workdir, system_prompt, seed, caps):
            result = super().run(task, workdir, system_prompt, seed, caps)
            result.error = "529 \x1b[2J\x1b]0;pwned\x07over\u202eloaded\nsecond line"
            return result

    bench = make_workbench(tmp_path, lambda: HostileEndpoint(infra=True))
    with pytest.raises(BenchAborted) as caught:
        BenchScheduler(store, bench, concurrency=1).run_request(standard_request(bench))
    message = str(caught.value)
    assert "529 [2J]0;pwnedoverloaded second line" in message
    assert not any(ord(c) < 32 or c == "\u202e" for c in message)


def test_an_unpriced_first_pass_at_concurrency_runs_one_probe_before_more(store, tmp_path):
    """No earlier run prices any task: with a budget, one run goes first and prices the rest,
    so a budget smaller than two runs is not spent twice over by parallel workers."""
    bench = make_workbench(tmp_path, FakeBackend)
    request = standard_request(bench)
    probe_bench = make_workbench(tmp_path / "probe", FakeBackend)
    first = BenchScheduler(store, probe_bench, concurrency=1).run_request(
        BenchRequest(AGENT, request.jobs[:1], request.seed, request.backend, request.model))
    per_run = first.runs[0].weighted_tokens
    with store.session() as s:  # forget it: the real pass must start unpriced
        s.execute(BenchJob.__table__.delete())
        s.execute(Baseline.__table__.delete())
        s.execute(BenchRun.__table__.delete())
    limited = BenchRequest(request.agent, request.jobs, request.seed, request.backend, request.model,
                           budget_tokens=int(per_run * 1.5))
    outcome = BenchScheduler(store, bench, concurrency=4).run_request(limited)
    assert outcome.status == "partial" and outcome.executed == 1
    assert "reached" in outcome.message and f"{outcome.spent_weighted:,.0f} spent" in outcome.message


def test_sweep_removes_only_what_dead_processes_left(tmp_path):
    """Pass directories, and run and demo temp directories, named with the pid of a process that
    is gone are removed; a live process's, another program's, and a symlink are left alone."""
    from warden.bench.scheduler import sweep_stale_workdirs

    from warden.names import pid_namespace

    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = pid_namespace()
    gone, alive = f"pid{dead.pid}-ns{ns}", f"pid{os.getpid()}-ns{ns}"
    runs, temp = tmp_path / "runs", tmp_path / "tmp"
    names = {runs / f"pass-7-{gone}-abc": False, runs / f"pass-8-{alive}-abc": True,
             temp / f"warden-run-tmp-{gone}-x1": False, temp / f"warden-demo-{gone}-x2": False,
             temp / f"warden-run-tmp-{alive}-x3": True, temp / f"other-{gone}-x4": True,
             # a pid of another PID namespace (a container sharing /tmp) says nothing about ours
             temp / f"warden-run-tmp-pid{dead.pid}-ns1-x5": True}
    for path in names:
        (path / "inside").mkdir(parents=True)
    target = tmp_path / "kept"
    target.mkdir()
    (temp / f"warden-demo-{gone}-link").symlink_to(target)
    assert sweep_stale_workdirs(runs, temp) == 3
    assert {path: path.exists() for path in names} == names
    assert target.is_dir()


def test_a_pass_its_killed_process_left_running_is_marked_interrupted_by_the_next(store, tmp_path):
    """A SIGKILLed runner cannot mark its pass: the next pass on this host does, once the pid is
    gone, so no pass stays "running" for good (the resumed selector may plan a different one)."""
    import json
    import socket

    dead = subprocess.Popen(["true"])
    dead.wait()
    bench = make_workbench(tmp_path, FakeBackend)
    scheduler = BenchScheduler(store, bench)
    from dataclasses import replace

    stale_id, _ = scheduler.plan(replace(standard_request(bench), seed=21))
    alive_id, _ = scheduler.plan(replace(standard_request(bench), seed=22))
    from warden.names import pid_namespace

    other_ns_id, _ = scheduler.plan(replace(standard_request(bench), seed=24))
    with store.session() as s:
        for pass_id, pid, ns in ((stale_id, dead.pid, pid_namespace()), (alive_id, os.getppid(), pid_namespace()),
                                 (other_ns_id, dead.pid, "another-container")):
            s.get(BenchPass, pass_id).status = "running"
            s.get(BenchPass, pass_id).note = json.dumps(
                {"runner": {"host": socket.gethostname(), "pidns": ns, "pid": pid}})
        first_job = s.scalars(select(BenchJob).where(BenchJob.pass_id == stale_id)).first()
        first_job.status = "running"
    outcome = scheduler.run_request(replace(standard_request(bench), seed=23))
    assert outcome.status == "done"
    with store.session() as s:
        assert s.get(BenchPass, stale_id).status == "interrupted"
        assert s.get(BenchPass, alive_id).status == "running"  # its process lives: not ours to close
        assert s.get(BenchPass, other_ns_id).status == "running"  # its pid means nothing in our namespace
        assert count(store, BenchJob, BenchJob.pass_id == stale_id, BenchJob.status == "running") == 0


def test_the_work_root_must_be_this_users_own_directory(tmp_path):
    """In a shared /tmp another user may make the fixed-name work root first and then swap a
    fixture copy for code the runs execute as us: only a real directory of ours is used, and
    one that others may enter is closed."""
    import os
    import stat

    import pytest

    from warden.bench.scheduler import make_private_root

    mine = tmp_path / "runs"
    mine.mkdir(mode=0o777)
    os.chmod(mine, 0o777)
    make_private_root(mine)
    assert stat.S_IMODE(os.lstat(mine).st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(mine)
    with pytest.raises(OSError, match="symlink"):
        make_private_root(link)
    if os.getuid() == 0:  # as root, make one that belongs to someone else
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(OSError, match="belongs to uid 65534"):
            make_private_root(theirs)


def test_runs_under_other_caps_are_another_plan_to_resume():
    """A pass interrupted under the default caps is not resumed by a bench with a turn cap of 2:
    its runs would mix two measurements in one pass."""
    from warden.bench.results import RunCaps
    from warden.bench.scheduler import BenchRequest, JobSpec

    request = BenchRequest("backend", (JobSpec("golden-01", (), 0),), 7, "sim", "sim-naive-1")
    default = request.plan_key("s" * 64, "f" * 64, RunCaps())
    assert default == request.plan_key("s" * 64, "f" * 64)  # keys passes already have are kept
    assert request.plan_key("s" * 64, "f" * 64, RunCaps(max_turns=2)) != default


def test_a_task_never_run_is_priced_like_the_others_when_this_attempt_has_run_nothing():
    """A resumed attempt under a budget: the next block's task has no runs of its own and the
    attempt none yet — it is priced at the other tasks' mean, not at 0 (which let it overshoot)."""
    from warden.bench.scheduler import BenchScheduler, _ExecState

    assert BenchScheduler._estimate("golden-02", {"golden-01": 40_000.0, "golden-03": 60_000.0}, _ExecState()) == 50_000.0
    assert BenchScheduler._estimate("golden-01", {"golden-01": 40_000.0}, _ExecState()) == 40_000.0
    assert BenchScheduler._estimate("golden-02", {}, _ExecState()) == 0.0
