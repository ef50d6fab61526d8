"""Claude Code–format transcripts built by hand for the distill tests, parsed by the real parser.

Tool names are the bench harness's (read_file, grep, list_dir, edit_file, write_file,
run_command) — the ones the sim's transcripts use — so the detectors see what they will see on
simulated real work. Usage per turn is synthesised from the bytes in context, the way the API
would count it (prompt = everything so far, mostly cache reads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from warden.ingest.parser import parse_bytes
from warden.ingest.records import ParsedRun


@dataclass
class Call:
    name: str
    input: dict
    result: str = "ok"
    is_error: bool = False


@dataclass
class Step:
    text: str = ""
    calls: list[Call] = field(default_factory=list)


def file_text(lines: int, tag: str = "x") -> str:
    return "".join(f"def function_{tag}_{i}(value):  # line {i} of a long module\n" for i in range(lines))


def numbered(text: str) -> str:
    """What Claude Code's Read returns: numbered lines."""
    return "".join(f"{i + 1:6}→{line}\n" for i, line in enumerate(text.splitlines()))


def transcript(steps: list[Step], *, session_id: str = "sess-1", model: str = "claude-sonnet-4-5",
               final_text: str = "Done: the fix is in place and the tests pass.", cwd: str = "/proj",
               day: int = 1) -> bytes:
    lines: list[str] = []
    context = 4000  # system prompt and tools
    ts = 0

    def stamp() -> str:
        nonlocal ts
        ts += 1
        return f"2026-01-{day:02d}T00:{ts // 60:02d}:{ts % 60:02d}.000Z"

    lines.append(json.dumps({"type": "user", "sessionId": session_id, "cwd": cwd, "timestamp": stamp(),
                             "message": {"role": "user", "content": "Fix the bug in the parser."}}))
    all_steps = steps + [Step(text=final_text)]
    for n, step in enumerate(all_steps):
        content: list[dict] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        for k, call in enumerate(step.calls):
            content.append({"type": "tool_use", "id": f"toolu_{n}_{k}", "name": call.name, "input": call.input})
        generated = len(step.text) + sum(len(json.dumps(c.input)) for c in step.calls)
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 200, "cache_read_input_tokens": context // 4,
                 "output_tokens": generated // 4 + 5}
        lines.append(json.dumps({
            "type": "assistant", "sessionId": session_id, "cwd": cwd, "timestamp": stamp(),
            "requestId": f"req_{n}",
            "message": {"id": f"msg_{n}", "model": model, "role": "assistant", "content": content,
                        "usage": usage, "stop_reason": "tool_use" if step.calls else "end_turn"}}))
        context += generated
        if step.calls:
            results = [{"type": "tool_result", "tool_use_id": f"toolu_{n}_{k}", "content": c.result,
                        "is_error": c.is_error} for k, c in enumerate(step.calls)]
            lines.append(json.dumps({"type": "user", "sessionId": session_id, "cwd": cwd, "timestamp": stamp(),
                                     "message": {"role": "user", "content": results}}))
            context += sum(len(c.result) for c in step.calls)
    return ("\n".join(lines) + "\n").encode()


def parse(steps: list[Step], **kwargs: object) -> ParsedRun:
    return parse_bytes(transcript(steps, **kwargs), source_path="test.jsonl")


def read(path: str, text: str, offset: int | None = None, limit: int | None = None) -> Call:
    args: dict = {"path": path}
    if offset is not None:
        args.update(offset=offset, limit=limit)
    return Call("read_file", args, numbered(text))


def cmd(command: str, output: str = "ok", is_error: bool = False) -> Call:
    return Call("run_command", {"command": command}, output, is_error)


def lean_session(variant: int = 0) -> list[Step]:
    """A careful agent's session: grep, a ranged read, one edit, the targeted test."""
    target = file_text(400, "target")
    return [Step("", [Call("grep", {"pattern": "function_target_10"}, "pkg/parser.py:11:def function_target_10")]),
            Step("", [read("pkg/parser.py", "\n".join(target.splitlines()[0:30 + variant]), offset=1, limit=30)]),
            Step("", [Call("edit_file", {"path": "pkg/parser.py", "old_string": "def function_target_10(value):",
                                         "new_string": "def function_target_10(value=None):"})]),
            Step("", [cmd("python -m pytest -q tests/test_parser.py", "3 passed\n")])]


def naive_session(scale: int = 1) -> list[Step]:
    """A naive agent's real-work session: plan churn, listing loops, blind whole-file reads of
    unrelated files, a whole read of a long target for a 1-line edit, a re-read, the full test
    suite twice. Blind reading is, by construction, its most expensive habit."""
    target = file_text(400, "target")
    others = {f"pkg/mod_{i}.py": file_text(250 * scale, f"m{i}") for i in range(5)}
    pytest_out = "".join(f"tests/test_{i}.py ........................ [{i}%]\n" for i in range(60)) + "240 passed\n"
    steps = [Step("I will first look around the project."), Step("Then I will find the parser and fix it."),
             Step("Let me list the files.", [Call("list_dir", {"path": "."}, "pkg/\ntests/\nREADME.md\n")]),
             Step("", [Call("list_dir", {"path": "."}, "pkg/\ntests/\nREADME.md\n")])]
    steps += [Step("", [read(path, text)]) for path, text in others.items()]
    steps += [Step("", [read("pkg/parser.py", target)]), Step("", [read("pkg/mod_0.py", others["pkg/mod_0.py"])]),
              Step("", [Call("edit_file", {"path": "pkg/parser.py", "old_string": "def function_target_10(value):",
                                           "new_string": "def function_target_10(value=None):"})]),
              Step("", [cmd("python -m pytest -q", pytest_out)]),
              Step("", [cmd("python -m pytest -q", pytest_out)])]
    return steps


def write_transcript(directory: Path, steps: list[Step], *, session_id: str, day: int = 1) -> Path:
    path = directory / f"{session_id}.jsonl"
    path.write_bytes(transcript(steps, session_id=session_id, day=day))
    return path
