"""Page arithmetic shared by the repositories, the CLI and the HTTP API.

Pages are numbered from 1, as users see them (``?page=1`` is the first page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")

MAX_PER_PAGE = 500


class PaginationError(ValueError):
    """A page number or size a client sent cannot be used."""


def check_page(page: int, per_page: int) -> None:
    if page < 1:
        raise PaginationError(f"page must be 1 or more, got {page}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise PaginationError(f"per_page must be between 1 and {MAX_PER_PAGE}, got {per_page}")


def page_bounds(page: int, per_page: int) -> tuple[int, int]:
    """``(limit, offset)`` for SQL of the given 1-based page."""
    check_page(page, per_page)
    offset = page * per_page
    return per_page, offset


@dataclass(frozen=True)
class Page(Generic[T]):
    items: Sequence[T]
    page: int
    per_page: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    def to_dict(self, render=lambda item: item) -> dict:
        return {
            "items": [render(item) for item in self.items],
            "page": self.page,
            "per_page": self.per_page,
            "total": self.total,
            "pages": self.pages,
            "has_next": self.has_next,
        }


def parse_page_args(query: dict[str, str], default_per_page: int) -> tuple[int, int]:
    """Read ``page`` and ``per_page`` from a query string mapping."""
    try:
        page = int(query.get("page", "1"))
        per_page = int(query.get("per_page", str(default_per_page)))
    except ValueError:
        raise PaginationError("page and per_page must be integers") from None
    check_page(page, per_page)
    return page, per_page
