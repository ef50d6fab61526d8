"""Compiling MEMORY.md: the agent's active rules (+ recovered checkpoints) to disk.

The file is a build artifact. It is written atomically (temp file in the same directory, fsync,
rename), never through a symlink, and its bytes are recorded with a new ruleset version in the
caller's transaction, so a later run can tell which memory it carried. The rename waits for that
transaction to commit: the file never shows a rule the database has not decided. A file whose bytes differ
from the last recorded compile has drifted (hand-edited or stale) and is recompiled with a
warning.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from warden.config import Settings
from warden.continuity.memory_section import DETAIL_DIR, remove_stale_detail_files
from warden.errors import WardenError
from warden.files import cannot_write, staged_or_error, sweep_staged
from warden.names import validate_agent_name
from warden.select.memory import MemoryRule, render_memory, rule_line
from warden.store.models import Receipt, Rule, RulesetVersion

# States whose rules sit in memory: probation is a warning, not an eviction.
IN_MEMORY_STATES = ("active", "probation", "protected")


@dataclass
class CompileResult:
    agent: str
    path: Path
    version: int
    changed: bool  # bytes on disk changed
    drifted: bool  # the file on disk was not what warden last wrote
    rule_ids: list[int]
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    text: str = ""
    left_out: list[int] = field(default_factory=list)  # in-memory rules past the line/byte cap
    created: bool = False  # there was no MEMORY.md: this compile wrote the first
    drift: str = ""  # why it had drifted (see :func:`drift_reason`)
    kept: Path | None = None  # where the content it replaced is kept (see :func:`drift_loses_content`)


def memory_path(settings: Settings, agent: str) -> Path:
    return settings.memory_dir / validate_agent_name(agent) / "MEMORY.md"


def memory_rules(session: Session, agent: str) -> list[MemoryRule]:
    rows = session.scalars(select(Rule).where(Rule.agent == agent, Rule.state.in_(IN_MEMORY_STATES))
                           .order_by(Rule.id)).all()
    return [MemoryRule.of(r) for r in rows]


def measured_backends(session: Session, rule_ids: list[int], keeping: dict[int, str] | None = None) -> list[str]:
    """The backends of what keeps these rules in memory: each unprotected rule's latest keep
    receipt (its admission, or a re-audit it passed since). ``keeping``: rule id → backend of a
    keep decided in the caller's transaction whose receipt is not written yet."""
    if not rule_ids:
        return []
    rows = session.execute(select(Receipt.rule_id, Receipt.backend).join(Rule, Rule.id == Receipt.rule_id)
                           .where(Receipt.rule_id.in_(rule_ids), Receipt.verdict == "keep",
                                  Rule.state != "protected").order_by(Receipt.id))
    latest: dict[int, str] = {rule_id: backend for rule_id, backend in rows}  # a later keep overwrites
    latest.update({i: b for i, b in (keeping or {}).items() if i in rule_ids})
    return sorted(set(latest.values()))


def latest_version(session: Session, agent: str) -> RulesetVersion | None:
    return session.scalars(select(RulesetVersion).where(RulesetVersion.agent == agent)
                           .order_by(RulesetVersion.version.desc()).limit(1)).first()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def memory_state(version: RulesetVersion | None, exists: bool | None = None) -> dict[str, Any]:
    """What an agent's MEMORY.md held at a start (of an invocation, of a night), as JSON (a night
    stores it): the rules of its last compile, that compile's sha256 (None: never compiled) and
    whether the file was there (None: not known)."""
    return {"rule_ids": list(version.rule_ids) if version else [],
            "memory_sha256": version.memory_sha256 if version else None, "exists": exists}


def memory_start(session: Session, settings: Settings, agent: str) -> dict[str, Any]:
    """:func:`memory_state` of the agent's MEMORY.md now, the file's presence included."""
    try:
        memory_path(settings, agent).lstat()
        exists = True
    except OSError:  # missing (a path that cannot be read fails the compile, not this)
        exists = False
    return memory_state(latest_version(session, agent), exists)


def change_since(memory: CompileResult, start: dict[str, Any]) -> None:
    """Make a compile's result say what changed in MEMORY.md since ``start`` (a
    :func:`memory_state`), not since the compile before it: each decision compiles too."""
    start_ids = set(start.get("rule_ids") or [])
    memory.added = sorted(set(memory.rule_ids) - start_ids)
    memory.removed = sorted(start_ids - set(memory.rule_ids))
    # Created: no MEMORY.md when it started. The first decision that keeps a rule compiles the
    # file, so the closing compile alone would call a first MEMORY.md "added rule 3".
    exists = start.get("exists")
    if exists is None:  # not recorded (a night started before it was): there was one if warden had compiled one
        exists = start.get("memory_sha256") is not None
    memory.created = not exists
    memory.changed = (memory.changed or memory.created
                      or start.get("memory_sha256") != _sha256(memory.text.encode("utf-8")))


def read_existing(path: Path) -> bytes | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # e.g. a file where a directory of the path should be
        raise WardenError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise WardenError(f"refusing to use {path}: it is a symlink (warden never reads or writes through one)")
    if not stat.S_ISREG(st.st_mode):
        raise WardenError(f"refusing to use {path}: not a regular file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise WardenError(f"cannot read {path}: {exc.strerror or exc}") from None


def _install_on_commit(session: Session, staged: list[tuple[Path, Path]]) -> None:
    """Rename the staged (temp, path) files into place when the caller's transaction commits,
    detail files first, or delete them if it rolls back: MEMORY.md never shows a rule the
    database has not decided, and a decision never commits beside a file it could not stage."""
    settled = False

    def install(ended: Session) -> None:
        nonlocal settled
        if settled or ended.in_nested_transaction():  # a SAVEPOINT released: wait for the real commit
            return
        settled = True
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                for left, _ in staged:
                    left.unlink(missing_ok=True)
                raise WardenError(f"{cannot_write(path, exc)} (the decision is recorded; the "
                                  "next compile rewrites the file)") from None

    def discard(ended: Session) -> None:
        nonlocal settled
        if settled or ended.in_nested_transaction():
            return
        settled = True
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)

    event.listen(session, "after_commit", install)
    event.listen(session, "after_rollback", discard)


def compile_memory(session: Session, settings: Settings, agent: str,
                   extra_sections: list[str] | None = None,
                   extra_files: dict[str, str] | None = None,
                   keeping: dict[int, str] | None = None) -> CompileResult:
    """Render and install the agent's MEMORY.md; record a ruleset version when it changes.

    ``extra_sections`` (recovered checkpoints) are appended only within the caps; their detail
    files (``extra_files``: relative path -> text) are written beside MEMORY.md. The caller's
    transaction holds the new ruleset version; commit it together with the decision.
    ``keeping``: see :func:`measured_backends`.
    """
    path = memory_path(settings, agent)
    # First, and at once (not at commit): a forgotten checkpoint's text must not linger on disk
    # even when this compile then fails (MEMORY.md or a detail file a symlink).
    remove_stale_detail_files(path.parent, (extra_files or {}).keys())
    rules = memory_rules(session, agent)
    previous = latest_version(session, agent)
    version = (previous.version if previous else 0)
    # Rules beyond the 200-line / 25 KB cap are not in the file, so not in the ruleset version;
    # fitted under the longest header this compile can write (the version may still go up by one;
    # the backends of every in-memory rule name at least those of the rules that fit).
    backends = measured_backends(session, [r.id for r in rules], keeping)
    fitted = render_memory(agent, rules, version + 1, measured_backends=backends).splitlines()
    left_out = [r.id for r in rules if rule_line(r) not in fitted]
    rules = [r for r in rules if rule_line(r) in fitted]
    rule_ids = [r.id for r in rules]
    if left_out:
        backends = measured_backends(session, rule_ids, keeping)
    existing = read_existing(path)
    drift = "" if existing is None else drift_reason(session, agent, existing, previous)

    def rules_identity(v: int) -> str:
        # The version tracks the rule set only: recovered checkpoints and the note naming the
        # measuring backends change the file, not it.
        return _sha256(render_memory(agent, rules, v).encode("utf-8"))

    identity = rules_identity(version)
    if previous is None or previous.rule_ids != rule_ids or previous.rules_sha256 != identity:
        version += 1
        identity = rules_identity(version)
        previous_row = RulesetVersion(agent=agent, version=version, rule_ids=rule_ids,
                                      rules_sha256=identity, memory_sha256="", memory_path=str(path))
        session.add(previous_row)
    else:
        previous_row = previous
    data = render_memory(agent, rules, version, extra_sections, backends).encode("utf-8")
    previous_row.memory_sha256 = _sha256(data)
    session.flush()
    changed = existing != data
    root = settings.memory_dir
    # Content that is no compile of warden's (a hand edit, the agent's own notes in a MEMORY.md
    # warden never wrote) is someone's: kept beside the file, installed with it, never lost.
    kept = kept_copy_path(path) if changed and existing is not None and drift_loses_content(drift) else None
    sweep_staged(path.parent)
    sweep_staged(path.parent / DETAIL_DIR)
    staged: list[tuple[Path, Path]] = []
    try:
        for rel, text in (extra_files or {}).items():
            target = (path.parent / rel)
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise WardenError(f"refusing to write detail file outside the memory directory: {rel}")
            staged.append((staged_or_error(target, text.encode("utf-8"), root, private=True), target))
        if kept is not None and existing is not None:
            staged.append((staged_or_error(kept, existing, root, private=True), kept))
        if changed:
            staged.append((staged_or_error(path, data, root), path))
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    _install_on_commit(session, staged)
    before = set(previous.rule_ids) if previous else set()
    return CompileResult(agent=agent, path=path, version=version, changed=changed, drifted=bool(drift), drift=drift,
                         rule_ids=rule_ids, added=sorted(set(rule_ids) - before),
                         removed=sorted(before - set(rule_ids)), text=data.decode("utf-8"), left_out=left_out,
                         created=existing is None, kept=kept)


NOT_WRITTEN_BY_WARDEN = "it was not written by warden"
_EARLIER_COMPILE = "warden's earlier compile"


def drift_loses_content(drift: str) -> bool:
    """Whether replacing a file that drifted so (:func:`drift_reason`) would lose content nobody
    else has: anything but one of warden's earlier compiles."""
    return bool(drift) and _EARLIER_COMPILE not in drift


def kept_copy_path(path: Path) -> Path:
    """A fresh name beside ``path`` for the content a compile replaces: MEMORY.md.replaced-<UTC time>."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.name}.replaced-{stamp}")
    n = 1
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{path.name}.replaced-{stamp}-{n}")
    return candidate


def drift_reason(session: Session, agent: str, existing: bytes, previous: RulesetVersion | None) -> str:
    """Why ``existing`` (the installed MEMORY.md) is not what warden last compiled, or "".

    A file that is an earlier compile of warden's is stale, not edited: a compile whose process
    was stopped between its commit and its rename leaves the one before it in place."""
    if previous is None:
        return NOT_WRITTEN_BY_WARDEN
    digest = _sha256(existing)
    if digest == previous.memory_sha256:
        return ""
    earlier = session.scalars(select(RulesetVersion.version).where(
        RulesetVersion.agent == agent, RulesetVersion.memory_sha256 == digest)
        .order_by(RulesetVersion.version.desc()).limit(1)).first()
    if earlier is not None:
        return (f"it is {_EARLIER_COMPILE} v{earlier} (a compile stopped before it replaced the file, "
                "or a restored copy)")
    return "it was edited by hand, or is stale"


def check_drift(session: Session, settings: Settings, agent: str) -> str | None:
    """Why the installed MEMORY.md is not what warden last compiled, or None."""
    path = memory_path(settings, agent)
    previous = latest_version(session, agent)
    existing = read_existing(path)
    if previous is None:
        return None if existing is None else "MEMORY.md exists but warden never compiled it"
    if existing is None:
        return "MEMORY.md is missing"
    reason = drift_reason(session, agent, existing, previous)
    if reason:
        return f"MEMORY.md differs from the last compile: {reason}"
    return None
