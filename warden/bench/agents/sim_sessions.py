"""Real-work mode of the simulated agent: SIMULATED Claude Code sessions, written as transcripts.

The offline demo needs session ledgers to collect and distill from. This module plays
sessions of the sim (``sim.py``; naive persona by default) on a working copy of the fixture,
through the same harness and SDK client as the bench, and writes each one in Claude Code's
transcript format under ``<out>/projects/<encoded cwd>/`` — the tree ``warden collect`` reads.
They are simulations: every assistant message names model ``sim-<persona>-1``.

What the transcripts contain (the parts of Claude Code's format warden reads):

* one ``user`` line with the prompt; per API response one ``assistant`` line *per content
  block*, each repeating ``message.id``, ``requestId`` and ``usage`` — earlier lines of a
  multi-block response carry a streaming placeholder (``output_tokens: 1``), the last the full
  counts, so a reader must dedupe on (id, requestId) keeping the largest;
* one ``user`` line per ``tool_result`` with a ``toolUseResult`` (structured copy, shaped like
  Claude Code's for reads, greps, globs, commands, edits, writes; a string for errors) and
  ``sourceToolAssistantUUID``;
* ``uuid``/``parentUuid`` chains, ``cwd``, ``sessionId``, ``version``, ``gitBranch``, ISO
  timestamps from a simulated clock (deterministic; see *The timeline* below);
* *delegated* sessions (``delegate_share`` of them): the main session calls ``Task`` with
  ``subagent_type = <agent>``; the agent's work is a sidechain transcript
  ``<sessionId>/subagents/agent-<agentId>.jsonl`` (``isSidechain: true``, ``agentId``) with an
  ``agent-<agentId>.meta.json`` naming its ``agentType``; the main session gets the subagent's
  report as the Task result (``toolUseResult`` with ``agentId``, ``agentType``, ``usage``).
  Direct sessions do the work in the main transcript.

The subagent's system prompt is its ``agent.md`` plus the MEMORY.md given for that agent (by
default an empty one), so sessions played after warden compiled rules show their effect. Tool
names are the harness's (``read_file``, ``grep``, …), which the collector's parser maps.

Tool names, usage and bytes are what the sim really did in the working copy. The session
sequence is a function of (seed, index): the same arguments write the same files.

The timeline: each session has a pause of 20–200 simulated minutes drawn with it, and lasts as
long as its simulated clock runs (about a second per response plus its output at 80 tokens/s,
fractions of a second per tool result, the subagent's whole run for a delegated one) — so the
span of ``n`` sessions is known only once they are played. Laid out *forwards* (``start``), the
pause comes before each session and the first starts a pause after ``start``; ``not_after``
then refuses, before a file is written, a timeline whose last line would be later than it
(:class:`TimelineOverrun`). Laid out *backwards* (``end``), the pause comes after each session
and the last one ends a pause before ``end``: every line is earlier than ``end`` whatever the
seed and count — the sessions are played last first to place them, their content is the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from warden.bench.agents.sim import cache_usage, content_from_read, output_tokens, prompt_segments
from warden.bench.agents.sim_backend import SimBackend
from warden.bench.agents.sim_transport import Exchange
from warden.bench.fixture import make_run_copy
from warden.bench.results import RunCaps
from warden.bench.tasks import AgentSuite, GoldenTask
from warden.ingest.pricing import DEFAULT_TABLE
from warden.sanitize import one_line
from warden.select.memory import render_memory

TRANSCRIPT_VERSION = "2.1.114"  # the Claude Code transcript layout these files follow
DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
SEED_OFFSET = 1_000_003  # real-work seeds never coincide with bench seeds 0..N
MAIN_SYSTEM = ("You are a coding assistant working in the user's repository. Delegate focused work "
               "to the specialised agents with the Task tool when one fits.")
TASK_TOOL = {"name": "Task", "description": "Launch a specialised agent for a focused task.",
             "input_schema": {"type": "object", "properties": {
                 "description": {"type": "string"}, "prompt": {"type": "string"},
                 "subagent_type": {"type": "string"}}, "required": ["description", "prompt", "subagent_type"]}}
_NS = uuid.UUID("5b0e7a1c-9d1e-4c55-9a57-7a2d3c1f0b42")


@dataclass(frozen=True)
class PlayedSession:
    session_id: str
    agent: str  # the agent that did the work ("main" for direct sessions)
    task_id: str
    seed: int
    delegated: bool
    agent_id: str | None
    completed: bool
    weighted_tokens: float  # the work run's cost (the subagent's for delegated sessions)
    path: str


def encode_project_dir(cwd: str) -> str:
    """Claude Code's project directory name: every non-alphanumeric character becomes '-'."""
    return "".join(c if c.isalnum() else "-" for c in cwd)


class TimelineOverrun(ValueError):
    """A forward timeline (``start``) whose sessions would run past ``not_after``; nothing was written."""

    def __init__(self, index: int, sessions: int, moment: datetime, not_after: datetime) -> None:
        self.index, self.sessions, self.moment, self.not_after = index, sessions, moment, not_after
        super().__init__(f"session {index + 1} of {sessions} would end after {_iso(not_after)}")


def play_sessions(out_dir: Path, suites: dict[str, AgentSuite], fixture_dir: Path, *, sessions: int,
                  seed: int = 0, memory_by_agent: dict[str, str] | None = None,
                  delegate_share: float = 0.75, persona: str = "naive",
                  start: datetime | None = None, end: datetime | None = None,
                  not_after: datetime | None = None, caps: RunCaps | None = None,
                  namespace: str = "") -> list[PlayedSession]:
    """Play ``sessions`` simulated sessions over the agents of ``suites`` and write transcripts.

    Session ``i`` works for agent ``sorted(suites)[i % n]`` on a task drawn from its suite, in a
    fresh copy of the fixture at ``<out>/workspace/<fixture name>`` (the sessions' ``cwd``).
    Session ids (and the message ids derived from them) follow ``namespace``, ``seed`` and ``i``:
    a caller whose sessions must never share ids with ``warden sim sessions``' (the demo's, which
    a user may collect beside them into one home) passes a namespace of its own.

    Dates (module docstring, *The timeline*): ``end`` lays the sessions out backwards so that all
    of them are over before ``end``; otherwise forwards from ``start`` (default
    :data:`DEFAULT_START`), and with ``not_after`` a session that would end later than it raises
    :class:`TimelineOverrun` with no file written (nor any earlier file of ``out`` replaced)."""
    if sessions < 0:
        raise ValueError("sessions must be >= 0")
    if start is not None and end is not None:
        raise ValueError("give start or end, not both")
    if end is not None and not_after is not None:
        raise ValueError("not_after bounds a forward timeline (start); a backward one ends before end")
    agents = sorted(a for a, s in suites.items() if any(t.sim for t in s.tasks))
    if not agents and sessions:
        raise ValueError("no agent has golden tasks with a sim: block")
    out_dir = Path(out_dir)
    workspace = (out_dir / "workspace" / Path(fixture_dir).resolve().name).resolve()
    project = out_dir / "projects" / encode_project_dir(str(workspace))
    staging: Path | None = None
    created = [d for d in (out_dir, workspace.parent) if not d.exists()]  # removed again if refused
    if not_after is None:
        project.mkdir(parents=True, exist_ok=True)
    else:
        # A bounded forward timeline is known to fit only once its last session is played: the
        # files wait in a staging directory inside ``out`` and move into place when all of them fit.
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".sim-sessions-", dir=out_dir))

    def target(path: Path) -> Path:
        return staging / path.relative_to(out_dir) if staging is not None else path

    backend = SimBackend(persona, fast=True)
    played: list[PlayedSession] = []
    backwards = end is not None
    clock = end if backwards else (start or DEFAULT_START)
    try:
        for index in (reversed(range(sessions)) if backwards else range(sessions)):
            rng = random.Random(f"warden-sim-sessions:{seed}:{index}")
            agent = agents[index % len(agents)]
            suite = suites[agent]
            task = rng.choice([t for t in suite.tasks if t.sim])
            run_seed = SEED_OFFSET + seed * 10_000 + index
            delegated = rng.random() < delegate_share
            pause = timedelta(minutes=20 + rng.randint(0, 180))
            if backwards:
                clock -= pause  # this session ends here (the pause after it, before the next one)
            else:
                clock += pause  # this session starts here
                if not_after is not None and clock > not_after:
                    raise TimelineOverrun(index, sessions, clock, not_after)
            if workspace.exists():
                shutil.rmtree(workspace)
            make_run_copy(fixture_dir, workspace)
            memory = (memory_by_agent or {}).get(agent) or render_memory(agent, [])
            system = (suite.system_prompt + "\n\n" + memory) if delegated else MAIN_SYSTEM
            result = backend.run(task, workspace, system, run_seed, caps or RunCaps())
            assert backend.last_transport is not None
            session_id = str(uuid.uuid5(_NS, f"{namespace}:{seed}:{index}" if namespace else f"{seed}:{index}"))
            writer = _Writer(session_id=session_id, cwd=str(workspace), clock=clock,
                             model=backend.model)
            agent_id = sub = None
            if delegated:
                agent_id = "a" + hashlib.sha256(f"{session_id}:{agent}".encode()).hexdigest()[:16]
                sub = writer.fork(agent_id)
                sub.prompt(task.prompt)
                report = sub.conversation(backend.last_transport.exchanges)
                writer.clock = sub.clock
                writer.delegation(task, agent, agent_id, report, result.usage, len(result.calls), sub.tool_uses,
                                  sub.clock - clock)
            else:
                writer.prompt(task.prompt)
                writer.conversation(backend.last_transport.exchanges)
            if backwards:  # played from ``clock``, it must end there: move it back by its length
                length = writer.clock - clock
                for w in (writer, sub):
                    if w is not None:
                        w.shift(-length)
                clock -= length  # the session's start; the previous one ends a pause before it
            elif not_after is not None and writer.clock > not_after:
                raise TimelineOverrun(index, sessions, writer.clock, not_after)
            if sub is not None:
                sub_dir = project / session_id / "subagents"
                sub.write(target(sub_dir / f"agent-{agent_id}.jsonl"))
                target(sub_dir).joinpath(f"agent-{agent_id}.meta.json").write_text(
                    json.dumps({"agentType": agent, "description": one_line(task.prompt, 60)}) + "\n",
                    encoding="utf-8")
            path = project / f"{session_id}.jsonl"
            writer.write(target(path))
            if not backwards:
                clock = writer.clock
            played.append(PlayedSession(
                session_id=session_id, agent=agent if delegated else "main", task_id=task.id, seed=run_seed,
                delegated=delegated, agent_id=agent_id, completed=result.completed,
                weighted_tokens=DEFAULT_TABLE.weighted_tokens(result.model, result.usage), path=str(path)))
        if staging is not None:  # every session fits: into place
            project.mkdir(parents=True, exist_ok=True)
            for staged in sorted(p for p in staging.rglob("*") if p.is_file()):
                final = out_dir / staged.relative_to(staging)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, final)
    except TimelineOverrun:
        _remove_tree(staging, workspace)
        for directory in reversed(created):  # leave ``out`` as it was: no empty tree of a refusal
            try:
                directory.rmdir()
            except OSError:
                pass
        raise
    finally:
        _remove_tree(staging, workspace)
    return played[::-1] if backwards else played


def _remove_tree(*paths: Path | None) -> None:
    for path in paths:
        if path is not None and path.exists():
            shutil.rmtree(path, ignore_errors=True)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class _Writer:
    """Builds one transcript file's lines with a simulated clock and a uuid chain."""

    def __init__(self, *, session_id: str, cwd: str, clock: datetime, model: str,
                 agent_id: str | None = None) -> None:
        self.session_id, self.cwd, self.clock, self.model = session_id, cwd, clock, model
        self.agent_id = agent_id
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.tool_uses = 0
        self._tool_line: dict[str, str] = {}  # tool_use id -> uuid of the assistant line

    def fork(self, agent_id: str) -> "_Writer":
        return _Writer(session_id=self.session_id, cwd=self.cwd, clock=self.clock, model=self.model,
                       agent_id=agent_id)

    # -- lines ---------------------------------------------------------------------------

    def _line(self, kind: str, fields: dict[str, Any], advance_s: float) -> str:
        self.clock += timedelta(seconds=advance_s)
        line_uuid = str(uuid.uuid5(_NS, f"{self.session_id}:{self.agent_id}:{len(self.lines)}"))
        record: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": self.agent_id is not None}
        if self.agent_id:
            record["agentId"] = self.agent_id
        record.update(fields)
        record.update({"type": kind, "uuid": line_uuid, "timestamp": self.clock,  # formatted by write()
                       "userType": "external", "entrypoint": "cli", "cwd": self.cwd,
                       "sessionId": self.session_id, "version": TRANSCRIPT_VERSION, "gitBranch": "main"})
        self.lines.append(record)
        self.parent = line_uuid
        return line_uuid

    def shift(self, delta: timedelta) -> None:
        """Move every line written so far, and the clock, by ``delta``."""
        for record in self.lines:
            record["timestamp"] += delta
        self.clock += delta

    def prompt(self, text: str) -> None:
        self._line("user", {"message": {"role": "user", "content": text}}, 0.0)

    def assistant(self, response: dict[str, Any], request_id: str) -> None:
        blocks = response["content"]
        usage = response["usage"]
        think_s = 1.0 + usage["output_tokens"] / 80.0
        for i, block in enumerate(blocks):
            last = i == len(blocks) - 1
            line_usage = dict(usage, cache_creation=dict(usage.get("cache_creation") or {}))
            if not last:
                line_usage["output_tokens"] = 1  # streaming placeholder, as Claude Code writes it
            message = {"model": response["model"], "id": response["id"], "type": "message",
                       "role": "assistant", "content": [block],
                       "stop_reason": response["stop_reason"] if last else None,
                       "stop_sequence": None, "usage": line_usage}
            line_uuid = self._line("assistant", {"message": message, "requestId": request_id},
                                   think_s if i == 0 else 0.05)
            if block.get("type") == "tool_use":
                self._tool_line[block["id"]] = line_uuid
                self.tool_uses += 1

    def tool_result(self, block: dict[str, Any], tool_use: dict[str, Any] | None) -> None:
        text = block.get("content") if isinstance(block.get("content"), str) else ""
        is_error = bool(block.get("is_error"))
        result = {"tool_use_id": block.get("tool_use_id"), "type": "tool_result", "content": text,
                  "is_error": is_error}
        name = (tool_use or {}).get("name", "")
        fields = {"message": {"role": "user", "content": [result]},
                  "toolUseResult": f"Error: {text}" if is_error else self._structured(name, tool_use or {}, text),
                  "sourceToolAssistantUUID": self._tool_line.get(str(block.get("tool_use_id")))}
        self._line("user", fields, 1.5 if name == "run_command" else 0.2)

    def _structured(self, name: str, tool_use: dict[str, Any], text: str) -> Any:
        args = tool_use.get("input") or {}
        path = str(Path(self.cwd) / str(args.get("path", "")))
        if name == "read_file":
            content = content_from_read(text)
            lines = content.count("\n")
            return {"type": "text", "file": {"filePath": path, "content": content, "numLines": lines,
                                             "startLine": int(args.get("offset") or 1), "totalLines": lines}}
        if name == "grep":
            files = sorted({line.split(":", 1)[0] for line in text.splitlines() if ":" in line})
            return {"mode": "content", "numFiles": len(files), "filenames": files, "content": text,
                    "numLines": len(text.splitlines())}
        if name == "glob":
            files = [line for line in text.splitlines() if line and not line.startswith(("(", "…"))]
            return {"filenames": files, "durationMs": 4, "numFiles": len(files), "truncated": False}
        if name == "edit_file":
            return {"filePath": path, "oldString": args.get("old_string", ""), "newString": args.get("new_string", ""),
                    "originalFile": None, "structuredPatch": [], "userModified": False, "replaceAll": False}
        if name == "write_file":
            return {"type": "update", "filePath": path, "content": args.get("content", ""), "structuredPatch": []}
        return {"stdout": text, "stderr": "", "interrupted": False, "isImage": False}

    def conversation(self, exchanges: list[Exchange]) -> str:
        """Write a run's successful exchanges; returns the final assistant text."""
        done = [e for e in exchanges if e.status == 200 and e.request is not None]
        final_text = ""
        for n, exchange in enumerate(done):
            if n > 0:  # this request's last message holds the results of the previous turn
                previous = {b["id"]: b for b in done[n - 1].response["content"] if b.get("type") == "tool_use"}
                last = exchange.request["messages"][-1]
                for block in last.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        self.tool_result(block, previous.get(block.get("tool_use_id")))
            self.assistant(exchange.response, exchange.request_id)
            final_text = "\n".join(b.get("text", "") for b in exchange.response["content"] if b.get("type") == "text")
        return final_text

    def delegation(self, task: GoldenTask, agent: str, agent_id: str, report: str, usage: Any,
                   calls: int, tool_uses: int, elapsed: timedelta) -> None:
        """The main session's side of a delegated session: Task call, its result, a closing reply."""
        tool_id = "toolu_sim_" + hashlib.sha256(f"{self.session_id}:task".encode()).hexdigest()[:24]
        user = {"role": "user", "content": [{"type": "text", "text": task.prompt}]}
        first_content = [{"type": "text", "text": f"I'll hand this to the {agent} agent."},
                         {"type": "tool_use", "id": tool_id, "name": "Task",
                          "input": {"description": one_line(task.prompt, 40), "prompt": task.prompt,
                                    "subagent_type": agent}}]
        request = {"system": MAIN_SYSTEM, "tools": [TASK_TOOL], "messages": [user]}
        segments = prompt_segments(request)
        first = self._response(0, first_content, cache_usage([], segments), "tool_use")
        # The clock jumps over the subagent's work before its result arrives.
        saved = self.clock
        self.assistant(first, self._request_id(0))
        self.clock = max(self.clock, saved) + elapsed
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": report}
        total = usage.input_tokens + usage.output_tokens + usage.cache_creation + usage.cache_read
        self._line("user", {
            "message": {"role": "user", "content": [{**result, "is_error": False}]},
            "toolUseResult": {"status": "completed", "prompt": task.prompt, "agentId": agent_id,
                              "agentType": agent, "content": [{"type": "text", "text": report}],
                              "totalDurationMs": int(elapsed.total_seconds() * 1000),
                              "totalTokens": total, "totalToolUseCount": tool_uses,
                              "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                                        "cache_creation_input_tokens": usage.cache_creation,
                                        "cache_read_input_tokens": usage.cache_read}},
            "sourceToolAssistantUUID": self._tool_line.get(tool_id)}, 0.0)
        closing = [{"type": "text", "text": f"The {agent} agent has finished: {one_line(report, 160)}"}]
        second_request = {**request, "messages": [user, {"role": "assistant", "content": first_content},
                                                  {"role": "user", "content": [result]}]}
        second = self._response(1, closing, cache_usage(segments, prompt_segments(second_request)), "end_turn")
        self.assistant(second, self._request_id(1))

    def _response(self, turn: int, content: list[dict[str, Any]], usage: dict[str, Any], stop: str) -> dict[str, Any]:
        usage = dict(usage, output_tokens=output_tokens(content))
        message_id = "msg_sim_" + hashlib.sha256(f"{self.session_id}:main:{turn}".encode()).hexdigest()[:24]
        return {"id": message_id, "model": self.model, "content": content, "stop_reason": stop, "usage": usage}

    def _request_id(self, turn: int) -> str:
        return "req_sim_" + hashlib.sha256(f"{self.session_id}:main-req:{turn}".encode()).hexdigest()[:24]

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for record in self.lines:
                record = {**record, "timestamp": _iso(record["timestamp"])}
                fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
