"""The frozen fixture (``fixture_repo/``) and the throwaway copies bench runs work in.

The fixture is frozen by ``fixture_repo/MANIFEST.sha256``: one ``<sha256>  <path>`` line per
file (the format ``sha256sum -c`` reads), sorted by path. The *fixture hash* that every run
and receipt records is the SHA-256 of that canonical manifest text, so two checkouts with the
same bytes agree on it whatever their file times or line-ending settings.

* :func:`verify_fixture` refuses a fixture whose files differ from the manifest (changed,
  missing or added files, named in the error).
* :func:`make_run_copy` makes one run's working copy: only the files in the manifest, minus
  :data:`EXCLUDED_FROM_COPY` (BUGS.md is the answer key; the manifest is warden's), never a VCS
  directory or caches. Each file's bytes are checked against the manifest as they are copied,
  so a copy can never silently differ from the frozen fixture.

A new fixture *version* is made deliberately, never by accident:
``python -m warden.bench.fixture --write-manifest`` rewrites the manifest; baselines frozen
against the old fixture hash are then no longer comparable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

from warden.errors import UsageError, WardenError

MANIFEST_NAME = "MANIFEST.sha256"
BUGS_NAME = "BUGS.md"
# Files of the frozen fixture that never reach a run's copy.
EXCLUDED_FROM_COPY = frozenset({BUGS_NAME, MANIFEST_NAME})
# Directories that are never part of the fixture (VCS metadata, caches a test run leaves).
IGNORED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache",
                          ".ruff_cache", ".venv", "node_modules"})
IGNORED_SUFFIXES = (".pyc", ".pyo")


class FixtureError(WardenError):
    """The fixture is missing, modified, or its manifest is unreadable."""


def _is_ignored_file(name: str) -> bool:
    return name.endswith(IGNORED_SUFFIXES) or name == ".DS_Store"


def fixture_files(fixture_dir: Path) -> list[str]:
    """Relative POSIX paths of the fixture's files (manifest excluded), sorted.

    Symlinks are refused: a copy must not be able to reach outside itself.
    """
    root = Path(fixture_dir)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                raise FixtureError(f"fixture contains a symlink: {(base / name).relative_to(root).as_posix()}")
        for name in filenames:
            if _is_ignored_file(name):
                continue
            path = base / name
            rel = path.relative_to(root).as_posix()
            if rel == MANIFEST_NAME:
                continue
            if path.is_symlink():
                raise FixtureError(f"fixture contains a symlink: {rel}")
            if not path.is_file():  # a FIFO or device would block or never end a read
                raise FixtureError(f"fixture contains a non-regular file: {rel}")
            found.append(rel)
    return sorted(found)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compute_manifest(fixture_dir: Path) -> dict[str, str]:
    """``{relative path: sha256 of its bytes}`` of the fixture as it is on disk now."""
    root = Path(fixture_dir)
    return {rel: _sha256((root / rel).read_bytes()) for rel in fixture_files(root)}


def render_manifest(manifest: dict[str, str]) -> str:
    """Canonical manifest text: ``sha256sum`` format, sorted by path, LF line ends."""
    return "".join(f"{digest}  {path}\n" for path, digest in sorted(manifest.items()))


def manifest_hash(manifest: dict[str, str]) -> str:
    return _sha256(render_manifest(manifest).encode("utf-8"))


def read_manifest(fixture_dir: Path) -> dict[str, str]:
    """Parse ``MANIFEST.sha256``; a missing or malformed manifest is a :class:`FixtureError`."""
    path = Path(fixture_dir) / MANIFEST_NAME
    if not Path(fixture_dir).is_dir():
        raise FixtureError(f"fixture directory not found: {fixture_dir}")
    try:
        if path.exists() and not path.is_file():
            raise FixtureError(f"{MANIFEST_NAME} is not a regular file")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureError(f"fixture has no manifest ({path}); the fixture is not frozen") from None
    except UnicodeDecodeError:
        raise FixtureError(f"{MANIFEST_NAME} is not UTF-8 text") from None
    except OSError as exc:
        raise FixtureError(f"cannot read {MANIFEST_NAME}: {exc.strerror or exc}") from None
    manifest: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if (not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)
                or not rel or rel.startswith("/") or ".." in rel.split("/") or "\\" in rel):
            raise FixtureError(f"{MANIFEST_NAME} line {number} is malformed: {line[:80]!r}")
        manifest[rel] = digest
    if not manifest:
        raise FixtureError(f"{MANIFEST_NAME} lists no files")
    return manifest


def verify_fixture(fixture_dir: Path) -> str:
    """Check the fixture against its manifest and return the fixture hash.

    Raises :class:`FixtureError` naming every changed, missing or added file.
    """
    root = Path(fixture_dir)
    expected = read_manifest(root)
    actual = compute_manifest(root)
    changed = sorted(p for p in expected if p in actual and actual[p] != expected[p])
    missing = sorted(p for p in expected if p not in actual)
    added = sorted(p for p in actual if p not in expected)
    if changed or missing or added:
        parts = []
        if changed:
            parts.append("changed: " + ", ".join(changed))
        if missing:
            parts.append("missing: " + ", ".join(missing))
        if added:
            parts.append("added: " + ", ".join(added))
        raise FixtureError(
            f"fixture {root} was modified ({'; '.join(parts)}); it is frozen by {MANIFEST_NAME} — "
            "restore it (git checkout -- fixture_repo) or deliberately make a new fixture version "
            "with `python -m warden.bench.fixture --write-manifest`"
        )
    return manifest_hash(expected)


def fixture_hash(fixture_dir: Path) -> str:
    """The fixture hash recorded by every run and receipt (verifies the fixture first)."""
    return verify_fixture(fixture_dir)


def write_manifest(fixture_dir: Path) -> str:
    """Freeze the fixture as it is now (a deliberate new fixture version). Returns its hash."""
    root = Path(fixture_dir)
    if not root.is_dir():
        raise UsageError(f"fixture directory not found: {root}")
    manifest = compute_manifest(root)
    if not manifest:
        raise UsageError(f"fixture directory {root} has no files")
    (root / MANIFEST_NAME).write_text(render_manifest(manifest), encoding="utf-8", newline="\n")
    return manifest_hash(manifest)


def make_run_copy(fixture_dir: Path, dest: Path) -> Path:
    """Copy the frozen fixture into ``dest`` (created; must not exist or be empty).

    Copies exactly the manifest's files minus :data:`EXCLUDED_FROM_COPY`, checking each file's
    bytes against the manifest on the way (one read per file), so a modified fixture is refused
    here too. Returns ``dest``.
    """
    root = Path(fixture_dir)
    dest = Path(dest)
    manifest = read_manifest(root)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"run copy destination is not an empty directory: {dest}")
    dest.mkdir(parents=True, exist_ok=True)
    made_dirs: set[Path] = {dest}
    for rel, digest in manifest.items():
        if rel in EXCLUDED_FROM_COPY:
            continue
        source = root / rel
        try:
            data = source.read_bytes()
        except FileNotFoundError:
            raise FixtureError(f"fixture {root} was modified (missing: {rel}); it is frozen by {MANIFEST_NAME}") from None
        if _sha256(data) != digest:
            raise FixtureError(f"fixture {root} was modified (changed: {rel}); it is frozen by {MANIFEST_NAME}")
        target = dest / rel
        parent = target.parent
        if parent not in made_dirs:
            parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(parent)
        target.write_bytes(data)
    return dest


def main(argv: list[str] | None = None) -> int:
    from warden.config import load_settings

    parser = argparse.ArgumentParser(
        prog="python -m warden.bench.fixture",
        description="Verify the frozen fixture, or deliberately freeze a new fixture version.")
    parser.add_argument("--dir", type=Path, default=None, help="fixture directory (default: the configured fixture_repo)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write-manifest", action="store_true",
                        help="rewrite MANIFEST.sha256 from the files on disk (makes a NEW fixture version)")
    action.add_argument("--verify", action="store_true", help="check the fixture against its manifest (default)")
    args = parser.parse_args(argv)
    fixture_dir = args.dir or load_settings().fixture_dir
    try:
        if args.write_manifest:
            digest = write_manifest(fixture_dir)
            print(f"wrote {Path(fixture_dir) / MANIFEST_NAME}; fixture hash {digest}")
        else:
            digest = verify_fixture(fixture_dir)
            print(f"fixture ok; hash {digest}")
    except WardenError as exc:
        print(f"warden: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
