"""``warden db upgrade|current|check``: thin wrappers over the packaged Alembic migrations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from contextlib import contextmanager

import typer
from sqlalchemy import Engine

from warden.cli.common import console, print_json, safe, settings
from warden.config import Settings
from warden.errors import UsageError, WardenError
from warden.sanitize import one_line
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
    if not create and path is not None and not path.is_file():
        raise WardenError(f"no database at {path} yet: any warden command creates it (e.g. `warden db upgrade`)")
    engine = db.make_engine(s.database_url, create=create)
    try:
        yield engine
    except (OperationalError, DatabaseError) as exc:
        raise db.database_error(s.database_url, exc) from None
    finally:
        engine.dispose()


def _not_newer(revision: str | None) -> str | None:
    """``revision``, unless a newer warden wrote it (then its refusal)."""
    newer = db.newer_than_this_warden(revision)
    if newer is not None:
        raise newer
    return revision


@db_app.command("upgrade")
def upgrade(revision: str = typer.Argument("head")) -> None:
    """Migrate the database to REVISION (default: head)."""
    if revision == "base":
        raise UsageError("warden does not downgrade a database (restore a backup taken before the upgrade instead)")
    if revision != "head" and not db.known_revision(revision):
        raise UsageError(f"unknown revision {revision!r}: this warden's migrations end at {db.head_revision()}")
    s = settings()
    with _database(s, create=True) as engine:
        current = _not_newer(db.current_revision(engine))
        if current is None:
            db.refuse_foreign_tables(engine, s.database_url)
        if current is not None and revision != "head" and db.is_older(revision, current):
            raise UsageError(f"revision {revision!r} is older than the database's {current}: warden does not "
                             "downgrade a database (restore a backup taken before the upgrade instead)")
        if revision == "head":
            kept = db.upgrade_unless_raced(engine)  # several started at once on a new database: one migrates
        else:
            kept = db.backup_before_upgrade(engine) if current != revision else None
            db.upgrade(engine, revision)
        console.print(f"database at {db.current_revision(engine)} ({db.redact_url(s.database_url)})")
        if kept is not None:
            console.print(f"the database as it was ({current}) is kept at {safe(kept)}")


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


def _warden_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Compare warden's own schema only: a table another program added beside it is not a drift."""
    return not (type_ == "table" and reflected and compare_to is None)


def _describe(entry: Any) -> str:
    """One autogenerate difference as a short line ("add_table checkpoints", "remove_column runs.x")."""
    if isinstance(entry, list):  # a modification: [(op, schema, table, column, …), …]
        entry = entry[0]
    op, parts = entry[0], entry[1:]
    names = [p.name if hasattr(p, "name") else p for p in parts if isinstance(p, str) or hasattr(p, "name")]
    return one_line(f"{op} {'.'.join(str(n) for n in names if n)}", 200)


@db_app.command("check")
def check(as_json: bool = typer.Option(False, "--json")) -> None:
    """Fail unless the database is at head and matches the models."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from warden.store.models import Base

    s = settings()
    problem = ""
    cur, head = None, db.head_revision()
    try:
        with _database(s, create=False) as engine:
            cur = db.current_revision(engine)  # shown in the verdict, a newer warden's included
            _not_newer(cur)
            if cur is None:
                db.refuse_foreign_tables(engine, s.database_url)  # what upgrade would say first
            if cur != head:
                problem = f"database is at {cur or 'base'}, head is {head}: run `warden db upgrade`"
            else:
                with engine.connect() as conn:
                    context = MigrationContext.configure(conn, opts={"include_object": _warden_object})
                    diff = compare_metadata(context, Base.metadata)
                if diff:
                    problem = (f"database schema differs from the models ({len(diff)} difference(s)), "
                               f"first: {_describe(diff[0])}")
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
