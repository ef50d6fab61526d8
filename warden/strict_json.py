"""Strict JSON for files other programs read back (pure): no NaN, no Infinity, no number outside
a double's range. Python's json accepts all three; Claude Code, a ledger reviewer and
``JSON.parse`` do not."""

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


def _exact_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_EXACT_INT:  # past 2**53 a double (and every other JSON reader) loses it
        raise ValueError(f"integer {text[:20]}… is out of range")
    return value


MAX_EXACT_INT = 2**53


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads_strict(text: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
                 exact_ints: bool = False) -> Any:
    """``json.loads`` that refuses non-finite numbers (and, with ``exact_ints``, integers a double
    cannot hold exactly: a ledger's figures must mean the same to every reader); ValueError for
    any invalid input, including nesting too deep for the decoder."""
    try:
        return json.loads(text, parse_float=_finite, parse_int=_exact_int if exact_ints else None,
                          parse_constant=_no_constant, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def json_safe(value: Any) -> Any:
    """``value`` with every number JSON cannot carry (NaN, ±Infinity: an interval still open, an
    estimate without pairs) replaced by null, so any JSON reader takes the output."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
