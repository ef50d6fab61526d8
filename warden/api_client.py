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

import threading
from typing import Any

import anthropic
import httpx2

from warden.errors import UsageError
from warden.sanitize import strip_controls


def checked_base_url(value: str | None) -> str | None:
    """``ANTHROPIC_BASE_URL`` as given (None when unset or blank), or a one-line
    :class:`UsageError` when it is not an http(s) URL with a host — said at once, not after a
    round of retries against nothing."""
    from urllib.parse import urlsplit

    text = (value or "").strip()
    if not text:
        return None
    try:
        parts = urlsplit(text)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(f"ANTHROPIC_BASE_URL {strip_controls(text, keep_newlines=False)[:200]!r} is not an "
                         "http(s) URL")
    return text


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
