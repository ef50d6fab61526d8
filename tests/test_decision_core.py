"""Decision core: verdicts, regressions, budget, allocation, pooling, infra aborts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warden.config import load_settings
from warden.select.decision import (ADMISSION, REAUDIT, DecisionParams, Evidence, InfraAbort, Verdict,
                                    decide, decide_rule)
from warden.select.runner import (PairRequest, ReusingRunner, RunRecord, SuiteRunner, SyntheticRunner,
                                  SyntheticTask, config_key, log_uniform_tasks)

REF, RULE = frozenset({1, 2}), frozenset({1, 2, 7})


def _runner(saving: float, seed: int = 0, tasks: list[SyntheticTask] | None = None, **kw) -> SyntheticRunner:
    tasks = tasks or log_uniform_tasks(np.random.default_rng(seed), 10)
    return SyntheticRunner(tasks, savings={config_key(RULE): saving}, seed=seed, **kw)


def _ids(runner: SyntheticRunner) -> list[str]:
    return [t.task_id for t in runner.tasks]


def test_synthetic_runner_implements_the_protocol_and_pairs_by_round() -> None:
    runner = _runner(0.2)
    assert isinstance(runner, SuiteRunner)
    records = runner.run([REF, RULE], [PairRequest("golden-01", 4)])
    assert {(config_key(r.config), r.round_index) for r in records} == {("1,2", 4), ("1,2,7", 4)}
    assert config_key(frozenset()) == "" and config_key("opaque") == "opaque"
    with pytest.raises(ValueError):
        RunRecord("t", REF, 0, 1.0, 1, True, outcome="exploded")


def test_a_strong_rule_is_kept_with_its_evidence() -> None:
    runner = _runner(0.30, seed=4)
    result = decide_rule(runner, REF, RULE, _ids(runner), rent_tokens=40)
    d = result.decision
    assert d.verdict is Verdict.KEEP
    assert d.interval[0] > d.margin  # the anytime lower bound clears the margin
    assert 0.15 < d.estimate < 0.45
    assert d.estimate_tokens == pytest.approx(d.estimate * d.reference_cost)
    assert d.margin_tokens == 80
    assert result.tokens_spent == pytest.approx(runner.tokens_spent)
    assert set(d.pass_counts) == set(_ids(runner))
    assert all(len(v) == n for (v, (n, _)) in zip(d.paired_diffs.values(), d.n_per_side.values()))
    assert result.looks[-1][1] == pytest.approx(d.llr)


def test_a_harmful_rule_is_refuted_quickly() -> None:
    passes = []
    for seed in range(5, 13):
        runner = _runner(-0.15, seed=seed)
        result = decide_rule(runner, REF, RULE, _ids(runner), rent_tokens=40)
        assert result.decision.verdict is Verdict.REFUTE
        assert result.decision.interval[1] < result.decision.margin + 0.10
        passes.append(result.tokens_spent / (2 * sum(t.mean_cost for t in runner.tasks)))
    # about five paired passes of the suite (β = 1% asks LLR ≤ log 0.01): a fraction of what a
    # rule near the test's midpoint takes, and of the calibration's evidence budget (~36)
    assert sum(passes) / len(passes) <= 6


def test_a_rule_that_breaks_a_task_is_a_regression_at_once() -> None:
    runner = _runner(0.30, seed=6)
    broken = runner.tasks[3].task_id
    runner.broken_tasks = {config_key(RULE): frozenset({broken})}
    result = decide_rule(runner, REF, RULE, _ids(runner), rent_tokens=40)
    assert result.decision.verdict is Verdict.REGRESSION
    assert result.rounds == 1
    assert result.decision.regressions == (broken,)
    assert any(broken in r for r in result.decision.reasons)


def test_a_completion_drop_on_a_flaky_task_is_flagged_not_a_regression() -> None:
    ev = Evidence(
        reference=(RunRecord("a", REF, 0, 100.0, 100, True), RunRecord("a", REF, 1, 100.0, 100, False,
                                                                        outcome="task_failed")),
        rule=(RunRecord("a", RULE, 0, 90.0, 90, False, outcome="task_failed"),
              RunRecord("a", RULE, 1, 90.0, 90, False, outcome="task_failed")))
    d = decide(ev, ["a"], 10)
    assert d.verdict is not Verdict.REGRESSION
    assert d.completion_drops == ("a",)
    assert any("completion dropped" in r for r in d.reasons)


def test_first_round_covers_every_task_then_allocation_favours_cheap_tasks() -> None:
    tasks = [SyntheticTask("cheap", 20_000.0), SyntheticTask("dear", 400_000.0)]
    runner = _runner(0.0, seed=8, tasks=tasks, derail_p=0.0)
    first = decide(Evidence(), ["cheap", "dear"], 40)
    assert first.verdict is Verdict.NEED_MORE
    assert dict(first.next_tasks) == {"cheap": 1, "dear": 1}
    ev = Evidence()
    for r in range(3):
        recs = runner.run([REF, RULE], [PairRequest("cheap", r), PairRequest("dear", r)])
        ev = ev.extend([x for x in recs if x.config == REF], [x for x in recs if x.config == RULE])
    plan = dict(decide(ev, ["cheap", "dear"], 40, DecisionParams(round_size=2.0)).next_tasks)
    assert plan.get("cheap", 0) > plan.get("dear", 0)
    assert any("reduce variance most per token" in r for r in
               decide(ev, ["cheap", "dear"], 40).reasons)


def test_budget_spent_gives_inconclusive_not_refuted() -> None:
    runner = _runner(0.05, seed=9)
    pass_cost = 2 * sum(t.mean_cost for t in runner.tasks)
    result = decide_rule(runner, REF, RULE, _ids(runner), 40, budget_tokens=2.5 * pass_cost)
    assert result.decision.verdict is Verdict.INCONCLUSIVE
    assert any("budget spent" in r for r in result.decision.reasons)
    assert result.tokens_spent <= 2.5 * pass_cost * 1.35  # the plan fits the budget; noise may overshoot
    hints = {t.task_id: t.mean_cost for t in runner.tasks}
    nothing = decide_rule(_runner(0.05, seed=9), REF, RULE, _ids(runner), 40, budget_tokens=1000.0,
                          cost_hints=hints)
    assert nothing.decision.verdict is Verdict.INCONCLUSIVE and nothing.tokens_spent == 0
    unpriced = decide_rule(_runner(0.05, seed=9), REF, RULE, _ids(runner), 40, budget_tokens=1000.0)
    assert unpriced.rounds == 1  # without hints the first round cannot be priced


def test_evidence_pools_across_calls_and_rounds_continue() -> None:
    runner = _runner(0.05, seed=10)
    pass_cost = 2 * sum(t.mean_cost for t in runner.tasks)
    first = decide_rule(runner, REF, RULE, _ids(runner), 40, budget_tokens=1.2 * pass_cost)
    assert first.decision.verdict is Verdict.INCONCLUSIVE
    second = decide_rule(runner, REF, RULE, _ids(runner), 40, budget_tokens=1.2 * pass_cost,
                         prior_evidence=first.evidence)
    assert len(second.evidence.rule) == len(first.evidence.rule) + len(second.new_runs) // 2
    assert second.decision.n_pairs > first.decision.n_pairs
    rounds = [(r.task_id, r.round_index) for r in second.evidence.rule]
    assert len(rounds) == len(set(rounds))  # new rounds never reuse an index


def test_reaudit_measures_a_fresh_round_even_when_prior_evidence_decides() -> None:
    runner = _runner(0.30, seed=11)
    admission = decide_rule(runner, REF, RULE, _ids(runner), 40)
    assert admission.decision.verdict is Verdict.KEEP
    audit = decide_rule(runner, REF, RULE, _ids(runner), 40, prior_evidence=admission.evidence, kind=REAUDIT)
    assert audit.rounds >= 1 and audit.tokens_spent > 0
    assert audit.decision.verdict is Verdict.KEEP and audit.decision.kind == REAUDIT


def test_a_reaudit_the_budget_cannot_measure_is_inconclusive_not_a_verdict() -> None:
    """The prior evidence alone decides nothing on a re-audit: without a fresh round (the budget
    does not buy one) it is inconclusive, so a rule on probation is never cleared unmeasured."""
    runner = _runner(0.30, seed=11)
    admission = decide_rule(runner, REF, RULE, _ids(runner), 40)
    assert admission.decision.verdict is Verdict.KEEP
    before = runner.tokens_spent
    audit = decide_rule(runner, REF, RULE, _ids(runner), 40, prior_evidence=admission.evidence, kind=REAUDIT,
                        budget_tokens=1, cost_hints={t: 100_000.0 for t in _ids(runner)})
    assert audit.rounds == 0 and runner.tokens_spent == before
    assert audit.decision.verdict is Verdict.INCONCLUSIVE
    assert "fresh round" in audit.decision.reasons[-1]


def test_reaudit_misses_a_rule_that_turned_harmful() -> None:
    runner = _runner(-0.20, seed=12)
    audit = decide_rule(runner, REF, RULE, _ids(runner), 40, kind=REAUDIT)
    assert audit.decision.verdict is Verdict.REFUTE
    assert any("below the margin" in r for r in audit.decision.reasons)


class _FlakyInfra:
    def __init__(self, inner: SyntheticRunner) -> None:
        self.inner = inner

    def run(self, configs, slots):
        return [RunRecord(r.task_id, r.config, r.round_index, 10.0, 10, False, outcome="infra_error")
                for r in self.inner.run(configs, slots)]


def test_a_round_of_infra_errors_aborts_without_a_verdict() -> None:
    runner = _FlakyInfra(_runner(0.2, seed=13))
    with pytest.raises(InfraAbort) as info:
        decide_rule(runner, REF, RULE, _ids(runner.inner), 40)
    assert "infrastructure" in str(info.value)
    assert info.value.tokens_spent > 0


class _RuleArmInfra:
    """The measured arm always dies of an infra error; the reference completes (exactly half)."""

    def __init__(self, inner: SyntheticRunner, flaky_rounds: frozenset[int] | None = None) -> None:
        self.inner = inner
        self.flaky_rounds = flaky_rounds  # None: every round; else only these round indices
        self.calls = 0

    def run(self, configs, slots):
        self.calls += 1
        return [RunRecord(r.task_id, r.config, r.round_index, 10.0, 10, False, outcome="infra_error")
                if config_key(r.config) == config_key(RULE)
                and (self.flaky_rounds is None or r.round_index in self.flaky_rounds) else r
                for r in self.inner.run(configs, slots)]


@pytest.mark.parametrize("n_tasks", [1, 10])
def test_an_arm_that_always_fails_aborts_instead_of_running_out_the_budget(n_tasks: int) -> None:
    # Half the runs are infra errors, never "more than half": no pair ever counts.
    inner = _runner(0.2, seed=14, tasks=log_uniform_tasks(np.random.default_rng(14), n_tasks))
    runner = _RuleArmInfra(inner)
    with pytest.raises(InfraAbort) as info:
        decide_rule(runner, REF, RULE, _ids(inner), 40, budget_tokens=1e9)
    assert "no usable pair" in str(info.value)
    assert runner.calls == (2 if n_tasks == 1 else 1)  # one pair's flaky run alone does not abort


def test_one_flaky_run_does_not_abort() -> None:
    inner = _runner(0.3, seed=4, tasks=log_uniform_tasks(np.random.default_rng(4), 1))
    result = decide_rule(_RuleArmInfra(inner, frozenset({0})), REF, RULE, _ids(inner), 40)
    assert result.decision.final and result.decision.tasks[0].infra == 1


def test_infra_runs_are_dropped_with_their_partner() -> None:
    ev = Evidence(reference=(RunRecord("a", REF, 0, 100.0, 100, True), RunRecord("a", REF, 1, 100.0, 100, True)),
                  rule=(RunRecord("a", RULE, 0, 5.0, 5, False, outcome="infra_error"),
                        RunRecord("a", RULE, 1, 80.0, 80, True)))
    d = decide(ev, ["a"], 1)
    assert d.n_pairs == 1
    assert d.tasks[0].infra == 1
    assert d.pass_counts == {"a": [2, 2, 1, 1]}


class _Calls:
    """Records what reaches the inner runner."""

    def __init__(self, inner: SuiteRunner) -> None:
        self.inner = inner
        self.calls: list[tuple[tuple[str, ...], tuple[PairRequest, ...]]] = []

    def run(self, configs, slots):
        self.calls.append((tuple(config_key(c) for c in configs), tuple(slots)))
        return self.inner.run(configs, slots)


def test_reusing_runner_serves_a_reference_slot_once_and_never_a_rule_run() -> None:
    calls = _Calls(_runner(0.1, seed=21))
    reusing = ReusingRunner(calls, [REF])
    first = reusing.run([REF, RULE], [PairRequest("golden-01", 0)])
    assert len(calls.calls) == 1 and calls.calls[0][0] == ("1,2", "1,2,7")  # still one paired call
    again = reusing.run([REF, RULE], [PairRequest("golden-01", 0), PairRequest("golden-01", 1)])
    ref_again = {r.round_index: r for r in again if config_key(r.config) == "1,2"}
    ref_first = next(r for r in first if config_key(r.config) == "1,2")
    assert ref_again[0].reused and ref_again[0].weighted_tokens == ref_first.weighted_tokens
    assert not ref_again[1].reused
    assert not any(r.reused for r in again if config_key(r.config) == "1,2,7")  # a rule's runs are its own
    assert reusing.runs_reused == 1 and len(again) == 4


def test_reusing_runner_never_reuses_an_infra_error() -> None:
    reusing = ReusingRunner(_runner(0.0, seed=22, infra_p=1.0), [REF])
    reusing.run([REF], [PairRequest("golden-01", 0)])
    again = reusing.run([REF], [PairRequest("golden-01", 0)])
    assert not again[0].reused and reusing.runs_reused == 0


def test_a_second_decision_on_a_shared_reference_is_charged_only_for_new_runs() -> None:
    inner = _runner(0.0, seed=23)
    other = frozenset({1, 2, 8})
    inner.savings[config_key(other)] = 0.0
    reusing = ReusingRunner(inner, [REF])
    first = decide_rule(reusing, REF, RULE, _ids(inner), 40, budget_tokens=20e6)
    spent_before = inner.tokens_spent
    second = decide_rule(reusing, REF, other, _ids(inner), 40, budget_tokens=20e6)
    assert first.tokens_spent == pytest.approx(spent_before)
    assert second.tokens_spent == pytest.approx(inner.tokens_spent - spent_before)
    assert any(r.reused for r in second.new_runs)
    assert second.tokens_spent < sum(r.weighted_tokens for r in second.new_runs)


def test_params_validate_and_come_from_settings() -> None:
    with pytest.raises(ValueError):
        DecisionParams(alpha=0.7)
    with pytest.raises(ValueError):
        DecisionParams(design_effect=0.0)
    settings = load_settings(env={"WARDEN_HOME": "/tmp/unused-home", "WARDEN_ALPHA": "0.01",
                                  "WARDEN_KEEP_MARGIN_K": "3"})
    params = DecisionParams.from_settings(settings)
    assert params.alpha == 0.01 and params.keep_margin_k == 3.0
    assert params.design_effect == settings.design_effect
    with pytest.raises(ValueError):
        decide_rule(_runner(0.1), REF, REF, ["golden-01"], 40)
    with pytest.raises(ValueError):
        decide(Evidence(), ["a"], 40, kind="vibes")
    assert math.isnan(decide(Evidence(), ["a"], 40).estimate)
    assert ADMISSION == "admission"


def test_identical_paired_costs_show_a_sane_llr() -> None:
    # No spread at all: the ratio runs to about -5e15; the reason shows it as past a bound.
    ids = [f"t{i}" for i in range(4)]
    runs = [(RunRecord(t, REF, r, 1000.0, 1000, True), RunRecord(t, RULE, r, 1000.0, 1000, True))
            for t in ids for r in range(3)]
    d = decide(Evidence(tuple(a for a, _ in runs), tuple(b for _, b in runs)), ids, 10)
    assert d.verdict is Verdict.REFUTE and d.llr < -1e6
    reason = next(r for r in d.reasons if "LLR" in r)
    assert "LLR < -10,000 ≤ log β" in reason, reason


class _StoringRunner:
    """Keeps every run it made (as the bench store does) and serves a slot asked again from it;
    ``stored_runs`` (the protocol's optional part) says which slots it would serve so."""

    def __init__(self, inner: SuiteRunner, answer_stored: bool = True) -> None:
        self.inner = inner
        self.store: dict[tuple[str, str, int], RunRecord] = {}
        if answer_stored:
            self.stored_runs = self._stored_runs

    def _stored_runs(self, configs, slots) -> list[RunRecord]:  # type: ignore[no-untyped-def]
        return [self.store[(config_key(c), s.task_id, s.round_index)] for s in slots for c in configs
                if (config_key(c), s.task_id, s.round_index) in self.store]

    def run(self, configs, slots) -> list[RunRecord]:  # type: ignore[no-untyped-def]
        out = []
        for slot in slots:
            for config in configs:
                key = (config_key(config), slot.task_id, slot.round_index)
                if key not in self.store:
                    self.store[key] = self.inner.run([config], [slot])[0]
                    out.append(self.store[key])
                else:
                    out.append(RunRecord(**{**self.store[key].__dict__, "reused": True}))
        return out


@pytest.mark.parametrize("answer_stored", [True, False])
def test_stored_runs_are_priced_at_nothing_when_a_round_is_planned(answer_stored: bool) -> None:
    """A decision re-asked after a kill (same question, its first rounds stored) with what is left
    of a budget already charged for them: a runner that says which runs it holds lets those
    rounds be planned; one that does not is priced in full (and, here, buys nothing)."""
    runner = _StoringRunner(_runner(0.05, seed=9), answer_stored)
    tasks = _ids(runner.inner)
    hints = {t.task_id: t.mean_cost for t in runner.inner.tasks}
    pass_cost = 2 * sum(hints.values())
    first = decide_rule(runner, REF, RULE, tasks, 40, budget_tokens=1.6 * pass_cost, cost_hints=hints)
    assert first.decision.verdict is Verdict.INCONCLUSIVE and first.rounds >= 2
    left = max(1.6 * pass_cost - first.tokens_spent, 0.0) + 0.2 * pass_cost  # less than one pass
    again = decide_rule(runner, REF, RULE, tasks, 40, budget_tokens=left, cost_hints=hints)
    if answer_stored:  # the stored rounds again (at no cost), then what the rest of the budget buys
        assert again.decision.n_pairs > first.decision.n_pairs
        # a round is priced at the tasks' mean costs; its runs cost their noise (CV 25%, ×1.8
        # derailments) — a few pairs can cost half again their price, never a fresh budget
        assert 0 < again.tokens_spent <= left * 1.6
    else:
        assert again.rounds == 0 and again.tokens_spent == 0


# ------------------------------------------------------------------ the shared reference pool


def test_evidence_takes_each_round_once_and_its_next_round_follows_the_rule() -> None:
    ev = Evidence().extend([RunRecord("a", REF, r, 100.0, 100, True) for r in range(5)],
                           [RunRecord("a", RULE, 0, 90.0, 90, True)])
    again = ev.extend([RunRecord("a", REF, 1, 100.0, 100, True, reused=True)], [RunRecord("a", RULE, 1, 90.0, 90, True)])
    assert len(again.reference) == 5 and len(again.rule) == 2  # the pool's round 1 served again: not twice
    assert again.next_round("a") == 2  # the rule's next round, partnered by the pool's round 2
    paired = again.paired_only()
    assert {r.round_index for r in paired.reference} == {0, 1} == {r.round_index for r in paired.rule}


def test_a_decision_against_a_stocked_pool_pays_about_one_run_per_pair() -> None:
    """Other decisions left reference runs in the pool: a new decision takes them as evidence at
    once (counted in its receipt's n per side, not in its spend) and pays its rule's runs."""
    inner = _runner(0.0, seed=31)
    reusing = ReusingRunner(inner, [REF])
    ids = _ids(inner)
    reusing.run([REF], [PairRequest(t, r) for t in ids for r in range(12)])  # the pool
    pooled = decide_rule(reusing, REF, RULE, ids, 40, budget_tokens=40e6)
    assert pooled.decision.method["unpaired_reference_runs"] > 0 or pooled.decision.n_pairs >= 12 * len(ids)
    assert all(t.n_reference >= 12 for t in pooled.decision.tasks)
    fresh_runs = [r for r in pooled.new_runs if not r.reused]
    assert sum(config_key(r.config) == config_key(RULE) for r in fresh_runs) > 2 * sum(
        config_key(r.config) == config_key(REF) for r in fresh_runs)
    alone = decide_rule(_runner(0.0, seed=31), REF, RULE, ids, 40, budget_tokens=40e6)
    assert pooled.decision.final and alone.decision.final
    assert pooled.tokens_spent < alone.tokens_spent
