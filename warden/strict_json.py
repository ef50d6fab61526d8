"""Strict JSON for files other programs read back (pure): no NaN, no Infinity, no number outside
a double's range. Python's json accepts all three; Claude Code and a ledger reviewer do not."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads_strict(text: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads`` that refuses non-finite numbers; ValueError for any invalid input, including
    nesting too deep for the decoder."""
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise ValueError("nested too deeply") from None
