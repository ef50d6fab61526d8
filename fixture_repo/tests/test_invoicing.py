from datetime import date
from decimal import Decimal

import pytest

from ledgerly.models import InvoiceStatus
from ledgerly.services.invoicing import InvoiceError, LineInput
from ledgerly.testing import demo_app, empty_app


def _customer(app):
    return app.customers.add("Test Co", "test@example.com").id


def test_draft_totals():
    app = empty_app()
    invoice = app.invoicing.create_draft(_customer(app), [
        LineInput("Widget", "3", "10.00", "0.20"),
        LineInput("Shipping", "1", "5.00", "0"),
    ])
    totals = app.invoicing.totals(invoice.id)
    assert totals.subtotal == Decimal("35.00")
    assert totals.tax == Decimal("6.00")
    assert totals.total == Decimal("41.00")


def test_issue_assigns_number_and_due_date():
    app = empty_app()
    invoice = app.invoicing.create_draft(_customer(app), [LineInput("Widget", "1", "10.00")])
    issued = app.invoicing.issue(invoice.id, issued_on=date(2024, 5, 2))
    assert issued.status == InvoiceStatus.ISSUED
    assert issued.number == "INV-2024-0001"
    assert issued.due_on == date(2024, 6, 1)


def test_empty_draft_cannot_be_issued():
    app = empty_app()
    invoice = app.invoicing.create_draft(_customer(app), [])
    with pytest.raises(InvoiceError):
        app.invoicing.issue(invoice.id)


def test_percent_discount_reduces_subtotal_before_tax():
    app = demo_app()
    draft = app.invoices.get(8)
    app.invoicing.apply_discount(draft.id, "welcome10")
    totals = app.invoicing.totals(draft.id)
    assert totals.discount == Decimal("90.00")
    assert totals.tax == Decimal("162.00")
    assert totals.total == Decimal("972.00")


def test_demo_figures():
    app = demo_app()
    assert app.invoicing.totals(1).total == Decimal("1685.50")
    assert app.invoicing.balance_due(2) == Decimal("400.00")
