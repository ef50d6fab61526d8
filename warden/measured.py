"""Which bench backend measured a figure, in words (pure).

A saving measured on the sim backend is the simulated agent's, not a model's: every figure
derived from bench measurements (MEMORY.md's claim, ``cost``, ``receipts``, ``rules``,
``status``, the HTML report) names its backend(s) with this one wording.
"""

from __future__ import annotations

from collections.abc import Iterable

from warden.sanitize import strip_controls

SIM = "sim"
SIM_WORDS = "warden's simulated agent, not a real model"


def backends_of(backends: Iterable[str | None]) -> list[str]:
    """The distinct named backends, sorted (a stable order: compiled MEMORY.md is deterministic)."""
    return sorted({strip_controls(b, keep_newlines=False) for b in backends if b})


def setup_of(backend: str | None, model: str | None) -> str | None:
    """The measuring setup of one decision or figure as "backend/model" (``sim/sim-naive-1``): the
    one wording of `cost`, `receipt(s)` and the report. None when nothing measured it. Plain text:
    the caller escapes it for its medium."""
    if not backend:
        return None
    return f"{backend}/{model}" if model else backend


def measured_on(backends: Iterable[str | None]) -> str | None:
    """"on <what measured it>", or None when nothing was measured. Names are plain text: the
    caller escapes them for its medium."""
    names = backends_of(backends)
    if not names:
        return None
    if names == [SIM]:
        return "on warden's simulated agent (sim backend), not a real model"
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    plural = "s" if len(names) > 1 else ""
    return f"on the {listed} backend{plural}" + (f" ({SIM}: {SIM_WORDS})" if SIM in names else "")
