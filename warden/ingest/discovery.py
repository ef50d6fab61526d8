"""Finding the transcripts a collect reads: the ``*.jsonl`` files under the paths it is given, in
the order they are ingested, with their sizes.

Only the standard library and warden's settings: a bulk `warden collect` walks the tree in a child
process of its own (:class:`ChildDiscovery`) while it imports the parser, on the core those
imports leave idle (3,000 transcripts: ~20 ms that no longer delay the parsers' start).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from warden.config import load_settings
from warden.errors import UsageError, WardenError

MAX_JOBS = 64  # parser processes `warden collect --jobs` may ask for


def discover_transcripts(paths: Iterable[Path]) -> list[Path]:
    """The ``*.jsonl`` files under the given files/directories, main sessions before subagents
    (so a response repeated in both is owned by the session that wrote it first)."""
    return [Path(file) for file in transcript_names(paths)]


def transcript_names(paths: Iterable[Path]) -> list[str]:
    """:func:`discover_transcripts` as the strings of those paths (a bulk collect has thousands:
    a Path each cost more than the walk)."""
    return list(transcript_sizes(paths))


def transcript_sizes(paths: Iterable[Path]) -> dict[str, int]:
    """:func:`transcript_names`, each with its size (0 for one gone or unreadable)."""
    found: set[str] = set()
    for path in paths:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise UsageError(f"no such file or directory: {path}") from None
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(mode):
            if not os.access(path, os.R_OK | os.X_OK):
                raise UsageError(f"cannot read directory {path}: permission denied")
            base = str(path)  # a file's name as Path(root) / name gives it (no "./")
            _add_transcripts_under(os.fspath(path), "" if base == "." else os.path.join(base, ""),
                                   os.path.realpath(path), found, set())
        else:
            if not os.access(path, os.R_OK):
                raise UsageError(f"cannot read {path}: permission denied")
            found.add(str(path))
    # One file reached under two names (a symlink beside its target) is one transcript.
    unique: dict[tuple[int, int] | str, tuple[str, int]] = {}
    for file in sorted(found, key=ingest_order):
        try:
            st = os.stat(file)
            identity: tuple[int, int] | str = (st.st_dev, st.st_ino)
            size = st.st_size
        except OSError:
            identity, size = file, 0  # gone or unreadable: the collector says so for this name
        unique.setdefault(identity, (file, size))
    return dict(unique.values())


def _add_transcripts_under(directory: str, prefix: str, real: str, found: set[str], walked: set[str]) -> None:
    """Add to ``found`` the ``*.jsonl`` names under ``directory`` (its real path ``real``), each
    ``prefix`` + its path below it, as ``os.walk(directory, followlinks=True)`` finds them, in its
    order: symlinked directories are followed, each real directory once (``walked``: no loops),
    one that cannot be read is passed over. A directory's real path is its parent's with its
    name unless it is a symlink (``os.path.realpath`` of each directory cost more than the walk)."""
    if real in walked:
        return
    try:
        with os.scandir(directory) as listing:
            entries = list(listing)
    except OSError:
        return
    walked.add(real)
    subdirectories = []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            subdirectories.append(entry)
        elif entry.name.endswith(".jsonl"):
            found.add(prefix + entry.name)
    for entry in subdirectories:
        path = os.path.join(directory, entry.name)
        try:
            linked = entry.is_symlink()
        except OSError:
            linked = True
        _add_transcripts_under(path, prefix + entry.name + "/", os.path.realpath(path) if linked
                               else os.path.join(real, entry.name), found, walked)


def ingest_order(path: str) -> tuple[int, str]:
    return (1 if path.rpartition("/")[2].startswith("agent-") else 0, path)


def early_collect_paths(paths: list[str]) -> list[Path] | None:
    """What a `warden collect PATHS` reads (the settings' Claude Code projects for none), if its
    parser processes may start before it loads the CLI and the store: into a SQLite database not
    made yet (a collect into a made one plans from its offsets first). None otherwise, or if the
    settings cannot be read (the command itself reports that)."""
    try:
        settings = load_settings()
        database = settings.sqlite_path
        if database is None or database.exists():
            return None
        return [Path(p).expanduser() for p in paths] or [settings.claude_home / "projects"]
    except (WardenError, OSError, ValueError):
        return None


class ChildDiscovery:
    """:func:`transcript_sizes` of ``paths``, found by a forked child process while this one goes
    on (with its imports): :meth:`result` is the child's answer, or None where it has none (no
    fork here, the walk failed or raised a UsageError, the child was killed): the caller then
    walks the tree itself, and reports what is wrong."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._child: tuple[int, int] | None = None  # (pid, the read end of its pipe)
        if not hasattr(os, "fork"):
            return
        try:
            read, write = os.pipe()
        except OSError:  # out of descriptors: the caller walks the tree itself
            return
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: walk, write each (name, size) NUL-terminated, and leave at once
            code = 1
            try:
                os.close(read)
                found = transcript_sizes(paths)
                data = memoryview(b"".join(os.fsencode(name) + b"\0" + b"%d\0" % size for name, size in found.items()))
                while data:
                    data = data[os.write(write, data):]
                code = 0
            finally:
                os._exit(code)  # nothing of the parent's (buffers, atexit) is the child's to run
        os.close(write)
        self._child = (pid, read)

    def result(self) -> dict[str, int] | None:
        """The child's answer (once: later calls give None), the child reaped."""
        if self._child is None:
            return None
        (pid, read), self._child = self._child, None
        chunks = []
        try:
            while chunk := os.read(read, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(read)
            _, status = os.waitpid(pid, 0)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        fields = b"".join(chunks).split(b"\0")
        return {os.fsdecode(fields[i]): int(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}
