"""Payment reminders for overdue invoices.

An issued invoice is overdue once the business's local date (``LEDGERLY_TIMEZONE``) is after
its due date. Reminders escalate with the number of days overdue:

====================  ==========================================
days overdue          level
====================  ==========================================
1 – 13                ``friendly``  — a polite nudge
14 – 29               ``firm``      — asks for payment within 7 days
30 and more           ``final``     — announces collection steps
====================  ==========================================

``ledgerly remind`` prints the reminders that are due today; sending them is left to the
operator's mail setup (see docs/reporting.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from ledgerly.models import Customer, Invoice
from ledgerly.money import format_money
from ledgerly.repository import CustomerRepository, InvoiceRepository, NotFound
from ledgerly.services.invoicing import InvoiceService
from ledgerly.utils.dates import days_between

LEVELS = (
    (30, "final"),
    (14, "firm"),
    (1, "friendly"),
)

TEMPLATES = {
    "friendly": (
        "Subject: Invoice {number} is now overdue\n\n"
        "Dear {name},\n\n"
        "our records show that invoice {number} over {balance}, due on {due_on}, has not been\n"
        "paid yet. If you have already sent the payment, please ignore this message.\n\n"
        "Kind regards\n"
    ),
    "firm": (
        "Subject: Second reminder: invoice {number}\n\n"
        "Dear {name},\n\n"
        "invoice {number} over {balance} is {days} days overdue. Please pay the balance within\n"
        "7 days or contact us if there is a problem with the invoice.\n\n"
        "Kind regards\n"
    ),
    "final": (
        "Subject: Final reminder: invoice {number}\n\n"
        "Dear {name},\n\n"
        "invoice {number} over {balance} is {days} days overdue. Unless we receive the payment\n"
        "within 7 days we will hand the matter to our collection agency.\n\n"
        "Kind regards\n"
    ),
}


@dataclass(frozen=True)
class Reminder:
    invoice_id: int
    number: str
    customer_email: str
    level: str
    days_overdue: int
    text: str


def is_overdue(due_on: date, now: datetime, zone: str = "UTC") -> bool:
    """True when the business's local date at ``now`` is after ``due_on``."""
    return now.date() > due_on


def days_overdue(due_on: date, now: datetime, zone: str = "UTC") -> int:
    if not is_overdue(due_on, now, zone):
        return 0
    return days_between(due_on, now.date())


def level_for(days: int) -> str | None:
    for threshold, level in LEVELS:
        if days >= threshold:
            return level
    return None


def render(invoice: Invoice, customer: Customer, balance: str, days: int, level: str) -> str:
    return TEMPLATES[level].format(
        number=invoice.number,
        name=customer.name,
        balance=balance,
        due_on=invoice.due_on.isoformat() if invoice.due_on else "?",
        days=days,
    )


class ReminderService:
    def __init__(
        self,
        customers: CustomerRepository,
        invoices: InvoiceRepository,
        invoicing: InvoiceService,
        zone: str = "UTC",
    ) -> None:
        self.customers = customers
        self.invoices = invoices
        self.invoicing = invoicing
        self.zone = zone

    def due_reminders(self, now: datetime) -> list[Reminder]:
        """One reminder per overdue open invoice of a customer that still exists."""
        reminders: list[Reminder] = []
        for invoice in self.invoices.open_invoices():
            if invoice.due_on is None or not is_overdue(invoice.due_on, now, self.zone):
                continue
            try:
                customer = self.customers.get(invoice.customer_id)
            except NotFound:
                continue
            balance = self.invoicing.balance_due(invoice.id)
            if balance <= 0:
                continue
            days = days_overdue(invoice.due_on, now, self.zone)
            level = level_for(days)
            if level is None:
                continue
            text = render(invoice, customer, format_money(balance, invoice.currency), days, level)
            reminders.append(
                Reminder(
                    invoice_id=invoice.id,
                    number=invoice.number or "",
                    customer_email=customer.email,
                    level=level,
                    days_overdue=days,
                    text=text,
                )
            )
        return reminders
