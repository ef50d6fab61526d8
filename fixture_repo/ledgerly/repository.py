"""Data access: one repository per aggregate, all SQL of the application lives here
(except the read-only reporting queries in ``ledgerly/reporting``).

Repositories take and return domain objects from :mod:`ledgerly.models`; amounts cross this
boundary as :class:`~decimal.Decimal` and are stored as integer cents.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Iterable

from ledgerly.db import transaction
from ledgerly.models import (
    ALLOWED_TRANSITIONS,
    Customer,
    Invoice,
    InvoiceStatus,
    LineItem,
    Payment,
    PaymentMethod,
)
from ledgerly.money import from_cents, to_cents, to_decimal
from ledgerly.utils.dates import iso_timestamp, parse_optional_date
from ledgerly.utils.pagination import Page, page_bounds
from ledgerly.utils.text import normalize_email


class NotFound(LookupError):
    """No row with that id (or number)."""


class Conflict(ValueError):
    """The change would break an invariant (duplicate e-mail, illegal status change, ...)."""


# --------------------------------------------------------------------------- customers


def _customer_from_row(row: sqlite3.Row) -> Customer:
    return Customer(
        id=row["id"],
        name=row["name"],
        email=row["email"],
        country=row["country"],
        created_at=row["created_at"],
        deleted_at=row["deleted_at"],
    )


class CustomerRepository:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, name: str, email: str, country: str = "US") -> Customer:
        name = name.strip()
        if not name:
            raise ValueError("customer name is required")
        if len(country) != 2 or not country.isalpha():
            raise ValueError(f"country must be a two-letter code, got {country!r}")
        email = normalize_email(email)
        try:
            cursor = self.conn.execute(
                "INSERT INTO customers (name, email, country, created_at) VALUES (?, ?, ?, ?)",
                (name, email, country.upper(), iso_timestamp()),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"a customer with e-mail {email} already exists") from None
        return self.get(cursor.lastrowid)

    def get(self, customer_id: int, include_deleted: bool = False) -> Customer:
        row = self.conn.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
        if row is None or (row["deleted_at"] is not None and not include_deleted):
            raise NotFound(f"customer {customer_id} not found")
        return _customer_from_row(row)

    def get_by_email(self, email: str) -> Customer:
        row = self.conn.execute(
            "SELECT * FROM customers WHERE email = ? AND deleted_at IS NULL", (normalize_email(email),)
        ).fetchone()
        if row is None:
            raise NotFound(f"no customer with e-mail {email}")
        return _customer_from_row(row)

    def count(self, include_deleted: bool = False) -> int:
        where = "" if include_deleted else " WHERE deleted_at IS NULL"
        return self.conn.execute(f"SELECT COUNT(*) FROM customers{where}").fetchone()[0]

    def list(self, page: int = 1, per_page: int = 25, include_deleted: bool = False) -> Page[Customer]:
        limit, offset = page_bounds(page, per_page)
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self.conn.execute(
            f"SELECT * FROM customers {where} ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
        return Page(
            items=[_customer_from_row(row) for row in rows],
            page=page,
            per_page=per_page,
            total=self.count(include_deleted),
        )

    def search(self, term: str, limit: int = 20) -> list[Customer]:
        """Customers whose name or e-mail contains ``term`` (case-insensitive)."""
        term = term.strip()
        if not term:
            return []
        sql = (
            "SELECT * FROM customers WHERE deleted_at IS NULL AND "
            f"(name LIKE '%{term}%' OR email LIKE '%{term}%') ORDER BY name LIMIT {int(limit)}"
        )
        return [_customer_from_row(row) for row in self.conn.execute(sql)]

    def rename(self, customer_id: int, name: str) -> Customer:
        name = name.strip()
        if not name:
            raise ValueError("customer name is required")
        self.get(customer_id)
        self.conn.execute("UPDATE customers SET name = ? WHERE id = ?", (name, customer_id))
        return self.get(customer_id)

    def change_email(self, customer_id: int, email: str) -> Customer:
        self.get(customer_id)
        try:
            self.conn.execute(
                "UPDATE customers SET email = ? WHERE id = ?", (normalize_email(email), customer_id)
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"a customer with e-mail {email} already exists") from None
        return self.get(customer_id)

    def soft_delete(self, customer_id: int) -> None:
        """Hide a customer. Their invoices stay (they are accounting records)."""
        self.get(customer_id)
        self.conn.execute(
            "UPDATE customers SET deleted_at = ? WHERE id = ?", (iso_timestamp(), customer_id)
        )

    def restore(self, customer_id: int) -> Customer:
        self.get(customer_id, include_deleted=True)
        self.conn.execute("UPDATE customers SET deleted_at = NULL WHERE id = ?", (customer_id,))
        return self.get(customer_id)


# --------------------------------------------------------------------------- invoices


def _line_from_row(row: sqlite3.Row) -> LineItem:
    return LineItem(
        id=row["id"],
        invoice_id=row["invoice_id"],
        position=row["position"],
        description=row["description"],
        quantity=Decimal(row["quantity"]),
        unit_price=from_cents(row["unit_price_cents"]),
        tax_rate=Decimal(row["tax_rate"]),
    )


def _invoice_from_row(row: sqlite3.Row, lines: Iterable[LineItem] = ()) -> Invoice:
    return Invoice(
        id=row["id"],
        number=row["number"],
        customer_id=row["customer_id"],
        status=InvoiceStatus(row["status"]),
        currency=row["currency"],
        issued_on=parse_optional_date(row["issued_on"]),
        due_on=parse_optional_date(row["due_on"]),
        discount_code=row["discount_code"],
        notes=row["notes"],
        created_at=row["created_at"],
        lines=list(lines),
    )


class InvoiceRepository:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def create(self, customer_id: int, currency: str, notes: str = "") -> Invoice:
        exists = self.conn.execute("SELECT id FROM customers WHERE id = ?", (customer_id,)).fetchone()
        if exists is None:
            raise NotFound(f"customer {customer_id} not found")
        cursor = self.conn.execute(
            "INSERT INTO invoices (customer_id, currency, notes, created_at) VALUES (?, ?, ?, ?)",
            (customer_id, currency, notes, iso_timestamp()),
        )
        return self.get(cursor.lastrowid)

    def lines(self, invoice_id: int) -> list[LineItem]:
        rows = self.conn.execute(
            "SELECT * FROM line_items WHERE invoice_id = ? ORDER BY position", (invoice_id,)
        ).fetchall()
        return [_line_from_row(row) for row in rows]

    def get(self, invoice_id: int) -> Invoice:
        row = self.conn.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
        if row is None:
            raise NotFound(f"invoice {invoice_id} not found")
        return _invoice_from_row(row, self.lines(invoice_id))

    def get_by_number(self, number: str) -> Invoice:
        row = self.conn.execute("SELECT * FROM invoices WHERE number = ?", (number,)).fetchone()
        if row is None:
            raise NotFound(f"invoice {number} not found")
        return _invoice_from_row(row, self.lines(row["id"]))

    def count(self, status: InvoiceStatus | None = None) -> int:
        if status is None:
            return self.conn.execute("SELECT COUNT(*) FROM invoices").fetchone()[0]
        return self.conn.execute(
            "SELECT COUNT(*) FROM invoices WHERE status = ?", (status.value,)
        ).fetchone()[0]

    def list(self, page: int = 1, per_page: int = 25, status: InvoiceStatus | None = None) -> Page[Invoice]:
        limit, offset = page_bounds(page, per_page)
        if status is None:
            rows = self.conn.execute(
                "SELECT * FROM invoices ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
            ).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT * FROM invoices WHERE status = ? ORDER BY id LIMIT ? OFFSET ?",
                (status.value, limit, offset),
            ).fetchall()
        items = [_invoice_from_row(row, self.lines(row["id"])) for row in rows]
        return Page(items=items, page=page, per_page=per_page, total=self.count(status))

    def all(self) -> list[Invoice]:
        """Every invoice, oldest first (exports; use :meth:`list` for screens)."""
        rows = self.conn.execute("SELECT * FROM invoices ORDER BY id").fetchall()
        return [_invoice_from_row(row, self.lines(row["id"])) for row in rows]

    def for_customer(self, customer_id: int) -> list[Invoice]:
        rows = self.conn.execute(
            "SELECT * FROM invoices WHERE customer_id = ? ORDER BY id", (customer_id,)
        ).fetchall()
        return [_invoice_from_row(row, self.lines(row["id"])) for row in rows]

    def add_line(self, invoice_id: int, line: LineItem) -> LineItem:
        invoice = self.get(invoice_id)
        if invoice.status != InvoiceStatus.DRAFT:
            raise Conflict(f"invoice {invoice_id} is {invoice.status.value}; only drafts can change")
        position = len(invoice.lines) + 1
        cursor = self.conn.execute(
            "INSERT INTO line_items (invoice_id, position, description, quantity, unit_price_cents,"
            " tax_rate) VALUES (?, ?, ?, ?, ?, ?)",
            (
                invoice_id,
                position,
                line.description,
                str(to_decimal(line.quantity)),
                to_cents(line.unit_price),
                str(to_decimal(line.tax_rate)),
            ),
        )
        row = self.conn.execute("SELECT * FROM line_items WHERE id = ?", (cursor.lastrowid,)).fetchone()
        return _line_from_row(row)

    def remove_line(self, invoice_id: int, position: int) -> None:
        invoice = self.get(invoice_id)
        if invoice.status != InvoiceStatus.DRAFT:
            raise Conflict(f"invoice {invoice_id} is {invoice.status.value}; only drafts can change")
        with transaction(self.conn):
            deleted = self.conn.execute(
                "DELETE FROM line_items WHERE invoice_id = ? AND position = ?", (invoice_id, position)
            ).rowcount
            if not deleted:
                raise NotFound(f"invoice {invoice_id} has no line {position}")
            self.conn.execute(
                "UPDATE line_items SET position = position - 1 WHERE invoice_id = ? AND position > ?",
                (invoice_id, position),
            )

    def set_discount(self, invoice_id: int, code: str | None) -> Invoice:
        self.conn.execute("UPDATE invoices SET discount_code = ? WHERE id = ?", (code, invoice_id))
        return self.get(invoice_id)

    def set_status(self, invoice_id: int, status: InvoiceStatus) -> Invoice:
        invoice = self.get(invoice_id)
        if status == invoice.status:
            return invoice
        if status not in ALLOWED_TRANSITIONS[invoice.status]:
            raise Conflict(f"invoice {invoice_id} cannot go from {invoice.status.value} to {status.value}")
        self.conn.execute("UPDATE invoices SET status = ? WHERE id = ?", (status.value, invoice_id))
        return self.get(invoice_id)

    def mark_issued(self, invoice_id: int, number: str, issued_on: str, due_on: str) -> Invoice:
        self.set_status(invoice_id, InvoiceStatus.ISSUED)
        self.conn.execute(
            "UPDATE invoices SET number = ?, issued_on = ?, due_on = ? WHERE id = ?",
            (number, issued_on, due_on, invoice_id),
        )
        return self.get(invoice_id)

    def last_sequence(self, prefix: str, year: int) -> int:
        """Highest sequence number used for ``prefix`` in ``year`` (0 when none)."""
        rows = self.conn.execute(
            "SELECT number FROM invoices WHERE number LIKE ?", (f"{prefix}-{year:04d}-%",)
        ).fetchall()
        highest = 0
        for row in rows:
            try:
                highest = max(highest, int(row["number"].rsplit("-", 1)[1]))
            except (IndexError, ValueError):
                continue
        return highest

    def open_invoices(self) -> list[Invoice]:
        rows = self.conn.execute(
            "SELECT * FROM invoices WHERE status = 'issued' ORDER BY due_on, id"
        ).fetchall()
        return [_invoice_from_row(row, self.lines(row["id"])) for row in rows]


# --------------------------------------------------------------------------- payments


def _payment_from_row(row: sqlite3.Row) -> Payment:
    return Payment(
        id=row["id"],
        invoice_id=row["invoice_id"],
        amount=from_cents(row["amount_cents"]),
        received_at=row["received_at"],
        method=PaymentMethod(row["method"]),
        reference=row["reference"],
    )


class PaymentRepository:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(
        self,
        invoice_id: int,
        amount: Decimal,
        method: PaymentMethod = PaymentMethod.TRANSFER,
        reference: str = "",
        received_at: str | None = None,
    ) -> Payment:
        cents = to_cents(amount)
        if cents <= 0:
            raise ValueError("a payment must be a positive amount")
        cursor = self.conn.execute(
            "INSERT INTO payments (invoice_id, amount_cents, method, received_at, reference)"
            " VALUES (?, ?, ?, ?, ?)",
            (invoice_id, cents, method.value, received_at or iso_timestamp(), reference),
        )
        row = self.conn.execute("SELECT * FROM payments WHERE id = ?", (cursor.lastrowid,)).fetchone()
        return _payment_from_row(row)

    def for_invoice(self, invoice_id: int) -> list[Payment]:
        rows = self.conn.execute(
            "SELECT * FROM payments WHERE invoice_id = ? ORDER BY received_at, id", (invoice_id,)
        ).fetchall()
        return [_payment_from_row(row) for row in rows]

    def total_paid(self, invoice_id: int) -> Decimal:
        cents = self.conn.execute(
            "SELECT COALESCE(SUM(amount_cents), 0) FROM payments WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()[0]
        return from_cents(int(cents))

    def delete(self, payment_id: int) -> None:
        deleted = self.conn.execute("DELETE FROM payments WHERE id = ?", (payment_id,)).rowcount
        if not deleted:
            raise NotFound(f"payment {payment_id} not found")


# --------------------------------------------------------------------------- discount codes


class DiscountRepository:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, code: str, kind: str, value: Decimal) -> None:
        if kind not in ("percent", "fixed"):
            raise ValueError("discount kind must be 'percent' or 'fixed'")
        try:
            self.conn.execute(
                "INSERT INTO discount_codes (code, kind, value) VALUES (?, ?, ?)",
                (code.upper(), kind, str(value)),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"discount code {code} already exists") from None

    def get(self, code: str) -> tuple[str, Decimal] | None:
        row = self.conn.execute(
            "SELECT kind, value FROM discount_codes WHERE code = ? AND active = 1", (code.upper(),)
        ).fetchone()
        if row is None:
            return None
        return row["kind"], Decimal(row["value"])

    def deactivate(self, code: str) -> None:
        self.conn.execute("UPDATE discount_codes SET active = 0 WHERE code = ?", (code.upper(),))
