"""Named locks across warden processes, for work two processes must not do at once (deciding the
same agent's rules: two selectors would measure the same candidate and both write its verdict).

- PostgreSQL: a session-level advisory lock held by a connection of its own for the block, so it
  holds across every machine that shares the team database.
- SQLite: ``flock`` on a file beside the database (a SQLite database is shared on one machine).
  An in-memory database, or a platform without ``flock``, needs no lock.

A lock held elsewhere is never waited for: :class:`LockBusy` says who to wait for instead. The
operating system releases a dead process's lock, so a killed run never leaves one behind.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from warden.errors import WardenError
from warden.store.db import Store


class LockBusy(WardenError):
    """Another warden process holds the lock (exit status 1)."""


def _advisory_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"warden:{name}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def exclusive(store: Store, name: str, busy_message: str) -> Iterator[None]:
    """Hold the lock ``name`` for the block, or raise :class:`LockBusy` with ``busy_message``."""
    url = store.engine.url
    if url.get_backend_name() == "postgresql":
        with store.engine.connect() as conn:
            key = _advisory_key(name)
            acquired = conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar()
            conn.commit()  # the lock is the session's: no transaction stays open while it is held
            if not acquired:
                raise LockBusy(busy_message)
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                conn.commit()
        return
    database = url.database
    try:
        import fcntl
    except ImportError:  # no flock here
        fcntl = None  # type: ignore[assignment]
    if not database or database == ":memory:" or fcntl is None:
        yield
        return
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    path = Path(database).with_name(f"{Path(database).name}.{safe_name}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockBusy(busy_message) from None
        yield
    finally:
        os.close(fd)  # releases the lock
