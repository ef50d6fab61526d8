"""Settings for ledgerly, read from ``LEDGERLY_*`` environment variables.

Every setting has a default so that ``ledgerly init`` works on a fresh machine. The table
:data:`ENV_VARS` is the single list of supported variables and their defaults; the docs in
``docs/configuration.md`` describe each of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# name -> default (as the string you would put in the environment)
ENV_VARS: dict[str, str] = {
    "LEDGERLY_DB": "ledgerly.sqlite3",
    "LEDGERLY_CURRENCY": "USD",
    "LEDGERLY_TAX_RATE": "0.20",
    "LEDGERLY_PAGE_SIZE": "25",
    "LEDGERLY_TIMEZONE": "UTC",
    "LEDGERLY_PAYMENT_TERMS_DAYS": "30",
    "LEDGERLY_INVOICE_PREFIX": "INV",
    "LEDGERLY_HOST": "127.0.0.1",
    "LEDGERLY_PORT": "8080",
}

SUPPORTED_CURRENCIES = ("USD", "EUR", "GBP", "CHF", "JPY")


class ConfigError(ValueError):
    """A setting has a value ledgerly cannot use."""


@dataclass(frozen=True)
class Settings:
    db_path: str
    currency: str
    tax_rate: Decimal
    page_size: int
    timezone: str
    payment_terms_days: int
    invoice_prefix: str
    host: str
    port: int


def _get(env: dict[str, str], name: str) -> str:
    value = env.get(name)
    if value is None or value.strip() == "":
        return ENV_VARS[name]
    return value.strip()


def _int(env: dict[str, str], name: str, minimum: int, maximum: int) -> int:
    raw = _get(env, name)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ConfigError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Read settings from ``env`` (default: the process environment)."""
    env = dict(os.environ if env is None else env)
    currency = _get(env, "LEDGERLY_CURRENCY").upper()
    if currency not in SUPPORTED_CURRENCIES:
        raise ConfigError(f"LEDGERLY_CURRENCY {currency!r} is not one of {', '.join(SUPPORTED_CURRENCIES)}")
    raw_rate = _get(env, "LEDGERLY_TAX_RATE")
    try:
        tax_rate = Decimal(raw_rate)
    except InvalidOperation:
        raise ConfigError(f"LEDGERLY_TAX_RATE must be a decimal fraction, got {raw_rate!r}") from None
    if not Decimal("0") <= tax_rate < Decimal("1"):
        raise ConfigError("LEDGERLY_TAX_RATE must be a fraction between 0 and 1 (0.20 means 20%)")
    prefix = _get(env, "LEDGERLY_INVOICE_PREFIX")
    if not prefix.isalnum() or len(prefix) > 8:
        raise ConfigError("LEDGERLY_INVOICE_PREFIX must be 1-8 letters or digits")
    return Settings(
        db_path=_get(env, "LEDGERLY_DB"),
        currency=currency,
        tax_rate=tax_rate,
        page_size=_int(env, "LEDGERLY_PAGE_SIZE", 1, 500),
        timezone=_get(env, "LEDGERLY_TIMEZONE"),
        payment_terms_days=_int(env, "LEDGERLY_PAYMENT_TERMS_DAYS", 0, 365),
        invoice_prefix=prefix.upper(),
        host=_get(env, "LEDGERLY_HOST"),
        port=_int(env, "LEDGERLY_PORT", 1, 65535),
    )
