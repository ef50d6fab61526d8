"""``warden nightly``: collect → distill → select every agent within the budget → compile.

Every stage is idempotent, so an interrupted night is finished by running it again: collection
resumes from stored offsets, distillation only takes queued runs, and the selector reuses the
bench runs already stored for the same questions (same seeds, same memory bytes) — finished runs
and finished decisions are never repeated. A ``NightlyRun`` row records each night's stage and
summary; an unfinished one is resumed (same row) by the next invocation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from warden.config import Settings
from warden.errors import UsageError
from warden.select.compile import change_since, memory_start, memory_state
from warden.select.decision import ADMISSION
from warden.select.selector import DecisionSummary, SelectReport, known_agents, select_agents
from warden.store.db import Store
from warden.store.locks import LockBusy
from warden.store.models import BenchRun, NightlyRun, Receipt, RulesetVersion, utcnow

# What the night's collect and distill stages did, kept in its row as they go (a collect when it
# ends, a distillation run by run) so that a resumed night reports the whole night.
NIGHT_COUNTS = ("collected_runs", "distilled_runs", "candidates_added", "distill_model_tokens")

@dataclass
class NightlySummary:
    night_id: int
    resumed: bool
    collected_runs: int = 0  # the whole night's, as the counts below, an interrupted earlier part included
    distilled_runs: int = 0
    candidates_added: int = 0
    distill_model_tokens: int = 0  # what the model distiller's calls used (not bench tokens)
    distill_left_queued: int = 0  # runs past the night's distill_max_runs, for a later night
    selects: list[SelectReport] = field(default_factory=list)
    aborted: str | None = None
    tokens_spent: float = 0.0  # the whole night's, an interrupted earlier part included
    spent_before_resume: float = 0.0
    busy_agents: list[str] = field(default_factory=list)  # skipped: another process was deciding them
    unusable_agents: dict[str, str] = field(default_factory=dict)  # skipped: a broken suite (why)
    earlier: list[dict[str, Any]] = field(default_factory=list)  # reports of agents decided before a resume

    @property
    def exit_code(self) -> int:
        """1 on an infrastructure abort; 2 when an agent's golden suite (or the fixture) could not
        be used, after every other agent was done; 0 otherwise."""
        return 1 if self.aborted else (2 if self.unusable_agents else 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "night_id": self.night_id, "resumed": self.resumed, "collected_runs": self.collected_runs,
            "distilled_runs": self.distilled_runs, "candidates_added": self.candidates_added,
            "distill_model_tokens": self.distill_model_tokens, "distill_left_queued": self.distill_left_queued,
            "tokens_spent": round(self.tokens_spent, 1),
            "spent_before_resume": round(self.spent_before_resume, 1), "aborted": self.aborted,
            "busy_agents": list(self.busy_agents), "unusable_agents": dict(self.unusable_agents),
            "agents": [*self.earlier, *(select_report_json(r) for r in self.selects)],
        }


def select_report_json(r: SelectReport) -> dict[str, Any]:
    memory = r.memory
    return {
        "agent": r.agent, "backend": r.backend, "model": r.model, "tokens_spent": round(r.tokens_spent, 1),
        "raw_tokens_spent": r.raw_tokens_spent, "runs_made": r.runs_made, "runs_reused": r.runs_reused,
        "aborted": r.aborted, "skipped": r.skipped, **({"since_resume": True} if r.since_resume else {}),
        "decisions": [{"rule_id": d.rule_id, "body": d.body, "kind": d.kind, "verdict": d.verdict,
                       "state_before": d.state_before, "state_after": d.state_after,
                       # unrounded, as the receipt stores them: a rounded copy rendered again
                       # could differ from the receipt in the last digit
                       "estimate_tokens": d.estimate_tokens, "interval_tokens": list(d.interval_tokens),
                       "margin_tokens": d.margin_tokens, "tokens_spent": d.tokens_spent,
                       "receipt_id": d.receipt_id, "memory_version": d.memory_version,
                       **({"decided_before_resume": True} if d.before_resume else {})} for d in r.decisions],
        "memory": None if memory is None else {
            "path": str(memory.path), "version": memory.version, "changed": memory.changed, "created": memory.created,
            "drifted": memory.drifted, "drift": memory.drift, "rule_ids": memory.rule_ids, "added": memory.added, "removed": memory.removed},
    }


def resolve_agents(settings: Settings, agents: Sequence[str] | None) -> list[str]:
    available = known_agents(settings)
    if not agents:
        return available
    unknown = [a for a in agents if a not in available]
    if unknown:
        raise UsageError(f"unknown agent {unknown[0]!r}: golden suites exist for {', '.join(available) or 'none'}")
    return list(dict.fromkeys(agents))


def _night(store: Store, settings: Settings, agents: list[str], budget: int | None) -> tuple[int, bool, int | None, float]:
    """(night id, resumed, the night's budget, bench tokens it already spent). A resumed night
    keeps its budget unless a new one is given, and is charged for what its interrupted part
    spent: every bench run stored since it started (a manual run meanwhile counts too, which
    errs on the side of spending less)."""
    with store.session() as session:
        open_night = session.scalars(select(NightlyRun).where(NightlyRun.status != "done")
                                     .order_by(NightlyRun.id.desc()).limit(1)).first()
        if open_night is not None:
            open_night.status = "running"
            if budget is not None:
                open_night.budget_tokens = budget
            spent = session.scalar(select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0))
                                   .where(BenchRun.created_at >= open_night.started_at))
            return open_night.id, True, open_night.budget_tokens, float(spent or 0.0)
        # what each agent's MEMORY.md held when the night started: a resumed night reports its change since
        start = {agent: memory_start(session, settings, agent) for agent in agents}
        night = NightlyRun(status="running", stage="collect", agents=agents, budget_tokens=budget,
                           summary={"memory_start": start, "night_counts": dict.fromkeys(NIGHT_COUNTS, 0)})
        session.add(night)
        session.flush()
        return night.id, False, budget, 0.0


def _night_counts(store: Store, night_id: int) -> dict[str, int]:
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        counts = ((night.summary or {}) if night is not None else {}).get("night_counts") or {}
        return {key: int(counts.get(key, 0)) for key in NIGHT_COUNTS}


def _add_counts(store: Store, night_id: int, **added: int) -> None:
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        assert night is not None
        summary = dict(night.summary or {})
        counts = dict(summary.get("night_counts") or {})
        for key, value in added.items():
            counts[key] = int(counts.get(key, 0)) + value
        summary["night_counts"] = counts
        night.summary = summary


def _whole_night(store: Store, night_id: int, started_at: datetime, report: SelectReport) -> None:
    """A resumed night's report of an agent covers the whole night: the decisions its interrupted
    part made (their receipts, written since the night started, marked ``before_resume``) come
    first, and MEMORY.md's change is counted from what the file held when the night started.
    What it spent and the runs it made are the resumed part's (``since_resume``): the runs of a
    decision the kill cut off are reused at no cost, and the night's total counts them."""
    report.since_resume = True
    with store.session() as session:
        own = {d.receipt_id for d in report.decisions}
        earlier: list[DecisionSummary] = []
        for r in session.scalars(select(Receipt).where(Receipt.agent == report.agent, Receipt.created_at >= started_at)
                                 .order_by(Receipt.id)):
            if r.id in own:
                continue
            before = session.scalar(select(Receipt.state_after).where(Receipt.rule_id == r.rule_id, Receipt.id < r.id)
                                    .order_by(Receipt.id.desc()).limit(1))
            earlier.append(DecisionSummary(
                r.rule_id, r.rule.body, r.kind, r.verdict, before or ("candidate" if r.kind == ADMISSION else "unknown"),
                r.state_after, r.estimate, (r.ci_low, r.ci_high), r.margin, r.tokens_spent, r.id, r.ruleset_version,
                before_resume=True))
        report.decisions[:0] = earlier
        night = session.get(NightlyRun, night_id)
        start = ((night.summary or {}) if night is not None else {}).get("memory_start", {}).get(report.agent)
        if start is None:  # an agent the night did not start with (another --agents): its last compile before it
            start = memory_state(session.scalars(
                select(RulesetVersion).where(RulesetVersion.agent == report.agent, RulesetVersion.created_at < started_at)
                .order_by(RulesetVersion.version.desc()).limit(1)).first())
    if report.memory is not None:
        change_since(report.memory, start)


def _selected_agents(store: Store, night_id: int) -> dict[str, dict[str, Any] | None]:
    """The agents this night already decided, with their reports (None: a night recorded before
    reports were kept)."""
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        summary = (night.summary or {}) if night is not None else {}
        reports = summary.get("reports", {})
        return {agent: reports.get(agent) for agent in summary.get("selected_agents", [])}


def _mark_selected(store: Store, night_id: int, report: SelectReport) -> None:
    """Recorded as each agent's select ends, so a killed night resumes after it and still reports it."""
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        assert night is not None
        summary = dict(night.summary or {})
        summary["selected_agents"] = sorted(set(summary.get("selected_agents", [])) | {report.agent})
        # shown as decided before the resume when the night is resumed: the agent and each decision
        stored = select_report_json(report)
        stored["decisions"] = [{**d, "decided_before_resume": True} for d in stored["decisions"]]
        summary["reports"] = {**summary.get("reports", {}), report.agent: {**stored, "decided_before_resume": True}}
        night.summary = summary


def _set_stage(store: Store, night_id: int, stage: str, **updates: Any) -> None:
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        assert night is not None
        night.stage = stage
        for key, value in updates.items():
            setattr(night, key, value)


def _check_usage(settings: Settings, backend: str | None, distiller: str | None) -> None:
    """Raise UsageError for a backend or distiller that cannot run here (unknown, no API key,
    no ``claude`` CLI), so a night never starts to fail at its select stage."""
    from warden.bench.agents import get_backend
    from warden.distill.service import check_distiller

    chosen = check_distiller(distiller or settings.distiller)
    if chosen == "anthropic":
        from warden.distill.model_distiller import make_client

        make_client(settings)
    get_backend(backend or settings.backend, settings)


def run_nightly(store: Store, settings: Settings, *, agents: Sequence[str] | None = None,
                budget_tokens: int | None = None, backend: str | None = None, model: str | None = None,
                concurrency: int | None = None, distiller: str | None = None, collect: bool = True,
                log: Callable[[str], None] | None = None, progress: Any = None,
                base_seed: int = 0) -> NightlySummary:
    from warden.store.locks import exclusive

    chosen = resolve_agents(settings, agents)
    _check_usage(settings, backend, distiller)  # before the night starts: bad usage does no work
    # One night at a time: a second nightly would take the first's open night for one to resume.
    with exclusive(store, "nightly", "another `warden nightly` is running; run again when it ends"):
        return _run_night(store, settings, chosen, budget_tokens=budget_tokens, backend=backend, model=model,
                          concurrency=concurrency, distiller=distiller, collect=collect,
                          say=log or (lambda _m: None), progress=progress, base_seed=base_seed)


def _run_night(store: Store, settings: Settings, chosen: list[str], *, budget_tokens: int | None,
               backend: str | None, model: str | None, concurrency: int | None, distiller: str | None,
               collect: bool, say: Callable[[str], None], progress: Any, base_seed: int) -> NightlySummary:
    from warden.distill.service import distill_runs, queued_count
    from warden.ingest.collector import collect_paths

    night_id, resumed, budget_tokens, spent_before = _night(store, settings, chosen, budget_tokens)
    with store.session() as session:
        night_row = session.get(NightlyRun, night_id)
        assert night_row is not None
        started_at = night_row.started_at  # a resumed night re-audits as the whole night would have
    summary = NightlySummary(night_id, resumed, tokens_spent=spent_before, spent_before_resume=spent_before,
                             **_night_counts(store, night_id))
    if resumed:
        say(f"resuming unfinished night #{night_id} ({spent_before:,.0f} bench tokens spent before)")
    if collect:
        if settings.claude_home.is_dir():
            say("collect: new transcripts")
            collected = collect_paths(settings, store=store).runs_updated
            summary.collected_runs += collected
            _add_counts(store, night_id, collected_runs=collected)
        else:  # a CI runner deciding a team database's rules has none (`warden collect` refuses this)
            say(f"collect: no Claude Code directory at {settings.claude_home} (CLAUDE_CONFIG_DIR), nothing collected")
        from warden.continuity.service import prune_with_settings  # checkpoint retention (age, count)

        with store.session() as session:
            pruned = prune_with_settings(session, settings)
        say(f"checkpoints: pruned {pruned.by_age + pruned.by_count}, {pruned.remaining} kept")
    _set_stage(store, night_id, "distill")
    say("distill: queued expensive runs")
    def distilled(r: Any) -> None:  # counted as each run is stored, so a kill keeps what was done
        added = {"distilled_runs": 0 if r.infra_error else 1,  # a failed call left its run queued
                 "candidates_added": len(r.admitted), "distill_model_tokens": r.model_tokens}
        for key, value in added.items():
            setattr(summary, key, getattr(summary, key) + value)
        _add_counts(store, night_id, **added)

    try:
        distill_runs(store, settings, distiller=distiller or settings.distiller, limit=settings.distill_max_runs,
                     on_report=distilled)
    except LockBusy as exc:  # the queue stays queued for the next night
        say(f"distill: skipped, {exc}")
    summary.distill_left_queued = queued_count(store)
    _set_stage(store, night_id, "select")
    if not chosen:
        say(f"select: nothing to select, no golden suites under {settings.golden_dir}")
    remaining = None if budget_tokens is None else float(budget_tokens) - spent_before
    finished = _selected_agents(store, night_id)  # a resumed night does not decide them twice
    for agent in chosen:
        if agent in finished:
            say(f"select {agent}: done earlier this night")
            if finished[agent] is not None:
                summary.earlier.append(finished[agent])
    turns = select_agents(store, settings, [a for a in chosen if a not in finished], budget_tokens=remaining,
                          announce=lambda agent: say(f"select: {agent}"), backend=backend, model=model,
                          concurrency=concurrency, progress=progress, base_seed=base_seed, log=say,
                          since=started_at)
    for turn in turns:
        if turn.report is None:  # busy: the next night takes it up; unusable: the others go on
            say(f"select {turn.agent}: skipped, {turn.reason}")
            if turn.skipped == "busy":
                summary.busy_agents.append(turn.agent)
            elif turn.skipped == "unusable":
                summary.unusable_agents[turn.agent] = turn.reason
            continue
        report = turn.report
        if resumed:
            _whole_night(store, night_id, started_at, report)
        summary.selects.append(report)
        summary.tokens_spent += report.tokens_spent
        if report.aborted:
            summary.aborted = f"{turn.agent}: {report.aborted}"
            break
        _mark_selected(store, night_id, report)
    status = "aborted" if summary.aborted else "done"
    with store.session() as session:
        night = session.get(NightlyRun, night_id)
        assert night is not None
        night.status, night.stage = status, ("select" if summary.aborted else "done")
        kept = night.summary or {}
        night.summary = {**summary.to_json(), "selected_agents": kept.get("selected_agents", []),
                         "reports": kept.get("reports", {}),
                         **{key: kept[key] for key in ("memory_start", "night_counts") if key in kept}}
        night.finished_at = utcnow()
    return summary
