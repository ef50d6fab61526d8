"""Test support for the harness and the anthropic backend: a scripted model behind the real
``anthropic`` SDK client, reached through an in-process ``httpx2.MockTransport``.

A script is a list of steps, one per HTTP request: a list of content blocks (a model turn), an
``httpx2.Response`` (e.g. a 529), or an exception instance (raised by the transport, e.g.
``httpx2.ConnectError``). Every request body is recorded for assertions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from warden.bench.tasks import GoldenTask

# A fast check (one interpreter start); PYTEST_CHECK is the realistic one, used sparingly.
CHECK = "python -c \"import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)\""
PYTEST_CHECK = "python -m pytest -q test_calc.py"


def make_project(root: Path) -> Path:
    """A tiny project whose check fails until ``add`` is fixed."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "notes.md").write_text("add() adds two numbers\n")
    return root


def make_task(check: str = CHECK, timeout_s: float = 60.0) -> GoldenTask:
    return GoldenTask(id="calc-01", agent="backend", prompt="Fix add() in calc.py so the tests pass.",
                      success_check=check, timeout_s=timeout_s)


def tool_use(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


FIX_SCRIPT: list[Any] = [
    [text("Searching."), tool_use("t1", "grep", pattern=r"def add")],
    [tool_use("t2", "read_file", path="calc.py", offset=1, limit=2)],
    [tool_use("t3", "edit_file", path="calc.py", old_string="return a - b", new_string="return a + b")],
    [tool_use("t4", "run_command", command=CHECK)],
    [text("Fixed add().")],
]


def usage(i: int) -> dict[str, Any]:
    """Distinct, recognisable usage per call: input 100+i, output 10+i, 5m write 20, 1h write 5,
    cache read 1000*i."""
    return {"input_tokens": 100 + i, "output_tokens": 10 + i, "cache_creation_input_tokens": 25,
            "cache_read_input_tokens": 1000 * i,
            "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 5}}


def message(i: int, content: list[dict[str, Any]], *, model: str = "scripted-model",
            stop_reason: str | None = None, usage_override: dict[str, Any] | None = None) -> httpx2.Response:
    has_tool = any(b["type"] == "tool_use" for b in content)
    return httpx2.Response(200, json={
        "id": f"msg_{i:03d}", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason or ("tool_use" if has_tool else "end_turn"), "stop_sequence": None,
        "usage": usage_override or usage(i)})


def error_response(status: int, kind: str, msg: str = "", headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers,
                           json={"type": "error", "error": {"type": kind, "message": msg or kind}})


def overloaded() -> httpx2.Response:
    return error_response(529, "overloaded_error", "Overloaded")


class ScriptedModel:
    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.turn = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        if not self.script:
            raise AssertionError("the scripted model was called more often than scripted")
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, httpx2.Response):
            return step
        # as the API does: a reply's output never exceeds the max_tokens it was asked for
        allowed = self.requests[-1].get("max_tokens")
        spent = usage(self.turn)
        if isinstance(allowed, int) and spent["output_tokens"] > allowed:
            spent["output_tokens"] = allowed
        response = message(self.turn, step, usage_override=spent)
        self.turn += 1
        return response

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self)

    def http_client(self) -> httpx2.Client:
        return httpx2.Client(transport=self.transport())

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="sk-test-not-real", base_url="http://scripted.invalid",
                                   max_retries=0, http_client=self.http_client())

    def tool_results(self, request_index: int) -> list[dict[str, Any]]:
        """The tool_result blocks sent in request ``request_index``."""
        last = self.requests[request_index]["messages"][-1]
        return [b for b in last["content"] if b.get("type") == "tool_result"]


class NoSleep:
    """Records the backoff delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
