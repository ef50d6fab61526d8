"""SQLAlchemy 2.x models: the one database every stage reads and writes. The ledger's own
(sessions, usage, offsets) and the base they all share are :mod:`warden.store.ledger_models`',
imported from here too.

Times are naive UTC. JSON columns hold lists/dicts of plain values. Changing a model means a new
Alembic revision (``alembic revision --autogenerate``); tests fail when models and migrations
disagree.

No ``from __future__ import annotations`` here: the ORM would then read every column's annotation
from its text (an eval each, ~15% of this module's import, which every command pays).
"""

from datetime import datetime
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import Mapped, mapped_column, relationship

# the ledger's models, the base and the helpers, for importers of the whole schema
from warden.store.ledger_models import (NAMING, Base, IngestOffset, SessionRun, TokenCounts, UsageMessage,  # noqa: F401
                                        iso_utc, utcnow)


# ---------------------------------------------------------------- rules & decisions


class Rule(Base):
    __tablename__ = "rules"
    __table_args__ = (Index("ix_rules_agent_state", "agent", "state"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(String(400))
    scope: Mapped[str | None] = mapped_column(String(200))
    # candidate | active | probation | evicted | protected
    state: Mapped[str] = mapped_column(String(20), default="candidate")
    evict_reason: Mapped[str | None] = mapped_column(String(40))
    strikes: Mapped[int] = mapped_column(Integer, default=0)
    rent_tokens: Mapped[int] = mapped_column(Integer, default=0)
    origin: Mapped[str] = mapped_column(String(40), default="heuristic")  # heuristic|anthropic|manual|adopted
    provenance_run_id: Mapped[int | None] = mapped_column(ForeignKey("session_runs.id", ondelete="SET NULL"))
    provenance_digest: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    claimed_evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # from an adopted ledger
    measured_saving: Mapped[float | None] = mapped_column(Float)  # latest estimate, weighted tokens/run
    # spent by invocations whose budget ran out before a verdict, since the last receipt
    undecided_tokens: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)

    receipts: Mapped[list["Receipt"]] = relationship(back_populates="rule", order_by="Receipt.id")


class Receipt(Base):
    """One immutable row per decision (DESIGN.md §3)."""

    __tablename__ = "receipts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("rules.id", ondelete="CASCADE"), index=True)
    agent: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # admission | reaudit
    verdict: Mapped[str] = mapped_column(String(30))  # keep|refute|regression|inconclusive
    reason: Mapped[str] = mapped_column(Text, default="")
    state_after: Mapped[str] = mapped_column(String(20))
    estimate: Mapped[float] = mapped_column(Float)  # saving, weighted tokens per run
    ci_low: Mapped[float] = mapped_column(Float)
    ci_high: Mapped[float] = mapped_column(Float)
    margin: Mapped[float] = mapped_column(Float)
    rent: Mapped[int] = mapped_column(Integer)
    k: Mapped[float] = mapped_column(Float)
    n_per_side: Mapped[dict[str, Any]] = mapped_column(JSON)  # task -> [n_ref, n_rule]
    paired_diffs: Mapped[dict[str, Any]] = mapped_column(JSON)  # task -> [diffs]
    pass_counts: Mapped[dict[str, Any]] = mapped_column(JSON)  # task -> [ref_pass, ref_n, rule_pass, rule_n]
    tokens_spent: Mapped[float] = mapped_column(Float)
    raw_tokens_spent: Mapped[int] = mapped_column(BigInteger, default=0)
    model: Mapped[str] = mapped_column(String(120))
    backend: Mapped[str] = mapped_column(String(40))
    suite_hash: Mapped[str] = mapped_column(String(64))
    fixture_hash: Mapped[str] = mapped_column(String(64))
    warden_version: Mapped[str] = mapped_column(String(40))
    ruleset_version: Mapped[int | None] = mapped_column(Integer)
    method: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # estimator, alpha, beta, ...
    provenance_digest: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # the runs the verdict rested on: [side, task, round, weighted, raw, completed, outcome, run id]
    evidence: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    rule: Mapped[Rule] = relationship(back_populates="receipts")


class RulesetVersion(Base):
    """A compiled MEMORY.md: which rules, which bytes. Every later run records its version."""

    __tablename__ = "ruleset_versions"
    __table_args__ = (UniqueConstraint("agent", "version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    rule_ids: Mapped[list[Any]] = mapped_column(JSON)
    rules_sha256: Mapped[str] = mapped_column(String(64), default="")  # the rules part: the version's identity
    memory_sha256: Mapped[str] = mapped_column(String(64))  # the whole file as last written
    memory_path: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


# ---------------------------------------------------------------- bench


class BenchPass(Base):
    """A planned set of runs (``warden bench`` or one selector invocation): the job table's head."""

    __tablename__ = "bench_passes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(String(200), index=True)
    purpose: Mapped[str] = mapped_column(String(20), default="bench")  # bench | select
    backend: Mapped[str] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(120))
    suite_hash: Mapped[str] = mapped_column(String(64))
    fixture_hash: Mapped[str] = mapped_column(String(64))
    plan_key: Mapped[str] = mapped_column(String(200), default="", index=True)  # resume lookup
    status: Mapped[str] = mapped_column(String(20), default="planned")  # planned|running|done|aborted
    budget_tokens: Mapped[int | None] = mapped_column(BigInteger)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)

    jobs: Mapped[list["BenchJob"]] = relationship(back_populates="bench_pass", order_by="BenchJob.order_index")


class BenchJob(Base):
    __tablename__ = "bench_jobs"
    __table_args__ = (UniqueConstraint("pass_id", "order_index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pass_id: Mapped[int] = mapped_column(ForeignKey("bench_passes.id", ondelete="CASCADE"), index=True)
    order_index: Mapped[int] = mapped_column(Integer)
    task_id: Mapped[str] = mapped_column(String(200))
    config_key: Mapped[str] = mapped_column(String(400))  # sorted rule ids, "" = none
    seed: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending|running|done
    bench_run_id: Mapped[int | None] = mapped_column(ForeignKey("bench_runs.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)

    bench_pass: Mapped[BenchPass] = relationship(back_populates="jobs")


class BenchRun(TokenCounts, Base):
    """One replay of one golden task under one configuration (DESIGN.md §3 'Run result')."""

    __tablename__ = "bench_runs"
    __table_args__ = (Index("ix_bench_runs_lookup", "agent", "task_id", "config_key", "backend", "model"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    task_id: Mapped[str] = mapped_column(String(200))
    config_key: Mapped[str] = mapped_column(String(400))
    rule_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    ruleset_version: Mapped[int | None] = mapped_column(Integer)
    memory_sha256: Mapped[str] = mapped_column(String(64), default="")  # the rules' rendering, version label left out
    backend: Mapped[str] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(120))
    seed: Mapped[int] = mapped_column(BigInteger)
    suite_hash: Mapped[str] = mapped_column(String(64))
    fixture_hash: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(20))  # completed|task_failed|infra_error|budget_exceeded
    completed: Mapped[bool] = mapped_column(Boolean, default=False)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    weighted_tokens: Mapped[float] = mapped_column(Float, default=0.0)
    calls: Mapped[list[Any]] = mapped_column(JSON, default=list)  # per-call usage
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Baseline(Base):
    """A task's frozen first completed run with the active set on one fixture version, and the
    best since on that same fixture. A new fixture version starts a fresh baseline (migration
    0005): runs on two fixtures are never compared. The suite hash is not part of it: adding a
    task changes the suite hash, and must not unfreeze the other tasks' baselines."""

    __tablename__ = "baselines"
    __table_args__ = (UniqueConstraint("agent", "task_id", "backend", "model", "fixture_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    task_id: Mapped[str] = mapped_column(String(200))
    backend: Mapped[str] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(120))
    fixture_hash: Mapped[str] = mapped_column(String(64))  # its runs' fixture ('' if unknown, migration 0005)
    run1_weighted: Mapped[float] = mapped_column(Float)
    run1_run_id: Mapped[int | None] = mapped_column(ForeignKey("bench_runs.id", ondelete="SET NULL"))
    best_weighted: Mapped[float] = mapped_column(Float)
    best_run_id: Mapped[int | None] = mapped_column(ForeignKey("bench_runs.id", ondelete="SET NULL"))
    frozen_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


# ---------------------------------------------------------------- continuity


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    # AUTOINCREMENT on SQLite: a deleted checkpoint's id is never reused (pointers name ids)
    __table_args__ = (UniqueConstraint("run_key", "trigger"), Index("ix_checkpoints_agent_time", "agent", "captured_at"),
                      Index("ix_checkpoints_captured_at", "captured_at"), {"sqlite_autoincrement": True})
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_key: Mapped[str] = mapped_column(String(300))
    session_id: Mapped[str] = mapped_column(String(200), index=True)
    agent_id: Mapped[str | None] = mapped_column(String(200))
    agent: Mapped[str] = mapped_column(String(200))
    project: Mapped[str | None] = mapped_column(Text)
    projects: Mapped[list[Any]] = mapped_column(JSON, default=list)
    trigger: Mapped[str] = mapped_column(String(40))  # fill:20 | quality:70 | milestone:edits:3 | ...
    fill: Mapped[float] = mapped_column(Float, default=0.0)
    quality: Mapped[float] = mapped_column(Float, default=100.0)
    active_task: Mapped[str] = mapped_column(Text, default="")
    decisions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    edited_files: Mapped[list[Any]] = mapped_column(JSON, default=list)
    read_files: Mapped[list[Any]] = mapped_column(JSON, default=list)
    open_questions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    errors: Mapped[list[Any]] = mapped_column(JSON, default=list)
    last_state: Mapped[str] = mapped_column(Text, default="")
    captured_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)  # session time of the trigger
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CheckpointTerm(Base):
    """Inverted index for recall: one row per distinct recall term of a checkpoint, so a prompt
    is scored against 10k checkpoints by looking up its own terms instead of re-tokenizing all."""

    __tablename__ = "checkpoint_terms"
    # covering index: a prompt's lookup is one index range scan per term, no table access
    __table_args__ = (Index("ix_checkpoint_terms_lookup", "term", "captured_at", "checkpoint_id", "session_id"),)
    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoints.id", ondelete="CASCADE"), primary_key=True)
    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    captured_at: Mapped[datetime] = mapped_column(DateTime)  # copies of the checkpoint's, for the index
    session_id: Mapped[str] = mapped_column(String(200))


class CaptureState(Base):
    """Where checkpoint capture stopped in a run: crossed bands, running rates, milestone counters
    and the content so far, so an incremental parse (a hook after every turn) captures exactly what
    a parse of the whole transcript would."""

    __tablename__ = "capture_states"
    run_key: Mapped[str] = mapped_column(String(300), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


# ---------------------------------------------------------------- jobs


class NightlyRun(Base):
    """One ``warden nightly`` invocation; an unfinished one is resumed by the next."""

    __tablename__ = "nightly_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|done|aborted
    stage: Mapped[str] = mapped_column(String(20), default="collect")
    agents: Mapped[list[Any]] = mapped_column(JSON, default=list)
    budget_tokens: Mapped[int | None] = mapped_column(BigInteger)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
