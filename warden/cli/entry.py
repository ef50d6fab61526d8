"""The ``warden`` console script: a fast path for Claude Code hooks, then the full CLI.

``warden hook <event>`` runs inside a 2-second budget on every Claude Code stop, so it must not
pay for importing every command group (typer, rich, numpy, the SDK…); everything else goes to
:func:`warden.cli.app.main`.
"""

from __future__ import annotations

import gc
import sys
from typing import Callable


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    # A hook must exit 0 within its budget whatever it is given: extra arguments are ignored,
    # and the full CLI (slower to import) is never loaded for it. An event warden does not know
    # (a typo in settings.json, a newer warden's hook after a downgrade) exits 0 too: Claude Code
    # takes exit 2 for a blocking error (a PreToolUse hook's would block the tool call).
    # A stray option in place of the event (`warden hook --bogus`) is an unknown event as well.
    if (len(args) >= 2 and args[0] == "hook" and args[1] not in ("--help", "-h")
            and "--help" not in args[2:]):  # a person asking for help gets it (hooks ignore the rest)
        from warden.ingest.hooks import run_hook

        return run_hook(args[1])
    if not args or args[0] != "collect":
        return load_cli()(argv)
    # `warden collect`: its parser processes start now, on the core the CLI's imports leave idle
    from warden.ingest.transcripts import discard_early_parsers, start_parsers_early

    collect = _collect_arguments(args)
    if collect is None:
        return load_cli()(argv)
    start_parsers_early(*collect)
    try:
        return load_cli()(argv)
    finally:
        discard_early_parsers()  # those the collect did not take over (it failed, or collected otherwise)


def _collect_arguments(args: list[str]) -> tuple[list[str], int | None] | None:
    """(paths, --jobs) of a plain ``warden collect [PATH…] [--json] [--jobs N]``; None for
    anything else (another command, --help, an option this does not know, a bad value): the CLI
    then parses it alone, and reports what is wrong."""
    from warden.ingest.transcripts import MAX_JOBS

    if not args or args[0] != "collect":
        return None
    paths: list[str] = []
    jobs: int | None = None
    rest = iter(args[1:])
    for arg in rest:
        if arg.startswith("--jobs"):
            value = arg[len("--jobs="):] if arg.startswith("--jobs=") else next(rest, "") if arg == "--jobs" else ""
            if not value.isdigit() or not 1 <= int(value) <= MAX_JOBS:
                return None
            jobs = int(value)
        elif arg == "--json":
            continue
        elif arg.startswith("-"):
            return None
        else:
            paths.append(arg)
    return paths, jobs


def load_cli() -> Callable[[list[str] | None], int]:
    """The full CLI's ``main``, imported as a warden process of its own imports it (the console
    script, and the collector benchmark's start-up, which must be the command's).

    The CLI's imports build ~100k objects that live as long as the process (modules, classes,
    SQLAlchemy's and typer's tables): collections during them find no garbage, and once frozen
    no later collection, nor the one at exit, walks them (~0.1 s of CPU per command). Only where
    the process is warden's own: an in-process caller of app.main keeps its heap."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from warden.cli.app import main as app_main
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    return app_main


if __name__ == "__main__":
    sys.exit(main())
