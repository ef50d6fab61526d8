"""``warden db upgrade|current|check``: thin wrappers over the store's migrations (warden.store.db)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from sqlalchemy import Engine

from warden.cli.common import console, print_json, safe, settings
from warden.config import Settings
from warden.errors import WardenError
from warden.store import db

db_app = typer.Typer(help="Database migrations (Alembic, packaged with warden).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")


@contextmanager
def _database(s: Settings, *, create: bool) -> Iterator[Engine]:
    """The database's engine; what the database says goes back as one line (corrupt file,
    unreachable server, missing driver). ``create=False``: a command that only looks never
    creates a SQLite file."""
    from sqlalchemy.exc import DatabaseError, OperationalError

    path = s.sqlite_path
    if not create and path is not None and not path.exists():
        raise WardenError(f"no database at {path} yet: any warden command creates it (e.g. `warden db upgrade`)")
    engine = db.make_engine(s.database_url, create=create)
    try:
        yield engine
    except (OperationalError, DatabaseError) as exc:
        raise db.database_error(s.database_url, exc) from None
    finally:
        engine.dispose()


@db_app.command("upgrade")
def upgrade(revision: str = typer.Argument("head")) -> None:
    """Migrate the database to REVISION (default: head)."""
    db.refuse_target(revision)
    s = settings()
    with _database(s, create=True) as engine:
        was, kept = db.migrate_to(engine, s.database_url, revision)
        console.print(f"database at {db.current_revision(engine)} ({db.redact_url(s.database_url)})")
        if kept is not None:
            console.print(f"the database as it was ({was}) is kept at {safe(kept)}")


@db_app.command("current")
def current(as_json: bool = typer.Option(False, "--json")) -> None:
    """Show the database's revision and the packaged head."""
    s = settings()
    with _database(s, create=False) as engine:
        cur, head = db.current_revision(engine), db.head_revision()
    if as_json:
        print_json({"current": cur, "head": head, "url": db.redact_url(s.database_url)})
    else:
        console.print(f"current: {cur or '(empty)'}  head: {head}")


@db_app.command("check")
def check(as_json: bool = typer.Option(False, "--json")) -> None:
    """Fail unless the database is at head and matches the models."""
    s = settings()
    problem = ""
    cur, head = None, db.head_revision()
    try:
        with _database(s, create=False) as engine:
            cur = db.current_revision(engine)  # shown in the verdict, a newer warden's included
            problem = db.schema_problem(engine, s.database_url, cur)
    except WardenError as exc:  # unreachable, missing, another program's, a newer warden's: the verdict too
        if not as_json:
            raise
        problem = str(exc)
    if as_json:
        print_json({"ok": not problem, "current": cur, "head": head, **({"problem": problem} if problem else {})})
    if problem:
        raise WardenError(problem)
    if not as_json:
        console.print(f"ok: at head {head}, schema matches the models")
