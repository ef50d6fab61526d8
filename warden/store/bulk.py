"""Many-row writes through the DBAPI's ``executemany``, for the bulk collect's hot tables.

SQLAlchemy's ``session.execute(stmt, rows)`` builds and type-processes a parameter set per row in
Python, which cost more than SQLite's own insert work on the collector's 100k-row batches (usage
messages, the recall index). Here a statement is compiled once per dialect, and only the columns
whose type needs a bind processor (DateTime on SQLite) get one; the rows go straight to the driver.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from sqlalchemy import Table
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

_COMPILED: dict[tuple[int, str, tuple[str, ...]], tuple[str, tuple[str, ...], bool, dict[str, Callable[[Any], Any]]]] = {}


def _compiled(stmt: Insert, table: Table, session: Session, keys: tuple[str, ...]) -> tuple[
        str, tuple[str, ...], bool, dict[str, Callable[[Any], Any]]]:
    dialect = session.get_bind().dialect
    key = (id(stmt), dialect.name, keys)
    found = _COMPILED.get(key)
    if found is None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
        processors: dict[str, Callable[[Any], Any]] = {}
        for name in set(names):
            column = table.c.get(name)
            processor = column.type.dialect_impl(dialect).bind_processor(dialect) if column is not None else None
            if processor is not None:
                processors[name] = processor
        found = _COMPILED[key] = (compiled.string, names, compiled.positional, processors)
    return found


def execute_many(session: Session, stmt: Insert, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Execute ``stmt`` (an INSERT or upsert on ``table``) once per row; every row has the first
    row's keys, which are column keys. ``stmt`` must be long-lived (it is cached by identity)."""
    if not rows:
        return
    sql, names, positional, processors = _compiled(stmt, table, session, tuple(rows[0]))
    if positional:
        params: list[Any] = [tuple(processors[n](row[n]) if n in processors else row[n] for n in names)
                             for row in rows]
    elif processors:
        params = [{**row, **{n: p(row[n]) for n, p in processors.items()}} for row in rows]
    else:
        params = list(rows)
    session.connection().exec_driver_sql(sql, params)
