"""What every command shares: settings, the migrated store, JSON output, safe terminal text."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from warden.cli.output import display_figures, print_json, writes_utf8  # noqa: F401  (the commands' output)
from warden.config import Settings, load_settings
from warden.sanitize import counted, strip_controls
from warden.store.db import Store, open_store

# soft_wrap: a message line is never broken at the console width (piped output is 80 columns);
# the terminal, a log viewer or a pager wraps it. Tables use wide_console().
console = Console(highlight=False, soft_wrap=True)

# Bounds of numeric arguments: what the database's 64-bit integers and the machine can hold.
MAX_ID = 2**63 - 1  # rule, checkpoint and run ids
MAX_SEED = 2**31 - 1
MAX_CONCURRENCY = 64
MAX_ROWS = 1_000_000  # --limit of a listing
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def progress_bar(label: str, enabled: bool) -> Any:
    """A transient rich progress bar on stderr (stdout stays the command's output), shown only
    when ``enabled`` and stderr is a terminal. rich.progress is imported here, not by every command."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True, disable=not (enabled and err_console.is_terminal))

# A token budget as people write big numbers: 2000000, 2_000_000 or 2e6 (1.5e6 too). Not
# "2,000,000": a comma is the decimal mark in many locales, so 2,5 would be a guess.
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_TOKENS_TEXT = re.compile(rf"(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?[0-9]+)?")
_TOKENS_EXAMPLE = "write e.g. 2000000, 2_000_000 or 2e6"


def parse_token_budget(text: str) -> int:
    """A ``--budget`` in tokens: a whole, positive number up to MAX_BUDGET_TOKENS, exactly (2e6 is
    2000000; 2.5 or 1e-3 is refused, never cut). A bad one is a one-line usage error (exit 2)."""
    from decimal import Decimal

    import typer

    from warden.config import MAX_BUDGET_TOKENS

    raw = str(text).strip()
    shown = repr(raw[:40] + ("…" if len(raw) > 40 else ""))
    if "," in raw:
        raise typer.BadParameter(f"{shown}: {_TOKENS_EXAMPLE} (a comma is a decimal mark in some locales)")
    unsigned = raw[1:] if raw[:1] in "+-" else raw
    if not _TOKENS_TEXT.fullmatch(unsigned):  # no inf, nan, 0x10
        raise typer.BadParameter(f"{shown} is not a number of tokens ({_TOKENS_EXAMPLE})")
    value = Decimal(raw.replace("_", ""))
    if value <= 0:
        raise typer.BadParameter(f"{shown} is not a positive number of tokens")
    if value != value.to_integral_value():
        raise typer.BadParameter(f"{shown} is not a whole number of tokens")
    if value > MAX_BUDGET_TOKENS:
        raise typer.BadParameter(f"{shown} is more than the largest budget, {MAX_BUDGET_TOKENS:.0e} tokens".replace("+", ""))
    return int(value)


def token_budget_option(help_text: str) -> Any:
    """The ``--budget`` option of every command that spends tokens (select, nightly, plan, bench)."""
    import typer

    return typer.Option(None, "--budget", parser=parse_token_budget, metavar="TOKENS",
                        help=f"{help_text} A whole number: 2000000, 2_000_000 or 2e6.")


def bounded_float_option(default: float, flag: str, low: float, high: float, help_text: str) -> Any:
    """A float option within [low, high]; ``nan`` and ``inf`` are named as not numbers (a range
    check alone answers "nan" with a misleading "should be less than or equal to …")."""
    import typer

    span = "{:,.0f} to {:,.0f}" if low == int(low) and high == int(high) else "{:g} to {:g}"
    span = span.format(low, high)

    def parse(text: str) -> float:
        raw = str(text).strip()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise typer.BadParameter(f"{raw[:40]!r} is not a number")
        if not low <= value <= high:
            raise typer.BadParameter(f"{raw[:40]!r} is outside {span}")
        return value

    return typer.Option(default, flag, parser=parse, metavar="NUMBER", help=f"{help_text} ({span})")


def agent_names(given: Sequence[str] | None, option: str = "--agent") -> list[str] | None:
    """The agents a repeatable option names, each value also split at commas (``--agent a,b``);
    None when the option was not given."""
    from warden.errors import UsageError

    if given is None:
        return None
    names = list(dict.fromkeys(a.strip() for item in given for a in item.split(",") if a.strip()))
    if not names:
        raise UsageError(f"{option} names no agent (give e.g. {option} backend,sql, or leave it out for all)")
    return names


def settings() -> Settings:
    return load_settings()


def store(s: Settings | None = None) -> Store:
    """The settings' database, migrated to head (every command migrates first)."""
    return open_store(s or settings())


def print_uncut_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: Collection[str] = (),
                      shrink: Collection[str] = (), on: Console | None = None) -> None:
    """A borderless table whose cells are never cut on a narrow terminal, except in the ``shrink``
    columns (free text, ellipsised down to their header): a token count shown as "1…", or a
    column rich dropped to fit, is worse than a line the terminal wraps."""
    out = on or wide_console()
    widths = [max([cell_len(header)] + [cell_len(row[i]) for row in rows]) for i, header in enumerate(headers)]
    gaps = 2 * (len(headers) - 1)  # one space of padding each side between columns
    fixed = sum(w for h, w in zip(headers, widths) if h not in shrink) + gaps
    least = fixed + sum(cell_len(h) for h in headers if h in shrink)
    room = out.width - fixed
    wanted = sum(w for h, w in zip(headers, widths) if h in shrink)
    table = Table(show_edge=False, pad_edge=False, box=None)
    for header, width in zip(headers, widths):
        if header in shrink:  # the free-text columns share what the others leave, as they hold
            least_width = cell_len(header)
            most = width if wanted <= room else max(least_width, room * width // wanted)
        else:
            least_width, most = width, None
        table.add_column(header, justify="left" if header in left else "right", no_wrap=True,
                         min_width=least_width, max_width=most)
    for row in rows:
        table.add_row(*row)
    if least > out.width:  # not even that fits: print it whole and let the terminal wrap
        out = Console(highlight=False, width=least, file=out.file, force_terminal=out.is_terminal,
                      color_system=out.color_system)
    out.print(table)


def wide_console() -> Console:
    """Tables are wide: piped output is not cut to 80 columns."""
    return console if console.is_terminal else Console(highlight=False, width=200)


def safe(text: object, limit: int | None = None) -> str:
    """Untrusted text made safe for a terminal: no control, bidi or escape sequences, no markup."""
    from rich.markup import escape

    clean = strip_controls(str(text), keep_newlines=False)
    if limit is not None and len(clean) > limit:
        clean = clean[: limit - 1] + "…"
    return escape(clean)


def refuse_output_path(flag: str, given: str | Path, target: Path, what: str) -> None:
    """A usage error (exit 2, one line naming ``flag`` as ``given``) unless ``target`` can be the
    file an output option writes: never through a symlink, not over a directory, nor one named
    as a directory (``reports/``: given as text, as typed, since a Path drops the slash), and into
    a directory that exists (a mistyped path is not a reason to make directories)."""
    from warden.errors import UsageError

    if isinstance(given, str) and given.endswith(("/", os.sep)):
        raise UsageError(f"{flag} {safe(given)} names a directory: name the {what} to write")
    try:
        if target.is_symlink():
            raise UsageError(f"{flag} {safe(given)} is a symlink: warden never writes through one")
        if target.is_dir():
            raise UsageError(f"{flag} {safe(given)} is a directory: name the {what} to write")
        if not target.parent.is_dir():
            raise UsageError(f"{flag} {safe(given)}: no directory {safe(target.parent)}")
    except OSError as exc:  # a name too long for the file system, a path through a file
        raise UsageError(f"{flag} {safe(given)}: cannot write there ({exc.strerror or exc})") from None


def safe_block(text: object) -> str:
    """Untrusted multi-line text for printing with ``markup=False``: controls stripped, lines kept."""
    return strip_controls(str(text), keep_newlines=True)


def keep_limit(rows: list[Any], limit: int, noun: str) -> list[Any]:
    """The first ``limit`` of ``rows`` (fetched with one more than asked), saying on stderr when
    there were more: else a reader, or a sum over the JSON, takes the page for everything."""
    if len(rows) <= limit:
        return rows
    err_console.print(f"showing the newest {counted(limit, noun)}; there are more "
                      "(--limit to see more)")
    return rows[:limit]


def print_measured(backends: Any) -> None:
    """One line under a table of bench-derived figures: the backend(s) that measured them."""
    from warden.measured import measured_on

    where = measured_on(backends)
    if where:
        console.print(f"  bench figures measured {safe(where)}")


def say_error(message: object) -> None:
    """``warden: <message>`` on stderr as one line; messages quote untrusted text (paths, agent
    names from transcripts), so controls and escape sequences are stripped here, once for all."""
    err_console.print("warden: " + strip_controls(str(message), keep_newlines=False), markup=False,
                      highlight=False, soft_wrap=True)


def compile_outcome(memory: Any) -> str:
    """What a compile (a CompileResult, or its JSON) did to MEMORY.md, in one word: "created"
    (there was none), "written" (its bytes changed) or "unchanged"."""
    get = memory.get if isinstance(memory, dict) else lambda key: getattr(memory, key)
    return "created" if get("created") else "written" if get("changed") else "unchanged"


def warn_if_drifted(result: Any) -> None:
    """A compile that found MEMORY.md edited by hand (or stale) says so, and where the edit is kept; and
    one that had to leave rules out (past the 200-line / 25 KB cap) names them."""
    left_out = getattr(result, "left_out", [])
    if left_out:
        err_console.print(f"warning: {len(left_out)} rule(s) do not fit MEMORY.md's 200-line / 25 KB cap and are "
                          f"not in it: {', '.join(map(str, left_out[:20]))}{' …' if len(left_out) > 20 else ''}",
                          markup=False, highlight=False, soft_wrap=True)
    if getattr(result, "drifted", False):
        from warden.select.compile import NOT_WRITTEN_BY_WARDEN

        path = strip_controls(str(result.path), keep_newlines=False)
        kept = getattr(result, "kept", None)
        where = f"kept at {strip_controls(str(kept), keep_newlines=False)}" if kept else "not kept"
        if result.drift == NOT_WRITTEN_BY_WARDEN:  # no compile before this one to drift from
            message = f"replaced {path}, a MEMORY.md warden did not write: its content is {where}"
        else:
            message = (f"{path} had drifted from the last compile ({result.drift or 'edited by hand, or stale'}): "
                       "recompiled" + (f", the edit {where}" if kept else ""))
        err_console.print("warning: " + message, markup=False, highlight=False, soft_wrap=True)
