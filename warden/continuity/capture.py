"""Checkpoint capture (DESIGN.md §6): from a parsed transcript run, the moments worth recording.

Pure extraction: :func:`capture` (a run, or the next part of one, with the state it carries
on), :func:`capture_fresh` (a parse from the transcript's start, run in the collector's parser
processes) and :func:`capture_checkpoints` (a whole run's checkpoints alone). Storage, on the
collector's session after a run is ingested: :func:`load_stored_captures` (a batch's stored
states and checkpoints), :func:`record_checkpoints` (the upsert) and :func:`index_terms` (the
recall index of new rows).

Triggers, each captured once per run (the store is unique on ``run_key + trigger``):

* ``fill:<band>`` — the context fill (prompt tokens of a call / the model's window) first
  crosses 20/35/50/65/80 %. Several bands crossed in one step (a session first seen at 82 %)
  give ONE checkpoint, named after the highest band crossed.
* ``quality:<band>`` — the quality score first drops through 80/70/50/40; one checkpoint per
  step, named after the lowest band crossed.
* ``milestone:edits:<id>`` — an edit burst: ≥ 4 writes, or ≥ 3 new files, since the last one.
* ``milestone:tests:<id>`` — a test command passed after edits made since the last one.
  Milestone ids come from the triggering tool call's id, so re-ingesting (whole or
  incrementally) names the same milestone the same way.

Quality score (0–100, higher is healthier), computed after every assistant call from what the
run has measurably done so far::

    quality = 100 − fill_penalty − reread_penalty − failure_penalty − compaction_penalty
    fill_penalty       = 50 × max(0, fill − 0.40) / 0.60     (0 up to 40 % fill, 50 when full)
    reread_penalty     = 25 × rereads / max(reads, 4)        (re-reading unchanged files)
    failure_penalty    = 25 × failed tool results / max(tool calls, 4)
    compaction_penalty = 10 per compaction, at most 20       (context was summarised away)

clamped to [0, 100]. The ``max(…, 4)`` floors keep one early mistake from reading as a 100 %
rate. Compactions are placed where the context visibly collapses (a call whose prompt is less
than half the previous one's, after ≥ 30 % fill); compactions the parser counted but we could not
place apply at the last call.

All text is untrusted transcript text: secrets are redacted at capture (:func:`redact_secrets`),
and it is fenced as data wherever it is shown (``continuity/fence.py``).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from warden.ingest.records import ParsedRun, ToolCall, path_key
from warden.names import stored_project
from warden.sanitize import redact_secrets

if TYPE_CHECKING:  # the pure half is imported without the database layer
    from sqlalchemy.orm import Session

FILL_BANDS = (20, 35, 50, 65, 80)
QUALITY_BANDS = (80, 70, 50, 40)
EDIT_BURST_WRITES = 4
EDIT_BURST_NEW_FILES = 3

DEFAULT_CONTEXT_WINDOW = 200_000
LARGE_CONTEXT_WINDOW = 1_000_000

# Caps on what one checkpoint keeps (characters / items): a checkpoint is a pointer, not a log.
MAX_TASK_CHARS = 800
MAX_ITEM_CHARS = 240
MAX_STATE_CHARS = 500
MAX_DECISIONS = 8
MAX_FILES = 25
MAX_QUESTIONS = 5
MAX_ERRORS = 5


# ---------------------------------------------------------------- secrets

# Redaction lives in warden.sanitize (the distiller redacts what it sends and stores too).


# Pure text helpers below are memoised: a run's checkpoints re-read the same turns, errors and
# prompts at every trigger, and the regexes over them dominated capture's cost.
@lru_cache(maxsize=16384)
def _clip(text: str, limit: int) -> str:
    text = redact_secrets(text.strip())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@lru_cache(maxsize=16384)
def _kept_path(path: str) -> str:
    """A tool call's path as a checkpoint stores and shows it (its files, its errors): a key, token
    or password in it redacted ("/home/u/.env.sk-ant-…", "/tmp/token=…/x"), as the parser's trace
    digest does. The capture state keeps :func:`path_key` digests to recognise paths again."""
    return redact_secrets(path)


@lru_cache(maxsize=1024)
def _kept_project(cwd: str | None) -> str | None:
    """The run's project (its cwd) as a checkpoint stores it, and as every path's project is
    compared with it: :func:`warden.names.stored_project` (a secret redacted, as in
    a file path; the parser stores the cwd so already, and a second pass changes nothing)."""
    return stored_project(cwd) if cwd else None


# ---------------------------------------------------------------- the checkpoint


@dataclass
class CheckpointData:
    """One captured checkpoint, independent of the store (the fence and recall read this).

    ``decisions`` and ``open_questions`` are ``{"text", "project"}`` dicts, ``errors`` are
    ``{"error", "fix", "tool", "path", "project"}`` dicts; files are plain paths whose project is
    found with :func:`project_of` against ``projects``.
    """

    run_key: str
    session_id: str
    agent_id: str | None
    agent: str
    project: str | None
    projects: list[str]
    trigger: str
    fill: float  # percent of the context window
    quality: float
    active_task: str = ""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    edited_files: list[str] = field(default_factory=list)
    read_files: list[str] = field(default_factory=list)
    open_questions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    last_state: str = ""
    captured_at: datetime | None = None
    id: int | None = None  # store id, when loaded from the store
    calls_seen: int | None = None  # capture only: tool calls of the run up to its trigger (not stored)

    @classmethod
    def from_row(cls, row: Any) -> "CheckpointData":
        """From a ``warden.store.models.Checkpoint`` row (or anything with its attributes)."""
        return cls(run_key=row.run_key, session_id=row.session_id, agent_id=row.agent_id, agent=row.agent,
                   project=row.project, projects=list(row.projects or []), trigger=row.trigger,
                   fill=row.fill, quality=row.quality, active_task=row.active_task or "",
                   decisions=[_as_item(d) for d in row.decisions or []],
                   edited_files=list(row.edited_files or []), read_files=list(row.read_files or []),
                   open_questions=[_as_item(q) for q in row.open_questions or []],
                   errors=[e if isinstance(e, dict) else {"error": str(e)} for e in row.errors or []],
                   last_state=row.last_state or "", captured_at=row.captured_at, id=row.id)

    def searchable_parts(self) -> list[str]:
        """The non-empty pieces of :meth:`searchable_text`, in order."""
        parts = [self.active_task, *(d.get("text", "") for d in self.decisions),
                 *(q.get("text", "") for q in self.open_questions), *self.edited_files, *self.read_files,
                 *(f"{e.get('error', '')} {e.get('fix', '')}" for e in self.errors), self.last_state,
                 self.project or ""]
        return [p for p in parts if p]

    def searchable_text(self) -> str:
        """What recall matches a prompt against."""
        return "\n".join(self.searchable_parts())


def _as_item(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"text": str(value), "project": None}


# ---------------------------------------------------------------- projects


# Paths under these roots are tooling or system files, not anyone's project.
_AMBIENT_ROOTS = ("/tmp", "/var", "/etc", "/usr", "/opt", "/proc", "/dev", "/sys", "/private", "/bin",
                  "/sbin", "/lib", "/nix")


def same_project(a: str, b: str) -> bool:
    """Two project directories are one project: equal (a trailing slash is no difference), or
    one a checkout nested in the other. The root directory is only itself."""
    a, b = a.rstrip("/"), b.rstrip("/")
    if not a or not b:
        return a == b
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _is_within(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


@lru_cache(maxsize=16384)  # pure, and asked for the same paths at every checkpoint of a run
def path_project(path: str, cwd: str | None) -> str | None:
    """The project a path belongs to, guessed without I/O: ``cwd`` for paths inside it or
    relative; otherwise the path cut to the cwd's depth (a sibling checkout such as
    ``~/work/other`` beside ``~/work/warden``); None for system paths or when unknowable.
    ``cwd`` is the run's project as stored (:func:`_kept_project`): the path is compared with it
    as a checkpoint keeps the path (:func:`_kept_path`), a secret in either redacted alike."""
    if not path:
        return None
    if not path.startswith("/"):
        return cwd
    norm = str(PurePosixPath(_kept_path(path)))
    if cwd and _is_within(norm, cwd):
        return cwd.rstrip("/") or "/"
    if any(_is_within(norm, root) for root in _AMBIENT_ROOTS) or "/." in norm:
        return None  # system paths and dot-directories (~/.claude, ~/.cache, …)
    if not cwd or not cwd.startswith("/"):
        return None
    depth = len(PurePosixPath(cwd).parts)
    parts = PurePosixPath(norm).parts
    if len(parts) <= depth:  # no deeper than the cwd itself: a loose file, not a checkout
        return None
    return _kept_path(str(PurePosixPath(*parts[:depth])))  # stored as the project of items and files


def project_of(path: str, projects: list[str], cwd: str | None) -> str | None:
    """A stored file's project: the longest known project containing it, else :func:`path_project`."""
    if path and not path.startswith("/"):
        return cwd
    best = None
    for project in projects:
        if _is_within(path, project) and (best is None or len(project) > len(best)):
            best = project
    return best or path_project(path, cwd)


_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.\-]+/)+[\w.\-]+")


# ---------------------------------------------------------------- text mining

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_DECISION = re.compile(
    r"(?i)\b(?:i(?:'ll| will)|let(?:'s| us)|we(?:'ll| will| should)|i(?:'m| am) going to|going with|"
    r"decid(?:e|ed|ing)|decision|chose|choose|choosing|opt(?:ed)? for|instead of|rather than|"
    r"prefer(?:red)?|the (?:best|right|simplest) (?:approach|option|fix|way)|switch(?:ed)? to|"
    r"settled on|plan is|approach is)\b")
_NOISE_PROMPT = re.compile(r"^\s*(?:<command-|<local-command|<system-reminder|Caveat:|\[Request interrupted)")
_TEST_COMMAND = re.compile(
    r"(?i)(?:\bpytest\b|-m\s+pytest|\bunittest\b|\btox\b|\bnox\b|\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b|"
    r"\bjest\b|\bvitest\b|\bmocha\b|\bgo\s+test\b|\bcargo\s+test\b|\bmake\s+(?:test|check)\b|\bctest\b|"
    r"\bmvn\s+test\b|\bgradle\w*\s+test\b|\brspec\b|\bphpunit\b|\bdotnet\s+test\b|\.ci/run\b)")
_TEST_FAILED = re.compile(r"(?i)\b(?:[1-9]\d* (?:failed|errors?)|FAILED|FAIL\b|failures?:\s*[1-9]|Traceback|"
                          r"error\[|AssertionError|panicked)")


def _sentences(text: str) -> list[str]:
    return [s.strip(" -*•#>`_\t") for s in _SENTENCE_SPLIT.split(text) if s and s.strip(" -*•#>`_\t")]


@lru_cache(maxsize=4096)
def _turn_sentences(text: str) -> tuple[tuple[str, bool, bool], ...]:
    """(sentence, is a decision, is a question) for each sentence of a turn's text worth a look."""
    found = []
    for sentence in _sentences(text):
        if len(sentence) < 12:
            continue
        decision = bool(_DECISION.search(sentence)) and not sentence.endswith("?")
        question = sentence.endswith(("?", "？"))
        if decision or question:
            found.append((sentence, decision, question))
    return tuple(found)


_ERROR_WORDS = re.compile(r"(?i)\b(?:error|failed|failure|exception|not found|denied|invalid|cannot|can't|"
                          r"unable|refused|no such|missing|traceback)\b")


@lru_cache(maxsize=4096)
def _error_line(result: str) -> str:
    """The most telling line of a failed tool result: the first that names an error, else the first
    with words in it (banners such as '===== test session starts =====' say nothing)."""
    lines = [ln.strip() for ln in result.splitlines() if ln.strip()]
    for ln in lines:
        if _ERROR_WORDS.search(ln):
            return ln
    for ln in lines:
        if sum(ch.isalnum() for ch in ln) >= len(ln) / 2:
            return ln
    return lines[0] if lines else "(error)"


@lru_cache(maxsize=16384)
def _mentioned_project(text: str, cwd: str | None) -> str | None:
    """The project of the last absolute path ``text`` names, if any."""
    mentioned = [m for m in (path_project(p, cwd) for p in _ABS_PATH.findall(text)) if m]
    return mentioned[-1] if mentioned else None


# The word each alternative of _TEST_COMMAND opens with, lower-case. _TEST_COMMAND.search tries
# every alternative at every character (each opens with \b: nothing for the engine to skip to),
# ~100 µs a command; this one skips to the next opening, and _TEST_COMMAND matches only there.
_TEST_COMMAND_OPENINGS = re.compile(r"pytest|-m|unittest|tox|nox|npm|pnpm|yarn|bun|jest|vitest|mocha|go|cargo|make|"
                                    r"ctest|mvn|gradle|rspec|phpunit|dotnet|\.ci/run")
# The characters besides ASCII letters that IGNORECASE matches to an ASCII letter and lower() does
# not lower to it, as that letter (the Kelvin sign lowers to "k"; tests/test_continuity_capture.py
# looks at every character): the folded text keeps every position.
_IGNORECASE_ASCII = str.maketrans({"\u017f": "s", "\u0131": "i", "\u0130": "i"})  # ſ, ı, İ
_IGNORECASE_ASCII_FROM = tuple(map(chr, _IGNORECASE_ASCII))


def _is_test_command(command: str) -> bool:
    """``_TEST_COMMAND.search(command)``, looked for only where one of its openings is."""
    folded = command
    if not command.isascii() and any(char in command for char in _IGNORECASE_ASCII_FROM):
        folded = command.translate(_IGNORECASE_ASCII)
    folded = folded.lower()  # one character each: "İ", the one that lowers to two, is folded already
    at = 0
    while (opening := _TEST_COMMAND_OPENINGS.search(folded, at)) is not None:
        if _TEST_COMMAND.match(command, opening.start()):
            return True
        at = opening.start() + 1
    return False


def _is_test_pass(call: ToolCall) -> bool:
    return (call.kind == "bash" and bool(call.command) and _is_test_command(call.command)
            and not call.is_error and not _TEST_FAILED.search(call.result_text or ""))


def _real_prompt(text: str) -> bool:
    return bool(text.strip()) and not _NOISE_PROMPT.match(text)


# ---------------------------------------------------------------- context window and quality


def context_window(models: list[str], max_context_tokens: int = 0) -> int:
    """The model's context window. 200k for Claude models, 1M for "[1m]"-suffixed ones or when a
    call's prompt already exceeded 200k (the run must have had the long-context window)."""
    if any("[1m]" in m or m.endswith("-1m") for m in models) or max_context_tokens > DEFAULT_CONTEXT_WINDOW:
        return LARGE_CONTEXT_WINDOW
    return DEFAULT_CONTEXT_WINDOW


def quality_score(fill: float, reads: int, rereads: int, calls: int, failures: int, compactions: int) -> float:
    """The documented quality score (module docstring); ``fill`` is a fraction 0–1."""
    fill_penalty = 50.0 * max(0.0, fill - 0.40) / 0.60
    reread_penalty = 25.0 * rereads / max(reads, 4)
    failure_penalty = 25.0 * failures / max(calls, 4)
    compaction_penalty = min(20.0, 10.0 * compactions)
    return round(max(0.0, min(100.0, 100.0 - fill_penalty - reread_penalty - failure_penalty - compaction_penalty)), 1)


# ---------------------------------------------------------------- capture

MAX_SEEN_PATHS = 5000  # "new file" memory carried between parses of one run


@dataclass
class CarryState:
    """Where capture stopped in a run, carried to the next (incremental) parse of it: crossed
    bands, running rates, milestone counters and the content so far. JSON-able."""

    crossed_fill: list[int] = field(default_factory=list)
    crossed_quality: list[int] = field(default_factory=list)
    reads: int = 0
    rereads: int = 0
    calls: int = 0
    failures: int = 0
    compactions: int = 0
    prev_ctx: int = 0
    max_ctx: int = 0
    writes_since: int = 0
    new_files_since: list[str] = field(default_factory=list)  # path_key digests, as seen_paths
    seen_paths: list[str] = field(default_factory=list)
    edits_since_tests: int = 0
    projects: list[str] = field(default_factory=list)
    last_project: str | None = None
    active_task: str = ""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    open_questions: list[dict[str, Any]] = field(default_factory=list)
    edited_files: list[str] = field(default_factory=list)
    read_files: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    last_state: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Any) -> "CarryState":
        if not isinstance(data, dict):
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        try:
            return cls(**known)
        except TypeError:
            return cls()


@dataclass
class _Trigger:
    name: str
    turn_pos: int  # position in the run's turn list; the checkpoint holds state up to this call
    fill: float  # percent
    quality: float
    calls_seen: int = 0  # tool calls of the run up to this trigger (a milestone: its own included)


def _milestone_id(call: ToolCall) -> str:
    return hashlib.sha1((call.tool_use_id or f"#{call.index}").encode()).hexdigest()[:10]


def _turn_position_of_calls(run: ParsedRun) -> dict[int, int]:
    """tool-call index → position of its turn in run.turns."""
    by_turn_index = {t.index: pos for pos, t in enumerate(run.turns)}
    mapping: dict[int, int] = {}
    for pos, turn in enumerate(run.turns):
        for ci in turn.tool_call_indexes:
            mapping[ci] = pos
    for call in run.tool_calls:
        if call.index not in mapping:
            mapping[call.index] = by_turn_index.get(call.turn, max(0, min(call.turn, len(run.turns) - 1)))
    return mapping


def _find_triggers(run: ParsedRun, carry: CarryState, call_turn: dict[int, int]) -> list[_Trigger]:
    """Walk the run's calls in order, updating ``carry``'s counters; the triggers that fired."""
    turns = run.turns
    if not turns:
        return []
    carry.max_ctx = max([carry.max_ctx] + [t.context_tokens for t in turns])
    window = context_window(run.models, carry.max_ctx)
    calls_by_turn: dict[int, list[ToolCall]] = {}
    for call in run.tool_calls:
        calls_by_turn.setdefault(call_turn[call.index], []).append(call)

    triggers: list[_Trigger] = []
    crossed_fill, crossed_quality = set(carry.crossed_fill), set(carry.crossed_quality)
    new_files_since, seen_paths = set(carry.new_files_since), dict.fromkeys(carry.seen_paths)
    base_compactions, detected = carry.compactions, 0
    last_pos = len(turns) - 1
    for pos, turn in enumerate(turns):
        ctx = turn.context_tokens
        if carry.prev_ctx and ctx < carry.prev_ctx / 2 and carry.prev_ctx >= 0.30 * window:
            detected += 1
        # compactions the parser counted in this part but we could not place apply at its end
        compactions = base_compactions + (max(detected, run.compactions) if pos == last_pos else detected)
        if ctx:
            carry.prev_ctx = ctx
        fill = ctx / window
        milestone_calls: list[tuple[str, ToolCall, int]] = []
        for call in calls_by_turn.get(pos, []):
            key = path_key(call.path) if call.path else None
            carry.calls += 1
            carry.failures += int(call.is_error)
            if call.kind == "read":
                carry.reads += 1
                carry.rereads += int(call.is_reread)
            if call.kind in ("edit", "write") and not call.is_error:
                carry.writes_since += 1
                carry.edits_since_tests += 1
                if call.kind == "write" and key and key not in seen_paths:
                    new_files_since.add(key)
                if carry.writes_since >= EDIT_BURST_WRITES or len(new_files_since) >= EDIT_BURST_NEW_FILES:
                    milestone_calls.append(("edits", call, carry.calls))
                    carry.writes_since, new_files_since = 0, set()
            if key:
                seen_paths[key] = None
            if carry.edits_since_tests and _is_test_pass(call):
                milestone_calls.append(("tests", call, carry.calls))
                carry.edits_since_tests = 0
        quality = quality_score(fill, carry.reads, carry.rereads, carry.calls, carry.failures, compactions)
        fill_pct = round(100.0 * fill, 1)

        newly = [b for b in FILL_BANDS if b not in crossed_fill and fill_pct >= b]
        if newly:
            crossed_fill.update(b for b in FILL_BANDS if b <= max(newly))
            triggers.append(_Trigger(f"fill:{max(newly)}", pos, fill_pct, quality, carry.calls))
        dropped = [b for b in QUALITY_BANDS if b not in crossed_quality and quality < b]
        if dropped:
            crossed_quality.update(b for b in QUALITY_BANDS if b >= min(dropped))
            triggers.append(_Trigger(f"quality:{min(dropped)}", pos, fill_pct, quality, carry.calls))
        for kind, call, calls_seen in milestone_calls:
            triggers.append(_Trigger(f"milestone:{kind}:{_milestone_id(call)}", pos, fill_pct, quality, calls_seen))
    carry.compactions = base_compactions + max(detected, run.compactions)
    carry.crossed_fill, carry.crossed_quality = sorted(crossed_fill), sorted(crossed_quality)
    carry.new_files_since = sorted(new_files_since)
    carry.seen_paths = list(seen_paths)[-MAX_SEEN_PATHS:]
    return triggers


def _before(ts: datetime | None, limit: datetime | None) -> bool:
    return ts is None or limit is None or ts <= limit


def _merge_unique(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys(old + new))


def _content(run: ParsedRun, pos: int | None, call_turn: dict[int, int], carry: CarryState) -> dict[str, Any]:
    """The state of the run up to and including the call at ``pos`` (None: before any call of
    this part), on top of what earlier parts of the run left in ``carry``."""
    cwd = _kept_project(run.cwd)
    limit_ts = run.turns[pos].timestamp if pos is not None else None
    upto = -1 if pos is None else pos
    calls = [c for c in run.tool_calls if call_turn.get(c.index, 0) <= upto]

    prompts = [p for p in run.user_prompts if _real_prompt(p.text) and (pos is None or _before(p.timestamp, limit_ts))]
    active_task = _clip(prompts[-1].text, MAX_TASK_CHARS) if prompts else carry.active_task

    # Which project a turn's text is about: a path it names; else the first path its own tool
    # calls touch (an assistant message says what it will do, then calls the tools); else the
    # project of the latest path touched in earlier turns; else the cwd.
    first_in_turn: dict[int, str] = {}
    last_in_turn: dict[int, str] = {}
    for c in sorted(calls, key=lambda c: c.index):
        project = path_project(c.path, cwd) if c.path else None
        if project:
            first_in_turn.setdefault(call_turn[c.index], project)
            last_in_turn[call_turn[c.index]] = project

    last_turns = sorted(last_in_turn)

    def project_at(turn_pos: int, text: str) -> str | None:
        mentioned = _mentioned_project(text, cwd)
        if mentioned:
            return mentioned
        if turn_pos in first_in_turn:
            return first_in_turn[turn_pos]
        before = bisect_left(last_turns, turn_pos)  # the latest turn earlier than turn_pos
        return last_in_turn[last_turns[before - 1]] if before else (carry.last_project or cwd)

    decisions: list[dict[str, Any]] = list(carry.decisions)
    seen_decisions = {d.get("text", "").casefold() for d in decisions}
    questions: list[dict[str, Any]] = list(carry.open_questions) if upto < 3 else []
    turns = run.turns
    for tpos in range(upto + 1):
        text = turns[tpos].text
        if not text:
            continue
        for sentence, is_decision, is_question in _turn_sentences(text):
            if is_decision:
                clipped = _clip(sentence, MAX_ITEM_CHARS)
                folded = clipped.casefold()
                if folded not in seen_decisions:
                    seen_decisions.add(folded)
                    decisions.append({"text": clipped, "project": project_at(tpos, sentence)})
            if is_question and tpos >= upto - 3:
                questions.append({"text": _clip(sentence, MAX_ITEM_CHARS), "project": project_at(tpos, sentence)})

    edited: list[str] = []
    read: list[str] = []
    for c in calls:
        if not c.path or c.is_error:
            continue
        path = _kept_path(c.path)
        if c.kind in ("edit", "write") and path not in edited:
            edited.append(path)
        elif c.kind == "read" and path not in read:
            read.append(path)
    edited = _merge_unique(carry.edited_files, edited)
    read = [p for p in _merge_unique(carry.read_files, read) if p not in edited]

    errors: list[dict[str, Any]] = list(carry.errors)
    for i, c in enumerate(calls):
        if not c.is_error:
            continue
        fix = ""
        for later in calls[i + 1:]:
            if later.is_error:
                continue
            if (c.path and later.path == c.path and later.kind in ("edit", "write", c.kind)) or \
               (c.command and later.kind == c.kind and later.command and
                later.command.split()[:1] == c.command.split()[:1]):
                fix = f"{later.name} {later.path or later.command or ''}".strip()
                break
        first_line = _error_line(c.result_text or "")
        errors.append({"error": _clip(first_line, MAX_ITEM_CHARS), "fix": _clip(fix, MAX_ITEM_CHARS),
                       "tool": c.name, "path": _kept_path(c.path) if c.path else c.path,
                       "project": path_project(c.path, cwd) if c.path else project_at(call_turn[c.index], c.command or "")})

    last_text = next((run.turns[t].text for t in range(upto, -1, -1) if (run.turns[t].text or "").strip()), "")
    working = last_in_turn[last_turns[-1]] if last_turns else None
    return {
        "active_task": active_task,
        "decisions": decisions[-MAX_DECISIONS:],
        "edited_files": edited[-MAX_FILES:],
        "read_files": read[-MAX_FILES:],
        "open_questions": questions[-MAX_QUESTIONS:],
        "errors": errors[-MAX_ERRORS:],
        "last_state": _clip(last_text, MAX_STATE_CHARS) if last_text else carry.last_state,
        "_working_project": working or carry.last_project,
    }


def run_projects(run: ParsedRun, known: list[str] | None = None) -> list[str]:
    """The run's project (cwd) first, then every other project its paths touch (as stored: a
    secret in one redacted)."""
    cwd = _kept_project(run.cwd)
    found: list[str] = list(known or []) or ([cwd] if cwd else [])
    if cwd and cwd not in found:
        found.insert(0, cwd)
    for call in run.tool_calls:
        for candidate in ([call.path] if call.path else []) + _ABS_PATH.findall(call.command or ""):
            project = path_project(candidate, cwd)
            if project and project not in found:
                found.append(project)
    return found


def capture(run: ParsedRun, agent: str | None = None,
            carry: CarryState | None = None) -> tuple[list[CheckpointData], CarryState]:
    """Every checkpoint of ``run`` in session order, and the state to carry to the next part of
    the run. ``carry`` is what the previous part left (None: ``run`` starts the transcript).
    Pure: the same inputs give the same outputs; a transcript captured in parts gives the same
    triggers as captured whole."""
    carry = CarryState.from_json((carry or CarryState()).to_json())  # never mutate the caller's
    # a state an earlier warden carried may name the cwd as it was written, secret and all
    carry.projects = list(dict.fromkeys(_kept_path(p) for p in carry.projects if isinstance(p, str) and p))
    carry.last_project = _kept_path(carry.last_project) if isinstance(carry.last_project, str) else None
    call_turn = _turn_position_of_calls(run)
    triggers = _find_triggers(run, carry, call_turn)
    projects = run_projects(run, carry.projects)
    agent_name = agent or (run.agent_type or "main" if run.agent_id is None else run.agent_type or "subagent")
    result: list[CheckpointData] = []
    for trig in triggers:
        turn = run.turns[trig.turn_pos]
        content = _content(run, trig.turn_pos, call_turn, carry)
        content.pop("_working_project")
        result.append(CheckpointData(
            run_key=run.run_key, session_id=run.session_id, agent_id=run.agent_id, agent=agent_name,
            project=_kept_project(run.cwd), projects=projects, trigger=trig.name, fill=trig.fill, quality=trig.quality,
            captured_at=turn.timestamp or run.ended_at or run.started_at, calls_seen=trig.calls_seen, **content))
    end = _content(run, len(run.turns) - 1 if run.turns else None, call_turn, carry)
    carry.last_project = end.pop("_working_project")
    for key, value in end.items():
        setattr(carry, key, value)
    carry.projects = projects
    return result, carry


def capture_checkpoints(run: ParsedRun, agent: str | None = None) -> list[CheckpointData]:
    """Every checkpoint of a whole transcript run, in session order (pure)."""
    return capture(run, agent)[0]


# ---------------------------------------------------------------- storage


def capture_fresh(run: ParsedRun) -> tuple[list[CheckpointData], CarryState]:
    """The pure half of :func:`record_checkpoints` for a parse from a transcript's start, which
    needs nothing from the store: the collector's parser processes run it so the writing process
    does not. Pass the result to :func:`record_checkpoints` as ``precaptured``."""
    return capture(run)


FORGOTTEN = "forgotten"  # key in a run's capture state: "all", or the triggers a user forgot
STATE_VERSION = "state_version"  # key in a run's capture state: 2 since forgetting leaves tombstones


def forgotten_triggers(state: Any) -> str | frozenset[str]:
    """What a user forgot of a run (kept in its capture state, so a re-parse of a rewritten
    transcript does not bring it back): ``"all"`` or a set of triggers."""
    value = state.get(FORGOTTEN) if isinstance(state, dict) else None
    if value == "all":
        return "all"
    return frozenset(str(t) for t in value) if isinstance(value, list) else frozenset()


def session_tombstone_key(session_id: str) -> str:
    """The capture-state key that marks a whole session forgotten, runs collected later
    included (a run's own key is ``<session>:<agent>``)."""
    return f"forgotten-session/{session_id}"


def _session_of(run_key: str) -> str:
    return run_key.rpartition(":")[0]


def with_forgotten(state: Any, triggers: str | Collection[str]) -> dict[str, Any]:
    """``state`` with ``triggers`` (a collection of triggers, or the string ``"all"``) added to
    what is forgotten."""
    if isinstance(triggers, str) and triggers != "all":
        raise ValueError(f"triggers must be a collection or 'all', not {triggers!r}")
    out = dict(state) if isinstance(state, dict) else {}
    before = forgotten_triggers(out)
    if before == "all" or triggers == "all":
        out[FORGOTTEN] = "all"
    else:
        out[FORGOTTEN] = sorted(set(before) | set(triggers))
    return out


@dataclass
class StoredCaptures:
    """The capture states and stored checkpoints of a batch of runs, read with one query each:
    a bulk collect stores thousands of runs and must not ask twice per run. Kept current by
    :func:`record_checkpoints` as it adds rows (a batch may hold two files of one run).

    With ``defer``, the new rows and the recall index the batch's runs need are written once, by
    :func:`write_pending` at the batch's end: one flush and one index insert instead of one per
    run. Otherwise :func:`record_checkpoints` writes them before it returns. Without ``index``,
    write_pending leaves the recall index of the rows it writes to :func:`index_missing` (a bulk
    collect's, once at its end: a first collect of a long history stores checkpoints that later
    batches push past the retention limit, and indexing those was half its index writes)."""

    run_keys: set[str] = field(default_factory=set)  # the runs loaded (with or without rows)
    horizon: datetime | None = None  # new checkpoints captured before this are not stored (retention)
    states: dict[str, Any] = field(default_factory=dict)  # run key -> CaptureState
    checkpoints: dict[str, list[Any]] = field(default_factory=dict)  # run key -> its Checkpoint rows
    forgotten_sessions: set[str] = field(default_factory=set)  # sessions a user forgot as a whole
    defer: bool = False
    index: bool = True
    new_rows: list[Any] = field(default_factory=list)  # new CaptureState / Checkpoint rows, not yet added
    # touched Checkpoint rows whose recall index is to be (re)written, in the order last touched
    unindexed: dict[Any, None] = field(default_factory=dict)
    stale_index: set[int] = field(default_factory=set)  # ids of stored rows whose index terms go


def write_pending(session: Session, stored: StoredCaptures) -> None:
    """Write what :func:`record_checkpoints` left in ``stored``: its new rows, added in the order
    they were made (so their ids are those one flush per run gave), and the recall index of the
    rows it touched (a refreshed row's old terms deleted first)."""
    from sqlalchemy import delete

    from warden.store.models import CheckpointTerm

    if stored.new_rows:
        session.add_all(stored.new_rows)
        stored.new_rows = []
    if not stored.unindexed:
        return
    session.flush()
    stale = sorted(stored.stale_index)
    for start in range(0, len(stale), 500):  # stay under SQLite's bound-parameter limit
        session.execute(delete(CheckpointTerm).where(CheckpointTerm.checkpoint_id.in_(stale[start:start + 500])))
    if stored.index:
        index_terms(session, list(stored.unindexed))
    stored.unindexed, stored.stale_index = {}, set()


INDEX_GROUP = 2000  # checkpoints indexed per insert by index_missing (~150k terms): bounded memory


def index_missing(session: Session, chunk: int = 500) -> int:
    """Write the recall index of every checkpoint that has none (those a bulk collect stored
    without it, an interrupted one's included), INDEX_GROUP checkpoints at a time, read ``chunk``
    ids per query; how many were indexed. A checkpoint with no searchable term is looked at again
    each time: none is expected, and it costs little."""
    from sqlalchemy import exists, select

    from warden.store.models import Checkpoint, CheckpointTerm

    ids = list(session.scalars(select(Checkpoint.id).where(~exists().where(CheckpointTerm.checkpoint_id == Checkpoint.id))
                               .order_by(Checkpoint.id)))
    for group in range(0, len(ids), INDEX_GROUP):
        group_ids = ids[group:group + INDEX_GROUP]
        rows: list[Any] = []
        for start in range(0, len(group_ids), chunk):
            rows += session.scalars(select(Checkpoint).where(Checkpoint.id.in_(group_ids[start:start + chunk]))
                                    .order_by(Checkpoint.id))
        index_terms(session, rows)
    return len(ids)


def load_stored_captures(session: Session, run_keys: Collection[str], chunk: int = 500,
                         horizon: datetime | None = None, *, defer: bool = False, index: bool = True) -> StoredCaptures:
    """The capture states and checkpoints of ``run_keys``, ``chunk`` keys per query; ``horizon``
    as :func:`warden.continuity.service.retention_horizon` gives it (None: store every capture).
    ``defer``: the caller writes the batch's rows with :func:`write_pending`; without ``index``,
    their recall index is left to :func:`index_missing` (see StoredCaptures)."""
    from sqlalchemy import select

    from warden.store.models import CaptureState, Checkpoint

    found = StoredCaptures(run_keys=set(run_keys), horizon=horizon, defer=defer, index=index)
    tombstones = {session_tombstone_key(_session_of(k)): _session_of(k) for k in found.run_keys}
    keys = sorted(found.run_keys | set(tombstones))
    for i in range(0, len(keys), chunk):
        part = keys[i:i + chunk]
        for state in session.scalars(select(CaptureState).where(CaptureState.run_key.in_(part))):
            if state.run_key in tombstones:
                found.forgotten_sessions.add(tombstones[state.run_key])
            else:
                found.states[state.run_key] = state
        for row in session.scalars(select(Checkpoint).where(Checkpoint.run_key.in_(part))):
            found.checkpoints.setdefault(row.run_key, []).append(row)
    return found


def record_checkpoints(session: Session, run_row: Any, parsed: ParsedRun,
                       precaptured: tuple[list[CheckpointData], CarryState] | None = None,
                       stored: StoredCaptures | None = None) -> int:
    """Store the run's checkpoints (the collector's post-ingest step). Returns how many were new.
    ``stored``: the batch's rows loaded by :func:`load_stored_captures` (else read here).

    A resumed parse (``parsed.start_offset > 0``: only the appended lines) continues from the
    run's stored :class:`CarryState`, so a transcript ingested after every turn captures what a
    whole parse would; a parse from the start begins afresh. Upsert on (run_key, trigger):
    re-ingesting never duplicates. A stored trigger is refreshed only by a capture of the same or
    an earlier moment, and a band the stored checkpoints already passed is never re-captured.
    """
    from warden.store.models import CaptureState

    agent = getattr(run_row, "agent", None) if run_row is not None else None
    if stored is None or parsed.run_key not in stored.run_keys:
        if stored is not None:
            write_pending(session, stored)  # the query below must see the batch's rows
        stored = load_stored_captures(session, [parsed.run_key], horizon=stored.horizon if stored else None)
    state_row = stored.states.get(parsed.run_key)
    resumed = getattr(parsed, "start_offset", 0) > 0
    prior = CarryState.from_json(state_row.state) if (resumed and state_row is not None) else None
    # A parse from the start of a run an older warden captured (its state has no STATE_VERSION)
    # must not store again what that parse captured and the user then forgot: older wardens left
    # no tombstone. What it skips becomes one, and the state is versioned; a resumed parse keeps
    # the state unversioned (its bands and calls still say what was captured) until then.
    legacy = state_row is not None and not (isinstance(state_row.state, dict) and state_row.state.get(STATE_VERSION))
    covered = CarryState.from_json(state_row.state) if (not resumed and legacy) else None
    uncovered: set[str] = set()  # what a legacy parse captured and is gone: tombstones from now on
    if precaptured is not None and prior is None:
        # captured without the run row's agent name, which only names the checkpoints: fill it in
        captured, carry = precaptured
        name = agent or (parsed.agent_type or "main" if parsed.agent_id is None else parsed.agent_type or "subagent")
        for data in captured:
            data.agent = name
    else:
        captured, carry = capture(parsed, agent=agent, carry=prior)
    forgotten = forgotten_triggers(state_row.state) if state_row is not None else frozenset()
    if _session_of(parsed.run_key) in stored.forgotten_sessions:
        forgotten = "all"
    if state_row is None:
        state_row = stored.states[parsed.run_key] = CaptureState(run_key=parsed.run_key)
        stored.new_rows.append(state_row)
    current = carry.to_json() if (legacy and resumed) else {**carry.to_json(), STATE_VERSION: 2}
    state_row.state = with_forgotten(current, forgotten) if forgotten else current
    captured = [] if forgotten == "all" else [c for c in captured if c.trigger not in forgotten]
    new = _store_captured(stored, parsed.run_key, captured, covered, uncovered)
    if uncovered:
        state_row.state = with_forgotten(state_row.state, uncovered)
    if not stored.defer:
        write_pending(session, stored)
    return new


def _store_captured(stored: StoredCaptures, run_key: str, captured: list[CheckpointData],
                    covered: CarryState | None, uncovered: set[str]) -> int:
    """:func:`record_checkpoints`' upsert of a run's captured checkpoints into ``stored``'s rows
    (written by :func:`write_pending`); how many are new. Adds to ``uncovered`` what a legacy
    parse (``covered``) captured before."""
    from warden.store.models import Checkpoint, utcnow

    if not captured:
        return 0
    run_checkpoints = stored.checkpoints.setdefault(run_key, [])
    existing = {cp.trigger: cp for cp in run_checkpoints}
    stored_fill = [int(t.split(":")[1]) for t in existing if t.startswith("fill:")]
    stored_quality = [int(t.split(":")[1]) for t in existing if t.startswith("quality:")]
    new = 0
    for data in captured:
        row = existing.get(data.trigger)
        family, _, band = data.trigger.partition(":")
        # "first crosses" is once per run, even when no carried state says so (a resumed parse
        # of a run ingested before capture states existed)
        if row is None and family == "fill" and any(b >= int(band) for b in stored_fill):
            continue
        if row is None and family == "quality" and any(b <= int(band) for b in stored_quality):
            continue
        if row is None and covered is not None and _covered(data, covered):
            uncovered.add(data.trigger)
            continue
        # a transcript dated in the future (a wrong clock, a forged file) is as recent as now: it
        # must not hold the "recent" pointer slots or escape retention forever
        when = min(data.captured_at or utcnow(), utcnow())
        if row is None and stored.horizon is not None and when < stored.horizon:
            continue  # the next prune would delete it: retention removed it before, or will
        if row is None:
            row = Checkpoint(run_key=data.run_key, trigger=data.trigger)
            stored.new_rows.append(row)
            run_checkpoints.append(row)
            new += 1
        elif row.captured_at is not None and when > row.captured_at:
            continue
        row.session_id, row.agent_id, row.agent = data.session_id, data.agent_id, data.agent
        row.project, row.projects = data.project, data.projects
        row.fill, row.quality = data.fill, data.quality
        row.active_task, row.decisions = data.active_task, data.decisions
        row.edited_files, row.read_files = data.edited_files, data.read_files
        row.open_questions, row.errors, row.last_state = data.open_questions, data.errors, data.last_state
        row.captured_at = when
        if row.id is not None:  # a stored row refreshed: its terms are written (again) anew
            stored.stale_index.add(row.id)
        stored.unindexed.pop(row, None)  # indexed after every row touched before it, as it was
        stored.unindexed[row] = None
    return new


def redact_stored(row: Any) -> None:
    """A stored ``Checkpoint`` row's text and paths redacted again in place, as capture redacts
    them today: a row an older warden captured is refreshed by a re-read of its transcript, but
    Claude Code deletes old transcripts. The run's own project (cwd) too (:func:`_kept_project`:
    a project without a secret stays as it is)."""
    cwd = row.project

    def item(d: Any) -> Any:  # a decision, an open question or an error
        if not isinstance(d, dict):
            return redact_secrets(str(d))
        out = {k: redact_secrets(v) if k in ("text", "error", "fix") and isinstance(v, str) else v for k, v in d.items()}
        if isinstance(d.get("path"), str):
            out["path"] = _kept_path(d["path"])
        if isinstance(d.get("project"), str):
            out["project"] = _kept_project(d["project"]) if d["project"] == cwd else _kept_path(d["project"])
        return out

    row.active_task, row.last_state = redact_secrets(row.active_task or ""), redact_secrets(row.last_state or "")
    row.decisions = [item(d) for d in row.decisions or []]
    row.open_questions = [item(q) for q in row.open_questions or []]
    row.errors = [item(e) for e in row.errors or []]
    row.edited_files = [_kept_path(str(f)) for f in row.edited_files or []]
    row.read_files = [_kept_path(str(f)) for f in row.read_files or []]
    kept = (_kept_project(p) if p == cwd else _kept_path(str(p)) for p in row.projects or [])
    row.projects = list(dict.fromkeys(p for p in kept if p))
    row.project = _kept_project(cwd)


def _covered(data: CheckpointData, earlier: CarryState) -> bool:
    """Whether an earlier parse of the run, which left ``earlier``, already captured ``data``'s
    trigger: its band was crossed, or its milestone's call was among the calls it had seen."""
    family, _, rest = data.trigger.partition(":")
    if family == "fill":
        return rest.isdigit() and int(rest) in earlier.crossed_fill
    if family == "quality":
        return rest.isdigit() and int(rest) in earlier.crossed_quality
    return family == "milestone" and data.calls_seen is not None and data.calls_seen <= earlier.calls


@lru_cache(maxsize=1)
def _term_insert() -> Any:
    from warden.store.models import CheckpointTerm

    return CheckpointTerm.__table__.insert()


_TERM_COLUMNS = ("checkpoint_id", "term", "captured_at", "session_id")


def index_terms(session: Session, rows: list[Any]) -> None:
    """Write the recall index of freshly stored (flushed) ``Checkpoint`` rows."""
    from warden.store.bulk import bind_converter, execute_values

    insert = _term_insert()
    dialect = session.get_bind().dialect
    convert_id, convert_term, convert_time, convert_session = (
        bind_converter(insert.table.c[name], dialect) for name in _TERM_COLUMNS)
    # A row's values are converted once for all its terms (about 75 each), not once per term.
    values: list[tuple[Any, ...]] = []
    for row in rows:
        cid, when, sid = row.id, row.captured_at, row.session_id
        cid = convert_id(cid) if convert_id else cid
        when = convert_time(when) if convert_time else when
        sid = convert_session(sid) if convert_session else sid
        terms = sorted(searchable_terms(CheckpointData.from_row(row)))
        values += [(cid, convert_term(t) if convert_term else t, when, sid) for t in terms]
    # in term order: the lookup index (term first) then takes them as one sweep, not at random
    # pages (~20% less of SQLite's time; the key's inserts stay at the end of its tree)
    values.sort(key=itemgetter(1))
    execute_values(session, insert, insert.table, _TERM_COLUMNS, values)


@lru_cache(maxsize=16384)
def _part_terms(part: str) -> tuple[str, ...]:
    from warden.continuity.recall import tokenize

    return tuple(tokenize(part))


def searchable_terms(data: CheckpointData) -> set[str]:
    """``recall.checkpoint_terms(data.searchable_text())``, with each part tokenized once: a run's
    checkpoints repeat most parts (decisions, files, task), and the parts are joined by a newline,
    a separator the tokenizer never joins across (nor does NFC), so the text's terms are the
    parts' terms in order. Pinned equal by tests/test_collector_fastpath.py."""
    from warden.continuity.recall import MAX_TERMS_PER_CHECKPOINT

    distinct = dict.fromkeys(term for part in data.searchable_parts() for term in _part_terms(part))
    return set(list(distinct)[:MAX_TERMS_PER_CHECKPOINT])
