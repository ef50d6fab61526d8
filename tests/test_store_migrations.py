"""Migrations: upgrade from empty, downgrade to base, and no drift between models and
migrations — on SQLite always, and on PostgreSQL when WARDEN_TEST_DATABASE_URL is set."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from tests.conftest import database_urls, private_postgres_schema
from warden.config import load_settings
from warden.store import db
from warden.store.models import Base, Rule, SessionRun


@pytest.fixture(params=database_urls())
def engine(request: pytest.FixtureRequest, tmp_path) -> Iterator[Engine]:
    if request.param == "sqlite":
        eng = db.make_engine(f"sqlite:///{tmp_path / 'm.db'}")
        yield eng
        eng.dispose()
        return
    with private_postgres_schema(request.param) as eng:
        yield eng


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_the_head_every_command_checks_is_alembics_head() -> None:
    assert db.HEAD_REVISION == db.head_revision()


def test_upgrade_from_empty_then_downgrade_to_base(engine: Engine) -> None:
    assert _tables(engine) == set()
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    assert _tables(engine) == set(Base.metadata.tables)
    db.downgrade(engine, "base")
    assert _tables(engine) == set()
    assert db.current_revision(engine) is None


def test_models_and_migrations_agree(engine: Engine) -> None:
    db.upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_store_round_trip(engine: Engine) -> None:
    db.upgrade(engine)
    store = db.Store(engine)
    with store.session() as s:
        s.add(SessionRun(run_key="s1:main", session_id="s1", agent="main", models=["m"]))
        s.add(Rule(agent="backend", body="Grep for the symbol before opening files."))
    with store.session() as s:
        assert s.query(SessionRun).one().models == ["m"]
        assert s.query(Rule).one().state == "candidate"


def test_open_store_migrates_and_sets_sqlite_pragmas(warden_home) -> None:
    store = db.open_store(load_settings())
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000
    assert db.current_revision(store.engine) == db.head_revision()


def test_corrupt_database_is_a_clear_error(warden_home) -> None:
    (warden_home / "warden.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(db.StoreError, match="cannot open database"):
        db.open_store(load_settings())
    assert (warden_home / "warden.db").read_bytes().startswith(b"this is not a database")


def test_a_command_that_loses_the_race_to_migrate_a_new_database_goes_on(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy.exc import OperationalError

    won = db.make_engine(f"sqlite:///{tmp_path / 'won.db'}")
    db.upgrade(won)  # the other command's migration committed first

    def lost(_engine: Engine, revision: str = "head") -> None:
        raise OperationalError("CREATE TABLE alembic_version", {}, Exception("table alembic_version already exists"))

    monkeypatch.setattr(db, "upgrade", lost)
    monkeypatch.setattr(db, "_made_at_head", lambda _engine: False)  # as Alembic migrates a new database
    monkeypatch.setattr(db.time, "sleep", lambda _s: None)
    db.upgrade_unless_raced(won)  # at head after all: fine
    fresh = db.make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    with pytest.raises(OperationalError):
        db.upgrade_unless_raced(fresh)  # nobody migrated it: the failure stands


def test_a_command_that_finds_a_new_database_made_while_it_looked_goes_on(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A command that read no revision just before another one made the database (its tables and
    revision committed together) sees warden's tables, not another program's: it opens it."""
    settings = load_settings(env={"WARDEN_HOME": str(tmp_path)})
    db.open_store(settings).engine.dispose()  # the other command made it
    plain_revision = db.current_revision
    looks: list[str | None] = []

    def read_before_it_was_made(engine: Engine) -> str | None:
        looks.append(None if not looks else plain_revision(engine))
        return looks[-1]

    monkeypatch.setattr(db, "current_revision", read_before_it_was_made)
    store = db.open_store(settings)
    store.engine.dispose()
    assert looks[0] is None and db.HEAD_REVISION in looks


def _sqlite_schema(engine: Engine) -> list[tuple[str, str, str, str | None]]:
    """(type, name, table, SQL) of every table and index, the SQL's constraint lines sorted:
    Alembic rebuilds a table with its constraints in an order that varies from run to run."""
    def normal(sql: str | None) -> str | None:
        if sql is None:
            return None
        lines = [line.strip().rstrip(",").strip() for line in sql.splitlines()]
        return "\n".join([line for line in lines if not line.startswith("CONSTRAINT")]
                         + sorted(line for line in lines if line.startswith("CONSTRAINT")))

    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT type, name, tbl_name, sql FROM sqlite_master").all()
    return sorted((kind, name, table, normal(sql)) for kind, name, table, sql in rows)


def test_a_new_sqlite_database_is_made_with_the_schema_the_migrations_make(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """head_schema's statements (a new SQLite database is made from them, not by Alembic) are what
    migrating one makes: the same tables, columns, indexes and constraints, at the same revision."""
    from warden.store import head_schema

    migrated, made = (db.make_engine(f"sqlite:///{tmp_path / name}") for name in ("migrated.db", "made.db"))
    try:
        db.upgrade(migrated)
        monkeypatch.setattr(db, "upgrade", lambda *args: pytest.fail("Alembic ran for a new SQLite database"))
        assert db.upgrade_unless_raced(made) is None
        assert head_schema.REVISION == db.current_revision(made) == db.current_revision(migrated) == db.HEAD_REVISION
        assert _sqlite_schema(made) == _sqlite_schema(migrated)
        assert db.schema_problem(made, str(made.url), head_schema.REVISION) == ""
    finally:
        migrated.dispose()
        made.dispose()


def test_a_sqlite_database_holding_anything_is_migrated_not_made_at_head(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Made at head only when empty: a database holding another program's table (or one a
    command racing this one has just made) is left to Alembic, which keeps what is there."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'shared.db'}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE other_program (x INTEGER)")
        assert not db._made_at_head(engine)
        db.upgrade_unless_raced(engine)
        assert db.current_revision(engine) == db.HEAD_REVISION
        assert _tables(engine) == set(Base.metadata.tables) | {"other_program"}
        assert not db._made_at_head(engine)  # made by now: nothing is done twice
    finally:
        engine.dispose()


def _cli(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    from warden.cli.app import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["wq?x", "h%41b", "x#y"])
def test_a_home_with_url_characters_keeps_its_database_inside(name: str, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "homes" / name
    monkeypatch.setenv("WARDEN_HOME", str(home))
    monkeypatch.delenv("WARDEN_DATABASE_URL", raising=False)
    assert _cli(capsys, "db", "upgrade")[0] == 0
    assert (home / "warden.db").is_file() and load_settings().sqlite_path == home / "warden.db"
    assert sorted(p.name for p in (tmp_path / "homes").iterdir()) == [name]


def test_a_database_path_that_is_a_directory_is_named_as_such(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """`db current` used to say "no database yet: any command creates it", and every command then
    failed with sqlite's "unable to open database file"."""
    home = tmp_path / "home"
    (home / "warden.db").mkdir(parents=True)
    monkeypatch.setenv("WARDEN_HOME", str(home))
    monkeypatch.delenv("WARDEN_DATABASE_URL", raising=False)
    for argv in (("db", "current"), ("db", "upgrade"), ("db", "check"), ("status",)):
        code, _, err = _cli(capsys, *argv)
        assert code == 1 and f"{home / 'warden.db'} is not a regular file" in err and err.count("\n") == 1, argv
    assert (home / "warden.db").is_dir() and not any((home / "warden.db").iterdir())


def test_db_commands_say_one_line_for_what_they_cannot_use(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    monkeypatch.setenv("WARDEN_HOME", str(home))
    monkeypatch.delenv("WARDEN_DATABASE_URL", raising=False)
    code, _, err = _cli(capsys, "db", "current")
    assert code == 1 and "no database at" in err and not home.exists()  # looking creates nothing
    for argv in (("db", "upgrade", "bogus"), ("db", "upgrade", "--", "-1")):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and "unknown revision" in err and err.count("\n") == 1
    assert _cli(capsys, "db", "upgrade")[0] == 0
    code, _, err = _cli(capsys, "db", "upgrade", "0001")
    assert code == 2 and "does not downgrade" in err
    import sqlite3

    with sqlite3.connect(home / "warden.db") as conn:  # as a newer warden would leave it
        conn.execute("UPDATE alembic_version SET version_num = '0999'")
    before = (home / "warden.db").read_bytes()
    for argv in (("db", "check"), ("db", "upgrade"), ("status",)):
        code, _, err = _cli(capsys, *argv)
        assert code == 1 and "newer warden" in err and err.count("\n") == 1, argv
    assert (home / "warden.db").read_bytes() == before
    (home / "warden.db").write_bytes(b"garbage" * 100)
    for argv in (("db", "current"), ("db", "check"), ("db", "upgrade")):
        code, _, err = _cli(capsys, *argv)
        assert code == 1 and "file is not a database" in err and "internal error" not in err, argv
    monkeypatch.setenv("WARDEN_DATABASE_URL", "mysql://nobody@localhost/x")
    code, _, err = _cli(capsys, "db", "current")
    assert code == 1 and "driver that is not installed" in err


def _checkpoint(s, run_key: str):  # type: ignore[no-untyped-def]
    from datetime import datetime

    from warden.store.models import Checkpoint, CheckpointTerm

    row = Checkpoint(run_key=run_key, session_id="s", agent="main", trigger="fill:20", projects=[],
                     captured_at=datetime(2026, 1, 1), active_task="t", decisions=[], edited_files=[],
                     read_files=[], open_questions=[], errors=[], last_state="")
    s.add(row)
    s.flush()
    s.add(CheckpointTerm(checkpoint_id=row.id, term="exporter", captured_at=row.captured_at, session_id="s"))
    s.flush()
    return row.id


def test_a_deleted_checkpoints_id_is_never_handed_out_again(engine: Engine) -> None:
    """0001 → head keeps every checkpoint and its recall index; afterwards the highest id, once
    deleted, is not reused (a session-start pointer names checkpoints by id)."""
    from warden.continuity.service import forget
    from warden.store.models import Checkpoint, CheckpointTerm

    db.upgrade(engine, "0001")
    store = db.Store(engine)
    with store.session() as s:
        ids = [_checkpoint(s, f"r{i}:main") for i in range(3)]
    db.upgrade(engine)
    with store.session() as s:
        assert s.query(Checkpoint).count() == 3 and s.query(CheckpointTerm).count() == 3
        forget(s, checkpoint_ids=[ids[-1]])
    with store.session() as s:
        assert _checkpoint(s, "r9:main") > ids[-1]


@pytest.mark.parametrize("old_sqlite", [False, True])
def test_the_undecided_tokens_round_trip_keeps_every_receipt(engine: Engine, old_sqlite: bool, monkeypatch) -> None:
    """0003 adds rules.undecided_tokens; taking it out again must not lose the receipts (on an
    SQLite too old to drop a column in place, rebuilding `rules` with foreign keys on would
    cascade to them)."""
    import sqlite3

    from warden.select.receipts import write_receipt

    if old_sqlite:
        if engine.dialect.name != "sqlite":
            pytest.skip("SQLite's own path")
        monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))

    db.upgrade(engine)
    store = db.Store(engine)
    with store.session() as s:
        rule = Rule(agent="backend", body="Grep for the symbol before opening files.", undecided_tokens=5.0)
        s.add(rule)
        s.flush()
        write_receipt(s, rule, kind="admission", verdict="keep", reason="r", state_after="active", estimate=1.0,
                      ci_low=0.5, ci_high=2.0, margin=1.0, k=2.0, n_per_side={}, paired_diffs={}, pass_counts={},
                      tokens_spent=1.0, model="m", backend="sim", suite_hash="", fixture_hash="")
    db.downgrade(engine, "0002")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM receipts")).scalar() == 1
        assert "undecided_tokens" not in {c["name"] for c in inspect(conn).get_columns("rules")}
    db.upgrade(engine)
    with store.session() as s:
        assert s.query(Rule).one().undecided_tokens == 0.0 and len(s.query(Rule).one().receipts) == 1


def test_a_first_migration_cut_short_leaves_nothing_behind(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Disk full or a kill during the very first command must not leave half the tables and no
    revision (every later command would fail on 'table already exists')."""
    from alembic.operations import Operations
    from sqlalchemy import inspect as sa_inspect

    from warden.store.db import HEAD_REVISION, current_revision, make_engine, upgrade

    url = f"sqlite:///{tmp_path / 'w.db'}"
    engine = make_engine(url)
    real_create = Operations.create_table
    calls = {"n": 0}

    def failing_create(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("disk full")
        return real_create(self, *args, **kwargs)

    monkeypatch.setattr(Operations, "create_table", failing_create)
    with pytest.raises(OSError):
        upgrade(engine)
    assert sa_inspect(engine).get_table_names() == []
    monkeypatch.setattr(Operations, "create_table", real_create)
    upgrade(engine)
    assert current_revision(engine) == HEAD_REVISION


def test_an_upgrade_keeps_a_copy_of_the_sqlite_database_as_it_was(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """warden never downgrades: the copy an upgrade keeps (with the warden that wrote it) is the
    way back. Made once per revision, owner-only; a new database needs none."""
    import sqlite3
    import stat

    from warden.store.db import HEAD_REVISION, make_engine, upgrade_unless_raced

    path = tmp_path / "w.db"
    engine = make_engine(f"sqlite:///{path}")
    assert upgrade_unless_raced(engine) is None and not list(tmp_path.glob("w.db.at-*"))  # new: nothing to keep
    with db.Store(engine).session() as s:
        s.add(Rule(agent="backend", body="Grep first, then read.", state="active"))
    db.downgrade(engine, "0003")  # as an older warden left it
    kept = upgrade_unless_raced(engine)
    assert kept == tmp_path / "w.db.at-0003" and stat.S_IMODE(kept.stat().st_mode) == 0o600
    copy = sqlite3.connect(kept)
    assert copy.execute("SELECT version_num FROM alembic_version").fetchone() == ("0003",)
    assert copy.execute("SELECT body FROM rules").fetchall() == [("Grep first, then read.",)]
    copy.close()
    assert db.current_revision(engine) == HEAD_REVISION and upgrade_unless_raced(engine) is None
    engine.dispose()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("w.db.at-")] == ["w.db.at-0003"]


def test_no_room_for_the_copy_means_no_migration_and_one_line(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from warden.store.db import StoreError, make_engine, upgrade_unless_raced

    engine = make_engine(f"sqlite:///{tmp_path / 'w.db'}")
    upgrade_unless_raced(engine)
    db.downgrade(engine, "0003")
    import subprocess

    from warden.names import pid_namespace

    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"w.db.at-pid{gone.pid}-ns{pid_namespace()}-copying"  # a copy a killed process left
    stale.write_bytes(b"partial")
    stale.with_name(stale.name + "-journal").write_bytes(b"its rollback journal")  # SQLite's, beside it
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(StoreError, match=r"cannot keep a copy of .*w\.db before migrating it .*it needs \d+ MB .* and 0 MB are free\): free some"):
        upgrade_unless_raced(engine)
    assert db.current_revision(engine) == "0003" and not list(tmp_path.glob("w.db.at-*"))
    engine.dispose()


def test_the_copy_is_named_after_the_revision_it_holds(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Another command may migrate between the look at the revision and the copy: a copy that
    holds head is no way back and is not kept under an older name."""
    from warden.store.db import make_engine, upgrade_unless_raced

    engine = make_engine(f"sqlite:///{tmp_path / 'w.db'}")
    upgrade_unless_raced(engine)
    db.downgrade(engine, "0003")
    looked = iter(["0003"])  # what our first look saw; then the other command's upgrade lands
    real = db.current_revision
    monkeypatch.setattr(db, "current_revision", lambda e: next(looked, None) or real(e))
    db.upgrade(engine)  # the other command
    assert db.backup_before_upgrade(engine) is None and not list(tmp_path.glob("w.db.at-*"))
    engine.dispose()


@pytest.mark.skipif(not os.environ.get("WARDEN_TEST_DATABASE_URL"), reason="needs WARDEN_TEST_DATABASE_URL")
def test_a_search_path_schema_not_created_yet_says_to_create_it(warden_home) -> None:
    """The README's schema URL on a database without that schema: PostgreSQL says only 'no schema
    has been selected to create in'."""
    url = os.environ["WARDEN_TEST_DATABASE_URL"] + "?options=-csearch_path%3Dwarden_never_created"
    with pytest.raises(db.StoreError, match="create it first, e.g. CREATE SCHEMA"):
        db.open_store(load_settings(database_url=url))


def test_baselines_get_their_fixture_and_stop_mixing_two(engine: Engine) -> None:
    """0005 keys baselines by fixture too: each existing row keeps the fixture of its frozen first
    run (of its best run when the first is gone); a row whose best came from another fixture (the
    mixing 0005 ends) falls back to its first run. Downgrading keeps one row per old key."""
    from datetime import datetime

    from sqlalchemy import select

    from warden.store.models import Baseline, BenchRun

    db.upgrade(engine, "0004")
    store = db.Store(engine)
    old, new = "o" * 64, "n" * 64
    with store.session() as s:
        runs = {}
        for name, task, fixture, weighted in (("a1", "t-a", old, 100.0), ("a2", "t-a", new, 40.0),
                                              ("b1", "t-b", old, 90.0), ("b2", "t-b", old, 80.0),
                                              ("c2", "t-c", new, 70.0)):
            runs[name] = BenchRun(agent="backend", task_id=task, config_key="", backend="sim", model="m", seed=1,
                                  suite_hash="s" * 64, fixture_hash=fixture, outcome="completed", completed=True,
                                  weighted_tokens=weighted)
            s.add(runs[name])
        s.flush()
        ids = {name: run.id for name, run in runs.items()}
    insert = text("INSERT INTO baselines (agent, task_id, backend, model, run1_weighted, run1_run_id, best_weighted, "
                  "best_run_id, frozen_at, updated_at) VALUES ('backend', :task, 'sim', 'm', :w1, :r1, :wb, :rb, "
                  ":at, :at)")
    at = datetime(2026, 1, 1)
    with engine.begin() as conn:
        conn.execute(insert, [{"task": "t-a", "w1": 100.0, "r1": ids["a1"], "wb": 40.0, "rb": ids["a2"], "at": at},  # mixed
                              {"task": "t-b", "w1": 90.0, "r1": ids["b1"], "wb": 80.0, "rb": ids["b2"], "at": at},
                              {"task": "t-c", "w1": 95.0, "r1": None, "wb": 70.0, "rb": ids["c2"], "at": at}])
    db.upgrade(engine)
    with store.session() as s:
        got = {b.task_id: (b.fixture_hash, b.run1_run_id, b.run1_weighted, b.best_run_id, b.best_weighted)
               for b in s.scalars(select(Baseline))}
        assert got == {"t-a": (old, ids["a1"], 100.0, ids["a1"], 100.0),
                       "t-b": (old, ids["b1"], 90.0, ids["b2"], 80.0),
                       "t-c": (new, None, 95.0, ids["c2"], 70.0)}
        # a new fixture's baseline of the same task sits beside the old one
        s.add(Baseline(agent="backend", task_id="t-a", backend="sim", model="m", fixture_hash=new,
                       run1_weighted=40.0, run1_run_id=ids["a2"], best_weighted=40.0, best_run_id=ids["a2"]))
    db.downgrade(engine, "0004")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT task_id, run1_run_id FROM baselines ORDER BY task_id")).all()
        assert [tuple(r) for r in rows] == [("t-a", ids["a2"]), ("t-b", ids["b1"]), ("t-c", None)]
        assert "fixture_hash" not in {c["name"] for c in inspect(conn).get_columns("baselines")}
    db.upgrade(engine)
    with store.session() as s:
        assert s.query(Baseline).count() == 3

