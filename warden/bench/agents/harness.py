"""The agent harness: one tool-use loop that drives any Messages API model through a real
``anthropic.Anthropic`` client, whatever transport is behind it (the network, a compatible
endpoint, or the simulated model's in-process transport).

Tool-loop contract (what every model behind :func:`run_task` can rely on, and must honour)
-----------------------------------------------------------------------------------------
Request, every turn — ``client.messages.create(...)`` with

* ``model``: the run's model id; ``max_tokens``: ``min(max_tokens_per_call, output tokens
  left under caps.max_output_tokens)``;
* ``system``: a list with one text block holding the whole system prompt (agent.md body +
  compiled MEMORY.md under test), marked ``cache_control: ephemeral`` (omitted when empty);
* ``tools``: :data:`warden.bench.agents.tools.TOOL_DEFINITIONS`, always the same list;
* ``messages``: the full conversation. Turn 1 is one user message — the task prompt as a text
  block. Every assistant reply is sent back as given (text / tool_use / thinking blocks,
  minimal fields). After an assistant turn with ``tool_use`` blocks comes one user message
  holding one ``tool_result`` per ``tool_use``, in the same order, with plain-text ``content``
  and ``is_error: true`` when the tool refused or failed. The last block of the last user
  message carries ``cache_control: ephemeral`` (a moving cache breakpoint, like Claude Code).

Response — a Message. ``tool_use`` blocks are executed in order in the run's copy (see
``tools.py``); a response without ``tool_use`` ends the agent's work (``end_turn``,
``stop_sequence``, ``refusal``), except ``stop_reason == "max_tokens"``, after which the model
is asked to continue. ``usage`` (input, output, ``cache_creation`` split 5m/1h — or
``cache_creation_input_tokens`` alone, counted as 5m — and ``cache_read_input_tokens``) is
recorded per call as a :class:`CallUsage`, under the model the response names.

Retries — the harness owns them: the client is used with ``max_retries=0`` (set here via
``with_options``) and :class:`RetryPolicy` retries 408/409/429/5xx (529 overloaded included)
and connection errors/timeouts with exponential backoff and jitter, honouring ``retry-after``.

Outcomes — the run ends with exactly one :class:`Outcome`:

* ``infra_error``: an API error after retries, a non-retryable API error (auth, quota, bad
  request, unknown model), an unusable response, a crash of the model client, a missing copy,
  or a success check that could not be started. Never counted as the agent failing.
* ``budget_exceeded``: the output-token cap, the total-token cap (input + output + cache
  writes + cache reads, summed over calls) or the wall-time cap was reached, or the prompt
  outgrew the model's context (HTTP 413, "prompt is too long", or stop reason
  ``model_context_window_exceeded``). The check is not run.
* after the agent stops (or uses its last turn of ``caps.max_turns``; the tools it asked for
  on that turn still run), the task's ``success_check`` runs in the copy with
  :func:`~warden.bench.agents.tools.sandbox_env` (no API keys) and ``timeout = task.timeout_s``:
  exit 0 → ``completed``, anything else (a timeout included) → ``task_failed``.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable

import anthropic

from warden.api_client import MAX_CALL_TOKENS, describe_api_error
from warden.bench.agents.tools import (TOOL_DEFINITIONS, CommandResult, Toolbox, anchor_pytest,
                                       run_process, run_tmpdir, sandbox_env)
from warden.bench.results import CallUsage, Outcome, RunCaps, RunResult
from warden.bench.tasks import GoldenTask
from warden.ingest.pricing import Usage
from warden.sanitize import one_line, redact_secrets

DEFAULT_MAX_TOKENS_PER_CALL = 8_192
DEFAULT_CALL_TIMEOUT_S = 600.0
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_CACHE = {"type": "ephemeral"}
_ERROR_CHARS = 500


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter around one API call.

    Attempt ``n`` (1-based) that fails retryably waits ``min(max_delay, base * 2**(n-1))``,
    scaled down by up to ``jitter`` at random, or the server's ``retry-after`` when it asks
    for longer (never beyond ``max_delay``). ``sleep`` and ``rng`` are injectable for tests.
    """

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    jitter: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        backoff *= 1.0 - self.jitter * self.rng.random()
        if retry_after is not None:
            backoff = max(backoff, min(retry_after, self.max_delay_s))
        return backoff


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500
    return False


def _retry_after_s(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class RetriesExhausted(Exception):
    """The last retryable error, after ``attempts`` tries."""

    def __init__(self, last: BaseException, attempts: int) -> None:
        super().__init__(f"{describe_error(last)} (after {attempts} attempts)")
        self.last = last
        self.attempts = attempts


def call_with_retries(call: Callable[[], Any], policy: RetryPolicy,
                      *, time_left: Callable[[], float] | None = None) -> Any:
    """Run ``call`` under ``policy``. Non-retryable errors propagate at once; retryable ones
    raise :class:`RetriesExhausted` after the last attempt (or when no time is left to wait)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Exception as exc:
            if not is_retryable(exc):
                raise
            if attempt >= policy.max_attempts:
                raise RetriesExhausted(exc, attempt) from exc
            wait = policy.delay(attempt, _retry_after_s(exc))
            if time_left is not None and time_left() <= wait:
                raise RetriesExhausted(exc, attempt) from exc
            policy.sleep(wait)


def describe_error(exc: BaseException) -> str:
    """One line naming an API failure (see :func:`warden.api_client.describe_api_error`)."""
    if isinstance(exc, RetriesExhausted):
        return str(exc)
    return describe_api_error(exc, _ERROR_CHARS)


def classify_error(exc: BaseException) -> Outcome:
    """An exception out of the model call → the run's outcome. Only an outgrown context counts
    as the agent's budget; everything else is infrastructure, never a task failure."""
    last = exc.last if isinstance(exc, RetriesExhausted) else exc
    if isinstance(last, anthropic.APIStatusError):
        if last.status_code == 413:
            return Outcome.BUDGET_EXCEEDED
        if last.status_code == 400 and "prompt is too long" in describe_error(last).lower():
            return Outcome.BUDGET_EXCEEDED
    return Outcome.INFRA_ERROR


def _token_count(value: Any, *, required: bool = False) -> int:
    """A usage field: a whole number of tokens, ≥ 0 and at most :data:`MAX_CALL_TOKENS` (a
    negative, infinite or absurd count would let a run slip under its token caps, pay into the
    ledger backwards, or price every later plan out of its budget). A required one may not be
    missing: an endpoint that drops it would record a costly call as nearly free."""
    if value is None and not required:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or value > MAX_CALL_TOKENS or value != int(value):
        raise ValueError(f"usage count {value!r} is not a token count")
    return int(value)


def usage_of(response_usage: Any) -> Usage:
    """Messages API ``usage`` → :class:`Usage`, with the cache-write split by TTL. ValueError for
    a count that is not a whole number ≥ 0."""
    given_creation = getattr(response_usage, "cache_creation_input_tokens", None)
    creation = _token_count(given_creation)
    split = getattr(response_usage, "cache_creation", None)
    write_5m = write_1h = 0
    if split is not None:
        write_5m = _token_count(getattr(split, "ephemeral_5m_input_tokens", 0))
        write_1h = _token_count(getattr(split, "ephemeral_1h_input_tokens", 0))
        if given_creation is not None and write_5m + write_1h > creation:
            raise ValueError(f"usage's cache-write split ({write_5m} + {write_1h}) exceeds its total ({creation})")
    write_5m += max(0, creation - write_5m - write_1h)  # unsplit remainder: the default TTL
    usage = Usage(input_tokens=_token_count(getattr(response_usage, "input_tokens", None), required=True),
                  output_tokens=_token_count(getattr(response_usage, "output_tokens", None), required=True),
                  cache_write_5m=write_5m, cache_write_1h=write_1h,
                  cache_read=_token_count(getattr(response_usage, "cache_read_input_tokens", None)))
    prompt = usage.input_tokens + usage.cache_write_5m + usage.cache_write_1h + usage.cache_read
    if prompt > MAX_CALL_TOKENS:  # each count in range, their sum a prompt no context window holds
        raise ValueError(f"usage's prompt of {prompt} tokens is more than any call reads")
    return usage


def run_success_check(task: GoldenTask, workdir: Path,
                      env: dict[str, str] | None = None) -> CommandResult:
    """Run the task's success check in ``workdir`` (shell string, env allowlist, no API keys,
    ``timeout = task.timeout_s``; without ``env``, :func:`sandbox_env` with a private
    ``TMPDIR``; its pytest anchored to ``workdir``, :func:`anchor_pytest`). Raises ``OSError``
    only if the shell cannot start."""
    workdir = Path(workdir).resolve()
    if env is not None:
        return run_process(task.success_check, workdir, timeout_s=task.timeout_s,
                           env=anchor_pytest(env, workdir), shell=True)
    with run_tmpdir() as tmp:
        return run_process(task.success_check, workdir, timeout_s=task.timeout_s,
                           env=anchor_pytest(sandbox_env(tmpdir=tmp), workdir), shell=True)


def check_failure(task: GoldenTask, result: CommandResult) -> str:
    """The stored error of a failed success check, one line for every backend: the tail of its
    output (a traceback's last lines), secrets redacted."""
    if result.timed_out:
        return f"success check timed out after {task.timeout_s:g}s"
    tail = redact_secrets(result.output.strip()[-_ERROR_CHARS:])
    return _one_line(f"success check failed (exit {result.exit_code}): {tail}")


def run_task(client: anthropic.Anthropic, *, task: GoldenTask, workdir: Path, system_prompt: str,
             model: str, caps: RunCaps, backend_name: str, seed: int,
             retry: RetryPolicy | None = None,
             max_tokens_per_call: int = DEFAULT_MAX_TOKENS_PER_CALL,
             call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
             clock: Callable[[], float] = time.monotonic,
             env: dict[str, str] | None = None) -> RunResult:
    """Play ``task`` in the throwaway copy ``workdir`` with ``client`` and return what it cost.

    Never raises for a failure of the model, the tools or the check: every run ends in a
    :class:`RunResult` with a typed outcome (see the module docstring). ``env`` is the
    environment of tool commands and the check (default :func:`sandbox_env`); its ``TMPDIR`` and
    ``HOME`` are always the run's own :func:`run_tmpdir`, so concurrent runs never share a pytest
    temp root and no command the model chooses reads the user's home.
    """
    with run_tmpdir() as tmp:
        run_env = {**(sandbox_env() if env is None else env), "TMPDIR": tmp, "HOME": tmp}
        loop = _Loop(client.with_options(max_retries=0), task=task, workdir=Path(workdir),
                     system_prompt=system_prompt, model=model, caps=caps, retry=retry or RetryPolicy(),
                     max_tokens_per_call=max_tokens_per_call, call_timeout_s=call_timeout_s,
                     clock=clock, env=run_env)
        outcome, error = loop.play()
        completed = False
        if outcome is None:  # the agent stopped: the check decides
            outcome, completed, error = loop.check()
    return RunResult(task_id=task.id, backend=backend_name, model=model, seed=seed,
                     outcome=outcome, completed=completed, turns=loop.turns,
                     duration_s=clock() - loop.started, calls=loop.calls, error=error)


class _Loop:
    def __init__(self, client: anthropic.Anthropic, *, task: GoldenTask, workdir: Path,
                 system_prompt: str, model: str, caps: RunCaps, retry: RetryPolicy,
                 max_tokens_per_call: int, call_timeout_s: float, clock: Callable[[], float],
                 env: dict[str, str]) -> None:
        self.client, self.task, self.workdir = client, task, workdir
        self.system_prompt, self.model, self.caps, self.retry = system_prompt, model, caps, retry
        self.max_tokens_per_call, self.call_timeout_s = max_tokens_per_call, call_timeout_s
        self.clock, self.env = clock, env
        self.started = clock()
        self.deadline = self.started + caps.max_wall_s
        self.turns = 0
        self._last_call_s = 0.0
        self.calls: list[CallUsage] = []
        self.messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": task.prompt}]}]

    def time_left(self) -> float:
        return self.deadline - self.clock()

    def play(self) -> tuple[Outcome | None, str]:
        """The tool loop. ``(None, "")`` when the agent stopped and the check should run."""
        if not self.workdir.is_dir():
            return Outcome.INFRA_ERROR, f"run copy {self.workdir} does not exist"
        toolbox = Toolbox(self.workdir, check_command=self.task.success_check,
                          command_timeout_s=self.task.timeout_s, deadline=self.deadline,
                          env=self.env, clock=self.clock)
        while self.turns < self.caps.max_turns:
            if self.time_left() <= 0:
                return Outcome.BUDGET_EXCEEDED, f"wall-time cap of {self.caps.max_wall_s:g}s reached"
            output_left = self.caps.max_output_tokens - self.usage.output_tokens
            try:
                response = call_with_retries(lambda: self._create(output_left), self.retry,
                                             time_left=self.time_left)
            except Exception as exc:  # any failure of the model call ends the run, typed
                # The wall cap cut a call short after the agent had used its time: its budget.
                # An API that never answered (no turn yet) is infrastructure, not the agent.
                if isinstance(exc, (anthropic.APITimeoutError, RetriesExhausted)) and self.time_left() <= 0 \
                        and self.turns > 0:
                    return Outcome.BUDGET_EXCEEDED, f"wall-time cap of {self.caps.max_wall_s:g}s reached"
                outcome = classify_error(exc)
                if outcome is Outcome.BUDGET_EXCEEDED and self.turns == 0:
                    # the task's own prompt outgrew the context before the agent did anything:
                    # nothing the agent spent, and no measurement (a 0-token run looks like a saving)
                    return Outcome.INFRA_ERROR, describe_error(exc) + " (on the first call: the task's prompt alone)"
                return outcome, describe_error(exc)
            self.turns += 1
            try:
                usage = usage_of(response.usage)
                asked = self.request_max_tokens(output_left)
                if usage.output_tokens > asked:
                    raise ValueError(f"usage reports {usage.output_tokens} output tokens, {asked} were allowed")
                # priced as the model asked for: the reply's name is the endpoint's word, and a
                # "<synthetic>" or unknown name would make a paid call free
                self.calls.append(CallUsage(model=self.model, usage=usage, duration_s=self._last_call_s))
                assistant = [_block_param(b) for b in response.content]
            except (AttributeError, TypeError, ValueError, OverflowError) as exc:
                return Outcome.INFRA_ERROR, _one_line(f"unusable model response: {exc}")
            cap = self._token_cap_reached()
            if cap:
                return Outcome.BUDGET_EXCEEDED, cap
            if response.stop_reason == "model_context_window_exceeded":
                return Outcome.BUDGET_EXCEEDED, "the conversation outgrew the model's context window"
            if not assistant:  # an empty reply: nothing to continue from, the agent is done
                return None, ""
            self.messages.append({"role": "assistant", "content": assistant})
            tool_uses = [b for b in assistant if b.get("type") == "tool_use"]
            if any(not isinstance(b.get("id"), str) or not b.get("id") for b in tool_uses):
                return Outcome.INFRA_ERROR, "unusable model response: a tool_use block without an id"
            if not tool_uses:
                if response.stop_reason == "max_tokens":
                    self.messages.append({"role": "user", "content": [
                        {"type": "text", "text": "Your reply hit the output limit; continue."}]})
                    continue
                return None, ""
            results = []
            for block in tool_uses:
                if self.time_left() <= 0:
                    return Outcome.BUDGET_EXCEEDED, f"wall-time cap of {self.caps.max_wall_s:g}s reached"
                result = toolbox.execute(str(block.get("name")), block.get("input"))
                entry: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("id"),
                                         "content": redact_secrets(result.text)}  # what leaves the machine
                if result.is_error:
                    entry["is_error"] = True
                results.append(entry)
            self.messages.append({"role": "user", "content": results})
        return None, ""  # turn cap: the agent is done; the check decides

    def _create(self, output_left: int) -> Any:
        started = time.monotonic()
        try:
            return self.client.messages.create(**self.request(output_left))
        finally:
            self._last_call_s = time.monotonic() - started

    def request_max_tokens(self, output_left: int) -> int:
        return max(1, min(self.max_tokens_per_call, output_left))

    def request(self, output_left: int) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.request_max_tokens(output_left),
            "tools": TOOL_DEFINITIONS,
            "messages": _with_moving_breakpoint(self.messages),
            "timeout": max(0.001, min(self.call_timeout_s, self.time_left())),
        }
        if self.system_prompt:
            params["system"] = [{"type": "text", "text": self.system_prompt, "cache_control": _CACHE}]
        return params

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total = total + call.usage
        return total

    def _token_cap_reached(self) -> str:
        usage = self.usage
        if usage.output_tokens >= self.caps.max_output_tokens:
            return f"output-token cap of {self.caps.max_output_tokens} reached"
        if usage.total >= self.caps.max_total_tokens:
            return f"total-token cap of {self.caps.max_total_tokens} reached"
        return ""

    def check(self) -> tuple[Outcome, bool, str]:
        try:
            result = run_success_check(self.task, self.workdir, env=self.env)
        except OSError as exc:
            return Outcome.INFRA_ERROR, False, _one_line(f"success check could not start: {exc}")
        if result.exit_code == 0:
            return Outcome.COMPLETED, True, ""
        return Outcome.TASK_FAILED, False, check_failure(self.task, result)


def _block_param(block: Any) -> dict[str, Any]:
    """A response content block → the minimal param dict sent back in the next request."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return block.model_dump(exclude_none=True)


def _with_moving_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` whose last block carries the cache breakpoint (stored messages
    stay unmarked, so only one message-level breakpoint is ever sent)."""
    if not messages:
        return messages
    last = messages[-1]
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": _CACHE}
    return [*messages[:-1], {**last, "content": blocks}]


def _one_line(text: str) -> str:
    return one_line(text, _ERROR_CHARS)
