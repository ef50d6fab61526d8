"""Hermetic tests: every test gets its own HOME, WARDEN_HOME and CLAUDE_CONFIG_DIR in a temp dir
(so ``~`` in code under test, and in every subprocess it starts, is the temp dir), no API key,
and a last-resort check that the real ~/.warden and ~/.claude directories were not created or
had entries added or removed (it reads their own modification times only: their contents
belong to whoever else uses the machine, a running Claude Code included). Hypothesis keeps its
example database and caches in a temp dir of the run, not in ``.hypothesis/`` of the checkout."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir
from sqlalchemy import Engine

REPO = Path(__file__).resolve().parent.parent
# The shared corpus sits beside the checkout; a clone elsewhere names it in WARDEN_TEST_CORPUS.
CORPUS = Path(os.environ.get("WARDEN_TEST_CORPUS") or REPO.parent / "shared" / "corpus" / "claude-home").resolve()

# One per test process (each xdist worker imports this file), removed when it exits.
HYPOTHESIS_HOME = Path(tempfile.mkdtemp(prefix="warden-tests-hypothesis-"))
set_hypothesis_home_dir(HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, HYPOTHESIS_HOME, ignore_errors=True)

_REAL_DIRS = [Path("~/.warden").expanduser(), Path("~/.claude").expanduser()]


def _snapshot(paths: list[Path]) -> dict[Path, float | None]:
    return {p: (p.stat().st_mtime if p.exists() else None) for p in paths}


@pytest.fixture(autouse=True)
def warden_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "warden-home"
    claude = tmp_path / "claude-home"
    user_home = tmp_path / "user-home"
    home.mkdir()
    claude.mkdir()
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("WARDEN_HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("WARDEN_REPO", str(REPO))
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "WARDEN_DATABASE_URL",
                "WARDEN_MEMORY_DIR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"):
        monkeypatch.delenv(var, raising=False)
    before = _snapshot(_REAL_DIRS)
    yield home
    after = _snapshot(_REAL_DIRS)
    assert before == after, "a test wrote to the real ~/.warden or ~/.claude"


@pytest.fixture
def timeless_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixture transcripts carry fixed dates, which age past the 90-day checkpoint retention:
    keep their checkpoints (the collector stores none that the next prune would delete)."""
    monkeypatch.setenv("WARDEN_CHECKPOINT_MAX_AGE_DAYS", "36500")


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS


def database_urls() -> list[str]:
    """SQLite always; PostgreSQL too when WARDEN_TEST_DATABASE_URL is set."""
    urls = ["sqlite"]
    if os.environ.get("WARDEN_TEST_DATABASE_URL"):
        urls.append(os.environ["WARDEN_TEST_DATABASE_URL"])
    return urls


@contextmanager
def private_postgres_schema(url: str, prefix: str = "warden_test") -> Iterator[Engine]:
    """An engine on PostgreSQL confined to a fresh schema, dropped afterwards: tests never
    collide with each other or leave anything behind in the shared database."""
    import uuid

    from sqlalchemy import event, text

    from warden.store import db

    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = db.make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = db.make_engine(url)

    @event.listens_for(engine, "connect")
    def _search_path(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        cur = dbapi_conn.cursor()
        cur.execute(f'SET search_path TO "{schema}"')
        cur.close()
        dbapi_conn.commit()

    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=database_urls())
def any_store(request: pytest.FixtureRequest) -> Iterator[object]:
    """A migrated store on SQLite (in the test's home), and on PostgreSQL (a private schema)
    when WARDEN_TEST_DATABASE_URL is set."""
    from warden.config import load_settings
    from warden.store import db

    if request.param == "sqlite":
        store = db.open_store(load_settings())
        yield store
        store.engine.dispose()
        return
    with private_postgres_schema(request.param, "warden_store") as engine:
        db.upgrade(engine)
        yield db.Store(engine)


OUTSIDE_SECRET = "TOP SECRET 12345\n"  # digits: a numeric grep pattern must not reach it either


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside a run's copy holding a secret the harness's tools must never read."""
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text(OUTSIDE_SECRET)
    return secret
