"""Validation of JSON request bodies. Handlers call these before touching the services, so
that a bad request is answered with 400 and a message instead of an exception."""

from __future__ import annotations

from typing import Any


class ValidationError(ValueError):
    """The request body is not what the endpoint accepts (answered with 400)."""


def require_object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ValidationError("the request body must be a JSON object")
    return body


def require_str(body: dict, key: str, max_length: int = 500) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"'{key}' is required and must be a non-empty string")
    if len(value) > max_length:
        raise ValidationError(f"'{key}' is limited to {max_length} characters")
    return value.strip()


def optional_str(body: dict, key: str, default: str = "", max_length: int = 2000) -> str:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValidationError(f"'{key}' must be a string")
    if len(value) > max_length:
        raise ValidationError(f"'{key}' is limited to {max_length} characters")
    return value


def require_int(body: dict, key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"'{key}' is required and must be an integer")
    return value


def require_amount(body: dict, key: str) -> str:
    """Amounts travel as strings (``"12.50"``) or integers; floats are refused."""
    value = body.get(key)
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"'{key}' is required")
    if isinstance(value, float):
        raise ValidationError(f"'{key}' must be a string such as \"12.50\", not a float")
    if not isinstance(value, (str, int)):
        raise ValidationError(f"'{key}' must be an amount")
    return str(value)


def require_list(body: dict, key: str, max_items: int = 200) -> list:
    value = body.get(key)
    if not isinstance(value, list):
        raise ValidationError(f"'{key}' is required and must be a list")
    if len(value) > max_items:
        raise ValidationError(f"'{key}' has at most {max_items} items")
    return value


def line_fields(raw: Any, index: int) -> dict:
    """One invoice line of a request: description, quantity, unit_price, optional tax_rate."""
    if not isinstance(raw, dict):
        raise ValidationError(f"line {index} must be an object")
    return {
        "description": require_str(raw, "description"),
        "quantity": require_amount(raw, "quantity"),
        "unit_price": require_amount(raw, "unit_price"),
        "tax_rate": None if raw.get("tax_rate") is None else require_amount(raw, "tax_rate"),
    }
