"""A total deadline on each Messages API exchange (the bench's anthropic backend, the distiller).

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
