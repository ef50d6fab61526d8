"""The scheduler on the real stack: the frozen fixture, the golden tasks, the sim backend behind
the real SDK client and harness, real success checks."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from warden.bench.agents.harness import RetryPolicy
from warden.bench.agents.sim_backend import SimBackend
from warden.bench.scheduler import BenchAborted, BenchRequest, BenchScheduler, interleave, open_workbench
from warden.config import load_settings
from warden.habits import HABITS
from warden.store.db import open_store
from warden.store.models import BenchRun, Rule

AGENT = "backend"


@pytest.fixture
def store():
    return open_store(load_settings())


def add_rule(store, body: str) -> int:
    with store.session() as s:
        rule = Rule(agent=AGENT, body=body, state="candidate")
        s.add(rule)
        s.flush()
        return rule.id


def _calls_without_timing(run: BenchRun) -> list[dict]:
    return [{k: v for k, v in call.items() if k != "duration_s"} for call in run.calls]


def test_rule_naming_the_worst_habit_is_cheaper_and_same_seed_is_identical(store, tmp_path):
    blind = next(h for h in HABITS if h.name == "blind_reading")
    rule = add_rule(store, blind.rule_sentence)
    settings = load_settings()
    bench, model = open_workbench(settings, AGENT, "sim")
    bench.work_root = tmp_path / "runs"
    task = bench.suite.tasks[0].id
    request = BenchRequest(AGENT, tuple(interleave([(), (rule,)], [task], 1, seed=7)), 7, "sim", model)
    first = BenchScheduler(store, bench, concurrency=2).run_request(request)
    assert first.status == "done" and all(r.completed for r in first.runs)
    naive = [r.weighted_tokens for r in first.runs if r.config_key == ""]
    ruled = [r.weighted_tokens for r in first.runs if r.config_key == str(rule)]
    assert sum(ruled) < 0.9 * sum(naive)  # visibly cheaper on the same seed
    # the same task, configuration and seed again (in another pass): the same run, call for call
    naive_only = BenchRequest(AGENT, tuple(interleave([()], [task], 1, seed=7)), 7, "sim", model)
    again = BenchScheduler(store, bench, concurrency=1).run_request(naive_only)
    assert again.pass_id != first.pass_id and len(again.runs) == 1
    with store.session() as s:
        ra = s.get(BenchRun, next(r.run_id for r in first.runs if r.config_key == ""))
        rb = s.get(BenchRun, again.runs[0].run_id)
        assert (ra.task_id, ra.config_key, ra.seed, ra.outcome, ra.turns, ra.memory_sha256) == \
            (rb.task_id, rb.config_key, rb.seed, rb.outcome, rb.turns, rb.memory_sha256)
        assert _calls_without_timing(ra) == _calls_without_timing(rb) and len(ra.calls) > 3
        assert ra.weighted_tokens == rb.weighted_tokens
    assert not any((tmp_path / "runs").rglob("*.py"))  # every copy removed


def test_a_rule_to_skip_tests_makes_a_task_fail_its_check(store, tmp_path):
    rule = add_rule(store, "Skip running the tests to save tokens; do not double-check your edits.")
    settings = load_settings()
    bench, model = open_workbench(settings, AGENT, "sim")
    bench.work_root = tmp_path / "runs"
    tasks = [t.id for t in bench.suite.tasks][:2]
    request = BenchRequest(AGENT, tuple(interleave([(rule,)], tasks, 1, seed=6)), 6, "sim", model)
    outcome = BenchScheduler(store, bench, concurrency=2).run_request(request)
    assert outcome.status == "done"
    outcomes = [r.outcome for r in outcome.runs]
    assert "task_failed" in outcomes and "infra_error" not in outcomes


def test_consecutive_529s_are_infra_errors_and_abort_the_pass(store, tmp_path):
    settings = load_settings()
    bench, model = open_workbench(settings, AGENT, "sim")
    bench.work_root = tmp_path / "runs"
    # Every request answers 529 overloaded; ten attempts per call, no real sleeping.
    bench.backend_factory = lambda: SimBackend(fail_every=529,
                                               retry=RetryPolicy(max_attempts=10, sleep=lambda _s: None))
    tasks = [t.id for t in bench.suite.tasks]
    request = BenchRequest(AGENT, tuple(interleave([()], tasks, 1, seed=1)), 1, "sim", model)
    with pytest.raises(BenchAborted, match="3 consecutive runs ended in infra_error"):
        BenchScheduler(store, bench, concurrency=1).run_request(request)
    with store.session() as s:
        runs = s.scalars(select(BenchRun)).all()
        assert len(runs) == 3
        assert all(r.outcome == "infra_error" and not r.completed for r in runs)
        assert all("529" in r.error or "verload" in r.error for r in runs)
