"""Sanitising untrusted text where it is shown (terminal, MEMORY.md, HTML). Pure."""

from __future__ import annotations

import re

# C0 controls except tab and newline (CR included), DEL, C1 controls, bidi controls, zero-width
# characters and the BOM: none of them may reach a screen or a memory file.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def strip_controls(text: str, *, keep_newlines: bool = True) -> str:
    """Remove control, bidi and zero-width characters; optionally flatten newlines and tabs."""
    clean = _UNSAFE.sub("", text)
    if not keep_newlines:
        clean = clean.replace("\n", " ").replace("\t", " ")
    return clean
