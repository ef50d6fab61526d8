"""The session-start pointer: one line naming a recent checkpoint of the same project.

``warden hook session-start`` runs inside a 2-second budget, so this module imports neither
SQLAlchemy nor Alembic on the SQLite path: one indexed query through the standard library.
Other databases go through :func:`warden.continuity.service.session_start_pointer` (the same
query in SQLAlchemy). The line is warden's own text — an id and an age — never checkpoint content.
"""

from __future__ import annotations

import os
import posixpath
import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

from warden.names import stored_project

# a same-project checkpoint this recent is a "strong" match worth a pointer
POINTER_MAX_AGE_HOURS = 48.0


def pointer_since(now: datetime, window_days: float) -> datetime:
    return now - timedelta(hours=min(POINTER_MAX_AGE_HOURS, window_days * 24))


def pointer_line(checkpoint_id: int, captured_at: datetime, now: datetime) -> str:
    hours = max(0.0, (now - captured_at).total_seconds() / 3600)
    age = f"{hours:.0f} h ago" if hours >= 1 else "under an hour ago"
    return (f"warden: an earlier session in this project left a checkpoint ({age}); "
            f"`warden checkpoints show {int(checkpoint_id)}` prints it, fenced as data.")


def works_in(cwd: str, project: str) -> bool:
    """A session started in ``cwd`` works in ``project``: the same directory (a trailing slash is
    no difference) or one inside it. Not the other way round — a session in ``~`` is not working
    in every project below it — and neither ``/`` nor the home directory is a project that holds
    every session started below it."""
    cwd, project = cwd.rstrip("/") or cwd[:1], project.rstrip("/") or project[:1]  # "/" stays "/"
    if cwd == project:
        return bool(cwd)
    return project not in ("", "/", os.path.expanduser("~").rstrip("/")) and cwd.startswith(project + "/")


def project_candidates(cwd: str) -> list[str]:
    """Every stored ``project`` value a session in ``cwd`` works in (see :func:`works_in`): the
    cwd and each directory above it as :func:`stored_project` stores them (a secret in one
    redacted), with and without a trailing slash — so the database, not a scan of the window,
    picks the project's checkpoints."""
    path = cwd.rstrip("/") or cwd[:1]
    found: dict[str, None] = {}
    while path:
        if works_in(cwd, path):
            stored = stored_project(path)
            if stored:
                stored = stored.rstrip("/") or "/"
                found.update(dict.fromkeys([stored] if stored == "/" else [stored, stored + "/"]))
        parent = posixpath.dirname(path)
        if parent == path:
            break
        path = parent
    return list(found)


# The window's checkpoints of the candidate projects, newest first (captured_at is indexed); the
# match is checked again in Python, where it is defined.
POINTER_SCAN_LIMIT = 50


def _sqlite_query(candidates: int) -> str:
    return ("SELECT id, captured_at, project FROM checkpoints WHERE captured_at >= ? AND session_id != ? "
            f"AND active_task != '' AND project IN ({', '.join('?' * candidates)}) "
            f"ORDER BY captured_at DESC, id DESC LIMIT {POINTER_SCAN_LIMIT}")


def first_of_project(rows: Any, cwd: str) -> tuple[int, datetime] | None:
    """The first (id, captured_at) of ``rows`` (id, captured_at, project) the cwd works in: a
    project stored as the cwd or a directory above it is (:func:`project_candidates`)."""
    projects = set(project_candidates(cwd))
    for checkpoint_id, captured_at, project in rows:
        if project and str(project) in projects:
            when = captured_at if isinstance(captured_at, datetime) else datetime.fromisoformat(str(captured_at))
            return int(checkpoint_id), when
    return None


def _sqlite_pointer(path: str, cwd: str, session_id: str, since: datetime) -> tuple[int, datetime] | None:
    # read-only URI: never creates the file, never takes a write lock; short busy wait
    from urllib.parse import quote

    conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=0.3)
    try:
        candidates = project_candidates(cwd)
        if not candidates:
            return None
        rows = conn.execute(_sqlite_query(len(candidates)),
                            (since.strftime("%Y-%m-%d %H:%M:%S.%f"), session_id, *candidates)).fetchall()
    finally:
        conn.close()
    return first_of_project(rows, cwd)


def session_start_hook_line(cwd: Any, session_id: Any, settings: Any = None) -> str | None:
    """What ``warden hook session-start`` prints, or None. Never raises, never creates or migrates
    a database: a missing or older store simply gives no pointer."""
    if not isinstance(cwd, str) or not cwd.strip():
        return None
    sid = session_id if isinstance(session_id, str) else ""
    try:
        from warden.config import load_settings

        settings = settings or load_settings()
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        path = settings.sqlite_path
        if path is not None:
            if not path.is_file():
                return None
            found = _sqlite_pointer(str(path), cwd, sid, pointer_since(now, settings.recall_window_days))
            return pointer_line(found[0], found[1], now) if found else None
        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session

        from warden.continuity.service import session_start_pointer

        engine = create_engine(settings.database_url, connect_args={"connect_timeout": 1})
        try:
            with Session(engine) as session:
                return session_start_pointer(session, cwd, sid or None, now=now,
                                             window_days=settings.recall_window_days)
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 — a pointer is optional; the hook must never fail
        return None
