"""Selector orchestration over a synthetic runner with known true effects: state transitions,
receipts, MEMORY.md compiled in the same transaction, evidence pooling, infra aborts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from warden.config import load_settings
from warden.select.compile import memory_path
from warden.select.decision import DecisionParams
from warden.select.runner import SyntheticRunner, config_key, log_uniform_tasks
from warden.select.selector import Selector, next_state
from warden.select.decision import ADMISSION, REAUDIT, Verdict
from warden.store.db import open_store
from warden.store.models import Receipt, Rule


@pytest.fixture
def env(warden_home: Path, monkeypatch: pytest.MonkeyPatch):
    # Synthetic tasks cost 30k–300k per run: give each decision room for ~20 paired rounds.
    monkeypatch.setenv("WARDEN_EVIDENCE_BUDGET_TOKENS", str(40_000_000))
    settings = load_settings()
    return settings, open_store(settings)


TASKS = log_uniform_tasks(np.random.default_rng(7), 8)
WEIGHTS = {t.task_id: 1.0 for t in TASKS}


def _rule(store, body: str, state: str = "candidate") -> int:
    with store.session() as s:
        rule = Rule(agent="backend", body=body, state=state)
        s.add(rule)
        s.flush()
        return rule.id


# What a bench would have recorded of each task: prices a first round under a partial budget.
HINTS = {t.task_id: t.mean_cost for t in TASKS}


def _selector(settings, store, runner, **kw) -> Selector:
    kw.setdefault("cost_hints", HINTS)
    return Selector(store, settings, "backend", runner, backend="synthetic", model="synthetic",
                    tasks=WEIGHTS, params=DecisionParams.from_settings(settings), **kw)


def test_good_rule_kept_dead_rule_refuted_breaking_rule_evicted(env) -> None:
    settings, store = env
    good = _rule(store, "Grep for the symbol or text you need before opening any file.")
    dead = _rule(store, "Mention the weather in every reply you write today.")
    breaks = _rule(store, "Skip running the tests after you edit a file, always.")
    runner = SyntheticRunner(TASKS, savings={str(good): 0.25}, seed=3,
                             broken_tasks={f"{good},{breaks}": frozenset({TASKS[0].task_id})})
    report = _selector(settings, store, runner).run()
    verdicts = {d.rule_id: (d.verdict, d.state_after) for d in report.decisions}
    assert verdicts[good] == ("keep", "active")
    assert verdicts[dead][1] in ("evicted", "candidate")  # refuted, or inconclusive within budget
    assert verdicts[breaks] == ("regression", "evicted")
    # the summary says what this invocation changed in MEMORY.md (not only its last compile)
    assert report.memory.added == [good] and report.memory.removed == [] and report.memory.changed
    with store.session() as s:
        assert s.query(Receipt).count() == len(report.decisions)
        receipt = s.query(Receipt).filter_by(rule_id=good).one()
        assert receipt.evidence and receipt.paired_diffs and receipt.ruleset_version >= 1
        assert s.get(Rule, breaks).evict_reason == "regression"
    text = memory_path(settings, "backend").read_text()
    assert "Grep for the symbol" in text and "weather" not in text and "Skip running" not in text


def test_a_select_that_writes_the_first_memory_md_says_it_created_it(env) -> None:
    """The decision that keeps a rule compiles MEMORY.md, so the closing compile found it there:
    a fresh home's first select said "added rule 3" of a MEMORY.md that did not exist before it."""
    settings, store = env
    good = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = SyntheticRunner(TASKS, savings={str(good): 0.25}, seed=3)
    assert not memory_path(settings, "backend").exists()
    first = _selector(settings, store, runner).run().memory
    assert first.created and first.changed and first.added == [good]
    second = _selector(settings, store, runner).run().memory  # it re-audits the rule: the file was there
    assert not second.created and second.added == [] and second.rule_ids == [good]
    memory_path(settings, "backend").unlink()  # deleted by hand: the next invocation creates it again
    third = _selector(settings, store, runner).run().memory
    assert third.created and third.changed and third.rule_ids == [good]


def test_infra_abort_writes_no_receipt_and_no_strike(env) -> None:
    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.25}, infra_p=1.0, seed=1)
    report = _selector(settings, store, runner).run()
    assert report.aborted and not report.decisions
    with store.session() as s:
        assert s.query(Receipt).count() == 0
        rule = s.get(Rule, rid)
        assert rule.state == "candidate" and rule.strikes == 0


def test_inconclusive_keeps_candidate_and_pools_evidence_next_night(env) -> None:
    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.03}, seed=5)
    # one covering round (~2.2M) fits, a second (a verdict needs two pairs of every task) does not:
    # the rule's own budget ends it undecided
    settings = replace(settings, evidence_budget_tokens=3_200_000)
    first = _selector(settings, store, runner).run()
    assert first.decisions[0].verdict == "inconclusive"
    with store.session() as s:
        assert s.get(Rule, rid).state == "candidate"
        n_first = len(s.query(Receipt).one().evidence)
    _selector(settings, store, runner).run()
    with store.session() as s:
        receipts = s.query(Receipt).order_by(Receipt.id).all()
        assert len(receipts) == 2 and len(receipts[1].evidence) > n_first


def test_evidence_pools_only_across_decisions_on_the_same_model(env) -> None:
    """A re-audit on another model measures another agent: pooling the first model's pairs would
    keep (or evict) the rule on evidence the receipt then labels with the new model."""
    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    settings = replace(settings, evidence_budget_tokens=3_200_000)  # one round, undecided: evidence to pool
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.03}, seed=5)
    _selector(settings, store, runner).run()
    with store.session() as s:
        n_first = len(s.query(Receipt).one().evidence)
    other = Selector(store, settings, "backend", SyntheticRunner(TASKS, savings={str(rid): 0.03}, seed=6),
                     backend="synthetic", model="another-model", tasks=WEIGHTS, cost_hints=HINTS,
                     params=DecisionParams.from_settings(settings))
    other.run()
    with store.session() as s:
        receipts = s.query(Receipt).order_by(Receipt.id).all()
        assert len(receipts) == 2 and receipts[1].model == "another-model"
        assert len(receipts[1].evidence) <= n_first  # its own runs only, none of the first model's
    _selector(settings, store, runner).run()  # back on the first model: its evidence pools again
    with store.session() as s:
        receipts = s.query(Receipt).order_by(Receipt.id).all()
        assert len(receipts) == 3 and len(receipts[2].evidence) > n_first


def test_two_strike_reaudit(env) -> None:
    settings, store = env
    rid = _rule(store, "Mention the weather in every reply you write today.", state="active")
    runner = SyntheticRunner(TASKS, savings={str(rid): -0.10}, seed=11)  # it now costs 10%
    states = []
    for _ in range(4):
        _selector(settings, store, runner).run()
        with store.session() as s:
            states.append(s.get(Rule, rid).state)
        if states[-1] == "evicted":
            break
    assert "probation" in states and states[-1] == "evicted"
    assert states.index("probation") < states.index("evicted")


def test_a_resumed_night_reaudits_as_the_uninterrupted_night_would(env) -> None:
    """An interrupted night resumes with the queue it would have had: a rule admitted earlier that
    night is not re-audited, and a night that already re-audited a rule does not re-audit another."""
    from datetime import timedelta

    from warden.store.models import utcnow

    settings, store = env
    night_start = utcnow() - timedelta(minutes=5)
    admitted = _rule(store, "Grep for the symbol or text you need before opening any file.", state="active")
    with store.session() as s:
        s.get(Rule, admitted).decided_at = utcnow()  # kept earlier this night
    runner = SyntheticRunner(TASKS, savings={str(admitted): 0.25}, seed=3)
    assert _selector(settings, store, runner).run(since=night_start).decisions == []
    older = _rule(store, "Read each file at most once per task and keep notes.", state="active")
    with store.session() as s:
        s.get(Rule, older).decided_at = night_start - timedelta(days=3)
    [audit] = _selector(settings, store, runner).run(since=night_start).decisions
    assert audit.rule_id == older and audit.kind == REAUDIT
    assert _selector(settings, store, runner).run(since=night_start).decisions == []  # one re-audit a night
    # a select of its own (no night) re-audits the rule decided longest ago: the one admitted
    assert [d.rule_id for d in _selector(settings, store, runner).run().decisions] == [admitted]


def test_state_machine_is_pure_and_complete() -> None:
    rule = Rule(agent="a", body="x" * 12, state="active", strikes=0)
    assert next_state(rule, REAUDIT, Verdict.REFUTE, 0)[0] == "probation"
    rule.strikes = 1
    assert next_state(rule, REAUDIT, Verdict.REFUTE, 0)[:2] == ("evicted", "refuted")
    assert next_state(rule, REAUDIT, Verdict.KEEP, 0) == ("active", None, 0)
    assert next_state(rule, REAUDIT, Verdict.REGRESSION, 0)[:2] == ("evicted", "regression")
    assert next_state(rule, ADMISSION, Verdict.INCONCLUSIVE, 1)[0] == "candidate"
    assert next_state(rule, ADMISSION, Verdict.INCONCLUSIVE, 3)[:2] == ("evicted", "inconclusive")


def test_shared_reference_runs_are_not_charged_twice(env, tmp_path: Path) -> None:
    """Two candidates against the same active set: the second decision reuses the first's
    reference runs, and the receipts charge only the runs actually made."""
    from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
    from warden.bench.suite_runner import BenchSuiteRunner
    from warden.select.compile import compile_memory

    settings, store = env
    with store.session() as s:
        for body in ("Keep replies brief: no narration between tool calls.",
                     "Say thanks at the end of every reply you write."):
            s.add(Rule(agent=AGENT, body=body))
        compile_memory(s, settings, AGENT)  # the active set (empty) has a compiled version
    settings = replace(settings, evidence_budget_tokens=2_000_000)  # a fresh agent: nothing priced yet
    runner = BenchSuiteRunner(store, settings, AGENT, backend="fake", bench=make_workbench(tmp_path, FakeBackend),
                              model_id=MODEL, concurrency=2)
    report = Selector(store, settings, AGENT, runner, backend="fake", model=MODEL).run()
    assert len(report.decisions) == 2 and runner.runs_reused > 0
    with store.session() as s:
        charged = sum(r.tokens_spent for r in s.query(Receipt))
    assert charged == pytest.approx(runner.tokens_spent) and report.tokens_spent == pytest.approx(charged)


def test_reaudit_picks_the_active_unprotected_rule_decided_longest_ago(env) -> None:
    from datetime import timedelta

    from warden.select.selector import reaudit_target
    from warden.store.models import utcnow

    settings, store = env
    now = utcnow()
    with store.session() as s:
        rows = {
            "protected": Rule(agent="backend", body="Never commit secrets to the repository.", state="protected",
                              decided_at=now - timedelta(days=30)),
            "evicted": Rule(agent="backend", body="An evicted rule is never re-audited.", state="evicted",
                            decided_at=now - timedelta(days=20)),
            "other_agent": Rule(agent="docs", body="Another agent's rule is not this agent's.", state="active",
                                decided_at=now - timedelta(days=15)),
            "old": Rule(agent="backend", body="Grep for the symbol before opening any file.", state="probation",
                        decided_at=now - timedelta(days=10)),
            "recent": Rule(agent="backend", body="Run only the tests relevant to your change.", state="active",
                           decided_at=now - timedelta(days=1)),
        }
        s.add_all(rows.values())
        s.flush()
        assert reaudit_target(s, "backend").id == rows["old"].id
        rows["old"].decided_at = now
        assert reaudit_target(s, "backend").id == rows["recent"].id


def test_an_invocation_budget_that_runs_out_writes_no_inconclusive(env) -> None:
    """A spent *invocation* budget is not the rule's evidence budget: no inconclusive receipt
    (three of which would evict the rule as inconclusive), whether it ran out before the first
    round or after a few pairs — the rule waits, skipped. Its evidence budget still decides."""
    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.05}, seed=5)
    for budget in (4_000_000, 1_000, 1_000, 2_000_000):
        report = _selector(settings, store, runner).run(budget_tokens=budget)
        assert report.decisions == [] and f"rule {rid}: the invocation budget ran out" in report.skipped[0]
    with store.session() as s:
        assert s.query(Receipt).count() == 0 and s.get(Rule, rid).state == "candidate"
    small = replace(settings, evidence_budget_tokens=4_000_000)  # the rule's own budget: inconclusive
    assert _selector(small, store, runner).run().decisions[0].verdict == "inconclusive"


def test_an_evidence_budget_too_small_for_one_pair_is_a_skip_not_a_receipt(env) -> None:
    """An evidence budget that buys no pair at all measures nothing: no receipt (its estimate
    would be NaN), no inconclusive strike, and one line saying what to raise."""
    settings, store = env
    settings = replace(settings, evidence_budget_tokens=30_000)
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.25}, seed=5)
    for _ in range(4):
        report = _selector(settings, store, runner).run()
        assert report.decisions == [] and "evidence_budget_tokens" in report.skipped[0]
    with store.session() as s:
        assert s.query(Receipt).count() == 0 and s.get(Rule, rid).state == "candidate"
    assert runner.tokens_spent == 0


class _Everything:
    def __contains__(self, _key: object) -> bool:
        return True


def test_nights_smaller_than_the_evidence_budget_still_decide_every_rule(env) -> None:
    """Each night's budget (3M) is below a rule's evidence budget (8M): an undecided rule is
    skipped (its runs are reused by the next night, as the bench runner does) and what such
    nights spend adds up until it reaches the evidence budget: inconclusive. It never holds the
    queue's head for good, so the rule behind it is decided too."""
    from warden.select.runner import ReusingRunner

    settings, store = env
    settings = replace(settings, evidence_budget_tokens=8_000_000)
    hard = _rule(store, "Mention the weather in every reply you write today.")
    good = _rule(store, "Grep for the symbol or text you need before opening any file.")
    runner = ReusingRunner(SyntheticRunner(TASKS, savings={str(hard): 0.05, str(good): 0.30}, seed=5), [])
    runner.reusable = _Everything()  # the bench runner reuses every stored run within its window
    first_receipt_night = None
    for night in range(12):
        _selector(settings, store, runner).run(budget_tokens=3_000_000)
        with store.session() as s:
            if first_receipt_night is None and s.query(Receipt).filter_by(rule_id=hard).count():
                first_receipt_night = night
    with store.session() as s:
        receipts = {rid: s.query(Receipt).filter_by(rule_id=rid).all() for rid in (hard, good)}
        assert "inconclusive" in [r.verdict for r in receipts[hard]] and s.get(Rule, good).state == "active"
    assert first_receipt_night == 2  # 3M, 6M undecided: skipped; 9M ≥ the 8M evidence budget: inconclusive


def test_after_a_full_inconclusive_small_nights_start_counting_afresh(env) -> None:
    """An inconclusive receipt settles what was spent: the next inconclusive under small nightly
    budgets needs another evidence budget spent, not one round (pooled evidence does not count)."""
    settings, store = env
    settings = replace(settings, evidence_budget_tokens=8_000_000)
    rid = _rule(store, "Mention the weather in every reply you write today.")
    runner = SyntheticRunner(TASKS, savings={str(rid): 0.05}, seed=5)
    assert _selector(settings, store, runner).run().decisions[0].verdict == "inconclusive"
    report = _selector(settings, store, runner).run(budget_tokens=1_500_000)
    assert report.decisions == [] and "spent undecided" in report.skipped[0]
    with store.session() as s:
        assert s.query(Receipt).count() == 1 and s.get(Rule, rid).undecided_tokens > 0


def test_reference_runs_are_reused_after_a_compile_that_changed_no_rule(env, tmp_path: Path) -> None:
    """Night 1 measures a candidate against the empty active set before anything was compiled;
    the night's compile makes version 1 of that same empty set. Night 2's candidate reuses
    night 1's reference runs: before the first compile, every arm is labelled version 1."""
    from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
    from warden.bench.suite_runner import BenchSuiteRunner

    settings, store = env
    settings = replace(settings, evidence_budget_tokens=2_000_000)
    bench = make_workbench(tmp_path, FakeBackend)

    def night(body: str) -> BenchSuiteRunner:
        with store.session() as s:
            s.add(Rule(agent=AGENT, body=body))
        runner = BenchSuiteRunner(store, settings, AGENT, backend="fake", bench=bench, model_id=MODEL, concurrency=2)
        Selector(store, settings, AGENT, runner, backend="fake", model=MODEL).run()
        return runner

    first = night("Say thanks at the end of every reply you write.")
    with store.session() as s:
        assert s.query(Rule).filter(Rule.state == "active").count() == 0  # the active set stays empty
        assert s.query(Receipt).one().ruleset_version == 1
    assert first.runs_reused == 0
    second = night("Mention the weather in every reply you write today.")
    assert second.runs_reused > 0


def test_a_partial_budget_never_starts_an_unpriced_round(env, tmp_path: Path) -> None:
    """A fresh agent (no bench run recorded) under an invocation budget below the evidence
    budget: nothing prices a first round, so none starts — no spend, no receipt. Once runs are
    recorded they price the first round, and the budget holds from the first pair on."""
    from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
    from warden.bench.suite_runner import BenchSuiteRunner

    settings, store = env
    with store.session() as s:
        s.add(Rule(agent=AGENT, body="Say thanks at the end of every reply you write."))
    bench = make_workbench(tmp_path, FakeBackend)
    runner = BenchSuiteRunner(store, settings, AGENT, backend="fake", bench=bench, model_id=MODEL, concurrency=2)
    report = Selector(store, settings, AGENT, runner, backend="fake", model=MODEL).run(1_000)
    assert report.decisions == [] and runner.tokens_spent == 0 and "prices a round" in report.skipped[0]
    with store.session() as s:
        assert s.query(Receipt).count() == 0
    Selector(store, replace(settings, evidence_budget_tokens=1_000_000_000), AGENT, runner, backend="fake",
             model=MODEL).run()  # records runs (and decides the rule)
    with store.session() as s:
        s.add(Rule(agent=AGENT, body="Mention the weather in every reply you write today."))
    fresh = BenchSuiteRunner(store, settings, AGENT, backend="fake", bench=bench, model_id=MODEL, concurrency=2)
    selector = Selector(store, settings, AGENT, fresh, backend="fake", model=MODEL)
    assert selector.cost_hints()  # priced now
    report = selector.run(1_000)
    assert report.decisions == [] and fresh.tokens_spent <= 1_000


def test_runs_of_a_decision_the_invocation_budget_cut_off_are_charged_to_it(env) -> None:
    """No verdict when the budget ends before every task has a pair (here one task's runs died
    of infra errors and the budget cannot buy them again) — but the runs it did buy were spent,
    and the invocation (a night's budget) pays for them."""
    from dataclasses import replace as with_

    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    inner = SyntheticRunner(TASKS, savings={str(rid): 0.05}, seed=8)
    lost = TASKS[-1].task_id

    class LosesOneTask:
        def run(self, configs, slots):  # type: ignore[no-untyped-def]
            return [with_(r, outcome="infra_error", completed=False) if r.task_id == lost else r
                    for r in inner.run(configs, slots)]

    first_round = sum(HINTS.values()) * 2
    report = _selector(settings, store, LosesOneTask()).run(budget_tokens=int(first_round * 1.1))
    assert report.decisions == [] and "the invocation budget ran out" in report.skipped[0]
    assert inner.tokens_spent > 0 and report.tokens_spent == pytest.approx(inner.tokens_spent)


def test_a_task_infra_errors_left_unpaired_when_the_evidence_budget_ends_aborts_without_a_receipt(env) -> None:
    """One flaky run alone does not abort, but when it leaves a task without a pair and the
    evidence budget buys no second round, the suite's saving has no estimate: the decision is an
    infra abort (no receipt, no strike, the rule still a candidate), not an inconclusive receipt
    with no estimate (which failed the receipt's insert and lost the invocation)."""
    from dataclasses import replace as with_

    settings, store = env
    rid = _rule(store, "Grep for the symbol or text you need before opening any file.")
    inner = SyntheticRunner(TASKS, savings={str(rid): 0.05}, seed=8)
    lost = max(TASKS, key=lambda t: t.mean_cost).task_id  # what is left after one round buys no pair of it

    class LosesOneRuleRun:
        def run(self, configs, slots):  # type: ignore[no-untyped-def]
            return [with_(r, outcome="infra_error", completed=False)
                    if r.task_id == lost and r.round_index == 0 and str(rid) in config_key(r.config).split(",") else r
                    for r in inner.run(configs, slots)]

    one_round = int(sum(HINTS.values()) * 2 * 1.05)  # the evidence budget buys one round, not two
    settings = replace(settings, evidence_budget_tokens=one_round)
    report = _selector(settings, store, LosesOneRuleRun()).run(budget_tokens=one_round)
    assert report.decisions == []
    assert report.aborted and f"left {lost} without a usable pair" in report.aborted
    assert report.tokens_spent == pytest.approx(inner.tokens_spent) and inner.tokens_spent > 0
    with store.session() as s:
        assert s.query(Receipt).count() == 0
        rule = s.get(Rule, rid)
        assert rule.state == "candidate" and rule.strikes == 0 and rule.measured_saving is None


def test_memory_compiled_with_a_keep_names_the_backend_that_measured_it(env) -> None:
    """The compile inside a decision's transaction runs before its receipt is written: the
    keep being recorded already counts, and a later recompile gives the same bytes."""
    from warden.select.selector import recompile_memory

    settings, store = env
    good = _rule(store, "Grep for the symbol or text you need before opening any file.")
    report = _selector(settings, store, SyntheticRunner(TASKS, savings={str(good): 0.25}, seed=3)).run()
    assert [(d.rule_id, d.verdict) for d in report.decisions] == [(good, "keep")]
    text = memory_path(settings, "backend").read_text()
    assert "Measured on the synthetic backend." in text
    with store.session() as s:
        again = recompile_memory(s, settings, "backend")
    assert not again.changed and not again.drifted and memory_path(settings, "backend").read_text() == text
