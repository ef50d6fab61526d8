"""CSV export of invoices for the accountant.

Columns: number, customer, email, status, issued_on, due_on, currency, subtotal, discount, tax,
total, paid. Amounts are decimal strings in the invoice currency (``"1234.50"``).
"""

from __future__ import annotations

from typing import TextIO

from ledgerly.services.invoicing import InvoiceService

COLUMNS = (
    "number",
    "customer",
    "email",
    "status",
    "issued_on",
    "due_on",
    "currency",
    "subtotal",
    "discount",
    "tax",
    "total",
    "paid",
)


def invoice_rows(invoicing: InvoiceService, include_drafts: bool = False) -> list[list[str]]:
    rows = []
    for invoice in invoicing.invoices.all():
        if invoice.status.value == "draft" and not include_drafts:
            continue
        customer = invoicing.customers.get(invoice.customer_id, include_deleted=True)
        totals = invoicing.totals(invoice.id)
        rows.append(
            [
                invoice.number or "",
                customer.name,
                customer.email,
                invoice.status.value,
                invoice.issued_on.isoformat() if invoice.issued_on else "",
                invoice.due_on.isoformat() if invoice.due_on else "",
                invoice.currency,
                str(totals.subtotal),
                str(totals.discount),
                str(totals.tax),
                str(totals.total),
                str(invoicing.payments.total_paid(invoice.id)),
            ]
        )
    return rows


def write_csv(invoicing: InvoiceService, out: TextIO, include_drafts: bool = False) -> int:
    """Write the export to ``out``; returns the number of invoices written."""
    rows = invoice_rows(invoicing, include_drafts)
    out.write(",".join(COLUMNS) + "\n")
    for row in rows:
        out.write(",".join(row) + "\n")
    return len(rows)
