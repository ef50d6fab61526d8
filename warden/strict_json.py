"""Strict JSON for files other programs read back (pure): no NaN, no Infinity, no number outside
a double's range. Python's json accepts all three; Claude Code, a ledger reviewer and
``JSON.parse`` do not."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


class _Refused:
    """A number the decoder met but a strict reader refuses: left in the document in its place,
    so that :func:`loads_strict` can name the field that holds it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _finite(text: str) -> float | _Refused:
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"number {text[:20]} is out of range")


# JSON integers have no leading zeros, so one of more digits than 2**53 has is past it. Counting
# them first also spares int() a string past Python's limit (4300 digits), whose error would
# tell the reader of a ledger about sys.set_int_max_str_digits().
MAX_EXACT_INT = 2**53
_MAX_EXACT_DIGITS = len(str(MAX_EXACT_INT))


def _exact_int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > _MAX_EXACT_DIGITS or abs(value := int(text)) > MAX_EXACT_INT:
        # past 2**53 a double (and every other JSON reader) loses it
        return _Refused(f"integer {text[:20]}{'…' if len(text) > 20 else ''} ({digits} digits) is out of range "
                        "(past 2⁵³)")
    return value


def _int(text: str) -> int | _Refused:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        return _Refused(f"integer {text[:20]}… ({len(text.lstrip('-'))} digits) is out of range")


def _no_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number")


def _first_refused(value: Any) -> tuple[str, _Refused] | None:
    """The JSON path ("/rules/0/k") and the first refused number in document order, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, _Refused):
            return where or "/", item
        if isinstance(item, dict):
            stack.extend((f"{where}/{str(k)[:40]}", v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}/{i}", v) for i, v in reversed(list(enumerate(item))))
    return None


def loads_strict(text: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
                 exact_ints: bool = False) -> Any:
    """``json.loads`` that refuses non-finite numbers (and, with ``exact_ints``, integers a double
    cannot hold exactly: a ledger's figures must mean the same to every reader); ValueError for
    any invalid input, including nesting too deep for the decoder. A refused number's error
    names the field that holds it ("/rules/0/evidence/0/k: integer … is out of range")."""
    refused = False

    def refusing(parse: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse_or_mark(text: str) -> Any:
            nonlocal refused
            value = parse(text)
            refused = refused or isinstance(value, _Refused)
            return value
        return parse_or_mark

    try:
        doc = json.loads(text, parse_float=refusing(_finite), parse_int=refusing(_exact_int if exact_ints else _int),
                         parse_constant=refusing(_no_constant), object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    found = _first_refused(doc) if refused else None
    if found is not None:
        raise ValueError(f"{found[0]}: {found[1].reason}")
    if refused:  # a hook kept the marker out of sight: refused all the same
        raise ValueError("a number out of range")
    return doc


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
