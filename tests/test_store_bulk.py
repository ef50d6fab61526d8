"""execute_many stores exactly what SQLAlchemy's own executemany stores, on every database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from warden.store.bulk import execute_many
from warden.store.models import UsageMessage

_INSERT = UsageMessage.__table__.insert()


def _row(key: str, when: datetime | None) -> dict[str, Any]:
    return {"message_key": key, "run_key": "s:main", "model": "claude-sonnet-4-6", "input_tokens": 3,
            "output_tokens": 5, "cache_write_5m_tokens": 7, "cache_write_1h_tokens": 11, "cache_read_tokens": 13,
            "timestamp": when}


def _store_both_ways(store: Any, moments: list[datetime | None]) -> dict[str, str]:
    """Rows "orm-i" through SQLAlchemy and "bulk-i" through execute_many; their timestamps as stored text."""
    with store.session() as session:
        session.execute(_INSERT, [_row(f"orm-{i}", when) for i, when in enumerate(moments)])
        execute_many(session, _INSERT, UsageMessage.__table__, [_row(f"bulk-{i}", when) for i, when in enumerate(moments)])
        session.commit()
    with store.session() as session:
        return dict(session.execute(text(
            "SELECT message_key, CAST(timestamp AS VARCHAR(40)) FROM usage_messages")).all())


def test_rows_written_by_execute_many_read_back_like_sqlalchemys(any_store: Any) -> None:
    moments = [datetime(2026, 1, 2, 3, 4, 5), datetime(2026, 1, 2, 3, 4, 5, 120000), None]
    stored = _store_both_ways(any_store, moments)
    with any_store.session() as session:
        loaded = {m.message_key: m for m in session.query(UsageMessage)}
    for i, when in enumerate(moments):
        assert stored[f"bulk-{i}"] == stored[f"orm-{i}"]  # same text on disk, even with zero microseconds
        assert loaded[f"bulk-{i}"].timestamp == when
        assert loaded[f"bulk-{i}"].cache_read_tokens == 13


def test_execute_many_of_nothing_is_a_no_op(any_store: Any) -> None:
    with any_store.session() as session:
        execute_many(session, _INSERT, UsageMessage.__table__, [])
        assert session.query(UsageMessage).count() == 0


def test_repeated_values_are_converted_once_but_never_confused(any_store: Any) -> None:
    """The per-batch memo of converted values: a repeated moment reads back as itself, and an
    equal-but-different value (the same instant in another zone) is converted on its own."""
    from datetime import timedelta, timezone

    utc = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    same_instant = utc.astimezone(timezone(timedelta(hours=2)))
    moments = [datetime(2026, 1, 2, 3, 4, 5)] * 3 + [utc, same_instant, None, None]
    stored = _store_both_ways(any_store, moments)
    for i in range(len(moments)):
        assert stored[f"bulk-{i}"] == stored[f"orm-{i}"]


def test_row_values_insert_what_a_flush_of_the_same_object_inserts(any_store: Any) -> None:
    """A new run built with the model's constructor and inserted through row_values and
    execute_many (the collector's bulk path, JSON by orjson on SQLite) reads back like the same
    object added and flushed: set values, Python-side defaults, JSON columns, NULLs."""
    from warden.ingest.collector import _ledger_json
    from warden.store.bulk import row_values
    from warden.store.models import SessionRun

    def build(key: str) -> SessionRun:
        return SessionRun(run_key=key, session_id="s", agent_id=None, agent="main", distill_state=None,
                          models=["claude-sonnet-4-6"], trace_digest={"v": 1, "steps": [["read", "é/ü", 3, 0, 0]]},
                          started_at=datetime(2026, 1, 2, 3, 4, 5, 600000), input_tokens=9)

    table = SessionRun.__table__
    with any_store.session() as session:
        session.add(build("orm"))
        session.flush()
        execute_many(session, table.insert(), table, [row_values(table, build("bulk"))], json_dumps=_ledger_json)
        session.commit()
    skip = {"id", "run_key", "created_at", "updated_at"}
    with any_store.session() as session:
        rows = {r.run_key: r for r in session.query(SessionRun)}
        values = {key: {c.key: getattr(row, c.key) for c in table.columns if c.key not in skip}
                  for key, row in rows.items()}
    assert values["bulk"] == values["orm"]
    assert values["bulk"]["line_stats"] == {} and values["bulk"]["origin"] == "claude-code"
    assert rows["bulk"].created_at is not None and rows["bulk"].id is not None


def test_values_converted_ahead_read_back_like_execute_manys(any_store: Any) -> None:
    """execute_values: rows of values in a column order, converted by bind_converter (as a parser
    process does) store the same text as execute_many's rows; it counts the rows it changed."""
    from warden.store.bulk import bind_converter, execute_values

    columns = tuple(_row("k", None))
    moments = [datetime(2026, 1, 2, 3, 4, 5), datetime(2026, 1, 2, 3, 4, 5, 120000), None]
    with any_store.session() as session:
        dialect = session.get_bind().dialect
        convert = [bind_converter(UsageMessage.__table__.c[name], dialect) for name in columns]
        rows = [tuple(v if c is None else c(v) for c, v in zip(convert, _row(f"ahead-{i}", when).values()))
                for i, when in enumerate(moments)]
        assert execute_values(session, _INSERT, UsageMessage.__table__, columns, rows) == len(moments)
        session.commit()
    stored = _store_both_ways(any_store, moments)
    for i in range(len(moments)):
        assert stored[f"ahead-{i}"] == stored[f"orm-{i}"]


def test_sqlite_datetimes_made_without_sqlalchemy_are_its_text() -> None:
    """A parser process's SQLite timestamp text (SQLiteDateTime, made without SQLAlchemy) is what
    SQLAlchemy's own bind processor makes, for whatever value comes."""
    from datetime import date, datetime, timedelta, timezone

    from sqlalchemy import DateTime
    from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

    from warden.store.sqlite_text import SQLiteDateTime, is_sqlite

    dialect = SQLiteDialect_pysqlite()
    reference = DateTime().dialect_impl(dialect).bind_processor(dialect)
    converter = SQLiteDateTime()
    for value in (datetime(2026, 1, 2, 3, 4, 5), datetime(2026, 1, 2, 3, 4, 5, 60), datetime(999, 12, 31, 23, 59),
                  datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=timezone(timedelta(hours=2))), date(2026, 1, 2), None):
        assert converter(value) == reference(value), value
    assert is_sqlite("sqlite") and is_sqlite("sqlite+pysqlite") and not is_sqlite("postgresql+psycopg")


def _insert_new(session: Any, rows: list[tuple[Any, ...]]) -> int:
    """The collector's insert of usage rows (message_key, run_key, model, timestamp, counts...)
    that skips the keys already stored: on SQLite, an INSERT OR IGNORE."""
    from warden.ingest.collector import _insert_new_usage
    from warden.ingest.transcripts import _USAGE_COLUMNS
    from warden.store.bulk import execute_values

    return execute_values(session, _insert_new_usage(session), UsageMessage.__table__, _USAGE_COLUMNS, rows)


def _usage(key: str, output: int, run_key: str = "s:main") -> tuple[Any, ...]:
    return (key, run_key, "claude-sonnet-4-6", None, 1, output, 0, 0, 0)


def _statements(session: Any) -> list[str]:
    """The SQL statements the session's SQLite connection runs from now on."""
    seen: list[str] = []
    session.connection().connection.driver_connection.set_trace_callback(seen.append)
    return seen


def test_rows_many_to_a_statement_store_what_one_a_row_stores(any_store: Any, monkeypatch: Any) -> None:
    """Many rows to a statement (SQLite): the same rows and count as a statement a row, across
    statements (3 rows each, or 5 then 2 and 1 here) and within one: a later row of a key stored
    by an earlier one of the same statement is skipped, as it would be after a stored row."""
    from warden.store import bulk

    batch = [_usage("a", 5), _usage("b", 5), _usage("a", 9, "s:other"), _usage("c", 1), _usage("b", 2),
             _usage("d", 4), _usage("e", 4), _usage("c", 3)]

    def stored_after(rows_per_statement: int) -> tuple[int, list[tuple[Any, ...]]]:
        monkeypatch.setattr(bulk, "ROWS_PER_STATEMENT", rows_per_statement)
        with any_store.session() as session:
            session.execute(text("DELETE FROM usage_messages"))
            session.execute(_INSERT, [_row("d", None)])  # stored before: kept as it is
            changed = _insert_new(session, batch)
            session.commit()
            return changed, sorted(session.execute(text(
                "SELECT message_key, run_key, output_tokens FROM usage_messages")).all())

    one_a_row = stored_after(1)
    assert one_a_row == (4, [("a", "s:main", 5), ("b", "s:main", 5), ("c", "s:main", 1), ("d", "s:main", 5),
                             ("e", "s:main", 4)])
    assert stored_after(3) == one_a_row
    assert stored_after(5) == one_a_row
    assert stored_after(500) == one_a_row


def test_only_an_insert_that_cannot_fail_part_way_goes_many_rows_to_a_statement() -> None:
    """SQLite keeps a journal of the pages a statement of many rows changes, in a temporary file,
    unless the statement cannot fail part way: a plain INSERT (whose conflict must fail the
    transaction, as the collector's races with hooks rely on) goes a row to a statement."""
    from warden.config import load_settings
    from warden.ingest.transcripts import _USAGE_COLUMNS
    from warden.store.bulk import execute_values
    from warden.store.db import open_store

    store = open_store(load_settings())
    rows = [_usage(f"k{i}", i) for i in range(70)]
    with store.session() as session:
        seen = _statements(session)
        assert _insert_new(session, rows) == 70
        execute_values(session, _INSERT, UsageMessage.__table__, _USAGE_COLUMNS, [_usage(f"p{i}", i) for i in range(3)])
        session.rollback()
    store.engine.dispose()
    inserts = [statement for statement in seen if "usage_messages" in statement]
    assert [statement.count("), (") + 1 for statement in inserts] == [64, 4, 2, 1, 1, 1]  # rows a statement
    assert [statement.split(" INTO")[0] for statement in inserts] == ["INSERT OR IGNORE"] * 3 + ["INSERT"] * 3


def test_an_insert_or_ignore_into_a_table_with_a_foreign_key_goes_a_row_to_a_statement() -> None:
    """A foreign key's check can fail a statement part way, OR IGNORE or not: the recall terms
    (whose checkpoint must exist) go a row to a statement."""
    from warden.config import load_settings
    from warden.store.bulk import execute_values
    from warden.store.db import open_store
    from warden.store.models import CheckpointTerm

    store = open_store(load_settings())
    table = CheckpointTerm.__table__
    columns = ("checkpoint_id", "term", "captured_at", "session_id")
    with store.session() as session:
        seen = _statements(session)
        with pytest.raises(IntegrityError, match="FOREIGN KEY"):  # no checkpoint 1: its first row fails
            execute_values(session, table.insert().prefix_with("OR IGNORE"), table, columns,
                           [(1, f"t{i}", "2026-01-01 00:00:00.000000", "s") for i in range(3)])
        session.rollback()
    store.engine.dispose()
    assert [statement.count("), (") + 1 for statement in seen if "checkpoint_terms" in statement] == [1]


def test_rows_many_to_a_statement_keep_within_sqlites_parameter_limit(tmp_path: Any) -> None:
    """A SQLite built with a low limit on a statement's parameters still takes a large batch."""
    import sqlite3

    from sqlalchemy import create_engine, event
    from sqlalchemy.orm import Session

    from warden.store.models import Base

    engine = create_engine(f"sqlite:///{tmp_path / 'limited.db'}")
    event.listen(engine, "connect", lambda conn, _: conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20))
    Base.metadata.create_all(engine, tables=[UsageMessage.__table__])
    with Session(engine) as session:
        rows = [_usage(f"k{i}", i) for i in range(7)]  # 63 parameters: 2 rows (18) a statement
        assert _insert_new(session, rows) == 7
        session.commit()
        assert session.scalar(text("SELECT sum(output_tokens) FROM usage_messages")) == sum(range(7))
    engine.dispose()
