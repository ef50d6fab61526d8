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


# Markdown/HTML that would give a one-line memory entry a structure of its own: an HTML tag,
# comment or declaration (an unclosed "<!--" hides the rest of the file), a code fence, or a
# block marker at the start (a heading, quote, table or nested list inside the bullet).
_HTML_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_FENCE = re.compile(r"```|~~~")
_LEADING_BLOCK = re.compile(r"^(?:[#>|*+=-]|\d+[.)](?:\s|$))")


def markup_problem(text: str) -> str | None:
    """Why ``text`` cannot be a one-line memory entry as it is, or None."""
    if _HTML_OPEN.search(text) or "-->" in text:
        return "contains HTML (a tag or comment)"
    if _FENCE.search(text):
        return "contains a code fence (``` or ~~~)"
    if _LEADING_BLOCK.match(text):
        return "starts with a Markdown block marker (#, >, |, a list marker)"
    return None


def inline_markdown(text: str) -> str:
    """``text`` made inert inside one Markdown list item: HTML openers escaped as entities,
    fences broken, a leading block marker backslash-escaped. A no-op for text that passes
    :func:`markup_problem` (what the validators admit); this guards rows written before them."""
    clean = _HTML_OPEN.sub("&lt;", text).replace("-->", "--&gt;")
    clean = _FENCE.sub(lambda m: "\\" + m.group(0)[0] + m.group(0)[1:], clean)
    return "\\" + clean if _LEADING_BLOCK.match(clean) else clean
