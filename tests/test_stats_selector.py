"""Pure statistics of the selector: Huber location, conservative variance, SPRT bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warden.select import stats


def test_huber_matches_the_mean_on_clean_normal_data_and_its_variance_is_right() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0.3, 0.2, size=4000)
    est = stats.huber_location(x)
    assert abs(est.estimate - x.mean()) < 0.01
    assert est.variance == pytest.approx(0.2 ** 2 / 4000, rel=0.15)  # ~95% efficiency at the normal
    assert est.n == 4000


def test_huber_resists_derailed_runs_where_the_mean_does_not() -> None:
    rng = np.random.default_rng(2)
    clean = rng.normal(0.0, 0.1, size=200)
    derailed = clean.copy()
    derailed[:30] += 0.6  # 15% of pairs hit by a ×1.8 derailment on one side
    mean_shift = derailed.mean() - clean.mean()
    huber_shift = stats.huber_location(derailed).estimate - stats.huber_location(clean).estimate
    assert mean_shift > 0.08
    assert huber_shift < 0.6 * mean_shift


def test_weights_let_a_task_count_once_whatever_its_number_of_pairs() -> None:
    # Task A: one pair at 0.0; task B: nine pairs at 1.0. Equal task weights → centre midway.
    values = [0.0] + [1.0] * 9
    weights = [1.0] + [1.0 / 9] * 9
    assert stats.huber_location(values, weights, c=100.0).estimate == pytest.approx(0.5)
    assert stats.huber_location(values, c=100.0).estimate == pytest.approx(0.9)


def test_huber_needs_data_and_reports_infinite_variance_for_one_value() -> None:
    with pytest.raises(ValueError):
        stats.huber_location([])
    assert stats.huber_location([0.5]).variance == math.inf


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
