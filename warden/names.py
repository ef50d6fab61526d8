"""Names that end up in paths or the ledger's keys (agents, session and agent ids): validated
once, here."""

from __future__ import annotations

import os
import re
from typing import Any

from warden.errors import UsageError
from warden.sanitize import REDACT_MARGIN, redacted_prefix, strip_controls

_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate_agent_name(name: str) -> str:
    """Return ``name`` if it is safe as a single path component, else raise UsageError."""
    if not isinstance(name, str) or not _AGENT_NAME.fullmatch(name) or ".." in name:
        raise UsageError(f"invalid agent name {name!r}: use letters, digits, '-', '_' or '.'")
    return name


MAX_ID_LENGTH = 128  # session and agent ids are UUIDs or short hex; a run key has room for two
# ':' separates a run key's parts; slashes would make path parts. One match in C, not a generator
# step per character (~8k ids a GB); \s is str.isspace's set (both are Py_UNICODE_ISSPACE).
_ID_WORD = re.compile(r"[^\s:/\\]+")


def valid_id(value: Any) -> str | None:
    """A session or agent id from an untrusted transcript, path or hook payload: a printable word
    of at most :data:`MAX_ID_LENGTH` characters, no whitespace, ':', slash or '..', else None."""
    if (isinstance(value, str) and len(value) <= MAX_ID_LENGTH and value.isprintable()
            and ".." not in value and _ID_WORD.fullmatch(value)):
        return value
    return None


def plain_int(text: str, max_digits: int = 18) -> int | None:
    """``text`` as a non-negative int when it is 1 to ``max_digits`` ASCII digits, else None.
    (``str.isdigit`` also accepts '²' and other digits that ``int`` refuses.)"""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def clean_label(value: Any, limit: int = 200) -> str | None:
    """An untrusted one-line label as it is stored (an agent type, a model name, a project path):
    control and invisible characters removed, trimmed, at most ``limit`` characters; None when
    nothing is left. Validated where it is written, so no reader has to."""
    if not isinstance(value, str):
        return None
    text = (value if value.isprintable() else strip_controls(value, keep_newlines=False)).strip()[:limit]
    return text or None


def storable_text(text: str) -> str:
    """Untrusted text as every engine stores it: PostgreSQL's text type refuses the NUL character
    (SQLite keeps it), so it is dropped where transcript text is read, and both hold the same."""
    return text.replace("\x00", "") if "\x00" in text else text


def pid_namespace() -> str:
    """This process's PID namespace (the inode of ``/proc/self/ns/pid``), or "x" where there is
    none: a pid names a process only within its namespace, and containers sharing ``/tmp`` or a
    database each have their own."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "x"


def process_tag() -> str:
    """``pid<pid>-ns<namespace>``: put in a directory's name, it tells a later process whether
    the one that made it is gone (see :func:`tagged_process`)."""
    return f"pid{os.getpid()}-ns{pid_namespace()}"


def tagged_process(name: str) -> tuple[int | None, str | None]:
    """The (pid, namespace) of a name holding a :func:`process_tag`, else (None, None)."""
    parts = name.split("-")
    pid = next((plain_int(p[3:]) for p in parts if p.startswith("pid")), None)
    namespace = next((p[2:] for p in parts if p.startswith("ns")), None)
    return pid, namespace


def pid_alive(pid: int) -> bool:
    """A process with this pid exists in our PID namespace (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tagged_process_gone(name: str) -> bool:
    """The process whose :func:`process_tag` ``name`` holds is gone: of our namespace, not
    running. A name without a tag, or from another namespace, is never taken for gone."""
    pid, namespace = tagged_process(name)
    return pid is not None and namespace == pid_namespace() and not pid_alive(pid)


MAX_PROJECT_CHARS = 4096  # a path no longer than PATH_MAX


def stored_project(path: Any) -> str | None:
    """A session's project directory (a transcript's ``cwd``) as warden stores it — in
    ``session_runs.project`` and a checkpoint's project — and as a directory given to match it
    (a hook's ``cwd``, ``--cwd``, ``--project``) is compared with it: control and invisible
    characters removed, a key, token or password in it redacted as in a file path
    (:func:`warden.sanitize.redact_secrets`, before the cut). A path holding no secret is
    unchanged, and equal paths give equal values; None for nothing (blank, not a string)."""
    text = clean_label(path, MAX_PROJECT_CHARS + REDACT_MARGIN)
    if text is None:
        return None
    return redacted_prefix(text, MAX_PROJECT_CHARS).strip() or None
