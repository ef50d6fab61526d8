"""Names that end up in paths (agents): validated once, here."""

from __future__ import annotations

import re

from warden.errors import UsageError

_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate_agent_name(name: str) -> str:
    """Return ``name`` if it is safe as a single path component, else raise UsageError."""
    if not isinstance(name, str) or not _AGENT_NAME.fullmatch(name) or ".." in name:
        raise UsageError(f"invalid agent name {name!r}: use letters, digits, '-', '_' or '.'")
    return name
