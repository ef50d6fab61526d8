"""Routing and the HTTP server.

:data:`ROUTES` is the whole API surface: ``(method, path pattern, handler)``. Patterns use
``{name}`` for integer path parameters. :func:`dispatch` is the framework-free core (tests
call it directly); :class:`Handler` adapts it to :mod:`http.server`.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

from ledgerly.app import App
from ledgerly.http import handlers
from ledgerly.http.validation import ValidationError
from ledgerly.money import MoneyError
from ledgerly.repository import Conflict, NotFound
from ledgerly.services.discounts import DiscountError
from ledgerly.services.invoicing import InvoiceError
from ledgerly.services.payments import PaymentError
from ledgerly.utils.pagination import PaginationError

log = logging.getLogger("ledgerly.http")

MAX_BODY_BYTES = 1_000_000

Handler = Callable[[App, dict, dict, Any], tuple[int, Any]]

ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/health", handlers.health),
    ("GET", "/customers", handlers.list_customers),
    ("POST", "/customers", handlers.create_customer),
    ("GET", "/customers/search", handlers.search_customers),
    ("GET", "/customers/{id}", handlers.get_customer),
    ("DELETE", "/customers/{id}", handlers.delete_customer),
    ("GET", "/invoices", handlers.list_invoices),
    ("POST", "/invoices", handlers.create_invoice),
    ("GET", "/invoices/{id}", handlers.get_invoice),
    ("POST", "/invoices/{id}/issue", handlers.issue_invoice),
    ("POST", "/invoices/{id}/void", handlers.void_invoice),
    ("GET", "/invoices/{id}/payments", handlers.list_payments),
    ("POST", "/payments", handlers.create_payment),
    ("GET", "/reports/revenue", handlers.report_revenue),
    ("GET", "/reports/aging", handlers.report_aging),
    ("GET", "/reports/monthly", handlers.report_monthly),
]

# Exceptions the services raise on bad input, and the status each becomes.
CLIENT_ERRORS: list[tuple[type[Exception], int]] = [
    (ValidationError, 400),
    (PaginationError, 400),
    (InvoiceError, 422),
    (PaymentError, 422),
    (DiscountError, 422),
    (MoneyError, 400),
    (NotFound, 404),
    (Conflict, 409),
]


def _compile(pattern: str) -> re.Pattern[str]:
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[0-9]+)", pattern)
    return re.compile(f"^{regex}$")


_COMPILED = [(method, _compile(pattern), handler) for method, pattern, handler in ROUTES]


def match(method: str, path: str) -> tuple[Handler | None, dict, bool]:
    """``(handler, params, path_known)``; ``path_known`` tells 405 from 404."""
    path_known = False
    for route_method, regex, handler in _COMPILED:
        found = regex.match(path)
        if not found:
            continue
        path_known = True
        if route_method == method:
            return handler, found.groupdict(), True
    return None, {}, path_known


def dispatch(app: App, method: str, target: str, body: Any = None) -> tuple[int, Any]:
    """Route one request and turn every failure into a status and a JSON error payload."""
    parts = urlsplit(target)
    query = dict(parse_qsl(parts.query))
    handler, params, path_known = match(method.upper(), parts.path.rstrip("/") or "/")
    if handler is None:
        if path_known:
            return 405, {"error": f"method {method} not allowed on {parts.path}"}
        return 404, {"error": f"no route for {parts.path}"}
    try:
        return handler(app, params, query, body)
    except tuple(exc for exc, _ in CLIENT_ERRORS) as exc:
        for exc_type, status in CLIENT_ERRORS:
            if isinstance(exc, exc_type):
                return status, {"error": str(exc)}
        raise  # unreachable: the tuple above is built from the same list
    except sqlite3.Error:
        log.exception("database error on %s %s", method, target)
        return 503, {"error": "database unavailable"}
    except Exception:
        log.exception("unhandled error on %s %s", method, target)
        return 500, {"error": "internal server error"}


class RequestHandler(BaseHTTPRequestHandler):
    app: App  # set by serve()
    server_version = "ledgerly"

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValidationError("request body too large")
        if length == 0:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ValidationError("the request body is not valid JSON") from None

    def _respond(self, status: int, payload: Any) -> None:
        data = b"" if payload is None else json.dumps(payload, default=str).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _handle(self, method: str) -> None:
        try:
            body = self._read_body() if method in ("POST", "PUT", "PATCH") else None
        except ValidationError as exc:
            self._respond(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        status, payload = dispatch(self.app, method, self.path, body)
        self._respond(status, payload)

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.info("%s - %s", self.address_string(), format % args)


def serve(app: App, host: str, port: int) -> None:
    """Serve until interrupted."""
    handler = type("BoundHandler", (RequestHandler,), {"app": app})
    server = ThreadingHTTPServer((host, port), handler)
    log.info("ledgerly listening on http://%s:%d", host, port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
