"""The ``warden`` console script: fast paths for Claude Code hooks and `warden collect`, then
the full CLI.

``warden hook <event>`` runs inside a 2-second budget on every Claude Code stop, so it must not
pay for importing every command group (typer, rich, numpy, the SDK…). A plain `warden collect`
starts its parser processes first and runs without typer and rich
(:mod:`warden.cli.collect_command`). Everything else goes to :func:`warden.cli.app.main`.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Callable, NamedTuple, TypeVar

T = TypeVar("T")


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
    collect = _collect_arguments(args)
    if collect is None:  # another command, or a collect the CLI must read (--help, a bad value)
        return load_cli()(argv)
    # `warden collect`: its parser processes start now, on the core the imports leave idle, and
    # it runs without the CLI framework
    start_early(collect.paths, collect.jobs)
    from warden.ingest.transcripts import discard_early_parsers

    try:
        return load_collect()(collect, argv)
    finally:
        discard_early_parsers()  # those the collect did not take over (it failed, or collected otherwise)


def start_early(paths: list[str], jobs: int | None, *, post_ingest: bool = True) -> None:
    """Start the parser processes of `warden collect PATHS [--jobs JOBS]` before the command
    loads (transcripts.start_parsers_early): the transcripts are found by a child process while
    this one imports the parser (the collector benchmark's start-up too, which must be the
    command's)."""
    from warden.ingest.discovery import ChildDiscovery, early_collect_paths

    given = early_collect_paths(paths)
    discovery = ChildDiscovery(given) if given is not None else None
    from warden.ingest.transcripts import start_parsers_early

    start_parsers_early(paths, jobs, post_ingest=post_ingest, discovery=discovery)


class CollectArguments(NamedTuple):
    paths: list[str]
    as_json: bool
    jobs: int | None


def _collect_arguments(args: list[str]) -> CollectArguments | None:
    """The arguments of a plain ``warden collect [PATH…] [--json] [--jobs N]``; None for anything
    else (another command, --help, an option this does not know, a bad or empty value): the CLI
    then parses it alone, and reports what is wrong."""
    if not args or args[0] != "collect":
        return None
    from warden.ingest.discovery import MAX_JOBS

    paths: list[str] = []
    jobs: int | None = None
    as_json = False
    rest = iter(args[1:])
    for arg in rest:
        if arg.startswith("--jobs"):
            value = arg[len("--jobs="):] if arg.startswith("--jobs=") else next(rest, "") if arg == "--jobs" else ""
            if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_JOBS:
                return None
            jobs = int(value)
        elif arg == "--json":
            as_json = True
        elif arg.startswith("-") or not arg.strip():
            return None
        else:
            paths.append(arg)
    return CollectArguments(paths, as_json, jobs)


def _frozen_imports(load: Callable[[], T]) -> T:
    """``load()``, the imports of a warden process of its own, with the cyclic collector off, and
    what they built frozen. They build ~100k objects that live as long as the process (modules,
    classes, SQLAlchemy's and typer's tables): collections during them find no garbage, and once
    frozen no later collection, nor the one at exit, walks them (~0.1 s of CPU per command). Only
    where the process is warden's own: an in-process caller of app.main keeps its heap."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        loaded = load()
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    return loaded


def load_cli() -> Callable[[list[str] | None], int]:
    """The full CLI's ``main``, imported as the console script imports it."""
    def load() -> Callable[[list[str] | None], int]:
        from warden.cli.app import main as app_main

        return app_main
    return _frozen_imports(load)


def load_collect() -> Callable[[CollectArguments, list[str] | None], int]:
    """`warden collect` as the console script runs it for ``CollectArguments``, imported as it
    imports it (the collector benchmark's start-up too, which must be the command's)."""
    def load() -> Callable[[CollectArguments, list[str] | None], int]:
        from warden.cli.collect_command import run_collect
        from warden.cli.exits import run_command

        def command(collect: CollectArguments, argv: list[str] | None) -> int:
            paths = [Path(p) for p in collect.paths] or None
            return run_command(lambda: run_collect(paths, collect.as_json, collect.jobs), argv)
        return command
    return _frozen_imports(load)


if __name__ == "__main__":
    sys.exit(main())
