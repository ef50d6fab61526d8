"""Builders for ParsedRun values in continuity tests (no transcript files needed)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from warden.continuity.fence import MARKER_WORD
from warden.ingest.pricing import Usage
from warden.ingest.records import ParsedRun, ToolCall, Turn, UserPrompt

T0 = datetime(2026, 11, 28, 9, 0, 0)


class RunBuilder:
    """Append turns (with their context size and tool calls) in session order."""

    def __init__(self, session_id: str = "sess-a", cwd: str = "/home/dev/proj", model: str = "claude-sonnet-4-5",
                 agent_id: str | None = None, start: datetime = T0) -> None:
        self.run = ParsedRun(session_id=session_id, agent_id=agent_id, cwd=cwd, models=[model],
                             started_at=start)
        self.model = model
        self.clock = start

    def prompt(self, text: str) -> "RunBuilder":
        self.clock += timedelta(seconds=5)
        self.run.user_prompts.append(UserPrompt(text, self.clock))
        return self

    def turn(self, context_tokens: int, text: str = "", calls: list[dict] | None = None) -> "RunBuilder":
        self.clock += timedelta(seconds=30)
        index = len(self.run.turns)
        call_indexes = []
        for spec in calls or []:
            ci = len(self.run.tool_calls)
            self.run.tool_calls.append(ToolCall(
                index=ci, tool_use_id=f"toolu_{self.run.session_id}_{ci}", name=spec.get("name", "Read"),
                kind=spec.get("kind", "read"), input={}, input_bytes=50, path=spec.get("path"),
                command=spec.get("command"), result_text=spec.get("result", ""),
                is_error=spec.get("error", False), is_reread=spec.get("reread", False),
                timestamp=self.clock, turn=index))
            call_indexes.append(ci)
        self.run.turns.append(Turn(index=index, message_key=f"msg_{index}", model=self.model,
                                   usage=Usage(input_tokens=10, cache_read=max(0, context_tokens - 10),
                                               output_tokens=100),
                                   timestamp=self.clock, text=text, tool_call_indexes=call_indexes))
        self.run.ended_at = self.clock
        return self

    def build(self) -> ParsedRun:
        return self.run


def read(path: str, **kw) -> dict:
    return {"name": "Read", "kind": "read", "path": path, **kw}


def edit(path: str, **kw) -> dict:
    return {"name": "Edit", "kind": "edit", "path": path, **kw}


def write(path: str, **kw) -> dict:
    return {"name": "Write", "kind": "write", "path": path, **kw}


def bash(command: str, result: str = "", error: bool = False) -> dict:
    return {"name": "Bash", "kind": "bash", "command": command, "result": result, "error": error}


def block_id_of(fenced: str) -> str | None:
    """The id on a fenced block's opening marker (tests check the close carries the same one)."""
    m = re.match(rf"<<<{MARKER_WORD} id=([0-9a-f]+) ", fenced)
    return m.group(1) if m else None
