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

import json
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
        shown = redact_credentials(strip_controls(text, keep_newlines=False), os.environ)[:200]  # user:key@host
        raise UsageError(f"ANTHROPIC_BASE_URL {shown!r} is not an "
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
    # made one line first: stripping an invisible character inside a key a gateway echoed would
    # join it back together after its redaction had missed it
    return one_line(redact_credentials(one_line(str(text), 10 * limit), os.environ), limit)


def exchange_deadline_s(request: httpx2.Request) -> float | None:
    """The request's read timeout (what the caller gave the call), as the whole exchange's limit."""
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read") if isinstance(timeout, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def streams_events(request: httpx2.Request) -> bool:
    """Whether the reply is read as it arrives (server-sent events: ``stream: true`` in the body,
    or the SDK's raw-stream header) rather than whole. The SDK sends every request with
    ``stream=True`` and reads a whole reply's body afterwards, so that flag alone cannot tell."""
    if request.headers.get("x-stainless-raw-response") == "stream":
        return True
    try:
        body = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return False
    return isinstance(body, dict) and body.get("stream") is True


class DeadlineHttpClient(anthropic.DefaultHttpxClient):
    """The SDK's default HTTP client (its limits, keep-alive, proxies from the environment) with
    a total deadline on every exchange whose reply is read whole: headers and body both arrive
    within it (the body is read here, so the SDK's later read returns it at once)."""

    def send(self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any) -> httpx2.Response:
        limit = exchange_deadline_s(request)
        if limit is None or (stream and streams_events(request)):
            return super().send(request, stream=stream, **kwargs)
        outcome: dict[str, Any] = {}
        done, abandoned = threading.Event(), threading.Event()

        def exchange() -> None:
            response: httpx2.Response | None = None
            try:
                response = super(DeadlineHttpClient, self).send(request, stream=stream, **kwargs)
                response.read()  # a no-op when sent with stream=False (read already)
                outcome["response"] = response
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc
            finally:
                if response is not None and ("error" in outcome or abandoned.is_set()):
                    response.close()  # nobody will read it: its connection goes back now
                done.set()

        threading.Thread(target=exchange, name="warden-api-exchange", daemon=True).start()
        if not done.wait(limit):
            abandoned.set()
            raise httpx2.ReadTimeout(f"no complete reply within {limit:g}s", request=request)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]
