"""Domain objects. Repositories build them from rows; services and the API consume them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal


class InvoiceStatus(str, enum.Enum):
    DRAFT = "draft"
    ISSUED = "issued"
    PAID = "paid"
    VOID = "void"


ALLOWED_TRANSITIONS: dict[InvoiceStatus, frozenset[InvoiceStatus]] = {
    InvoiceStatus.DRAFT: frozenset({InvoiceStatus.ISSUED, InvoiceStatus.VOID}),
    InvoiceStatus.ISSUED: frozenset({InvoiceStatus.PAID, InvoiceStatus.VOID}),
    InvoiceStatus.PAID: frozenset(),
    InvoiceStatus.VOID: frozenset(),
}


class PaymentMethod(str, enum.Enum):
    TRANSFER = "transfer"
    CARD = "card"
    CASH = "cash"
    CHEQUE = "cheque"


@dataclass
class Customer:
    id: int | None
    name: str
    email: str
    country: str = "US"
    created_at: str = ""
    deleted_at: str | None = None

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "email": self.email,
            "country": self.country,
            "created_at": self.created_at,
            "deleted": self.is_deleted,
        }


@dataclass
class LineItem:
    description: str
    quantity: Decimal
    unit_price: Decimal
    tax_rate: Decimal
    id: int | None = None
    invoice_id: int | None = None
    position: int = 0

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "position": self.position,
            "description": self.description,
            "quantity": str(self.quantity),
            "unit_price": str(self.unit_price),
            "tax_rate": str(self.tax_rate),
        }


@dataclass
class Invoice:
    id: int | None
    customer_id: int
    currency: str
    status: InvoiceStatus = InvoiceStatus.DRAFT
    number: str | None = None
    issued_on: date | None = None
    due_on: date | None = None
    discount_code: str | None = None
    notes: str = ""
    created_at: str = ""
    lines: list[LineItem] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return self.status == InvoiceStatus.ISSUED

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "number": self.number,
            "customer_id": self.customer_id,
            "status": self.status.value,
            "currency": self.currency,
            "issued_on": self.issued_on.isoformat() if self.issued_on else None,
            "due_on": self.due_on.isoformat() if self.due_on else None,
            "discount_code": self.discount_code,
            "notes": self.notes,
            "lines": [line.to_dict() for line in self.lines],
        }


@dataclass
class Payment:
    id: int | None
    invoice_id: int
    amount: Decimal
    received_at: str
    method: PaymentMethod = PaymentMethod.TRANSFER
    reference: str = ""

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "invoice_id": self.invoice_id,
            "amount": str(self.amount),
            "received_at": self.received_at,
            "method": self.method.value,
            "reference": self.reference,
        }


@dataclass(frozen=True)
class Totals:
    subtotal: Decimal
    discount: Decimal
    tax: Decimal
    total: Decimal

    def to_dict(self) -> dict:
        return {k: str(v) for k, v in self.__dict__.items()}
