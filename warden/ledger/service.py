"""Share and adopt ledgers (I/O around the pure format and verifier).

A ledger is evidence, not authority: ``adopt`` imports rules as local *candidates* only, with
the foreign evidence kept as "claimed" (shown on the receipt, never used in a verdict).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Collection
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden import __version__
from warden.config import Settings, repo_root
from warden.distill.admission import ADMISSION_BUSY, ADMISSION_LOCK, validate_scope
from warden.distill.rule_text import RuleTextError, find_near_duplicate, validate_rule_body
from warden.errors import UsageError
from warden.files import write_atomic
from warden.ledger.format import MAX_FILE_BYTES, build_ledger, canonical_bytes
from warden.ledger.verify import (GITATTRIBUTES_TEXT, LEDGERS_GITATTRIBUTES, Problem, gitattributes_problem,
                                  load_verified, verify_bytes)
from warden.names import clean_label, validate_agent_name
from warden.sanitize import one_line
from warden.select.memory import MemoryRule, rule_rent
from warden.store.db import Store
from warden.store.locks import exclusive
from warden.store.models import Receipt, Rule, iso_utc

SHARED_STATES = ("active", "protected")
MAX_EVIDENCE = 20



def ledgers_dir_here(settings: Settings) -> Path:
    """Where `share` writes and a bare `verify-ledger` looks, the same place for both: the
    ledgers directory configured for warden (WARDEN_LEDGERS_DIR, ledgers_dir in warden.toml,
    WARDEN_REPO), else ``ledgers/`` of the git repository the current directory is in (the one
    under review: a pull request that removes its last ledger leaves no directory, and that
    passes), else warden's checkout's."""
    configured = settings.ledgers_dir
    if os.environ.get("WARDEN_REPO") or configured != repo_root() / "ledgers":
        return configured
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory / "ledgers"
    return configured


def evidence_summary(receipt: Receipt) -> dict[str, Any]:
    totals = [0, 0, 0, 0]
    for counts in (receipt.pass_counts or {}).values():
        totals = [a + int(b) for a, b in zip(totals, counts)]
    n_pairs = int((receipt.method or {}).get("n_pairs")
                  or sum(min(int(a), int(b)) for a, b in (receipt.n_per_side or {}).values()))
    return {"kind": receipt.kind, "verdict": receipt.verdict, "estimate": receipt.estimate,
            "interval": [receipt.ci_low, receipt.ci_high], "margin": receipt.margin, "k": receipt.k,
            "n_pairs": n_pairs, "pass_counts": totals, "model": receipt.model, "backend": receipt.backend,
            "suite_hash": receipt.suite_hash, "decided_at": iso_utc(receipt.created_at, "seconds")}


def _provenance(rule: Rule) -> dict[str, Any]:
    digest = rule.provenance_digest or {}
    # The digest itself may hold transcript paths and projects: share only its fingerprint.
    out: dict[str, Any] = {"origin": rule.origin,
                           "digest_sha256": hashlib.sha256(canonical_bytes(digest)).hexdigest() if digest else None}
    kinds = digest.get("waste_kinds") if isinstance(digest, dict) else None
    if isinstance(kinds, list):
        out["waste_kinds"] = [str(k)[:60] for k in kinds[:20]]
    return out


def ledger_document(session: Session, agent: str) -> dict[str, Any]:
    rules = session.scalars(select(Rule).where(Rule.agent == agent, Rule.state.in_(SHARED_STATES))
                            .order_by(Rule.id)).all()
    entries = []
    for rule in rules:
        receipts = session.scalars(select(Receipt).where(Receipt.rule_id == rule.id).order_by(Receipt.id)).all()
        # An interval still open (one pair: an infinite end) says nothing and JSON cannot carry it.
        finite = [r for r in receipts if all(math.isfinite(x) for x in (r.estimate, r.ci_low, r.ci_high, r.margin))]
        entries.append({"body": rule.body, "scope": rule.scope, "state": rule.state,
                        "rent": rule_rent(MemoryRule(rule.id, rule.body, rule.scope)),
                        "evidence": [evidence_summary(r) for r in finite[-MAX_EVIDENCE:]],
                        "provenance": _provenance(rule)})
    return build_ledger(agent, entries, __version__)


class Shared(NamedTuple):
    path: Path
    rules: int
    gitattributes: Path | None = None  # written now: commit it with the ledger


def share(session: Session, settings: Settings, agent: str, out: Path | None = None) -> Shared:
    """Write ``agent``'s ledger to ``out`` (default: :func:`ledgers_dir_here`). Written into
    that directory, it comes with the ledgers/.gitattributes that keeps a checkout from turning
    its line endings into CRLF (which the gate, comparing bytes, would fail), unless one is there."""
    from warden.select.selector import require_rule_agent

    require_rule_agent(session, settings, agent)
    here = ledgers_dir_here(settings)
    target = out or here / f"{agent}.json"  # where a bare verify-ledger looks
    in_gate_dir = _where_in_gate_dir(agent, target, here)
    doc = ledger_document(session, agent)
    if not doc["rules"]:  # a ledger of nothing would pass review and teach the adopters nothing
        earlier = (f"; {one_line(str(target), 200)} holds an earlier export: delete it to stop sharing"
                   if target.exists() else "")
        raise UsageError(f"nothing to share: agent {agent} has no active or protected rule (candidates, rules on "
                         f"probation and evicted ones stay local){earlier}")
    data = canonical_bytes(doc)
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"ledger for {agent} would be {len(data):,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")
    # What share writes, verify-ledger (the reviewers' CI gate) must accept: a rule whose evidence
    # no longer supports it (its scope raised its rent since, a borderline keep) is named here.
    problems = verify_bytes(data, f"{agent}.json")
    if problems:
        raise UsageError(_share_refusal(session, agent, doc, problems))
    attributes = target.parent / LEDGERS_GITATTRIBUTES
    add_attributes = False
    if in_gate_dir:  # the directory the gate reads
        if attributes.exists() or attributes.is_symlink():
            reason = gitattributes_problem(attributes)
            if reason:  # the gate would fail the directory: say so before writing anything
                raise UsageError(f"cannot share {agent}: {one_line(str(attributes), 200)}: {reason}")
        else:
            add_attributes = True
    write_atomic(target, data, target.parent)
    if add_attributes:
        write_atomic(attributes, GITATTRIBUTES_TEXT.encode("utf-8"), target.parent)
    return Shared(target, len(doc["rules"]), attributes if add_attributes else None)


def _where_in_gate_dir(agent: str, target: Path, here: Path) -> bool:
    """Whether ``target`` is a file of ``here`` itself (the directory a bare verify-ledger reads),
    however the path reaches it ("../ledgers/x.json" from a subdirectory, a symlinked checkout).
    A target anywhere under ``here`` has its place and name checked as the gate checks them, a
    UsageError if it would fail: share writes nothing the gate rejects. Paths are compared with
    symlinks and ".." resolved (os.path.realpath), except ``here`` itself: a symlinked ledgers/
    fails the gate, so where it leads is not the gate's directory (and share refuses to write
    through the link)."""
    absolute = Path(os.path.abspath(here))
    gate = os.path.join(os.path.realpath(absolute.parent), absolute.name)
    parent = os.path.realpath(target.parent)
    if parent != gate and os.path.commonpath([parent, gate]) != gate:
        return False  # outside ledgers/: any name will do
    shown = one_line(str(target), 200)
    if parent != gate:
        raise UsageError(f"cannot share {agent} to {shown}: the gate fails it there (ledgers/ holds <agent>.json "
                         f"files, no subdirectories); write ledgers/{agent}.json")
    if target.name != f"{agent}.json":
        raise UsageError(f"cannot share {agent} to {shown}: the gate fails it there (a ledger under ledgers/ is "
                         f"named for its agent: {agent}.json)")
    return True


def _share_refusal(session: Session, agent: str, doc: dict[str, Any], problems: list[Problem]) -> str:
    """Why ``agent``'s rules cannot be shared, naming the rule by its local id (the ledger orders
    rules by body) and what would change it."""
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    first = problems[0]
    if first.index is None:
        return f"cannot share {agent}: {first}{more}"
    entry = doc["rules"][first.index]
    rule = session.scalars(select(Rule).where(Rule.agent == agent, Rule.body == entry["body"],
                                              Rule.state.in_(SHARED_STATES))).first()
    if rule is None:  # cannot happen: the document was built from these rows
        return f"cannot share {agent}: {first}{more}"
    # a stored decision time ahead of this clock: a clock was (or is) wrong, not the rule
    if "decided_at" in first.reason and "in the future" in first.reason:
        return (f"cannot share {agent}: rule {rule.id} ({rule.state}) {one_line(rule.body, 50)!r}: {first.reason}"
                f"{more}; check this machine's clock and the one that measured it, or share again after that time")
    remedy = (f"forget it (`warden rules forget {rule.id}`) or add it again worded otherwise"
              if rule.state == "protected" else
              f"re-measure it (`warden select --agent {agent}`) or forget it (`warden rules forget {rule.id}`)")
    return (f"cannot share {agent}: rule {rule.id} ({rule.state}) {one_line(rule.body, 50)!r}: {first.reason}{more}; "
            f"{remedy}, then share again")


@dataclass
class AdoptReport:
    path: str
    agent: str
    dry_run: bool
    imported: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def adopt(store: Store, path: Path, *, agent: str | None = None, dry_run: bool = False,
          suites: Collection[str] | None = None,
          max_candidates: int = Settings.adopt_max_candidates) -> AdoptReport:
    """Verify ``path``, then import its new rules as local candidates of ``agent``, committed
    under the admission lock (:class:`~warden.store.locks.LockBusy` while another process adds
    candidates); a dry run writes nothing and needs no lock. ``suites``: the agents with a golden
    suite here; a target without one is refused (its candidates could never be measured). A
    ledger that would add more than ``max_candidates`` is refused whole, dry run or not: each
    candidate costs bench runs, and which of them to take is not adopt's to choose."""
    doc = load_verified(path)
    with nullcontext() if dry_run else exclusive(store, ADMISSION_LOCK, ADMISSION_BUSY), store.session() as session:
        report = _import_rules(session, doc, path, agent, dry_run, suites, max_candidates)
        if dry_run:
            session.rollback()
    return report


def _import_rules(session: Session, doc: dict[str, Any], path: Path, agent: str | None, dry_run: bool,
                  suites: Collection[str] | None, max_candidates: int) -> AdoptReport:
    target = validate_agent_name(agent or doc["agent"])
    if suites is not None and target not in suites:
        raise UsageError(f"no golden suite for agent {target!r} here, so its candidates could never be measured "
                         f"(suites: {', '.join(sorted(suites)) or 'none'}); pick one with --agent")
    report = AdoptReport(str(path), target, dry_run)
    local = [(r.id, r.body) for r in session.scalars(select(Rule).where(Rule.agent == target)).all()]
    # what the ledger would add, found before anything is written: a refused ledger adds nothing
    new: list[tuple[dict[str, Any], str, str | None]] = []
    for entry in doc["rules"]:
        try:
            body = validate_rule_body(entry["body"])
            scope = validate_scope(entry["scope"])
        except RuleTextError as exc:  # verify passed, so this is defence in depth
            report.skipped.append({"body": entry["body"], "scope": entry["scope"], "reason": str(exc)})
            continue
        dup = find_near_duplicate(body, local)
        if dup is not None:
            report.skipped.append({"body": body, "scope": scope, "reason": f"near-duplicate of local rule {dup[0]} "
                                                                         f"(similarity {dup[1]:.2f})"})
            continue
        new.append((entry, body, scope))
        local.append((-1, body))  # a later rule of the ledger may nearly duplicate this one
    if len(new) > max_candidates:
        raise UsageError(f"ledger {path.name} would add {len(new)} candidates for {target}, over the limit of "
                         f"{max_candidates} per ledger (adopt_max_candidates); nothing was imported")
    # the file name is untrusted too (saved from a pull request or a download): stored cleaned
    ledger_name = clean_label(path.name, 255) or "ledger"
    for entry, body, scope in new:
        claimed = {"ledger": ledger_name, "ledger_rules_sha256": doc["rules_sha256"], "rule_sha256": entry["sha256"],
                   "exported_by": doc["exported_by"], "state": entry["state"], "evidence": entry["evidence"]}
        item = {"body": body, "scope": scope, "claimed_state": entry["state"]}
        if not dry_run:
            rule = Rule(agent=target, body=body, scope=scope, state="candidate", origin="adopted",
                        rent_tokens=rule_rent(MemoryRule(0, body, scope)), claimed_evidence=claimed,
                        provenance_digest={"adopted_from": ledger_name, "ledger_agent": doc["agent"],
                                           "foreign_provenance": entry["provenance"]})
            session.add(rule)
            session.flush()
            item["rule_id"] = rule.id
        report.imported.append(item)
    return report
