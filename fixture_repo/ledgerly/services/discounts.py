"""Discount codes.

A code is either a percentage of the subtotal (``kind="percent"``, ``value=10`` for 10%) or a
fixed amount in the invoice currency (``kind="fixed"``, ``value=25.00``). Discounts reduce the
subtotal before tax; an invoice carries at most one code.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from ledgerly.money import ZERO, apply_rate, percent, round_cents, to_decimal


class DiscountError(ValueError):
    """The code does not exist, is inactive, or cannot apply to this invoice."""


@dataclass(frozen=True)
class Discount:
    code: str
    kind: str
    value: Decimal

    def __post_init__(self) -> None:
        if self.kind not in ("percent", "fixed"):
            raise DiscountError(f"unknown discount kind {self.kind!r}")
        if self.value < 0:
            raise DiscountError("a discount cannot be negative")
        if self.kind == "percent" and self.value > 100:
            raise DiscountError("a percentage discount cannot exceed 100")

    def describe(self) -> str:
        if self.kind == "percent":
            return f"{self.code}: {self.value.normalize()}% off"
        return f"{self.code}: {round_cents(self.value)} off"


def discount_amount(subtotal: Decimal, discount: Discount | None) -> Decimal:
    """How much ``discount`` takes off ``subtotal`` (rounded to the cent)."""
    if discount is None:
        return ZERO
    subtotal = to_decimal(subtotal)
    if discount.kind == "percent":
        return apply_rate(subtotal, percent(discount.value))
    return round_cents(discount.value)


def discount_factor(subtotal: Decimal, discount: Decimal) -> Decimal:
    """The share of the subtotal left after the discount, used to scale tax per line."""
    subtotal = to_decimal(subtotal)
    if subtotal == 0:
        return Decimal(1)
    return (subtotal - to_decimal(discount)) / subtotal


def parse_code(code: str) -> str:
    cleaned = code.strip().upper()
    if not cleaned or not cleaned.replace("-", "").isalnum() or len(cleaned) > 24:
        raise DiscountError(f"not a valid discount code: {code!r}")
    return cleaned
