"""Pure statistics of the selector: the pool-aware robust estimate, conservative variance, SPRT bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warden.select import stats


def test_weights_let_a_task_count_once_whatever_its_number_of_runs() -> None:
    # Task A: two pairs saving 0; task B: nine pairs saving 1.0. Equal task weights → midway.
    a = stats.TaskRuns(1.0, ((10.0, 10.0), (10.2, 10.2)))
    b = stats.TaskRuns(1.0, tuple((11.0 + 0.1 * i, 10.0 + 0.1 * i) for i in range(9)))
    assert stats.pooled_effect([a, b]).estimate == pytest.approx(0.5)
    heavier = stats.TaskRuns(3.0, a.pairs)
    assert stats.pooled_effect([heavier, b]).estimate == pytest.approx(0.25)


def test_variance_inflation_guards_small_samples_and_fades() -> None:
    small, large = stats.variance_inflation(7, 0.4), stats.variance_inflation(400, 0.4)
    assert small > 1.1
    assert 1.0 < large < 1.03
    assert stats.variance_inflation(0, 0.4) == math.inf


@settings(max_examples=100, deadline=None)
@given(st.floats(-1, 1), st.floats(1e-4, 1.0), st.floats(-0.2, 0.2), st.floats(0.01, 0.5))
def test_keep_iff_lower_bound_clears_low_and_refute_iff_upper_below_high(
        est: float, var: float, low: float, offset: float) -> None:
    alpha, beta = 0.05, 0.10
    high = low + offset
    llr = stats.sprt_llr(est, var, low, high)
    lb = stats.lower_bound(est, var, offset, alpha)
    ub = stats.upper_bound(est, var, offset, beta)
    if abs(llr - math.log(1 / alpha)) > 1e-6:
        assert (llr >= math.log(1 / alpha)) == (lb >= low)
    if abs(llr - math.log(beta)) > 1e-6:
        assert (llr <= math.log(beta)) == (ub <= high)


def test_ville_thresholds_hold_under_many_looks() -> None:
    """Known variance, 40 looks: false keep ≤ α and false refute ≤ β (Monte Carlo)."""
    rng = np.random.default_rng(3)
    sims, looks, sigma, delta = 20000, 40, 1.0, 0.25
    for truth, threshold, side in ((0.0, math.log(1 / 0.05), 1), (delta, math.log(0.10), -1)):
        x = rng.normal(truth, sigma, size=(sims, looks))
        n = np.arange(1, looks + 1)
        est = np.cumsum(x, axis=1) / n
        var = sigma ** 2 / n
        llr = delta / var * (est - delta / 2)
        crossed = (llr >= threshold).any(axis=1) if side == 1 else (llr <= threshold).any(axis=1)
        assert crossed.mean() <= (0.05 if side == 1 else 0.10)


def test_wald_oc_and_asn_at_the_hypotheses() -> None:
    assert stats.wald_oc(0.0, 0.0, 0.1, 0.05, 0.10) == pytest.approx(0.05, abs=0.01)
    assert stats.wald_oc(0.1, 0.0, 0.1, 0.05, 0.10) == pytest.approx(0.90, abs=0.02)
    mid = stats.wald_asn_information(0.05, 0.0, 0.1, 0.05, 0.10)
    assert mid > stats.wald_asn_information(0.0, 0.0, 0.1, 0.05, 0.10)
    assert mid > stats.wald_asn_information(0.1, 0.0, 0.1, 0.05, 0.10) > 0


def test_relative_saving_round_trips() -> None:
    for saving in (-0.5, 0.0, 0.05, 0.2):
        assert stats.relative_saving(stats.log_ratio_of_saving(saving)) == pytest.approx(saving)
    with pytest.raises(ValueError):
        stats.log_ratio_of_saving(1.0)


# ------------------------------------------------------------------ paired runs with a reference pool

SIGMA = math.sqrt(math.log1p(0.25 ** 2))  # one run's log-cost spread at CV 25%


def test_pair_variance_has_the_paired_and_the_unpaired_limits() -> None:
    s2 = 0.09
    assert stats.pair_variance(10, 0, 0, s2, 0.0) == pytest.approx(2 * s2 / 10)
    assert stats.pair_variance(10, 0, 0, s2, 0.8) == pytest.approx(2 * s2 * 0.2 / 10)
    # independent runs: an unpaired reference run is worth as much as a paired one
    assert stats.pair_variance(10, 30, 0, s2, 0.0) == pytest.approx(s2 / 40 + s2 / 10)
    assert stats.pair_variance(0, 30, 10, s2, 0.5) == pytest.approx(s2 / 30 + s2 / 10)
    # the pool helps less the more the pairs share their noise, and never hurts
    gains = [stats.pair_variance(10, 0, 0, s2, r) - stats.pair_variance(10, 30, 0, s2, r) for r in (0.0, 0.5, 0.9)]
    assert gains[0] > gains[1] > gains[2] >= 0.0


def _suite(rng: np.random.Generator, effect: float, pairs: int, pool: int, *, rho: float = 0.0,
           derail: float = 1.0, tasks: int = 10) -> list[stats.TaskRuns]:
    out = []
    for _ in range(tasks):
        mu = rng.uniform(10.0, 12.5)  # task means spread tenfold
        shared = rng.normal(0.0, SIGMA, pairs + pool)
        x = mu + shared + math.log(derail) * (rng.random(pairs + pool) < 0.12)
        own = rng.normal(0.0, SIGMA, pairs)
        y = (mu - effect + rho * shared[:pairs] + math.sqrt(1 - rho ** 2) * own
             + math.log(derail) * (rng.random(pairs) < 0.12))
        out.append(stats.TaskRuns(1.0, tuple(zip(x[:pairs].tolist(), y.tolist())), tuple(x[pairs:].tolist())))
    return out


@pytest.mark.parametrize("pairs,pool,rho,derail", [(3, 0, 0.0, 1.8), (8, 0, 0.0, 3.0), (6, 20, 0.0, 1.8),
                                                    (8, 0, 0.9, 1.0), (8, 20, 0.9, 1.8)])
def test_pooled_effect_is_unbiased_and_its_variance_is_not_too_small(pairs, pool, rho, derail) -> None:
    rng = np.random.default_rng(pairs * 100 + pool)
    draws = [stats.pooled_effect(_suite(rng, 0.1, pairs, pool, rho=rho, derail=derail)) for _ in range(500)]
    estimates = np.array([d.estimate for d in draws])
    claimed = np.array([d.variance * stats.variance_inflation(d.df, 0.5) for d in draws])
    assert abs(estimates.mean() - 0.1) < 3 * math.sqrt(estimates.var() / len(draws)) + 0.002
    # the claimed variance covers the real one (what keeps the false-keep rate under α) ...
    assert claimed.mean() >= 0.9 * estimates.var()
    # ... and does not waste much of it
    assert claimed.mean() <= 1.8 * estimates.var()


def test_a_reference_pool_buys_precision_and_pairs_that_share_a_seed_use_it() -> None:
    rng = np.random.default_rng(5)
    alone = np.var([stats.pooled_effect(_suite(rng, 0.0, 6, 0)).estimate for _ in range(400)])
    pooled = np.var([stats.pooled_effect(_suite(rng, 0.0, 6, 30)).estimate for _ in range(400)])
    assert pooled < 0.7 * alone  # independent runs: the pool's runs count (ideal 7/12 of alone)
    shared = [stats.pooled_effect(_suite(rng, 0.0, 8, 0, rho=0.9)) for _ in range(200)]
    assert np.mean([d.correlation for d in shared]) > 0.7
    assert np.mean([d.variance for d in shared]) < 0.4 * np.mean(
        [d.variance for d in (stats.pooled_effect(_suite(rng, 0.0, 8, 0)) for _ in range(200))])


def test_pooled_effect_bounds_a_derailed_run_and_handles_degenerate_input() -> None:
    n = stats.ROBUST_FULL + 2
    clean = [stats.TaskRuns(1.0, tuple((10.0 + 0.01 * i, 10.0 + 0.01 * i) for i in range(n)))
             for _ in range(4)]
    base = stats.pooled_effect(clean).estimate
    hit = list(clean)
    hit[0] = stats.TaskRuns(1.0, ((11.1, 10.0),) + clean[0].pairs[1:])  # one reference run ×3
    assert stats.pooled_effect(hit, c=math.inf).estimate - base == pytest.approx(1.1 / n / 4, rel=0.01)
    assert stats.pooled_effect(hit).estimate - base < 0.2 * (1.1 / n / 4)
    assert math.isnan(stats.pooled_effect([]).estimate)
    one = stats.pooled_effect([stats.TaskRuns(1.0, ((10.0, 9.9),))])
    assert one.estimate == pytest.approx(0.1) and one.variance == math.inf and one.df == 0
    flat = stats.pooled_effect([stats.TaskRuns(1.0, ((10.0, 10.0),) * 3)] * 3)
    assert flat.estimate == 0.0 and 0.0 < flat.variance < 1e-12  # known exactly, not unknown


def test_student_inflation_widens_few_degrees_of_freedom_and_fades() -> None:
    assert stats.student_inflation(5, 0.05) > 1.3
    assert 1.0 < stats.student_inflation(200, 0.05) < 1.02
    assert stats.student_inflation(10_000, 0.05) == 1.0
    assert stats.student_inflation(0, 0.05) == math.inf
