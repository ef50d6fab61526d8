"""Pure statistics of the selector: a robust location estimate and a sequential probability
ratio test on it. No I/O; numpy/scipy only. The method is described in ``decision.py``.

Conventions: the quantity tested is θ, the mean per-task paired log cost ratio
``log(reference cost) - log(rule cost)`` (θ > 0: the rule saves; relative saving = 1 - e^-θ).
An estimate θ̂ comes with a variance ``v`` (its squared standard error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

HUBER_C = 1.345  # 95% efficiency at the normal, bounded influence of a derailed run
MAD_TO_SD = 1.482602218505602  # MAD of a normal sample × this = its standard deviation


@dataclass(frozen=True)
class RobustEstimate:
    estimate: float  # θ̂
    variance: float  # sandwich variance of θ̂ (small-sample corrected)
    scale: float  # robust scale of one observation (MAD-based)
    n: int  # observations used
    clipped: int  # observations whose influence the Huber ψ bounded


def huber_location(values: np.ndarray | list[float], weights: np.ndarray | list[float] | None = None,
                   c: float = HUBER_C, max_iter: int = 100) -> RobustEstimate:
    """Weighted Huber M-estimate of location with a fixed MAD scale (Huber 1964, "Robust
    estimation of a location parameter") and its sandwich variance
    ``s² Σ a_i² ψ(r_i)² / (Σ a_i ψ'(r_i))²`` with normalised weights ``a``, times ``n/(n-1)``.

    The weights let every task carry its own weight however many pairs it has (adaptive
    allocation gives cheap tasks more pairs); the variance treats the observations as
    independent, which is what paired, separately seeded runs are.
    """
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        raise ValueError("huber_location needs at least one value")
    a = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    a = a / a.sum()
    center = float(np.median(x))
    scale = MAD_TO_SD * float(np.median(np.abs(x - center)))
    if not scale > 0.0:
        spread = float(np.std(x))
        scale = spread if spread > 0.0 else 1e-9
    theta = float(np.sum(a * x)) if n < 3 else center
    for _ in range(max_iter):
        r = (x - theta) / scale
        inside = np.abs(r) <= c
        denominator = float(np.sum(a * inside))
        if denominator <= 0.0:
            break
        step = scale * float(np.sum(a * np.clip(r, -c, c))) / denominator
        theta += step
        if abs(step) < 1e-12 * max(scale, 1e-12):
            break
    r = (x - theta) / scale
    psi = np.clip(r, -c, c)
    dpsi = (np.abs(r) <= c).astype(float)
    slope = float(np.sum(a * dpsi))
    if n < 2 or slope <= 0.0:
        variance = math.inf
    else:
        variance = scale ** 2 * float(np.sum(a ** 2 * psi ** 2)) / slope ** 2 * n / (n - 1)
        if variance <= 0.0:  # identical observations: no information about the spread
            variance = math.inf if n < 3 else scale ** 2 / n
    return RobustEstimate(theta, variance, scale, n, int(np.sum(~(np.abs(r) <= c))))


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
