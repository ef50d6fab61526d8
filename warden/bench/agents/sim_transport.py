"""An in-process Messages API endpoint for the simulated agent (a SIMULATION, not a model).

:class:`SimTransport` is an ``httpx2`` transport handler: it decodes ``POST /v1/messages``,
asks its :class:`~warden.bench.agents.sim.SimAgent` for the next assistant message and returns
a real Messages API JSON response (status, ``request-id`` header, body). The REAL
``anthropic.Anthropic`` client talks to it through ``httpx2.Client(transport=...)`` — see
:func:`sim_client` — so the SDK's request building, response parsing, retries and error
classes are exercised exactly as against the API, and the harness cannot tell the difference.

One transport plays one run (it holds that run's agent, seeded). It can inject API errors for
tests: ``faults`` maps a 0-based call number (every HTTP request counts, retries included) to a
status code, or ``fail_every`` answers every request with that status (e.g. 529 overloaded).
Every exchange is logged in :attr:`SimTransport.exchanges` — the real-work session writer turns
that log into Claude Code transcripts.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from warden.bench.agents.sim import SimAgent

SIM_BASE_URL = "http://sim.local"
SIM_API_KEY = "sim-offline-no-key"  # a dummy: the sim never sees a real credential

_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 503: "api_error", 529: "overloaded_error",
}


@dataclass
class Exchange:
    """One HTTP call as the API saw it."""

    index: int
    status: int
    request_id: str
    request: dict[str, Any] | None
    response: dict[str, Any]


@dataclass
class SimTransport:
    agent: SimAgent
    faults: dict[int, int] = field(default_factory=dict)
    fail_every: int | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:
            index = self._calls
            self._calls += 1
            request_id = "req_sim_" + hashlib.sha256(
                f"{self.agent.seed}:{self.agent.task_id}:{index}".encode()).hexdigest()[:24]
            status, body, decoded = self._answer(request, index)
            self.exchanges.append(Exchange(index, status, request_id, decoded, body))
            return httpx2.Response(status, json=body, headers={"request-id": request_id})

    def _answer(self, request: httpx2.Request, index: int) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            return 404, _error(404, f"the sim serves POST /v1/messages only, not {request.method} {request.url.path}"), None
        injected = self.fail_every or self.faults.get(index)
        if injected:
            return injected, _error(injected, "Overloaded" if injected == 529 else f"injected error {injected}"), None
        try:
            decoded = json.loads(request.content or b"{}")
        except ValueError:
            return 400, _error(400, "request body is not JSON"), None
        problem = _invalid(decoded)
        if problem:
            return 400, _error(400, problem), decoded
        try:
            return 200, self.agent.respond(decoded), decoded
        except ValueError as exc:  # a conversation the sim did not take part in
            return 400, _error(400, str(exc)), decoded

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self)


def _invalid(body: Any) -> str:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: field required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if body.get("stream"):
        return "stream: the sim answers non-streaming requests only"
    return ""


def _error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}}


def sim_client(transport: SimTransport, *, max_retries: int = 2, timeout: float = 60.0) -> anthropic.Anthropic:
    """The real SDK client wired to ``transport``, never to the network."""
    return anthropic.Anthropic(api_key=SIM_API_KEY, base_url=SIM_BASE_URL, max_retries=max_retries,
                               timeout=timeout, http_client=httpx2.Client(transport=transport.transport()))
