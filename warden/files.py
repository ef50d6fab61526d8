"""Writing files whole or not at all: a temp file beside the target, fsync'd, then renamed over it.

Shared by the MEMORY.md compiler, the ledger, the HTML report and the hooks' settings.json edit.
Never writes through a symlink between a caller's ``root`` and the file.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from warden.errors import WardenError
from warden.names import process_tag, tagged_process_gone


def refuse_symlinks(path: Path, root: Path) -> None:
    """Refuse a symlink at the file or at any directory between ``root`` and it."""
    probe = path
    while True:
        if probe.is_symlink():
            raise WardenError(f"refusing to write {path}: {probe} is a symlink")
        if probe == root or probe.parent == probe:
            break
        probe = probe.parent


def cannot_write(path: Path, exc: OSError) -> WardenError:
    return WardenError(f"cannot write {path}: {exc.strerror or exc}")


def write_atomic(path: Path, data: bytes, root: Path) -> None:
    """Write ``path`` whole or not at all (temp file + rename), never through a symlink between
    ``root`` and it; an OS error is one line naming the path."""
    tmp = staged_or_error(path, data, root)
    try:
        os.replace(tmp, path)  # rename replaces a symlink itself, never writes through it
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
        raise


def staged_or_error(path: Path, data: bytes, root: Path, private: bool = False) -> Path:
    try:
        return stage(path, data, root, private)
    except OSError as exc:
        raise cannot_write(path, exc) from None


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (os.umask can only set)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def stage(path: Path, data: bytes, root: Path, private: bool = False, new_mode: int | None = None) -> Path:
    """``data`` in a temp file beside ``path`` (checked as a write is, fsync'd), not yet in place.
    Its name carries this process's tag: :func:`sweep_staged` removes it if this process died
    before the rename. The file keeps the mode the user gave the one it replaces; a new one gets
    ``new_mode``, else any new file's mode.
    A ``private`` one (it holds transcript text) is the owner's alone: 0600 at most, in a folder
    closed to others."""
    root.mkdir(parents=True, exist_ok=True)
    refuse_symlinks(path.parent, root)
    path.parent.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
    refuse_symlinks(path, root)
    if path.exists() and not path.is_file():
        raise WardenError(f"refusing to write {path}: {'it is a directory' if path.is_dir() else 'not a regular file'}")
    kept = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    if private:  # never looser than the owner's alone, also for a file an older warden made 0644
        mode = 0o600 if kept is None else kept & 0o600
        folder = stat.S_IMODE(path.parent.stat().st_mode)
        if folder & 0o077:
            try:
                os.chmod(path.parent, folder & 0o700)
            except PermissionError:  # a folder someone else owns: the files are 0600 all the same
                pass
    else:
        mode = kept if kept is not None else new_mode if new_mode is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-{process_tag()}-", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


_STAGED_NAME = re.compile(r"\..+-pid\d+-ns[^-]+-[^/]*\.tmp")


def sweep_staged(directory: Path) -> None:
    """Remove temp files :func:`stage` left in ``directory`` whose process is gone (SIGKILLed
    between staging and its commit)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if _STAGED_NAME.fullmatch(entry.name) and tagged_process_gone(entry.name) and not entry.is_symlink():
            entry.unlink(missing_ok=True)
