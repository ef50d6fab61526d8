"""The ledger's SQLAlchemy models (session runs, the usage dedupe, ingest offsets) and the base
every model of :mod:`warden.store.models` shares.

Apart from the other stages' models: the collector writes only these, and declaring the other
eleven costs ~20 ms more of every collect's writer, whose imports come before its first write.
:mod:`warden.store.models` holds them all (the whole schema: migrations compare its metadata).

Times are naive UTC. JSON columns hold lists/dicts of plain values. No ``from __future__ import
annotations`` here (nor there): the ORM would then read every column's annotation from its text.
"""

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from warden.ingest.pricing import Usage

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def iso_utc(moment: datetime | None, timespec: str = "auto") -> str | None:
    """A stored time (naive UTC; an aware one is converted) as ISO 8601 with 'Z', as JSON shows it."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(timespec=timespec) + "Z"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class TokenCounts:
    """The five token counts of one or more API responses (DESIGN.md §3), as columns."""

    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_write_5m_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_write_1h_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, default=0)

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens or 0, self.output_tokens or 0, self.cache_write_5m_tokens or 0,
                     self.cache_write_1h_tokens or 0, self.cache_read_tokens or 0)


# ---------------------------------------------------------------- collect


class SessionRun(TokenCounts, Base):
    """One transcript run: a main session or one subagent transcript (DESIGN.md §3)."""

    __tablename__ = "session_runs"
    # the distillation trigger's "agent's runs before this one, newest first" (migration 0004)
    __table_args__ = (Index("ix_session_runs_agent_started", "agent", "started_at", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_key: Mapped[str] = mapped_column(String(300), unique=True)  # "<session>:<agent_id|main>"
    session_id: Mapped[str] = mapped_column(String(200), index=True)
    agent_id: Mapped[str | None] = mapped_column(String(200))
    agent: Mapped[str] = mapped_column(String(200))  # "main" or the subagent type; indexed with started_at
    project: Mapped[str | None] = mapped_column(Text)
    models: Mapped[list[Any]] = mapped_column(JSON, default=list)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    weighted_tokens: Mapped[float] = mapped_column(Float, default=0.0)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    file_reads: Mapped[int] = mapped_column(Integer, default=0)
    rereads: Mapped[int] = mapped_column(Integer, default=0)
    greps: Mapped[int] = mapped_column(Integer, default=0)
    edits: Mapped[int] = mapped_column(Integer, default=0)
    failed_tool_results: Mapped[int] = mapped_column(Integer, default=0)
    completed: Mapped[bool] = mapped_column(Boolean, default=False)
    placeholder_output: Mapped[bool] = mapped_column(Boolean, default=False)
    unknown_model: Mapped[bool] = mapped_column(Boolean, default=False)
    trace_digest: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    line_stats: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    source_path: Mapped[str] = mapped_column(Text, default="")
    source_offset: Mapped[int] = mapped_column(BigInteger, default=0)
    parser_version: Mapped[str] = mapped_column(String(40), default="")
    origin: Mapped[str] = mapped_column(String(20), default="claude-code")  # or "sim"
    # distill queue: None = not queued, "queued", "done", "skipped"
    distill_state: Mapped[str | None] = mapped_column(String(20), index=True)
    distilled_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class UsageMessage(TokenCounts, Base):
    """Global usage dedupe: each API response counts once, for the run that first holds it."""

    __tablename__ = "usage_messages"
    message_key: Mapped[str] = mapped_column(String(400), primary_key=True)
    run_key: Mapped[str] = mapped_column(String(300), index=True)
    model: Mapped[str] = mapped_column(String(120), default="")
    timestamp: Mapped[datetime | None] = mapped_column(DateTime)


class IngestOffset(Base):
    """How far each transcript file has been consumed (incremental re-ingest)."""

    __tablename__ = "ingest_offsets"
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    run_key: Mapped[str | None] = mapped_column(String(300))
    offset: Mapped[int] = mapped_column(BigInteger, default=0)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    mtime_ns: Mapped[int] = mapped_column(BigInteger, default=0)
    head_sha256: Mapped[str] = mapped_column(String(64), default="")  # detects rewritten files
    parser_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    parser_version: Mapped[str] = mapped_column(String(40), default="")
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)
