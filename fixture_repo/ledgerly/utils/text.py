"""Text helpers: invoice numbers, slugs, e-mail normalisation, fixed-width tables."""

from __future__ import annotations

import re
import unicodedata

_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_NUMBER_RE = re.compile(r"^([A-Z0-9]{1,8})-(\d{4})-(\d{4,})$")


def format_invoice_number(prefix: str, year: int, sequence: int) -> str:
    """``format_invoice_number("INV", 2024, 7)`` -> ``"INV-2024-0007"``.

    The sequence restarts every year and is zero-padded to four digits (wider when needed).
    """
    if sequence < 1:
        raise ValueError("invoice sequence starts at 1")
    if not 1900 <= year <= 9999:
        raise ValueError(f"implausible invoice year {year}")
    return f"{prefix.upper()}-{year:04d}-{sequence:04d}"


def parse_invoice_number(number: str) -> tuple[str, int, int]:
    """Inverse of :func:`format_invoice_number`: ``(prefix, year, sequence)``."""
    match = _NUMBER_RE.match(number.strip().upper())
    if not match:
        raise ValueError(f"not an invoice number: {number!r}")
    return match.group(1), int(match.group(2)), int(match.group(3))


def slugify(text: str, max_length: int = 48) -> str:
    """Lower-case ASCII slug for file names of exports: ``"Café Ünïon" -> "cafe-union"``."""
    normalized = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", normalized).strip("-").lower()
    return slug[:max_length].rstrip("-") or "untitled"


def normalize_email(email: str) -> str:
    """Trim and lower-case the domain part; the local part is kept as typed."""
    email = email.strip()
    if not _EMAIL_RE.match(email):
        raise ValueError(f"not an e-mail address: {email!r}")
    local, _, domain = email.rpartition("@")
    return f"{local}@{domain.lower()}"


def truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain fixed-width table for the terminal."""
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    return "\n".join(lines)
