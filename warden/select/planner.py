"""Planner (pure): how many bench tokens will deciding a rule take? (issue 5 item 7)

From recorded replicates — repeated reference runs of each golden task, and any paired runs
the rule already has — estimate the spread of a paired log cost ratio, the information a
token buys under the selector's cost-aware allocation, and, with Wald's approximations for the
sequential test of ``decision.py``, the expected tokens to reach a verdict when the rule is
dead (saves only its margin), when it saves the design effect, and in the worst case (halfway
between, where the test takes longest). A rule "fits" the budget when even the worst case does;
otherwise it may end *inconclusive*.

The estimates ignore the looks' overshoot and the conservative first-look variance, so they are
slightly optimistic for tiny suites; ``benchmarks/selector_calibration.py`` shows real spend.
They price every observation as a fresh pair: reference runs already in the shared pool (other
decisions' within the freshness window) make a real decision cheaper than planned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from warden.select import stats
from warden.select.decision import ADMISSION, DecisionParams, Evidence, pooled_estimate, summarize

# Spread of one paired log ratio assumed before any replicate exists: CV 25% per run plus
# 12% derailments ×1.8 (the calibration benchmark's noise; the anchor's runs were noisier).
ASSUMED_PAIR_SIGMA = 0.44


@dataclass(frozen=True)
class PlanEstimate:
    tasks: int
    replicates: int  # reference runs the estimate rests on
    pair_sigma: float  # SD of one paired log cost ratio
    sigma_assumed: bool  # True: too few replicates, ASSUMED_PAIR_SIGMA used
    reference_cost: float  # weighted tokens per reference run (task-weighted mean)
    paired_pass_tokens: float  # one reference + one rule run of every task
    tokens_if_dead: float  # expected spend when the rule saves only its margin
    tokens_if_effective: float  # … when it saves design_effect above its margin
    tokens_worst: float  # … halfway between (the slowest case)
    # With paired evidence already (a re-audit, or a candidate measured before): the spend still
    # expected if the rule goes on saving what its evidence shows, net of the information it has.
    tokens_if_as_shown: float | None
    shown_saving: float | None  # relative saving the evidence shows
    budget_tokens: float
    fits_budget: bool  # the worst case fits
    reason: str


def _robust_sd(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return math.nan
    mad = stats.MAD_TO_SD * float(np.median(np.abs(x - np.median(x))))
    sd = float(np.std(x, ddof=1))
    # MAD ignores derailments; the SD overweights them. Their mean is what Huber's variance sees.
    return (mad + sd) / 2 if mad > 0 else sd


def plan_rule(replicates: Mapping[str, Sequence[float]], rent_tokens: float, budget_tokens: float,
              params: DecisionParams | None = None, weights: Mapping[str, float] | None = None,
              paired_log_ratios: Sequence[float] = (), kind: str = ADMISSION,
              shown: tuple[float, float] | None = None) -> PlanEstimate:
    """Estimate the tokens to decide one rule.

    ``replicates``: task id → weighted tokens of recorded reference runs (completed or failed,
    not infra errors). ``paired_log_ratios``: the rule's own paired log ratios so far, or the
    effect-free pair residuals earlier decisions observed (they measure the pair spread directly
    and win over replicates). ``shown``: (θ̂, its
    variance) of the rule's pooled evidence, if it has any.
    """
    params = params or DecisionParams()
    if not replicates:
        raise ValueError("the planner needs at least one task with a recorded reference run")
    w = {t: float((weights or {}).get(t, 1.0)) for t in replicates}
    total_w = sum(w.values())
    means = {t: float(np.mean(v)) if len(v) else math.nan for t, v in replicates.items()}
    known = [m for m in means.values() if not math.isnan(m)]
    if not known:
        raise ValueError("no recorded reference run has a cost")
    fallback = float(np.mean(known))
    costs = {t: (m if not math.isnan(m) else fallback) for t, m in means.items()}
    reference_cost = sum(w[t] * costs[t] for t in costs) / total_w

    sigma, assumed = math.nan, False
    if len(paired_log_ratios) >= 4:
        sigma = _robust_sd(paired_log_ratios)
    else:
        # Two independent runs per pair: Var(d) = 2 Var(log cost), pooled within tasks.
        sds = [(len(v) - 1, _robust_sd(np.log(np.maximum(np.asarray(v, dtype=float), 1.0))))
               for v in replicates.values() if len(v) >= 2]
        dof = sum(d for d, _ in sds)
        if dof >= 3:
            sigma = math.sqrt(2 * sum(d * s ** 2 for d, s in sds) / dof)
    if not math.isfinite(sigma) or sigma <= 0:
        sigma, assumed = ASSUMED_PAIR_SIGMA, True

    # Neyman allocation with costs: Var(θ̂) = σ² (Σ w̃_t √(2 c_t))² / tokens.
    spread = sum(w[t] / total_w * math.sqrt(2 * costs[t]) for t in costs) ** 2
    tokens_per_information = sigma ** 2 * spread
    margin_rel = min(params.keep_margin_k * rent_tokens / reference_cost, 0.99)
    margin_log = stats.log_ratio_of_saving(margin_rel)
    low, high = params.hypotheses(kind, margin_log)
    paired_pass = 2 * sum(costs.values())

    def tokens_at(theta: float) -> float:
        information = stats.wald_asn_information(theta, low, high, params.alpha, params.beta)
        # A verdict needs every task covered at least once.
        return max(information * tokens_per_information, paired_pass)

    dead, effective, worst = tokens_at(low), tokens_at(high), tokens_at((low + high) / 2)
    as_shown = shown_saving = None
    if shown is not None and math.isfinite(shown[0]):
        theta, variance = shown
        held = 1.0 / variance if math.isfinite(variance) and variance > 0 else 0.0
        information = stats.wald_asn_information(theta, low, high, params.alpha, params.beta)
        # The pooled test goes on from the information it holds; a new look still runs a pass.
        as_shown = max((information - held) * tokens_per_information, paired_pass)
        shown_saving = stats.relative_saving(theta)
    fits = worst <= budget_tokens
    if assumed:
        basis = "assumed spread (fewer than 3 replicate degrees of freedom)"
    elif len(paired_log_ratios) >= 4:
        basis = "spread from paired runs"
    else:  # pairs that share a seed (the sim backend) vary less than two independent runs
        basis = ("spread from unpaired replicates: an upper estimate until a decision has paired runs, "
                 "most of all where pairs share a seed, as on the sim backend")
    if fits:
        reason = f"decidable within the budget even in the slowest case ({basis})"
    elif min(dead, effective) <= budget_tokens:
        reason = (f"decidable if the rule is clearly dead or clearly effective; may end inconclusive "
                  f"near {100 * (stats.relative_saving((low + high) / 2)):.1f}% saving ({basis})")
    else:
        reason = f"cannot be decided within the budget ({basis})"
    return PlanEstimate(
        tasks=len(replicates), replicates=sum(len(v) for v in replicates.values()),
        pair_sigma=sigma, sigma_assumed=assumed, reference_cost=reference_cost,
        paired_pass_tokens=paired_pass, tokens_if_dead=dead, tokens_if_effective=effective,
        tokens_worst=worst, tokens_if_as_shown=as_shown, shown_saving=shown_saving,
        budget_tokens=float(budget_tokens), fits_budget=fits, reason=reason)


def plan_from_evidence(evidence: Evidence, tasks: Mapping[str, float] | Sequence[str],
                       rent_tokens: float, budget_tokens: float,
                       params: DecisionParams | None = None, kind: str = ADMISSION) -> PlanEstimate:
    """Plan from a rule's pooled evidence (its reference runs and paired ratios)."""
    weights = dict(tasks) if isinstance(tasks, Mapping) else {t: 1.0 for t in tasks}
    replicates: dict[str, list[float]] = {t: [] for t in weights}
    for record in evidence.reference:
        if record.task_id in replicates and not record.is_infra:
            replicates[record.task_id].append(record.weighted_tokens)
    summaries = summarize(evidence, weights)
    ratios = [d for s in summaries for d in s.log_ratios]
    theta, variance, _, pairs = pooled_estimate(summaries, params or DecisionParams())
    shown = (theta, variance) if pairs >= 2 else None
    return plan_rule(replicates, rent_tokens, budget_tokens, params, weights, ratios, kind, shown)
