"""Payments against issued invoices.

A payment is recorded against one invoice. When the payments received cover the invoice
total, the invoice becomes ``paid``. Partial payments leave it ``issued`` with a balance due.
"""

from __future__ import annotations

from decimal import Decimal

from ledgerly.models import InvoiceStatus, Payment, PaymentMethod
from ledgerly.money import MoneyError, round_cents
from ledgerly.repository import Conflict, InvoiceRepository, PaymentRepository
from ledgerly.services.invoicing import InvoiceService


class PaymentError(ValueError):
    """A payment that cannot be recorded."""


class PaymentService:
    def __init__(self, invoices: InvoiceRepository, payments: PaymentRepository, invoicing: InvoiceService) -> None:
        self.invoices = invoices
        self.payments = payments
        self.invoicing = invoicing

    def record(
        self,
        invoice_id: int,
        amount: Decimal | str,
        method: str = "transfer",
        reference: str = "",
        received_at: str | None = None,
    ) -> Payment:
        """Record a payment; marks the invoice paid once it is fully covered."""
        invoice = self.invoices.get(invoice_id)
        if invoice.status != InvoiceStatus.ISSUED:
            raise Conflict(f"invoice {invoice_id} is {invoice.status.value}; payments need an issued invoice")
        try:
            value = round_cents(amount)
        except MoneyError as exc:
            raise PaymentError(str(exc)) from None
        if value <= 0:
            raise PaymentError("a payment must be a positive amount")
        try:
            payment_method = PaymentMethod(method)
        except ValueError:
            allowed = ", ".join(m.value for m in PaymentMethod)
            raise PaymentError(f"unknown payment method {method!r} (one of {allowed})") from None
        payment = self.payments.add(invoice_id, value, payment_method, reference, received_at)
        total = self.invoicing.totals(invoice_id).total
        if self.payments.total_paid(invoice_id) > total:
            self.invoices.set_status(invoice_id, InvoiceStatus.PAID)
        return payment

    def refund(self, payment_id: int) -> None:
        """Remove a payment recorded by mistake; a paid invoice goes back to issued."""
        row = self.payments.conn.execute("SELECT invoice_id FROM payments WHERE id = ?", (payment_id,)).fetchone()
        if row is None:
            raise PaymentError(f"payment {payment_id} not found")
        self.payments.delete(payment_id)
        invoice = self.invoices.get(row["invoice_id"])
        if invoice.status == InvoiceStatus.PAID:
            self.invoices.conn.execute(
                "UPDATE invoices SET status = 'issued' WHERE id = ?", (invoice.id,)
            )

    def history(self, invoice_id: int) -> list[Payment]:
        self.invoices.get(invoice_id)
        return self.payments.for_invoice(invoice_id)
