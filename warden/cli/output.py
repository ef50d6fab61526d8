"""What every command prints without a terminal library: JSON on stdout, and whether a stream
takes UTF-8. `warden collect` runs without rich or typer (see :mod:`warden.cli.entry`), so what it
prints lives here; :mod:`warden.cli.common` hands the same functions to every other command."""

from __future__ import annotations

import codecs
import json
import math
import sys
from typing import Any

from warden.sanitize import escape_unsafe_in_json


def writes_utf8(stream: Any) -> bool:
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "utf-8"
    except LookupError:
        return False


def _json_value(value: Any) -> Any:
    """A value JSON has no type for: a time as ISO 8601 UTC with 'Z' (like every time warden
    prints), anything else as its text."""
    from datetime import datetime

    if isinstance(value, datetime):
        from warden.store.ledger_models import iso_utc

        return iso_utc(value)
    return str(value)


# Figures in weighted tokens (a key naming "tokens", or one of these): one decimal, as tables show.
_TOKEN_FIGURES = {"estimate", "interval", "margin", "measured_saving", "reference_cost", "run1", "now", "best",
                  "run1_total", "now_total"}


def _display_float(key: str, value: float) -> float:
    if not math.isfinite(value) or value == 0:
        return value
    if "usd" in key.split("_"):  # cost_usd, saving_usd_per_session, bench_usd_spent
        return round(value, 6)  # a micro-dollar
    if "tokens" in key or key in _TOKEN_FIGURES:
        return round(value, 1)
    # ratios, shares, statistics: six significant digits (never fewer than one decimal)
    return round(value, max(1, 5 - math.floor(math.log10(abs(value)))))


def display_figures(data: Any, key: str = "") -> Any:
    """``data`` with its floats rounded as figures to read: weighted tokens to one decimal,
    dollars to a micro-dollar, ratios and statistics to six significant digits (no
    0.30000000000000004, no 12 decimals of a cost). Integers, and the stored rows, are untouched:
    for a ``--json`` a person or a script reads, never for what warden reads back."""
    if isinstance(data, float):
        return _display_float(key, data)
    if isinstance(data, dict):
        return {k: display_figures(v, str(k)) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [display_figures(v, key) for v in data]
    return data


def print_json(data: Any, *, figures: bool = False) -> None:
    """``data`` as JSON on stdout; ``figures``: its floats rounded by :func:`display_figures`."""
    # Under a locale that is not UTF-8 (LC_ALL=en_US.ISO-8859-1), \u escapes keep the JSON whole.
    from warden.strict_json import json_safe

    if figures:
        data = display_figures(json_safe(data))
    text = json.dumps(json_safe(data), indent=2, ensure_ascii=not writes_utf8(sys.stdout), default=_json_value,
                      allow_nan=False)
    sys.stdout.write(escape_unsafe_in_json(text) + "\n")
