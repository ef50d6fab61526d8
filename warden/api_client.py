"""What warden's Messages API clients (the bench's anthropic backend, the distiller) share: a
checked ``ANTHROPIC_BASE_URL`` and a total deadline on each exchange.

httpx's timeouts bound each network operation, not the exchange: a server that sends a byte
every few seconds never trips a 60-second read timeout and holds the call — and the nightly job —
forever. :class:`DeadlineHttpClient` sends each request (headers and the whole body) in a daemon
thread and gives up when the request's read timeout has passed in total, raising
``ReadTimeout``, which the SDK reports as ``APITimeoutError``, as for any other timeout. The
abandoned thread ends when the server closes or sends its last byte; the caller holds nothing of
it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import anthropic
import httpx2

from warden.errors import UsageError
from warden.sanitize import one_line, redact_credentials, strip_controls

DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's own, said explicitly (see api_base_url)
MAX_CALL_TOKENS = 10_000_000  # no Messages API call reads or writes more (context windows are ≤ 1M)


def api_base_url(value: str | None) -> str:
    """The endpoint for ``ANTHROPIC_BASE_URL``'s ``value``: :data:`DEFAULT_BASE_URL` when unset or
    blank — passed to the SDK explicitly, which would otherwise read a blank variable itself and
    fail every call — or a one-line :class:`UsageError` when it is not an http(s) URL with a host:
    said at once, not after a round of retries against nothing."""
    from urllib.parse import urlsplit

    text = (value or "").strip()
    if not text:
        return DEFAULT_BASE_URL
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 — raises ValueError for a port out of range or not a number
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in text)
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(f"ANTHROPIC_BASE_URL {strip_controls(text, keep_newlines=False)[:200]!r} is not an "
                         "http(s) URL (a scheme, a host without spaces, a port 1-65535 if any)")
    return text


def describe_api_error(exc: BaseException, limit: int = 500) -> str:
    """One line naming a Messages API failure — status, error type and the server's message, or
    the exception — at most ``limit`` characters, with the configured credentials and anything
    shaped like a secret redacted (a gateway may echo the key it refused)."""
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        kind = error.get("type") or type(exc).__name__
        text = f"HTTP {exc.status_code} {kind}: {error.get('message') or exc.message}"
    elif isinstance(exc, anthropic.APITimeoutError):
        text = "API request timed out"
    elif isinstance(exc, anthropic.APIConnectionError):
        text = f"API connection error: {exc.__cause__ or exc}"
    elif isinstance(exc, ValueError):  # the SDK could not decode a 200's body (a gateway's broken JSON)
        text = f"unreadable Messages API reply: {type(exc).__name__}: {exc}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return one_line(redact_credentials(str(text), os.environ), limit)


def exchange_deadline_s(request: httpx2.Request) -> float | None:
    """The request's read timeout (what the caller gave the call), as the whole exchange's limit."""
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read") if isinstance(timeout, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


class DeadlineHttpClient(anthropic.DefaultHttpxClient):
    """The SDK's default HTTP client (its limits, keep-alive, proxies from the environment) with
    a total deadline on every non-streamed exchange."""

    def send(self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any) -> httpx2.Response:
        limit = exchange_deadline_s(request)
        if stream or limit is None:
            return super().send(request, stream=stream, **kwargs)
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def exchange() -> None:
            try:
                outcome["response"] = super(DeadlineHttpClient, self).send(request, stream=False, **kwargs)
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=exchange, name="warden-api-exchange", daemon=True).start()
        if not done.wait(limit):
            raise httpx2.ReadTimeout(f"no complete reply within {limit:g}s", request=request)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]
