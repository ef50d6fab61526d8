"""Claude Code hook entry points: ``warden hook stop|subagent-stop|session-start``.

A hook reads Claude Code's hook JSON on stdin (``session_id``, ``transcript_path``, ``cwd``,
``agent_id``, ``agent_type``, ``agent_transcript_path``, …) and gets the transcript it names
ingested, incrementally. It must never disturb the session that fired it, so it **always exits
0 within a hard 2-second budget** (a watchdog ends it otherwise), whatever it is given —
garbage, a missing or non-regular file, a FIFO, /dev/zero, a locked database, a full disk — and
logs what it dropped to ``$WARDEN_HOME/hooks.log`` (rotating).

Two parts, so that the budget never depends on the database or on the machine's load:

1. The hook itself (stdlib only, a few ms of work): reads stdin with a size cap and a time
   limit, checks the payload and that each transcript is a regular file (``os.stat``, never
   ``open``: a FIFO would block), queues the job as a small file in ``$WARDEN_HOME/hook-queue``,
   starts a detached ingest worker and exits 0.
2. The worker (``python -m warden.ingest.hooks --worker``), detached from the session's stdio,
   claims every queued job (an atomic rename, so each is done once) and ingests the files
   through the collector with a generous busy timeout: concurrent hooks and a briefly locked
   database lose nothing. A job a worker could not finish stays queued for the next one, and
   offsets only advance on a committed ingest, so ``warden collect`` also catches up.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import select
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from warden.names import clean_label, valid_id

EVENTS = ("stop", "subagent-stop", "session-start")
BUDGET_S = 1.5  # from process start (fork): headroom under the 2-second promise (8 hooks at once on 2 busy cores took up to 0.35 s more to exit)
# Time the hook gets after start-up when start-up itself ate the budget (a starved machine): just
# enough to log the drop. Exiting in time is the promise; the next collect catches up the ingest.
MIN_WORK_S = 0.05
STDIN_CAP = 1 << 20  # a hook payload is a few hundred bytes; more is garbage
STDIN_WAIT_S = 0.5
MAX_PATH_CHARS = 4096
LOG_NAME = "hooks.log"
LOG_MAX_BYTES = 1 << 20
LOG_BACKUPS = 3
MAX_HOOK_LINE_BYTES = 64 << 20


def _process_start_monotonic() -> float:
    """When this process started, on the monotonic clock (Linux /proc); now if unknown."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 overall: starttime, in clock ticks since boot
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.monotonic() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return time.monotonic()


class Deadline:
    def __init__(self, budget_s: float = BUDGET_S, min_work_s: float = MIN_WORK_S) -> None:
        now = time.monotonic()
        self.at = max(_process_start_monotonic() + budget_s, now + min_work_s)

    def left(self) -> float:
        return self.at - time.monotonic()


class _PrivateLog(logging.handlers.RotatingFileHandler):
    """The hooks' log: owner-only, a regular file, never written through a symlink (a link
    planted there would have hooks append to whatever it points at) nor into a FIFO or device (a
    write there blocks the hook past its budget); the line is dropped instead."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename,
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{self.baseFilename} is not a regular file")
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


def _logger(home: Path | None) -> logging.Logger:
    log = logging.getLogger("warden.hooks")
    if log.handlers:
        return log
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        if home is None:
            raise OSError("no home")
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        handler: logging.Handler = _PrivateLog(
            home / LOG_NAME, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8", delay=True)
    except OSError:
        handler = logging.NullHandler()  # an unwritable home (full disk) must not break the hook
    handler.setFormatter(logging.Formatter("%(asctime)s pid=%(process)d %(levelname)s %(message)s"))
    log.addHandler(handler)
    logging.raiseExceptions = False  # a failing log write stays silent
    return log


def _home() -> Path | None:
    from warden.config import home_dir

    try:
        return home_dir()
    except (RuntimeError, ValueError):  # no home directory to expand ~ in
        return None


def read_stdin(stream: BinaryIO | None, wait_s: float = STDIN_WAIT_S, cap: int = STDIN_CAP) -> bytes | None:
    """The payload, or None if it is missing, too large or does not arrive in time. Never blocks
    longer than ``wait_s`` (stdin may be a FIFO nobody writes, a terminal, or /dev/zero)."""
    if stream is None:
        return None
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
    if os.isatty(fd):
        return None
    chunks: list[bytes] = []
    size = 0
    end = time.monotonic() + wait_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], left)
        except (OSError, ValueError):
            return None
        if not ready:
            return None
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        except OSError:
            return None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return None
    return b"".join(chunks)


def _transcript_paths(event: str, payload: dict[str, Any]) -> list[str]:
    """The transcript(s) a payload names, most specific first."""
    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) and value and len(value) <= MAX_PATH_CHARS and "\x00" not in value else None

    paths: list[str] = []
    if event == "subagent-stop":
        agent_path = text("agent_transcript_path")
        if agent_path:
            paths.append(agent_path)
        else:
            # the ids become path parts: only plain ids (no separators, no "..")
            main_path, session_id, agent_id = (text("transcript_path"), valid_id(payload.get("session_id")),
                                               valid_id(payload.get("agent_id")))
            if main_path and session_id and agent_id:
                base = os.path.dirname(main_path)
                paths.append(os.path.join(base, session_id, "subagents", f"agent-{agent_id}.jsonl"))
                paths.append(os.path.join(base, f"agent-{agent_id}.jsonl"))
    main = text("transcript_path")
    if main and event != "subagent-stop":
        paths.append(main)
        # 2.1.x keeps subagent transcripts under <session>/subagents/: catch up on them too.
        sub_dir = os.path.join(main[:-len(".jsonl")] if main.endswith(".jsonl") else main, "subagents")
        try:
            names = sorted(n for n in os.listdir(sub_dir) if n.endswith(".jsonl"))[:200]
        except OSError:
            names = []
        paths.extend(os.path.join(sub_dir, n) for n in names)
    return paths


def _regular_file(path: str) -> str | None:
    """None if ``path`` is a regular file, else why not (never opens it: FIFOs block)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.strerror or "cannot stat"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return None


def run_hook(event: str, stdin: BinaryIO | None = None, *, spawn: bool = True) -> int:
    """Run one hook event; always returns 0 (the watchdog exits 0 if time runs out)."""
    deadline = Deadline()
    log = _logger(_home())
    queued: list[Path] = []
    if event not in EVENTS:  # one line for whoever runs it by hand; prepare() logs it
        try:
            sys.stderr.write(f"warden: unknown hook {event[:50]!r} ignored (hooks: {', '.join(EVENTS)})\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 — a closed stderr must not fail the hook
            pass

    def expire() -> None:
        try:
            if queued:  # the job is safe in the queue: the next worker (or a collect) takes it
                log.warning("%s: budget exhausted after queueing its job %s", event, queued[0].name)
            else:
                log.warning("%s: budget exhausted, dropped (the next collect catches up)", event)
            for handler in log.handlers:
                handler.flush()
        finally:
            os._exit(0)

    watchdog = threading.Timer(max(0.05, deadline.left()), expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        stream = stdin if stdin is not None else (sys.stdin.buffer if sys.stdin is not None else None)
        seen: dict[str, Any] = {}
        try:
            job = prepare(event, stream, deadline, log, seen=seen)
            if job is not None:
                path = enqueue(job, _home())
                if path is not None:
                    queued.append(path)
                if spawn:
                    _spawn_worker(log, event)
        except Exception as exc:  # noqa: BLE001 — a queue that cannot be written still leaves the pointer
            _log_drop(log, event, exc)
        if event == "session-start" and deadline.left() > 0.2:  # continuity: a pointer, never content
            from warden.continuity.pointer import session_start_hook_line

            line = session_start_hook_line(seen.get("cwd"), seen.get("session_id"))
            if line:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 — a hook never fails its session
        _log_drop(log, event, exc)
    finally:
        watchdog.cancel()
    return 0


def _what_failed(exc: BaseException) -> str:
    """``Type: first line of the message`` (300 characters at most), for the log."""
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def _log_drop(log: logging.Logger, event: str, exc: BaseException) -> None:
    try:
        log.warning("%s: dropped: %s", event, _what_failed(exc))
    except Exception:  # noqa: BLE001
        pass


def prepare(event: str, stdin: BinaryIO | None, deadline: Deadline, log: logging.Logger,
            seen: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Validate a hook payload; the ingest job for the worker, or None (logged) if unusable.
    ``seen`` receives the payload's ``cwd`` and ``session_id`` (for the session-start pointer)."""
    if event not in EVENTS:
        log.warning("unknown hook event %r, ignored", event[:50])
        return None
    raw = read_stdin(stdin, wait_s=min(STDIN_WAIT_S, max(0.05, deadline.left() - 0.3)))
    if raw is None:
        log.warning("%s: no usable payload on stdin (missing, over %d bytes or too slow), ignored", event, STDIN_CAP)
        return None
    import json

    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        log.warning("%s: payload is not JSON (%d bytes), ignored", event, len(raw))
        return None
    if not isinstance(payload, dict):
        log.warning("%s: payload is not a JSON object, ignored", event)
        return None
    if seen is not None:
        seen.update({k: payload.get(k) for k in ("cwd", "session_id")})
    paths = _transcript_paths(event, payload)
    usable: list[str] = []
    for n, path in enumerate(paths):
        why = _regular_file(path)
        if why is None:
            usable.append(path)
        elif n == 0 and event != "subagent-stop":
            log.warning("%s: transcript %r skipped: %s", event, path[:300], why)
    if not usable:
        # a session that starts may have no transcript yet: nothing to ingest is no news there
        if event == "subagent-stop" or (not paths and event != "session-start"):
            log.warning("%s: no readable transcript in payload, ignored", event)
        return None
    agent_type = payload.get("agent_type") if event == "subagent-stop" else None
    agent_type = clean_label(agent_type)
    return {"event": event, "paths": usable, "agent_type": agent_type}


QUEUE_DIR = "hook-queue"
STALE_CLAIM_S = 300.0  # a claimed job whose worker died is taken again after this long


def _queue_dir(home: Path | None) -> Path | None:
    return home / QUEUE_DIR if home is not None else None


def enqueue(job: dict[str, Any], home: Path | None) -> Path | None:
    """Write the job atomically into the queue; None (logged by the caller) if that fails."""
    import json

    queue = _queue_dir(home)
    if queue is None:
        return None
    queue.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}"
    tmp = queue / f".{name}.tmp"
    try:
        tmp.write_bytes(json.dumps(job).encode())
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not leave an empty job behind
        raise
    final = queue / f"{name}.json"
    os.replace(tmp, final)
    return final


def _release(claim: Path) -> None:
    """A claimed job back in the queue, for the next worker."""
    try:
        os.replace(claim, claim.with_name(claim.name.split(".")[0] + ".json"))
    except OSError:
        pass  # taken over or gone: the collect's catch-up reads the transcript anyway


def claim_jobs(home: Path | None, limit: int = 1000) -> list[tuple[Path, dict[str, Any]]]:
    """Claim queued jobs (rename ``*.json`` → ``*.claimed``); stale claims are taken over."""
    import json

    queue = _queue_dir(home)
    if queue is None:
        return []
    try:
        names = sorted(os.listdir(queue))
    except OSError:
        return []
    claimed: list[tuple[Path, dict[str, Any]]] = []
    now = time.time()
    jobs = []
    for name in names:  # jobs only: temp files sort first and must not fill the window
        if name.endswith((".json", ".claimed")):
            jobs.append(name)
        elif name.endswith(".tmp"):  # a hook killed mid-write: never renamed, never a job
            try:
                if now - (queue / name).stat().st_mtime > STALE_CLAIM_S:
                    (queue / name).unlink()
            except OSError:
                pass
    for name in jobs[:limit]:
        path = queue / name
        if name.endswith(".claimed"):
            try:
                if now - path.stat().st_mtime < STALE_CLAIM_S:
                    continue
            except OSError:
                continue
        elif not name.endswith(".json"):
            continue
        mine = queue / f"{name.split('.')[0]}.{os.getpid()}.claimed"
        try:
            os.replace(path, mine) if name.endswith(".json") else os.rename(path, mine)
            os.utime(mine)
            job = json.loads(mine.read_bytes()[:STDIN_CAP])
        except (OSError, ValueError):
            continue  # another worker was faster, or the file is junk
        if isinstance(job, dict):
            claimed.append((mine, job))
        else:
            _unlink(mine)
    return claimed


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _spawn_worker(log: logging.Logger, event: str) -> None:
    """Start the ingest worker detached: own session, no inherited stdio (Claude Code waits for
    the hook's stdout/stderr to close)."""
    import subprocess

    try:
        subprocess.Popen([sys.executable, "-m", "warden.ingest.hooks", "--worker"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                         start_new_session=True)
    except OSError as exc:
        log.warning("%s: could not start the ingest worker (%s); the job stays queued", event, exc)


WORKER_BUSY_TIMEOUT_MS = 30_000  # concurrent hooks queue on SQLite's write lock instead of failing
WORKER_BUDGET_S = 120.0  # the worker's own watchdog: it never lingers


def run_worker() -> int:
    """The detached half of a hook: ingest every queued job. Always returns 0; logs drops."""
    home = _home()
    log = _logger(home)

    def expire() -> None:
        log.warning("ingest worker out of time; unfinished jobs stay queued")
        os._exit(0)

    watchdog = threading.Timer(WORKER_BUDGET_S, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        jobs = claim_jobs(home)
        if not jobs:
            return 0
        from warden.config import load_settings
        from warden.ingest.collector import Collector, CollectSummary
        from warden.store.db import open_store

        store = None
        try:
            settings = load_settings()
            for attempt in range(5):
                try:
                    store = open_store(settings, busy_timeout_ms=WORKER_BUSY_TIMEOUT_MS)
                    break
                except Exception as exc:  # noqa: BLE001 — a concurrent first migration can race: retry
                    if attempt == 4:
                        raise
                    log.info("ingest worker: store not ready (%s), retrying", type(exc).__name__)
                    time.sleep(0.2 * (attempt + 1))
        except Exception as exc:  # noqa: BLE001 — no store: the jobs go back to the queue now, not
            for claim, _ in jobs:  # after a stale-claim wait
                _release(claim)
            log.warning("ingest worker: cannot open the store (%s); %d job(s) stay queued",
                        _what_failed(exc), len(jobs))
            return 0
        assert store is not None
        try:
            collector = Collector(store, settings, max_line=MAX_HOOK_LINE_BYTES)
            for claim, job in jobs:
                event = str(job.get("event", "?"))[:40]
                summary = CollectSummary()
                agent_type = job.get("agent_type")
                try:
                    for n, path in enumerate(p for p in job.get("paths", []) if isinstance(p, str)):
                        collector.ingest_file(path, summary=summary, agent_type_hint=agent_type
                                              if n == 0 and isinstance(agent_type, str) else None)
                except Exception as exc:  # noqa: BLE001 — leave the job for the next worker
                    _log_drop(log, event, exc)
                    _release(claim)
                    continue
                for reason in summary.skipped:
                    log.warning("%s: %s", event, reason[:400])
                _unlink(claim)
        finally:
            store.engine.dispose()
    except BaseException as exc:  # noqa: BLE001
        _log_drop(log, "ingest worker", exc)
    finally:
        watchdog.cancel()
    return 0


# ---------------------------------------------------------------------------- settings.json

HOOK_EVENTS = {"Stop": "stop", "SubagentStop": "subagent-stop", "SessionStart": "session-start"}
HOOK_TIMEOUT_S = 5  # Claude Code's own limit on our hook; ours (2 s) is stricter
_MARK = " hook "  # a command of ours is "<warden executable> hook <event>"


def warden_command() -> str:
    """The warden executable of this installation (so hooks run the same version), quoted."""
    import shlex
    import shutil

    candidate = Path(sys.executable).parent / "warden"
    exe = str(candidate) if candidate.is_file() else (shutil.which("warden") or "warden")
    return shlex.quote(exe)


def _is_ours(entry: Any) -> bool:
    """A hook entry warden installed: exactly ``<path>/warden hook <event>`` (any installation's
    warden, so a stale path is replaced); ``other-warden hook stop`` is someone else's."""
    import shlex

    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    if not isinstance(command, str) or _MARK not in command:
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return (len(words) == 3 and os.path.basename(words[0]) == "warden" and words[1] == "hook"
            and words[2] in HOOK_EVENTS.values())


def _load_settings_json(path: Path) -> dict[str, Any]:
    import json

    from warden.errors import UsageError

    if not path.exists():
        return {}
    if not path.is_file():  # a FIFO would block the read for good
        raise UsageError(f"{path} is not a regular file; left untouched")
    from warden.strict_json import loads_strict

    try:
        data = loads_strict(path.read_text(encoding="utf-8"))  # Claude Code reads it back
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON (line {exc.lineno}); left untouched") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); left untouched") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; left untouched")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: \"hooks\" is not an object; left untouched")
    for claude_event in HOOK_EVENTS:  # a value Claude Code would not read is the user's to fix
        if hooks.get(claude_event) is not None and not isinstance(hooks[claude_event], list):
            raise UsageError(f'{path}: "hooks.{claude_event}" is not a list; left untouched')
    return data


def _write_settings_json(path: Path, data: dict[str, Any]) -> str | None:
    """Back up the current file, then replace it atomically (through a symlink, to its target)."""
    from warden.errors import UsageError

    try:
        return _replace_settings_json(path, data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}; left untouched") from None


def _replace_settings_json(path: Path, data: dict[str, Any]) -> str | None:
    import json
    import shutil

    from warden.files import stage

    target = Path(os.path.realpath(path))
    try:
        payload = (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape ("\ud800", valid JSON): kept as an escape
        payload = (json.dumps(data, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")
    target.parent.mkdir(parents=True, exist_ok=True)
    backup: str | None = None
    tmp: Path | None = None
    try:
        if target.exists():
            backup = _unique_backup(target)
            shutil.copy2(target, backup)
        # fsync'd before the rename: a crash never leaves the user's settings.json empty. The
        # mode the user gave it is kept; a new one is the owner's alone, as it always was.
        tmp = stage(target, payload, target.parent, new_mode=0o600)
        os.replace(tmp, target)
    except BaseException:
        # settings.json is untouched: a backup of it (empty, if the disk filled) only misleads
        for leftover in (tmp, backup):
            if leftover is not None:
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
        raise
    return backup


def _unique_backup(target: Path) -> str:
    """A backup name no earlier backup holds (two edits in one second must not overwrite the
    first backup, which may be the only copy of the user's original file)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for n in range(1000):
        name = target.with_name(f"{target.name}.warden-backup-{stamp}" + (f"-{n}" if n else ""))
        try:
            os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return str(name)
        except FileExistsError:
            continue
    raise OSError(f"no free backup name beside {target}")


def install_hooks(claude_home: Path, command: str | None = None) -> dict[str, Any]:
    """Merge warden's three hooks into ``<claude_home>/settings.json``; idempotent, other hooks kept."""
    path = claude_home / "settings.json"
    data = _load_settings_json(path)
    exe = command or warden_command()
    hooks = data.setdefault("hooks", {})
    changed = False
    for claude_event, event in HOOK_EVENTS.items():
        groups = hooks.get(claude_event) or []
        wanted = {"type": "command", "command": f"{exe} hook {event}", "timeout": HOOK_TIMEOUT_S}
        present = [h for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                   for h in g["hooks"] if _is_ours(h)]
        if present == [wanted]:
            continue
        # Drop stale entries of ours (another path, another timeout), keep everything else.
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                rest = [h for h in group["hooks"] if not _is_ours(h)]
                if rest:
                    kept.append({**group, "hooks": rest})
            else:
                kept.append(group)
        kept.append({"hooks": [wanted]})
        hooks[claude_event] = kept
        changed = True
    backup = _write_settings_json(path, data) if changed else None
    return {"action": "installed", "changed": changed, "state": "installed", "settings_path": str(path),
            "backup_path": backup, "command": exe}


def uninstall_hooks(claude_home: Path) -> dict[str, Any]:
    """Remove warden's hooks from ``<claude_home>/settings.json``; everything else is kept."""
    path = claude_home / "settings.json"
    data = _load_settings_json(path)
    hooks = data.get("hooks", {})
    changed = False
    for claude_event in HOOK_EVENTS:
        groups = hooks.get(claude_event)
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                rest = [h for h in group["hooks"] if not _is_ours(h)]
                if len(rest) != len(group["hooks"]):
                    changed = True
                if rest:
                    kept.append({**group, "hooks": rest})
            else:
                kept.append(group)
        if kept:
            hooks[claude_event] = kept
        else:
            hooks.pop(claude_event, None)
    if changed and not hooks:
        data.pop("hooks", None)
    backup = _write_settings_json(path, data) if changed else None
    return {"action": "uninstalled", "changed": changed, "state": "uninstalled", "settings_path": str(path),
            "backup_path": backup}


def main(argv: list[str] | None = None) -> int:
    """``python -m warden.ingest.hooks <event>`` (a hook) or ``--worker`` (its detached half)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        return run_worker()
    return run_hook(args[0] if args else "")


if __name__ == "__main__":
    sys.exit(main())
