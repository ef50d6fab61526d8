"""The frozen fixture: manifest, verification, throwaway copies, and pytest isolation."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from warden.bench.fixture import (
    MANIFEST_NAME,
    FixtureError,
    compute_manifest,
    fixture_hash,
    make_run_copy,
    read_manifest,
    render_manifest,
    verify_fixture,
    write_manifest,
)
from warden.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "fixture_repo"


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    """A private copy of the whole fixture directory (manifest and BUGS.md included)."""
    dest = tmp_path / "fixture_repo"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


# ----------------------------------------------------------------------------- the committed fixture


def test_committed_fixture_matches_its_manifest() -> None:
    digest = verify_fixture(FIXTURE)
    manifest_bytes = (FIXTURE / MANIFEST_NAME).read_bytes()
    assert digest == hashlib.sha256(manifest_bytes).hexdigest() == fixture_hash(FIXTURE)
    assert manifest_bytes.decode("utf-8") == render_manifest(read_manifest(FIXTURE)), "manifest is canonical"


def test_fixture_is_a_realistic_project() -> None:
    manifest = read_manifest(FIXTURE)
    py_files = [p for p in manifest if p.endswith(".py")]
    lines = {p: len((FIXTURE / p).read_text(encoding="utf-8").splitlines()) for p in manifest}
    assert 25 <= len(manifest) <= 50
    assert 2000 <= sum(lines.values()) <= 5000
    assert sum(1 for p in py_files if lines[p] >= 300) >= 2, "some long files make blind reading costly"
    assert {"README.md", "BUGS.md", "ledgerly/schema.sql"} <= set(manifest)
    assert any(p.startswith("tests/test_") for p in manifest) and any(p.startswith("docs/") for p in manifest)


def test_bugs_md_documents_at_least_ten_flaws() -> None:
    text = (FIXTURE / "BUGS.md").read_text(encoding="utf-8")
    entries = re.findall(r"^\d+\. \*\*", text, re.M)
    assert len(entries) >= 10


def test_fixture_has_only_stdlib_runtime_dependencies() -> None:
    project = tomllib.loads((FIXTURE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["dependencies"] == []
    allowed = set(sys.stdlib_module_names) | {"ledgerly", "pytest"}
    for rel in read_manifest(FIXTURE):
        if rel.endswith(".py"):
            source = (FIXTURE / rel).read_text(encoding="utf-8")
            for module in re.findall(r"^\s*(?:from|import) ([a-zA-Z_][\w]*)", source, re.M):
                assert module in allowed or module == "__future__", f"{rel} imports {module}"


# ----------------------------------------------------------------------------- pytest isolation


def test_fixture_carries_no_pytest_configuration() -> None:
    """Nothing in the fixture may hook into warden's own pytest run."""
    manifest = read_manifest(FIXTURE)
    for name in manifest:
        assert Path(name).name not in {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg"}, name
    assert "[tool.pytest" not in (FIXTURE / "pyproject.toml").read_text(encoding="utf-8")


def test_warden_pytest_config_excludes_fixture_and_golden_tasks() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert config["testpaths"] == ["tests"]
    assert {"fixture_repo", "golden_tasks"} <= set(config["norecursedirs"])


def test_pytest_from_the_repo_root_never_collects_fixture_tests() -> None:
    """Recursing from the root itself (not only via testpaths) skips fixture_repo and golden_tasks.

    ``tests/`` is ignored here only to keep this collection cheap; it holds no fixture tests.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--ignore=tests", "."],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert "fixture_repo" not in output and "golden_tasks" not in output, output[-2000:]
    assert result.returncode == 5, output[-2000:]  # 5 = no tests collected


# ----------------------------------------------------------------------------- verification


def test_modified_file_is_refused_by_name(fixture_copy: Path) -> None:
    target = fixture_copy / "ledgerly" / "money.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n# tweak\n", encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        verify_fixture(fixture_copy)
    message = str(info.value)
    assert "changed: ledgerly/money.py" in message and "\n" not in message
    assert "--write-manifest" in message
    with pytest.raises(FixtureError, match="changed: ledgerly/money.py"):
        fixture_hash(fixture_copy)


def test_missing_and_added_files_are_refused_by_name(fixture_copy: Path) -> None:
    (fixture_copy / "docs" / "api.md").unlink()
    (fixture_copy / "ledgerly" / "extra.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        verify_fixture(fixture_copy)
    assert "missing: docs/api.md" in str(info.value) and "added: ledgerly/extra.py" in str(info.value)


def test_caches_and_vcs_dirs_do_not_count_as_modifications(fixture_copy: Path) -> None:
    expected = verify_fixture(FIXTURE)
    (fixture_copy / "ledgerly" / "__pycache__").mkdir()
    (fixture_copy / "ledgerly" / "__pycache__" / "money.cpython-311.pyc").write_bytes(b"\x00")
    (fixture_copy / ".git").mkdir()
    (fixture_copy / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (fixture_copy / ".pytest_cache").mkdir()
    assert verify_fixture(fixture_copy) == expected


def test_missing_or_malformed_manifest_is_refused(fixture_copy: Path, tmp_path: Path) -> None:
    manifest = fixture_copy / MANIFEST_NAME
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text + "not-a-hash  ledgerly/x.py\n", encoding="utf-8")
    with pytest.raises(FixtureError, match="is malformed"):
        verify_fixture(fixture_copy)
    manifest.write_text(text.replace("  ledgerly/db.py", "  ../outside.py"), encoding="utf-8")
    with pytest.raises(FixtureError, match="is malformed"):
        verify_fixture(fixture_copy)
    manifest.unlink()
    with pytest.raises(FixtureError, match="no manifest"):
        verify_fixture(fixture_copy)
    with pytest.raises(FixtureError, match="not found"):
        verify_fixture(tmp_path / "nowhere")


def test_symlinks_are_refused(fixture_copy: Path) -> None:
    (fixture_copy / "ledgerly" / "link.py").symlink_to("/etc/hostname")
    with pytest.raises(FixtureError, match="symlink: ledgerly/link.py"):
        verify_fixture(fixture_copy)


# ----------------------------------------------------------------------------- run copies


def test_run_copy_has_the_fixture_minus_bugs_manifest_and_vcs(fixture_copy: Path, tmp_path: Path) -> None:
    (fixture_copy / ".git").mkdir()
    (fixture_copy / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (fixture_copy / "ledgerly" / "__pycache__").mkdir()
    (fixture_copy / "ledgerly" / "__pycache__" / "db.cpython-311.pyc").write_bytes(b"\x00")
    copy = make_run_copy(fixture_copy, tmp_path / "run" / "copy")
    copied = {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}
    expected = set(read_manifest(fixture_copy)) - {"BUGS.md"}
    assert copied == expected
    assert not (copy / "BUGS.md").exists() and not (copy / MANIFEST_NAME).exists()
    assert not (copy / ".git").exists() and not any(copy.rglob("__pycache__"))
    for rel in expected:
        assert (copy / rel).read_bytes() == (fixture_copy / rel).read_bytes()


def test_run_copy_refuses_a_modified_fixture(fixture_copy: Path, tmp_path: Path) -> None:
    target = fixture_copy / "ledgerly" / "repository.py"
    target.write_bytes(target.read_bytes().replace(b"LIMIT", b"limit", 1))
    with pytest.raises(FixtureError, match="changed: ledgerly/repository.py"):
        make_run_copy(fixture_copy, tmp_path / "copy")


def test_run_copy_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "file").write_text("x", encoding="utf-8")
    with pytest.raises(UsageError, match="not an empty directory"):
        make_run_copy(FIXTURE, dest)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (make_run_copy(FIXTURE, empty) / "README.md").is_file()


def test_run_copies_are_independent(tmp_path: Path) -> None:
    first = make_run_copy(FIXTURE, tmp_path / "a")
    second = make_run_copy(FIXTURE, tmp_path / "b")
    (first / "ledgerly" / "money.py").write_text("broken = True\n", encoding="utf-8")
    assert "def round_cents" in (second / "ledgerly" / "money.py").read_text(encoding="utf-8")
    verify_fixture(FIXTURE)


# ----------------------------------------------------------------------------- new fixture versions


def test_write_manifest_makes_a_new_version(fixture_copy: Path) -> None:
    old = verify_fixture(fixture_copy)
    (fixture_copy / "docs" / "new.md").write_text("# New page\n", encoding="utf-8")
    new = write_manifest(fixture_copy)
    assert new != old and verify_fixture(fixture_copy) == new
    assert "docs/new.md" in compute_manifest(fixture_copy)


def test_module_cli_verifies_and_writes(fixture_copy: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "warden.bench.fixture", "--dir", str(fixture_copy), *args],
                              capture_output=True, text=True, timeout=60)

    ok = run("--verify")
    assert ok.returncode == 0 and verify_fixture(FIXTURE) in ok.stdout
    (fixture_copy / "README.md").write_text("changed\n", encoding="utf-8")
    refused = run()
    assert refused.returncode == 1
    assert refused.stderr.startswith("warden: fixture") and "changed: README.md" in refused.stderr
    assert refused.stderr.count("\n") == 1
    written = run("--write-manifest")
    assert written.returncode == 0 and "fixture hash" in written.stdout
    assert run("--verify").returncode == 0


def test_a_fifo_or_an_odd_manifest_is_one_clear_refusal(fixture_copy: Path) -> None:
    import os

    os.mkfifo(fixture_copy / "pipe")
    with pytest.raises(FixtureError, match="non-regular file: pipe"):
        verify_fixture(fixture_copy)  # used to block reading the FIFO for ever
    (fixture_copy / "pipe").unlink()
    manifest = fixture_copy / "MANIFEST.sha256"
    manifest.write_bytes(manifest.read_bytes() + b"\xff")
    with pytest.raises(FixtureError, match="not UTF-8"):
        verify_fixture(fixture_copy)
    manifest.unlink()
    manifest.mkdir()
    with pytest.raises(FixtureError, match="not a regular file"):
        verify_fixture(fixture_copy)
