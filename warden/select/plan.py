"""``warden plan``: before spending, how many bench tokens each pending decision will take.

Loads recorded replicates (reference runs of the agent's current rule set on one backend —
``--backend``, else the configured one — and one model) and each rule's pooled evidence, then
asks the pure planner (``select/planner.py``). Runs of another model measure another agent — a
cheaper model's runs averaged in would understate what a decision costs — so every figure comes
from one model's runs: the one ``warden select`` would run (``--model``, else the configured
model, else agent.md's, else the backend's default; on the sim, a persona). A rule's evidence is
its latest receipt's pairs plus the runs undecided select passes made for it since (a night the
budget cut off, a killed invocation): select replays those at no cost, and what they cost is
the rule's spend before the plan (part of its worst case).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.errors import WardenError
from warden.select.compile import IN_MEMORY_STATES
from warden.select.decision import ADMISSION, REAUDIT, DecisionParams, Evidence
from warden.select.memory import MemoryRule, rule_rent
from warden.select.planner import FIT_LEVEL, plan_from_evidence, plan_rule, task_residuals
from warden.select.runner import config_key
from warden.select.selector import (pending_candidates, prior_evidence, reaudit_target, require_agent,
                                    undecided_passes)
from warden.store.models import BenchRun, Rule


def plan_model(settings: Settings, backend: str, model: str | None = None, agent_model: str | None = None) -> str:
    """The model a plan estimates for: the one ``warden select`` would run on ``backend`` —
    ``model``, else the configured one, else agent.md's (``agent_model``), else the backend's
    default (the sim: its persona). :class:`UsageError` for a model the backend does not know."""
    from warden.bench.agents import backend_model
    from warden.bench.scheduler import requested_model

    return backend_model(backend, settings, requested_model(settings, backend, model, agent_model))


def _fixture_hash(settings: Settings) -> str | None:
    """The fixture hash select's runs and receipts record (its manifest's), None when unreadable."""
    from warden.bench.fixture import FixtureError, manifest_hash, read_manifest

    try:
        return manifest_hash(read_manifest(settings.fixture_dir))
    except FixtureError:
        return None


def bench_advice(settings: Settings, agent: str, backend: str, model: str | None) -> str:
    """The ``warden bench`` command that records runs for this backend and model."""
    flags = f" --backend {backend}" if backend != settings.backend else ""
    flags += f" --model {model}" if model else ""
    return f"warden bench --agent {agent}{flags} --runs 3"


def _replicates(session: Session, settings: Settings, agent: str, key: str, backend: str, model: str | None,
                tasks: list[str]) -> tuple[dict[str, list[float]], str]:
    """Task → recorded run costs to estimate spread from: the current rule set's runs, else, per
    task, the runs of the rule set run most often (one set per task: mixing sets that cost
    differently would pass their difference off as noise)."""
    by_config: dict[str, dict[str, list[float]]] = {t: {} for t in tasks}
    query = select(BenchRun.task_id, BenchRun.config_key, BenchRun.weighted_tokens).where(
        BenchRun.agent == agent, BenchRun.backend == backend, BenchRun.model == model,
        BenchRun.outcome != "infra_error")
    for task_id, config, weighted in session.execute(query):
        if task_id in by_config:
            by_config[task_id].setdefault(config, []).append(float(weighted))
    exact = {t: groups.get(key, []) for t, groups in by_config.items()}
    if any(exact.values()):
        return exact, f"{sum(map(len, exact.values()))} reference runs of the current rule set"
    other = {t: max(groups.values(), key=len) if groups else [] for t, groups in by_config.items()}
    if any(other.values()):
        return other, f"{sum(map(len, other.values()))} runs of another rule set; none of the current one yet"
    on = f"backend {backend!r}" + (f" with model {model!r}" if model else "")
    raise WardenError(f"no recorded bench runs for agent {agent!r} on {on}: "
                     f"run `{bench_advice(settings, agent, backend, model)}` first")


def _paired_residuals(session: Session, agent: str, backend: str, model: str | None, weights: dict[str, float],
                      max_rules: int = 20, exclude: int | None = None) -> list[float]:
    """The pair noise earlier decisions of this agent observed on this backend and model: each rule's
    paired log ratios on a task minus their mean there (its effect), scaled to unbiased spread.
    Pairs share a seed on the bench, so they are far less noisy than two independent runs —
    replicates alone would overstate a pair's spread (the planner still charges a pair what the
    decision's variance does). ``exclude``: a rule whose own evidence the plan counts already."""
    from warden.select.selector import evidence_from_json
    from warden.store.models import Receipt

    latest: dict[int, Receipt] = {}
    for receipt in session.scalars(select(Receipt).where(Receipt.agent == agent, Receipt.backend == backend,
                                                         Receipt.model == model)
                                   .order_by(Receipt.id.desc()).limit(20 * max_rules)):
        if receipt.rule_id not in latest and receipt.evidence and len(latest) < max_rules:
            latest[receipt.rule_id] = receipt  # evidence pools across a rule's receipts: the last holds all
    out: list[float] = []
    for rule_id, receipt in latest.items():
        if rule_id != exclude:
            out.extend(task_residuals(evidence_from_json(receipt.evidence, "reference", "rule"), weights))
    return out


def _undecided_evidence(session: Session, settings: Settings, agent: str, rule_id: int, reference: str,
                        measured: str, *, backend: str, model: str | None, suite_hash: str,
                        fixture_hash: str | None) -> Evidence:
    """The runs undecided select passes made for ``rule_id`` since its last receipt (a night the
    budget cut off, a killed invocation) that select would reuse — same configurations, backend,
    model, suite and fixture, within the freshness window — paired by task and seed. They hold no
    receipt yet, so :func:`prior_evidence` does not see them; the next decision replays them."""
    from datetime import timedelta

    from warden.select.runner import RunRecord
    from warden.store.models import BenchJob, utcnow

    passes = undecided_passes(session, agent, rule_id)
    if not passes:
        return Evidence()
    cutoff = utcnow() - timedelta(days=settings.reference_freshness_days)
    same = (BenchRun.agent == agent, BenchRun.backend == backend, BenchRun.model == model,
            BenchRun.suite_hash == suite_hash, BenchRun.outcome != "infra_error", BenchRun.created_at >= cutoff,
            *((BenchRun.fixture_hash == fixture_hash,) if fixture_hash else ()))
    made = session.scalars(select(BenchRun).join(BenchJob, BenchJob.bench_run_id == BenchRun.id).where(
        BenchJob.pass_id.in_(passes), BenchRun.config_key == measured, *same).order_by(BenchRun.id)).all()
    if not made:
        return Evidence()
    # their partners: the reference's runs on the same task and seed, made by these passes or
    # by any other (the shared pool select pairs them with)
    slots = {(row.task_id, int(row.seed)) for row in made}
    partners = session.scalars(select(BenchRun).where(
        BenchRun.config_key == reference, BenchRun.task_id.in_({t for t, _ in slots}),
        BenchRun.seed.in_({seed for _, seed in slots}), *same).order_by(BenchRun.id)).all()
    rounds: dict[tuple[str, int], int] = {}  # (task, seed) → a round index of its own
    sides: dict[str, dict[tuple[str, int], RunRecord]] = {reference: {}, measured: {}}
    for row in [*made, *partners]:
        slot = (row.task_id, int(row.seed))
        if slot not in slots:
            continue
        index = rounds.setdefault(slot, 1_000_000 + len(rounds))
        sides[row.config_key][slot] = RunRecord(row.task_id, row.config_key, index, float(row.weighted_tokens), 0,
                                                bool(row.completed), row.outcome, row.id, reused=True)
    return Evidence(tuple(sides[reference].values()), tuple(sides[measured].values()))


def _weighted_mean_cost(replicates: dict[str, list[float]], weights: dict[str, float]) -> float:
    """The task-weighted mean cost per run (weights of any scale, however small)."""
    measured = [(weights[t], sum(v) / len(v)) for t, v in replicates.items() if v]
    total = sum(w for w, _ in measured)
    return sum(w * m for w, m in measured) / total if total > 0 else 0.0


def plan_agent(session: Session, settings: Settings, agent: str, budget: int | None = None,
               model: str | None = None, backend: str | None = None) -> dict[str, Any]:
    """``backend`` and ``model`` as ``warden select`` takes them (default: the configured backend,
    and the model select would run on it).

    Per rule: ``worst_case_tokens`` is a bound — the decision's budget (``budget``, select stops
    there; ``worst_case_new_tokens``) plus what undecided invocations already spent on the rule
    (``spent_before_tokens``) — while the other figures are the planner's estimates of the
    decision (``warden/select/planner.py``): ``slowest_case_tokens`` (expected, at the slowest
    true effect), ``slowest_case_p95_tokens``, ``decided_share_*`` (decisions reaching a verdict
    within the budget) and ``fits_budget`` (at least ``fit_level`` of them do at the slowest effect)."""
    from warden.bench.tasks import load_suite
    from warden.select.selector import undecided_spend

    require_agent(settings, agent)
    backend = backend or settings.backend
    suite = load_suite(settings.golden_dir, agent)
    model = plan_model(settings, backend, model, suite.model)
    weights = {t.id: float(t.weight) for t in suite.tasks}
    memory = frozenset(session.scalars(select(Rule.id).where(Rule.agent == agent, Rule.state.in_(IN_MEMORY_STATES))))
    replicates, basis = _replicates(session, settings, agent, config_key(memory), backend, model, list(weights))
    fixture_hash = _fixture_hash(settings)
    per_rule_budget = float(min(budget, settings.evidence_budget_tokens) if budget else settings.evidence_budget_tokens)
    params = DecisionParams.from_settings(settings)
    todo = [(r, ADMISSION) for r in pending_candidates(session, agent)]
    target = reaudit_target(session, agent)
    if target is not None:
        todo.append((target, REAUDIT))
    rules, total, total_new = [], 0.0, 0.0
    for rule, kind in todo:
        rent = rule_rent(MemoryRule(rule.id, rule.body, rule.scope))
        reference = memory if kind == ADMISSION else memory - {rule.id}
        measured = memory | {rule.id}
        # the evidence select would pool: same backend, model, golden suite and fixture ...
        prior = prior_evidence(session, rule, reference, measured, backend=backend, model=model,
                               suite_hash=suite.suite_hash, fixture_hash=fixture_hash)
        evidence = prior.paired_only() if prior is not None else Evidence()
        # ... and the runs undecided invocations made for it since (select replays them)
        later = _undecided_evidence(session, settings, agent, rule.id, config_key(reference), config_key(measured),
                                    backend=backend, model=model, suite_hash=suite.suite_hash,
                                    fixture_hash=fixture_hash)
        evidence = Evidence(evidence.reference + later.reference, evidence.rule + later.rule)
        spent_before = max(float(rule.undecided_tokens or 0.0), undecided_spend(session, agent, rule.id))
        residuals = _paired_residuals(session, agent, backend, model, weights, exclude=rule.id)
        if evidence.rule:
            priced = Evidence((prior.reference if prior is not None else ()) + later.reference, evidence.rule)
            estimate = plan_from_evidence(priced, weights, rent, per_rule_budget, params, kind,
                                          replicates=replicates, residuals=residuals, spent_before=spent_before)
        else:
            estimate = plan_rule(replicates, rent, per_rule_budget, params, weights, residuals, kind=kind,
                                 spent_before=spent_before)
        total += estimate.worst_case_tokens
        total_new += per_rule_budget
        rules.append({"rule_id": rule.id, "kind": kind, "body": rule.body, "rent": rent,
                      # to decide, whatever the budget; the spend itself stops at the budget
                      "expected_tokens": estimate.expected_tokens,
                      "expected_spend_tokens": estimate.expected_spend_tokens,
                      "shown_saving": estimate.shown_saving,
                      "tokens_if_as_shown": estimate.tokens_if_as_shown, "tokens_if_dead": estimate.tokens_if_dead,
                      "tokens_if_effective": estimate.tokens_if_effective,
                      # a bound: select stops at the decision's budget; what was spent before it included
                      "worst_case_tokens": estimate.worst_case_tokens, "worst_case_new_tokens": per_rule_budget,
                      "spent_before_tokens": estimate.spent_before_tokens,
                      "held_pairs": estimate.held_pairs,
                      # estimates at the slowest true effect (halfway between the hypotheses)
                      "slowest_case_tokens": estimate.tokens_worst,
                      "slowest_case_p95_tokens": estimate.slowest_p95_tokens,
                      "decided_share_slowest": estimate.decided_share_slowest,
                      "decided_share_if_dead": estimate.decided_share_if_dead,
                      "decided_share_if_effective": estimate.decided_share_if_effective,
                      "decided_share_as_shown": estimate.decided_share_as_shown,
                      "fits_budget": estimate.fits_budget,
                      "pair_sigma": estimate.pair_sigma, "decision_pair_sigma": estimate.decision_pair_sigma,
                      "run_sigma": estimate.run_sigma, "sigma_assumed": estimate.sigma_assumed,
                      "reason": estimate.reason})
    return {"agent": agent, "backend": backend, "model": model, "basis": basis, "budget": per_rule_budget,
            "reference_cost": _weighted_mean_cost(replicates, weights),
            "alpha": params.alpha, "beta": params.beta, "design_effect": params.design_effect,
            "fit_level": FIT_LEVEL, "rules": rules, "total_worst_case_tokens": total,
            "total_worst_case_new_tokens": total_new}
