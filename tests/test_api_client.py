"""A Messages API exchange has a total deadline: a server that drips its reply cannot hold a call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2
import pytest

from harness_scripted import ScriptedModel, make_project, make_task, message, text
from warden.bench.agents.anthropic_backend import AnthropicBackend
from warden.bench.agents.anthropic_backend import make_client as bench_client
from warden.bench.results import Outcome, RunCaps
from warden.config import load_settings
from warden.distill import model_distiller
from warden.api_client import DeadlineHttpClient


class Drip(httpx2.SyncByteStream):
    """A reply body sent one byte at a time, each well within any per-read timeout."""

    def __init__(self, body: bytes, every_s: float) -> None:
        self.body, self.every_s = body, every_s

    def __iter__(self) -> Iterator[bytes]:
        for i in range(len(self.body)):
            time.sleep(self.every_s)
            yield self.body[i:i + 1]


def dripping(every_s: float = 0.05):
    body = message(0, [text("done")]).content

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/json"}, stream=Drip(body, every_s))
    return handler


def sdk(handler, timeout: float) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="sk-test-not-real", base_url="http://scripted.invalid", max_retries=0,
                               timeout=timeout, http_client=DeadlineHttpClient(transport=httpx2.MockTransport(handler)))


def test_a_dripped_reply_times_out_at_the_calls_timeout_in_total() -> None:
    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError):
        sdk(dripping(), timeout=0.5).messages.create(model="m", max_tokens=10,
                                                     messages=[{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 2.0  # the whole body would take len(body) × 50 ms, many seconds


def test_a_reply_within_the_deadline_is_returned_whole() -> None:
    reply = sdk(ScriptedModel([[text("all good")]]), timeout=5).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert reply.content[0].text == "all good"


def test_the_bench_and_the_distiller_build_deadline_clients(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    assert isinstance(bench_client(api_key="k")._client, DeadlineHttpClient)
    assert isinstance(model_distiller.make_client(load_settings())._client, DeadlineHttpClient)


def test_a_bench_run_against_a_dripping_api_ends_at_its_wall_cap(tmp_path: Path) -> None:
    backend = AnthropicBackend(load_settings(), env={"ANTHROPIC_API_KEY": "sk-test-not-real"},
                               http_client=DeadlineHttpClient(transport=httpx2.MockTransport(dripping())))
    started = time.monotonic()
    result = backend.run(make_task(), make_project(tmp_path / "copy"), "system prompt", 1, RunCaps(max_wall_s=0.6))
    assert time.monotonic() - started < 3.0
    assert result.outcome is Outcome.INFRA_ERROR and result.turns == 0  # the API never answered


@pytest.mark.parametrize("value", ["not a url", "ftp://host/x", "http://[::1", "https://", "http://a b",
                                   "http://host:99999", "http://host:port"])
def test_a_base_url_that_is_no_http_url_is_one_line_before_any_call(value: str) -> None:
    from warden.errors import UsageError

    with pytest.raises(UsageError, match="is not an http\\(s\\) URL"):
        AnthropicBackend(load_settings(), env={"ANTHROPIC_API_KEY": "sk-test-not-real", "ANTHROPIC_BASE_URL": value})


def test_a_blank_base_url_is_the_default_endpoint(monkeypatch) -> None:
    from warden.api_client import DEFAULT_BASE_URL, api_base_url

    assert api_base_url("  ") == DEFAULT_BASE_URL and api_base_url(" https://gw.example/a ") == "https://gw.example/a"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "  ")  # the SDK would read it itself, and call "  /v1/messages"
    assert str(model_distiller.make_client(load_settings()).base_url).rstrip("/") == DEFAULT_BASE_URL
    backend = AnthropicBackend(load_settings(), env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": " "})
    assert str(backend.client.base_url).rstrip("/") == DEFAULT_BASE_URL


def test_only_an_event_stream_is_left_to_arrive_as_it_comes() -> None:
    """The SDK sends every request with stream=True and reads a whole reply afterwards: the
    deadline client tells an event stream by the request itself, not by that flag."""
    from warden.api_client import streams_events

    def request(body: bytes, **headers: str) -> httpx2.Request:
        return httpx2.Request("POST", "http://scripted.invalid/v1/messages", content=body, headers=headers)

    assert streams_events(request(b'{"model": "m", "stream": true}'))
    assert streams_events(request(b'{"model": "m"}', **{"X-Stainless-Raw-Response": "stream"}))
    assert not streams_events(request(b'{"model": "m", "max_tokens": 10}'))
    assert not streams_events(request(b'{"model": "m", "stream": "yes"}')) and not streams_events(request(b"not json"))


def test_a_key_echoed_with_an_invisible_character_inside_is_still_redacted(monkeypatch) -> None:
    from warden.api_client import api_base_url, describe_api_error
    from warden.errors import UsageError

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    said = describe_api_error(ValueError("invalid x-api-key sk-test\u200b-not-real"))
    assert "sk-test-not-real" not in said and "[REDACTED]" in said
    with pytest.raises(UsageError) as refused:  # the URL's credentials are not echoed either
        api_base_url("http://user:sk-test-not-real@host:99999")
    assert "sk-test-not-real" not in str(refused.value) and "[REDACTED]" in str(refused.value)
