"""Continuity I/O: load recall candidates from the store, recover, list, show, forget, prune.

Recall goes through the ``checkpoint_terms`` inverted index: only the prompt's own terms are
looked up, so a prompt is scored against 10,000 checkpoints without re-tokenizing them.
:func:`recall_from_store` scores in SQL (integer term weights summed per checkpoint, only the
best rows returned) rather than calling the pure :func:`warden.continuity.recall.score_postings`,
for speed; the two must give the same answer and score, which
``tests/test_continuity_recall.py::test_indexed_recall_agrees_with_the_pure_scorer`` checks.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, literal, or_, select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.continuity.capture import CheckpointData, forgotten_triggers, session_tombstone_key, with_forgotten
from warden.continuity.fence import fence_checkpoint
from warden.continuity.pointer import (POINTER_SCAN_LIMIT, first_of_project, pointer_line, pointer_since,
                                       project_candidates)
from warden.continuity.recall import (RELEVANCE_THRESHOLD, RecallResult, decide, query_terms, required_terms,
                                      term_weights)
from warden.errors import UsageError
from warden.names import stored_project
from warden.store.models import CaptureState, Checkpoint, CheckpointTerm, utcnow

# best candidates fetched by the indexed scorer; the first one is the answer, the rest show ties
TOP_ROWS = 20


@dataclass
class Recovery:
    result: RecallResult
    checkpoint: CheckpointData | None = None
    block: str | None = None  # the fenced text, when matched

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {"status": r.status, "reason": r.reason, "checkpoint_id": r.checkpoint_id,
                "score": round(r.score, 4), "best_score": round(r.best_score, 4),
                "candidates": r.candidates, "prompt_terms": r.prompt_terms, "block": self.block}


def recall_from_store(session: Session, prompt: str, *, exclude_session: str | None, window_days: float,
                      now: datetime | None = None, threshold: float = RELEVANCE_THRESHOLD) -> RecallResult:
    """Indexed recall: pool = checkpoints of other sessions captured within ``window_days``."""
    since = (now or utcnow()) - timedelta(days=window_days)
    terms = query_terms(prompt)
    window = Checkpoint.captured_at >= since
    # two index-only counts instead of one that must visit every row for its session id
    pool_size = session.scalar(select(func.count()).select_from(Checkpoint).where(window)) or 0
    if exclude_session and pool_size:
        pool_size -= session.scalar(select(func.count()).select_from(Checkpoint)
                                    .where(Checkpoint.session_id == exclude_session, window)) or 0
    scores: dict[int, float] = {}
    recency: dict[int, datetime] = {}
    if terms and pool_size:
        # Both queries are answered from the covering index (term, captured_at, checkpoint_id,
        # session_id) alone. The weighted sum runs in SQL over integer weights (exact, like the
        # pure scorer's), so only the best candidates come back instead of every posting.
        t = CheckpointTerm.__table__.c
        where = [t.term.in_(terms), t.captured_at >= since]
        if exclude_session:
            where.append(t.session_id != exclude_session)
        doc_freq = {term: n for term, n in session.execute(
            select(t.term, func.count()).where(*where).group_by(t.term))}
        weights = term_weights(terms, pool_size=pool_size, doc_freq=doc_freq)
        total = sum(weights.values())
        mass = func.sum(case(*((t.term == term, literal(w)) for term, w in weights.items()), else_=literal(0)))
        newest = func.max(t.captured_at)
        could_match = (select(t.checkpoint_id)
                       .where(t.term.in_(sorted(required_terms(weights, threshold))), *where[1:]).scalar_subquery())
        top = session.execute(select(t.checkpoint_id, mass.label("mass"), newest.label("newest"))
                              .where(*where, t.checkpoint_id.in_(could_match)).group_by(t.checkpoint_id)
                              .order_by(mass.desc(), newest.desc(), t.checkpoint_id.desc()).limit(TOP_ROWS))
        for cid, held, when in top:
            scores[cid] = int(held) / total
            recency[cid] = when if isinstance(when, datetime) else datetime.fromisoformat(str(when))
    return decide(prompt_terms=len(terms), pool_size=pool_size, scores=scores, recency=recency, threshold=threshold)


def project_dir(cwd: str | None) -> str | None:
    """A user's ``--cwd`` or ``--project`` as the absolute, normalised directory checkpoints
    record: '~/shop', 'shop/..', 'app/' and '/w/shop/../billing' would otherwise scope to the
    wrong project or to none; a secret in it redacted, as capture stores the project
    (:func:`~warden.names.stored_project`: a path without one is unchanged). Blank
    ("$PWD" a just-started session may not have) is no project."""
    if cwd is None or not cwd.strip():
        return None
    return stored_project(os.path.abspath(os.path.expanduser(cwd)))


def recover(session: Session, settings: Settings, *, prompt: str, session_id: str | None, cwd: str | None,
            now: datetime | None = None) -> Recovery:
    """Recall for a prompt and fence the winner for the current project (cwd, as :func:`project_dir`
    reads it)."""
    cwd = project_dir(cwd)
    result = recall_from_store(session, prompt, exclude_session=session_id,
                               window_days=settings.recall_window_days, now=now)
    if not result.matched:
        return Recovery(result)
    row = session.get(Checkpoint, result.checkpoint_id)
    data = CheckpointData.from_row(row)
    return Recovery(result, data, fence_checkpoint(data, current_project=cwd or None))


def session_start_pointer(store_session: Session, cwd: str | None, session_id: str | None,
                          now: datetime | None = None, window_days: float = 7.0) -> str | None:
    """One line (a pointer, never checkpoint content) when another session of this project left a
    recent checkpoint; None otherwise. One indexed query: well inside the hook's 2 s budget (the
    hook itself goes through :func:`warden.continuity.pointer.session_start_hook_line`)."""
    candidates = project_candidates(cwd) if cwd else []
    if not candidates:
        return None
    now = now or utcnow()
    conditions = [Checkpoint.captured_at >= pointer_since(now, window_days), Checkpoint.active_task != "",
                  Checkpoint.project.in_(candidates)]
    if session_id:
        conditions.append(Checkpoint.session_id != session_id)
    rows = store_session.execute(
        select(Checkpoint.id, Checkpoint.captured_at, Checkpoint.project).where(*conditions)
        .order_by(Checkpoint.captured_at.desc(), Checkpoint.id.desc()).limit(POINTER_SCAN_LIMIT)).all()
    found = first_of_project(rows, cwd)
    return pointer_line(found[0], found[1], now) if found else None


# ---------------------------------------------------------------- operator surface


def list_checkpoints(session: Session, *, session_id: str | None = None, project: str | None = None,
                     limit: int = 50) -> list[Checkpoint]:
    query = select(Checkpoint).order_by(Checkpoint.captured_at.desc(), Checkpoint.id.desc()).limit(limit)
    if session_id:
        query = query.where(Checkpoint.session_id == session_id)
    project = project_dir(project)
    if project:  # the directory or one inside it; case counts
        root = project.rstrip("/") or "/"
        prefix = root.rstrip("/") + "/"
        query = query.where(or_(Checkpoint.project == root,
                                func.substr(Checkpoint.project, 1, len(prefix)) == prefix))
    return list(session.scalars(query))


def show(session: Session, checkpoint_id: int, cwd: str | None) -> tuple[CheckpointData, str]:
    """A checkpoint and its text fenced for the current project (cwd, as :func:`project_dir` reads it)."""
    data = CheckpointData.from_row(get_checkpoint(session, checkpoint_id))
    return data, fence_checkpoint(data, current_project=project_dir(cwd))


def get_checkpoint(session: Session, checkpoint_id: int) -> Checkpoint:
    row = session.get(Checkpoint, checkpoint_id)
    if row is None:
        raise UsageError(f"no checkpoint with id {checkpoint_id}")
    return row


def _delete_ids(session: Session, ids: list[int]) -> int:
    if not ids:
        return 0
    for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
        chunk = ids[start:start + 500]
        # explicit: SQLite enforces ON DELETE CASCADE only with foreign_keys=ON
        session.execute(delete(CheckpointTerm).where(CheckpointTerm.checkpoint_id.in_(chunk)))
        session.execute(delete(Checkpoint).where(Checkpoint.id.in_(chunk)))
    return len(ids)


def _remember_forgotten(session: Session, run_key: str, triggers: str | set[str]) -> None:  # "all" or triggers
    """A tombstone in the run's capture state: what was forgotten stays forgotten, even when
    its transcript is rewritten and parsed again from the start."""
    row = session.get(CaptureState, run_key)
    if row is None:
        row = CaptureState(run_key=run_key, state={})
        session.add(row)
    row.state = with_forgotten(row.state, triggers)


def resolve_session_id(session: Session, given: str) -> str:
    """The session ``given`` names: its full id, or a prefix of exactly one known session's id
    (``checkpoints list`` shows ids cut to 12 characters, "…" included). A name that matches no
    checkpoint and no collected run is a usage error, never a silent "0 forgotten"."""
    from warden.store.models import SessionRun

    text = given.strip().rstrip("…")
    if not text:
        raise UsageError("--session is empty: give a session id (`warden checkpoints list` shows them)")
    matches: set[str] = set()
    for column in (Checkpoint.session_id, SessionRun.session_id):
        if session.scalar(select(column).where(column == text).limit(1)) is not None:
            return text
        matches |= set(session.scalars(select(column).where(column.startswith(text, autoescape=True))
                                       .distinct().limit(2)))
    if len(matches) == 1:
        return matches.pop()
    if matches:
        raise UsageError(f"--session {given!r} is the start of several sessions' ids: give more of it")
    raise UsageError(f"--session {given!r}: no checkpoint or collected run of such a session")


def forget(session: Session, *, checkpoint_ids: list[int] | None = None, session_id: str | None = None) -> int:
    """Delete checkpoints by id or every checkpoint of a session (including any it captures
    later); returns how many went."""
    from warden.store.models import SessionRun

    if not checkpoint_ids and not session_id:
        raise UsageError("say which checkpoints to forget: ids or --session")
    ids: list[int] = []
    if checkpoint_ids:
        found = {row.id: row for row in session.execute(
            select(Checkpoint.id, Checkpoint.run_key, Checkpoint.trigger).where(Checkpoint.id.in_(checkpoint_ids)))}
        missing = sorted(set(checkpoint_ids) - set(found))
        if missing:
            raise UsageError(f"no checkpoint with id {', '.join(map(str, missing))}")
        ids += sorted(found)
        by_run: dict[str, set[str]] = {}
        for row in found.values():
            by_run.setdefault(row.run_key, set()).add(row.trigger)
        for run_key, triggers in by_run.items():
            _remember_forgotten(session, run_key, triggers)
    if session_id:
        session_id = resolve_session_id(session, session_id)
        ids += list(session.scalars(select(Checkpoint.id).where(Checkpoint.session_id == session_id)))
        run_keys = set(session.scalars(select(Checkpoint.run_key).where(Checkpoint.session_id == session_id)))
        run_keys |= set(session.scalars(select(SessionRun.run_key).where(SessionRun.session_id == session_id)))
        for run_key in sorted(run_keys):
            _remember_forgotten(session, run_key, "all")
        _remember_forgotten(session, session_tombstone_key(session_id), "all")  # and runs collected later
    return _delete_ids(session, sorted(set(ids)))


@dataclass
class PruneResult:
    by_age: int
    by_count: int
    remaining: int


def prune(session: Session, *, max_age_days: float, keep: int, now: datetime | None = None) -> PruneResult:
    """Retention: drop checkpoints captured more than ``max_age_days`` ago, then all but the newest
    ``keep``. The store never grows without bound."""
    if math.isnan(max_age_days) or max_age_days < 0 or keep < 0:
        raise UsageError("--older-than and --keep must be numbers ≥ 0")
    cutoff = _age_cutoff(max_age_days, now)
    old = list(session.scalars(select(Checkpoint.id).where(Checkpoint.captured_at < cutoff)))
    by_age = _delete_ids(session, old)
    by_count = _delete_beyond(session, keep)
    # capture states of runs untouched for as long: their sessions are over (a state that
    # remembers what a user forgot stays)
    stale = [row.run_key for row in session.execute(select(CaptureState.run_key, CaptureState.state)
                                                     .where(CaptureState.updated_at < cutoff))
             if not forgotten_triggers(row.state)]
    for start in range(0, len(stale), 500):
        session.execute(delete(CaptureState).where(CaptureState.run_key.in_(stale[start:start + 500])))
    remaining = session.scalar(select(func.count()).select_from(Checkpoint)) or 0
    return PruneResult(by_age, by_count, remaining)


def _delete_beyond(session: Session, keep: int) -> int:
    """Delete all but the newest ``keep`` checkpoints; how many went."""
    surplus = list(session.scalars(select(Checkpoint.id)
                                   .order_by(Checkpoint.captured_at.desc(), Checkpoint.id.desc()).offset(keep)))
    return _delete_ids(session, surplus)


def trim_to_keep(session: Session, settings: Settings) -> int:
    """Retention's count limit applied at once: a first collect of a long history captures in file
    order, so checkpoints newer than the batch's horizon pile up past ``checkpoint_keep`` — the
    surplus (and the free pages its later deletion leaves) is not kept for the nightly prune."""
    beyond = session.scalar(select(Checkpoint.id).order_by(Checkpoint.captured_at.desc(), Checkpoint.id.desc())
                            .offset(settings.checkpoint_keep).limit(1))  # an index walk, not a count of all
    return 0 if beyond is None else _delete_beyond(session, settings.checkpoint_keep)


def _age_cutoff(max_age_days: float, now: datetime | None) -> datetime:
    try:
        return (now or utcnow()) - timedelta(days=max_age_days)
    except OverflowError:  # older than the calendar (e.g. "inf"): nothing is too old
        return datetime.min


def retention_horizon(session: Session, settings: Settings, now: datetime | None = None) -> datetime:
    """The capture time before which retention (:func:`prune_with_settings`) would delete a new
    checkpoint: older than the age limit, or older than the newest ``checkpoint_keep``. The
    collector stores nothing older, so a transcript read again (a parser upgrade, a rewritten
    file) does not bring back checkpoints retention removed."""
    horizon = _age_cutoff(settings.checkpoint_max_age_days, now)
    if settings.checkpoint_keep <= 0:
        return datetime.max
    last_kept = session.scalar(select(Checkpoint.captured_at)
                               .order_by(Checkpoint.captured_at.desc(), Checkpoint.id.desc())
                               .offset(settings.checkpoint_keep - 1).limit(1))
    if last_kept is None:
        return horizon
    # a checkpoint as old as the last one kept is not stored either: among equal times the next
    # prune would keep the newer row, and a re-read one would displace the checkpoint it kept
    return max(horizon, last_kept + timedelta(microseconds=1))


def prune_with_settings(session: Session, settings: Settings, now: datetime | None = None) -> PruneResult:
    """Retention per ``checkpoint_max_age_days`` / ``checkpoint_keep`` (the nightly job's call)."""
    return prune(session, max_age_days=settings.checkpoint_max_age_days, keep=settings.checkpoint_keep, now=now)


def reindex(session: Session, batch: int = 500) -> int:
    """Rebuild the recall index of every checkpoint (after a tokenizer change), each redacted
    again first (after a redaction change: a checkpoint whose transcript is gone is never read
    again); returns how many."""
    from warden.continuity.capture import index_terms, redact_stored

    session.execute(delete(CheckpointTerm))
    ids = list(session.scalars(select(Checkpoint.id).order_by(Checkpoint.id)))
    for start in range(0, len(ids), batch):
        rows = list(session.scalars(select(Checkpoint).where(Checkpoint.id.in_(ids[start:start + batch]))))
        for row in rows:
            redact_stored(row)
        session.flush()
        index_terms(session, rows)
    return len(ids)


def checkpoint_summary(row: Checkpoint) -> dict[str, Any]:
    """A listing row (untrusted text left raw here: renderers sanitize)."""
    return {"id": row.id, "session_id": row.session_id, "agent": row.agent, "agent_id": row.agent_id,
            "project": row.project, "projects": row.projects, "trigger": row.trigger,
            "fill": row.fill, "quality": row.quality, "captured_at": row.captured_at,
            "active_task": row.active_task}
