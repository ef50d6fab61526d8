"""The first bulk collect into an empty ledger writes its pages once: that transaction runs in a
rollback journal (its pages are new, so nothing is journaled) instead of WAL, which would write
each page again at the checkpoint; the database is back in WAL as it ends, however it ends."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from collect_support import append, assert_runs_own_their_usage, assistant, ledger_values, usage, write
from warden.config import load_settings
from warden.ingest import collector
from warden.ingest.collector import collect_paths
from warden.store.db import back_to_wal, journal_new_pages_in_place, open_store


def _transcripts(root: Path, n: int = 6) -> Path:
    for k in range(n):
        session = f"00000000-0000-4000-8000-{k:012d}"
        write(root / "proj" / f"{session}.jsonl",
              [assistant(f"msg_{k}_{i}", f"req_{k}_{i}", usage(inp=10 + i, out=5 + k), session=session)
               for i in range(20)])
    return root


def _mode(database: Path) -> str:
    """The journal mode the file is in, as a new plain connection (not warden's) finds it."""
    con = sqlite3.connect(database)
    try:
        return con.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        con.close()


def _watch_switches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(journal mode, synchronous) of the collect's connection each time it goes back to WAL."""
    seen: list[tuple[str, int]] = []

    def watched(session: Session) -> None:
        connection = session.connection()
        seen.append((connection.exec_driver_sql("PRAGMA journal_mode").scalar(),
                     connection.exec_driver_sql("PRAGMA synchronous").scalar()))
        back_to_wal(session)
    monkeypatch.setattr(collector, "back_to_wal", watched)
    return seen


def test_the_first_bulk_collect_runs_in_a_rollback_journal_and_ends_in_wal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _transcripts(tmp_path / "projects")
    seen = _watch_switches(monkeypatch)
    settings = load_settings()
    summary = collect_paths(settings, [root], jobs=2, post_ingest=False)
    assert summary.files_ingested == 6 and summary.usage_messages == 120
    assert seen == [("delete", 2)]  # synchronous FULL: NORMAL is power-safe in WAL mode only
    assert settings.sqlite_path is not None and _mode(settings.sqlite_path) == "wal"
    assert not settings.sqlite_path.with_name(settings.sqlite_path.name + "-journal").exists()
    store = open_store(settings)
    try:
        assert_runs_own_their_usage(store)
        with store.engine.connect() as connection:  # a pooled connection of a later step: WAL's
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1
    finally:
        store.engine.dispose()


def test_the_ledger_is_the_one_a_collect_in_wal_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _transcripts(tmp_path / "projects")
    collect_paths(load_settings(), [root], jobs=2, post_ingest=False)
    filled = ledger_values()
    monkeypatch.setenv("WARDEN_HOME", str(tmp_path / "in-wal"))
    monkeypatch.setattr(collector, "journal_new_pages_in_place", lambda session: False)
    collect_paths(load_settings(), [root], jobs=2, post_ingest=False)
    assert ledger_values() == filled


def test_a_collect_into_a_ledger_that_holds_files_stays_in_wal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _transcripts(tmp_path / "projects")
    settings = load_settings()
    collect_paths(settings, [root], jobs=2, post_ingest=False)
    for k in range(6):  # every file grows: a bulk collect again
        session = f"00000000-0000-4000-8000-{k:012d}"
        append(root / "proj" / f"{session}.jsonl", [assistant(f"msg_{k}_new", f"req_{k}_new", usage(), session=session)])
    seen = _watch_switches(monkeypatch)
    summary = collect_paths(settings, [root], jobs=2, post_ingest=False)
    assert summary.files_ingested == 6 and seen == []
    assert settings.sqlite_path is not None and _mode(settings.sqlite_path) == "wal"


def test_a_first_collect_that_fails_leaves_an_empty_ledger_in_wal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _transcripts(tmp_path / "projects")

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(collector.Collector, "_store_files", fail)
    settings = load_settings()
    with pytest.raises(OSError, match="No space left"):
        collect_paths(settings, [root], jobs=2, post_ingest=False)
    assert settings.sqlite_path is not None and _mode(settings.sqlite_path) == "wal"
    monkeypatch.undo()
    monkeypatch.setenv("WARDEN_HOME", str(settings.sqlite_path.parent))
    assert ledger_values() == ({}, {}, {})


def test_another_connection_keeps_wal_without_a_wait(tmp_path: Path) -> None:
    """SQLite leaves WAL only for a connection alone on the database: with another one open, the
    switch is refused at once (not after the busy timeout), and the transaction is WAL's."""
    store = open_store(load_settings())
    database = load_settings().sqlite_path
    assert database is not None
    other = sqlite3.connect(database)
    other.execute("SELECT count(*) FROM ingest_offsets").fetchone()
    try:
        with store.session() as session:
            started = time.monotonic()
            assert journal_new_pages_in_place(session) is False
            assert time.monotonic() - started < 1.0
            connection = session.connection()
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000  # as it was
        other.close()
        with store.session() as session:
            assert journal_new_pages_in_place(session) is True
            assert session.connection().exec_driver_sql("PRAGMA journal_mode").scalar() == "delete"
        with store.session() as session:
            back_to_wal(session)
        assert _mode(database) == "wal"
    finally:
        other.close()
        store.engine.dispose()


def test_inside_a_transaction_nothing_is_switched() -> None:
    store = open_store(load_settings())
    try:
        with store.session() as session:
            session.connection().exec_driver_sql("INSERT INTO capture_states VALUES ('r', '{}', '2026-01-01')")
            assert journal_new_pages_in_place(session) is False
            session.rollback()
    finally:
        store.engine.dispose()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds SQLite's descriptor in /proc")
def test_the_fill_s_pages_are_synced_in_the_background_through_sqlite_s_own_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kicked while the fill's transaction is open, the writeback syncs the database file through
    the descriptor SQLite has open (opening and closing one of its own would drop the process's
    locks on the file): after it, another connection still cannot write."""
    import os

    from sqlalchemy import text

    from warden.store.db import FillWriteback

    synced: list[int] = []
    done = threading.Event()
    real_fdatasync = os.fdatasync

    def watched(fd: int) -> None:
        real_fdatasync(fd)
        synced.append(fd)
        done.set()
    monkeypatch.setattr(os, "fdatasync", watched)
    store = open_store(load_settings())
    database = load_settings().sqlite_path
    assert database is not None
    try:
        with store.session() as session:
            assert journal_new_pages_in_place(session) is True
            session.execute(text("INSERT INTO ingest_offsets (path, \"offset\", size, mtime_ns, head_sha256, "
                                 "parser_state, parser_version, updated_at) VALUES "
                                 "('/t.jsonl', 1, 1, 1, '', '{}', 'v', '2026-01-01 00:00:00')"))
            writeback = FillWriteback(session)
            before = set(os.listdir("/proc/self/fd"))
            writeback.kick()
            assert done.wait(10)
            writeback.stop()
            assert set(os.listdir("/proc/self/fd")) == before  # no descriptor opened or closed
            # another process (SQLite sees another connection of this one through its own table)
            other = subprocess.run([sys.executable, "-c", "import sqlite3, sys\n"
                                    "sqlite3.connect(sys.argv[1], timeout=0).execute(\"INSERT INTO alembic_version VALUES ('x')\")",
                                    str(database)], capture_output=True, text=True, timeout=60)
            assert other.returncode != 0 and "database is locked" in other.stderr
            assert len(synced) == 1 and os.path.samestat(os.fstat(synced[0]), os.stat(database))
            session.commit()
            back_to_wal(session)
    finally:
        store.engine.dispose()
    assert _mode(database) == "wal"


def test_a_first_bulk_collect_kicks_the_writeback_and_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from warden.store import db

    events: list[str] = []

    class Watched(db.FillWriteback):
        def kick(self) -> None:
            events.append("kick")
            super().kick()

        def stop(self) -> None:
            events.append("stop")
            super().stop()
    monkeypatch.setattr(collector, "FillWriteback", Watched)
    monkeypatch.setattr(collector, "BATCH_FILES", 2)
    root = _transcripts(tmp_path / "projects")
    collect_paths(load_settings(), [root], jobs=2, post_ingest=False)
    # a kick after each batch stored while the fill's transaction is open, and then none
    assert events.count("kick") >= 2 and events.index("stop") == events.count("kick") and events[-1] == "stop"
    assert all(not t.name.startswith("warden-writeback") for t in threading.enumerate())
