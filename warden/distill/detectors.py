"""Waste detectors: pure functions over one :class:`~warden.ingest.records.ParsedRun`.

Each detector returns at most one :class:`Finding` of one ``waste_kind`` from
:mod:`warden.habits` (so the heuristic distiller and the sim speak the same words), with the
calls that show it (``evidence``), how often it happened, and an estimated saving.

How a saving is estimated (cost-weighted tokens, the gate metric, "equivalent input tokens"):

* A tool result of ``b`` bytes is ``estimate_tokens(b)`` tokens. It enters the context once as a
  prompt-cache write (×1.25) and is then re-sent as a cache read (×0.1) by every later turn of
  the run — so avoiding it saves ``t × (1.25 + 0.1 × later_turns)``: :func:`carried_cost`.
* Text and tool input the model generated are output tokens (×5, the output/input price ratio of
  every Claude card) and are then carried like a result: :func:`generated_cost`.
* Only the avoidable part counts: a ranged read instead of a whole file counts the bytes beyond
  the range, a targeted test run counts the output beyond the targeted run's, and so on.

All sizes are measured from the transcript (``result_bytes``, ``input_bytes``, turn text); the
few reference sizes that cannot be measured (how long a brief reply is, how many lines a ranged
read needs) are named constants below. No I/O here; all text in a run is untrusted and is only
compared, never executed or shown unsanitised.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable

from warden.habits import HABITS_BY_WASTE
from warden.ingest.pricing import CACHE_READ_FACTOR, CACHE_WRITE_5M_FACTOR
from warden.ingest.records import ParsedRun, ToolCall
from warden.sanitize import redacted_prefix
from warden.tokens import estimate_tokens, tokens_of_bytes

OUTPUT_WEIGHT = 5.0  # output price / input price on every Claude model card

# Reference sizes (documented assumptions; everything else is measured).
LONG_FILE_BYTES = 12_000  # ~300 lines: a whole read of a longer file to edit a few lines is waste
SMALL_EDIT_FRACTION = 0.15  # an edit whose old+new text is below this share of the file is "small"
RANGED_READ_LINES = 80  # a ranged read around the change: 40 lines either side
DEFAULT_LINE_BYTES = 40  # when the read sample has no line breaks to measure line length from
LONG_OUTPUT_BYTES = 8_000  # a tool output this long is worth checking for use
SUMMARY_OUTPUT_BYTES = 2_000  # what `| tail`, `-q` or a head would have kept
TARGETED_TEST_OUTPUT_BYTES = 800  # a one-file test run's output when the session has none to measure
MAX_TARGETED_EDIT_FILES = 3  # changes to at most this many files: a targeted test run suffices
VERBOSE_TURN_CHARS = 1_200  # narration between tool calls longer than this is verbose
BRIEF_REPLY_CHARS = 200  # what a brief one-line status would have been
OVERSIZED_WRITE_BYTES = 1_000  # rewriting an existing file this large instead of editing it
EDIT_CONTEXT_BYTES = 200  # old_string context an exact-replacement edit carries anyway
MAX_EVIDENCE = 25  # evidence items kept per finding (the count says how many there were)


@dataclass
class Finding:
    waste_kind: str  # a key of warden.habits.HABITS_BY_WASTE
    occurrences: int
    saving_tokens: float  # estimated cost-weighted tokens the run would have saved
    evidence: list[dict] = field(default_factory=list)  # calls/turns involved, by index and id
    detail: str = ""  # one line, generated here (no transcript text)

    def to_dict(self) -> dict:
        return {"waste_kind": self.waste_kind, "occurrences": self.occurrences,
                "saving_tokens": round(self.saving_tokens, 1), "detail": self.detail,
                "evidence": self.evidence}


# ---------------------------------------------------------------- cost model


def later_turns(run: ParsedRun, turn_index: int) -> int:
    """How many assistant turns after ``turn_index`` re-sent the context holding its output."""
    return sum(1 for t in run.turns if t.index > turn_index)


def carried_cost(tokens: float, later: int) -> float:
    """Weighted tokens of a context item: written to the cache once, read by each later turn."""
    return max(tokens, 0.0) * (CACHE_WRITE_5M_FACTOR + CACHE_READ_FACTOR * later)


def generated_cost(tokens: float, later: int) -> float:
    """Weighted tokens of model-generated text: output price, then carried like any context."""
    return max(tokens, 0.0) * OUTPUT_WEIGHT + carried_cost(tokens, later)


def call_cost(run: ParsedRun, call: ToolCall) -> float:
    """What a whole avoidable call cost: its generated input plus its carried result."""
    later = later_turns(run, call.turn)
    return generated_cost(tokens_of_bytes(call.input_bytes), later) + carried_cost(
        tokens_of_bytes(call.result_bytes), later)


def evidence_of(call: ToolCall, **extra: object) -> dict:
    item: dict = {"index": call.index, "tool_use_id": call.tool_use_id, "tool": call.name,
                  "result_bytes": call.result_bytes}
    if call.path:
        item["path"] = redacted_prefix(call.path, 400)  # shown too: a password in a connection string is not
    elif call.command:
        item["command"] = redacted_prefix(call.command, 200)  # shown (distill --json): never a key
    item.update(extra)
    return item


def _finding(kind: str, calls_and_savings: list[tuple[dict, float]], detail: str) -> Finding | None:
    if not calls_and_savings:
        return None
    saving = sum(s for _, s in calls_and_savings)
    if saving <= 0:
        return None
    return Finding(kind, len(calls_and_savings), saving,
                   [dict(e, saving_tokens=round(s, 1)) for e, s in calls_and_savings[:MAX_EVIDENCE]],
                   detail)


# ---------------------------------------------------------------- helpers over calls


def _is_modifying(call: ToolCall) -> bool:
    return call.kind in ("edit", "write")


def _modified_paths(run: ParsedRun) -> set[str]:
    return {c.path for c in run.tool_calls if _is_modifying(c) and c.path}


def _normalised_command(command: str | None) -> str:
    return " ".join((command or "").split())


def _input_key(call: ToolCall) -> str:
    try:
        return json.dumps(call.input, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(call.input)


def _is_whole_read(call: ToolCall) -> bool:
    return call.kind == "read" and call.line_range is None and not call.is_error


def _edit_bytes(call: ToolCall) -> int:
    """Bytes of text an edit call changes (old + new strings, all parts of a MultiEdit)."""
    def size(value: object) -> int:
        return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0

    parts = call.input.get("edits") if isinstance(call.input.get("edits"), list) else [call.input]
    return sum(size(p.get("old_string")) + size(p.get("new_string")) for p in parts if isinstance(p, dict))


_LINE_PREFIX = re.compile(r"^\s*\d+(?:→|\t)", re.MULTILINE)  # Claude Code's numbered read lines


def _line_bytes(sample: str) -> float:
    lines = sample.count("\n")
    if lines < 3:
        return float(DEFAULT_LINE_BYTES)
    return max(len(sample.encode("utf-8", "surrogatepass")) / lines, 1.0)


# ---------------------------------------------------------------- detectors


def detect_rereads(run: ParsedRun) -> Finding | None:
    """Reads of a file (same path and range) already read and not changed since.

    Uses the parser's ``is_reread`` flag when it set one, and otherwise recomputes it, so a run
    built by any producer gets the same answer."""
    seen: set[tuple[str, object]] = set()
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if _is_modifying(call) and call.path:
            seen = {k for k in seen if k[0] != call.path}
            continue
        if call.kind != "read" or not call.path or call.is_error:
            continue
        key = (call.path, call.line_range)
        if call.is_reread or key in seen:
            items.append((evidence_of(call), call_cost(run, call)))
        seen.add(key)
    return _finding("reread", items, f"{len(items)} re-read(s) of unchanged files")


_CONTENT_SEARCH = re.compile(r"^\s*(grep|rg|ag|ack|git\s+grep)\b")


def detect_blind_reads(run: ParsedRun) -> Finding | None:
    """Whole files opened before any search, in a run that then changed other files.

    The agent was looking for the place to change by reading; a grep for the symbol would have
    located it. Counts whole reads, before the first edit, of files never changed in the run,
    while no content search (grep, rg, git grep) had been run yet."""
    modified = _modified_paths(run)
    if not modified:
        return None
    items: list[tuple[dict, float]] = []
    searched = False
    opened: set[str] = set()  # a second read of the same file is the re-read detector's
    for call in run.tool_calls:
        if call.kind == "grep" or (call.kind == "bash" and _CONTENT_SEARCH.match(call.command or "")):
            searched = True  # a glob or listing finds names, not the code: it does not count
        if _is_modifying(call):
            break
        if searched or not _is_whole_read(call) or not call.path or call.path in modified:
            continue
        if call.path in opened:
            continue
        opened.add(call.path)
        items.append((evidence_of(call), carried_cost(tokens_of_bytes(call.result_bytes),
                                                      later_turns(run, call.turn))))
    return _finding("blind_read", items, f"{len(items)} file(s) opened whole before searching")


def detect_whole_file_reads(run: ParsedRun) -> Finding | None:
    """Whole reads of long files that were then changed only a little.

    The avoidable part is the file beyond a ranged read of :data:`RANGED_READ_LINES` lines,
    sized with the line length measured in the read's sample."""
    edits_by_path: dict[str, int] = {}
    for call in run.tool_calls:
        if call.kind == "edit" and call.path:
            edits_by_path[call.path] = edits_by_path.get(call.path, 0) + _edit_bytes(call)
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if not _is_whole_read(call) or not call.path or call.result_bytes < LONG_FILE_BYTES:
            continue
        changed = edits_by_path.get(call.path)
        if not changed or changed > SMALL_EDIT_FRACTION * call.result_bytes:
            continue
        ranged = min(call.result_bytes, RANGED_READ_LINES * _line_bytes(call.result_text))
        saving = carried_cost(tokens_of_bytes(int(call.result_bytes - ranged)), later_turns(run, call.turn))
        items.append((evidence_of(call, edited_bytes=changed), saving))
    return _finding("whole_file_read", items, f"{len(items)} long file(s) read whole for a small edit")


def detect_repeated_commands(run: ParsedRun) -> Finding | None:
    """An identical shell command run again with nothing changed in between (same output)."""
    last_ok: dict[str, int] = {}
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if _is_modifying(call):
            last_ok.clear()
            continue
        if call.kind != "bash" or not call.command:
            continue
        key = _normalised_command(call.command)
        if key in last_ok:
            items.append((evidence_of(call, first_index=last_ok[key]), call_cost(run, call)))
        elif not call.is_error:
            last_ok[key] = call.index
    return _finding("repeated_command", items, f"{len(items)} identical command(s) re-run")


_USER_REJECTION = "The user doesn't want to"  # Claude Code's result when the human declines a call


def detect_retry_churn(run: ParsedRun) -> Finding | None:
    """A call that failed, retried unchanged (same tool, same input) with nothing changed.

    A call the human declined is not a failure the agent caused; its retry is not churn."""
    failed: dict[tuple[str, str], int] = {}
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if _is_modifying(call) and not call.is_error:
            failed.clear()
        key = (call.name, _input_key(call))
        if key in failed:
            items.append((evidence_of(call, failed_index=failed[key]), call_cost(run, call)))
        if call.is_error and not call.result_text.startswith(_USER_REJECTION):
            failed.setdefault(key, call.index)
        else:
            failed.pop(key, None)
    return _finding("retry_churn", items, f"{len(items)} unchanged retr(y/ies) after an error")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{5,}")


def _salient_words(text: str, exclude: str) -> set[str]:
    words = set(_WORD.findall(text))
    return {w for w in words if w not in exclude}


def detect_ignored_output(run: ParsedRun) -> Finding | None:
    """Long command/search/web outputs of which nothing was used afterwards.

    "Used" = a distinctive word of the output (≥ 6 characters, not in the command itself)
    appears in a later call's input or in later assistant text. Reads are excluded (their
    waste is counted by the read detectors). The avoidable part is the output beyond a
    :data:`SUMMARY_OUTPUT_BYTES` summary. Test runs asked for a line per test (``-v``, ``-rA``)
    count the lines beyond what the quiet run prints (:func:`quiet_test_output_bytes`)."""
    later_text: list[str] = []
    for call in run.tool_calls:
        later_text.append(_input_key(call))
    turn_text = {t.index: t.text for t in run.turns}
    items: list[tuple[dict, float]] = []
    for pos, call in enumerate(run.tool_calls):
        if call.kind in ("read", "edit", "write", "todo", "task") or call.is_error:
            continue
        if call.kind == "bash" and _per_test_report(call):
            # A line per test that nobody reads: everything beyond the quiet run's output.
            excess = call.result_bytes - quiet_test_output_bytes(call)
            if excess > 0:
                items.append((evidence_of(call, quiet_bytes=quiet_test_output_bytes(call)),
                              carried_cost(tokens_of_bytes(excess), later_turns(run, call.turn))))
            continue
        if call.result_bytes < LONG_OUTPUT_BYTES or not call.result_text:
            continue
        words = _salient_words(call.result_text, _input_key(call))
        if not words:
            continue
        after = " ".join(later_text[pos + 1:]) + " " + " ".join(
            text for idx, text in turn_text.items() if idx > call.turn)
        if any(w in after for w in words):
            continue
        saving = carried_cost(tokens_of_bytes(call.result_bytes - SUMMARY_OUTPUT_BYTES), later_turns(run, call.turn))
        items.append((evidence_of(call), saving))
    return _finding("ignored_output", items, f"{len(items)} long output(s) never used afterwards")


_TEST_RUNNER = re.compile(
    r"(?:^|[\s;&|(])(?:python3?\s+-m\s+pytest|pytest|py\.test|npm\s+(?:run\s+)?test|yarn\s+test|pnpm\s+test"
    r"|cargo\s+test|go\s+test|make\s+test|tox|jest|vitest|mvn\s+test|gradle\s+test|rspec)\b")


def test_run_is_targeted(command: str) -> bool | None:
    """None if ``command`` runs no test runner; else whether it selects specific tests."""
    match = _TEST_RUNNER.search(command)
    if not match:
        return None
    rest = re.split(r"[;&|]", command[match.end():], maxsplit=1)[0]
    try:
        args = shlex.split(rest)
    except ValueError:
        args = rest.split()
    for arg in args:
        if arg in ("-k", "-t", "--testNamePattern", "-run", "--lf", "--last-failed", "--deselect") or "::" in arg:
            return True
        if arg.startswith("-") or arg.rstrip("/") in (".", "tests", "test", "./tests", "./test", "spec"):
            continue  # flags, and the whole test directory, select nothing
        if "/" in arg and arg not in ("./...",) or re.search(r"\.(py|js|ts|rs|go|rb|java)$", arg):
            return True
        if match.group(0).strip().startswith(("cargo", "go")) and arg not in ("./...", "test"):
            return True  # `cargo test name_filter`, `go test ./pkg`
    return False


_PER_TEST_REPORT = re.compile(r"(?:^|\s)(?:-v+|--verbose|-r[a-zA-Z]*[AP][a-zA-Z]*)(?=\s|$)")
QUIET_SUMMARY_BYTES = 200  # the summary line(s) a quiet test run still prints


def _per_test_report(call: ToolCall) -> bool:
    """A test run asked to print a line per test (``-v``, ``--verbose``, ``-rA``/``-rP``)."""
    return bool(call.command) and test_run_is_targeted(call.command) is not None and bool(
        _PER_TEST_REPORT.search(call.command))


def quiet_test_output_bytes(call: ToolCall) -> int:
    """What a test run prints without per-test lines: ~1 byte (a dot) per reported line plus a
    summary, with the line count from the result's size and its sample's measured line length."""
    if not _per_test_report(call):
        return call.result_bytes
    lines = call.result_bytes / _line_bytes(call.result_text)
    return min(call.result_bytes, int(lines) + QUIET_SUMMARY_BYTES)


def detect_full_test_suite(run: ParsedRun) -> Finding | None:
    """Full test-suite runs in a run that changed few files, where a targeted run sufficed.

    The avoidable part is the output beyond a targeted run's: the smallest targeted test run of
    the same session when there is one, else :data:`TARGETED_TEST_OUTPUT_BYTES`. Sizes are taken
    as if quiet: per-test report lines are the ignored-output detector's, never counted twice."""
    modified = _modified_paths(run)
    if not modified or len(modified) > MAX_TARGETED_EDIT_FILES:
        return None
    full: list[ToolCall] = []
    targeted_sizes: list[int] = []
    for call in run.tool_calls:
        if call.kind != "bash" or not call.command:
            continue
        targeted = test_run_is_targeted(call.command)
        if targeted is True:
            targeted_sizes.append(quiet_test_output_bytes(call))
        elif targeted is False:
            full.append(call)
    reference = min(targeted_sizes) if targeted_sizes else TARGETED_TEST_OUTPUT_BYTES
    items = [(evidence_of(call), carried_cost(tokens_of_bytes(quiet_test_output_bytes(call) - reference),
                                              later_turns(run, call.turn))) for call in full]
    items = [(e, s) for e, s in items if s > 0]
    return _finding("full_test_suite", items,
                    f"{len(items)} full test-suite run(s) for a change to {len(modified)} file(s)")


_LISTING_COMMAND = re.compile(r"^\s*(ls|tree|find|dir)\b")


def detect_listing_loops(run: ParsedRun) -> Finding | None:
    """The same directory listed (or the same glob run) again with nothing written in between."""
    seen: dict[str, int] = {}
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if _is_modifying(call):
            seen.clear()  # a write can change a listing
            continue
        if call.kind in ("list", "glob"):
            key = f"{call.kind}:{_input_key(call)}"
        elif call.kind == "bash" and call.command and _LISTING_COMMAND.match(call.command):
            key = "bash:" + _normalised_command(call.command)
        else:
            continue
        if key in seen:
            items.append((evidence_of(call, first_index=seen[key]), call_cost(run, call)))
        else:
            seen[key] = call.index
    return _finding("listing_loop", items, f"{len(items)} repeated directory listing(s)")


def _strip_read_numbers(text: str) -> str:
    return _LINE_PREFIX.sub("", text)


def detect_oversized_writes(run: ParsedRun) -> Finding | None:
    """Whole-file writes over an existing file (read or edited before) instead of an edit.

    The avoidable part is the written content beyond what an exact-replacement edit would have
    sent: the changed share, measured by comparing the start of the written content with the
    start of the earlier read (both are in the transcript), plus :data:`EDIT_CONTEXT_BYTES`."""
    existing: dict[str, str] = {}
    items: list[tuple[dict, float]] = []
    for call in run.tool_calls:
        if call.kind == "read" and call.path and not call.is_error:
            existing.setdefault(call.path, _strip_read_numbers(call.result_text))
        elif call.kind == "edit" and call.path:
            existing.setdefault(call.path, "")
        elif call.kind == "write" and call.path and call.path in existing and not call.is_error:
            content = call.input.get("content")
            if not isinstance(content, str):
                continue
            size = len(content.encode("utf-8", "surrogatepass"))
            if size < OVERSIZED_WRITE_BYTES:
                continue
            before = existing[call.path]
            if before:
                sample = content[: len(before)]
                changed = 1.0 - difflib.SequenceMatcher(None, before, sample, autojunk=False).ratio()
            else:
                changed = 1.0  # never seen: assume nothing could be kept (no saving claimed beyond context)
            edit_size = changed * size + EDIT_CONTEXT_BYTES
            avoidable = tokens_of_bytes(int(size - edit_size))
            if avoidable <= 0:
                continue
            items.append((evidence_of(call, written_bytes=size, changed_share=round(changed, 3)),
                          generated_cost(avoidable, later_turns(run, call.turn))))
            existing[call.path] = content[:2000]
    return _finding("oversized_write", items, f"{len(items)} existing file(s) rewritten whole")


def _turn_has_tools(turn) -> bool:  # noqa: ANN001 - records.Turn
    return bool(turn.tool_call_indexes)


def detect_verbose_output(run: ParsedRun) -> Finding | None:
    """Long narration in turns that go on to call tools (not the final answer to the user)."""
    items: list[tuple[dict, float]] = []
    for turn in run.turns:
        if not _turn_has_tools(turn) or len(turn.text) <= VERBOSE_TURN_CHARS:
            continue
        excess = estimate_tokens(turn.text) - estimate_tokens("x" * BRIEF_REPLY_CHARS)
        items.append(({"turn": turn.index, "message_key": turn.message_key, "text_chars": len(turn.text)},
                      generated_cost(excess, later_turns(run, turn.index))))
    return _finding("verbose_output", items, f"{len(items)} long narration(s) between tool calls")


def _prompt_between(run: ParsedRun, earlier, later) -> bool:  # noqa: ANN001 - records.Turn
    if earlier.timestamp is None or later.timestamp is None:
        return False
    return any(p.timestamp is not None and earlier.timestamp < p.timestamp <= later.timestamp
               for p in run.user_prompts)


def detect_plan_churn(run: ParsedRun) -> Finding | None:
    """Several text-only (planning) turns in a row before the agent acts.

    A text-only turn followed, with no user prompt in between, by another assistant turn is a
    planning message; every one after the first of such a streak is churn."""
    items: list[tuple[dict, float]] = []
    turns = run.turns
    streak = 0
    for pos, turn in enumerate(turns):
        nxt = turns[pos + 1] if pos + 1 < len(turns) else None
        planning = (not _turn_has_tools(turn) and bool(turn.text.strip()) and nxt is not None
                    and not _prompt_between(run, turn, nxt))
        if not planning:
            streak = 0
            continue
        streak += 1
        if streak >= 2:
            items.append(({"turn": turn.index, "message_key": turn.message_key, "text_chars": len(turn.text)},
                          generated_cost(estimate_tokens(turn.text), later_turns(run, turn.index))))
    return _finding("plan_churn", items, f"{len(items)} extra planning message(s) before acting")


DETECTORS: tuple[Callable[[ParsedRun], Finding | None], ...] = (
    detect_rereads, detect_blind_reads, detect_whole_file_reads, detect_repeated_commands,
    detect_retry_churn, detect_ignored_output, detect_full_test_suite, detect_listing_loops,
    detect_oversized_writes, detect_verbose_output, detect_plan_churn,
)


def detect_waste(run: ParsedRun) -> list[Finding]:
    """All findings of a run, biggest estimated saving first."""
    findings = [f for f in (detector(run) for detector in DETECTORS) if f is not None]
    for finding in findings:
        assert finding.waste_kind in HABITS_BY_WASTE, finding.waste_kind
    return sorted(findings, key=lambda f: (-f.saving_tokens, f.waste_kind))

