"""Admission of rule bodies into the database: the one gate every writer of a new rule passes.

Every body — heuristic, model, ``warden rules add`` — goes through :func:`admit`:

1. :func:`~warden.distill.rule_text.validate_rule_body` (one printable line, 10–200 characters);
2. for distilled bodies, the false-economy guard (:func:`warden.habits.is_false_economy`): a rule
   that trades verification, testing or thoroughness for tokens is refused;
3. near-duplicates (character-trigram Jaccard > 0.85) of any rule of the agent in ANY state —
   evicted ones included, they are the negative dataset — and of each other are refused;
4. at most :data:`MAX_CANDIDATES` per distillation;

then the row is written with its rent (:func:`warden.select.memory.rule_rent`, the tokens of its
MEMORY.md line) and its provenance (the session run and the digest it was born of).
"""

from __future__ import annotations

import logging
import os
import unicodedata
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden.distill.rule_text import (MIN_RULE_CHARS, RuleTextError, find_near_duplicate, untrusted_rule_problem,
                                      validate_rule_body)
from warden.errors import UsageError
from warden.habits import is_false_economy
from warden.names import validate_agent_name
from warden.sanitize import redact_credentials, redact_secrets, redacted_prefix
from warden.select.memory import MemoryRule, rule_rent
from warden.store.models import Rule

log = logging.getLogger("warden.distill")

MAX_CANDIDATES = 3
MAX_SCOPE_CHARS = 80
DISTILLED_ORIGINS = ("heuristic", "anthropic")


@dataclass
class Refusal:
    body: str
    reason: str

    def to_dict(self) -> dict:
        return {"body": self.body, "reason": self.reason}


@dataclass
class AdmissionResult:
    admitted: list[Rule] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def validate_scope(scope: str | None) -> str | None:
    """A scope is a short printable phrase ("editing SQL migrations"); None/blank clears it."""
    if scope is None or not scope.strip():
        return None
    text = scope.strip()
    if "(" in text or ")" in text:
        raise RuleTextError("scope must not contain parentheses: it is rendered inside \"(when …)\"")
    if len(text) > MAX_SCOPE_CHARS:
        raise RuleTextError(f"scope is longer than {MAX_SCOPE_CHARS} characters ({len(text)})")
    # The rule-body validator's character rules apply; pad to its minimum length for the check.
    try:
        validate_rule_body(text.ljust(MIN_RULE_CHARS, "."))
    except RuleTextError as exc:
        raise RuleTextError(str(exc).replace("rule body", "scope")) from None
    return unicodedata.normalize("NFC", text)


def rent_of(body: str, scope: str | None) -> int:
    return rule_rent(MemoryRule(id=0, body=body, scope=scope))


# One process at a time adds candidates (distill, adopt, nightly): two would each miss the
# other's uncommitted rules and insert the same candidate twice.
ADMISSION_LOCK = "admission"
ADMISSION_BUSY = "another warden process is adding candidate rules (distill, adopt or nightly); run again when it ends"


def agent_rules(session: Session, agent: str) -> list[Rule]:
    return list(session.scalars(select(Rule).where(Rule.agent == agent).order_by(Rule.id)))


def screen_body(raw: object, origin: str, scope: str | None = None) -> tuple[str, None] | tuple[None, Refusal]:
    """``(body, None)`` for a body admission may consider (validated; for distilled origins also
    no false economy and nothing an untrusted source must not say), else ``(None, why not)``.
    Needs no database: near-duplicates are admission's own check."""
    try:
        body = validate_rule_body(raw)
    except RuleTextError as exc:
        return None, Refusal(redacted_prefix(str(raw), 300), str(exc))  # a refusal is shown: never its key
    if origin in DISTILLED_ORIGINS:
        if is_false_economy(body):
            return None, Refusal(redact_secrets(body), "false economy: trades verification or testing for tokens")
        untrusted = untrusted_rule_problem(body, scope)
        read = f"{scope or ''} {body}"
        if untrusted is None and redact_credentials(read, os.environ) != read:
            # a credential this machine holds (ANTHROPIC_API_KEY, …), of any form: a hostile
            # gateway may hand it to the model to put in a rule
            untrusted = "holds a credential configured on this machine, which every run would read"
        if untrusted:  # a refusal is shown: never its key
            return None, Refusal(redact_credentials(redact_secrets(body), os.environ), untrusted)
    return body, None


def admit(session: Session, agent: str, bodies: list[str], *, origin: str,
          state: str = "candidate", scope: str | None = None, provenance_run_id: int | None = None,
          provenance_digest: dict | None = None, max_candidates: int = MAX_CANDIDATES,
          pending: list[str] | None = None) -> AdmissionResult:
    """Validate, dedupe and insert ``bodies`` as rules of ``agent``; say why each refused one was.
    ``pending``: bodies a dry run found admissible in earlier runs (never stored), deduped against
    as rules — else a dry run over a queue would count the same rule once per run."""
    validate_agent_name(agent)
    scope = validate_scope(scope)
    result = AdmissionResult()
    existing = [(r.id, r.body) for r in agent_rules(session, agent)]
    existing_state = {r_id: state_ for r_id, state_ in
                      session.execute(select(Rule.id, Rule.state).where(Rule.agent == agent))}
    accepted: list[tuple[str, str]] = []
    pending_rules = [(f"pending:{i}", b) for i, b in enumerate(pending or [])]
    for raw in bodies:
        body, refusal = screen_body(raw, origin, scope)
        if refusal is not None:
            result.refused.append(refusal)
            continue
        dup = find_near_duplicate(body, existing)
        if dup is not None:
            rule_id, score = dup
            result.refused.append(Refusal(
                body, f"near-duplicate of rule {rule_id} ({existing_state.get(rule_id, '?')}, "
                      f"similarity {score:.2f})"))
            continue
        twin = None
        for what, others in (("another proposal", accepted), ("a rule an earlier run would admit", pending_rules)):
            dup = find_near_duplicate(body, others)
            if dup is not None:
                twin = f"near-duplicate of {what} (similarity {dup[1]:.2f})"
                break
        if twin is not None:
            result.refused.append(Refusal(body, twin))
            continue
        if len(accepted) >= max_candidates:
            result.refused.append(Refusal(body, f"more than {max_candidates} candidates in one distillation"))
            continue
        accepted.append((f"new:{len(accepted)}", body))
        rule = Rule(agent=agent, body=body, scope=scope, state=state, origin=origin,
                    rent_tokens=rent_of(body, scope), provenance_run_id=provenance_run_id,
                    provenance_digest=dict(provenance_digest or {}))
        session.add(rule)
        result.admitted.append(rule)
    session.flush()
    for refusal in result.refused:
        log.info("rule refused for %s: %s", agent, refusal.reason)
    return result


def add_manual(session: Session, agent: str, body: str, *, protected: bool, scope: str | None = None) -> Rule:
    """``warden rules add``: one human-authored rule; a refusal is a usage error."""
    result = admit(session, agent, [body], origin="manual",
                   state="protected" if protected else "candidate", scope=scope,
                   provenance_digest={"origin": "manual"}, max_candidates=1)
    if result.refused:
        raise UsageError(f"rule refused: {result.refused[0].reason}")
    return result.admitted[0]
