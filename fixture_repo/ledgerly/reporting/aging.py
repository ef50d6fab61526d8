"""Accounts-receivable aging: open balances grouped by how long they are overdue."""

from __future__ import annotations

from datetime import date

from ledgerly.money import ZERO
from ledgerly.services.invoicing import InvoiceService

BUCKETS = ("current", "1-30", "31-60", "61-90", "90+")


def bucket_for(days_overdue: int) -> str:
    """The aging bucket of an invoice ``days_overdue`` days past its due date."""
    if days_overdue <= 0:
        return "current"
    if days_overdue < 30:
        return "1-30"
    if days_overdue < 60:
        return "31-60"
    if days_overdue < 90:
        return "61-90"
    return "90+"


def aging_report(invoicing: InvoiceService, as_of: date) -> dict[str, dict]:
    """``{bucket: {"count": n, "balance": Decimal}}`` over all open invoices at ``as_of``."""
    report = {bucket: {"count": 0, "balance": ZERO} for bucket in BUCKETS}
    for invoice in invoicing.invoices.open_invoices():
        if invoice.due_on is None:
            continue
        balance = invoicing.balance_due(invoice.id)
        if balance <= 0:
            continue
        bucket = bucket_for((as_of - invoice.due_on).days)
        report[bucket]["count"] += 1
        report[bucket]["balance"] += balance
    return report


def render_aging(report: dict[str, dict], currency: str = "USD") -> str:
    from ledgerly.money import format_money

    lines = [f"{'bucket':<8} {'invoices':>8} {'balance':>14}"]
    for bucket in BUCKETS:
        entry = report[bucket]
        lines.append(f"{bucket:<8} {entry['count']:>8} {format_money(entry['balance'], currency):>14}")
    return "\n".join(lines)
