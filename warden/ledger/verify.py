"""``warden verify-ledger``: the offline, deterministic CI gate for shared ledgers.

:func:`verify_bytes` is pure (no database, no network; the clock is read only to refuse an
evidence time in the future, so a file that passes never fails later); :func:`verify_path`
adds the file checks (regular file, size) before reading. Every problem names the file, the
rule and the reason, so a pull-request review can act on it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import jsonschema

from warden.distill.admission import validate_scope
from warden.distill.rule_text import (NEAR_DUPLICATE_JACCARD, RuleTextError, trigram_jaccard, untrusted_rule_problem,
                                      validate_rule_body)
from warden.errors import UsageError
from warden.habits import is_false_economy
from warden.ledger.format import MAX_FILE_BYTES, MAX_RULES, canonical_bytes, rule_hash, rules_hash, rule_order
from warden.names import validate_agent_name
from warden.sanitize import first_undrawn_char, holds_surrogate, one_line, strip_controls
from warden.select.memory import MemoryRule, rule_rent
from warden.strict_json import loads_strict


@dataclass(frozen=True)
class Problem:
    file: str
    rule: str | None  # "rule 3 'Grep for…'" or None for file-level problems
    reason: str
    index: int | None = None  # the rule's position in the file (0-based), for a rule's problem

    def __str__(self) -> str:
        where = f"{self.file}: {self.rule}: " if self.rule else f"{self.file}: "
        return strip_controls(where + self.reason, keep_newlines=False)


def load_schema() -> dict[str, Any]:
    return json.loads(resources.files("warden.ledger").joinpath("ledger.schema.json").read_text("utf-8"))


_SCHEMA = load_schema()


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate key {dup!r}")
    return dict(pairs)


def _label(index: int, rule: Any) -> str:
    body = rule.get("body") if isinstance(rule, dict) else None
    if isinstance(body, str):
        short = strip_controls(body, keep_newlines=False)
        return f"rule {index + 1} {short[:50]!r}"
    return f"rule {index + 1}"


# How far past the verifier's clock a decision time may lie: the clocks of the machine that
# measured and of the one that verifies may disagree a little, never by a day.
CLOCK_SKEW = timedelta(days=1)


def decided_at_problem(value: str, now: datetime | None = None) -> str | None:
    """Why ``decided_at`` (of the schema's form, ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``) is no time a
    decision was taken at, or None: not a calendar instant (February 31st, year 0), or later
    than ``now`` (default: the clock) by more than :data:`CLOCK_SKEW`."""
    try:
        moment = datetime.strptime(value.partition(".")[0].removesuffix("Z"), "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return f"decided_at {value!r} is not a real date and time"
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:  # a stored time: naive UTC
        now = now.replace(tzinfo=timezone.utc)
    if moment.replace(tzinfo=timezone.utc) > now + CLOCK_SKEW:
        return (f"decided_at {value!r} lies in the future (more than {CLOCK_SKEW.days} day after "
                f"{now.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}, this machine's time)")
    return None


def evidence_inconsistency(entry: dict[str, Any], now: datetime | None = None) -> str | None:
    """Why one evidence entry (any verdict, any age) contradicts itself, or None. What one field
    alone can say (ranges, hashes, the time's form) the schema says; that the time exists and
    is not in the future (``now``: :func:`decided_at_problem`), this."""
    when = decided_at_problem(entry["decided_at"], now)
    if when:
        return when
    low, high = entry["interval"]
    if low > high:
        return f"interval [{low:g}, {high:g}] has its low end above its high end"
    if not low <= entry["estimate"] <= high:
        return "saving estimate lies outside its own interval"
    ref_pass, ref_n, rule_pass, rule_n = entry["pass_counts"]
    if ref_pass > ref_n or rule_pass > rule_n:
        return "pass counts exceed run counts"
    # a pair is one reference run and one rule run of the same task
    if entry["n_pairs"] > min(ref_n, rule_n):
        return f"{entry['n_pairs']} pairs, more than the runs allow ({ref_n} reference, {rule_n} with the rule)"
    return None


def evidence_supports_keeping(rule: dict[str, Any]) -> str | None:
    """Why an active rule's recorded evidence does not support keeping it, or None (each entry
    is consistent: :func:`evidence_inconsistency`)."""
    if rule["state"] == "protected":
        return None  # human-authored: never token-evicted, evidence optional
    # An inconclusive re-audit changes nothing; the latest decisive one must support keeping.
    decisive = [e for e in rule["evidence"] if e["verdict"] != "inconclusive"]
    if not decisive:
        return "active rule has no recorded decisive evidence"
    latest = decisive[-1]
    if latest["verdict"] != "keep":
        return f"active rule's latest decision is {latest['verdict']!r}, not 'keep'"
    if latest["k"] < 1:
        return f"k = {latest['k']:g}: the keep margin must at least cover the rule's rent (k ≥ 1)"
    ref_pass, ref_n, rule_pass, rule_n = latest["pass_counts"]
    if rule_n == 0 or ref_n == 0:
        return "keep decision rests on no runs of the rule or of the reference"
    low = latest["interval"][0]
    if low < latest["margin"]:
        return (f"lower bound of the saving ({low:g}) does not clear the margin ({latest['margin']:g}) "
                "— the evidence does not support keeping")
    if latest["margin"] < latest["k"] * rule["rent"] - 1e-6:
        return f"margin {latest['margin']:g} is below k × rent = {latest['k'] * rule['rent']:g}"
    if latest["n_pairs"] < 1:
        return "keep decision rests on no paired runs"
    if rule_pass / rule_n < ref_pass / ref_n - 1e-9 and rule_pass < rule_n:
        return "the rule completes fewer tasks than the reference (a completion drop)"
    return None


SHOWN_CHARS = 40  # of a string the schema refuses: a reviewer needs to know which, not to read it


def _schema_reason(error: jsonschema.ValidationError) -> str:
    """What the schema says, without repeating the offending string (up to a 1 MiB body): a
    string over its limit as its length and the limit, any other as a short prefix."""
    instance = error.instance
    if isinstance(instance, str) and error.validator in ("maxLength", "minLength"):
        bound = "over the limit" if error.validator == "maxLength" else "under the minimum"
        return f"{len(instance):,} characters, {bound} of {error.validator_value}"
    message = error.message
    if isinstance(instance, str) and len(instance) > SHOWN_CHARS:
        message = message.replace(repr(instance), repr(one_line(instance, SHOWN_CHARS)))
    return message[:200]


def _strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a parsed ledger (keys too) with its JSON path; validated where it is read."""
    if isinstance(value, str):
        yield where or "/", value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, f"{where}/{key}")
            yield from _strings(item, f"{where}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}/{index}")


def verify_bytes(data: bytes, name: str, file_agent: str | None = None, *,
                 now: datetime | None = None) -> list[Problem]:
    """Every problem of one ledger file's bytes (empty list = it passes). ``file_agent``: the
    agent the file's name says, for a ledger the gate reads under ledgers/ (``<agent>.json``).
    ``now``: what an evidence time may not lie beyond (with :data:`CLOCK_SKEW`); default the clock."""
    now = now or datetime.now(timezone.utc)
    problems: list[Problem] = []
    if len(data) > MAX_FILE_BYTES:
        return [Problem(name, None, f"file is {len(data):,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [Problem(name, None, f"not UTF-8 ({exc.reason} at byte {exc.start})")]
    try:
        doc = loads_strict(text, object_pairs_hook=_no_duplicate_keys, exact_ints=True)
    except ValueError as exc:
        return [Problem(name, None, f"invalid JSON: {exc}")]
    # JSON may escape a lone surrogate ("\\ud800"): no text, and no hash can be taken of it
    unencodable = next((where for where, value in _strings(doc) if holds_surrogate(value)), None)
    if unencodable is not None:
        return [Problem(name, None, f"{unencodable}: holds a lone surrogate (an escaped \\ud800–\\udfff), "
                                    "which is not text")]
    if isinstance(doc, dict) and isinstance(doc.get("rules"), list) and len(doc["rules"]) > MAX_RULES:
        return [Problem(name, None, f"{len(doc['rules'])} rules, over the limit of {MAX_RULES}")]
    validator = jsonschema.Draft202012Validator(_SCHEMA)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for error in errors[:10]:
        path = list(error.absolute_path)
        rule = _label(path[1], doc["rules"][path[1]]) if len(path) >= 2 and path[0] == "rules" else None
        where = "/".join(str(p) for p in path[2:] if rule) if rule else "/".join(str(p) for p in path)
        problems.append(Problem(name, rule, f"schema: {where + ': ' if where else ''}{_schema_reason(error)}"))
    if problems:
        return problems
    for where, value in _strings(doc):
        if where.startswith("/rules/") and where.endswith(("/body", "/scope")):
            continue  # the rule validators below say more
        if first_undrawn_char(value) is not None:  # line breaks and tabs are controls too
            problems.append(Problem(name, None, f"{where}: holds a line break, control or invisible character "
                                                "(or a private-use or unassigned one)"))
            if len(problems) >= 10:
                break
    try:
        validate_agent_name(doc["agent"])
    except UsageError as exc:
        problems.append(Problem(name, None, str(exc)))
    # a reviewer reads the name: frontend.json holding backend's rules would pass as frontend's
    if file_agent is not None and doc["agent"] != file_agent:
        problems.append(Problem(name, None, f"holds the rules of agent {doc['agent']!r}: a ledger under ledgers/ "
                                            f"is named for its agent ({doc['agent']}.json)"))
    rules: list[dict[str, Any]] = doc["rules"]
    seen: list[tuple[str, str]] = []
    for index, rule in enumerate(rules):
        label = _label(index, rule)

        def problem(reason: str) -> None:
            problems.append(Problem(name, label, reason, index))  # noqa: B023 (called at once)

        try:
            body = validate_rule_body(rule["body"])
            if body != rule["body"]:
                problem("body is not in canonical form (NFC, trimmed)")
        except RuleTextError as exc:
            problem(f"rule body rejected: {exc}")
            body = str(rule["body"])
        if is_false_economy(body):  # the bench cannot see what skipped verification costs later
            problem("rule rejected: false economy: trades verification or testing for tokens")
        untrusted = untrusted_rule_problem(body, rule["scope"] if isinstance(rule["scope"], str) else None)
        if untrusted:
            problem(f"rule rejected: {untrusted}")
        try:
            if validate_scope(rule["scope"]) != rule["scope"]:
                problem("scope is not in canonical form (NFC, trimmed, null when empty)")
        except RuleTextError as exc:
            problem(f"scope rejected: {exc}")
        if rule["rent"] != rule_rent(MemoryRule(0, body, rule["scope"])):
            problem(f"rent {rule['rent']} is not the rule's rent as compiled "
                    f"({rule_rent(MemoryRule(0, body, rule['scope']))} tokens)")
        if rule_hash(rule) != rule["sha256"]:
            problem("sha256 does not match the rule's content (edited after export?)")
        for other_label, other_body in seen:
            similarity = trigram_jaccard(body, other_body)
            if body == other_body or similarity > NEAR_DUPLICATE_JACCARD:
                problem(f"duplicate of {other_label} (similarity {similarity:.2f})")
                break
        seen.append((label, body))
        for number, entry in enumerate(rule["evidence"], 1):
            inconsistent = evidence_inconsistency(entry, now)
            if inconsistent:
                problem(f"evidence {number}: {inconsistent}")
        why = evidence_supports_keeping(rule)
        if why:
            problem(why)
    if [rule_order(r) for r in rules] != sorted(rule_order(r) for r in rules):
        problems.append(Problem(name, None, "rules are not in canonical order (by body, then scope); "
                                            "re-export it with `warden share`"))
    if rules_hash(rules) != doc["rules_sha256"]:
        problems.append(Problem(name, None, "rules_sha256 does not match the rule list (a rule added, removed, "
                                            "reordered or edited)"))
    if not problems and canonical_bytes(doc) != data:
        if b"\r\n" in data and data.replace(b"\r\n", b"\n") == canonical_bytes(doc):
            problems.append(Problem(name, None, CRLF_PROBLEM))
        else:
            problems.append(Problem(name, None, "file is not in canonical form (keys, order or whitespace changed); "
                                                "re-export it with `warden share`"))
    return problems


def _read_ledger(path: Path) -> bytes | Problem:
    """The file's bytes (a regular file, not a symlink, within the size limit), read once."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block
    except OSError as exc:
        return Problem(name, None, "not a regular file" if os.path.islink(path) else f"cannot read: {exc.strerror}")
    st = os.fstat(fd)  # of what was opened, not of what the name points at now
    if not stat.S_ISREG(st.st_mode):  # before fdopen, which refuses a directory with an exception
        os.close(fd)
        return Problem(name, None, "not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > MAX_FILE_BYTES:
            return Problem(name, None, f"file is {st.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")
        try:
            return fh.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            return Problem(name, None, f"cannot read: {exc.strerror}")


def verify_path(path: Path, *, gated: bool = False) -> list[Problem]:
    """``gated``: ``path`` is one of :func:`gate_files`, so its name must be ``<agent>.json``."""
    data = _read_ledger(path)
    return [data] if isinstance(data, Problem) else verify_bytes(data, str(path), path.stem if gated else None)


# A team may say what its ledgers are; no other file belongs under ledgers/ but the attributes
# that keep git from converting a ledger's line endings at checkout (core.autocrlf=true on
# Windows turns LF into CRLF, and the gate compares bytes). `share` writes them.
LEDGERS_README = "README.md"
LEDGERS_GITATTRIBUTES = ".gitattributes"
GITATTRIBUTES_LINE = "*.json -text"
GITATTRIBUTES_TEXT = ("# written by `warden share`: git keeps ledgers byte for byte (no CRLF at checkout)\n"
                      f"{GITATTRIBUTES_LINE}\n")
CRLF_PROBLEM = ("file has CRLF line endings (a checkout converted them: git core.autocrlf=true); commit a "
                f"ledgers/{LEDGERS_GITATTRIBUTES} holding `{GITATTRIBUTES_LINE}` (`warden share` writes it), "
                "then delete the file and check it out again (`git checkout -- ledgers`)")


def gitattributes_problem(path: Path) -> str | None:
    """Why ``path`` is not a ledgers/.gitattributes the gate allows, or None. It may say
    ``*.json -text`` only (comments and blank lines aside): another attribute could change what
    reviewers see (``-diff``, ``linguist-generated`` folds the diff away) or what the gate reads
    (a ``filter``)."""
    data = _read_ledger(path)  # a regular file, not a symlink, within the size limit
    if isinstance(data, Problem):
        return data.reason
    try:
        lines = data.decode("utf-8").splitlines()  # CRLF too: git converts this file at checkout
    except UnicodeDecodeError:
        return "not UTF-8"
    said = {" ".join(line.split()) for line in lines if line.strip() and not line.lstrip().startswith("#")}
    if said != {GITATTRIBUTES_LINE}:
        return (f"not a ledgers/{LEDGERS_GITATTRIBUTES} the gate allows: it says `{GITATTRIBUTES_LINE}` only "
                "(another attribute could change what reviewers see or what the gate reads)")
    return None


def gate_files(root: Path) -> tuple[list[Path], list[Problem]]:
    """What a bare ``verify-ledger`` (the CI gate) reads under ``root``: its ``*.json`` files to
    verify, and a problem for anything else there, at any depth — the workflow runs on every
    change under ledgers/, and what the gate does not read must not pass unread. A missing
    ``root`` holds nothing (a pull request removed the last ledger); a symlinked one is refused:
    it would point the gate at files outside the pull request."""
    if root.is_symlink():
        return [], [Problem(str(root), None, "the ledgers directory is a symlink, not a directory of the repository")]
    if not root.exists():
        return [], []
    if not root.is_dir():
        return [], [Problem(str(root), None, "not a directory")]
    files: list[Path] = []
    problems: list[Problem] = []
    for entry in sorted(root.iterdir()):
        if entry.suffix == ".json":
            files.append(entry)  # verify_path refuses a directory or symlink by that name
        elif entry.name == LEDGERS_README and entry.is_file() and not entry.is_symlink():
            continue
        elif entry.name == LEDGERS_GITATTRIBUTES:
            reason = gitattributes_problem(entry)
            if reason:
                problems.append(Problem(str(entry), None, reason))
        elif entry.is_dir() and not entry.is_symlink():
            inside = sorted(Path(top, name) for top, dirs, names in os.walk(entry)  # links not followed
                            for name in [*names, *(d for d in dirs if os.path.islink(os.path.join(top, d)))])
            for path in inside or [entry]:
                problems.append(Problem(str(path), None, "not a ledger: ledgers/ holds <agent>.json files, "
                                                         f"a {LEDGERS_README} and a {LEDGERS_GITATTRIBUTES}, "
                                                         "no subdirectories"))
        else:
            problems.append(Problem(str(entry), None, "not a ledger: ledgers/ holds <agent>.json files, "
                                                      f"a {LEDGERS_README} and a {LEDGERS_GITATTRIBUTES} only"))
    return files, problems


def load_verified(path: Path) -> dict[str, Any]:
    """The ledger document, or a UsageError listing what is wrong with it. The document is parsed
    from the very bytes that were verified: the file may change on disk in between."""
    data = _read_ledger(path)
    problems = [data] if isinstance(data, Problem) else verify_bytes(data, str(path))
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"ledger rejected: {problems[0]}{more}")
    assert isinstance(data, bytes)
    return json.loads(data.decode("utf-8"))
