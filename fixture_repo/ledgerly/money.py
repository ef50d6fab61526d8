"""Money arithmetic.

All amounts are :class:`decimal.Decimal` in the invoice currency while computing and integer
cents when stored. Never use ``float`` for money: convert at the edges with :func:`to_decimal`.

Rounding policy (see docs/architecture.md, "Money"): amounts are rounded to the cent, halves
away from zero ("commercial rounding"), once per line item and once for the tax of each line.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Iterable, Union

Number = Union[Decimal, int, float, str]

CENT = Decimal("0.01")
ZERO = Decimal("0.00")

# Currencies without minor units are still stored in "cents" (x100) so that the schema stays
# uniform; they are only displayed without decimals.
ZERO_DECIMAL_CURRENCIES = frozenset({"JPY"})

CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CHF": "CHF ", "JPY": "¥"}


class MoneyError(ValueError):
    """A value cannot be used as an amount of money."""


def to_decimal(value: Number) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise MoneyError("a boolean is not an amount")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(value)
    try:
        return Decimal(str(value).strip().replace("_", ""))
    except InvalidOperation:
        raise MoneyError(f"not an amount: {value!r}") from None


def round_cents(value: Number) -> Decimal:
    return to_decimal(value).quantize(CENT, rounding=ROUND_HALF_EVEN)


def to_cents(value: Number) -> int:
    """Round ``value`` to the cent and return it as an integer number of cents."""
    return int(round_cents(value) * 100)


def from_cents(cents: int) -> Decimal:
    """Integer cents (as stored) to a Decimal amount."""
    if not isinstance(cents, int) or isinstance(cents, bool):
        raise MoneyError(f"cents must be an integer, got {cents!r}")
    return (Decimal(cents) / 100).quantize(CENT)


def apply_rate(amount: Number, rate: Number) -> Decimal:
    """``amount × rate`` rounded to the cent (used for tax and percentage discounts)."""
    return round_cents(to_decimal(amount) * to_decimal(rate))


def sum_amounts(amounts: Iterable[Number]) -> Decimal:
    total = ZERO
    for amount in amounts:
        total += to_decimal(amount)
    return round_cents(total)


def allocate(total: Number, parts: int) -> list[Decimal]:
    """Split ``total`` into ``parts`` amounts that differ by at most one cent and sum to it.

    The leftover cents go to the first parts, so ``allocate("10.00", 3)`` is
    ``[3.34, 3.33, 3.33]``. Used for instalment plans.
    """
    if parts < 1:
        raise MoneyError("cannot allocate into fewer than one part")
    cents = to_cents(total)
    sign = -1 if cents < 0 else 1
    base, leftover = divmod(abs(cents), parts)
    result = []
    for index in range(parts):
        share = base + (1 if index < leftover else 0)
        result.append(from_cents(sign * share))
    return result


def format_money(amount: Number, currency: str = "USD") -> str:
    value = round_cents(amount)
    symbol = CURRENCY_SYMBOLS.get(currency, currency + " ")
    sign = "-" if value < 0 else ""
    if currency in ZERO_DECIMAL_CURRENCIES:
        return f"{sign}{symbol}{abs(value):,.0f}"
    return f"{sign}{symbol}{abs(value):,.2f}"


def parse_money(text: str) -> Decimal:
    """Parse user input such as ``"1,234.50"``, ``"$12"`` or ``"-3.5"`` into an amount."""
    cleaned = text.strip()
    for symbol in CURRENCY_SYMBOLS.values():
        cleaned = cleaned.replace(symbol.strip(), "")
    cleaned = cleaned.replace(",", "").strip()
    if not cleaned:
        raise MoneyError("empty amount")
    return round_cents(to_decimal(cleaned))


def percent(value: Number) -> Decimal:
    """``"20"`` or ``20`` (percent) to the fraction ``0.20``."""
    fraction = to_decimal(value) / 100
    if not Decimal("0") <= fraction <= Decimal("1"):
        raise MoneyError(f"a percentage must be between 0 and 100, got {value}")
    return fraction
