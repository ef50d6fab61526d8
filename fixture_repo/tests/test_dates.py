from datetime import date, datetime, timedelta, timezone

import pytest

from ledgerly.utils.dates import add_months, due_date, local_date, parse_date, resolve_timezone


def test_due_date_adds_net_terms():
    assert due_date(date(2024, 1, 15), 30) == date(2024, 2, 14)


def test_due_date_refuses_negative_terms():
    with pytest.raises(ValueError):
        due_date(date(2024, 1, 15), -1)


def test_add_months_same_day():
    assert add_months(date(2024, 1, 15), 1) == date(2024, 2, 15)
    assert add_months(date(2024, 11, 3), 3) == date(2025, 2, 3)


def test_parse_date_error_is_clear():
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        parse_date("15/01/2024")


def test_fixed_offset_zone():
    assert resolve_timezone("+05:30").utcoffset(None) == timedelta(hours=5, minutes=30)
    moment = datetime(2024, 3, 1, 22, 0, tzinfo=timezone.utc)
    assert local_date(moment, "+05:30") == date(2024, 3, 2)
