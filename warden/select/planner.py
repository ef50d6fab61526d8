"""Planner (pure): how many bench tokens will deciding a rule take? (issue 5 item 7)

From recorded replicates — repeated reference runs of each golden task, and the paired runs
earlier decisions (or the rule itself) observed — it models what the decision core of
``decision.py`` will do, under its own rules of evidence:

* the *variance the decision charges*, not the pairs' raw spread: the decision pools the spread
  of one run within task and arm (σ²), estimates the pair correlation ρ from the pairs, takes
  the lower end of its confidence interval (and never above 0.95), and charges a pair
  ``max(2σ²(1 − ρ_low), observed pair variance)``, widened for its degrees of freedom (χ² and
  Student). Where pairs share a seed (the sim), a pair's observed spread is far below what the
  decision charges for it, and the charge falls only slowly as pairs accumulate;
* no verdict before ``min_pairs_per_task`` pairs per task on average, looks after rounds of
  about ``round_size`` paired passes, at most ``max_rounds`` rounds;
* the truncated SPRT with Ville thresholds on the decision's estimate.

It simulates that test (a few thousand paths of the estimate's random walk, a fixed seed: the
same inputs give the same plan) when the rule is dead (saves only its margin), when it saves
the design effect above the margin, halfway between (the slowest case: no drift towards either
verdict), and, when the rule has paired evidence of its own (a re-audit, a candidate measured
before, or the runs an undecided select already made for it, which select reuses at no cost),
from that evidence on as it shows. Each scenario gives the expected spend to a verdict
(whatever the budget), the expected spend within the budget, the share of decisions that reach
a verdict within the budget, and the 95th percentile of the spend to a verdict.

The one *bound* is what select enforces: a decision stops at its budget (``min(--budget,
evidence budget)``, but for the excess of a batch of runs that cost far more than priced: see
``decision.fitting_slots``), so the worst case of what a select spends on the rule is that
budget plus what undecided invocations already spent on it.
That a rule is decided within the budget is never certain (a sequential test's length is
random, and the spread is an estimate): a rule "fits" when, at the slowest true effect, at least
:data:`FIT_LEVEL` of the simulated decisions reach a verdict within the budget.

The estimates price every observation as a fresh pair: reference runs already in the shared
pool (other decisions' within the freshness window) make a real decision cheaper than planned;
``benchmarks/selector_calibration.py`` shows real spend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from warden.select import stats
from warden.select.decision import ADMISSION, REAUDIT, DecisionParams, Evidence, pooled_estimate, summarize

# Spread of one paired log ratio assumed before any replicate exists: CV 25% per run plus
# 12% derailments ×1.8 (the calibration benchmark's noise; the anchor's runs were noisier).
ASSUMED_PAIR_SIGMA = 0.44
FIT_LEVEL = 0.90  # "fits": this share of decisions at the slowest true effect reach a verdict within the budget
RHO_CAP = 0.95  # the decision's largest pair correlation (stats.pooled_effect)
SIMULATED_PATHS = 4000
SIMULATION_SEED = 20_240_611


@dataclass(frozen=True)
class PlanEstimate:
    tasks: int
    replicates: int  # reference runs the estimate rests on
    pair_sigma: float  # SD of one paired log cost ratio (the pairs' own spread)
    sigma_assumed: bool  # True: too few replicates, ASSUMED_PAIR_SIGMA used
    reference_cost: float  # weighted tokens per reference run (task-weighted mean)
    paired_pass_tokens: float  # one reference + one rule run of every task
    tokens_if_dead: float  # expected spend to a verdict when the rule saves only its margin
    tokens_if_effective: float  # … when it saves design_effect above its margin
    tokens_worst: float  # … halfway between (the slowest case); an expectation, not a bound
    # With paired evidence already (a re-audit, a candidate measured before, an undecided
    # select's runs): the spend still expected if the rule goes on saving what its evidence shows.
    tokens_if_as_shown: float | None
    shown_saving: float | None  # relative saving the evidence shows
    budget_tokens: float
    # at the slowest true effect, ≥ FIT_LEVEL of decisions reach a verdict within the budget (and max_rounds)
    fits_budget: bool
    reason: str
    spent_before_tokens: float = 0.0  # what undecided invocations already spent on the rule
    # The bound select enforces: the decision's budget plus what was spent before it.
    worst_case_tokens: float = math.nan
    expected_tokens: float = math.nan  # to a verdict, whatever the budget (as shown, else the two hypotheses' mean)
    expected_spend_tokens: float = math.nan  # the same within the budget (the spend stops there)
    # 95% of decisions at the slowest effect reach a verdict by then (None: not within max_rounds)
    slowest_p95_tokens: float | None = None
    decided_share_slowest: float = math.nan  # share of decisions reaching a verdict within the budget
    decided_share_if_dead: float = math.nan
    decided_share_if_effective: float = math.nan
    decided_share_as_shown: float | None = None
    held_pairs: int = 0  # pairs of the rule's own evidence the decision carries
    run_sigma: float = math.nan  # SD of one run's log cost within task and arm
    decision_pair_sigma: float = math.nan  # what the decision charges a pair at its most confident


def _robust_sd(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return math.nan
    mad = stats.MAD_TO_SD * float(np.median(np.abs(x - np.median(x))))
    sd = float(np.std(x, ddof=1))
    # MAD ignores derailments; the SD overweights them. Their mean is what Huber's variance sees.
    return (mad + sd) / 2 if mad > 0 else sd


def _run_sigma(replicates: Mapping[object, Sequence[float]]) -> tuple[float, int]:
    """(SD of one run's log cost within a task, pooled; its degrees of freedom)."""
    sds = [(len(v) - 1, _robust_sd(np.log(np.maximum(np.asarray(v, dtype=float), 1.0))))
           for v in replicates.values() if len(v) >= 2]
    dof = sum(d for d, _ in sds)
    if dof < 1:
        return math.nan, 0
    return math.sqrt(sum(d * s ** 2 for d, s in sds) / dof), dof


def task_residuals(evidence: Evidence, weights: Mapping[str, float]) -> list[float]:
    """The pair noise in ``evidence``: each task's paired log ratios minus their mean there (the
    rule's effect on it), scaled to unbiased spread; tasks with one pair say nothing."""
    out: list[float] = []
    for task in summarize(evidence, weights):
        n = len(task.log_ratios)
        if n >= 2:
            mean = sum(task.log_ratios) / n
            out.extend((x - mean) * math.sqrt(n / (n - 1)) for x in task.log_ratios)
    return out


@dataclass(frozen=True)
class _Design:
    """What the simulated decision needs: the suite, its costs and the decision's variance model."""

    tasks: int
    mean_pair: float  # tokens of one pair, averaged over tasks
    spread: float  # tokens per unit of pair variance under cost-aware allocation
    paired_pass: float
    round_tokens: float
    pair_var: float  # σ_d²: the spread of a pair's log ratio (what the estimate really varies by)
    run_var: float  # σ²: one run's log cost within task and arm
    rho: float  # the pair correlation the decision estimates (capped)
    pool: int  # reference runs of the shared pool (degrees of freedom of the spread)
    low: float
    high: float
    params: DecisionParams


def _charged_variance(design: _Design, pairs: np.ndarray) -> np.ndarray:
    """Per look: the variance the decision charges one (cost-averaged) pair, conservative
    factors for its degrees of freedom included (inf before it has any)."""
    p = design.params
    df_pairs = np.maximum(pairs - design.tasks, 0.0)
    out = np.empty_like(pairs)
    z = math.atanh(min(max(design.rho, 0.0), RHO_CAP))
    for i, (n, d) in enumerate(zip(pairs, df_pairs)):
        rho = max(math.tanh(z - 1.0 / math.sqrt(d - 2.0)), 0.0) if d >= 4 else 0.0
        charged = max(2.0 * design.run_var * (1.0 - rho), design.pair_var)
        df = int(d + max(design.pool - n, 0.0))
        if df < 1:
            out[i] = math.inf
            continue
        out[i] = charged * stats.variance_inflation(df, p.variance_quantile) * stats.student_inflation(df, p.alpha)
    return out


@dataclass(frozen=True)
class _Outcome:
    expected: float  # mean spend to a verdict (paths undecided within max_rounds counted at their end)
    within: float  # mean spend with the budget (it stops there)
    decided: float  # share of paths with a verdict within the budget
    p95: float | None  # 95th percentile of the spend to a verdict (None: beyond max_rounds)


def _simulate(design: _Design, theta: float, budget: float, held: tuple[int, float] | None, kind: str,
              noise: np.ndarray) -> _Outcome:
    """The decision's spend to a verdict when the truth is ``theta``: ``held`` = (pairs, θ̂) of
    evidence it already has (its runs reused at no cost). ``noise``: standard normals, one row
    per path, one column per look (shared by the scenarios: common random numbers)."""
    p = design.params
    looks = noise.shape[1]
    if held is None:
        held_pairs, held_theta = 0, 0.0
        # the first round covers every task once, the next ones add about round_size passes
        new = design.paired_pass + design.round_tokens * np.arange(looks, dtype=float)
    else:
        held_pairs, held_theta = held
        # a re-audit always measures a fresh round; an admission may decide on what it holds
        start = 1.0 if kind == REAUDIT else 0.0
        new = design.round_tokens * (start + np.arange(looks, dtype=float))
    held_tokens = held_pairs * design.mean_pair
    pairs = held_pairs + new / design.mean_pair
    n_eff = (held_tokens + new) / design.spread  # the estimate's information, in pairs' worth
    n0 = held_tokens / design.spread
    charged = _charged_variance(design, pairs)
    steps = np.diff(np.concatenate(([n0], n_eff)))
    walk = np.cumsum(noise * np.sqrt(np.maximum(steps, 0.0)), axis=1)  # W(n_eff - n0)
    estimate = (held_theta * n0 + theta * (n_eff - n0) + math.sqrt(design.pair_var) * walk) / n_eff
    mid = (design.low + design.high) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        llr = (design.high - design.low) * n_eff / charged * (estimate - mid)
    llr = np.where(np.isfinite(charged), llr, 0.0)
    floor = max(2.0, p.min_pairs_per_task * design.tasks)
    eligible = pairs >= floor - 1e-9
    a, b = math.log(1.0 / p.alpha), math.log(p.beta)
    stop = eligible & ((llr >= a) | (llr <= b))
    any_stop = stop.any(axis=1)
    first = np.argmax(stop, axis=1)
    spend = np.where(any_stop, new[first], math.inf)
    horizon = float(new[-1])
    expected = float(np.mean(np.where(any_stop, spend, horizon)))
    within = float(np.mean(np.minimum(spend, budget)))
    decided = float(np.mean(spend <= budget))
    ordered = np.sort(spend)
    q = ordered[min(int(math.ceil(0.95 * len(ordered))) - 1, len(ordered) - 1)]
    return _Outcome(expected, within, decided, float(q) if math.isfinite(q) else None)


def plan_rule(replicates: Mapping[str, Sequence[float]], rent_tokens: float, budget_tokens: float,
              params: DecisionParams | None = None, weights: Mapping[str, float] | None = None,
              paired_log_ratios: Sequence[float] = (), kind: str = ADMISSION,
              shown: tuple[float, float] | None = None, *, held_pairs: int = 0, spent_before: float = 0.0,
              pool_runs: int | None = None, run_sigma: float | None = None) -> PlanEstimate:
    """Estimate the tokens to decide one rule.

    ``replicates``: task id → weighted tokens of recorded reference runs (completed or failed,
    not infra errors). ``paired_log_ratios``: effect-free pair residuals (the rule's own, each
    task's ratios minus their mean there, and those earlier decisions observed): they measure a
    pair's spread directly and win over replicates. ``shown``: (θ̂, its variance) of the rule's
    pooled evidence, if it has any, resting on ``held_pairs`` pairs (the decision reuses them).
    ``budget_tokens``: the decision's budget (select stops there); ``spent_before``: what
    undecided invocations already spent on the rule. ``pool_runs``: reference runs of the shared
    pool the decision's spread also rests on (default: the replicates). ``run_sigma``: the SD of
    one run's log cost within task and arm, if measured on more runs than ``replicates``.
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

    if run_sigma is not None and math.isfinite(run_sigma) and run_sigma > 0:
        run_dof = 3
    else:
        run_sigma, run_dof = _run_sigma(replicates)
    sigma, assumed = math.nan, False
    if len(paired_log_ratios) >= 4:
        sigma = _robust_sd(paired_log_ratios)
    elif run_dof >= 3:  # two independent runs per pair: Var(d) = 2 Var(log cost)
        sigma = math.sqrt(2.0) * run_sigma
    if not math.isfinite(sigma) or sigma <= 0:
        sigma, assumed = ASSUMED_PAIR_SIGMA, True
    if not (math.isfinite(run_sigma) and run_sigma > 0) or run_dof < 3:
        run_sigma = sigma / math.sqrt(2.0)  # as if pairs were independent (no correlation to count on)
    rho = min(max(1.0 - sigma ** 2 / (2.0 * run_sigma ** 2), 0.0), RHO_CAP)

    tasks = len(costs)
    paired_pass = 2 * sum(costs.values())
    mean_pair = max(paired_pass / tasks, 1.0)  # runs that cost nothing still count as pairs
    # Neyman allocation with costs: Var(θ̂) = σ² (Σ w̃_t √(2 c_t))² / tokens.
    spread = max(sum(w[t] / total_w * math.sqrt(2 * costs[t]) for t in costs) ** 2, 1e-9)
    margin_rel = min(params.keep_margin_k * rent_tokens / reference_cost, 0.99)
    margin_log = stats.log_ratio_of_saving(margin_rel)
    low, high = params.hypotheses(kind, margin_log)
    round_pairs = max(1, math.ceil(params.round_size * tasks - 1e-9))
    design = _Design(tasks=tasks, mean_pair=mean_pair, spread=spread, paired_pass=paired_pass,
                     round_tokens=round_pairs * mean_pair, pair_var=sigma ** 2, run_var=run_sigma ** 2, rho=rho,
                     pool=sum(len(v) for v in replicates.values()) if pool_runs is None else int(pool_runs),
                     low=low, high=high, params=params)
    budget = float(budget_tokens)
    noise = np.random.default_rng(SIMULATION_SEED).standard_normal((SIMULATED_PATHS, max(1, params.max_rounds)))

    def run(theta: float, held: tuple[int, float] | None = None) -> _Outcome:
        return _simulate(design, theta, budget, held, kind, noise)

    dead, effective, slowest = run(low), run(high), run((low + high) / 2)
    as_shown = shown_saving = None
    if shown is not None and math.isfinite(shown[0]) and held_pairs >= 1:
        as_shown = run(shown[0], (held_pairs, shown[0]))
        shown_saving = stats.relative_saving(shown[0])
    # A re-audit measures a fresh round at least (priced as a pass); an admission may decide on
    # what it holds, at no cost.
    tokens_as_shown = None if as_shown is None else max(as_shown.expected, paired_pass if kind == REAUDIT else 0.0)
    if as_shown is not None:
        expected = tokens_as_shown
        expected_spend = max(as_shown.within, min(paired_pass, budget)) if kind == REAUDIT else as_shown.within
    else:
        expected = (dead.expected + effective.expected) / 2
        expected_spend = (dead.within + effective.within) / 2
    fits = slowest.decided >= FIT_LEVEL
    if assumed:
        basis = "assumed spread (fewer than 3 replicate degrees of freedom)"
    elif len(paired_log_ratios) >= 4:
        basis = "spread from paired runs"
    else:  # pairs that share a seed (the sim backend) vary less than two independent runs
        basis = ("spread from unpaired replicates: an upper estimate until a decision has paired runs, "
                 "most of all where pairs share a seed, as on the sim backend")
    near = f"{100 * stats.relative_saving((low + high) / 2):.1f}%"
    if fits:
        reason = (f"likely decidable within the budget: at the slowest true saving ({near}) about "
                  f"{100 * slowest.decided:.0f}% of simulated decisions reach a verdict before it ({basis}); "
                  "select stops at the budget whatever the runs show")
    elif min(dead.decided, effective.decided) >= FIT_LEVEL:
        reason = (f"decidable if the rule is clearly dead or clearly effective; may end inconclusive near "
                  f"{near} saving, where about {100 * slowest.decided:.0f}% of simulated decisions reach a verdict "
                  f"within the budget ({basis})")
    elif max(dead.decided, effective.decided, slowest.decided) == 0.0:
        reason = f"cannot be decided within the budget: no simulated decision reaches a verdict in it ({basis})"
    else:
        reason = (f"may end inconclusive: about {100 * dead.decided:.0f}% of simulated decisions reach a verdict "
                  f"within the budget if the rule is dead, {100 * effective.decided:.0f}% if effective, "
                  f"{100 * slowest.decided:.0f}% near {near} saving ({basis})")
    charged_floor = math.sqrt(max(2.0 * run_sigma ** 2 * (1.0 - rho), sigma ** 2))
    return PlanEstimate(
        tasks=tasks, replicates=sum(len(v) for v in replicates.values()),
        pair_sigma=sigma, sigma_assumed=assumed, reference_cost=reference_cost,
        paired_pass_tokens=paired_pass, tokens_if_dead=dead.expected, tokens_if_effective=effective.expected,
        tokens_worst=slowest.expected, tokens_if_as_shown=tokens_as_shown, shown_saving=shown_saving,
        budget_tokens=budget, fits_budget=fits, reason=reason,
        spent_before_tokens=float(spent_before), worst_case_tokens=float(spent_before) + budget,
        expected_tokens=expected, expected_spend_tokens=expected_spend, slowest_p95_tokens=slowest.p95,
        decided_share_slowest=slowest.decided, decided_share_if_dead=dead.decided,
        decided_share_if_effective=effective.decided,
        decided_share_as_shown=None if as_shown is None else as_shown.decided, held_pairs=held_pairs,
        run_sigma=run_sigma, decision_pair_sigma=charged_floor)


def plan_from_evidence(evidence: Evidence, tasks: Mapping[str, float] | Sequence[str],
                       rent_tokens: float, budget_tokens: float,
                       params: DecisionParams | None = None, kind: str = ADMISSION,
                       replicates: Mapping[str, Sequence[float]] | None = None,
                       residuals: Sequence[float] = (), spent_before: float = 0.0) -> PlanEstimate:
    """Plan from a rule's pooled evidence: its reference runs price the tasks (``replicates``
    fill the tasks it has none of), its pairs count as held (by its pairs, as the decision
    carries them) and, with ``residuals`` (earlier decisions' pair noise), measure a pair's
    spread."""
    params = params or DecisionParams()
    weights = dict(tasks) if isinstance(tasks, Mapping) else {t: 1.0 for t in tasks}
    own: dict[str, list[float]] = {t: [] for t in weights}
    for record in evidence.reference:
        if record.task_id in own and not record.is_infra:
            own[record.task_id].append(record.weighted_tokens)
    merged = {t: (own[t] if own[t] else list((replicates or {}).get(t, ()))) for t in weights}
    if not any(merged.values()):
        merged = own
    # one run's spread: from the rule's reference runs and the replicates, each task and set apart
    groups = {**{("own", t): v for t, v in own.items()},
              **{("replicates", t): list(v) for t, v in (replicates or {}).items()}}
    run_sigma, dof = _run_sigma(groups)
    carried = evidence.paired_only()
    summaries = summarize(carried, weights)
    theta, variance, _, pairs = pooled_estimate(summaries, params)
    shown = (theta, variance) if pairs >= 2 else None
    ratios = task_residuals(carried, weights) + list(residuals)
    if len(ratios) < 4:  # too few pairs in a task to centre: their raw spread (effects included)
        ratios = [d for s in summaries for d in s.log_ratios] + list(residuals)
    return plan_rule(merged, rent_tokens, budget_tokens, params, weights, ratios, kind, shown,
                     held_pairs=pairs, spent_before=spent_before, run_sigma=run_sigma if dof >= 3 else None)
