"""Endpoint handlers. Each takes ``(app, params, query, body)`` and returns
``(status, payload)``; :mod:`ledgerly.http.server` turns exceptions into error responses."""

from __future__ import annotations

from datetime import date
from typing import Any

from ledgerly.app import App
from ledgerly.http.validation import (
    ValidationError,
    line_fields,
    optional_str,
    require_amount,
    require_int,
    require_object,
    require_str,
)
from ledgerly.models import InvoiceStatus
from ledgerly.reporting import aging, queries
from ledgerly.services.invoicing import LineInput
from ledgerly.utils.dates import local_date, parse_date, utcnow
from ledgerly.utils.pagination import parse_page_args

Response = tuple[int, Any]


def health(app: App, params: dict, query: dict, body: Any) -> Response:
    return 200, {"status": "ok"}


# ---------------------------------------------------------------- customers


def list_customers(app: App, params: dict, query: dict, body: Any) -> Response:
    page, per_page = parse_page_args(query, app.settings.page_size)
    result = app.customers.list(page=page, per_page=per_page)
    return 200, result.to_dict(lambda customer: customer.to_dict())


def create_customer(app: App, params: dict, query: dict, body: Any) -> Response:
    body = require_object(body)
    customer = app.customers.add(
        require_str(body, "name", 200),
        require_str(body, "email", 320),
        optional_str(body, "country", "US", 2) or "US",
    )
    return 201, customer.to_dict()


def get_customer(app: App, params: dict, query: dict, body: Any) -> Response:
    return 200, app.customers.get(int(params["id"])).to_dict()


def search_customers(app: App, params: dict, query: dict, body: Any) -> Response:
    term = query.get("q", "")
    return 200, {"items": [c.to_dict() for c in app.customers.search(term)]}


def delete_customer(app: App, params: dict, query: dict, body: Any) -> Response:
    app.customers.soft_delete(int(params["id"]))
    return 204, None


# ---------------------------------------------------------------- invoices


def list_invoices(app: App, params: dict, query: dict, body: Any) -> Response:
    page, per_page = parse_page_args(query, app.settings.page_size)
    status = None
    if query.get("status"):
        try:
            status = InvoiceStatus(query["status"])
        except ValueError:
            raise ValidationError(f"unknown status {query['status']!r}") from None
    result = app.invoices.list(page=page, per_page=per_page, status=status)
    return 200, result.to_dict(lambda invoice: invoice.to_dict())


def create_invoice(app: App, params: dict, query: dict, body: Any) -> Response:
    body = require_object(body)
    lines = [LineInput(**line_fields(raw, index)) for index, raw in enumerate(body["lines"], 1)]
    invoice = app.invoicing.create_draft(
        require_int(body, "customer_id"),
        lines,
        currency=optional_str(body, "currency", app.settings.currency, 3) or None,
        notes=optional_str(body, "notes"),
    )
    return 201, app.invoicing.summary(invoice.id)


def get_invoice(app: App, params: dict, query: dict, body: Any) -> Response:
    return 200, app.invoicing.summary(int(params["id"]))


def issue_invoice(app: App, params: dict, query: dict, body: Any) -> Response:
    body = require_object(body or {})
    issued_on = body.get("issued_on")
    day = parse_date(issued_on) if issued_on else None
    invoice = app.invoicing.issue(int(params["id"]), issued_on=day)
    return 200, app.invoicing.summary(invoice.id)


def void_invoice(app: App, params: dict, query: dict, body: Any) -> Response:
    body = require_object(body or {})
    invoice = app.invoicing.void(int(params["id"]), optional_str(body, "reason", "", 500))
    return 200, app.invoicing.summary(invoice.id)


# ---------------------------------------------------------------- payments


def create_payment(app: App, params: dict, query: dict, body: Any) -> Response:
    body = require_object(body)
    payment = app.payment_service.record(
        require_int(body, "invoice_id"),
        require_amount(body, "amount"),
        method=optional_str(body, "method", "transfer", 20) or "transfer",
        reference=optional_str(body, "reference", "", 200),
    )
    return 201, payment.to_dict()


def list_payments(app: App, params: dict, query: dict, body: Any) -> Response:
    payments = app.payment_service.history(int(params["id"]))
    return 200, {"items": [p.to_dict() for p in payments]}


# ---------------------------------------------------------------- reports


def report_revenue(app: App, params: dict, query: dict, body: Any) -> Response:
    try:
        year = int(query.get("year", str(utcnow().year)))
    except ValueError:
        raise ValidationError("year must be an integer") from None
    return 200, {"year": year, "customers": queries.revenue_by_customer(app.conn, year)}


def report_aging(app: App, params: dict, query: dict, body: Any) -> Response:
    as_of = parse_date(query["as_of"]) if query.get("as_of") else local_date(utcnow(), app.settings.timezone)
    report = aging.aging_report(app.invoicing, as_of)
    return 200, {
        "as_of": as_of.isoformat(),
        "buckets": {k: {"count": v["count"], "balance": str(v["balance"])} for k, v in report.items()},
    }


def report_monthly(app: App, params: dict, query: dict, body: Any) -> Response:
    year = int(query.get("year", str(date.today().year)))
    return 200, {"year": year, "months": queries.monthly_revenue(app.conn, year)}
