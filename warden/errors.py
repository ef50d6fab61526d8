"""The one exception type the CLI turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class WardenError(Exception):
    """A user-facing failure. ``str(exc)`` is one line; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(WardenError):
    """Bad input from the user: unknown agent, bad flag value, unreadable path."""

    exit_code = 2
