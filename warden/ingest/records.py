"""What the transcript parser produces: one :class:`ParsedRun` per transcript run.

This is the contract between the parser (``ingest/parser.py``) and everything that reads a
session: the collector (ledger rows), the waste detectors (``distill/detectors.py``) and
checkpoint capture (``continuity/capture.py``). All text in here is untrusted transcript text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime

from warden.ingest.pricing import Usage


def path_key(path: str) -> str:
    """A path as stored state (the parser's, capture's) keeps it to recognise it again: equal for
    equal paths, and no secret a path may hold (a connection string's password) in the state."""
    return hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass(slots=True)
class ToolCall:
    index: int  # order of the call within the run, from 0
    tool_use_id: str
    name: str  # raw tool name: Read, Grep, Glob, LS, Bash, Edit, MultiEdit, Write, Task, ...
    kind: str  # normalised kind detectors speak: a value of parser.TOOL_KIND_BY_NAME, or "other"
    input: dict  # raw tool input as sent (untrusted)
    input_bytes: int  # size of the JSON input the model generated
    path: str | None = None  # file or directory the call targets, if any
    line_range: tuple[int, int] | None = None  # (offset, limit) of a ranged read
    command: str | None = None  # bash command / grep pattern
    result_bytes: int = 0  # size of the tool result returned to the model
    result_text: str = ""  # first ~2 KB of the result (for errors, evidence, checkpoints)
    is_error: bool = False
    is_reread: bool = False  # same path and range as an earlier read, file not edited since
    timestamp: datetime | None = None
    turn: int = 0  # index of the assistant turn (deduped API message) that made the call


@dataclass(slots=True)
class Turn:
    """One deduplicated API response of the assistant."""

    index: int
    message_key: str  # "<message.id>|<requestId>" or the message id alone
    model: str
    usage: Usage
    timestamp: datetime | None
    text: str = ""  # concatenated visible text blocks (no thinking)
    tool_call_indexes: list[int] = field(default_factory=list)
    content_bytes: int = 0  # text + thinking + tool-input bytes generated (placeholder check)

    @property
    def context_tokens(self) -> int:
        """Prompt size of this call: what fills the context window."""
        u = self.usage
        return u.input_tokens + u.cache_write_5m + u.cache_write_1h + u.cache_read


@dataclass(slots=True)
class UserPrompt:
    text: str
    timestamp: datetime | None


@dataclass
class LineStats:
    lines: int = 0
    blank: int = 0
    malformed: int = 0  # not JSON, or JSON that is not an object
    non_utf8: int = 0
    truncated: int = 0  # a final line with no newline that does not parse (still being written)
    bom: int = 0
    crlf: int = 0  # lines that ended "\r\n" (read without the "\r")
    duplicate_usage: int = 0  # usage lines dropped by the (message.id, requestId) dedupe
    oversized: int = 0  # lines longer than the reader's cap, skipped unread
    # usage objects with a count read as 0 that no reply holds (missing input/output, negative,
    # non-integral, absurd); diagnostic only, the ledger's numbers are unchanged
    zeroed_usage: int = 0


@dataclass(slots=True)
class EmbeddedUsage:
    """A subagent's API response seen through a ``progress`` line of its parent transcript.

    It belongs to the subagent's run (``agent_id``); the collector's global dedupe counts it once
    whether or not the subagent's own transcript is present."""

    message_key: str
    agent_id: str | None
    model: str
    usage: Usage
    timestamp: datetime | None


# (message key, model, input, output, cache write 5m, cache write 1h, cache read, timestamp)
TurnUsage = tuple[str, str, int, int, int, int, int, "datetime | None"]


@dataclass
class ParsedRun:
    session_id: str
    agent_id: str | None  # None for a main session
    agent_type: str | None = None  # subagent type (hook payload or .meta.json), if known
    source_path: str = ""
    cwd: str | None = None  # the project
    version: str | None = None  # Claude Code version that wrote it
    models: list[str] = field(default_factory=list)  # in order of first use
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    turns: list[Turn] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    user_prompts: list[UserPrompt] = field(default_factory=list)
    compactions: int = 0
    placeholder_output: bool = False  # output counts look like pre-2.x streaming placeholders
    completed: bool = False
    stats: LineStats = field(default_factory=LineStats)
    bytes_consumed: int = 0  # offset just past the last complete line read
    # A resumed parse (incremental ingest) starts at ``start_offset``: then turns, tool_calls and
    # user_prompts hold only the lines from there on, while counters and trace_digest are cumulative.
    start_offset: int = 0
    counters: dict[str, int] = field(default_factory=dict)  # tool_calls, file_reads, rereads, greps, edits, failed_tool_results
    embedded_usage: list[EmbeddedUsage] = field(default_factory=list)
    subagent_types: dict[str, str] = field(default_factory=dict)  # agentId -> subagent_type (from Task calls)
    placeholder_turns: int = 0
    trace_digest: dict = field(default_factory=dict)  # compact action trace for the distiller
    # Set by ledger_view, which drops the lists that would show whether the run did anything.
    had_activity: bool | None = None
    # A ledger-only parse's turns' usage (parser.TranscriptParser(ledger_only=True)): it keeps
    # no turns, tool calls or prompts, nor usage_by_model, only what the ledger reads.
    turn_usage: list[TurnUsage] | None = None

    def ledger_view(self) -> "ParsedRun":
        """This run without its turns and what only the detectors and checkpoint capture read
        (tool calls, prompts): cheap to send between processes, for a writer that is handed the
        turns' usage as rows (the collector's parser processes build them)."""
        return replace(self, turns=[], tool_calls=[], user_prompts=[], had_activity=self.has_activity, turn_usage=None)

    def usage_of_turns(self) -> list[TurnUsage]:
        """(message key, model, the five counts, timestamp) of each turn, in order."""
        if self.turn_usage is not None:
            return self.turn_usage
        return [(t.message_key, t.model, t.usage.input_tokens, t.usage.output_tokens, t.usage.cache_write_5m,
                 t.usage.cache_write_1h, t.usage.cache_read, t.timestamp) for t in self.turns]

    @property
    def has_activity(self) -> bool:
        """Summary-only transcripts (old versions) hold no session activity."""
        if self.had_activity is not None:
            return self.had_activity
        return bool(self.turns or self.tool_calls or self.user_prompts or self.embedded_usage)

    @property
    def run_key(self) -> str:
        return f"{self.session_id}:{self.agent_id or 'main'}"

    @property
    def usage(self) -> Usage:
        total = Usage()
        for u in self.usage_by_model.values():
            total = total + u
        return total
