"""The anthropic backend: configuration, retries with backoff, and failure classification —
the real SDK client talking to a scripted model through an in-process HTTP transport."""

from __future__ import annotations

import random
from pathlib import Path

import httpx2
import pytest

from harness_scripted import (FIX_SCRIPT, NoSleep, ScriptedModel, error_response, make_project, make_task,
                              overloaded, text)
from warden.bench.agents import get_backend
from warden.bench.agents.anthropic_backend import DEFAULT_MODEL, AnthropicBackend
from warden.bench.agents.harness import RetryPolicy
from warden.bench.results import Outcome, RunCaps
from warden.config import load_settings
from warden.errors import UsageError

KEY_ENV = {"ANTHROPIC_API_KEY": "sk-ant-test-key", "PATH": "/usr/bin"}


def backend(scripted: ScriptedModel, *, env: dict[str, str] | None = None, attempts: int = 6,
            sleep: NoSleep | None = None, **options) -> AnthropicBackend:
    policy = RetryPolicy(max_attempts=attempts, sleep=sleep or NoSleep(), rng=random.Random(1))
    return AnthropicBackend(load_settings(), env=KEY_ENV if env is None else env,
                            http_client=scripted.http_client(), retry=policy, **options)


def run(b: AnthropicBackend, workdir: Path):
    return b.run(make_task(), workdir, "system prompt", 3, RunCaps())


def test_a_missing_api_key_is_a_one_line_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        AnthropicBackend(load_settings(), env={"PATH": "/usr/bin"})
    assert "ANTHROPIC_API_KEY" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UsageError):
        get_backend("anthropic", load_settings())  # conftest removed the key from the environment


def test_unknown_backend_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown backend 'gpt'"):
        get_backend("gpt", load_settings())


def test_full_run_sends_the_key_to_the_base_url_and_is_labelled(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.invalid/anthropic")
    model = ScriptedModel(FIX_SCRIPT)
    seen_urls: list[str] = []

    def recording(request: httpx2.Request) -> httpx2.Response:
        seen_urls.append(str(request.url))
        return model(request)

    b = get_backend("anthropic", load_settings(), model="claude-haiku-4-5",
                    http_client=httpx2.Client(transport=httpx2.MockTransport(recording)))
    result = run(b, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.COMPLETED and result.completed and result.turns == 5
    assert (result.backend, result.model, result.seed) == ("anthropic", "claude-haiku-4-5", 3)
    assert seen_urls[0] == "http://gateway.invalid/anthropic/v1/messages"
    assert model.headers[0]["authorization"] == "Bearer sk-ant-from-env"
    assert model.requests[0]["model"] == "claude-haiku-4-5"
    assert sum(c.usage.cache_read for c in result.calls) == 10_000


def test_model_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([])
    assert backend(model).model == DEFAULT_MODEL
    assert backend(model, agent_model="claude-opus-4-5").model == "claude-opus-4-5"
    assert backend(model, model="claude-haiku-4-5", agent_model="claude-opus-4-5").model == "claude-haiku-4-5"
    monkeypatch.setenv("WARDEN_MODEL", "claude-sonnet-4-6")
    b = AnthropicBackend(load_settings(), env=KEY_ENV, agent_model="claude-opus-4-5",
                         http_client=model.http_client())
    assert b.model == "claude-sonnet-4-6"


def test_429_then_success_retries_with_backoff(tmp_path: Path) -> None:
    sleep = NoSleep()
    model = ScriptedModel([error_response(429, "rate_limit_error", headers={"retry-after": "7"}),
                           error_response(429, "rate_limit_error"), *FIX_SCRIPT])
    result = run(backend(model, sleep=sleep), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.COMPLETED and result.turns == 5
    assert len(model.requests) == 7  # the SDK itself never retried: two 429s + five turns
    assert sleep.delays[0] == pytest.approx(7.0)  # retry-after honoured
    assert 1.0 <= sleep.delays[1] <= 2.0  # attempt 2: base 1 s · 2, jitter up to 50 % off


@pytest.mark.parametrize("status,kind", [(500, "api_error"), (502, "api_error"), (503, "api_error"),
                                         (529, "overloaded_error")])
def test_5xx_then_success(tmp_path: Path, status: int, kind: str) -> None:
    model = ScriptedModel([error_response(status, kind), *FIX_SCRIPT])
    result = run(backend(model), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.COMPLETED and len(model.requests) == 6


def test_ten_consecutive_529_are_infra_error_never_task_failed(tmp_path: Path) -> None:
    sleep = NoSleep()
    project = make_project(tmp_path / "copy")
    model = ScriptedModel([overloaded() for _ in range(10)])
    result = run(backend(model, attempts=10, sleep=sleep), project)
    assert result.outcome is Outcome.INFRA_ERROR and not result.completed
    assert result.outcome is not Outcome.TASK_FAILED
    assert len(model.requests) == 10 and model.script == []
    assert "HTTP 529 overloaded_error" in result.error and "after 10 attempts" in result.error
    assert result.turns == 0 and result.calls == []
    # Exponential backoff, capped, with jitter: each delay within [½·d, d] of d = min(30, 2^(n-1)).
    assert len(sleep.delays) == 9
    for n, delay in enumerate(sleep.delays, start=1):
        nominal = min(30.0, 2.0 ** (n - 1))
        assert nominal / 2 <= delay <= nominal
    assert sleep.delays[-1] > sleep.delays[0]


def test_overload_mid_run_is_infra_error_even_after_progress(tmp_path: Path) -> None:
    model = ScriptedModel([FIX_SCRIPT[0], FIX_SCRIPT[1], FIX_SCRIPT[2], *[overloaded() for _ in range(6)]])
    result = run(backend(model), make_project(tmp_path / "copy"))
    # The fix was applied before the API died: still infra, the check is not consulted.
    assert result.outcome is Outcome.INFRA_ERROR and result.turns == 3 and len(result.calls) == 3


def test_connection_errors_are_retried_then_infra_error(tmp_path: Path) -> None:
    model = ScriptedModel([httpx2.ConnectError("connection refused") for _ in range(4)])
    result = run(backend(model, attempts=4), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and len(model.requests) == 4
    assert "connection" in result.error.lower()

    model = ScriptedModel([httpx2.ReadTimeout("slow"), httpx2.ConnectError("reset"), *FIX_SCRIPT])
    result = run(backend(model), make_project(tmp_path / "copy2"))
    assert result.outcome is Outcome.COMPLETED


@pytest.mark.parametrize("status,kind", [(401, "authentication_error"), (403, "permission_error"),
                                         (402, "billing_error"), (404, "not_found_error"),
                                         (400, "invalid_request_error")])
def test_auth_quota_and_request_errors_are_infra_without_retries(tmp_path: Path, status: int, kind: str) -> None:
    sleep = NoSleep()
    model = ScriptedModel([error_response(status, kind, "nope")])
    result = run(backend(model, sleep=sleep), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and len(model.requests) == 1 and sleep.delays == []
    assert result.error == f"HTTP {status} {kind}: nope"


def test_a_plain_finish_without_fix_is_task_failed(tmp_path: Path) -> None:
    model = ScriptedModel([[text("I think it is fine.")]])
    result = run(backend(model), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.TASK_FAILED


def test_retry_policy_delay_is_bounded() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.delay(1, retry_after=100.0) == 8.0  # never beyond the cap


@pytest.mark.parametrize("bad", [{"input_tokens": -5_000_000, "output_tokens": -1_000_000},
                                 {"input_tokens": 10, "output_tokens": 1.5}])
def test_usage_that_is_not_a_token_count_is_an_unusable_response(tmp_path: Path, bad: dict) -> None:
    from harness_scripted import message

    model = ScriptedModel([message(0, [{"type": "text", "text": "done"}], usage_override=bad)])
    result = run(backend(model), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and "not a token count" in result.error


def test_an_api_that_never_answers_is_infra_even_when_the_wall_cap_ends_the_wait(tmp_path: Path) -> None:
    import httpx2 as httpx

    import time

    class Hanging(ScriptedModel):
        def __call__(self, request):  # type: ignore[no-untyped-def]
            time.sleep(0.15)  # the wait the wall cap ends
            raise httpx.ReadTimeout("read timed out")

    result = backend(Hanging([]), attempts=6).run(make_task(), make_project(tmp_path / "copy"), "system prompt", 3,
                                                  RunCaps(max_wall_s=0.2))
    assert result.outcome is Outcome.INFRA_ERROR and result.turns == 0


def test_a_tool_use_without_an_id_is_an_unusable_response(tmp_path: Path) -> None:
    model = ScriptedModel([[{"type": "tool_use", "name": "list_dir", "input": {"path": "."}}]])
    result = run(backend(model), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and "without an id" in result.error
