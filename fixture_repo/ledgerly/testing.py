"""A small, deterministic data set for tests, demos and ``ledgerly demo``.

``demo_app()`` returns an in-memory :class:`~ledgerly.app.App` with six customers (one of them
deleted), a year of invoices in several states, payments and two discount codes. The data is
fixed: tests may rely on the figures documented next to each invoice below.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from ledgerly.app import App
from ledgerly.config import load_settings
from ledgerly.models import InvoiceStatus, PaymentMethod
from ledgerly.services.invoicing import LineInput

CUSTOMERS = [
    ("Acme Corp", "acme@example.com", "US"),
    ("Globex Ltd", "billing@globex.example", "GB"),
    ("Initech", "ap@initech.example", "US"),
    ("Umbrella GmbH", "finance@umbrella.example", "DE"),
    ("Stark Supplies", "orders@stark.example", "US"),
    ("Wayne Retail", "accounts@wayne.example", "US"),
]


def empty_app(**env: str) -> App:
    """An in-memory app with default settings (``env`` overrides ``LEDGERLY_*`` values)."""
    return App.open(":memory:", settings=load_settings(dict(env)))


def _issue(app: App, customer_id: int, lines: list[LineInput], issued_on: str) -> int:
    invoice = app.invoicing.create_draft(customer_id, lines)
    app.invoicing.issue(invoice.id, issued_on=date.fromisoformat(issued_on))
    return invoice.id


def _pay(app: App, invoice_id: int, amount: str, received_at: str, settle: bool = False) -> None:
    app.payments.add(invoice_id, Decimal(amount), PaymentMethod.TRANSFER, "", received_at + "T10:00:00+00:00")
    if settle:
        app.invoices.set_status(invoice_id, InvoiceStatus.PAID)


def demo_app(**env: str) -> App:
    """The demo data set (see the module docstring)."""
    app = empty_app(**env)
    ids = [app.customers.add(name, email, country).id for name, email, country in CUSTOMERS]
    acme, globex, initech, umbrella, stark, _wayne = ids

    # 1: Acme, 2024-01-15, total 1685.50, paid in full in two payments.
    inv = _issue(app, acme, [LineInput("Consulting (days)", "10", "120.00", "0.20"),
                             LineInput("Travel", "1", "245.50", "0")], "2024-01-15")
    _pay(app, inv, "1000.00", "2024-02-01")
    _pay(app, inv, "685.50", "2024-02-10", settle=True)
    # 2: Acme, 2024-03-01, total 600.00, 200.00 paid, due 2024-03-31.
    inv = _issue(app, acme, [LineInput("Support retainer", "1", "500.00", "0.20")], "2024-03-01")
    _pay(app, inv, "200.00", "2024-03-20")
    # 3: Globex, 2024-02-10, total 359.96, paid.
    inv = _issue(app, globex, [LineInput("Licence", "3", "99.99", "0.20")], "2024-02-10")
    _pay(app, inv, "359.96", "2024-03-05", settle=True)
    # 4: Initech, 2024-05-02, total 1800.00, unpaid, due 2024-06-01.
    _issue(app, initech, [LineInput("Audit (days)", "2", "750.00", "0.20")], "2024-05-02")
    # 5: Umbrella, 2023-11-20, total 571.20, paid.
    inv = _issue(app, umbrella, [LineInput("Hosting (months)", "12", "40.00", "0.19")], "2023-11-20")
    _pay(app, inv, "571.20", "2023-12-15", settle=True)
    # 6: Umbrella, 2024-06-10, total 285.60, 100.00 paid, due 2024-07-10.
    inv = _issue(app, umbrella, [LineInput("Hosting (months)", "6", "40.00", "0.19")], "2024-06-10")
    _pay(app, inv, "100.00", "2024-07-01")
    # 7: Stark, 2024-04-04, total 11994.00, paid; Stark is deleted afterwards.
    inv = _issue(app, stark, [LineInput("Hardware", "5", "1999.00", "0.20")], "2024-04-04")
    _pay(app, inv, "11994.00", "2024-04-30", settle=True)
    # 8: Initech draft (never issued).
    app.invoicing.create_draft(initech, [LineInput("Follow-up workshop", "1", "900.00", "0.20")])
    # 9: Globex, issued then voided.
    inv = _issue(app, globex, [LineInput("Duplicate licence", "1", "99.99", "0.20")], "2024-02-11")
    app.invoicing.void(inv, "issued twice")

    app.customers.soft_delete(stark)
    app.discounts.add("WELCOME10", "percent", Decimal("10"))
    app.discounts.add("FLAT50", "fixed", Decimal("50.00"))
    return app
