"""``warden db upgrade|current|check``: thin wrappers over the packaged Alembic migrations."""

from __future__ import annotations

import typer

from warden.cli.common import console, print_json, settings
from warden.errors import WardenError
from warden.store import db

db_app = typer.Typer(help="Database migrations (Alembic, packaged with warden).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def upgrade(revision: str = typer.Argument("head")) -> None:
    """Migrate the database to REVISION (default: head)."""
    s = settings()
    engine = db.make_engine(s.database_url)
    db.upgrade(engine, revision)
    console.print(f"database at {db.current_revision(engine)} ({db.redact_url(s.database_url)})")


@db_app.command("current")
def current(as_json: bool = typer.Option(False, "--json")) -> None:
    """Show the database's revision and the packaged head."""
    s = settings()
    engine = db.make_engine(s.database_url)
    cur, head = db.current_revision(engine), db.head_revision()
    if as_json:
        print_json({"current": cur, "head": head, "url": db.redact_url(s.database_url)})
    else:
        console.print(f"current: {cur or '(empty)'}  head: {head}")


@db_app.command("check")
def check() -> None:
    """Fail unless the database is at head and matches the models."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from warden.store.models import Base

    s = settings()
    engine = db.make_engine(s.database_url)
    cur, head = db.current_revision(engine), db.head_revision()
    if cur != head:
        raise WardenError(f"database is at {cur or 'base'}, head is {head}: run `warden db upgrade`")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    if diff:
        raise WardenError(f"database schema differs from the models: {diff[0]}")
    console.print(f"ok: at head {head}, schema matches the models")
