"""Receipts: one immutable row per decision, and the views of a rule's history.

Rows are only ever inserted (:func:`write_receipt`); nothing in warden updates or deletes one
(``rules forget`` evicts the rule and keeps its history).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from warden import __version__
from warden.errors import UsageError
from warden.measured import setup_of
from warden.store.models import Receipt, Rule, iso_utc


def receipt_dict(r: Receipt) -> dict[str, Any]:
    return {
        "id": r.id, "rule_id": r.rule_id, "agent": r.agent, "kind": r.kind, "verdict": r.verdict,
        "reason": r.reason, "state_after": r.state_after, "estimate": r.estimate,
        "interval": [r.ci_low, r.ci_high], "margin": r.margin, "rent": r.rent, "k": r.k,
        "n_per_side": r.n_per_side, "paired_diffs": r.paired_diffs, "pass_counts": r.pass_counts,
        "tokens_spent": r.tokens_spent, "raw_tokens_spent": r.raw_tokens_spent, "model": r.model,
        "backend": r.backend, "measured_on": setup_of(r.backend, r.model), "suite_hash": r.suite_hash, "fixture_hash": r.fixture_hash,
        "warden_version": r.warden_version, "ruleset_version": r.ruleset_version, "method": r.method,
        "provenance_digest": r.provenance_digest, "paired_run_ids": paired_run_ids(r),
        "created_at": iso_utc(r.created_at),
    }


def paired_run_ids(r: Receipt) -> dict[str, list[list[int | str | None]]]:
    """Per task, the bench run ids [reference, with the rule] behind each of the receipt's paired
    differences, in their order — from the evidence the receipt stored (pooled across the rule's
    earlier decisions measured the same way), not looked up again."""
    from warden.select.decision import paired_runs
    from warden.select.selector import evidence_from_json  # selector imports this module

    pairs = paired_runs(evidence_from_json(r.evidence or [], "reference", "rule"), r.paired_diffs or {})
    return {task: [[a.run_id, b.run_id] for a, b in task_pairs] for task, task_pairs in pairs.items()}


# The verdicts whose estimate becomes a rule's measured_saving (selector._commit).
MEASURING_VERDICTS = ("keep", "refute", "inconclusive")


def measured_backend(rule: Rule) -> str | None:
    """The backend of the decision behind the rule's measured saving: a saving the sim measured
    is the simulated agent's, not a model's."""
    if rule.measured_saving is None:
        return None
    return next((r.backend for r in reversed(rule.receipts) if r.verdict in MEASURING_VERDICTS), None)


def rule_dict(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id, "agent": rule.agent, "body": rule.body, "scope": rule.scope, "state": rule.state,
        "evict_reason": rule.evict_reason, "strikes": rule.strikes, "rent_tokens": rule.rent_tokens,
        "origin": rule.origin, "measured_saving": rule.measured_saving, "measured_backend": measured_backend(rule),
        "provenance_run_id": rule.provenance_run_id, "provenance_digest": rule.provenance_digest,
        "claimed_evidence": rule.claimed_evidence, "created_at": iso_utc(rule.created_at),
        "decided_at": iso_utc(rule.decided_at),
    }


def provenance_summary(digest: dict[str, Any] | None) -> str:
    """One line saying where a rule came from, from its provenance digest (untrusted text: the
    caller sanitizes it for its medium)."""
    if not digest:
        return "unknown"
    if digest.get("origin") == "manual":
        return "added by hand"
    if "adopted_from" in digest:
        return f"adopted from {digest['adopted_from']} (a ledger of agent {digest.get('ledger_agent', '?')})"
    parts = []
    if digest.get("run_key"):
        parts.append(f"run {digest['run_key']}")
    if digest.get("distiller"):
        model = f", model {digest['model']}" if digest.get("model") else ""
        parts.append(f"{digest['distiller']} distiller{model}")
    findings = [f for f in digest.get("findings") or [] if isinstance(f, dict)]
    if findings:
        parts.append("waste seen: " + ", ".join(
            f"{f.get('waste_kind', '?')} ×{f.get('occurrences', '?')} (~{float(f.get('saving_tokens') or 0):,.0f} tokens)"
            for f in findings))
    if digest.get("trace_sha256"):
        parts.append(f"trace {str(digest['trace_sha256'])[:12]}")
    return " · ".join(parts) if parts else ", ".join(f"{k}={v}" for k, v in sorted(digest.items()))


def get_rule(session: Session, rule_id: int) -> Rule:
    rule = session.get(Rule, rule_id)
    if rule is None:
        raise UsageError(f"no rule with id {rule_id}")
    return rule


def rule_history(session: Session, rule_id: int) -> dict[str, Any]:
    """The rule, its provenance and every decision about it, oldest first."""
    rule = get_rule(session, rule_id)
    receipts = session.scalars(select(Receipt).where(Receipt.rule_id == rule_id).order_by(Receipt.id)).all()
    return {"rule": rule_dict(rule), "receipts": [receipt_dict(r) for r in receipts]}


def latest_receipts(session: Session, agent: str | None = None) -> list[dict[str, Any]]:
    """The latest receipt of every rule (of one agent, or all)."""
    latest = select(func.max(Receipt.id)).group_by(Receipt.rule_id)
    query = select(Receipt).where(Receipt.id.in_(latest)).order_by(Receipt.agent, Receipt.rule_id)
    if agent:
        query = query.where(Receipt.agent == agent)
    out = []
    for r in session.scalars(query).all():
        d = receipt_dict(r)
        d["body"] = r.rule.body
        d["state"] = r.rule.state
        out.append(d)
    return out


def write_receipt(session: Session, rule: Rule, **fields: Any) -> Receipt:
    receipt = Receipt(rule_id=rule.id, agent=rule.agent, rent=rule.rent_tokens,
                      warden_version=__version__, provenance_digest=rule.provenance_digest or {},
                      **fields)
    session.add(receipt)
    session.flush()
    return receipt
