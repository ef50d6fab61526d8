"""``warden plan``: before spending, how many bench tokens each pending decision will take.

Loads recorded replicates (reference runs of the agent's current rule set on the configured
backend) and each rule's pooled evidence, then asks the pure planner (``select/planner.py``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.errors import WardenError
from warden.select.compile import IN_MEMORY_STATES
from warden.select.decision import ADMISSION, REAUDIT, DecisionParams
from warden.select.memory import MemoryRule, rule_rent
from warden.select.planner import plan_from_evidence, plan_rule
from warden.select.runner import config_key
from warden.select.selector import pending_candidates, prior_evidence, reaudit_target, require_agent
from warden.store.models import BenchRun, Rule


def _replicates(session: Session, agent: str, key: str, backend: str, tasks: list[str]) -> tuple[dict[str, list[float]], str]:
    def load(config: str | None) -> dict[str, list[float]]:
        query = select(BenchRun.task_id, BenchRun.weighted_tokens).where(
            BenchRun.agent == agent, BenchRun.backend == backend, BenchRun.outcome != "infra_error")
        if config is not None:
            query = query.where(BenchRun.config_key == config)
        out: dict[str, list[float]] = {t: [] for t in tasks}
        for task_id, weighted in session.execute(query):
            if task_id in out:
                out[task_id].append(float(weighted))
        return out

    exact = load(key)
    if any(exact.values()):
        return exact, f"{sum(map(len, exact.values()))} reference runs of the current rule set"
    anyset = load(None)
    if any(anyset.values()):
        return anyset, f"{sum(map(len, anyset.values()))} runs of other rule sets (no run of the current set yet)"
    raise WardenError(f"no recorded bench runs for agent {agent!r} on backend {backend!r}: "
                     f"run `warden bench --agent {agent} --runs 3` first")


def plan_agent(session: Session, settings: Settings, agent: str, budget: int | None = None) -> dict[str, Any]:
    from warden.bench.tasks import load_suite

    require_agent(settings, agent)
    suite = load_suite(settings.golden_dir, agent)
    weights = {t.id: float(t.weight) for t in suite.tasks}
    memory = frozenset(session.scalars(select(Rule.id).where(Rule.agent == agent, Rule.state.in_(IN_MEMORY_STATES))))
    replicates, basis = _replicates(session, agent, config_key(memory), settings.backend, list(weights))
    per_rule_budget = float(min(budget, settings.evidence_budget_tokens) if budget else settings.evidence_budget_tokens)
    params = DecisionParams.from_settings(settings)
    todo = [(r, ADMISSION) for r in pending_candidates(session, agent)]
    target = reaudit_target(session, agent)
    if target is not None:
        todo.append((target, REAUDIT))
    rules, total = [], 0.0
    for rule, kind in todo:
        rent = rule_rent(MemoryRule(rule.id, rule.body, rule.scope))
        reference = memory if kind == ADMISSION else memory - {rule.id}
        prior = prior_evidence(session, rule, reference, memory | {rule.id})
        if prior is not None and prior.reference:
            estimate = plan_from_evidence(prior, weights, rent, per_rule_budget, params, kind)
        else:
            estimate = plan_rule(replicates, rent, per_rule_budget, params, weights, kind=kind)
        # What the rule's own evidence shows beats the average of the two hypotheses.
        expected = (estimate.tokens_if_as_shown if estimate.tokens_if_as_shown is not None
                    else (estimate.tokens_if_dead + estimate.tokens_if_effective) / 2)
        total += min(estimate.tokens_worst, per_rule_budget)
        rules.append({"rule_id": rule.id, "kind": kind, "body": rule.body, "rent": rent,
                      # to decide, whatever the budget; the spend itself stops at the budget
                      "expected_tokens": expected, "expected_spend_tokens": min(expected, per_rule_budget),
                      "shown_saving": estimate.shown_saving,
                      "tokens_if_as_shown": estimate.tokens_if_as_shown, "tokens_if_dead": estimate.tokens_if_dead,
                      "tokens_if_effective": estimate.tokens_if_effective,
                      "worst_case_tokens": estimate.tokens_worst, "fits_budget": estimate.fits_budget,
                      "pair_sigma": estimate.pair_sigma, "sigma_assumed": estimate.sigma_assumed,
                      "reason": estimate.reason})
    return {"agent": agent, "backend": settings.backend, "basis": basis, "budget": per_rule_budget,
            "reference_cost": sum(weights[t] * (sum(v) / len(v)) for t, v in replicates.items() if v)
            / max(sum(weights[t] for t, v in replicates.items() if v), 1e-9),
            "alpha": params.alpha, "beta": params.beta, "design_effect": params.design_effect,
            "rules": rules, "total_worst_case_tokens": total}
