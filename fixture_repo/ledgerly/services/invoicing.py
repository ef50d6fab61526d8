"""Invoices: drafting, totals, issuing, voiding and duplicating.

Totals are computed per line and summed (see docs/architecture.md, "Money"):

* line amount  = quantity × unit price, rounded to the cent;
* discount     = from the invoice's discount code, taken off the subtotal;
* tax          = per line, on the line amount scaled by the discount, rounded to the cent;
* total        = subtotal − discount + tax.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from ledgerly.config import Settings
from ledgerly.models import Invoice, InvoiceStatus, LineItem, Totals
from ledgerly.money import ZERO, MoneyError, apply_rate, round_cents, sum_amounts, to_decimal
from ledgerly.repository import (
    Conflict,
    CustomerRepository,
    DiscountRepository,
    InvoiceRepository,
    NotFound,
    PaymentRepository,
)
from ledgerly.services.discounts import Discount, DiscountError, discount_amount, discount_factor, parse_code
from ledgerly.utils.dates import due_date, local_date, utcnow
from ledgerly.utils.text import format_invoice_number

MAX_LINES = 200
MAX_QUANTITY = Decimal("1000000")


class InvoiceError(ValueError):
    """A request about an invoice that the business rules refuse."""


@dataclass(frozen=True)
class LineInput:
    """One line as a client sends it, before validation."""

    description: str
    quantity: Any
    unit_price: Any
    tax_rate: Any = None


def line_amount(line: LineItem) -> Decimal:
    """Net amount of one line: quantity × unit price, rounded to the cent."""
    return round_cents(to_decimal(line.quantity) * to_decimal(line.unit_price))


def compute_totals(lines: list[LineItem], discount: Discount | None = None) -> Totals:
    """Totals of an invoice from its lines and optional discount (see module docstring)."""
    amounts = [line_amount(line) for line in lines]
    subtotal = sum_amounts(amounts)
    off = discount_amount(subtotal, discount)
    factor = discount_factor(subtotal, off)
    tax = sum_amounts(apply_rate(amount * factor, line.tax_rate) for amount, line in zip(amounts, lines))
    total = round_cents(subtotal - off + tax)
    return Totals(subtotal=subtotal, discount=off, tax=tax, total=total)


class InvoiceService:
    """Business operations on invoices. Holds no state besides its repositories."""

    def __init__(
        self,
        settings: Settings,
        customers: CustomerRepository,
        invoices: InvoiceRepository,
        payments: PaymentRepository,
        discounts: DiscountRepository,
    ) -> None:
        self.settings = settings
        self.customers = customers
        self.invoices = invoices
        self.payments = payments
        self.discounts = discounts

    # ---------------------------------------------------------------- drafting

    def validate_line(self, raw: LineInput) -> LineItem:
        description = (raw.description or "").strip()
        if not description:
            raise InvoiceError("every line needs a description")
        if len(description) > 500:
            raise InvoiceError("a line description is limited to 500 characters")
        try:
            quantity = to_decimal(raw.quantity)
            unit_price = round_cents(raw.unit_price)
            tax_rate = self.settings.tax_rate if raw.tax_rate is None else to_decimal(raw.tax_rate)
        except MoneyError as exc:
            raise InvoiceError(str(exc)) from None
        if quantity <= 0 or quantity > MAX_QUANTITY:
            raise InvoiceError(f"quantity must be between 0 and {MAX_QUANTITY}, got {quantity}")
        if unit_price < 0:
            raise InvoiceError("unit price cannot be negative (use a credit note)")
        if not Decimal(0) <= tax_rate < Decimal(1):
            raise InvoiceError("tax rate is a fraction between 0 and 1 (0.2 means 20%)")
        return LineItem(description=description, quantity=quantity, unit_price=unit_price, tax_rate=tax_rate)

    def create_draft(
        self,
        customer_id: int,
        lines: list[LineInput],
        currency: str | None = None,
        notes: str = "",
    ) -> Invoice:
        """A new draft invoice with ``lines`` for an existing customer."""
        self.customers.get(customer_id)
        if len(lines) > MAX_LINES:
            raise InvoiceError(f"an invoice has at most {MAX_LINES} lines")
        validated = [self.validate_line(line) for line in lines]
        invoice = self.invoices.create(customer_id, currency or self.settings.currency, notes)
        for line in validated:
            self.invoices.add_line(invoice.id, line)
        return self.invoices.get(invoice.id)

    def add_line(self, invoice_id: int, raw: LineInput) -> Invoice:
        invoice = self.invoices.get(invoice_id)
        if len(invoice.lines) >= MAX_LINES:
            raise InvoiceError(f"an invoice has at most {MAX_LINES} lines")
        self.invoices.add_line(invoice_id, self.validate_line(raw))
        return self.invoices.get(invoice_id)

    def remove_line(self, invoice_id: int, position: int) -> Invoice:
        self.invoices.remove_line(invoice_id, position)
        return self.invoices.get(invoice_id)

    def apply_discount(self, invoice_id: int, code: str | None) -> Invoice:
        invoice = self.invoices.get(invoice_id)
        if invoice.status != InvoiceStatus.DRAFT:
            raise InvoiceError("discounts can only change on a draft")
        if code is None:
            return self.invoices.set_discount(invoice_id, None)
        code = parse_code(code)
        if self.discounts.get(code) is None:
            raise DiscountError(f"unknown or inactive discount code {code}")
        return self.invoices.set_discount(invoice_id, code)

    # ---------------------------------------------------------------- totals

    def discount_for(self, invoice: Invoice) -> Discount | None:
        if not invoice.discount_code:
            return None
        found = self.discounts.get(invoice.discount_code)
        if found is None:
            return None
        kind, value = found
        return Discount(code=invoice.discount_code, kind=kind, value=value)

    def totals(self, invoice_id: int) -> Totals:
        invoice = self.invoices.get(invoice_id)
        return compute_totals(invoice.lines, self.discount_for(invoice))

    def balance_due(self, invoice_id: int) -> Decimal:
        """Total minus payments received (never below zero)."""
        due = self.totals(invoice_id).total - self.payments.total_paid(invoice_id)
        return max(due, ZERO)

    def summary(self, invoice_id: int) -> dict:
        """Everything a client shows about one invoice."""
        invoice = self.invoices.get(invoice_id)
        totals = compute_totals(invoice.lines, self.discount_for(invoice))
        paid = self.payments.total_paid(invoice_id)
        data = invoice.to_dict()
        data["totals"] = totals.to_dict()
        data["paid"] = str(paid)
        data["balance_due"] = str(max(totals.total - paid, ZERO))
        return data

    # ---------------------------------------------------------------- lifecycle

    def next_number(self, year: int) -> str:
        prefix = self.settings.invoice_prefix
        return format_invoice_number(prefix, year, self.invoices.last_sequence(prefix, year) + 1)

    def issue(self, invoice_id: int, issued_on: date | None = None) -> Invoice:
        """Give a draft its number, issue date and due date. Empty drafts cannot be issued."""
        invoice = self.invoices.get(invoice_id)
        if invoice.status != InvoiceStatus.DRAFT:
            raise Conflict(f"invoice {invoice_id} is already {invoice.status.value}")
        if not invoice.lines:
            raise InvoiceError("an invoice without lines cannot be issued")
        if self.totals(invoice_id).total <= 0:
            raise InvoiceError("an invoice must have a positive total to be issued")
        issued_on = issued_on or local_date(utcnow(), self.settings.timezone)
        due_on = due_date(issued_on, self.settings.payment_terms_days)
        number = self.next_number(issued_on.year)
        return self.invoices.mark_issued(invoice_id, number, issued_on.isoformat(), due_on.isoformat())

    def void(self, invoice_id: int, reason: str = "") -> Invoice:
        invoice = self.invoices.get(invoice_id)
        if self.payments.total_paid(invoice_id) > 0:
            raise Conflict("an invoice with payments cannot be voided; refund the payments first")
        if reason:
            note = (invoice.notes + "\n" if invoice.notes else "") + f"Voided: {reason}"
            self.invoices.conn.execute("UPDATE invoices SET notes = ? WHERE id = ?", (note, invoice_id))
        return self.invoices.set_status(invoice_id, InvoiceStatus.VOID)

    def duplicate(self, invoice_id: int) -> Invoice:
        """A new draft with the same customer, currency and lines (e.g. a monthly retainer)."""
        source = self.invoices.get(invoice_id)
        try:
            self.customers.get(source.customer_id)
        except NotFound:
            raise InvoiceError("the customer of this invoice was deleted") from None
        copy = self.invoices.create(source.customer_id, source.currency, source.notes)
        for line in source.lines:
            self.invoices.add_line(
                copy.id,
                LineItem(
                    description=line.description,
                    quantity=line.quantity,
                    unit_price=line.unit_price,
                    tax_rate=line.tax_rate,
                ),
            )
        return self.invoices.get(copy.id)
