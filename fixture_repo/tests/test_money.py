from decimal import Decimal

import pytest

from ledgerly.money import MoneyError, allocate, apply_rate, format_money, from_cents, parse_money, to_cents


def test_to_cents_and_back():
    assert to_cents("12.34") == 1234
    assert from_cents(1234) == Decimal("12.34")


def test_apply_rate_rounds_to_cents():
    assert apply_rate("100.00", "0.2") == Decimal("20.00")
    assert apply_rate("10.01", "0.19") == Decimal("1.90")


def test_format_money():
    assert format_money("1234.5", "USD") == "$1,234.50"
    assert format_money("-3", "EUR") == "-€3.00"
    assert format_money("1500", "JPY") == "¥1,500"


def test_parse_money_accepts_symbols_and_separators():
    assert parse_money("$1,234.50") == Decimal("1234.50")
    with pytest.raises(MoneyError):
        parse_money("  ")


def test_from_cents_refuses_floats():
    with pytest.raises(MoneyError):
        from_cents(12.5)
