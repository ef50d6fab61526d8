"""Rules by hand (``warden rules …``): list, add, protect, unprotect, scope, forget.

State changes a human may make, next to the selector's measured ones:

* ``add`` — through the same admission gate as distilled rules (validator, near-duplicates of
  any rule in any state); ``--protected`` puts it straight into memory, else it is a candidate.
* ``protect`` — state ``protected``: in memory, counted for rent, never evicted for tokens (the
  selector skips it in re-audits). Strikes are cleared.
* ``unprotect`` — back to ``active`` if the rule was ever measured (``measured_saving`` set, so
  the next re-audit judges it), else ``candidate``: an unmeasured rule must earn its place.
* ``scope`` — "(when …)" prefix; changes the rule's line, so its rent is recomputed.
* ``forget`` — evicted with reason ``manual``; kept forever as negative data, so the distiller
  never proposes a near-duplicate again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from warden.distill.admission import add_manual, rent_of, validate_scope
from warden.errors import UsageError
from warden.names import validate_agent_name
from warden.select.compile import IN_MEMORY_STATES
from warden.select.receipts import get_rule, rule_dict
from warden.store.models import Receipt, Rule, utcnow

RULE_STATES = ("candidate", "active", "probation", "protected", "evicted")


def list_rules(session: Session, *, agent: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
    if status is not None and status not in RULE_STATES:
        raise UsageError(f"unknown status {status!r}: choose one of {', '.join(RULE_STATES)}")
    query = select(Rule)
    if agent:
        query = query.where(Rule.agent == agent)
    if status:
        query = query.where(Rule.state == status)
    # rule_dict names the backend of each measured saving: its receipts' verdicts and backends, in one query
    query = query.options(selectinload(Rule.receipts).load_only(Receipt.id, Receipt.verdict, Receipt.backend))
    return [rule_dict(r) for r in session.scalars(query.order_by(Rule.agent, Rule.id))]


def memory_rent(session: Session, *, agent: str | None = None) -> dict[str, int]:
    """Rent per agent of the rules that sit in its compiled MEMORY.md (protected ones included;
    rules past the file's cap pay none). Before a first compile: every in-memory rule."""
    from warden.select.compile import latest_version

    query = select(Rule.id, Rule.agent, Rule.rent_tokens).where(Rule.state.in_(IN_MEMORY_STATES))
    if agent:
        query = query.where(Rule.agent == agent)
    totals: dict[str, int] = {}
    compiled: dict[str, set[int] | None] = {}
    for rule_id, name, rent in session.execute(query.order_by(Rule.agent, Rule.id)):
        if name not in compiled:
            version = latest_version(session, name)
            compiled[name] = set(version.rule_ids) if version else None
        if compiled[name] is None or rule_id in compiled[name]:
            totals[name] = totals.get(name, 0) + int(rent or 0)
    return totals


def add_rule(session: Session, agent: str, body: str, *, protected: bool, scope: str | None = None) -> dict[str, Any]:
    validate_agent_name(agent)
    rule = add_manual(session, agent, body, protected=protected, scope=scope)
    if protected:
        rule.decided_at = utcnow()
    session.flush()
    return rule_dict(rule)


def protect(session: Session, rule_id: int) -> dict[str, Any]:
    """A person vouches for the rule: in memory, never token-evicted. Its strikes are kept for
    when it is unprotected. A forgotten rule stays forgotten."""
    rule = get_rule(session, rule_id)
    if rule.state == "evicted" and rule.evict_reason == "manual":
        raise UsageError(f"rule {rule_id} was forgotten (`rules forget`); a forgotten rule stays out of memory")
    if rule.state == "protected":
        return {**rule_dict(rule), "changed": False}
    rule.state, rule.evict_reason, rule.decided_at = "protected", None, utcnow()
    session.flush()
    return {**rule_dict(rule), "changed": True}


def unprotect(session: Session, rule_id: int) -> dict[str, Any]:
    """Back to the state its latest measured decision left it in (active, probation, evicted);
    a rule never decided is a candidate, measured by the next `warden select`."""
    from warden.store.models import Receipt

    rule = get_rule(session, rule_id)
    if rule.state != "protected":  # asked twice, or never protected: nothing to undo
        return {**rule_dict(rule), "changed": False}
    latest = session.scalars(select(Receipt).where(Receipt.rule_id == rule_id, Receipt.verdict != "inconclusive")
                             .order_by(Receipt.id.desc()).limit(1)).first()
    if latest is None:
        rule.state = "candidate"
    elif latest.state_after == "evicted":
        rule.state, rule.evict_reason = "evicted", "regression" if latest.verdict == "regression" else "refuted"
    else:
        rule.state = latest.state_after if latest.state_after in ("active", "probation") else "candidate"
    session.flush()
    return {**rule_dict(rule), "changed": True}


def set_scope(session: Session, rule_id: int, scope: str | None) -> dict[str, Any]:
    rule = get_rule(session, rule_id)
    rule.scope = validate_scope(scope)
    rule.rent_tokens = rent_of(rule.body, rule.scope)
    session.flush()
    return rule_dict(rule)


def forget(session: Session, rule_id: int) -> dict[str, Any]:
    """Evict by hand (reason "manual"), for good: a forgotten rule cannot be protected back. A rule
    already evicted by a verdict is forgotten too; forgetting twice changes nothing."""
    rule = get_rule(session, rule_id)
    if rule.state == "evicted" and rule.evict_reason == "manual":
        return {**rule_dict(rule), "changed": False}
    rule.state, rule.evict_reason, rule.decided_at = "evicted", "manual", utcnow()
    session.flush()
    return {**rule_dict(rule), "changed": True}
