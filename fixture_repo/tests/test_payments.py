from decimal import Decimal

import pytest

from ledgerly.models import InvoiceStatus
from ledgerly.repository import Conflict
from ledgerly.services.payments import PaymentError
from ledgerly.testing import demo_app


def test_partial_payment_keeps_invoice_open():
    app = demo_app()
    app.payment_service.record(4, "800.00")
    assert app.invoices.get(4).status == InvoiceStatus.ISSUED
    assert app.invoicing.balance_due(4) == Decimal("1000.00")


def test_payment_on_draft_is_refused():
    app = demo_app()
    with pytest.raises(Conflict):
        app.payment_service.record(8, "10.00")


def test_unknown_method_is_refused():
    app = demo_app()
    with pytest.raises(PaymentError):
        app.payment_service.record(4, "10.00", method="bitcoin")
