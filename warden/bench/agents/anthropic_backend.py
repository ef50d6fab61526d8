"""The ``anthropic`` backend: a real model through the Messages API and the shared harness.

Configuration: ``ANTHROPIC_API_KEY`` (required), ``ANTHROPIC_BASE_URL`` (optional: any
compatible endpoint), the model from ``--model`` / ``WARDEN_MODEL``, else the agent's
``agent.md``, else :data:`DEFAULT_MODEL`. The SDK client is built with ``max_retries=0``: the
retry policy is warden's own (:class:`~warden.bench.agents.harness.RetryPolicy` — bounded
exponential backoff with jitter on 408/409/429/5xx, 529 overloaded and connection errors), so
it is explicit, the same for every backend, and testable with an injected sleep.

Failure classification (see ``harness.py``): API errors after the retries, non-retryable API
errors (401/403 auth, 402 quota, 404 unknown model, 400 bad request), timeouts and crashes are
``infra_error``; only the success check makes a ``task_failed``. Results are labelled with
backend ``anthropic`` and the model id the API reports.
"""

from __future__ import annotations

import os
from pathlib import Path

import anthropic
import httpx2

from warden.bench.agents.harness import DEFAULT_MAX_TOKENS_PER_CALL, RetryPolicy, run_task
from warden.bench.results import RunCaps, RunResult
from warden.bench.tasks import GoldenTask
from warden.config import Settings
from warden.errors import UsageError
from warden.api_client import DeadlineHttpClient, api_base_url

DEFAULT_MODEL = "claude-sonnet-4-6"


def resolve_model(settings: Settings, model: str | None = None, agent_model: str | None = None) -> str:
    """``--model`` (or an explicit argument) > settings (``WARDEN_MODEL``) > agent.md > default.
    A model id must be one printable word that fits the stored model columns."""
    from warden.store.models import BenchRun

    limit = BenchRun.__table__.c.model.type.length  # every model column has this width
    chosen = model or settings.model or agent_model or DEFAULT_MODEL
    if len(chosen) > limit or not chosen.isprintable() or any(c.isspace() for c in chosen):
        raise UsageError(f"invalid model id {chosen[:60]!r}{'…' if len(chosen) > 60 else ''}: "
                         f"one word of at most {limit} printable characters")
    return chosen


def make_client(*, api_key: str, base_url: str | None = None,
                http_client: httpx2.Client | None = None) -> anthropic.Anthropic:
    """The real SDK client with SDK-level retries off (warden retries, see RetryPolicy) and, unless
    ``http_client`` is given, a total deadline on each exchange (:mod:`warden.api_client`)."""
    return anthropic.Anthropic(api_key=api_key, base_url=api_base_url(base_url), max_retries=0,
                               http_client=http_client or DeadlineHttpClient())


class AnthropicBackend:
    """Plays golden tasks with a real model. One instance per worker thread."""

    name = "anthropic"

    def __init__(self, settings: Settings, *, model: str | None = None, agent_model: str | None = None,
                 env: dict[str, str] | None = None, http_client: httpx2.Client | None = None,
                 retry: RetryPolicy | None = None,
                 max_tokens_per_call: int = DEFAULT_MAX_TOKENS_PER_CALL) -> None:
        source = os.environ if env is None else env
        api_key = (source.get("ANTHROPIC_API_KEY") or "").strip()
        if not api_key:
            raise UsageError("the anthropic backend needs ANTHROPIC_API_KEY "
                             "(or run offline with --backend sim)")
        self.base_url = api_base_url(source.get("ANTHROPIC_BASE_URL"))
        self.model = resolve_model(settings, model, agent_model)
        self.client = make_client(api_key=api_key, base_url=self.base_url, http_client=http_client)
        self.retry = retry or RetryPolicy()
        self.max_tokens_per_call = max_tokens_per_call

    def run(self, task: GoldenTask, workdir: Path, system_prompt: str, seed: int,
            caps: RunCaps) -> RunResult:
        # A real model is not seeded; the seed is recorded so paired runs stay identifiable.
        return run_task(self.client, task=task, workdir=workdir, system_prompt=system_prompt,
                        model=self.model, caps=caps, backend_name=self.name, seed=seed,
                        retry=self.retry, max_tokens_per_call=self.max_tokens_per_call)
