"""Dates and times.

Timestamps are stored in UTC. Business dates (issue date, due date, "is it overdue today")
are calendar dates in the business's time zone, ``LEDGERLY_TIMEZONE``: an IANA name such as
``"Europe/Berlin"`` or a fixed offset such as ``"+09:00"``.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta, timezone, tzinfo

_OFFSET_RE = re.compile(r"^([+-])(\d{2}):(\d{2})$")


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


def iso_timestamp(moment: datetime | None = None) -> str:
    moment = moment or utcnow()
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat()


def resolve_timezone(name: str) -> tzinfo:
    """``"UTC"``, ``"+05:30"`` or an IANA zone name to a tzinfo."""
    if name.upper() in ("UTC", "Z"):
        return timezone.utc
    match = _OFFSET_RE.match(name)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        delta = timedelta(hours=int(match.group(2)), minutes=int(match.group(3)))
        return timezone(sign * delta)
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, or no tz database on this machine
        raise ValueError(f"unknown time zone {name!r}") from None


def local_date(moment: datetime, zone: str) -> date:
    """The calendar date of ``moment`` in the business time zone ``zone``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(resolve_timezone(zone)).date()


def parse_date(text: str) -> date:
    """``YYYY-MM-DD`` to a date, with a clear error."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a date (expected YYYY-MM-DD): {text!r}") from None


def parse_optional_date(text: str | None) -> date | None:
    if text is None or text == "":
        return None
    return parse_date(text)


def add_days(day: date, days: int) -> date:
    return day + timedelta(days=days)


def add_months(day: date, months: int) -> date:
    """The same day of the month ``months`` later (used for monthly instalments)."""
    month_index = day.month - 1 + months
    year = day.year + month_index // 12
    month = month_index % 12 + 1
    return day.replace(year=year, month=month)


def end_of_month(day: date) -> date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def due_date(issued_on: date, terms_days: int) -> date:
    """Payment is due ``terms_days`` after the issue date (net terms)."""
    if terms_days < 0:
        raise ValueError("payment terms cannot be negative")
    return add_days(issued_on, terms_days)


def days_between(start: date, end: date) -> int:
    return (end - start).days


def month_key(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def quarter_of(day: date) -> int:
    return (day.month - 1) // 3 + 1
