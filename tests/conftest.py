"""Hermetic tests: every test gets its own WARDEN_HOME and CLAUDE_CONFIG_DIR in a temp dir,
no API key, and a guard that fails any test that writes to the real home directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = (REPO.parent / "shared" / "corpus" / "claude-home").resolve()

_REAL_DIRS = [Path("~/.warden").expanduser(), Path("~/.claude").expanduser()]


def _snapshot(paths: list[Path]) -> dict[Path, float | None]:
    return {p: (p.stat().st_mtime if p.exists() else None) for p in paths}


@pytest.fixture(autouse=True)
def warden_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "warden-home"
    claude = tmp_path / "claude-home"
    home.mkdir()
    claude.mkdir()
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
