"""Distillation orchestration (the I/O around the pure detectors and distillers).

``distill_runs`` works the queue the trigger fills (or one given run): parse the run's transcript
from its ``source_path`` with the collector's parser, detect waste, propose rules (heuristic or
model), admit them, mark the run done. Each run is its own transaction, so one bad transcript
never loses another's work. ``distill_dry_run`` is the read-only variant over arbitrary transcript
files and directories (``warden distill --dry-run PATHS…``): findings and what would be proposed,
no database.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import anthropic
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from warden.config import DISTILLER_NAMES, Settings
from warden.distill import heuristic
from warden.distill.admission import ADMISSION_BUSY, ADMISSION_LOCK, Refusal, admit, screen_body
from warden.distill.detectors import Finding, detect_waste
from warden.distill.model_distiller import (MAX_CONSECUTIVE_FAILURES, DistillContext, ModelReply, digest_lines,
                                            distill_with_model, make_client)
from warden.errors import UsageError
from warden.names import validate_agent_name
from warden.sanitize import redact_secrets
from warden.ingest.collector import parse_file, read_meta_sidecar
from warden.ingest.pricing import DEFAULT_TABLE, PriceTable
from warden.ingest.records import ParsedRun
from warden.store.db import Store
from warden.store.models import Rule, SessionRun, utcnow

log = logging.getLogger("warden.distill")

DISTILLERS = DISTILLER_NAMES
LIVE_STATES = ("candidate", "active", "probation", "protected")
PROVENANCE_TRACE_STEPS = 60  # steps of the trace digest kept with each rule


@dataclass
class RunReport:
    source_path: str
    run_id: int | None = None
    run_key: str | None = None
    agent: str | None = None
    weighted_tokens: float | None = None
    tool_calls: int = 0
    findings: list[Finding] = field(default_factory=list)
    proposals: list[str] = field(default_factory=list)
    admitted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # model replies dropped, and why
    error: str | None = None
    infra_error: bool = False
    state_after: str | None = None
    model_tokens: int = 0  # input + output tokens of the model distiller's call (0: heuristic)

    def to_dict(self) -> dict[str, Any]:
        return {"source_path": self.source_path, "run_id": self.run_id, "run_key": self.run_key,
                "agent": self.agent, "weighted_tokens": self.weighted_tokens, "tool_calls": self.tool_calls,
                "findings": [f.to_dict() for f in self.findings], "proposals": self.proposals,
                "admitted": self.admitted, "refused": [r.to_dict() for r in self.refused],
                "dropped": self.dropped, "error": self.error, "state_after": self.state_after,
                "model_tokens": self.model_tokens}


# ---------------------------------------------------------------- parsing


def parse_transcript(path: Path) -> ParsedRun:
    """Parse one whole transcript file the way the collector reads it (oversized lines skipped),
    with secrets redacted from its trace: everything distill sends to a model or stores as a
    rule's provenance comes from this trace."""
    try:
        parsed, _state, _end = parse_file(str(path))
    except OSError as exc:
        raise UsageError(f"cannot read transcript {path}: {exc.strerror or exc}") from None
    steps = (parsed.trace_digest or {}).get("steps")
    if isinstance(steps, list):
        parsed.trace_digest = {**parsed.trace_digest, "steps": [_redacted_step(step) for step in steps]}
    return parsed


def transcript_files(paths: list[Path]) -> list[Path]:
    """Files as given, directories expanded to their ``*.jsonl`` files (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"no such transcript file or directory: {path}")
    return files


# ---------------------------------------------------------------- distillers


def _redacted_step(step: Any) -> Any:
    """A trace step with secrets in its target (a command line or a path) redacted."""
    if isinstance(step, (list, tuple)) and len(step) >= 2 and isinstance(step[1], str):
        return [step[0], redact_secrets(step[1]), *step[2:]]
    return step


def _provenance(run: SessionRun | None, parsed: ParsedRun, findings: list[Finding], distiller: str,
                model: str | None) -> dict[str, Any]:
    trace = parsed.trace_digest or {}
    # hashed as stored (the session row's digest, with what the collector adds to it), so a user
    # can check the receipt's "trace" hash against the database; the steps shown are the parse's
    stored = run.trace_digest if run is not None and run.trace_digest else trace
    return {
        "run_key": parsed.run_key if run is None else run.run_key,
        "distiller": distiller, "model": model,
        "findings": [{"waste_kind": f.waste_kind, "occurrences": f.occurrences,
                      "saving_tokens": round(f.saving_tokens, 1)} for f in findings],
        "trace_sha256": hashlib.sha256(json.dumps(stored, sort_keys=True, default=str).encode()).hexdigest(),
        "trace": (trace.get("steps") or [])[:PROVENANCE_TRACE_STEPS],
    }


def _rule_context(session: Session, agent: str) -> DistillContext:
    rules = list(session.scalars(select(Rule).where(Rule.agent == agent).order_by(Rule.id)))
    evicted = sorted((r for r in rules if r.state == "evicted"),
                     key=lambda r: r.updated_at or r.created_at, reverse=True)
    return DistillContext(
        agent=agent, current_rules=[r.body for r in rules if r.state in LIVE_STATES],
        evicted_rules=[{"body": r.body, "evict_reason": r.evict_reason, "measured_saving": r.measured_saving}
                       for r in evicted])


def _propose(parsed: ParsedRun, findings: list[Finding], context: DistillContext, distiller: str,
             settings: Settings, client: anthropic.Anthropic | None) -> tuple[list[str], ModelReply | None]:
    if distiller == "heuristic":
        evicted = [r["body"] for r in context.evicted_rules]
        return [p.body for p in heuristic.propose(findings, evicted)], None
    reply = distill_with_model(client or make_client(settings), settings.distill_model, findings,
                               digest_lines(parsed.trace_digest or {}), context)
    return reply.bodies, reply


# ---------------------------------------------------------------- entry points


def check_distiller(distiller: str) -> str:
    if distiller not in DISTILLERS:
        raise UsageError(f"unknown distiller {distiller!r}: choose one of {', '.join(DISTILLERS)}")
    return distiller


def _given_run(store: Store, run_id: int, agent: str | None) -> int:
    """``run_id``, once it names a run (of ``agent``, when one is given)."""
    with store.session() as session:
        run = session.get(SessionRun, run_id)
        if run is None:
            raise UsageError(f"no session run with id {run_id}")
        if agent and run.agent != agent:
            raise UsageError(f"session run {run_id} belongs to agent {run.agent!r}, not {agent!r}")
        return run_id


def _queue(agent: str | None) -> Select[tuple[int]]:
    """The distill queue (of one agent), as a query of run ids."""
    query = select(SessionRun.id).where(SessionRun.distill_state == "queued")
    return query.where(SessionRun.agent == agent) if agent else query


def _newest_first(query: Select[tuple[int]]) -> Select[tuple[int]]:
    """Runs by when they happened, not when they were collected (a backfill gets high row ids):
    the latest end, else start, first; a run with neither last."""
    when = func.coalesce(SessionRun.ended_at, SessionRun.started_at)
    return query.order_by(when.is_(None), when.desc(), SessionRun.id.desc())


def queued_count(store: Store, agent: str | None = None, *, besides: Iterable[int | None] = ()) -> int:
    """Runs still waiting in the distill queue (a limit leaves the older ones there), ``besides``
    those (the runs a dry run took: what a real one would leave)."""
    query = _queue(agent)
    taken = sorted({run_id for run_id in besides if run_id is not None})
    if taken:
        query = query.where(SessionRun.id.not_in(taken))
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(query.subquery())) or 0


def distill_run(store: Store, settings: Settings, run_id: int, *, distiller: str = "heuristic",
                client: anthropic.Anthropic | None = None, dry_run: bool = False,
                pending: dict[str, list[str]] | None = None) -> RunReport:
    """Distill one session run; with ``dry_run`` nothing is written (admission is rolled back;
    ``pending``: what earlier runs of the same dry run would have admitted, by agent)."""
    check_distiller(distiller)
    if distiller == "anthropic" and client is None:
        client = make_client(settings)  # fail before any work when there is no key
    with store.sessions() as session:
        run = session.get(SessionRun, run_id)
        if run is None:
            raise UsageError(f"no session run with id {run_id}")
        report = RunReport(source_path=run.source_path, run_id=run.id, run_key=run.run_key, agent=run.agent,
                           weighted_tokens=run.weighted_tokens)
        path = Path(run.source_path) if run.source_path else None
        try:
            validate_agent_name(run.agent)
        except UsageError:
            unusable = (f"agent {run.agent!r} cannot hold rules (a plugin subagent type such as 'plugin:name' "
                        "is not an agent name warden manages); run skipped")
        else:
            unusable = None if path is not None and path.is_file() else \
                f"transcript not found: {run.source_path or '(no source path)'}"
        if unusable:  # before any model call: one run never blocks the queue behind it
            report.error = unusable
            report.state_after = "skipped"
            if not dry_run:
                run.distill_state, run.distilled_at = "skipped", utcnow()
                session.commit()
            return report
        assert path is not None
        try:
            parsed = parse_transcript(path)
        except UsageError as exc:
            report.error, report.state_after = str(exc), run.distill_state
            return report
        findings = detect_waste(parsed)
        report.findings, report.tool_calls = findings, len(parsed.tool_calls)
        context = _rule_context(session, run.agent)
        bodies, reply = _propose(parsed, findings, context, distiller, settings, client)
        report.proposals = [redact_secrets(b) for b in bodies]  # shown and written as JSON
        if reply is not None:
            report.dropped = list(reply.dropped)
            report.model_tokens = reply.tokens
            if reply.error:
                # Infra, not the agent: nothing admitted, the run stays queued for a later night.
                report.error, report.infra_error, report.state_after = reply.error, True, run.distill_state
                return report
        result = admit(session, run.agent, bodies, origin=distiller, provenance_run_id=run.id,
                       provenance_digest=_provenance(run, parsed, findings, distiller,
                                                     reply.model if reply else None),
                       pending=(pending or {}).get(run.agent))
        report.refused = result.refused
        report.admitted = [{"id": r.id, "body": r.body, "state": r.state, "rent_tokens": r.rent_tokens}
                           for r in result.admitted]
        if dry_run:
            session.rollback()
            report.state_after = run.distill_state
            for item in report.admitted:
                item["id"] = None
            return report
        run.distill_state, run.distilled_at = "done", utcnow()
        report.state_after = "done"
        session.commit()
    log.info("distilled run %s: %d admitted, %d refused", run_id, len(report.admitted), len(report.refused))
    return report


def distill_runs(store: Store, settings: Settings, *, agent: str | None = None, run_id: int | None = None,
                 distiller: str = "heuristic", client: anthropic.Anthropic | None = None,
                 dry_run: bool = False, limit: int | None = None,
                 on_report: Callable[[RunReport], None] | None = None) -> list[RunReport]:
    """Distill the queued runs (optionally of one agent; the newest ``limit`` of them) or one given
    run. One process distills at a time (two would admit the same candidates twice):
    :class:`~warden.store.locks.LockBusy` otherwise; a dry run writes nothing and needs no lock.
    ``on_report`` is told each run's report as it is stored (a night counts what a kill cuts short)."""
    from contextlib import nullcontext

    from warden.store.locks import exclusive

    check_distiller(distiller)
    with nullcontext() if dry_run else exclusive(store, ADMISSION_LOCK, ADMISSION_BUSY):
        if run_id is not None:
            run_ids = [_given_run(store, run_id, agent)]
        else:
            from warden.distill.trigger import sweep

            with store.session() as session:  # settle runs ingested before their priors were stored
                sweep(session, settings, [agent] if agent else None)
                session.flush()
                run_ids = list(session.scalars(_newest_first(_queue(agent))))  # the sweep's included
                if limit is not None and len(run_ids) > limit:  # the newest: today's habits, not last year's
                    log.info("distilling the newest %d of %d queued runs; the rest stay queued", limit, len(run_ids))
                    run_ids = run_ids[:limit]
                if dry_run:  # nothing written
                    session.rollback()
        if distiller == "anthropic" and client is None and run_ids:
            client = make_client(settings)
        reports: list[RunReport] = []
        would_admit: dict[str, list[str]] = {}  # a dry run's admissions so far, by agent (none is stored)
        failures = 0
        for rid in run_ids:
            if failures >= MAX_CONSECUTIVE_FAILURES:  # the API is down: the rest stay queued
                log.warning("model distiller: %d calls in a row failed; %d run(s) left queued",
                            failures, len(run_ids) - len(reports))
                break
            report = distill_run(store, settings, rid, distiller=distiller, client=client, dry_run=dry_run,
                                 pending=would_admit)
            if dry_run:
                would_admit.setdefault(report.agent, []).extend(item["body"] for item in report.admitted)
            failures = failures + 1 if report.infra_error else 0
            reports.append(report)
            if on_report is not None:
                on_report(report)
        return reports


def distill_dry_run(paths: list[Path], settings: Settings, *, distiller: str = "heuristic",
                  client: anthropic.Anthropic | None = None) -> list[RunReport]:
    """Read-only: findings and proposals for arbitrary transcript files; never touches the store.

    A file that cannot be parsed or analysed is reported with its error; the others go on."""
    check_distiller(distiller)
    files = transcript_files(paths)
    if distiller == "anthropic" and client is None and files:
        client = make_client(settings)
    prices = PriceTable(settings.pricing) if settings.pricing else DEFAULT_TABLE
    reports: list[RunReport] = []
    for path in files:
        report = RunReport(source_path=str(path))
        try:
            parsed = parse_transcript(path)
            stats = parsed.stats
            if stats.malformed and not stats.lines - stats.blank - stats.malformed - stats.oversized:
                raise UsageError(f"not a Claude Code transcript: none of its {stats.lines:,} line(s) is a JSON record")
            report.run_key = parsed.run_key
            report.agent = ("main" if parsed.agent_id is None
                            else parsed.agent_type or read_meta_sidecar(str(path)) or "subagent")
            report.tool_calls = len(parsed.tool_calls)
            report.weighted_tokens = round(sum(prices.weighted_tokens(model, usage)
                                               for model, usage in parsed.usage_by_model.items()), 1)
            report.findings = detect_waste(parsed)
            bodies, reply = _propose(parsed, report.findings, DistillContext(agent=report.agent or "unknown"),
                                     distiller, settings, client)
            report.proposals = [redact_secrets(b) for b in bodies]
            if reply is not None:
                report.dropped = list(reply.dropped)
                report.model_tokens = reply.tokens
                report.error, report.infra_error = reply.error, bool(reply.error)
            report.refused = [refusal for _, refusal in (screen_body(b, distiller) for b in bodies) if refusal]
        except UsageError as exc:
            report.error = str(exc)
        except Exception as exc:  # a detector bug must not hide every other file's findings
            log.exception("distill dry-run failed on %s", path)
            report.error = f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        reports.append(report)
    return reports
