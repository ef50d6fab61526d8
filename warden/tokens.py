"""warden's own token estimator.

One estimator for everything warden counts itself (a rule's rent, the sim's usage, caps on
recovered text), so figures move exactly with the bytes involved. It approximates Claude's
tokenizer at about four UTF-8 bytes per token; real-model runs always use the API's counts.
"""

from __future__ import annotations

BYTES_PER_TOKEN = 4


def estimate_tokens(text: str | bytes) -> int:
    """Tokens for ``text``: ceil(utf-8 bytes / 4); 0 for empty text."""
    return tokens_of_bytes(len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass")))


def tokens_of_bytes(size: int) -> int:
    """Tokens for ``size`` UTF-8 bytes, as :func:`estimate_tokens` counts them; 0 below one byte."""
    return (max(size, 0) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN
