"""Engine and session setup, and "migrate to head before use".

SQLite gets WAL, a busy timeout and foreign keys on every connection; PostgreSQL is used as is.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import orjson
from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from warden.config import Settings
from warden.errors import UsageError, WardenError
from warden.names import process_tag, tagged_process_gone

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# The newest migration's revision id. Every command compares the database with it, and imports
# Alembic (a tenth of a second) only to migrate; a test pins it to Alembic's own head.
HEAD_REVISION = "0005"
SQLITE_BUSY_TIMEOUT_MS = 10_000
SQLITE_PAGE_SIZE = 16384
# A server that accepts and never answers (hung, or a proxy in front of a dead one) would hold
# every command, a cron nightly included, for ever: connecting gets a deadline unless the URL
# sets its own connect_timeout.
POSTGRES_CONNECT_TIMEOUT_S = 10


class StoreError(WardenError):
    """The database cannot be used; the message is one line for the user."""


def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    # 16 KB pages for a database not yet created (a no-op on an existing one, whatever its size):
    # the ledger's rows hold KBs of JSON each, and a bulk collect writes ~20% faster. Before WAL,
    # which fixes the page size once set.
    cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    # 16 MB of page cache (default 2 MB): the recall index's random inserts during a bulk collect
    # re-read fewer pages (-18% time per GB collected with checkpoints); bounded, so memory stays flat
    cur.execute("PRAGMA cache_size=-16384")
    cur.close()
    # Unicode case folding for "any case" filters (sessions --project): SQLite's lower() is ASCII only
    dbapi_conn.create_function("warden_casefold", 1, _casefold, deterministic=True)


def journal_new_pages_in_place(session: Session) -> bool:
    """Before the transaction that first fills an empty SQLite database (a first bulk collect's):
    a rollback journal for it instead of WAL, until :func:`back_to_wal`. A rollback journal keeps
    the pages a transaction changes as they were before it, so the pages it adds (here, nearly all)
    go to the database file once; WAL writes each twice, into the WAL and at the checkpoint into
    the database (1 GB collected: 57 MB, and the checkpoint ~0.1 s of the collect's end).
    Synchronous FULL meanwhile: NORMAL is power-safe in WAL mode only. Other connections wait for
    the transaction to end, readers too (busy_timeout), as they need not in WAL mode. Returns
    whether it switched: not on another engine, nor inside a transaction, nor while another
    connection has the database open (SQLite then keeps WAL, at once: no busy wait for it)."""
    connection = session.connection()
    driver = connection.connection.driver_connection
    if connection.dialect.name != "sqlite" or not isinstance(driver, sqlite3.Connection) or driver.in_transaction:
        return False
    busy_timeout_ms = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
    connection.exec_driver_sql("PRAGMA busy_timeout=0")
    try:
        switched = connection.exec_driver_sql("PRAGMA journal_mode=DELETE").scalar() == "delete"
    except OperationalError:  # "database is locked": another connection has it open
        switched = False
    finally:
        connection.exec_driver_sql(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    if switched:
        connection.exec_driver_sql("PRAGMA synchronous=FULL")
    return switched


def back_to_wal(session: Session) -> None:
    """WAL again, once :func:`journal_new_pages_in_place`'s transaction has ended (committed or
    rolled back). Should another connection read meanwhile, the switch waits for it (busy_timeout);
    failing that, the database stays in rollback mode, with synchronous FULL, until the next
    connection to open it switches it (:func:`_sqlite_pragmas`)."""
    connection = session.connection()
    try:
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")
    except OperationalError:
        return
    connection.exec_driver_sql("PRAGMA synchronous=NORMAL")


class FillWriteback:
    """While :func:`journal_new_pages_in_place`'s transaction fills a database, the pages SQLite
    has handed the OS so far go to the disk in the background: a sync of the file, in a thread of
    its own, each time :meth:`kick` is called. Else the OS keeps them all in memory (a GB's 57 MB:
    nothing makes it write them within the collect's seconds), and the commit's sync, at the end of
    a first collect, waits for all of them (~2 ms a MB on this machine's disk). An extra sync
    cannot break SQLite's order of writes: it only makes some durable sooner. It uses SQLite's
    own descriptor of the file, found in /proc/self/fd: closing one of its own would drop the
    process's locks on the file. Where there is no /proc, it does nothing. :meth:`stop` before the
    connection can close."""

    def __init__(self, session: Session) -> None:
        self._fd = _sqlite_descriptor(session)
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        if self._fd is not None:
            self._thread = threading.Thread(target=self._sync_when_kicked, name="warden-writeback", daemon=True)
            self._thread.start()

    def kick(self) -> None:
        """Write what SQLite has handed the OS so far (unless a sync is still under way)."""
        if self._thread is not None:
            self._wanted.set()

    def stop(self) -> None:
        """End the thread, once a sync under way has returned."""
        if self._thread is not None:
            self._stopping = True
            self._wanted.set()
            self._thread.join()
            self._thread = None

    def _sync_when_kicked(self) -> None:
        assert self._fd is not None
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            try:
                os.fdatasync(self._fd)
            except OSError:  # the commit's own sync will report a disk that fails
                return


def _sqlite_descriptor(session: Session) -> int | None:
    """The descriptor through which this process has the session's SQLite database file open."""
    driver = session.connection().connection.driver_connection
    if not isinstance(driver, sqlite3.Connection) or not os.path.isdir("/proc/self/fd"):
        return None
    database = next((row[2] for row in driver.execute("PRAGMA database_list") if row[1] == "main"), "")
    try:
        wanted = os.stat(database)
        descriptors = os.listdir("/proc/self/fd")
    except OSError:  # in memory (no file), or the file is gone
        return None
    for name in descriptors:
        try:
            found = os.stat(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode) and (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
            return int(name)
    return None


def json_loads(text: str | bytes) -> Any:
    """A JSON column's value read back: by orjson (a run's trace digest is KBs, and a bulk
    collect reads the parents of the subagents it stores), else by the standard library, which
    also reads what orjson refuses and the standard library may have written (NaN, integers past
    64 bits, lone surrogates): the same values either way."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _casefold(value: object) -> object:
    return value.casefold() if isinstance(value, str) else value


def _sqlite_file(url: str) -> Path | None:
    """The database file a SQLite URL names (None: another engine, or an in-memory database)."""
    path = make_url(url).database if url.startswith("sqlite") else None
    return Path(path) if path and path != ":memory:" else None


def _with_wal_files(database: Path) -> tuple[Path, Path, Path]:
    """The database file and the WAL and shared-memory files SQLite keeps beside it."""
    return database, database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")


def _create_private(path: Path) -> None:
    """Create an empty database file readable by its owner only (it holds prompts and commands;
    SQLite gives its WAL and shared-memory files the same mode). An existing one of ours that
    others can read — an older warden made it 0644 — is made owner-only, with its WAL files."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        readable = []
        for made in _with_wal_files(path):
            try:
                st = os.stat(made, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
                    readable.append((made, st))
            except OSError:
                pass  # gone, or a filesystem without modes
        # the schema is looked at only when there is something to tighten: every command opens here
        if not readable or not _ours_to_tighten(path):  # a wrong URL: refused later, not ours to chmod
            return
        for made, st in readable:
            try:
                os.chmod(made, stat.S_IMODE(st.st_mode) & 0o700)
            except OSError:
                pass


def _ours_to_tighten(path: Path) -> bool:
    """True for an empty file (warden is about to fill it) or a SQLite database a warden has
    migrated (it has alembic_version). Read through SQLite only: closing a plain descriptor on the
    file would drop this process's POSIX locks held by its other connections to it."""
    try:
        if os.stat(path).st_size == 0:
            return True
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("select 1 from sqlite_master where name = 'alembic_version'").fetchone() is not None
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False


def make_engine(url: str, *, busy_timeout_ms: int | None = None, create: bool = True) -> Engine:
    """An engine for ``url``; ``create=False`` makes no directory for a SQLite file (a command
    that only looks must not create a database)."""
    try:
        if url.startswith("sqlite"):
            database = _sqlite_file(url)
            if database is not None and database.exists() and not database.is_file():
                # sqlite would say only "unable to open database file"
                raise StoreError(f"cannot open database {redact_url(url)}: {database} is not a regular file")
            if database is not None and create:
                database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                _create_private(database)
            engine = create_engine(url, connect_args={"timeout": (busy_timeout_ms or SQLITE_BUSY_TIMEOUT_MS) / 1000},
                                   json_deserializer=json_loads)
            event.listen(engine, "connect", _sqlite_pragmas)
            if busy_timeout_ms is not None:
                event.listen(engine, "connect",
                             lambda c, _r: c.execute(f"PRAGMA busy_timeout={busy_timeout_ms}"))
            return engine
        parsed = make_url(url)
        connect_args: dict[str, Any] = {}
        if parsed.get_driver_name() in ("psycopg", "psycopg2", "psycopg2cffi") and "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = POSTGRES_CONNECT_TIMEOUT_S
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        hint = "; for PostgreSQL write postgresql+psycopg://…" if url.startswith("postgres:") else ""
        raise StoreError(f"bad database URL {redact_url(url)!r}: {exc}{hint}") from None
    except ImportError as exc:  # a dialect whose driver is not installed (mysql:// without MySQLdb)
        raise StoreError(f"database URL {redact_url(url)!r} needs a driver that is not installed: {exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot create the database directory for {redact_url(url)}: {exc}") from None


_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)([^&#]*)")


def _passwords(url: str) -> list[str]:
    """The password(s) a URL holds: after ``user:`` (up to the last '@' before any query: a raw
    password may hold '@'), and in a ``password=`` query parameter."""
    if "://" not in url:
        return []
    rest = url.split("://", 1)[1]
    found = [m.group(2) for m in _QUERY_PASSWORD.finditer(rest)]
    authority = rest.split("?", 1)[0]
    if "@" in authority:
        creds = authority.rsplit("@", 1)[0]
        if ":" in creds:
            found.append(creds.split(":", 1)[1])
    return [p for p in found if p]


def redact_url(url: str) -> str:
    """The URL without its password, for messages: ``user:***@`` and ``password=***``."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    rest = _QUERY_PASSWORD.sub(r"\1***", rest)
    authority, sep, query = rest.partition("?")
    if "@" in authority:
        creds, host = authority.rsplit("@", 1)
        if ":" in creds:
            authority = f"{creds.split(':', 1)[0]}:***@{host}"
    return f"{scheme}://{authority}{sep}{query}"


def database_error(url: str, exc: BaseException) -> "StoreError":
    """``cannot open database URL: reason`` in one line, the password out of both: a driver may
    echo part of a raw password back ("failed to resolve host 'rest-of-password@host'")."""
    orig = getattr(exc, "orig", None) or exc
    reason = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    for password in _passwords(url):
        for piece in sorted({password, *password.split("@")}, key=len, reverse=True):
            if len(piece) >= 4:
                reason = reason.replace(piece, "***")
    if "no schema has been selected to create in" in reason:  # search_path names a schema not made yet
        reason += " (the search_path schema does not exist: create it first, e.g. CREATE SCHEMA warden)"
    return StoreError(f"cannot open database {redact_url(url)}: {reason}")


def alembic_config(url: str) -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str | None:
    """The head revision by Alembic's reading of the migrations (``HEAD_REVISION`` is its copy)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The database's migration revision; None for a database never migrated."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _ddl_transaction(conn: Connection) -> None:
    """Python's SQLite driver runs CREATE/ALTER/DROP outside any transaction unless one was begun
    explicitly: a migration cut short (disk full, a kill) would leave half its tables and no
    revision, and every later command would fail on them. Begin one, so a migration is all or
    nothing (PostgreSQL's DDL is transactional already)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    cfg = alembic_config(str(engine.url))
    with engine.begin() as conn:
        _ddl_transaction(conn)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    cfg = alembic_config(str(engine.url))
    with engine.begin() as conn:
        _ddl_transaction(conn)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


_COMMITTED = "warden_committed"  # session.info: the latest root transaction committed


def _mark_committed(session: Session) -> None:
    if not session.in_nested_transaction():
        session.info[_COMMITTED] = True


def _mark_begun(session: Session, transaction: Any) -> None:
    if transaction.parent is None:  # a block that commits as it goes starts afresh
        session.info[_COMMITTED] = False


class Store:
    """A migrated database: engine plus session factory."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        # On the factory, once (not per session: a hook or a bulk collect opens many), and so
        # before any after-commit step a block adds to its own session.
        event.listen(self.sessions, "after_commit", _mark_committed)
        event.listen(self.sessions, "after_transaction_create", _mark_begun)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commits on success, rolls back on any error."""
        with self.sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                # A commit that went through is not "rolled back" when a step after it raises
                # (installing MEMORY.md); one that failed, at COMMIT itself included, is.
                if not session.info.get(_COMMITTED):
                    session.rollback()
                raise


BACKUP_SPARE_BYTES = 64 * 2**20  # free space left on the disk after the copy


def backup_before_upgrade(engine: Engine) -> Path | None:
    """A copy of a SQLite database an upgrade is about to migrate, ``<file>.at-<revision>`` beside
    it (owner-only; a later upgrade from the same revision replaces it); None when there is
    nothing to keep (a new or up-to-date database, a server database — back that up with its own
    tools). warden never downgrades: this copy, with the warden that wrote it, is the way back,
    so no copy means no migration: :class:`StoreError` saying why (a full disk, say)."""
    database = _sqlite_file(str(engine.url))
    if database is None or current_revision(engine) in (None, HEAD_REVISION):
        return None
    for stale in database.parent.glob(f"{database.name}.at-pid*-copying"):  # copies cut short by a kill
        if tagged_process_gone(stale.name):  # with the journal SQLite kept beside it
            for left in (*_with_wal_files(stale), stale.with_name(stale.name + "-journal")):
                left.unlink(missing_ok=True)
    staging = database.with_name(f"{database.name}.at-{process_tag()}-copying")
    try:
        size = sum(p.stat().st_size for p in _with_wal_files(database) if p.exists())
        free = shutil.disk_usage(database.parent).free
        if free < size + BACKUP_SPARE_BYTES:
            raise OSError(errno.ENOSPC, f"it needs {(size + BACKUP_SPARE_BYTES) / 1e6:,.0f} MB — the copy and "
                                        f"{BACKUP_SPARE_BYTES // 2**20} MB to spare — and {free / 1e6:,.0f} MB are free")
        os.close(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        source, copy = sqlite3.connect(database), sqlite3.connect(staging)
        try:
            source.backup(copy)  # consistent while others read, WAL included
            # the copy's own revision: another command may have migrated between our look and the copy
            row = copy.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            copy.close()
            source.close()
        revision = row[0] if row else None
        if revision in (None, HEAD_REVISION):
            return None
        target = database.with_name(f"{database.name}.at-{revision}")
        os.replace(staging, target)
        return target
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StoreError(f"cannot keep a copy of {database} before migrating it to this warden's schema "
                         f"({reason}): free some space beside it, or restore write access, and run warden again "
                         "(warden migrates only with a copy to go back to)") from None
    finally:
        staging.unlink(missing_ok=True)


def _made_at_head(engine: Engine) -> bool:
    """Make an empty SQLite database at head from :mod:`warden.store.head_schema`'s statements
    (what the migrations make), in one transaction; False, doing nothing, for one that holds
    anything, or another engine's (Alembic migrates those)."""
    if engine.dialect.name != "sqlite":
        return False
    from warden.store import head_schema

    with engine.begin() as conn:
        _ddl_transaction(conn)  # held until the commit: a command migrating it too waits, then finds it made
        if conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar():
            return False
        for statement in head_schema.STATEMENTS:
            conn.exec_driver_sql(statement)
        conn.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES (?)", (head_schema.REVISION,))
    return True


def upgrade_unless_raced(engine: Engine) -> Path | None:
    """Migrate to head, keeping a copy of the database first (:func:`backup_before_upgrade`, whose
    path it returns); a new SQLite database is made at head without Alembic (:func:`_made_at_head`).
    Two commands that start together on a new database both try: the loser's migration fails (its
    tables exist) once the winner's has committed, which is fine."""
    kept = backup_before_upgrade(engine)
    try:
        if not _made_at_head(engine):
            upgrade(engine)
    except (OperationalError, DatabaseError):
        for _ in range(20):
            if current_revision(engine) == HEAD_REVISION:
                return kept
            time.sleep(0.25)
        raise
    return kept


def known_revision(revision: str) -> bool:
    """Whether this warden's migrations know ``revision`` (a newer warden's do not)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config("sqlite://")).get_revision(revision) is not None
    except CommandError:
        return False


def is_older(revision: str, than: str) -> bool:
    """Whether ``revision`` comes before ``than`` in this warden's migration history."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return any(rev.revision == revision for rev in script.iterate_revisions(than, "base") if rev.revision != than)


def newer_than_this_warden(revision: str | None) -> StoreError | None:
    if revision is None or known_revision(revision):
        return None
    return StoreError(f"the database is at revision {revision!r}, which this warden (head {HEAD_REVISION}) does "
                      "not know: a newer warden wrote it; upgrade warden (pip install -U) to use it")


def clashing_tables(engine: Engine) -> list[str]:
    """Tables named like warden's in a database warden has never migrated: someone else's data
    (or a cut-short first run), which the first migration must not be run over. Other tables
    (another program's, an extension's such as PostGIS's spatial_ref_sys) may stay beside warden's."""
    with engine.connect() as conn:
        found = set(inspect(conn).get_table_names())
    if not found:  # a new database: none to compare (nor the whole schema's models to import)
        return []
    from warden.store.models import Base

    return sorted(found & set(Base.metadata.tables))


def refuse_foreign_tables(engine: Engine, url: str) -> None:
    """:class:`StoreError` when a database warden never migrated holds tables named like its own.
    The caller found no revision; tables found since may be another command's, which made the
    database meanwhile (tables and revision in one transaction): its revision is looked at again."""
    tables = clashing_tables(engine)
    if tables and current_revision(engine) is None:
        raise _clash(url, tables)


def _clash(url: str, tables: list[str]) -> StoreError:
    shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
    return StoreError(f"database {redact_url(url)} already holds tables named like warden's ({shown}) but no "
                      "warden revision: another program's, or a first run cut short; give warden a database or "
                      "schema of its own (or move a cut-short SQLite file aside)")


def refuse_newer(revision: str | None) -> str | None:
    """``revision``, unless a newer warden wrote it (then its refusal is raised)."""
    newer = newer_than_this_warden(revision)
    if newer is not None:
        raise newer
    return revision


def refuse_target(revision: str) -> None:
    """A :class:`UsageError` for a revision no upgrade goes to (checked before any connection)."""
    if revision == "base":
        raise UsageError("warden does not downgrade a database (restore a backup taken before the upgrade instead)")
    if revision != "head" and not known_revision(revision):
        raise UsageError(f"unknown revision {revision!r}: this warden's migrations end at {head_revision()}")


def migrate_to(engine: Engine, url: str, revision: str = "head") -> tuple[str | None, Path | None]:
    """Upgrade to ``revision`` (a warden never downgrades), keeping a copy of a SQLite database
    first. Returns (the revision it was at, the path of that copy or None). Refuses a newer
    warden's database, another program's tables on an empty one, an unknown revision and an
    older one than the database's, each as a :class:`UsageError` or :class:`StoreError`."""
    refuse_target(revision)
    current = refuse_newer(current_revision(engine))
    if current is None:
        refuse_foreign_tables(engine, url)
    if current is not None and revision != "head" and is_older(revision, current):
        raise UsageError(f"revision {revision!r} is older than the database's {current}: warden does not "
                         "downgrade a database (restore a backup taken before the upgrade instead)")
    if revision == "head":
        return current, upgrade_unless_raced(engine)  # several started at once on a new database: one migrates
    kept = backup_before_upgrade(engine) if current != revision else None
    upgrade(engine, revision)
    return current, kept


def _wardens_own(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Compare warden's own schema only: a table another program added beside it is not a drift."""
    return not (type_ == "table" and reflected and compare_to is None)


def _describe_difference(entry: Any) -> str:
    """One autogenerate difference as a short line ("add_table checkpoints", "remove_column runs.x")."""
    from warden.sanitize import one_line

    if isinstance(entry, list):  # a modification: [(op, schema, table, column, …), …]
        entry = entry[0]
    op, parts = entry[0], entry[1:]
    names = [p.name if hasattr(p, "name") else p for p in parts if isinstance(p, str) or hasattr(p, "name")]
    return one_line(f"{op} {'.'.join(str(n) for n in names if n)}", 200)


def schema_problem(engine: Engine, url: str, current: str | None) -> str:
    """What is wrong with a database at revision ``current``, or "": behind head, or a schema
    that differs from the models. A newer warden's database or another program's raises."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from warden.store.models import Base

    head = head_revision()
    refuse_newer(current)
    if current is None:
        refuse_foreign_tables(engine, url)  # what upgrade would say first
    if current != head:
        return f"database is at {current or 'base'}, head is {head}: run `warden db upgrade`"
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": _wardens_own})
        diff = compare_metadata(context, Base.metadata)
    if diff:
        return (f"database schema differs from the models ({len(diff)} difference(s)), "
                f"first: {_describe_difference(diff[0])}")
    return ""


def open_store(settings: Settings, *, migrate: bool = True, busy_timeout_ms: int | None = None) -> Store:
    """Open the settings' database, migrating it to head first (every command does this)."""
    engine = make_engine(settings.database_url, busy_timeout_ms=busy_timeout_ms)
    if migrate:
        try:
            current = current_revision(engine)
            if current != HEAD_REVISION:
                refuse_newer(current)
                if current is None:
                    refuse_foreign_tables(engine, settings.database_url)
                upgrade_unless_raced(engine)
        except StoreError:
            engine.dispose()
            raise
        except (OperationalError, DatabaseError) as exc:
            engine.dispose()
            raise database_error(settings.database_url, exc) from None
    return Store(engine)
