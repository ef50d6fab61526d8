"""Selector orchestration: decide pending candidates and re-audit active rules, one agent at a time.

For each decision it asks the decision core (``select/decision.py``) to drive paired rounds
through a suite runner (``bench/suite_runner.py`` by default), then commits, in ONE transaction,
the rule's new state, an immutable receipt and the recompiled MEMORY.md. An infrastructure abort
writes nothing: no verdict, no receipt, no strike.

State machine (DESIGN.md §3):

* admission: keep → active; refute → evicted (refuted); regression → evicted (regression);
  inconclusive → stays a candidate with its evidence kept, and after
  :data:`MAX_INCONCLUSIVE_NIGHTS` inconclusive decisions → evicted (inconclusive);
* re-audit (two strikes): a pass clears probation; the first miss → probation; a second
  consecutive miss → evicted (refuted); a regression → evicted at once.

A rule's evidence pools across its admission and re-audits: every receipt stores the runs it
rested on, and the next decision about the rule starts from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.errors import UsageError
from warden.select.compile import IN_MEMORY_STATES, CompileResult, change_since, compile_memory, memory_start
from warden.select.decision import (ADMISSION, REAUDIT, DecisionParams, Evidence, InfraAbort,
                                    RuleDecision, Verdict, decide_rule, infra_unpaired_tasks)
from warden.select.memory import MemoryRule, rule_rent
from warden.select.receipts import write_receipt
from warden.select.runner import Config, RunRecord
from warden.store.db import Store
from warden.store.models import BenchJob, BenchPass, BenchRun, Receipt, Rule, utcnow

MAX_INCONCLUSIVE_NIGHTS = 3


@dataclass
class DecisionSummary:
    rule_id: int
    body: str
    kind: str
    verdict: str
    state_before: str
    state_after: str
    estimate_tokens: float
    interval_tokens: tuple[float, float]
    margin_tokens: float
    tokens_spent: float
    receipt_id: int | None
    memory_version: int | None = None
    before_resume: bool = False  # made by an interrupted earlier part of a resumed night


@dataclass(frozen=True)
class Skipped:
    """A decision that did not happen this invocation: why, and what its runs cost meanwhile."""

    reason: str
    tokens_spent: float = 0.0


@dataclass
class SelectReport:
    agent: str
    backend: str
    model: str
    decisions: list[DecisionSummary] = field(default_factory=list)
    tokens_spent: float = 0.0
    raw_tokens_spent: int = 0
    runs_made: int = 0
    runs_reused: int = 0
    aborted: str | None = None  # infrastructure abort message
    skipped: list[str] = field(default_factory=list)  # e.g. "budget spent before rule 7"
    memory: CompileResult | None = None
    since_resume: bool = False  # a resumed night's: its spend and runs are those since the resume



def _memory_set(session: Session, agent: str) -> frozenset[int]:
    return frozenset(session.scalars(select(Rule.id).where(Rule.agent == agent,
                                                           Rule.state.in_(IN_MEMORY_STATES))).all())


def pending_candidates(session: Session, agent: str) -> list[Rule]:
    return list(session.scalars(select(Rule).where(Rule.agent == agent, Rule.state == "candidate")
                                .order_by(Rule.created_at, Rule.id)).all())


def reaudit_target(session: Session, agent: str, since: datetime | None = None) -> Rule | None:
    """The active (or probation), non-protected rule decided longest ago. ``since``: the start of
    the night this select resumes — the night re-audits once, and only a rule decided before it
    (a rule kept earlier that night is not due)."""
    query = select(Rule).where(Rule.agent == agent, Rule.state.in_(("active", "probation")))
    if since is not None:
        if session.scalar(select(Receipt.id).where(Receipt.agent == agent, Receipt.kind == REAUDIT,
                                                   Receipt.created_at >= since).limit(1)) is not None:
            return None
        query = query.where(or_(Rule.decided_at.is_(None), Rule.decided_at < since))
    return session.scalars(query.order_by(Rule.decided_at.is_(None).desc(), Rule.decided_at, Rule.id)
                           .limit(1)).first()


# ---------------------------------------------------------------- evidence persistence


def evidence_to_json(evidence: Evidence) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for side, records in (("ref", evidence.reference), ("rule", evidence.rule)):
        for r in records:
            rows.append([side, r.task_id, r.round_index, round(r.weighted_tokens, 3), r.raw_tokens,
                         bool(r.completed), r.outcome, r.run_id])
    return rows


def evidence_from_json(rows: Sequence[Sequence[Any]], reference: Config, rule: Config) -> Evidence:
    ref: list[RunRecord] = []
    measured: list[RunRecord] = []
    for side, task, rnd, weighted, raw, completed, outcome, run_id in rows:
        record = RunRecord(str(task), reference if side == "ref" else rule, int(rnd), float(weighted),
                           int(raw), bool(completed), str(outcome), run_id, reused=True)
        (ref if side == "ref" else measured).append(record)
    return Evidence(tuple(ref), tuple(measured))


def prior_evidence(session: Session, rule: Rule, reference: Config, measured: Config, *, backend: str,
                   model: str | None = None, suite_hash: str | None = None,
                   fixture_hash: str | None = None) -> Evidence | None:
    """The rule's pooled evidence from its latest receipt measured the same way: same backend and
    (where given) model, golden suite and fixture. Runs of another model measure another agent: a
    re-audit on a new model starts its evidence afresh rather than keep the rule on the old one's."""
    query = select(Receipt).where(Receipt.rule_id == rule.id, Receipt.backend == backend)
    for column, value in ((Receipt.model, model), (Receipt.suite_hash, suite_hash),
                          (Receipt.fixture_hash, fixture_hash)):
        if value:
            query = query.where(column == value)
    last = session.scalars(query.order_by(Receipt.id.desc()).limit(1)).first()
    if last is None or not last.evidence:
        return None
    return evidence_from_json(last.evidence, reference, measured)


def undecided_passes(session: Session, agent: str, rule_id: int) -> list[int]:
    """The select passes made for ``rule_id`` (the bench runner notes the rule on each pass) since
    the rule's last receipt: undecided invocations, a killed one included."""
    from sqlalchemy import func

    from warden.bench.scheduler import pass_note

    last = session.scalar(select(func.max(Receipt.created_at)).where(Receipt.rule_id == rule_id))
    query = select(BenchPass).where(BenchPass.agent == agent, BenchPass.purpose == "select")
    if last is not None:
        query = query.where(BenchPass.created_at >= last)
    return [p.id for p in session.scalars(query) if pass_note(p).get("rule") == rule_id]


def undecided_spend(session: Session, agent: str, rule_id: int) -> float:
    """Weighted tokens of the runs of :func:`undecided_passes`: what undecided invocations spent
    on the rule. They count towards the decision that settles the rule (its runs are reused by it
    at no further cost)."""
    from sqlalchemy import func

    passes = undecided_passes(session, agent, rule_id)
    if not passes:
        return 0.0
    return float(session.scalar(
        select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0))
        .join(BenchJob, BenchJob.bench_run_id == BenchRun.id).where(BenchJob.pass_id.in_(passes))) or 0.0)


def recorded_cost_cv(session: Session, agent: str, backend: str, model: str | None,
                     before: datetime | None = None) -> float:
    """The pooled spread of one run's weighted tokens relative to its mean, within task and
    configuration, over the agent's recorded bench runs on ``backend`` and ``model`` (infra
    errors left out; only those recorded before ``before``, if given); NaN before
    :data:`~warden.select.decision.COST_CV_MIN_DF` degrees of freedom."""
    from warden.select.decision import COST_CV_MIN_DF

    groups: dict[tuple[str, str], list[float]] = {}
    for task, config, weighted in session.execute(
            select(BenchRun.task_id, BenchRun.config_key, BenchRun.weighted_tokens)
            .where(BenchRun.agent == agent, BenchRun.backend == backend, BenchRun.model == model,
                   BenchRun.outcome != "infra_error",
                   *((BenchRun.created_at < before,) if before is not None else ()))):
        groups.setdefault((str(task), str(config)), []).append(float(weighted))
    ss, df = 0.0, 0
    for costs in groups.values():
        mean = sum(costs) / len(costs)
        if len(costs) >= 2 and mean > 0:
            ss += sum((c / mean - 1.0) ** 2 for c in costs)
            df += len(costs) - 1
    return math.sqrt(ss / df) if df >= COST_CV_MIN_DF else math.nan


def over_budget_note(spent: float, budget: float, price_sd: float = 4.0) -> str:
    """The line a select (or a night's) report carries when its spend passed its budget."""
    over = spent - budget
    share = f" ({over / budget:.1%})" if budget > 0 else ""
    return (f"budget: spent {spent:,.0f} weighted tokens, {over:,.0f}{share} over the {budget:,.0f} this select "
            f"had: the last batch of runs cost more than it was priced at (its expected cost + {price_sd:g} standard "
            "deviations), and runs once started always finish; nothing started after it")


# ---------------------------------------------------------------- state transitions


def next_state(rule: Rule, kind: str, verdict: Verdict, inconclusive_count: int) -> tuple[str, str | None, int]:
    """(state, evict_reason, strikes) after a decision. Pure."""
    if verdict is Verdict.REGRESSION:
        return "evicted", "regression", rule.strikes
    if kind == ADMISSION:
        if verdict is Verdict.KEEP:
            return "active", None, 0
        if verdict is Verdict.REFUTE:
            return "evicted", "refuted", 0
        if inconclusive_count >= MAX_INCONCLUSIVE_NIGHTS:
            return "evicted", "inconclusive", 0
        return "candidate", None, 0
    if verdict is Verdict.KEEP:
        return "active", None, 0
    if verdict is Verdict.REFUTE:
        strikes = rule.strikes + 1
        return ("evicted", "refuted", strikes) if strikes >= 2 else ("probation", None, strikes)
    return rule.state, None, rule.strikes  # an inconclusive re-audit is no strike


class Selector:
    def __init__(self, store: Store, settings: Settings, agent: str, runner: Any,
                 *, backend: str, model: str, params: DecisionParams | None = None,
                 log: Callable[[str], None] | None = None,
                 memory_sections: Callable[[Session, str], tuple[list[str], dict[str, str]]] | None = None,
                 tasks: dict[str, float] | None = None, cost_hints: dict[str, float] | None = None) -> None:
        self.store = store
        self.settings = settings
        self.agent = agent
        self.runner = runner
        self.backend = backend
        self.model = model
        self.params = params or DecisionParams.from_settings(settings)
        self.log = log or (lambda _msg: None)
        self.memory_sections = memory_sections
        if tasks is None:  # the bench runner knows its golden suite
            tasks = {t.id: float(t.weight) for t in runner.bench.suite.tasks}
        self.tasks = tasks
        self.memory_drift = ""  # why a compile of this invocation found MEMORY.md drifted
        self._cost_hints: dict[str, float] | None = cost_hints
        self._cost_cv: float | None = None
        self._before: datetime | None = None  # a resumed night's start: prices from what was recorded before it

    def decide(self, rule_id: int, kind: str, budget: float) -> DecisionSummary | Skipped:
        """Decide one rule and commit it; :class:`Skipped` when the invocation's budget (smaller
        than the rule's evidence budget) ran out before a verdict: nothing is written, the rule
        waits, and the runs it made are reused next time."""
        with self.store.session() as session:
            rule = session.get(Rule, rule_id)
            assert rule is not None
            memory = _memory_set(session, self.agent)
            if kind == ADMISSION:
                reference, measured = memory, memory | {rule.id}
            else:
                reference, measured = memory - {rule.id}, memory | {rule.id}
            rent = rule_rent(MemoryRule(rule.id, rule.body, rule.scope))
            if rule.rent_tokens != rent:
                rule.rent_tokens = rent
            prior = prior_evidence(session, rule, reference, measured, backend=self.backend, model=self.model,
                                   suite_hash=getattr(self.runner, "suite_hash", ""),
                                   fixture_hash=getattr(self.runner, "fixture_hash", ""))
            body, state_before, undecided_before = rule.body, rule.state, float(rule.undecided_tokens or 0.0)
        hints = self.cost_hints()
        partial_budget = budget < float(self.settings.evidence_budget_tokens)
        if partial_budget and not hints and prior is None:
            # Nothing prices a run yet: an unpriced first round could cost many times what is left.
            return Skipped("no recorded bench run prices a round yet and the invocation budget is below the "
                           "rule's evidence budget (run `warden bench` first, or give a larger --budget)")
        self.log(f"{kind} of rule {rule_id} against {len(reference)} active rule(s)")
        if hasattr(self.runner, "rule_id"):  # the bench runner notes the rule on its passes
            self.runner.rule_id = rule_id
        result: RuleDecision = decide_rule(self.runner, reference, measured, self.tasks, rent,
                                           self.params, budget, prior, kind, cost_hints=hints,
                                           cost_cv=self.cost_cv())
        # Undecided because the *invocation's* budget ran out, or nothing measured: no verdict and
        # no inconclusive strike (three evict); the runs made are stored and reused when the rule
        # is measured again. What such nights spend adds up, and once it reaches the rule's
        # evidence budget the rule is inconclusive (or it would hold the queue's head for good).
        if result.decision.verdict is Verdict.INCONCLUSIVE:
            # ... the runs a killed invocation made for the rule included (reused now, so not in
            # this call's spend): what the rule's select passes since its last receipt cost
            undecided = max(undecided_before + result.tokens_spent, self._undecided_spend(rule_id))
            if partial_budget and (result.rounds == 0 or undecided < float(self.settings.evidence_budget_tokens)):
                self._set_undecided(rule_id, undecided)
                return Skipped(f"the invocation budget ran out before the rule was decided (its runs are kept for "
                               f"the next select; {undecided:,.0f} of its {self.settings.evidence_budget_tokens:,} "
                               "evidence-budget tokens spent undecided)", result.tokens_spent)
            # a task without a pair leaves the suite's saving unknown (no estimate): no receipt —
            # also one the budget left unmeasured (its first round's runs start in batches, and
            # the budget may stop them before every task has a pair)
            if (result.rounds == 0 or result.decision.n_pairs == 0 or not math.isfinite(result.decision.estimate)
                    or any(not t.log_ratios for t in result.decision.tasks)):
                lost = infra_unpaired_tasks(result.decision, result.evidence)
                if lost:  # infra is not the agent: no verdict, no receipt, no strike
                    raise InfraAbort(f"infrastructure errors left {', '.join(lost)} without a usable pair and the "
                                     "evidence budget is spent; decision aborted", result.evidence, result.tokens_spent)
                self._set_undecided(rule_id, undecided)
                return Skipped(f"the evidence budget ({budget:,.0f} weighted tokens) does not buy a paired run of "
                               "every golden task; raise evidence_budget_tokens", result.tokens_spent)
        unpaid = self._unreceipted_select_runs(result.new_runs)
        return self._commit(rule_id, kind, result, body, state_before,
                            (sum(r.weighted_tokens for r in unpaid), sum(r.raw_tokens for r in unpaid)))

    def _set_undecided(self, rule_id: int, tokens: float) -> None:
        with self.store.session() as session:
            rule = session.get(Rule, rule_id)
            assert rule is not None
            if float(rule.undecided_tokens or 0.0) != tokens:
                rule.undecided_tokens = tokens

    def _undecided_spend(self, rule_id: int) -> float:
        """Weighted tokens of the runs of the select passes made for ``rule_id`` (the bench runner
        notes the rule on each pass) since the rule's last receipt: what undecided invocations
        spent on it, a killed one included — its runs are reused when it resumes, so they are
        in no invocation's own spend. 0 for a runner that notes no rule."""
        if not hasattr(self.runner, "rule_id"):
            return 0.0
        with self.store.session() as session:
            return undecided_spend(session, self.agent, rule_id)

    def _unreceipted_select_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        """Reused runs that a select pass made but no receipt accounts for: bought for a decision
        that was interrupted (a killed night) or skipped (the invocation's budget), paid by none.
        The receipt that uses them first counts them; the invocation that made them paid them."""
        ids = {r.run_id for r in runs if r.reused and r.run_id is not None}
        if not ids:
            return []
        with self.store.session() as session:
            made_at = dict(session.execute(
                select(BenchRun.id, BenchRun.created_at).join(BenchJob, BenchJob.bench_run_id == BenchRun.id)
                .join(BenchPass, BenchJob.pass_id == BenchPass.id)
                .where(BenchRun.id.in_(sorted(ids)), BenchPass.purpose == "select")).all())
            if not made_at:
                return []
            # only a receipt written after the earliest of these runs can account for one of them
            receipted: set[int] = set()
            for evidence in session.scalars(select(Receipt.evidence).where(
                    Receipt.agent == self.agent, Receipt.created_at >= min(made_at.values()))):
                receipted.update(row[7] for row in evidence or [] if len(row) > 7 and row[7] is not None)
        return [r for r in runs if r.reused and r.run_id in made_at and r.run_id not in receipted]

    def cost_cv(self) -> float | None:
        """The spread of one run's weighted tokens (SD over mean, within task and configuration)
        in this agent's recorded bench runs on the same backend and model: what a round is priced
        with against the budget (:func:`~warden.select.decision.fitting_slots`). None before
        :data:`~warden.select.decision.COST_CV_MIN_DF` degrees of freedom measure it (the
        decision then takes its evidence's, or an assumed spread)."""
        if self._cost_cv is None:  # once an invocation, from what was recorded before the night
            with self.store.session() as session:
                self._cost_cv = recorded_cost_cv(session, self.agent, self.backend, self.model, self._before)
        return self._cost_cv if math.isfinite(self._cost_cv) else None

    def cost_hints(self) -> dict[str, float]:
        """Expected weighted tokens per run of each golden task, from this agent's recorded bench
        runs on the same backend and model (any configuration): they price a first round, so a
        budget is respected from the first pair on. Tasks never run take the others' mean. A
        resumed night's are what was recorded before the night started, as the uninterrupted
        night's were (they price its rounds against the budget: the resumed night ends where it
        would have)."""
        if not self._cost_hints:  # none yet: the invocation's own runs may price the next decision
            from sqlalchemy import func

            with self.store.session() as session:
                rows = session.execute(
                    select(BenchRun.task_id, func.avg(BenchRun.weighted_tokens))
                    .where(BenchRun.agent == self.agent, BenchRun.backend == self.backend,
                           BenchRun.model == self.model, BenchRun.outcome != "infra_error",
                           *((BenchRun.created_at < self._before,) if self._before is not None else ()))
                    .group_by(BenchRun.task_id)).all()
            known = {str(task): float(cost) for task, cost in rows if str(task) in self.tasks and cost}
            mean = sum(known.values()) / len(known) if known else 0.0
            self._cost_hints = {t: known.get(t, mean) for t in self.tasks} if known else {}
        return self._cost_hints

    def _commit(self, rule_id: int, kind: str, result: RuleDecision, body: str, state_before: str,
                resumed_spend: tuple[float, int] = (0.0, 0)) -> DecisionSummary:
        d = result.decision
        with self.store.session() as session:
            rule = session.get(Rule, rule_id)
            assert rule is not None
            inconclusive = 1 + len(session.scalars(select(Receipt.id).where(
                Receipt.rule_id == rule_id, Receipt.verdict == Verdict.INCONCLUSIVE.value)).all())
            state, reason, strikes = next_state(rule, kind, d.verdict, inconclusive)
            rule.state, rule.strikes = state, strikes
            rule.evict_reason = reason if state == "evicted" else None
            rule.decided_at = utcnow()
            rule.undecided_tokens = 0.0  # a decision settles what undecided nights spent
            if d.verdict in (Verdict.KEEP, Verdict.REFUTE, Verdict.INCONCLUSIVE):
                rule.measured_saving = d.estimate_tokens
            session.flush()
            # the receipt comes after the compile (it records the version): name its backend now
            keeping = {rule_id: self.backend} if d.verdict is Verdict.KEEP else None
            compiled = compile_memory(session, self.settings, self.agent, *self._sections(session), keeping=keeping)
            self.memory_drift = self.memory_drift or compiled.drift
            receipt = write_receipt(
                session, rule, kind=kind, verdict=d.verdict.value, reason="; ".join(d.reasons),
                state_after=state, estimate=d.estimate_tokens, ci_low=d.interval_tokens[0],
                ci_high=d.interval_tokens[1], margin=d.margin_tokens, k=self.params.keep_margin_k,
                n_per_side=d.n_per_side, paired_diffs=d.paired_diffs, pass_counts=d.pass_counts,
                tokens_spent=result.tokens_spent + resumed_spend[0],
                raw_tokens_spent=result.raw_tokens_spent + resumed_spend[1],
                model=self.model, backend=self.backend, suite_hash=getattr(self.runner, "suite_hash", ""),
                fixture_hash=getattr(self.runner, "fixture_hash", ""), ruleset_version=compiled.version,
                method={**dict(d.method), "relative_estimate": d.estimate,
                        "relative_interval": list(d.interval), "relative_margin": d.margin,
                        "reference_cost": d.reference_cost, "llr": d.llr, "thresholds": list(d.thresholds),
                        "n_pairs": d.n_pairs, "rounds": result.rounds,
                        "regressions": list(d.regressions), "completion_drops": list(d.completion_drops)},
                evidence=evidence_to_json(result.evidence))
            return DecisionSummary(rule_id, body, kind, d.verdict.value, state_before, state,
                                   d.estimate_tokens, d.interval_tokens, d.margin_tokens,
                                   result.tokens_spent, receipt.id, compiled.version)

    def _sections(self, session: Session) -> tuple[list[str] | None, dict[str, str] | None]:
        if self.memory_sections is None:
            return None, None
        sections, files = self.memory_sections(session, self.agent)
        return sections, files

    def run(self, budget_tokens: float | None = None, since: datetime | None = None) -> SelectReport:
        """Decide the pending candidates and re-audit one rule. ``since``: the start of the
        interrupted night this run resumes (see :func:`reaudit_target`)."""
        report = SelectReport(self.agent, self.backend, self.model)
        self._before = since
        remaining = float("inf") if budget_tokens is None else float(budget_tokens)
        with self.store.session() as session:
            start = memory_start(session, self.settings, self.agent)  # MEMORY.md before this invocation
            queue = [(r.id, ADMISSION) for r in pending_candidates(session, self.agent)]
            target = reaudit_target(session, self.agent, since)
            if target is not None:
                queue.append((target.id, REAUDIT))
        for rule_id, kind in queue:
            budget = min(float(self.settings.evidence_budget_tokens), remaining)
            if budget <= 0:
                report.skipped.append(f"rule {rule_id}: invocation budget spent")
                continue
            runner_spent = getattr(self.runner, "tokens_spent", None)
            try:
                summary = self.decide(rule_id, kind, budget)
            except InfraAbort as exc:
                report.aborted = str(exc)
                report.tokens_spent += exc.tokens_spent
                break
            except Exception as exc:
                from warden.bench.scheduler import BenchAborted

                if isinstance(exc, BenchAborted):
                    report.aborted = str(exc)
                    # its finished rounds and the aborted pass's runs were made: count them
                    if runner_spent is not None:
                        report.tokens_spent += float(self.runner.tokens_spent) - float(runner_spent)
                    break
                raise
            if isinstance(summary, Skipped):
                report.skipped.append(f"rule {rule_id}: {summary.reason}")
                report.tokens_spent += summary.tokens_spent  # its runs were made: the budget pays them
                remaining -= summary.tokens_spent
                continue
            report.decisions.append(summary)
            report.tokens_spent += summary.tokens_spent
            remaining -= summary.tokens_spent
        if budget_tokens is not None and report.tokens_spent > float(budget_tokens):
            report.skipped.append(over_budget_note(report.tokens_spent, float(budget_tokens),
                                                   self.params.round_price_sd))
        report.raw_tokens_spent = int(getattr(self.runner, "raw_tokens_spent", 0))
        report.runs_made = int(getattr(self.runner, "runs_made", 0))
        report.runs_reused = int(getattr(self.runner, "runs_reused", 0))
        if report.aborted is None:
            with self.store.session() as session:
                memory = compile_memory(session, self.settings, self.agent, *self._sections(session))
            change_since(memory, start)  # the invocation's change, not the last compile's
            memory.drift = memory.drift or self.memory_drift
            memory.drifted = bool(memory.drift)
            report.memory = memory
        return report


def select_agent(store: Store, settings: Settings, agent: str, *, budget_tokens: float | None = None,
                 backend: str | None = None, model: str | None = None, concurrency: int | None = None,
                 progress: Any = None, base_seed: int = 0, log: Callable[[str], None] | None = None,
                 since: datetime | None = None) -> SelectReport:
    """Run the selector for one agent over the real bench (the ``warden select`` entry point).
    One process at a time decides an agent's rules: :class:`~warden.store.locks.LockBusy` if
    another (a nightly job, a manual select) is at it. ``since``: see :meth:`Selector.run`."""
    from warden.bench.suite_runner import BenchSuiteRunner
    from warden.store.locks import exclusive

    busy = f"another warden process is deciding {agent}'s rules (select or nightly); run again when it ends"
    with exclusive(store, f"select-{agent}", busy):
        runner = BenchSuiteRunner(store, settings, agent, backend=backend, model=model, concurrency=concurrency,
                                  progress=progress, base_seed=base_seed)
        selector = Selector(store, settings, agent, runner, backend=runner.backend, model=runner.model, log=log,
                            memory_sections=checkpoint_sections(settings))
        return selector.run(budget_tokens, since)


@dataclass(frozen=True)
class AgentTurn:
    """One agent's turn in a select over several agents: its report, or why it was skipped."""

    agent: str
    report: SelectReport | None = None
    skipped: str | None = None  # "budget", "busy" (another process decides it) or "unusable" (its suite)
    reason: str = ""


def select_agents(store: Store, settings: Settings, agents: Sequence[str], *, budget_tokens: float | None,
                  strict: bool = False, announce: Callable[[str], None] | None = None,
                  **options: Any) -> Iterator[AgentTurn]:
    """:func:`select_agent` for each agent in turn, within one budget (what one spends the next
    has not), stopping after an infrastructure abort. A busy agent or one whose golden suite is
    unusable is skipped so the others go on, or raised when ``strict`` (an agent asked for by
    name). ``announce`` is told each agent before its turn; ``options`` go to select_agent."""
    from warden.store.locks import LockBusy

    remaining = budget_tokens
    for agent in agents:
        if remaining is not None and remaining <= 0:
            yield AgentTurn(agent, skipped="budget", reason="budget spent")
            continue
        if announce is not None:
            announce(agent)
        try:
            report = select_agent(store, settings, agent, budget_tokens=remaining, **options)
        except LockBusy as exc:
            if strict:
                raise
            yield AgentTurn(agent, skipped="busy", reason=str(exc))
            continue
        except UsageError as exc:
            if strict:
                raise
            yield AgentTurn(agent, skipped="unusable", reason=str(exc))
            continue
        yield AgentTurn(agent, report=report)
        if remaining is not None:
            remaining -= report.tokens_spent
        if report.aborted:
            return


def checkpoint_sections(settings: Settings) -> Callable[[Session, str], tuple[list[str], dict[str, str]]]:
    """The recovered-checkpoints section of MEMORY.md (rules always win the space)."""
    from warden.continuity.memory_section import memory_section_for_agent

    def sections(session: Session, agent: str) -> tuple[list[str], dict[str, str]]:
        section = memory_section_for_agent(session, agent, window_days=settings.recall_window_days)
        return ([section.text] if section.text else []), dict(section.files)

    return sections


def recompile_memory(session: Session, settings: Settings, agent: str) -> CompileResult:
    """Recompile the agent's MEMORY.md (rules + recovered checkpoints) in the caller's transaction."""
    extra, files = checkpoint_sections(settings)(session, agent)
    return compile_memory(session, settings, agent, extra, files)


def compiled_agents(session: Session) -> list[str]:
    """The agents warden has compiled a MEMORY.md for."""
    from warden.store.models import RulesetVersion

    return sorted(set(session.scalars(select(RulesetVersion.agent).distinct())))


def known_agents(settings: Settings) -> list[str]:
    root = settings.golden_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "agent.md").is_file())


def require_agent(settings: Settings, agent: str) -> str:
    agents = known_agents(settings)
    if agent not in agents:
        raise UsageError(f"unknown agent {agent!r}: golden suites exist for {', '.join(agents) or 'none'}")
    return agent


def require_rule_agent(session: Session, settings: Settings, agent: str, *, path_safe: bool = True) -> str:
    """``agent`` if warden knows it (a golden suite, a Claude Code agent definition, rules, or
    collected sessions), else a usage error: a typo must neither list nothing as if all were well
    nor install a memory for an agent warden never heard of. ``path_safe``: the name must also be
    a safe path component (a command that writes files by it); a command that only reads the
    store takes any agent it holds, such as a plugin's ``my-plugin:reviewer``."""
    from warden.names import validate_agent_name
    from warden.store.models import SessionRun

    try:
        plain = validate_agent_name(agent) == agent  # only such a name is looked up as a file
    except UsageError:
        if path_safe:
            raise
        plain = False
    if ((plain and (agent in known_agents(settings) or (settings.claude_home / "agents" / f"{agent}.md").is_file()))
            or session.scalar(select(Rule.id).where(Rule.agent == agent).limit(1))
            or session.scalar(select(SessionRun.id).where(SessionRun.agent == agent).limit(1))):
        return agent
    with_rules = session.scalars(select(Rule.agent).distinct()).all()
    with_sessions = session.scalars(select(SessionRun.agent).distinct()).all()
    known = sorted(set(known_agents(settings)) | set(with_rules) | set(with_sessions))
    shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
    raise UsageError(f"unknown agent {agent!r}: no golden suite, Claude Code agent file, rules or sessions "
                     f"(known: {shown or 'none'})")
