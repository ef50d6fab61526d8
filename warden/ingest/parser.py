"""The transcript parser: Claude Code JSONL lines → one :class:`ParsedRun`. Pure and streaming.

No I/O here: the collector reads files and feeds raw lines (bytes, newline stripped or not). The
parser never raises on line content — every odd line is tolerated and counted in
:class:`LineStats` (``non_utf8``: a line whose fields the ledger reads are not valid UTF-8, read
again with replacement characters; bytes inside fields it never reads are skipped unexamined,
which is what keeps decoding fast) — and it can resume: :meth:`TranscriptParser.state` is a
small JSON-able snapshot, and a parser built from it continues an appended transcript from the
last consumed offset with the same counters, read registry and trace digest (DESIGN.md §3).

Two readers, one behaviour: where the C extension is built (``_skim.c``), :meth:`feed_block`
reads whole lines in C and hands back to :meth:`feed_line` only those it cannot read exactly as
this module does (odd JSON, text that is not UTF-8, rare shapes). This module is the
specification; the tests compare the two paths on the corpus and on generated transcripts.

Usage (the ledger's numbers):

- One API response is written as several lines (one per content block), each repeating
  ``message.id``, ``requestId`` and ``usage``. A response is keyed ``"<message.id>|<requestId>"``
  (the message id alone when ``requestId`` is missing) and the line with the largest counts wins:
  early lines of old versions hold streaming placeholders.
- ``progress`` lines of a running subagent embed its API messages (``data.message``); they are
  reported in :attr:`ParsedRun.embedded_usage` for the subagent's run, never in this run's own
  totals, and the collector's global dedupe counts each once whether or not the subagent's own
  transcript is present.
- ``toolUseResult.usage`` is an aggregate copy of a subagent's usage and never counts.
- Cache writes split into 5-minute and 1-hour TTL from ``usage.cache_creation``; a bare
  ``cache_creation_input_tokens`` counts as 5-minute (its price before 1-hour caching existed).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Callable, Iterable, TypeVar

import msgspec
import orjson

from warden.ingest.pricing import FREE_MODELS, Usage, usage_by_key
from warden.ingest.records import EmbeddedUsage, LineStats, ParsedRun, ToolCall, Turn, UserPrompt, path_key
from warden.names import clean_label, plain_int, storable_text, stored_project, valid_id
from warden.sanitize import one_line, redacted_prefix
from warden.tokens import BYTES_PER_TOKEN, tokens_of_bytes

PARSER_VERSION = "9"  # 3: secrets in the trace digest's commands are redacted; 4: before the cut;
# 5: a run's start and end are its earliest and latest instants, whatever their ISO form;
# 6: secrets in the trace digest's paths are redacted too, and the state's read registry keys
# paths by a digest (a password in a path is not stored, equal paths still match); 7: more key
# shapes and other languages' password labels, keys disguised by invisible or full-width
# characters, and checkpoints' paths are redacted (a re-read refreshes stored checkpoints);
# 8: keys written with look-alike letters (Cyrillic, Greek) and keys glued to the word before
# them ("/home/u/othersk-ant-api03-…", "x_AKIA…") are redacted too; 9: a fractional token count
# reads as 0 (it was truncated), CRLF endings are counted, and a secret in the session's project
# directory (its cwd: session_runs.project, the checkpoints' project) is redacted as in its paths
MAX_RESULT_TEXT = 2048  # chars of a tool result kept on the ToolCall
MAX_PROMPT_TEXT = 2048
MAX_TURN_TEXT = 4096
MAX_DIGEST_STEPS = 400  # the trace digest is for the distiller, not a copy of the transcript
MAX_DIGEST_TARGET = 80
MAX_AWAITING = 256  # tool calls whose result is still to come, remembered across a resume
MAX_READ_REGISTRY = 5000  # distinct (path, range) pairs remembered for re-read detection

BOM = b"\xef\xbb\xbf"

# Record types that carry nothing the ledger needs: skipped without a JSON decode. Claude Code
# writes these with "type" as the first key.
_TYPE_FIRST = b'{"type":"'  # checked before the tuple: most lines start otherwise
_SKIP_PREFIXES = tuple(_TYPE_FIRST + t + b'"' for t in (
    b"file-history-snapshot", b"queue-operation", b"permission-mode", b"last-prompt", b"summary",
    b"custom-title", b"tag"))

TOOL_KIND_BY_NAME: dict[str, str] = {
    # Claude Code tools
    "Read": "read", "NotebookRead": "read",
    "Grep": "grep", "Glob": "glob", "LS": "list",
    "Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit", "Write": "write",
    "Bash": "bash", "BashOutput": "bash", "KillShell": "bash", "KillBash": "bash",
    "Task": "task", "Agent": "task",
    "WebFetch": "web", "WebSearch": "web",
    "TodoWrite": "todo", "TodoRead": "todo", "TaskCreate": "todo", "TaskUpdate": "todo",
    "TaskList": "todo", "TaskGet": "todo",
    # warden's agent harness (bench/agents), which the sim's transcripts use
    "read_file": "read", "grep": "grep", "glob": "glob", "list_dir": "list",
    "edit_file": "edit", "write_file": "write", "run_command": "bash",
}

_INTERRUPT_MARK = "[Request interrupted by user"


_BAD = object()  # sentinel: the line is not JSON


# The line schema: only the fields the ledger reads. msgspec decodes a line straight into these
# structs and skips every other field without building it; ``toolUseResult`` (a second copy of a
# tool's output, often the biggest part of a line) is kept as raw bytes. Every field accepts any
# JSON value except the nesting the parser walks (message, content lists); a line whose nesting
# has another shape is re-shaped by :func:`_reshape` rather than dropped.


_NO_RAW = msgspec.Raw(b"")


class _ResultItem(msgspec.Struct, gc=False):
    """An item of a tool result's content list (text or image)."""

    type: Any = None
    text: Any = None
    source: Any = None


class _Block(msgspec.Struct, gc=False):
    """A content block: text, thinking, tool_use (assistant) or tool_result/text (user)."""

    type: Any = None
    text: Any = None
    thinking: Any = None
    id: Any = None
    name: Any = None
    input: Any = None
    tool_use_id: Any = None
    # A tool result's content (often the biggest part of a line but the copy in toolUseResult):
    # its raw JSON, replaced by its (size, head) as the line is decoded (_read_results).
    content: msgspec.Raw = _NO_RAW
    is_error: Any = None


class _Message(msgspec.Struct, gc=False):
    id: Any = None
    model: Any = None
    usage: Any = None
    stop_reason: Any = None
    content: str | list[_Block] | None = None


class _Line(msgspec.Struct, gc=False):
    type: Any = None
    subtype: Any = None
    sessionId: Any = None
    agentId: Any = None
    isSidechain: Any = None
    cwd: Any = None
    version: Any = None
    timestamp: Any = None
    uuid: Any = None
    requestId: Any = None
    message: _Message | None = None
    isCompactSummary: Any = None
    isMeta: Any = None
    toolUseResult: msgspec.Raw = _NO_RAW
    data: Any = None  # a progress line's payload (small; walked as plain JSON)
    parentToolUseID: Any = None


_LINE_DECODER = msgspec.json.Decoder(_Line)
_CONTENT_DECODER = msgspec.json.Decoder(str | list[_ResultItem] | None)

ResultText = tuple[int, str]  # a tool result's UTF-8 size and leading text (MAX_RESULT_TEXT chars)


def _result_content(raw: msgspec.Raw) -> str | list[_ResultItem] | None:
    """A tool result's content from its raw JSON, as a line's decode read it when it was part of
    the schema: text, or its list of items; an odd shape's odd parts dropped as :func:`_reshape`
    drops them (a list keeps its objects, any other value is no content). Raises
    ``msgspec.DecodeError`` for text that is not Unicode (invalid UTF-8, a lone surrogate):
    its line takes the lenient path."""
    if not raw:
        return None
    try:
        return _CONTENT_DECODER.decode(raw)
    except msgspec.ValidationError:
        value = msgspec.json.decode(raw)
    if value.__class__ is list:
        return [msgspec.convert(item, _ResultItem) for item in value if item.__class__ is dict]
    return None


def _result_text(raw: msgspec.Raw) -> ResultText:
    """A tool result's (size, head) from its raw JSON."""
    return _text_size(_result_content(raw))


def _read_results(record: _Line) -> _Line:
    """``record`` with its tool results' raw content replaced by their (size, head). It runs at
    decode time: content that is not Unicode fails the line's decode (``msgspec.DecodeError``)
    as it did when the content was decoded whole, before anything of the line is counted."""
    message = record.message
    if record.type == "user" and message is not None:
        content = message.content
        if content.__class__ is list:
            for block in content:
                if block.type == "tool_result":
                    block.content = _result_text(block.content)
    return record


def _decode(line: bytes) -> Any:
    """One line → :class:`_Line` (its tool results read); :data:`_BAD` for a
    line that is not JSON (or whose read fields are not UTF-8), and a plain value for JSON that
    is not an object. (A fast path that decoded only the head of tool-result lines saved little
    and consumed a half-written last line.)"""
    try:
        return _read_results(_LINE_DECODER.decode(line))
    except msgspec.ValidationError:
        pass  # valid JSON in an unexpected shape: decode generically, then re-shape
    except (msgspec.DecodeError, RecursionError):  # not JSON, or nested deeper than any decoder goes
        return _BAD
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _BAD
    return _reshape(value) if isinstance(value, dict) else value


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _not_json(constant: str) -> Any:
    """NaN and Infinity: Python's json reads them, JSON (and the first decode) does not."""
    raise ValueError(f"{constant} is not JSON")


def _without_surrogates(value: Any) -> Any:
    """``value`` with lone surrogates replaced by U+FFFD (pairs are kept as the character)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _reshape(record: dict[str, Any]) -> _Line:
    """A record whose nesting differs from the schema, with the odd parts dropped (a message
    that is not an object, content that is neither text nor a list, list items that are not
    objects), as a :class:`_Line`. What remains is read exactly as any other line."""
    message = record.get("message")
    if isinstance(message, dict):
        message = dict(message)
        content = message.get("content")
        if isinstance(content, list):
            blocks = []
            for block in content:
                if isinstance(block, dict):
                    block = dict(block)
                    inner = block.get("content")
                    if isinstance(inner, list):
                        block["content"] = [item for item in inner if isinstance(item, dict)]
                    elif not isinstance(inner, str):
                        block.pop("content", None)
                    blocks.append(block)
            message["content"] = blocks
        elif not isinstance(content, str):
            message.pop("content", None)
        record = {**record, "message": message}
    else:
        record = {k: v for k, v in record.items() if k != "message"}
    # the standard library's encoder: a record of the lenient path may hold integers past 64 bits,
    # which orjson cannot write (and msgspec reads, as on a line's first decode)
    return _read_results(_LINE_DECODER.decode(json.dumps(record).encode()))


def parse_timestamp(value: Any) -> datetime | None:
    """ISO-8601 text → naive UTC datetime; None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    if value[-1] == "Z" and len(value) <= 32:  # Claude Code's own form: UTC, parsed naive directly
        try:
            dt = datetime.fromisoformat(value[:-1])
        except ValueError:
            pass
        else:  # an offset and a Z at once ("…+05:30Z") is no instant
            return dt if dt.tzinfo is None else None
    try:
        dt = datetime.fromisoformat(value)
        if dt.tzinfo is not None:
            dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    except (ValueError, OverflowError):  # OverflowError: an offset that leaves year 1..9999
        return None
    return dt


def _utc_text(value: str) -> str | None:
    """A timestamp as Claude Code writes it ("2026-01-01T10:00:00.000Z"), whose text order is
    time order; another ISO form is rewritten to it, and a non-timestamp is None."""
    if len(value) == 24 and value[-1] == "Z" and value[10] == "T":
        return value
    dt = parse_timestamp(value)
    if dt is None:
        return None
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%S}.{dt.microsecond // 1000:03d}Z"


def _redacted_target(text: str) -> str:
    """A tool call's path or command as the trace digest stores it (run rows, parser state): a
    key in it (a connection string's password, a token in a query) redacted before the cut."""
    return one_line(redacted_prefix(text, 4 * MAX_DIGEST_TARGET), MAX_DIGEST_TARGET)


T = TypeVar("T")

MAX_CACHED_TEXT = 1024  # longer texts (a long command) are not kept as cache keys


def _cached_for_short_texts(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """``fn``, its results cached for texts of up to MAX_CACHED_TEXT characters (anything else is
    passed on uncached): a session reads and edits the same few paths, and runs the same commands,
    over and over, and a project's transcripts all hold its directory."""
    cached = lru_cache(maxsize=4096)(fn)

    def call(text: Any) -> T:
        return cached(text) if text.__class__ is str and len(text) <= MAX_CACHED_TEXT else fn(text)

    call.__doc__ = f":func:`{fn.__name__}`, cached for short texts."
    return call


_digest_target = _cached_for_short_texts(_redacted_target)
_path_key = _cached_for_short_texts(path_key)
_stored_project = _cached_for_short_texts(stored_project)


MAX_COUNT = 10**15  # no API response has this many tokens; larger would overflow the ledger's sums


def _count(value: Any) -> int:
    """A token count from untrusted JSON: an int (or integral float) in [0, MAX_COUNT), else 0
    (a fractional count is no count an API reply writes: zeroed and flagged, not truncated)."""
    if value.__class__ is int:
        return value if 0 < value < MAX_COUNT else 0
    if type(value) is float and value.is_integer() and 0 < value < MAX_COUNT:
        return int(value)
    return 0


def _readable_count(value: Any, *, required: bool) -> bool:
    """Whether :func:`_count` reads ``value`` as it is: an int (or integral float) in
    [0, MAX_COUNT), or an absent optional count (anything else it reads as 0)."""
    if value is None:
        return not required
    if value.__class__ is int:
        return 0 <= value < MAX_COUNT
    return type(value) is float and value.is_integer() and 0 <= value < MAX_COUNT


def zeroed_counts(raw: Any) -> bool:
    """Whether reading the ``usage`` object ``raw`` zeroed a count no API reply could hold: a
    missing input or output count, or a negative, non-integral or absurd one (counted in
    :attr:`LineStats.zeroed_usage`, free models' replies aside; the bench refuses to price such
    a run)."""
    if not isinstance(raw, dict):
        return False
    split = raw.get("cache_creation")
    split_counts = (split.get("ephemeral_5m_input_tokens"), split.get("ephemeral_1h_input_tokens")) \
        if isinstance(split, dict) else ()
    return not (_readable_count(raw.get("input_tokens"), required=True)
                and _readable_count(raw.get("output_tokens"), required=True)
                and all(_readable_count(v, required=False) for v in (
                    raw.get("cache_creation_input_tokens"), raw.get("cache_read_input_tokens"), *split_counts)))


def usage_from_json(raw: Any) -> Usage | None:
    """The five counts of an API ``usage`` object, or None if it is not one."""
    if not isinstance(raw, dict):
        return None
    creation_total = _count(raw.get("cache_creation_input_tokens"))
    split = raw.get("cache_creation")
    w5 = w1 = 0
    if isinstance(split, dict) and ("ephemeral_5m_input_tokens" in split or "ephemeral_1h_input_tokens" in split):
        w5 = _count(split.get("ephemeral_5m_input_tokens"))
        w1 = _count(split.get("ephemeral_1h_input_tokens"))
        # The split never undercounts the total the API billed; any remainder is 5-minute.
        if creation_total > w5 + w1:
            w5 += creation_total - (w5 + w1)
    else:
        w5 = creation_total
    return Usage(input_tokens=_count(raw.get("input_tokens")), output_tokens=_count(raw.get("output_tokens")),
                 cache_write_5m=w5, cache_write_1h=w1, cache_read=_count(raw.get("cache_read_input_tokens")))


UsageCounts = tuple[int, int, int, int, int, bool]  # the five counts of Usage, and zeroed_counts


def _usage_counts(raw: Any) -> UsageCounts | None:
    """:func:`usage_from_json`'s counts and :func:`zeroed_counts` of one usage object at once
    (None for one that is not a dict)."""
    usage = usage_from_json(raw)
    if usage is None:
        return None
    return (usage.input_tokens, usage.output_tokens, usage.cache_write_5m, usage.cache_write_1h, usage.cache_read,
            zeroed_counts(raw))


def fast_path() -> Any:
    """The C fast path (``warden.ingest._skim``: whole lines read in C), or None where it was not
    built (no compiler at install time) or WARDEN_PURE_PYTHON is set: then every line is read
    here, by the pure-Python parser that is the fast path's specification."""
    if os.environ.get("WARDEN_PURE_PYTHON"):
        return None
    try:
        from warden.ingest import _skim
    except ImportError:
        return None
    return _skim


def fast_reader() -> Any:
    """The C fast path's record reader (:func:`fast_path`), or None where there is none."""
    skim = fast_path()
    return None if skim is None else _fast_reader(skim)


_NO_USAGE = Usage()  # frozen: one instance serves every turn without counts

_READER: Any = None


def _fast_reader(skim: Any) -> Any:
    """The C fast path's record reader (``skim.Reader``), made once per process from this
    module's records, helpers and limits: it reads whole lines as :meth:`TranscriptParser.feed_line`
    does, and hands every line it cannot read exactly back to it (see ``_skim.c``)."""
    global _READER
    if _READER is None:
        _READER = skim.Reader(
            usage=Usage, turn=Turn, tool_call=ToolCall, user_prompt=UserPrompt, no_usage=_NO_USAGE,
            tool_kinds=TOOL_KIND_BY_NAME, free_models=FREE_MODELS, valid_id=valid_id, stored_project=_stored_project,
            clean_label=clean_label, model_name=_model_name, path_key=_path_key, digest_target=_digest_target,
            parse_timestamp=parse_timestamp, utc_text=_utc_text, decode=msgspec.json.decode,
            max_result_text=MAX_RESULT_TEXT, max_prompt_text=MAX_PROMPT_TEXT, max_turn_text=MAX_TURN_TEXT,
            max_digest_steps=MAX_DIGEST_STEPS, max_awaiting=MAX_AWAITING, max_read_registry=MAX_READ_REGISTRY,
            bytes_per_token=BYTES_PER_TOKEN)
    return _READER


def _kept_usage(kept: Any) -> Any:
    """A response's last raw usage as a value: the C reader keeps its JSON bytes (decoded only
    when a line of the response read here compares them), the lines read here their value."""
    return msgspec.json.decode(kept) if kept.__class__ is bytes else kept


def _usage_rank(u: Usage) -> tuple[int, int]:
    return (u.total, u.output_tokens)


def _utf8_size(text: str) -> int:
    """The UTF-8 size of ``text`` (a lone surrogate as 3 bytes)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _text_size(content: str | list[_ResultItem] | None) -> tuple[int, str]:
    """UTF-8 size and leading text of a tool result's content (string or list of items)."""
    if content.__class__ is str:
        return _utf8_size(content), content[:MAX_RESULT_TEXT]
    if content:
        size = head_len = 0
        head: list[str] = []
        for item in content:
            text = item.text
            if isinstance(text, str):
                size += _utf8_size(text)
                if head_len < MAX_RESULT_TEXT:
                    head.append(text)
                    head_len += len(text)
            elif item.type == "image":
                source = item.source
                data = source.get("data") if isinstance(source, dict) else None
                size += len(data) if isinstance(data, str) else 0
        return size, "\n".join(head)[:MAX_RESULT_TEXT]
    return 0, ""


def _model_name(value: Any) -> str:
    """A message's model as stored: the plain string (the common case, checked cheaply), else
    cleaned of controls, else "unknown"."""
    if value.__class__ is str and value and value.isprintable():
        return value
    return clean_label(value) or "unknown"


def _as_int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if isinstance(value, str):
        return plain_int(value, max_digits=11)
    return None


@dataclass
class _State:
    """Everything a resumed parse needs from the lines before the offset (JSON-able)."""

    session_id: str | None = None
    agent_id: str | None = None
    cwd: str | None = None
    version: str | None = None
    models: list[str] = field(default_factory=list)
    first_ts: str | None = None
    last_ts: str | None = None
    counters: dict[str, int] = field(default_factory=dict)  # tool_calls, reads, rereads, ...
    stats: dict[str, int] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)  # "path key\x00range" -> edit generation at read
    edit_gen: dict[str, int] = field(default_factory=dict)  # path key -> edits so far
    digest: list[list[Any]] = field(default_factory=list)
    digest_dropped: int = 0
    subagent_types: dict[str, str] = field(default_factory=dict)  # agentId -> subagent_type
    task_types: dict[str, str] = field(default_factory=dict)  # Task tool_use id -> subagent_type
    # tool_use id -> its digest step, until its result arrives (maybe after a resume)
    awaiting: dict[str, int] = field(default_factory=dict)
    last_turn_tools: bool = False
    last_turn_text: bool = False
    last_stop_reason: str | None = None
    interrupted: bool = False
    tool_index: int = 0
    turn_index: int = 0
    placeholder_turns: int = 0
    usage_turns: int = 0
    # the last response before the offset, not yet judged by the placeholder check (its next
    # lines may come after the offset): [message key, model, output tokens, content bytes, total tokens]
    open_turn: list[Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "_State":
        state = cls()
        if isinstance(data, dict):
            for key, value in data.items():
                if key in state.__dict__ and isinstance(value, type(state.__dict__[key]) if state.__dict__[key] is not None else object):
                    setattr(state, key, value)
        return state


def _carried_turn(value: Any) -> list[Any] | None:
    """A state's open response, if it has the shape :meth:`TranscriptParser.state` writes (a state
    is stored JSON: anything else is dropped, not trusted)."""
    if (isinstance(value, list) and len(value) == 5 and isinstance(value[0], str) and isinstance(value[1], str)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value[2:])):
        return value
    return None


def _joined(carried: list[Any], turn: Turn) -> list[Any]:
    """A response read in two parts, as one turn of a whole read: its first line's model, the
    usage the turn-level dedupe keeps (the larger by :func:`_usage_rank`), the content of both."""
    later = turn.usage
    output, total = ((later.output_tokens, later.total) if (later.total, later.output_tokens) > (carried[4], carried[2])
                     else (carried[2], carried[4]))
    return [carried[0], carried[1], output, carried[3] + turn.content_bytes, total]


def _placeholder_verdict(model: str, output_tokens: int, content_bytes: int) -> tuple[int, int]:
    """(counts as a response, is a placeholder) of the placeholder check: an output count far
    below the content the response produced (a synthetic reply is no response of the model)."""
    if model == "<synthetic>":
        return 0, 0
    content_tokens = tokens_of_bytes(content_bytes)
    return 1, int(content_tokens >= 8 and output_tokens * 4 < content_tokens)


def _placeholder_verdicts(turns: list[Turn]) -> tuple[int, int]:
    """:func:`_placeholder_verdict` of each turn, summed: (responses, placeholders). The C
    reader's ``placeholder_verdicts`` reads the same from the turns' slots."""
    responses = placeholders = 0
    for turn in turns:
        response, placeholder = _placeholder_verdict(turn.model, turn.usage.output_tokens, turn.content_bytes)
        responses += response
        placeholders += placeholder
    return responses, placeholders


def _turn_summary(turn: Turn) -> list[Any]:
    return [turn.message_key, turn.model, turn.usage.output_tokens, turn.content_bytes, turn.usage.total]


class TranscriptParser:
    """Feeds raw transcript lines into a :class:`ParsedRun`; see the module docstring."""

    def __init__(self, *, session_id: str | None = None, agent_id: str | None = None,
                 agent_type: str | None = None, source_path: str = "", start_offset: int = 0,
                 state: dict[str, Any] | None = None, pure: bool = False, ledger_only: bool = False) -> None:
        """``pure``: without the C fast path (the reference it is tested against). ``ledger_only``:
        a parse for the ledger alone, whose :meth:`result` holds no turns, tool calls or prompts
        and no per-model sums, but its turns' usage (:attr:`ParsedRun.turn_usage`): the C reader
        then builds none of them."""
        self._s = _State.from_json(state)
        if self._s.cwd is not None:  # a state kept before the cwd was redacted; a redacted one stays
            self._s.cwd = _stored_project(self._s.cwd)
        skim = None if pure else fast_path()  # looked up once: an environment read and an import
        self._reader = None if skim is None else _fast_reader(skim)
        self.ledger_only = ledger_only
        self._ledger_only = ledger_only and self._reader is not None  # what the C reader skips
        self._ledger_prompts = 0  # prompts the C reader saw but did not build (ledger only)
        self._hint_session = session_id
        self._hint_agent = agent_id
        self.agent_type = agent_type
        self.source_path = source_path
        self.start_offset = start_offset
        self.offset = start_offset  # just past the last complete line consumed
        self.turns: list[Turn] = []
        self.tool_calls: list[ToolCall] = []
        self.user_prompts: list[UserPrompt] = []
        self.embedded: dict[str, EmbeddedUsage] = {}
        self.compactions = 0
        self._turn_by_key: dict[str, int] = {}
        self._call_by_id: dict[str, int] = {}
        self._raw_usage: dict[str, Any] = {}  # message key -> last raw usage object seen
        self._last_ts_text: Any = None
        self._last_ts: datetime | None = None
        self._checked_turns = 0  # turns already through the placeholder check
        self.stats = LineStats(**{k: v for k, v in self._s.stats.items() if k in LineStats.__dataclass_fields__})

    # ------------------------------------------------------------------ feeding

    def feed(self, raw: bytes, *, end_offset: int | None = None) -> bool:
        """One raw line as read (with its newline unless it is the last, unterminated one).
        Returns False for a truncated final line, which is not consumed: the offset stays before
        it, so a later read sees it whole."""
        if raw.endswith(b"\n"):
            return self.feed_line(raw[:-1], complete=True, end_offset=end_offset)
        return self.feed_line(raw, complete=False, end_offset=end_offset)

    def feed_block(self, data: bytes, upto: int, offset: int, max_line: int) -> None:
        """The complete lines of ``data[:upto]`` (``upto``: the index of its last newline;
        ``offset``: the file offset of ``data[0]``), each longer than ``max_line`` skipped unread:
        read by the C fast path where it is built, else framed and fed line by line."""
        if self._reader is not None:
            self._reader.feed_block(self, data, upto, offset, max_line)
            return
        lines: list[bytes | None] = []
        ends: list[int] = []
        for line in data[:upto].split(b"\n"):
            offset += len(line) + 1
            lines.append(line if len(line) <= max_line else None)
            ends.append(offset)
        self.feed_lines(lines, ends)

    def _feed_fallback(self, line: bytes, end_offset: int) -> None:
        """A complete line the C reader leaves to this parser (``_reader.c``)."""
        self.feed_line(line, complete=True, end_offset=end_offset)

    def feed_oversized(self, end_offset: int) -> None:
        """A line longer than the reader's cap, skipped unread."""
        self.stats.lines += 1
        self.stats.oversized += 1
        self.offset = end_offset

    def feed_lines(self, lines: list[bytes | None], ends: list[int], *, complete: bool = True) -> bool:
        """A batch of lines as the reader frames them: each without its newline (None: a line
        longer than the reader's cap, skipped unread) with its end offset; ``complete`` is False
        when the last one is unterminated. What :meth:`feed_line` does line by line, with one call
        per batch; returns what it returns for the last line."""
        decode, read, stats = _LINE_DECODER.decode, self._record, self.stats
        last = len(lines) - 1
        consumed = True
        for i, line in enumerate(lines):
            end = ends[i]
            if line is None:
                self.feed_oversized(end)
                consumed = True
                continue
            # 123, 125: "{" and "}" (indexing is cheaper than slicing)
            if line and line[0] == 123 and line[-1] == 125 and not (line.startswith(_TYPE_FIRST)
                                                                    and line.startswith(_SKIP_PREFIXES)):
                # The common case, without _feed's checks: an object line of the schema's shape.
                # Any other (odd nesting, not JSON, not UTF-8) takes feed_line from the start.
                try:
                    record = _read_results(decode(line))
                except Exception:
                    pass
                else:
                    stats.lines += 1  # _take, inline: a decoded object is a _Line here
                    self.offset = end
                    try:
                        read(record)
                    except Exception:  # never raise on content (as feed_line)
                        self._count_malformed(end)
                    consumed = True
                    continue
            consumed = self.feed_line(line, complete=complete or i < last, end_offset=end)
        return consumed

    def feed_line(self, line: bytes, *, complete: bool = True, end_offset: int | None = None) -> bool:
        """One line without its newline; ``complete`` is False for an unterminated last line."""
        try:
            return self._feed(line, complete, end_offset)
        except Exception:  # never raise on content: count it and move on
            self._count_malformed(end_offset)
            return True

    def _count_malformed(self, end_offset: int | None) -> None:
        """A line whose reading raised: counted as malformed, and consumed."""
        self.stats.malformed += 1
        if end_offset is not None:
            self.offset = end_offset

    def _feed(self, line: bytes, complete: bool, end_offset: int | None) -> bool:
        if not (line[:1] == b"{" and line[-1:] == b"}"):  # the common case skips these checks
            if line.endswith(b"\r"):
                self.stats.crlf += complete  # an unterminated line's "\r" ends nothing yet
                line = line[:-1]
            if line.startswith(BOM):
                self.stats.bom += 1
                line = line[3:]
        if not line or line.isspace():
            if complete:
                self.stats.lines += 1
                self.stats.blank += 1
                if end_offset is not None:
                    self.offset = end_offset
            return True
        if line.startswith(_SKIP_PREFIXES) and (complete or line.endswith(b"}")):
            self.stats.lines += 1
            if end_offset is not None:
                self.offset = end_offset
            return True
        record = _decode(line)
        if record is _BAD:
            record = self._decode_lenient(line)
            if record is _BAD:
                if not complete:
                    # A final line with no newline that does not parse: still being written.
                    self.stats.truncated += 1
                    return False
                self.stats.lines += 1
                self.stats.malformed += 1
                if end_offset is not None:
                    self.offset = end_offset
                return True
        self._take(record, end_offset)
        return True

    def _take(self, record: Any, end_offset: int | None) -> None:
        """A line decoded: counted, consumed, and read if it is a record (an object)."""
        self.stats.lines += 1
        if end_offset is not None:
            self.offset = end_offset
        if record.__class__ is not _Line:
            self.stats.malformed += 1
            return
        self._record(record)

    def _decode_lenient(self, line: bytes) -> Any:
        """Invalid UTF-8, or a lone UTF-16 surrogate escape (valid JSON that Node writes when it
        cuts an emoji in half, but no Unicode text), gets a second chance with replacement
        characters (counted as non-UTF-8)."""
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if _SURROGATE_ESCAPE.search(line) is None:
                return _BAD  # valid UTF-8, so the JSON itself is broken
            try:
                value = json.loads(line, parse_constant=_not_json)
            except (ValueError, RecursionError):
                return _BAD
            if not isinstance(value, dict):
                return _BAD
            self.stats.non_utf8 += 1
            return _reshape(_without_surrogates(value))
        record = _decode(line.decode("utf-8", "replace").encode("utf-8"))
        if record is not _BAD:
            self.stats.non_utf8 += 1
        return record

    # ------------------------------------------------------------------ records

    def _record(self, rec: _Line) -> None:
        s = self._s
        if s.session_id is None:
            sid = rec.sessionId
            if sid is not None and valid_id(sid):
                s.session_id = sid
        if s.agent_id is None:
            aid = rec.agentId
            if aid is not None and valid_id(aid) and rec.isSidechain is not False:
                s.agent_id = aid
        if s.cwd is None:
            cwd = rec.cwd
            if isinstance(cwd, str) and cwd:
                s.cwd = _stored_project(cwd)  # a key or password in it redacted, as in a file path
        version = rec.version
        if version is not None and version != s.version and isinstance(version, str) and version:
            s.version = version
        ts = rec.timestamp
        if ts.__class__ is str and ts:
            # compared as text: one form, so text order is time order (_utc_text's common case, inline)
            instant = ts if len(ts) == 24 and ts[-1] == "Z" and ts[10] == "T" else _utc_text(ts)
            if instant is not None:
                last = s.last_ts
                if last is None or instant > last:
                    s.last_ts = instant
                    if s.first_ts is None:
                        s.first_ts = instant
                elif instant < s.first_ts:  # type: ignore[operator]
                    s.first_ts = instant
        kind = rec.type
        if kind == "assistant":
            self._assistant(rec, ts)
        elif kind == "user":
            self._user(rec, ts)
        elif kind == "progress":
            self._progress(rec)
        elif kind == "system":
            if rec.subtype == "compact_boundary":
                self.compactions += 1

    def _when(self, ts: Any) -> datetime | None:
        """parse_timestamp with a one-entry cache: a response's lines share their timestamp."""
        if ts is not self._last_ts_text and ts != self._last_ts_text:
            self._last_ts_text = ts
            self._last_ts = parse_timestamp(ts)
        return self._last_ts

    def _message_key(self, mid: Any, rid: Any, uuid: Any) -> str:
        """A response's dedupe key from its message id, request id and (fallback) line uuid."""
        if isinstance(mid, str) and mid:
            key = f"{mid}|{rid}" if isinstance(rid, str) and rid else mid
            return storable_text(key)
        if isinstance(uuid, str) and uuid:
            return storable_text(f"uuid:{uuid}")
        return f"line:{self.source_path}:{self.offset}"

    def _assistant(self, rec: _Line, ts: Any) -> None:
        message = rec.message
        if message is None:
            return
        mid = message.id
        if mid.__class__ is str and mid:  # _message_key's common case, inline
            rid = rec.requestId
            key = f"{mid}|{rid}" if rid.__class__ is str and rid else mid
            if "\x00" in key:  # storable_text's test, without a call for the common key
                key = storable_text(key)
        else:
            key = self._message_key(mid, rec.requestId, rec.uuid)
        index = self._turn_by_key.get(key)
        raw_usage = message.usage
        if index is not None and raw_usage is not None and raw_usage == _kept_usage(self._raw_usage.get(key)):
            usage = None  # the same counts streamed again on the response's next line
            zeroed = False
            self.stats.duplicate_usage += 1
        else:
            counts = _usage_counts(raw_usage)
            usage, zeroed = (Usage(*counts[:5]), counts[5]) if counts is not None else (None, False)
            self._raw_usage[key] = raw_usage
        model = message.model
        if not (model.__class__ is str and model and model.isprintable()):  # _model_name's common case, inline
            model = _model_name(model)
        if zeroed and model not in FREE_MODELS:
            self.stats.zeroed_usage += 1
        s = self._s
        if index is None:
            index = s.turn_index
            s.turn_index += 1
            # every field in order: index, message_key, model, usage, timestamp, text,
            # tool_call_indexes, content_bytes
            turn = Turn(index, key, model, usage or _NO_USAGE, self._when(ts), "", [], 0)
            self.turns.append(turn)
            self._turn_by_key[key] = len(self.turns) - 1
            if model not in s.models and model != "<synthetic>":
                s.models.append(model)
            s.last_turn_tools = False
            s.last_turn_text = False
            s.interrupted = False
        else:
            turn = self.turns[index]
            if usage is not None:
                self.stats.duplicate_usage += 1
                if _usage_rank(usage) > _usage_rank(turn.usage):
                    turn.usage = usage
        stop = message.stop_reason
        if isinstance(stop, str):
            s.last_stop_reason = stop
        content = message.content
        if content.__class__ is list:
            for block in content:
                btype = block.type
                if btype == "text":
                    text = block.text
                    if isinstance(text, str):
                        self._turn_text(turn, text)
                elif btype == "tool_use":
                    self._tool_use(turn, block, ts)
                elif btype == "thinking":
                    thinking = block.thinking
                    if isinstance(thinking, str):
                        turn.content_bytes += len(thinking)
        elif content is not None:
            self._turn_text(turn, content)

    def _turn_text(self, turn: Turn, text: str) -> None:
        if "\x00" in text:  # storable_text's test, without a call for the common text
            text = storable_text(text)
        if text and not text.isspace():  # text.strip() is not empty, without copying a long text
            self._s.last_turn_text = True
        turn.content_bytes += len(text)
        if len(turn.text) < MAX_TURN_TEXT:
            turn.text = (turn.text + text)[:MAX_TURN_TEXT]

    def _tool_use(self, turn: Turn, block: _Block, ts: Any) -> None:
        s = self._s
        tool_id = block.id
        tool_id = tool_id if isinstance(tool_id, str) else ""
        if tool_id and tool_id in self._call_by_id:
            return  # the same content block written twice
        name = block.name
        name = name if isinstance(name, str) else "?"
        raw_input = block.input
        tool_input = raw_input if isinstance(raw_input, dict) else {}
        kind = TOOL_KIND_BY_NAME.get(name, "other")
        try:
            input_bytes = len(orjson.dumps(tool_input))
        except (TypeError, orjson.JSONEncodeError):
            input_bytes = 0
        turn.content_bytes += input_bytes
        index = s.tool_index
        s.tool_index += 1
        counters = s.counters
        counters["tool_calls"] = counters.get("tool_calls", 0) + 1
        # the call's fields found first, so that it is built whole (no attribute set after)
        path = tool_input.get("file_path", tool_input.get("path", tool_input.get("notebook_path")))
        if not (isinstance(path, str) and path):
            path = None
        line_range: tuple[int, int] | None = None
        command: str | None = None
        is_reread = False
        if kind == "read" and path:
            offset, limit = _as_int(tool_input.get("offset")), _as_int(tool_input.get("limit"))
            if offset is not None or limit is not None:
                line_range = (offset or 0, limit or 0)
            counters["reads"] = counters.get("reads", 0) + 1
            key = _path_key(path)
            reg_key = f"{key}\x00{line_range}"
            reads = s.reads
            generation = s.edit_gen.get(key, 0)
            if reads.get(reg_key) == generation:
                is_reread = True
                counters["rereads"] = counters.get("rereads", 0) + 1
            elif len(reads) < MAX_READ_REGISTRY or reg_key in reads:
                reads[reg_key] = generation
        elif kind == "edit" or kind == "write":
            counters["edits"] = counters.get("edits", 0) + 1
            if path:
                key = _path_key(path)
                s.edit_gen[key] = s.edit_gen.get(key, 0) + 1
        elif kind == "grep":
            counters["greps"] = counters.get("greps", 0) + 1
        if kind == "grep" or kind == "glob":
            pattern = tool_input.get("pattern")
            command = pattern if isinstance(pattern, str) else None
        elif kind == "bash":
            text = tool_input.get("command")
            command = text if isinstance(text, str) else None
        elif kind == "task":
            subagent_type = clean_label(tool_input.get("subagent_type"))
            if subagent_type and tool_id:
                s.task_types[tool_id] = subagent_type
        # every field in order: index, tool_use_id, name, kind, input, input_bytes, path, line_range,
        # command, result_bytes, result_text, is_error, is_reread, timestamp, turn
        call = ToolCall(index, tool_id, name, kind, tool_input, input_bytes, path, line_range, command, 0, "",
                              False, is_reread, self._when(ts), turn.index)
        calls = self.tool_calls
        calls.append(call)
        turn.tool_call_indexes.append(index)
        if tool_id:
            self._call_by_id[tool_id] = len(calls) - 1
        s.last_turn_tools = True
        digest = s.digest
        if len(digest) < MAX_DIGEST_STEPS:
            digest.append([kind, _digest_target(path or command or ""), input_bytes, 0, 0])
            if tool_id:
                awaiting = s.awaiting
                if len(awaiting) >= MAX_AWAITING:  # results that never came: forget the oldest
                    del awaiting[next(iter(awaiting))]
                awaiting[tool_id] = len(digest) - 1
        else:
            s.digest_dropped += 1

    def _user(self, rec: _Line, ts: Any) -> None:
        s = self._s
        message = rec.message
        if message is None:
            return
        if rec.isCompactSummary is True:
            self.compactions += 1
            return
        content = message.content
        if content is None:
            return
        if content.__class__ is str:
            self._prompt(content, ts, rec)
            return
        for block in content:
            btype = block.type
            if btype == "tool_result":
                self._tool_result(block)
            elif btype == "text":
                text = block.text
                if isinstance(text, str):
                    self._prompt(text, ts, rec)
        # toolUseResult of a Task call names the subagent it ran (old flat layout has no sidecar).
        if s.task_types and rec.toolUseResult:
            agent_types = [s.task_types.get(str(block.tool_use_id)) for block in content if block.type == "tool_result"]
            agent_types = [t for t in agent_types if t]
            if agent_types:
                try:
                    result = orjson.loads(memoryview(rec.toolUseResult))
                except orjson.JSONDecodeError:  # raw bytes: never UTF-8-checked by the line decode
                    result = None
                agent_id = valid_id(result.get("agentId")) if isinstance(result, dict) else None
                if agent_id:
                    for agent_type in agent_types:
                        s.subagent_types[agent_id] = agent_type

    def _prompt(self, text: str, ts: Any, rec: _Line) -> None:
        text = storable_text(text)
        if text.startswith(_INTERRUPT_MARK):
            self._s.interrupted = True
            return
        if rec.isMeta is True or text.startswith(("<command-", "<local-command", "Caveat:")):
            return
        if text.strip():
            self.user_prompts.append(UserPrompt(text=text[:MAX_PROMPT_TEXT], timestamp=self._when(ts)))

    def _tool_result(self, block: _Block) -> None:
        s = self._s
        is_error = block.is_error is True
        size, head = block.content  # read at decode time (_read_results)
        if is_error:
            s.counters["failed"] = s.counters.get("failed", 0) + 1
        if head.startswith(_INTERRUPT_MARK):
            s.interrupted = True
        tool_id = str(block.tool_use_id)
        pos = s.awaiting.pop(tool_id, None)
        if pos is not None and pos < len(s.digest):
            s.digest[pos][3] = size
            s.digest[pos][4] = 1 if is_error else 0
        index = self._call_by_id.get(tool_id)
        if index is None:
            return
        call = self.tool_calls[index]
        call.result_bytes = size
        call.result_text = head
        call.is_error = is_error

    def _progress(self, rec: _Line) -> None:
        data = rec.data
        if not isinstance(data, dict):
            return
        inner = data.get("message")
        if not isinstance(inner, dict) or inner.get("type") != "assistant":
            return
        message = inner.get("message")
        if not isinstance(message, dict):
            return
        counts = _usage_counts(message.get("usage"))
        if counts is None:
            return
        usage = Usage(*counts[:5])
        # requestId sits on the embedded record, like on a transcript line.
        key = self._message_key(message.get("id"), inner["requestId"] if "requestId" in inner else rec.requestId,
                                inner.get("uuid") if "requestId" in inner else rec.uuid)
        agent_id = valid_id(data.get("agentId"))
        model = message.get("model")
        model = _model_name(model)
        if counts[5] and model not in FREE_MODELS:
            self.stats.zeroed_usage += 1
        previous = self.embedded.get(key)
        if previous is not None:
            self.stats.duplicate_usage += 1
            if _usage_rank(usage) <= _usage_rank(previous.usage):
                return
        self.embedded[key] = EmbeddedUsage(key, agent_id, model, usage,
                                           parse_timestamp(inner.get("timestamp") or rec.timestamp))
        parent_tool = rec.parentToolUseID
        if agent_id and isinstance(parent_tool, str):
            agent_type = self._s.task_types.get(parent_tool)
            if agent_type:
                self._s.subagent_types[agent_id] = agent_type

    # ------------------------------------------------------------------ results

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot to resume from :attr:`offset` (turn-level dedupe restarts there;
        the collector's global dedupe keeps a response split across the offset counted once)."""
        self._finish_turns()
        self._s.open_turn = self._open_turn()
        self._checked_turns = len(self.turns)  # the open one is carried in the state, not judged
        snapshot = self._s.to_json()
        # a truncated last line was not consumed: the next read counts it again (or reads it whole)
        snapshot["stats"] = {**self.stats.__dict__, "truncated": 0}
        return snapshot

    def _finish_turns(self) -> None:
        """Placeholder check per response, all but the last: its next lines may come after the
        offset (Claude Code writes a response as several lines), so it stays open — judged with
        what a resumed parse adds to it (:meth:`_open_turn`), as a whole read would judge it."""
        s = self._s
        carried = _carried_turn(s.open_turn)
        first, last = self._checked_turns, len(self.turns) - 1
        if carried is not None and first < last:
            turn = self.turns[first]
            if turn.message_key == carried[0]:  # the rest of the response left open
                self._judge(*_joined(carried, turn)[1:4])
                first += 1
            else:
                self._judge(carried[1], carried[2], carried[3])
            s.open_turn = None
        if first < last:
            responses, placeholders = (_placeholder_verdicts(self.turns[first:last]) if self._reader is None
                                       else self._reader.placeholder_verdicts(self.turns, first, last))
            s.usage_turns += responses
            s.placeholder_turns += placeholders
        self._checked_turns = max(self._checked_turns, last)

    def _open_turn(self) -> list[Any] | None:
        """The response still open after :meth:`_finish_turns`: the last one (with the part a
        parse before the offset left open, if it continues it), else what that parse left."""
        carried = _carried_turn(self._s.open_turn)
        if len(self.turns) <= self._checked_turns:
            return carried
        last = self.turns[-1]
        if carried is not None and carried[0] == last.message_key:
            return _joined(carried, last)
        if carried is not None:  # a response of its own, complete: the next one began
            self._judge(carried[1], carried[2], carried[3])
            self._s.open_turn = None
        return _turn_summary(last)

    def _judge(self, model: str, output_tokens: int, content_bytes: int) -> None:
        """One response through the placeholder check, counted in the state."""
        usage_turn, placeholder = _placeholder_verdict(model, output_tokens, content_bytes)
        self._s.usage_turns += usage_turn
        self._s.placeholder_turns += placeholder

    def result(self) -> ParsedRun:
        self._finish_turns()
        s = self._s
        # the open response judged as if the transcript ended here (a whole read of these bytes),
        # in a copy: the state keeps it open for the lines still to come
        open_turn = self._open_turn()  # (judges a carried response the next one closed)
        usage_turns, placeholder_turns = s.usage_turns, s.placeholder_turns
        if open_turn is not None:
            usage_turn, placeholder = _placeholder_verdict(open_turn[1], open_turn[2], open_turn[3])
            usage_turns, placeholder_turns = usage_turns + usage_turn, placeholder_turns + placeholder
        session_id = s.session_id or self._hint_session or ""
        agent_id = s.agent_id or self._hint_agent
        # a ledger-only parse keeps its turns' usage, not its sums (its reader sums the rows)
        usage_by_model = {} if self.ledger_only else usage_by_key(
            (t.model, t.usage.input_tokens, t.usage.output_tokens, t.usage.cache_write_5m, t.usage.cache_write_1h,
             t.usage.cache_read) for t in self.turns)
        counters = s.counters
        placeholder = placeholder_turns > 0 and placeholder_turns * 10 >= usage_turns
        completed = (s.last_turn_text and not s.last_turn_tools and not s.interrupted
                     and s.last_stop_reason in (None, "end_turn", "stop_sequence"))
        run = ParsedRun(
            session_id=session_id, agent_id=agent_id, agent_type=self.agent_type,
            source_path=self.source_path, cwd=s.cwd, version=s.version, models=list(s.models),
            usage_by_model=usage_by_model, started_at=parse_timestamp(s.first_ts),
            ended_at=parse_timestamp(s.last_ts), turns=self.turns, tool_calls=self.tool_calls,
            user_prompts=self.user_prompts, compactions=self.compactions,
            placeholder_output=placeholder, completed=completed, stats=self.stats,
            bytes_consumed=self.offset, start_offset=self.start_offset,
            embedded_usage=list(self.embedded.values()), subagent_types=dict(s.subagent_types),
            placeholder_turns=placeholder_turns,
            trace_digest={"v": 1, "steps": list(map(list, s.digest)), "dropped": s.digest_dropped,
                          "fields": ["kind", "target", "input_bytes", "result_bytes", "error"]},
        )
        run.counters = {"tool_calls": counters.get("tool_calls", 0), "file_reads": counters.get("reads", 0),
                        "rereads": counters.get("rereads", 0), "greps": counters.get("greps", 0),
                        "edits": counters.get("edits", 0), "failed_tool_results": counters.get("failed", 0)}
        if self.ledger_only:
            run.had_activity = run.has_activity or self._ledger_prompts > 0
            run.turn_usage = self._reader.turn_usage(self.turns) if self._reader is not None else run.usage_of_turns()
            run.turns, run.tool_calls, run.user_prompts = [], [], []
        return run


def parse_lines(lines: Iterable[bytes], *, session_id: str | None = None, agent_id: str | None = None,
                agent_type: str | None = None, source_path: str = "") -> ParsedRun:
    """Parse a whole transcript given as raw lines (each with its newline, as read)."""
    parser = TranscriptParser(session_id=session_id, agent_id=agent_id, agent_type=agent_type,
                              source_path=source_path)
    offset = 0
    for raw in lines:
        offset += len(raw)
        parser.feed(raw, end_offset=offset)
    return parser.result()


def parse_bytes(data: bytes, **kwargs: Any) -> ParsedRun:
    """Parse a whole transcript given as its bytes, framed as the collector frames a file."""
    parser = TranscriptParser(**kwargs)
    last_nl = data.rfind(b"\n")
    if last_nl >= 0:
        parser.feed_block(data, last_nl, 0, len(data))
    if last_nl + 1 < len(data):  # an unterminated last line
        parser.feed_lines([data[last_nl + 1:]], [len(data)], complete=False)
    return parser.result()


def ids_from_path(path: str) -> tuple[str | None, str | None]:
    """(session id, agent id) a transcript's path suggests; the records' own ids take precedence.

    ``<project>/<sessionId>.jsonl`` → (sessionId, None); ``<project>/agent-<id>.jsonl`` (flat,
    1.x–2.0.x) → (None, id); ``<sessionId>/subagents/agent-<id>.jsonl`` (2.1.x) → (sessionId, id).
    A name that is not a valid id (:func:`valid_id`) suggests nothing.
    """
    name = os.path.basename(path)
    stem = name[:-6] if name.endswith(".jsonl") else name
    if stem.startswith("agent-"):
        agent_id = valid_id(stem[len("agent-"):])
        parent = os.path.dirname(path)
        if os.path.basename(parent) == "subagents":
            return valid_id(os.path.basename(os.path.dirname(parent))), agent_id
        return None, agent_id
    return valid_id(stem), None
