"""Commands of the report stage (being built; see the issue for this stage)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
