"""Values as warden's SQLite database takes them, built without SQLAlchemy: a bulk collect's
parser processes convert their rows' values ahead of the writer, and they start before the
command has imported SQLAlchemy (:func:`warden.ingest.transcripts.start_parsers_early`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable


def is_sqlite(drivername: str) -> bool:
    """Whether an engine URL's ``drivername`` ("sqlite", "sqlite+pysqlite", …) is SQLite's."""
    return drivername.partition("+")[0] == "sqlite"


class SQLiteDateTime:
    """SQLite's DateTime bind processor for its default storage format: a naive datetime by
    ``isoformat`` (the same text, "2026-01-02 03:04:05.000000", at a fraction of the cost; one
    per usage row, each a distinct moment), anything else by SQLAlchemy's own ``processor``
    (given, or looked up the first time one comes)."""

    __slots__ = ("processor",)

    def __init__(self, processor: Callable[[Any], Any] | None = None) -> None:
        self.processor = processor

    def __call__(self, value: Any) -> Any:
        if value.__class__ is datetime and value.tzinfo is None:
            return value.isoformat(" ", "microseconds")
        if self.processor is None:
            self.processor = _sqlalchemy_processor()
        return self.processor(value)


def _sqlalchemy_processor() -> Callable[[Any], Any]:
    from sqlalchemy import DateTime
    from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

    dialect = SQLiteDialect_pysqlite()
    processor = DateTime().dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None  # SQLite keeps datetimes as text
    return processor
