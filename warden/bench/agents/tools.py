"""The agent harness's tools, executed inside one run's throwaway copy.

Every model (sim, anthropic, and — through its own CLI tools — claude-code) works on the task
with the same seven tools. Their definitions (:data:`TOOL_DEFINITIONS`) are sent with every
Messages API call; :class:`Toolbox` executes a ``tool_use`` block and returns a plain-text
:class:`ToolResult` (``is_error=True`` for anything refused or failed — the model sees the
message and can recover, the run goes on).

Confinement: every path is resolved (symlinks included) and must stay inside the copy; ``..``,
absolute paths elsewhere and symlinks pointing out are refused. Commands are not run through a
shell (except a task's own success-check string, which the task author wrote), only an
allowlist of programs is accepted, and they run with :func:`sandbox_env` — an environment
allowlist that never carries API keys or tokens. This is a scope, not a security sandbox: code
in the copy (its tests) runs with the user's privileges, as it would for a real agent.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from warden.names import process_tag

# Caps keep one tool result from flooding the context (and the run's token bill).
MAX_RESULT_CHARS = 30_000
DEFAULT_READ_LIMIT = 2_000  # lines
MAX_LINE_CHARS = 2_000
MAX_GLOB_RESULTS = 200
MAX_GLOB_RECURSIVE = 3  # '**' segments in one glob pattern (each walks the tree below the last)
MAX_GREP_MATCHES = 200
MAX_GREP_LINE_CHARS = 300
MAX_GREP_FILE_BYTES = 2_000_000
MAX_WRITE_BYTES = 2_000_000
DEFAULT_COMMAND_TIMEOUT_S = 120.0

# Directories no tool walks into: VCS data and caches are never part of the task.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache",
                          ".venv", "venv", "node_modules", ".tox"})

# Environment variables a tool command or success check may inherit. Nothing else passes:
# in particular no ANTHROPIC_API_KEY, auth tokens or cloud credentials.
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER",
                 "LOGNAME", "SYSTEMROOT")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)

TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": ("Read a text file of the project. Output lines are numbered (cat -n style). "
                        "Use offset (1-based first line) and limit (line count) to read a range."),
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "file path relative to the project root"},
                "offset": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
                "limit": {"type": "integer", "minimum": 1, "description": "number of lines"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "list_dir",
        "description": "List a directory of the project; sub-directories end with '/'.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "directory; '.' is the root"}},
            "required": ["path"],
        },
    },
    {
        "name": "glob",
        "description": "Find files by glob pattern relative to the project root, e.g. '**/*.py'.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
        },
    },
    {
        "name": "grep",
        "description": ("Search file contents with a Python regular expression. Output lines are "
                        "'path:line:text'. Optional path (file or directory) and glob filter "
                        "(e.g. '*.py')."),
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "edit_file",
        "description": ("Replace one exact occurrence of old_string with new_string in a file. "
                        "old_string must match exactly once (include surrounding lines to make "
                        "it unique)."),
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
    {
        "name": "write_file",
        "description": "Create or overwrite a file with the given content.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "run_command",
        "description": ("Run an allowed command in the project root: 'python -m pytest ...', "
                        "'pytest ...', the task's check command, or read-only helpers "
                        "(ls, cat, head, tail, wc, grep). No shell operators."),
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
]

TOOL_NAMES = tuple(t["name"] for t in TOOL_DEFINITIONS)


class ToolError(Exception):
    """A refused or failed tool call; its message becomes an ``is_error`` tool result."""


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when it timed out
    output: str  # stdout and stderr interleaved, capped; stdout whole with ``stderr_apart``
    timed_out: bool = False
    duration_s: float = 0.0
    errors: str = ""  # stderr, capped, with ``stderr_apart``
    output_bytes: int = 0  # bytes the process wrote to stdout, kept or not


def sandbox_env(base: dict[str, str] | None = None, *, tmpdir: str | Path | None = None) -> dict[str, str]:
    """The environment of tool commands and success checks: an allowlist, never a secret.

    ``python``/``pytest`` resolve to warden's own interpreter first, so a check written as
    ``python -m pytest ...`` finds pytest; bytecode is not written into the copy. pytest plugins
    installed beside warden (hypothesis, xdist, …) are not auto-loaded: they are no part of the
    task's project, would make outputs (and so token counts) depend on warden's environment, and
    cost seconds per pytest start. ``tmpdir`` (a run's :func:`run_tmpdir`) becomes ``TMPDIR``
    and ``HOME``: a command the agent chooses has no business in the user's ``~/.aws`` or
    ``~/.warden/warden.toml``.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if k in ENV_ALLOWLIST and not _SECRET_NAME.search(k)}
    interpreter_dir = str(Path(sys.executable).parent)
    path = env.get("PATH", os.defpath)
    env["PATH"] = interpreter_dir + os.pathsep + path
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
                "PYTHONNOUSERSITE": "1", "NO_COLOR": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    if tmpdir is not None:
        env["TMPDIR"] = env["HOME"] = str(tmpdir)
    return env


# The copy's own pytest configuration files, in pytest's order of precedence.
_PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml")


def anchor_pytest(env: dict[str, str], root: Path) -> dict[str, str]:
    """``env`` with every pytest started in the copy ``root`` (a check's ``pytest.main`` too)
    anchored to it through ``PYTEST_ADDOPTS``.

    pytest looks for its configuration upwards from its arguments and the copy's
    ``pyproject.toml`` has no pytest table, so a ``pytest.ini`` or ``conftest.py`` in a folder
    above the copy (``/tmp``, the pass directory) would be loaded: code from outside the copy run,
    and outputs (so costs) that depend on where the copy is. ``-c`` names the copy's own config
    file (or none), ``--rootdir`` and ``--confcutdir`` keep node ids, the cache and conftest
    loading inside the copy. Called when a command starts: the agent may add or remove a config.
    """
    root = Path(root)
    config = next((root / name for name in _PYTEST_CONFIGS if (root / name).is_file()), Path(os.devnull))
    return {**env, "PYTEST_ADDOPTS": shlex.join([f"--config-file={config}", f"--rootdir={root}",
                                                  f"--confcutdir={root}"])}


@contextmanager
def run_tmpdir() -> Iterator[str]:
    """A private temp root for one run's subprocesses (its ``TMPDIR``), removed afterwards.

    Concurrent runs sharing one ``/tmp/pytest-of-<user>`` race on pytest's clean-up of old
    ``pytest-N`` dirs and sometimes print a warning: bytes the agent reads and pays for, so the
    same run would cost differently under load. Outside the copy, so no tool lists or greps it.
    """
    # named with this process's pid: if it is killed, a later bench removes the directory
    with tempfile.TemporaryDirectory(prefix=f"warden-run-tmp-{process_tag()}-") as path:
        yield path


def cap_text(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """Keep head and tail of an over-long output, saying how much was cut."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n… [{len(text) - len(head) - len(tail)} characters cut] …\n{tail}"


_CANCEL = threading.local()


@contextmanager
def cancelled_by(event: threading.Event) -> Iterator[None]:
    """Commands this thread runs inside the block are killed (their process group and what
    carries their mark) as soon as ``event`` is set, and no new one starts after it: how the bench
    scheduler ends the runs in flight when a pass stops (Ctrl-C, SIGTERM, an abort), so that each
    run's own clean-up (its copy, its :func:`run_tmpdir`) happens before the process exits —
    and no orphaned command writes into them afterwards."""
    previous = getattr(_CANCEL, "event", None)
    _CANCEL.event = event
    try:
        yield
    finally:
        _CANCEL.event = previous


def _cancelled() -> bool:
    event = getattr(_CANCEL, "event", None)
    return event is not None and event.is_set()


def run_process(argv: list[str] | str, cwd: Path, *, timeout_s: float, env: dict[str, str],
                shell: bool = False, stderr_apart: bool = False) -> CommandResult:
    """Run a subprocess in its own process group; on timeout the whole group is killed, and when
    it exits, what it left running in its group is killed too — and on Linux what it left outside
    the group that still carries its environment mark (:func:`kill_marked`). ``stderr_apart`` keeps stdout
    whole (a program's machine-readable answer; past :data:`MAX_OUTPUT_BYTES` its head and tail)
    and its stderr apart, capped. Inside :func:`cancelled_by`, a set event kills it (reported
    as timed out) or keeps it from starting."""
    started = time.monotonic()
    if _cancelled():
        return CommandResult(None, "cancelled: the bench is stopping", True, 0.0)
    marker = f"{process_tag()}-{next(_RUN_MARKS)}"
    proc = subprocess.Popen(argv, cwd=cwd, env={**env, RUN_MARK_VAR: marker}, shell=shell, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr_apart else subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, err, timed_out = _read_until_exit(proc, started + max(timeout_s, 0.01), marker)
    finally:
        _kill_group(proc, quiet=True)
        proc.wait()
        kill_marked(marker)
    text = out.value().decode("utf-8", errors="replace")
    errors = cap_text(err.value().decode("utf-8", errors="replace")) if stderr_apart else ""
    return CommandResult(None if timed_out else proc.returncode, text if stderr_apart else cap_text(text),
                         timed_out, time.monotonic() - started, errors, out.total)


class _KeptOutput:
    """A pipe's output in bounded memory: whole up to :data:`MAX_OUTPUT_BYTES`; past it, the
    head and the tail with a line saying how much was cut between — the tail is where a
    program's answer is (claude's JSON result line comes last)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = MAX_OUTPUT_BYTES // 16 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= MAX_OUTPUT_BYTES - len(self.head):
                self.tail_len -= len(self.tail.popleft())

    def value(self) -> bytes:
        tail = b"".join(self.tail)
        if self.total <= MAX_OUTPUT_BYTES:
            return bytes(self.head) + tail
        tail = tail[-(MAX_OUTPUT_BYTES - len(self.head)):]
        cut = self.total - len(self.head) - len(tail)
        return bytes(self.head) + f"\n… [{cut} bytes cut] …\n".encode() + tail


def kill_marked(marker: str) -> int:
    """Kill every process (of this user, Linux ``/proc``) whose environment carries ``marker``:
    what a command left running outside its process group (a new session, a daemon) inherits
    the mark. A process that replaced its environment is not found. Returns how many were hit."""
    needle = f"\0{RUN_MARK_VAR}={marker}\0".encode()
    killed = 0
    for _ in range(5):  # again: one may have forked while the last pass read /proc
        hit = 0
        try:
            entries = os.listdir("/proc")
        except OSError:
            return killed  # no /proc (macOS): nothing to find
        for entry in entries:
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if needle in b"\0" + fh.read() + b"\0":
                        os.kill(int(entry), signal.SIGKILL)
                        hit += 1
            except OSError:  # gone, or not ours to read
                continue
        if not hit:
            break
        killed += hit
    return killed


def _read_until_exit(proc: subprocess.Popen, deadline: float,
                     marker: str = "") -> tuple[_KeptOutput, _KeptOutput, bool]:
    """``proc``'s stdout and stderr, read until it has exited (or the deadline killed its group)
    and its pipes are closed — but no longer than :data:`_DRAIN_S` after that: a process it
    started in a session of its own may hold a pipe open for good, and waiting for EOF would turn
    a finished run into a timed-out one. Past :data:`MAX_OUTPUT_BYTES` a pipe's middle is dropped."""
    pipes = [pipe for pipe in (proc.stdout, proc.stderr) if pipe is not None]
    kept = {pipe.fileno(): _KeptOutput() for pipe in pipes}
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            for fd in kept:
                selector.register(fd, selectors.EVENT_READ)
            drain_until: float | None = None
            while selector.get_map():
                now = time.monotonic()
                if drain_until is None:
                    if proc.poll() is not None:
                        _kill_group(proc, quiet=True)  # what it left in its group stops writing
                        if marker:
                            kill_marked(marker)  # ... and what it left outside it
                        drain_until = now + _DRAIN_S
                    elif now >= deadline or _cancelled():
                        _kill_group(proc)
                        if marker:
                            kill_marked(marker)
                        timed_out = True
                        drain_until = now + _DRAIN_S
                elif now >= drain_until:
                    break
                wait = min(_POLL_S, max(0.0, (deadline if drain_until is None else drain_until) - now))
                for key, _ in selector.select(timeout=wait):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                    else:
                        kept[key.fd].add(chunk)
        out = kept[proc.stdout.fileno()] if proc.stdout is not None else _KeptOutput()
        err = kept[proc.stderr.fileno()] if proc.stderr is not None else _KeptOutput()
    finally:
        for pipe in pipes:
            pipe.close()
    if not timed_out:  # its pipes closed: it may still be running (or finishing its exit)
        try:
            proc.wait(timeout=0.0 if _cancelled() else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            timed_out = True
    return out, err, timed_out


_DRAIN_S = 2.0  # after the process exits or is killed, how long its pipes may stay open
_POLL_S = 0.05  # how often the process is checked for exit while its pipes are quiet
# Set in every command's environment, unique per command: what it leaves running outside its
# process group (a new session escapes killpg) is found by it and killed when the command ends.
RUN_MARK_VAR = "WARDEN_RUN_MARK"
_RUN_MARKS = itertools.count(1)
MAX_OUTPUT_BYTES = 64 * 1024 * 1024  # of one pipe, kept in memory (its head and tail past that)
GREP_TIMEOUT_S = 20.0

# The grep tool's search, run by a child interpreter (isolated: no site, no warden import).
_GREP_WORKER = """
import json, re, sys
job = json.loads(sys.stdin.buffer.read())
regex = re.compile(job["pattern"])
matches, total = [], 0
for rel, path in job["files"]:
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    if b"\\x00" in data[:8192]:
        continue
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            total += 1
            if len(matches) < job["max"]:
                clipped = line if len(line) <= job["width"] else line[:job["width"]] + "\u2026"
                matches.append(f"{rel}:{number}:{clipped}")
json.dump({"matches": matches, "total": total}, sys.stdout)
"""


def _kill_group(proc: subprocess.Popen, quiet: bool = False) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if not quiet:
            proc.kill()


_SHELL_OPERATORS = re.compile(r"[|;&<>`]|\$\(")
_PYTHONS = ("python", "python3", Path(sys.executable).name)
_READ_ONLY_HELPERS = {"ls", "cat", "head", "tail", "wc", "grep"}
_SHORT_FLAGS = re.compile(r"^-[A-Za-z0-9]+$")
_REFUSED_SHORT_FLAGS = {"grep": set("efRS"), "ls": set("LH")}
# Short options of a helper that take a value (the rest of their cluster, else the next argument),
# in every implementation that knows them (GNU, BSD/macOS, busybox): a value is never a path to
# check. A letter that is a plain flag in one implementation and takes a value in another is
# refused (_AMBIGUOUS_SHORT_FLAGS): read the wrong way, a file operand would pass as a value.
# (tail -b: BSD's takes a count, GNU's obsolete "-b FILE" is the last 10 blocks of FILE.)
_VALUE_SHORT_FLAGS = {"grep": set("ABCDXdefm"), "head": set("cn"), "tail": set("cns")}
_AMBIGUOUS_SHORT_FLAGS = {"ls": set("DITw"), "tail": set("b")}
_PYTEST_FLAGS = frozenset({"--lf", "--ff", "--nf", "--co", "--collect-only", "--no-header", "--disable-warnings",
                           "--strict-markers", "--last-failed", "--failed-first", "--new-first", "--quiet",
                           "--verbose", "--exitfirst", "--showlocals"})
_PYTEST_SHORT_CLUSTER = re.compile(r"^-(?:[qvxsl]+|r[a-zA-Z]+)$")
_PYTEST_VALUE_OPTIONS = frozenset({"-k", "-m", "--maxfail", "--tb", "--durations"})


def split_check_commands(check: str) -> list[str]:
    """The simple commands a success check is made of: split on ``&&``, ``||``, ``;`` and ``|``
    outside quotes (a ``python -c "a; b"`` stays whole)."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(check):
        char = check[i]
        if quote:
            if char == "\\" and quote == '"' and i + 1 < len(check):
                current.append(check[i:i + 2])
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "\\" and i + 1 < len(check):
            current.append(check[i:i + 2])
            i += 2
            continue
        elif check.startswith(("&&", "||"), i) or char in ";|\n":
            parts.append("".join(current))
            current = []
            i += 2 if check.startswith(("&&", "||"), i) else 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


@dataclass
class Toolbox:
    """Executes tool calls inside ``root`` (the run's copy).

    ``check_command`` is the task's success check: the model may run it verbatim (through
    ``sh -c``, since its author wrote it) and any of its simple commands on their own.
    ``deadline`` (a value of ``clock``) bounds command timeouts by the run's wall cap.
    """

    root: Path
    check_command: str = ""
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    deadline: float | None = None
    env: dict[str, str] = field(default_factory=sandbox_env)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # ----------------------------------------------------------------- dispatch
    def execute(self, name: str, tool_input: Any) -> ToolResult:
        """Run one tool call; never raises for bad input — the model gets an error result."""
        handler = getattr(self, f"_tool_{name}", None) if name in TOOL_NAMES else None
        if handler is None:
            return ToolResult(f"unknown tool {name!r}; available: {', '.join(TOOL_NAMES)}", True)
        if not isinstance(tool_input, dict):
            return ToolResult("tool input must be a JSON object", True)
        try:
            return ToolResult(handler(**tool_input))
        except TypeError as exc:  # missing / unexpected arguments
            return ToolResult(f"bad arguments for {name}: {exc}", True)
        except ToolError as exc:
            return ToolResult(str(exc), True)
        except OSError as exc:
            return ToolResult(f"{name} failed: {exc.strerror or exc}", True)
        except ValueError as exc:  # e.g. a file that is not UTF-8
            return ToolResult(f"{name} failed: {exc}", True)

    # ----------------------------------------------------------------- paths
    def resolve(self, path: Any, *, must_exist: bool = True) -> Path:
        """Resolve a model-given path inside the copy, or raise :class:`ToolError`."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string")
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self.root / raw
        resolved = candidate.resolve()  # follows symlinks, also of missing tails' parents
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"path {path!r} is outside the project; paths are relative to its root")
        if must_exist and not resolved.exists():
            raise ToolError(f"{path}: no such file or directory")
        return resolved

    def relative(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel or "."

    # ----------------------------------------------------------------- tools
    def _tool_read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path} is a directory; use list_dir")
        first = _positive_int(offset, "offset", 1)
        count = _positive_int(limit, "limit", DEFAULT_READ_LIMIT)
        data = target.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path} is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        if not lines:
            return "(empty file)"
        if first > len(lines):
            raise ToolError(f"offset {first} is past the end of {path} ({len(lines)} lines)")
        chosen = lines[first - 1: first - 1 + count]
        out = [f"{n:>6}\t{_clip(line, MAX_LINE_CHARS)}" for n, line in enumerate(chosen, start=first)]
        shown_last = first + len(chosen) - 1
        if shown_last < len(lines):
            out.append(f"… ({len(lines)} lines in total; use offset={shown_last + 1} to read on)")
        return cap_text("\n".join(out))

    def _tool_list_dir(self, path: str = ".") -> str:
        target = self.resolve(path)
        if not target.is_dir():
            raise ToolError(f"{path} is not a directory")
        entries = []
        for child in sorted(target.iterdir(), key=lambda p: p.name):
            if child.name in SKIPPED_DIRS:
                continue
            entries.append(child.name + ("/" if child.is_dir() else ""))
        if len(entries) > MAX_GLOB_RESULTS:  # the model pays for every line it reads
            entries = entries[:MAX_GLOB_RESULTS] + [f"… ({len(entries)} entries; showing the first "
                                                    f"{MAX_GLOB_RESULTS})"]
        return cap_text("\n".join(entries)) if entries else "(empty directory)"

    def _tool_glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolError("pattern must be a non-empty string")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError("glob patterns are relative to the project root and cannot contain '..'")
        # "**/**" is "**", but pathlib walks the tree once per "**" in a row: a model's
        # "**/**/**/**/x" over a deep tree ran for many minutes in this process, past any wall cap
        parts: list[str] = []
        for part in Path(pattern).parts:
            if not (part == "**" and parts and parts[-1] == "**"):
                parts.append(part)
        if parts.count("**") > MAX_GLOB_RECURSIVE:
            raise ToolError(f"at most {MAX_GLOB_RECURSIVE} '**' in a glob pattern")
        try:
            found = sorted(self._inside(self.root.glob("/".join(parts))))
        except (ValueError, NotImplementedError) as exc:
            raise ToolError(f"bad glob pattern: {exc}") from None
        if not found:
            return "(no matches)"
        shown = [self.relative(p) + ("/" if p.is_dir() else "") for p in found[:MAX_GLOB_RESULTS]]
        if len(found) > MAX_GLOB_RESULTS:
            shown.append(f"… ({len(found)} matches; showing the first {MAX_GLOB_RESULTS})")
        return "\n".join(shown)

    def _tool_grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern must be a non-empty string")
        try:
            re.compile(pattern)  # a bad pattern is the model's error; the search runs in a child process
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        base = self.resolve(path or ".")
        files = [base] if base.is_file() else self._walk_files(base)
        chosen: list[tuple[str, str]] = []
        for file in files:
            rel = self.relative(file)
            if glob and not (fnmatch.fnmatch(file.name, glob) or fnmatch.fnmatch(rel, glob)):
                continue
            try:
                if file.stat().st_size > MAX_GREP_FILE_BYTES:
                    continue
            except OSError:
                continue
            chosen.append((rel, str(file)))
        # A pattern can backtrack for ever ("(a+)+$"): in a child process the search has a time
        # limit and a kill, which no regex call inside warden's own process has.
        timeout = min(self._command_timeout(), GREP_TIMEOUT_S)
        payload = json.dumps({"pattern": pattern, "files": chosen, "max": MAX_GREP_MATCHES,
                              "width": MAX_GREP_LINE_CHARS}).encode()
        try:
            done = subprocess.run([sys.executable, "-I", "-S", "-c", _GREP_WORKER], input=payload, capture_output=True,
                                  timeout=timeout, env={"PATH": os.environ.get("PATH", "")})
        except subprocess.TimeoutExpired:
            raise ToolError(f"grep gave up after {timeout:.0f}s: the pattern backtracks too much; simplify it") \
                from None
        try:
            result = json.loads(done.stdout)
            matches, total = [str(m) for m in result["matches"]], int(result["total"])
        except (ValueError, KeyError, TypeError):
            raise ToolError("grep failed") from None
        if not matches:
            return "(no matches)"
        if total > len(matches):
            matches.append(f"… ({total} matches; showing the first {len(matches)})")
        return cap_text("\n".join(matches))

    def _tool_edit_file(self, path: str, old_string: str, new_string: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path} is not a file")
        if not isinstance(old_string, str) or not isinstance(new_string, str):
            raise ToolError("old_string and new_string must be strings")
        if not old_string:
            raise ToolError("old_string is empty; use write_file to create a file")
        if old_string == new_string:
            raise ToolError("old_string and new_string are identical")
        text = target.read_text(encoding="utf-8")
        count = text.count(old_string)
        if count == 0:
            raise ToolError(f"old_string not found in {path}")
        if count > 1:
            raise ToolError(f"old_string occurs {count} times in {path}; include more context")
        edited = text.replace(old_string, new_string, 1)
        if len(edited.encode("utf-8")) > max(MAX_WRITE_BYTES, len(text.encode("utf-8"))):  # write_file's cap;
            raise ToolError(f"the edited file would be larger than {MAX_WRITE_BYTES} bytes")  # a big file may shrink
        target.write_text(edited, encoding="utf-8")
        return f"edited {self.relative(target)}"

    def _tool_write_file(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        if len(content.encode("utf-8")) > MAX_WRITE_BYTES:
            raise ToolError(f"content is larger than {MAX_WRITE_BYTES} bytes")
        target = self.resolve(path, must_exist=False)
        if target.is_dir():
            raise ToolError(f"{path} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        existed = target.exists()
        target.write_text(content, encoding="utf-8")
        verb = "overwrote" if existed else "created"
        return f"{verb} {self.relative(target)} ({len(content.splitlines())} lines)"

    def _tool_run_command(self, command: str) -> str:
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        command = command.strip()
        timeout = self._command_timeout()
        env = anchor_pytest(self.env, self.root)
        if self.check_command and command == self.check_command.strip():
            result = run_process(command, self.root, timeout_s=timeout, env=env, shell=True)
        else:
            argv = self.allowed_argv(command)
            result = run_process(argv, self.root, timeout_s=timeout, env=env)
        if result.timed_out:
            raise ToolError(f"command timed out after {timeout:.0f}s\n{result.output}")
        return f"exit code {result.exit_code}\n{result.output}".rstrip()

    # ----------------------------------------------------------------- helpers
    def allowed_argv(self, command: str) -> list[str]:
        """Parse ``command`` and accept it only if it is on the allowlist."""
        argv = _split(command)
        if not argv:
            raise ToolError("empty command")
        # One simple command of the task's check, as written there (run without a shell).
        if argv in [_split(part) for part in split_check_commands(self.check_command)]:
            return self._python_argv(argv)
        if _SHELL_OPERATORS.search(command):
            raise ToolError("shell operators (| ; & < > ` $()) are not allowed; run one command")
        program = argv[0]
        if program in _PYTHONS and argv[1:3] == ["-m", "pytest"]:
            self._vet_pytest_args(argv[3:])
            return self._python_argv(argv)
        if program == "pytest":
            self._vet_pytest_args(argv[1:])
            return [sys.executable, "-m", "pytest", *argv[1:]]
        if program in _READ_ONLY_HELPERS:
            options = [a for a in argv[1:] if a.startswith("-")]
            # Short flag clusters only: long options and grep -f can name files to read; grep -e
            # would make the first operand a file (unchecked); grep -R (and BSD grep -S) and
            # ls -L/-H follow symlinks out of the copy.
            if any(not _SHORT_FLAGS.match(o) or set(o) & _REFUSED_SHORT_FLAGS.get(program, set()) for o in options):
                raise ToolError(f"{program}: only short flags are allowed (e.g. -n; for grep not -e, -f, -R or -S; "
                                f"for ls not -L or -H), not {' '.join(options)}")
            ambiguous = sorted({c for o in options for c in o[1:]} & _AMBIGUOUS_SHORT_FLAGS.get(program, set()))
            if ambiguous:
                raise ToolError(f"{program}: -{', -'.join(ambiguous)} not allowed: GNU and BSD {program} disagree "
                                "on whether it takes a value, so its operands cannot be told apart")
            operands = _helper_operands(program, argv[1:])
            if program == "grep":
                operands = operands[1:]  # the pattern: -e and -f, which would make it an option, are refused
            for operand in operands:  # every file or directory the program will open
                self.resolve(operand)
            return argv
        raise ToolError("command not allowed; allowed: python -m pytest …, pytest …, the task's "
                        "check command, ls, cat, head, tail, wc, grep")

    def _vet_pytest_args(self, args: list[str]) -> None:
        """pytest options that only select and report (a path may not leave the copy): options
        such as --basetemp, --junitxml, -o, -c, --rootdir or -p plugin write or load elsewhere."""
        for arg in args:  # pytest reads more arguments from @FILE, an option's value included
            if arg.startswith("@"):
                raise ToolError(f"pytest argument {arg!r} is not allowed: @FILE would read options from a file")
        i = 0
        while i < len(args):
            arg = args[i]
            name, _, value = arg.partition("=")
            if arg in _PYTEST_FLAGS or _PYTEST_SHORT_CLUSTER.match(arg):
                i += 1
            elif name in _PYTEST_VALUE_OPTIONS:
                i += 1 if value or "=" in arg else 2
            elif arg == "-p" and args[i + 1:i + 2] == ["no:cacheprovider"]:
                i += 2
            elif arg.startswith("-"):
                raise ToolError(f"pytest option {arg!r} is not allowed (allowed: -q -v -x -s -l -r…, -k, -m, "
                                "--maxfail, --tb, --durations, -p no:cacheprovider, --lf, --ff, --co)")
            else:
                self.resolve(arg.split("::", 1)[0])  # a test path or node id inside the copy
                i += 1

    @staticmethod
    def _python_argv(argv: list[str]) -> list[str]:
        # "python" means warden's interpreter (it has pytest), whatever PATH says.
        if argv[0] in _PYTHONS:
            return [sys.executable, *argv[1:]]
        return argv

    def _command_timeout(self) -> float:
        timeout = self.command_timeout_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - self.clock())
        if timeout <= 0:
            raise ToolError("no wall time left for a command")
        return timeout

    def _inside(self, paths: Any) -> list[Path]:
        kept = []
        for p in paths:
            if any(part in SKIPPED_DIRS for part in p.relative_to(self.root).parts):
                continue
            resolved = p.resolve()
            if resolved == self.root or self.root in resolved.parents:
                kept.append(p)
        return kept

    def _walk_files(self, base: Path) -> list[Path]:
        files: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(base):  # does not follow dir symlinks
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            for name in sorted(filenames):
                files.append(Path(dirpath) / name)
        return self._inside(files)


def _helper_operands(program: str, args: list[str]) -> list[str]:
    """The operands of a read-only helper's ``args`` (grep's pattern first), by position: what is
    neither a short option cluster nor the value of one that takes a value. A value-taking option
    after an operand is refused: BSD getopt stops at the first operand, so there ``head f -n X``
    opens ``-n`` and ``X`` as files."""
    takes_value = _VALUE_SHORT_FLAGS.get(program, set())
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-"):
            operands.append(arg)
            continue
        if program in ("head", "tail") and arg[1:2].isdigit():
            continue  # the obsolete "-5c": a count and its unit letters, no value follows
        for at, letter in enumerate(arg[1:], start=1):
            if letter in takes_value:
                if operands:
                    first = "pattern" if program == "grep" else "files"
                    raise ToolError(f"{program}: put -{letter} before the {first} (an option with a value "
                                    "after an operand is not allowed)")
                if at == len(arg) - 1:
                    i += 1  # "-n 5": the value is the next argument, whatever it looks like
                break  # "-n5": the rest of the cluster is the value
    return operands


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot parse command: {exc}") from None


def _positive_int(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{name} must be a positive integer")
    return value


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + "…"
