"""Pure statistics of the selector: a robust, pool-aware estimate of a rule's effect and a
sequential probability ratio test on it. No I/O; numpy/scipy only. The method is described in
``decision.py``.

Conventions: the quantity tested is θ, the task-weighted mean of the per-task effects on log
cost, ``μ(log reference cost) - μ(log rule cost)`` (θ > 0: the rule saves; relative saving =
1 - e^-θ).
An estimate θ̂ comes with a variance ``v`` (its squared standard error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

HUBER_C = 1.345  # 95% efficiency at the normal, bounded influence of a derailed run
MAD_TO_SD = 1.482602218505602  # MAD of a normal sample × this = its standard deviation
# Runs in each arm of a task between which its Huber pseudo-values take over from the plain
# values: with fewer, a sandwich variance of heavy-tailed runs is too small to trust.
ROBUST_FROM, ROBUST_FULL = 6, 16


# --------------------------------------------------------------- paired runs with a reference pool


@dataclass(frozen=True)
class TaskRuns:
    """One task's log costs: paired rounds (reference, rule) and runs of either arm whose round
    has no partner — above all reference runs other decisions already made (the shared pool)."""

    weight: float
    pairs: tuple[tuple[float, float], ...] = ()
    reference_only: tuple[float, ...] = ()
    rule_only: tuple[float, ...] = ()


@dataclass(frozen=True)
class PoolEstimate:
    estimate: float  # θ̂: task-weighted mean of the per-task effects (log reference - log rule)
    variance: float  # its variance (not yet inflated for the degrees of freedom)
    df: int  # degrees of freedom the spread rests on
    run_variance: float  # σ²: spread of one run's (robustified) log cost within a task and arm
    correlation: float  # ρ used: the conservative end of the estimated within-pair correlation
    scale: float  # robust scale of one run (MAD-based): where the Huber ψ clips
    n_pairs: int
    clipped: int  # runs whose influence the Huber ψ bounded


def pair_variance(pairs: float, reference_only: float, rule_only: float, run_variance: float,
                  correlation: float) -> float:
    """Variance of the efficient (generalized least squares) estimate of one task's effect
    μ_reference - μ_rule from ``pairs`` paired rounds with correlation ρ and unpaired runs of
    either arm, every run with variance σ²: ``σ² (2q(1-ρ) + U_x + U_y) / ((q + U_x)(q + U_y) - q²ρ²)``
    with ``q = P / (1 - ρ²)``. Pairs alone give ``2σ²(1-ρ)/P``; with ρ = 0 it is
    ``σ²/(P + U_x) + σ²/(P + U_y)``: an unpaired reference run is worth half a pair."""
    rho = min(max(correlation, 0.0), 0.99)
    q = pairs / (1.0 - rho * rho)
    det = (q + reference_only) * (q + rule_only) - (q * rho) ** 2
    if det <= 0.0:
        return math.inf
    return run_variance * (2.0 * q * (1.0 - rho) + reference_only + rule_only) / det


def _task_effect(task: TaskRuns, rho: float) -> float:
    """The GLS estimate of μ_reference - μ_rule (see :func:`pair_variance`; σ² cancels)."""
    p, ux, uy = len(task.pairs), len(task.reference_only), len(task.rule_only)
    sx_p = sum(x for x, _ in task.pairs)
    sy_p = sum(y for _, y in task.pairs)
    q = p / (1.0 - rho * rho)
    det = (q + ux) * (q + uy) - (q * rho) ** 2
    bx = (sx_p - rho * sy_p) / (1.0 - rho * rho) + sum(task.reference_only)
    by = (sy_p - rho * sx_p) / (1.0 - rho * rho) + sum(task.rule_only)
    return ((q * (1.0 - rho) + uy) * bx - (q * (1.0 - rho) + ux) * by) / det


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def sum_of_squares(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def _huber_center(x: np.ndarray, scale: float, c: float, max_iter: int = 50) -> float:
    theta = float(np.median(x))
    if x.size < 3 or not math.isfinite(c):
        return float(np.mean(x))
    for _ in range(max_iter):
        r = (x - theta) / scale
        inside = np.abs(r) <= c
        if not inside.any():
            break
        step = scale * float(np.sum(np.clip(r, -c, c))) / float(np.sum(inside))
        theta += step
        if abs(step) < 1e-12 * scale:
            break
    return theta


def pooled_effect(tasks: Sequence[TaskRuns], c: float = HUBER_C) -> PoolEstimate:
    """Robust, pool-aware estimate of the task-weighted effect θ = Σ w_t (μ_ref,t - μ_rule,t) / Σ w_t.

    1. *Robustness*: as both arms of a task fill up (``ROBUST_FROM`` to ``ROBUST_FULL`` runs,
       blended), every run's log cost becomes a Huber pseudo-value — its task-and-arm Huber
       centre plus ``K·s·ψ_c(r)/κ``
       (r = residual / s, s the pooled MAD scale of one run, κ the share of runs ψ leaves
       unclipped, K Huber's small-sample factor) — so a derailed run has bounded influence, and
       linear estimates of pseudo-values are the M-estimates' first-order (sandwich)
       linearisation. Runs are robustified one by one, where a derailment stands out best (a
       run's residual, not a pair's difference of two noisy runs). Smaller tasks keep their
       plain values: with a handful of heavy-tailed runs the sandwich understates the spread.
       Both arms of a task take the same blend of the same centre, since derailments skew costs
       one way: any location measure then shifts by exactly the rule's effect.
    2. *Spread and pairing*: σ² is pooled within task and arm; the pair differences give
       ``Var(x - y) = 2σ²(1 - ρ)``, hence ρ; the ρ used is its lower confidence limit (one Fisher
       z standard error), never below 0 — a smaller ρ only ever overstates the variance.
    3. *Per task*, the generalized least squares estimate from pairs and unpaired runs
       (:func:`pair_variance`): with ρ ≈ 1 (pairs that share a seed on a deterministic backend)
       it is the paired difference; with ρ ≈ 0 (independent runs) it uses every reference run
       of the pool as fully as its own — the efficient estimate either way.
    4. Tasks combine with their weights; per-task effects may differ (the estimand is their
       weighted mean), and their variance comes from within-task spread only.

    The sequence of such efficient estimates over growing data has the canonical joint
    distribution of group-sequential theory (Jennison & Turnbull 2000, ch. 11), which is what
    the sequential test's anytime bounds assume.
    """
    if not tasks:
        return PoolEstimate(math.nan, math.inf, 0, math.nan, 0.0, math.nan, 0, 0)
    # Plain lists: a task's arm holds a handful to a few dozen runs, where numpy's per-call cost
    # is most of the work.
    groups: list[list[float]] = []
    for t in tasks:
        groups.append([x for x, _ in t.pairs] + list(t.reference_only))
        groups.append([y for _, y in t.pairs] + list(t.rule_only))
    n_pairs = sum(len(t.pairs) for t in tasks)
    deviations: list[float] = []
    for g in groups:
        if len(g) >= 2:
            middle, stretch = _median(g), math.sqrt(len(g) / (len(g) - 1))
            deviations.extend(abs(v - middle) * stretch for v in g)
    scale = math.nan
    if deviations:
        scale = MAD_TO_SD * _median(deviations)
        if not scale > 0.0:
            spread = math.sqrt(sum(d * d for d in deviations) / len(deviations))
            scale = spread if spread > 0.0 else 1e-9
    # A task whose arms are too small for an M-estimate's sandwich variance to be trusted keeps
    # its plain values (their means, with the honest spread of the derailments they hold). Both
    # arms of a task take the same centre: derailments skew costs one way, and a Huber centre of
    # one arm against the other's mean would measure the skew, not the rule.
    # The weight of the robust values grows from 0 to 1 between ROBUST_FROM and ROBUST_FULL runs
    # in the task's smaller arm, so that the estimate never jumps as a task turns robust.
    blend = []
    for i in range(0, len(groups), 2):
        n = min(len(groups[i]), len(groups[i + 1]))
        weight = min(max((n - ROBUST_FROM) / (ROBUST_FULL - ROBUST_FROM), 0.0), 1.0)
        if not (math.isfinite(c) and math.isfinite(scale)):
            weight = 0.0
        blend.extend((weight, weight))
    centers = [_huber_center(np.asarray(g), scale, c) if weight > 0 else (sum(g) / len(g) if g else math.nan)
               for g, weight in zip(groups, blend)]
    unclipped = total = 0
    for g, center, weight in zip(groups, centers, blend):
        if weight > 0:
            unclipped += sum(abs(v - center) <= c * scale for v in g)
            total += len(g)
    kappa = max(unclipped / total, 0.5) if total else 1.0

    def pseudo(values: Sequence[float], group: int) -> list[float]:
        weight = blend[group]
        if weight == 0.0:
            return [float(v) for v in values]
        center = centers[group]
        # Huber's (1981) small-sample factor K = 1 + (1/n)(1 - κ)/κ on the spread
        step = (1.0 + (1.0 - kappa) / (kappa * len(groups[group]))) * scale / kappa
        return [(1.0 - weight) * v + weight * (center + step * min(max((v - center) / scale, -c), c))
                for v in values]

    robust: list[TaskRuns] = []
    ss = 0.0
    df_runs = 0
    ss_pairs = 0.0
    df_pairs = 0
    for i, t in enumerate(tasks):
        px = pseudo([x for x, _ in t.pairs], 2 * i)
        py = pseudo([y for _, y in t.pairs], 2 * i + 1)
        ux, uy = pseudo(t.reference_only, 2 * i), pseudo(t.rule_only, 2 * i + 1)
        for arm in (px + ux, py + uy):
            if len(arm) >= 2:
                ss += sum_of_squares(arm)
                df_runs += len(arm) - 1
        if len(px) >= 2:
            ss_pairs += sum_of_squares([x - y for x, y in zip(px, py)])
            df_pairs += len(px) - 1
        robust.append(TaskRuns(t.weight, tuple(zip(px, py)), tuple(ux), tuple(uy)))
    # No spread at all (a deterministic backend, the rule changing nothing): the effect is
    # known as exactly as the runs say — a vanishing variance, not an unknown one. No
    # replicate at all: the spread is unknown.
    sigma2 = (ss / df_runs if ss > 0.0 else 1e-18) if df_runs else math.inf
    rho = 0.0
    if df_pairs >= 4 and 0.0 < sigma2 < math.inf:
        estimate = min(max(1.0 - (ss_pairs / df_pairs) / (2.0 * sigma2), 0.0), 0.95)
        rho = max(math.tanh(math.atanh(estimate) - 1.0 / math.sqrt(df_pairs - 2)), 0.0)
    if df_pairs and df_runs:  # the model's pair variance never undercuts the one observed
        sigma2 = max(sigma2, ss_pairs / df_pairs / (2.0 * (1.0 - rho)))
    total_weight = sum(t.weight for t in robust)
    theta = variance = 0.0
    for t in robust:
        p, ux, uy = len(t.pairs), len(t.reference_only), len(t.rule_only)
        if (p + ux) == 0 or (p + uy) == 0:  # an arm without runs: the task says nothing yet
            return PoolEstimate(math.nan, math.inf, 0, sigma2, rho, scale, n_pairs, total - unclipped)
        w = t.weight / total_weight
        theta += w * _task_effect(t, rho)
        variance += w * w * (pair_variance(p, ux, uy, sigma2, rho) if math.isfinite(sigma2) else math.inf)
    df = df_pairs + sum(len(t.reference_only) + len(t.rule_only) for t in robust)
    return PoolEstimate(theta, variance, df, sigma2, rho, scale, n_pairs, total - unclipped)


@lru_cache(maxsize=4096)
def variance_inflation(df: int, quantile: float) -> float:
    """Factor making a variance estimated with ``df`` degrees of freedom conservative: the
    estimate is scaled to the upper confidence limit ``df / χ²_df(quantile)``. It shrinks to
    1 as evidence accumulates, and guards the first looks (few pairs) against an
    underestimated spread, which would otherwise inflate the false-keep rate."""
    if df <= 0:
        return math.inf
    if quantile >= 0.5 and df > 1000:
        return 1.0
    from scipy.stats import chi2  # half a second to import: only when a variance is bounded

    return float(df / chi2.ppf(quantile, df))


@lru_cache(maxsize=4096)
def student_inflation(df: int, level: float) -> float:
    """``(t_df / z)²`` at the one-sided ``level``: how much wider a Student t interval is than the
    normal one when the spread is estimated with ``df`` degrees of freedom (a handful of runs of
    heavy-tailed costs). Fades to 1 as evidence accumulates."""
    if df <= 0:
        return math.inf
    if df > 5000:
        return 1.0
    from scipy.stats import norm, t

    return float((t.ppf(1.0 - level, df) / norm.ppf(1.0 - level)) ** 2)


def sprt_llr(estimate: float, variance: float, low: float, high: float) -> float:
    """Log likelihood ratio of θ = ``high`` against θ = ``low`` for θ̂ ~ N(θ, v):
    ``(high - low) / v · (θ̂ - (low + high) / 2)``. This is Wald's SPRT statistic for a normal
    mean applied to the (asymptotically normal) robust estimate at each look."""
    if not math.isfinite(variance) or variance <= 0.0:
        return 0.0
    return (high - low) / variance * (estimate - (low + high) / 2.0)


def lower_bound(estimate: float, variance: float, offset: float, level: float) -> float:
    """Anytime-valid lower confidence bound at error ``level`` from the SPRT family: the smallest
    θ0 not rejected by the ratio test of θ0 against θ0 + offset at threshold 1/level, i.e.
    ``θ̂ - offset/2 - v·log(1/level)/offset``. By Ville's inequality the true θ lies below it at
    *any* look with probability at most ``level``, however many looks are taken."""
    if not math.isfinite(variance):
        return -math.inf
    return estimate - offset / 2.0 - variance * math.log(1.0 / level) / offset


def upper_bound(estimate: float, variance: float, offset: float, level: float) -> float:
    """Mirror image of :func:`lower_bound` (test of θ0 against θ0 - offset)."""
    if not math.isfinite(variance):
        return math.inf
    return estimate + offset / 2.0 + variance * math.log(1.0 / level) / offset


def wald_oc(theta: float, low: float, high: float, alpha: float, beta: float) -> float:
    """Wald's approximation of P(accept ``high``) for a normal-mean SPRT between ``low`` and
    ``high`` with thresholds log(1/α) and log β when the true mean is θ."""
    delta = high - low
    h = 1.0 - 2.0 * (theta - low) / delta  # root of E[exp(h·increment)] = 1
    a, b = math.log(1.0 / alpha), math.log(beta)
    if abs(h) < 1e-9:
        return -b / (a - b)
    # P(upper first) = (1 - e^{h b}) / (e^{h a} - e^{h b}); guard overflow for large |h|.
    ha, hb = h * a, h * b
    top = -math.expm1(hb) if hb < 700 else -math.inf
    if ha > 700 or hb > 700:
        m = max(ha, hb)
        return float((math.exp(-m) - math.exp(hb - m)) / (math.exp(ha - m) - math.exp(hb - m)))
    return float(top / (math.exp(ha) - math.exp(hb)))


def wald_asn_information(theta: float, low: float, high: float, alpha: float,
                         beta: float) -> float:
    """Wald's approximation of the expected *information* (1/variance units) an SPRT between
    ``low`` and ``high`` needs to stop when the truth is θ."""
    delta = high - low
    a, b = math.log(1.0 / alpha), math.log(beta)
    drift = delta * (theta - (low + high) / 2.0)  # E[LLR] per unit of information
    if abs(drift) < 1e-12:
        return -a * b / delta ** 2  # E[LLR²] ≈ -ab at the midpoint; LLR variance δ² per unit
    p_high = wald_oc(theta, low, high, alpha, beta)
    return (p_high * a + (1.0 - p_high) * b) / drift


def relative_saving(theta: float) -> float:
    """θ (log ratio reference/rule) → relative saving 1 - rule/reference."""
    if theta == math.inf:
        return 1.0
    if theta == -math.inf:
        return -math.inf
    return -math.expm1(-theta)


def log_ratio_of_saving(saving: float) -> float:
    """Relative saving → θ; a saving ≥ 1 is impossible (the rule would cost nothing)."""
    if saving >= 1.0:
        raise ValueError("a relative saving must be below 1")
    return -math.log1p(-saving)
