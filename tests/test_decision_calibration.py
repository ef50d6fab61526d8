"""A test-sized run of the calibration benchmark (fixed seeds): the error rates hold in small."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from warden.select.decision import DecisionParams, Verdict, decide_rule
from warden.select.planner import plan_from_evidence, plan_rule

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "selector_calibration.py"


@pytest.fixture(scope="module")
def calibration():
    spec = importlib.util.spec_from_file_location("selector_calibration", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["selector_calibration"] = module
    spec.loader.exec_module(module)
    return module


def _verdicts(calibration, saving: float, seeds: range, budget: float | None = None) -> list[Verdict]:
    out = []
    for seed in seeds:
        tasks, rent = calibration.make_suite(seed)
        runner = calibration.make_runner(tasks, saving, False, seed)
        out.append(decide_rule(runner, calibration.REFERENCE, calibration.RULE, [t.task_id for t in tasks],
                               rent, DecisionParams(), budget_tokens=budget or calibration.ADMISSION_BUDGET
                               ).decision.verdict)
    return out


def test_aa_false_keep_stays_low(calibration) -> None:
    verdicts = _verdicts(calibration, 0.0, range(100, 140), budget=60e6)
    assert verdicts.count(Verdict.KEEP) <= 2  # α = 5% of 40
    # Within ≈ 20 paired passes most dead rules are refuted; the rest end inconclusive — never kept.
    assert verdicts.count(Verdict.REFUTE) >= 25
    assert set(verdicts) <= {Verdict.KEEP, Verdict.REFUTE, Verdict.INCONCLUSIVE}


def test_a_20pct_rule_is_kept(calibration) -> None:
    verdicts = _verdicts(calibration, 0.20, range(200, 220))
    assert verdicts.count(Verdict.KEEP) >= 18


def test_anchor_policy_runs_through_the_same_protocol(calibration) -> None:
    tasks, rent = calibration.make_suite(5)
    runner = calibration.make_runner(tasks, 0.05, True, 5)
    assert calibration.anchor_decide(runner, [t.task_id for t in tasks], rent) == "regression"
    runner = calibration.make_runner(tasks, 0.0, False, 5)
    assert calibration.anchor_decide(runner, [t.task_id for t in tasks], rent) in ("keep", "evict")
    assert runner.runs_made >= 6 * len(tasks)  # 3 runs per side per task, baseline re-run


def test_small_benchmark_table_has_both_policies(calibration) -> None:
    table = calibration.run(decisions=2, seed=3, reaudits=1, params=DecisionParams(),
                            budget=calibration.ADMISSION_BUDGET, reaudit_budget=calibration.REAUDIT_BUDGET,
                            workers=1)
    for policy in ("ours", "anchor"):
        assert set(table[policy]) >= {"0%", "20%", "breaks a task", "_overall"}
        assert table[policy]["breaks a task"]["regression_rate"] == 1.0
    assert "regression_always_evicted" in table["targets"]
    assert "ours" in calibration.render(table)


def test_planner_estimates_spend_and_budget_fit(calibration) -> None:
    tasks, rent = calibration.make_suite(9)
    runner = calibration.make_runner(tasks, 0.0, False, 9)
    ids = [t.task_id for t in tasks]
    replicates: dict[str, list[float]] = {t: [] for t in ids}
    for record in calibration.run_config(runner, calibration.REFERENCE, ids, 3):
        replicates[record.task_id].append(record.weighted_tokens)
    big = plan_rule(replicates, rent, 1e12)
    assert big.fits_budget and not big.sigma_assumed
    assert 0.25 < big.pair_sigma < 0.8
    assert big.tokens_worst > max(big.tokens_if_dead, big.tokens_if_effective) >= big.paired_pass_tokens
    small = plan_rule(replicates, rent, big.paired_pass_tokens)
    assert not small.fits_budget and "cannot be decided" in small.reason
    assumed = plan_rule({ids[0]: [100_000.0]}, rent, 1e9)
    assert assumed.sigma_assumed
    result = decide_rule(runner, calibration.REFERENCE, calibration.RULE, ids, rent, budget_tokens=8e6)
    pooled = plan_from_evidence(result.evidence, ids, rent, 8e6)
    assert pooled.replicates == len([r for r in result.evidence.reference if not r.is_infra])
    with pytest.raises(ValueError):
        plan_rule({}, rent, 1e6)


def test_planner_uses_the_effect_a_rules_evidence_shows(calibration) -> None:
    """A re-audit of a rule whose evidence shows a clear 20% saving is planned from that effect
    (and the information already held), not from the slowest case between the hypotheses."""
    from warden.select.decision import REAUDIT

    tasks, rent = calibration.make_suite(11)
    ids = [t.task_id for t in tasks]
    strong = decide_rule(calibration.make_runner(tasks, 0.20, False, 11), calibration.REFERENCE,
                         calibration.RULE, ids, rent, budget_tokens=8e6)
    plan = plan_from_evidence(strong.evidence, ids, rent, 8e6, kind=REAUDIT)
    # a sequential test stops as its estimate crosses a bound: the estimate it stops on runs high
    assert plan.shown_saving is not None and 0.12 < plan.shown_saving < 0.35
    assert plan.tokens_if_as_shown is not None
    assert plan.paired_pass_tokens <= plan.tokens_if_as_shown < plan.tokens_worst
    replicates: dict[str, list[float]] = {t: [] for t in ids}
    for record in strong.evidence.reference:
        replicates[record.task_id].append(record.weighted_tokens)
    assert plan_rule(replicates, rent, 8e6, kind=REAUDIT).tokens_if_as_shown is None  # no evidence of its own
