"""Shared rule ledgers: the canonical file format (pure; DESIGN.md §7).

``ledgers/<agent>.json`` is canonical JSON — sorted keys, UTF-8 without escapes, NFC strings,
two-space indentation, fixed separators, a trailing newline — so the same content always gives
the same bytes and reviews diff cleanly. Each rule carries a SHA-256 over its own canonical form
(without the hash field); ``rules_sha256`` covers the whole rule list.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

FORMAT_VERSION = 1
FORMAT_NAME = "warden-ledger"
MAX_FILE_BYTES = 1024 * 1024
MAX_RULES = 500
FLOAT_DIGITS = 4  # evidence figures are rounded so re-exports stay byte-stable


def normalise(value: Any) -> Any:
    """NFC strings, rounded floats, plain containers: the canonical value."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        rounded = round(value, FLOAT_DIGITS)
        return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded
    if isinstance(value, dict):
        return {normalise(str(k)): normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_bytes(value: Any) -> bytes:
    text = json.dumps(normalise(value), sort_keys=True, ensure_ascii=False, indent=2, separators=(",", ": "),
                      allow_nan=False)
    return (text + "\n").encode("utf-8")


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def rule_hash(rule: dict[str, Any]) -> str:
    """SHA-256 over the rule's canonical form without its own ``sha256`` field."""
    return sha256_of({k: v for k, v in rule.items() if k != "sha256"})


def seal_rule(rule: dict[str, Any]) -> dict[str, Any]:
    body = normalise({k: v for k, v in rule.items() if k != "sha256"})
    body["sha256"] = rule_hash(body)
    return body


def rules_hash(rules: list[dict[str, Any]]) -> str:
    return sha256_of(rules)


def rule_order(rule: dict[str, Any]) -> tuple[str, str]:
    """The canonical position of a rule in a ledger: by body, then scope."""
    return rule["body"], rule.get("scope") or ""


def build_ledger(agent: str, rules: list[dict[str, Any]], warden_version: str) -> dict[str, Any]:
    """A complete ledger document; rules ordered by body so the file is independent of ids."""
    sealed = sorted((seal_rule(r) for r in rules), key=rule_order)
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "agent": unicodedata.normalize("NFC", agent),
        "exported_by": f"warden {warden_version}",
        "rules": sealed,
        "rules_sha256": rules_hash(sealed),
    }
