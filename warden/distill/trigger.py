"""When a session run is worth distilling (issue 4 §1).

A run is queued when its cost-weighted tokens exceed the agent's rolling p75 (nearest-rank) over
its last :data:`WINDOW` completed real-work runs, given at least :data:`MIN_PRIORS` of them.
The collector calls :func:`queue_if_expensive` after every ingest (hooks fire every turn), so the
decision is idempotent: a run is queued at most once, and distillation itself never runs here —
``warden distill`` / the nightly job works the queue.

``main`` sessions are distilled only when the agent ``main`` has a bench suite
(``golden_tasks/main/``): a candidate that cannot be measured would never leave the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.percentiles import nearest_rank
from warden.store.models import SessionRun

WINDOW = 50
MIN_PRIORS = 5
PERCENTILE = 75.0


@dataclass(frozen=True)
class TriggerDecision:
    expensive: bool
    reason: str
    threshold: float | None = None
    priors: int = 0


def decide(cost: float, prior_costs: list[float]) -> TriggerDecision:
    """Pure: is ``cost`` above the p75 of the priors (most recent first, at most WINDOW used)?"""
    window = prior_costs[:WINDOW]
    if len(window) < MIN_PRIORS:
        return TriggerDecision(False, f"only {len(window)} prior completed run(s), need {MIN_PRIORS}",
                               None, len(window))
    threshold = nearest_rank(window, PERCENTILE)
    if cost > threshold:
        return TriggerDecision(True, f"{cost:.0f} > p75 {threshold:.0f} of {len(window)} runs",
                               threshold, len(window))
    return TriggerDecision(False, f"{cost:.0f} <= p75 {threshold:.0f} of {len(window)} runs",
                           threshold, len(window))


def has_bench_suite(settings: Settings, agent: str) -> bool:
    return (settings.golden_dir / agent).is_dir()


def prior_costs(session: Session, run_row: SessionRun, window: int = WINDOW) -> list[float]:
    """Cost-weighted tokens of the agent's last ``window`` completed real-work runs before this one
    (:func:`recent_costs` up to its start, itself left out)."""
    return recent_costs(session, run_row.agent, until=run_row.started_at, exclude_id=run_row.id, window=window)


def recent_costs(session: Session, agent: str, *, until: datetime | None = None, exclude_id: int | None = None,
                 window: int = WINDOW) -> list[float]:
    """Cost-weighted tokens of the agent's last ``window`` completed real-work runs started by
    ``until`` (None: all), then undated ones.

    "Real work" = session runs (bench replays live in their own table); runs whose output counts
    are placeholders are untrusted and left out. Most recent first, by start time, then id."""
    runs = (select(SessionRun.weighted_tokens)
            .where(SessionRun.agent == agent, SessionRun.completed.is_(True),
                   SessionRun.placeholder_output.is_(False)))
    if exclude_id is not None:
        runs = runs.where(SessionRun.id != exclude_id)
    # Dated runs, then undated ones — two queries, so each is a range of the (agent, started_at,
    # id) index read from its top: a run early in a long history does not walk the later ones.
    dated = runs.where(SessionRun.started_at.is_not(None))
    if until is not None:
        dated = dated.where(SessionRun.started_at <= until)
    costs = list(session.scalars(dated.order_by(SessionRun.started_at.desc(), SessionRun.id.desc()).limit(window)))
    if len(costs) < window:
        costs += session.scalars(runs.where(SessionRun.started_at.is_(None))
                                 .order_by(SessionRun.id.desc()).limit(window - len(costs)))
    return [float(c or 0.0) for c in costs]


def current_threshold(session: Session, agent: str) -> TriggerDecision:
    """The p75 a new run of ``agent`` is compared with now (``threshold`` None: too few priors)."""
    return decide(0.0, recent_costs(session, agent))


def evaluate(session: Session, run_row: SessionRun, settings: Settings) -> TriggerDecision:
    """Whether ``run_row`` should be distilled (no writes)."""
    if run_row.distill_state is not None:
        return TriggerDecision(False, f"already {run_row.distill_state}")
    if run_row.placeholder_output:
        return TriggerDecision(False, "placeholder output counts: cost untrusted")
    if run_row.agent == "main" and not has_bench_suite(settings, "main"):
        return TriggerDecision(False, "main session without a bench suite")
    return decide(float(run_row.weighted_tokens or 0.0), prior_costs(session, run_row))


def queue_if_expensive(session: Session, run_row: SessionRun, settings: Settings) -> bool:
    """Queue ``run_row`` for distillation when it is expensive; True if it was queued now.

    Cheap to call on every hook invocation: one indexed query, at most one column update, and a
    run already queued/done/skipped is never touched again."""
    decision = evaluate(session, run_row, settings)
    if decision.expensive:
        run_row.distill_state = "queued"
    return decision.expensive


def sweep(session: Session, settings: Settings, agents: list[str] | None = None) -> int:
    """Re-evaluate every run the trigger has not settled yet, with the full history collected.

    Hooks and backfills ingest runs in arbitrary order, so a run may have been looked at before
    its priors were stored. After a whole collect (the nightly job) the history is complete: an
    expensive run is queued, and a cheap one with enough priors is marked ``skipped`` so it is
    never looked at again. Returns how many runs were queued."""
    query = select(SessionRun).where(SessionRun.distill_state.is_(None), SessionRun.completed.is_(True))
    if agents:
        query = query.where(SessionRun.agent.in_(agents))
    queued = 0
    for run_row in session.scalars(query.order_by(SessionRun.started_at.asc().nulls_first(), SessionRun.id)):
        decision = evaluate(session, run_row, settings)
        if decision.expensive:
            run_row.distill_state = "queued"
            queued += 1
        elif decision.priors >= MIN_PRIORS or decision.reason.startswith(("placeholder", "main session")):
            run_row.distill_state = "skipped"
    return queued
