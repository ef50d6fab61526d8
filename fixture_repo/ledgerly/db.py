"""SQLite connection handling, schema creation and migrations.

One connection per process is enough for the CLI; the HTTP server opens one per request
thread. Rows come back as :class:`sqlite3.Row` so that columns can be read by name.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from importlib import resources
from typing import Iterator

SCHEMA_VERSION = 3

# Statements that bring an older database to the next version: MIGRATIONS[n] upgrades n -> n+1.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "ALTER TABLE customers ADD COLUMN country TEXT NOT NULL DEFAULT 'US'",
    ],
    2: [
        "ALTER TABLE invoices ADD COLUMN discount_code TEXT",
        "CREATE TABLE IF NOT EXISTS discount_codes (code TEXT PRIMARY KEY, kind TEXT NOT NULL,"
        " value TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1)",
    ],
}


class DatabaseError(RuntimeError):
    """The database cannot be opened or is at an unknown schema version."""


def connect(path: str) -> sqlite3.Connection:
    """Open (and create if needed) the database at ``path``; ``":memory:"`` for tests."""
    try:
        conn = sqlite3.connect(path, detect_types=0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot open database {path}: {exc}") from None
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
    return conn


def schema_sql() -> str:
    return resources.files("ledgerly").joinpath("schema.sql").read_text(encoding="utf-8")


def current_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(row["version"]) if row else 0


def init_db(conn: sqlite3.Connection) -> int:
    """Create the schema on an empty database, or migrate an older one. Returns the version."""
    version = current_version(conn)
    if version == 0:
        conn.executescript(schema_sql())
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        return SCHEMA_VERSION
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"database is at schema version {version}, newer than this ledgerly ({SCHEMA_VERSION})"
        )
    while version < SCHEMA_VERSION:
        with transaction(conn):
            for statement in MIGRATIONS.get(version, []):
                conn.execute(statement)
            version += 1
            conn.execute("UPDATE schema_version SET version = ?", (version,))
    return version


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN ... COMMIT, or ROLLBACK when the block raises. Nested use joins the outer one."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Row counts per table, for ``ledgerly status``."""
    names = [
        row["name"]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {name: conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0] for name in names}
