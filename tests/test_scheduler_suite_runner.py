"""The selector's suite runner over the scheduler: one record per (config, slot), pairing by
round, reuse of fresh stored runs, freshness and memory identity, infra aborts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
from warden.bench.scheduler import BenchAborted
from warden.bench.suite_runner import BenchSuiteRunner
from warden.config import load_settings
from warden.select.runner import PairRequest, SuiteRunner, run_config
from warden.store.db import open_store
from warden.store.models import BenchPass, BenchRun, Rule, RulesetVersion, utcnow


@pytest.fixture
def store():
    return open_store(load_settings())


def make_runner(store, tmp_path, factory=FakeBackend, **kw) -> BenchSuiteRunner:
    bench = make_workbench(tmp_path, factory)
    return BenchSuiteRunner(store, load_settings(), AGENT, backend="fake", bench=bench, model_id=MODEL,
                            concurrency=2, **kw)


def add_rule(store, body: str, state: str = "candidate") -> int:
    with store.session() as s:
        rule = Rule(agent=AGENT, body=body, state=state)
        s.add(rule)
        s.flush()
        return rule.id


def n_runs(store) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(BenchRun))


def test_one_record_per_config_and_slot_paired_by_round(store, tmp_path):
    rule = add_rule(store, "Grep for the symbol before opening any file.")
    runner = make_runner(store, tmp_path)
    assert isinstance(runner, SuiteRunner)
    reference, with_rule = frozenset(), frozenset({rule})
    slots = [PairRequest("golden-01", 0), PairRequest("golden-02", 0), PairRequest("golden-01", 1)]
    records = runner.run([reference, with_rule], slots)
    assert len(records) == 6
    assert {(r.task_id, r.round_index, r.config) for r in records} == {
        (s.task_id, s.round_index, c) for s in slots for c in (reference, with_rule)}
    assert all(r.outcome == "completed" and r.completed and r.run_id for r in records)
    assert runner.runs_made == 6 and runner.runs_reused == 0 and runner.tokens_spent > 0
    with store.session() as s:
        rows = {r.id: r for r in s.scalars(select(BenchRun))}
        assert s.scalars(select(BenchPass)).one().purpose == "select"
    for slot in slots:  # the two arms of a round share the seed; rounds differ
        pair = [rows[r.run_id] for r in records if (r.task_id, r.round_index) == (slot.task_id, slot.round_index)]
        assert pair[0].seed == pair[1].seed
    assert rows[records[0].run_id].seed != rows[[r for r in records if r.round_index == 1][0].run_id].seed
    # the rule (naming the fake's habit) is cheaper in every pair
    for slot in slots:
        ref = next(r for r in records if (r.task_id, r.round_index, r.config) == (slot.task_id, slot.round_index, reference))
        arm = next(r for r in records if (r.task_id, r.round_index, r.config) == (slot.task_id, slot.round_index, with_rule))
        assert arm.weighted_tokens < ref.weighted_tokens


def test_fresh_runs_are_reused_across_calls_and_runners(store, tmp_path):
    first_rule = add_rule(store, "Grep for the symbol before opening any file.")
    second_rule = add_rule(store, "Keep replies brief: no narration between tool calls.")
    runner = make_runner(store, tmp_path)
    first = run_config(runner, frozenset(), ["golden-01", "golden-02"], 2)
    assert n_runs(store) == 4
    # the same question again, from a new runner (a later invocation): nothing runs
    again_runner = make_runner(store, tmp_path)
    again = again_runner.run([frozenset(), frozenset({second_rule})],
                             [PairRequest("golden-01", 0), PairRequest("golden-01", 1)])
    assert again_runner.runs_reused == 2 and again_runner.runs_made == 2 and n_runs(store) == 6
    reused = {r.round_index: r.run_id for r in again if r.config == frozenset()}
    assert reused == {r.round_index: r.run_id for r in first if r.task_id == "golden-01"}
    # string configuration keys are accepted too and map to the same runs
    keyed = make_runner(store, tmp_path).run([str(second_rule)], [PairRequest("golden-01", 0)])
    assert keyed[0].config == str(second_rule) and n_runs(store) == 6
    assert first_rule  # (unused rule: a stored rule outside the configs changes nothing)


def test_stale_runs_and_other_memories_are_not_reused(store, tmp_path):
    runner = make_runner(store, tmp_path, freshness_days=7)
    runner.run([frozenset()], [PairRequest("golden-01", 0)])
    with store.session() as s:
        s.execute(update(BenchRun).values(created_at=utcnow() - timedelta(days=8)))
    runner.run([frozenset()], [PairRequest("golden-01", 0)])
    assert n_runs(store) == 2 and runner.runs_reused == 0
    # before any compile a set is labelled v1 (what the first compile makes); compiled as another
    # version its header says v2, but its rules read the same: the paid run is reused
    active = add_rule(store, "Grep for the symbol before opening any file.", state="active")
    runner.run([frozenset({active})], [PairRequest("golden-01", 0)])
    with store.session() as s:
        s.add(RulesetVersion(agent=AGENT, version=2, rule_ids=[active], memory_sha256="0" * 64))
    runner.run([frozenset({active})], [PairRequest("golden-01", 0)])
    assert n_runs(store) == 3 and runner.runs_reused == 1
    # what the rules say is the memory: a rule's new wording is another memory, with runs of its own
    with store.session() as s:
        s.execute(update(Rule).where(Rule.id == active).values(body="Grep for the symbol first."))
    runner.run([frozenset({active})], [PairRequest("golden-01", 0)])
    assert n_runs(store) == 4


def test_infra_failures_abort_and_are_never_reused(store, tmp_path):
    runner = make_runner(store, tmp_path, lambda: FakeBackend(infra=True))
    with pytest.raises(BenchAborted):
        runner.run([frozenset()], [PairRequest(t, 0) for t in ("golden-01", "golden-02", "golden-03")])
    assert runner.tokens_spent > 0 and runner.runs_made == 3
    healthy = make_runner(store, tmp_path)
    records = healthy.run([frozenset()], [PairRequest(t, 0) for t in ("golden-01", "golden-02", "golden-03")])
    assert healthy.runs_reused == 0 and all(r.outcome == "completed" for r in records)


def test_a_lone_infra_error_comes_back_as_an_infra_record(store, tmp_path):
    calls = {"n": 0}

    class Flaky(FakeBackend):
        def run(self, task, workdir, system_prompt, seed, caps):
            calls["n"] += 1
            self.infra = task.id == "golden-02"
            return super().run(task, workdir, system_prompt, seed, caps)

    runner = make_runner(store, tmp_path, Flaky)
    records = runner.run([frozenset()], [PairRequest(t, 0) for t in ("golden-01", "golden-02", "golden-03")])
    by_task = {r.task_id: r for r in records}
    assert by_task["golden-02"].outcome == "infra_error" and by_task["golden-02"].is_infra
    assert not by_task["golden-02"].completed
    assert by_task["golden-01"].outcome == by_task["golden-03"].outcome == "completed"


def test_runs_stored_under_the_labelled_memory_hash_of_older_wardens_are_still_reused(store, tmp_path):
    """Before the version label was left out of a run's memory identity, runs were stored under
    the hash of the labelled text: an upgrade must not buy the freshness window's runs again."""
    import hashlib

    from warden.bench.scheduler import memory_for

    runner = make_runner(store, tmp_path)
    runner.run([frozenset()], [PairRequest("golden-01", 0)])
    with store.session() as s:
        labelled = hashlib.sha256(memory_for(s, AGENT, []).text.encode("utf-8")).hexdigest()
        s.execute(update(BenchRun).values(memory_sha256=labelled))  # as an older warden stored it
    again = make_runner(store, tmp_path)
    again.run([frozenset()], [PairRequest("golden-01", 0)])
    assert n_runs(store) == 1 and again.runs_reused == 1
