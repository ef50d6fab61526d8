"""How a command ends: one clear line and a non-zero exit for every user-facing failure, and
SIGTERM ending it as Ctrl-C does. The typer CLI (:func:`warden.cli.app.main`) and `warden collect`
without it (:mod:`warden.cli.entry`) both run through :func:`run_command`; nothing here imports
typer or rich until a failure is reported."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any, Callable

from warden.cli.output import writes_utf8
from warden.errors import WardenError

# Commands whose finished work a re-run picks up (incremental collect, resumable passes and nights).
RESUMABLE = {"collect", "distill", "bench", "select", "nightly"}

_sigterm_received = False


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a service manager, a CI timeout, kill) ends a command as Ctrl-C does: the same
    clean-up runs and the same line is said, with exit 143 (a bench pass installs its own)."""
    global _sigterm_received
    _sigterm_received = True
    raise KeyboardInterrupt


def sigterm_received() -> bool:
    return _sigterm_received


def interrupted(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    resumable = bool(args) and args[0] in RESUMABLE
    what = "terminated (SIGTERM)" if _sigterm_received else "interrupted"
    return what + ("; finished work is kept: re-run the same command to resume" if resumable else "")


def say_error(message: object) -> None:
    from warden.cli.common import say_error as say  # rich: only once there is something to say

    say(message)


def interrupt_exit(argv: list[str] | None) -> int:
    say_error(interrupted(argv))
    return 143 if _sigterm_received else 130


def run_command(body: Callable[[], int], argv: list[str] | None,
                framework_failure: Callable[[Exception, list[str] | None], int | None] | None = None) -> int:
    """``body()``'s exit code, or the failure it raised as one line and its exit code.
    ``framework_failure``: the exit code of an exception the CLI framework raised (None: not one)."""
    global _sigterm_received
    _sigterm_received = False
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if on_main_thread else None
    try:
        return _run(body, argv, framework_failure)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _run(body: Callable[[], int], argv: list[str] | None,
         framework_failure: Callable[[Exception, list[str] | None], int | None] | None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a locale that is not UTF-8: '?' for what it cannot show
        if stream is not None and not writes_utf8(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    # The driver logs what warden handles itself (a pipeline aborted by a write conflict that a
    # concurrent collect recovers from); without a handler Python would print it on stderr.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        return body()
    except WardenError as exc:
        say_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return interrupt_exit(argv)
    except Exception as exc:  # the framework's own (usage errors) and anything unexpected
        code = framework_failure(exc, argv) if framework_failure is not None else None
        if code is not None:
            return code
        database_error = _database_error(exc)
        if database_error:
            say_error(database_error)
            return 1
        if os.environ.get("WARDEN_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        say_error(f"internal error: {type(exc).__name__}: {first} (set WARDEN_DEBUG=1 for a traceback)")
        return 70


def _database_error(exc: Exception) -> str | None:
    """A database that refused mid-command (locked past the busy timeout, disk full, server
    gone): one line naming what the database said; the transaction rolled back whole."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None:
        return None
    if type(exc) is sa_exc.DatabaseError:  # the driver's own DatabaseError: a damaged file, say
        orig = getattr(exc, "orig", None) or exc
        reason = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
        hint = (": the database file is damaged; restore it from a backup, or collect again into a new "
                "WARDEN_HOME" if "malformed" in reason else "")
        return f"database error: {reason}{hint} (its open transaction was rolled back)"
    if not isinstance(exc, (sa_exc.OperationalError, sa_exc.ProgrammingError)):
        return None
    orig = getattr(exc, "orig", None) or exc
    reason = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    missing_table = ("relation" in reason and "does not exist" in reason) or "no such table" in reason
    missing_column = ("column" in reason and "does not exist" in reason) or "no such column" in reason
    if isinstance(exc, sa_exc.ProgrammingError) and not (missing_table or missing_column):
        return None  # a statement warden got wrong: an internal error, not the database's
    hint = (": another warden process is writing; run again when it ends" if "locked" in reason
            else ": warden's tables are missing from this database (dropped, or another database under the "
                 "same URL?)" if missing_table
            else ": the schema differs from warden's (see `warden db check`)" if missing_column else "")
    return f"database error: {reason}{hint} (its open transaction was rolled back)"
