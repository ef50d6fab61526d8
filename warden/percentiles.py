"""The one percentile warden reports and decides on. Pure."""

from __future__ import annotations

import math


def nearest_rank(values: list[float], percentile: float) -> float:
    """The nearest-rank percentile: the smallest value with at least ``percentile``% at or below
    it. Always one of the values: "above p75" then means above a run that happened, and
    ``warden status`` shows the threshold the distill trigger uses."""
    if not values:
        raise ValueError("nearest_rank of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(percentile / 100.0 * len(ordered)))
    return ordered[rank - 1]
