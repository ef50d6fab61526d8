"""Reporting queries.

Every function takes an open connection and returns plain data (lists of dicts with integer
cents, or :class:`~decimal.Decimal` where noted) so that the CLI, the HTTP API and the CSV
export can render it as they like.
"""

from __future__ import annotations

import sqlite3
from datetime import date

from ledgerly.money import from_cents


def revenue_by_customer(conn: sqlite3.Connection, year: int) -> list[dict]:
    """Per active customer: invoices issued in ``year`` and the payments received on them.

    Returns ``[{"customer_id", "name", "invoices", "paid_cents"}]`` ordered by ``paid_cents``
    descending, then name; customers without invoices in that year are left out.
    """
    result = []
    customers = conn.execute(
        "SELECT id, name FROM customers WHERE deleted_at IS NULL ORDER BY id"
    ).fetchall()
    for customer in customers:
        invoices = conn.execute(
            "SELECT id FROM invoices WHERE customer_id = ? AND status IN ('issued', 'paid')"
            " AND substr(issued_on, 1, 4) = ?",
            (customer["id"], f"{year:04d}"),
        ).fetchall()
        if not invoices:
            continue
        paid = 0
        for invoice in invoices:
            row = conn.execute(
                "SELECT COALESCE(SUM(amount_cents), 0) FROM payments WHERE invoice_id = ?",
                (invoice["id"],),
            ).fetchone()
            paid += row[0]
        result.append(
            {
                "customer_id": customer["id"],
                "name": customer["name"],
                "invoices": len(invoices),
                "paid_cents": paid,
            }
        )
    result.sort(key=lambda item: (-item["paid_cents"], item["name"]))
    return result


def monthly_revenue(conn: sqlite3.Connection, year: int) -> list[dict]:
    """Payments received per calendar month of ``year`` (UTC), all twelve months listed."""
    rows = conn.execute(
        "SELECT substr(received_at, 6, 2) AS month, SUM(amount_cents) AS cents, COUNT(*) AS n"
        " FROM payments WHERE substr(received_at, 1, 4) = ? GROUP BY month",
        (f"{year:04d}",),
    ).fetchall()
    by_month = {int(row["month"]): (row["cents"], row["n"]) for row in rows}
    return [
        {
            "month": f"{year:04d}-{month:02d}",
            "paid_cents": by_month.get(month, (0, 0))[0],
            "payments": by_month.get(month, (0, 0))[1],
        }
        for month in range(1, 13)
    ]


def top_customers(conn: sqlite3.Connection, limit: int = 10) -> list[dict]:
    """Customers by total payments received, all time, best first."""
    rows = conn.execute(
        "SELECT c.id AS customer_id, c.name AS name, SUM(p.amount_cents) AS paid_cents"
        " FROM customers c"
        " JOIN invoices i ON i.customer_id = c.id"
        " JOIN payments p ON p.invoice_id = i.id"
        " GROUP BY c.id ORDER BY paid_cents DESC, c.name LIMIT ?",
        (limit,),
    ).fetchall()
    return [dict(row) for row in rows]


def outstanding_by_customer(conn: sqlite3.Connection) -> list[dict]:
    """Open (issued, unpaid) invoices per customer with their due dates."""
    rows = conn.execute(
        "SELECT c.id AS customer_id, c.name AS name, i.id AS invoice_id, i.number AS number,"
        " i.due_on AS due_on"
        " FROM invoices i JOIN customers c ON c.id = i.customer_id"
        " WHERE i.status = 'issued' ORDER BY c.name, i.due_on"
    ).fetchall()
    grouped: dict[int, dict] = {}
    for row in rows:
        entry = grouped.setdefault(
            row["customer_id"], {"customer_id": row["customer_id"], "name": row["name"], "invoices": []}
        )
        entry["invoices"].append({"invoice_id": row["invoice_id"], "number": row["number"], "due_on": row["due_on"]})
    return list(grouped.values())


def payments_between(conn: sqlite3.Connection, start: date, end: date) -> list[dict]:
    """Payments received from ``start`` to ``end`` inclusive (UTC dates)."""
    rows = conn.execute(
        "SELECT p.id, p.invoice_id, i.number, p.amount_cents, p.method, p.received_at"
        " FROM payments p JOIN invoices i ON i.id = p.invoice_id"
        " WHERE substr(p.received_at, 1, 10) BETWEEN ? AND ? ORDER BY p.received_at, p.id",
        (start.isoformat(), end.isoformat()),
    ).fetchall()
    return [dict(row) for row in rows]


def tax_summary(conn: sqlite3.Connection, year: int) -> list[dict]:
    """Net line amounts per tax rate on invoices issued in ``year`` (for the tax return).

    Amounts are Decimals: quantity × unit price, without discounts (discounted invoices are
    listed separately by the accountant).
    """
    rows = conn.execute(
        "SELECT l.tax_rate AS tax_rate, l.quantity AS quantity, l.unit_price_cents AS unit_price_cents"
        " FROM line_items l JOIN invoices i ON i.id = l.invoice_id"
        " WHERE i.status IN ('issued', 'paid') AND substr(i.issued_on, 1, 4) = ?",
        (f"{year:04d}",),
    ).fetchall()
    from decimal import Decimal

    per_rate: dict[str, Decimal] = {}
    for row in rows:
        net = Decimal(row["quantity"]) * from_cents(row["unit_price_cents"])
        per_rate[row["tax_rate"]] = per_rate.get(row["tax_rate"], Decimal(0)) + net
    return [{"tax_rate": rate, "net": amount.quantize(Decimal("0.01"))} for rate, amount in sorted(per_rate.items())]
