"""Many-row writes through the DBAPI, for the bulk collect's hot tables.

SQLAlchemy's ``session.execute(stmt, rows)`` builds and type-processes a parameter set per row in
Python, which cost more than SQLite's own insert work on the collector's 100k-row batches (usage
messages, the recall index). Here a statement is compiled once per dialect, and only the columns
whose type needs a bind processor (DateTime on SQLite) get one; the rows go straight to the driver.
On SQLite, the rows of an ``INSERT OR IGNORE`` into a table without foreign keys go many to a
statement (``VALUES (...), (...), ...``): ``executemany`` runs the statement once a row, whose start
and reset cost ~25% of a usage row's insert. Only those: a statement of many rows that may fail
part way (another conflict clause, or a foreign key's check) keeps a journal of the pages it
changes in a temporary file, which costs far more (a GB's usage rows through ``ON CONFLICT DO
NOTHING``: 49k page writes, 780 MB; 375k recall terms, even ``OR IGNORE``: 715k).
"""

from __future__ import annotations

import sqlite3
from itertools import chain
from operator import itemgetter
from typing import Any, Callable, Sequence

from sqlalchemy import JSON, Column, DateTime, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.dialects.sqlite.base import DATETIME as SQLITE_DATETIME
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

from warden.store.sqlite_text import SQLiteDateTime

_Compiled = tuple[str, tuple[str, ...], bool, dict[str, Callable[[Any], Any]]]
_COMPILED: dict[tuple[int, str, tuple[str, ...], Any], _Compiled] = {}


def _compiled(stmt: Insert, table: Table, session: Session, keys: tuple[str, ...],
              json_dumps: Callable[[Any], str] | None) -> _Compiled:
    dialect = session.get_bind().dialect
    key = (id(stmt), dialect.name, keys, json_dumps)
    found = _COMPILED.get(key)
    if found is None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
        processors: dict[str, Callable[[Any], Any]] = {}
        for name in set(names):
            column = table.c.get(name)
            processor = bind_converter(column, dialect) if column is not None else None
            if processor is not None and json_dumps is not None and isinstance(column.type, JSON) \
                    and dialect.name == "sqlite":  # SQLite stores JSON as text: any encoder's text will do
                processor = _JSONText(json_dumps, column.type.dialect_impl(dialect).bind_processor(dialect))
            if processor is not None:
                processors[name] = processor
        found = _COMPILED[key] = (compiled.string, names, compiled.positional, processors)
    return found


def bind_converter(column: Column[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """What :func:`execute_many` does to ``column``'s values for ``dialect``'s driver (None:
    nothing), so another process can convert them ahead for :func:`execute_values`."""
    impl = column.type.dialect_impl(dialect)
    processor = impl.bind_processor(dialect)
    if processor is not None and isinstance(column.type, DateTime) and dialect.name == "sqlite" and \
            getattr(impl, "_storage_format", None) == SQLITE_DATETIME._storage_format:
        return SQLiteDateTime(processor)
    return processor


class _JSONText:
    """A JSON column's bind processor encoding with ``json_dumps`` (None stays the dialect's)."""

    def __init__(self, json_dumps: Callable[[Any], str], processor: Callable[[Any], Any]) -> None:
        self.json_dumps = json_dumps
        self.processor = processor

    def __call__(self, value: Any) -> Any:
        return self.processor(value) if value is None else self.json_dumps(value)


def _converter(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A batch's converter for a column: memoized unless it is cheaper than a memo look-up, or
    its values are not hashable (a JSON column's dicts and lists: the look-up only raises)."""
    return processor if isinstance(processor, (SQLiteDateTime, _JSONText)) else _memoized(processor)


def row_values(table: Table, obj: Any, defaults: tuple[tuple[str, Any], ...] | None = None) -> dict[str, Any]:
    """The column values of a new, never-added ORM object of ``table`` (or a dict of column
    values), as the ORM would insert them: what was set, else the column's Python-side default
    (the autoincrement key left out). So rows built with the models' constructors go through
    :func:`execute_many` instead of a flush. ``defaults``: :func:`insert_defaults` of ``table``,
    for rows inserted together (else worked out for this row)."""
    state = obj if isinstance(obj, dict) else obj.__dict__
    values: dict[str, Any] = {}
    for key, default in defaults if defaults is not None else insert_defaults(table):
        if key in state:
            values[key] = state[key]
        elif default is not _LEFT_OUT:
            values[key] = default
    return values


def insert_defaults(table: Table) -> tuple[tuple[str, Any], ...]:
    """Per column of ``table``: (key, the value a row inserted now takes where it sets none, or
    _LEFT_OUT for the autoincrement key), each callable default called once: the rows of one
    statement take one time (a bulk collect inserts thousands of runs and offsets, each with
    their ``utcnow`` columns). A mutable default (``dict``) is then one object for those rows:
    only for rows inserted, and dropped, as they are."""
    return tuple((key, default(None) if is_callable else default) for key, default, is_callable in _defaults(table))


_LEFT_OUT = object()
_DEFAULTS: dict[Table, tuple[tuple[str, Any, bool], ...]] = {}


def _defaults(table: Table) -> tuple[tuple[str, Any, bool], ...]:
    """Per column of ``table``: (key, its Python-side default or _LEFT_OUT for the autoincrement
    key, whether the default is a callable), worked out once (a bulk collect builds a row each
    for thousands of runs and offsets)."""
    found = _DEFAULTS.get(table)
    if found is None:
        columns = []
        for column in table.columns:
            default = column.default
            if column is table.autoincrement_column:
                columns.append((column.key, _LEFT_OUT, False))
            elif default is None:
                columns.append((column.key, None, False))
            else:
                columns.append((column.key, default.arg, bool(default.is_callable)))  # type: ignore[attr-defined]
        found = _DEFAULTS[table] = tuple(columns)
    return found


def execute_many(session: Session, stmt: Insert, table: Table, rows: Sequence[dict[str, Any]], *,
                 json_dumps: Callable[[Any], str] | None = None) -> None:
    """Execute ``stmt`` (an INSERT or upsert on ``table``) once per row; every row has the first
    row's keys, which are column keys. ``stmt`` must be long-lived (it is cached by identity).
    ``json_dumps`` (long-lived too) encodes JSON columns on SQLite instead of the standard
    library's encoder (the same values read back; the caller vouches its values suit it)."""
    if not rows:
        return
    sql, names, positional, processors = _compiled(stmt, table, session, tuple(rows[0]), json_dumps)
    if positional:
        pick = itemgetter(*names) if len(names) > 1 else (lambda row: (row[names[0]],))
        params: list[Any] = list(map(pick, rows))
        converted = [(index, _converter(processors[name])) for index, name in enumerate(names) if name in processors]
        if converted:  # column by column: transpose, convert, transpose back (the driver wants tuples)
            columns: list[Any] = list(zip(*params))
            for index, convert in converted:
                columns[index] = map(convert, columns[index])
            params = list(zip(*columns))
    elif processors:
        params = [dict(row) for row in rows]
        for name, processor in processors.items():
            convert = _converter(processor)
            for row in params:
                row[name] = convert(row[name])
    else:
        params = list(rows)
    _execute_rows(session, table, sql, len(names), positional, params)


def execute_values(session: Session, stmt: Insert, table: Table, columns: tuple[str, ...],
                   rows: Sequence[tuple[Any, ...]]) -> int:
    """:func:`execute_many` for rows of values in ``columns`` order, each already converted by
    :func:`bind_converter` for this session's dialect (nothing is converted here: tuples built in
    a parser process go to the driver as they are). Returns the rows the statement changed."""
    if not rows:
        return 0
    sql, names, positional, _ = _compiled(stmt, table, session, columns, None)
    params: Sequence[Any]
    if positional and names == columns:
        params = rows
    elif positional:
        pick = itemgetter(*(columns.index(name) for name in names))
        params = list(map(pick, rows)) if len(names) > 1 else [(pick(row),) for row in rows]
    else:
        params = [dict(zip(columns, row)) for row in rows]
    return _execute_rows(session, table, sql, len(names), positional, params)


ROWS_PER_STATEMENT = 64  # on SQLite: fewer saves no more instructions a row, more costs memory a statement


def _execute_rows(session: Session, table: Table, sql: str, width: int, positional: bool,
                  params: Sequence[Any]) -> int:
    """``sql`` (an INSERT into ``table`` of one ``VALUES`` group of ``width`` parameters) for each
    parameter set; the rows it changed. An ``INSERT OR IGNORE`` on SQLite, into a table without
    foreign keys, goes many rows to a statement, as many as its parameter limit allows up to
    ROWS_PER_STATEMENT, the rest in statements of powers of two (so the driver's cache keeps a few
    statements, not one per length): the same rows, in the same order, as ``executemany``'s."""
    connection = session.connection()
    group = "(" + ", ".join("?" * width) + ")"
    if not (positional and len(params) > 1 and not table.foreign_keys and connection.dialect.name == "sqlite"
            and sql.startswith("INSERT OR IGNORE ") and sql.count(group) == 1):
        return connection.exec_driver_sql(sql, params).rowcount
    driver = connection.connection.driver_connection
    most = max(1, min(ROWS_PER_STATEMENT, driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    head, tail = sql.split(group)
    changed = 0
    start = len(params) - len(params) % most
    if start:  # the statements of ``most`` rows in one call (the driver's executemany)
        statement = head + ", ".join([group] * most) + tail
        sets = [tuple(chain.from_iterable(params[i:i + most])) for i in range(0, start, most)]
        changed += connection.exec_driver_sql(statement, sets).rowcount
    while start < len(params):  # the rest, fewer than ``most``
        size = 1 << ((len(params) - start).bit_length() - 1)
        statement = head + ", ".join([group] * size) + tail
        changed += connection.exec_driver_sql(statement, tuple(chain.from_iterable(params[start:start + size]))).rowcount
        start += size
    return changed


def _memoized(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``processor`` remembering its results for hashable values: a batch repeats most of them
    (one checkpoint's time on each of its index terms), and each conversion builds a string.
    Keyed with the type and time zone too: equal values (1 and 1.0, one instant in two zones) may
    convert differently."""
    done: dict[Any, Any] = {}

    def convert(value: Any) -> Any:
        key = (value.__class__, value, getattr(value, "tzinfo", None))
        try:
            return done[key]
        except KeyError:
            result = done[key] = processor(value)
            return result
        except TypeError:  # unhashable (a JSON value)
            return processor(value)
    return convert
