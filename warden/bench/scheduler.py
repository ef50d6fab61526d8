"""The bench scheduler: plan runs as a job table, execute them concurrently, record each as it ends.

A *pass* (``BenchPass``) is a planned list of jobs (``BenchJob``): one golden task, one
configuration (the exact rule-id set under test), one seed. The plan pairs and interleaves
configurations (DESIGN.md §4): every (task, replicate) is a *block* holding one job per
configuration, all with the same seed (common random numbers: both arms meet the same noise);
the jobs inside a block and the blocks themselves are put in a seeded random order, so drift,
cache warmth and machine load hit every arm alike. Workers pick jobs in that order, so with
concurrency ≥ 2 the arms of a block usually run side by side.

Each job runs on its own throwaway copy of the frozen fixture (``bench.fixture``), removed when
the job ends — also on Ctrl-C and SIGTERM (the pass's work directory is removed on the way out,
and directories left behind by a SIGKILLed scheduler are swept by the next one). Every result
is stored as a ``BenchRun`` the moment it arrives, and its job is marked done in the same
transaction, so a killed scheduler re-run with the same plan (found by its ``plan_key``) only
executes the jobs still pending.

One process runs a pass at a time: a second one asked for it while its recorded runner lives
refuses with :class:`BenchBusy` (PostgreSQL: the runner holds an advisory lock on the pass that
every host sharing the database sees; SQLite: the runner's host, PID namespace, pid and start
time say whether it lives), and a dead runner's pass is taken over. The takeover is a
compare-and-set on the pass row, and every job is claimed with one on its status, so even two
processes that both got past the check never run, or pay for, the same job twice.

``infra_error`` runs (API errors, timeouts, quota) are recorded but never count as a result:
their jobs stay to be retried on the next attempt, and a run of
``max_consecutive_infra`` of them in a row aborts the pass with :class:`BenchAborted`.

A token budget (cost-weighted tokens, the gate metric) stops dispatching before the next block
would exceed it, estimating a block's cost from earlier runs of its tasks.

The core takes its collaborators as arguments — the suite, the fixture copy function, a backend
factory, a progress sink — so tests drive it with a fake backend and no terminal.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import queue
import random
import shutil
import socket
import signal
import stat
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from warden.bench.agents.tools import cancelled_by
from warden.bench.results import AgentBackend, Outcome, RunCaps, RunResult
from warden.bench.tasks import AgentSuite, GoldenTask
from warden.errors import UsageError, WardenError
from warden.ingest.pricing import DEFAULT_TABLE, PriceTable
from warden.measured import measured_on
from warden.names import pid_alive, pid_namespace, process_tag, tagged_process_gone
from warden.sanitize import counted, redact_credentials, strip_controls
from warden.select.memory import MemoryRule, render_memory
from warden.select.runner import config_key as rule_set_key
from warden.store.db import Store
from warden.store.locks import LockBusy
from warden.store.models import (Baseline, BenchJob, BenchPass, BenchRun, Rule, RulesetVersion,
                                 SessionRun, utcnow)

DEFAULT_MAX_CONSECUTIVE_INFRA = 3
SPEND_WARN_SHARE = 0.10  # bench spend above this share of real work gets a warning
SPEND_WINDOW = timedelta(days=7)
# States whose rules sit in the agent's memory (the "active set"); matches select/compile.py.
IN_MEMORY_STATES = ("active", "probation", "protected")
if TYPE_CHECKING:
    from warden.config import Settings

# Per user: one shared directory would be the first user's (0755), and every other user's bench
# would fail on it.
WORK_ROOT = Path(tempfile.gettempdir()) / f"warden-bench-runs-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
_STOP_GRACE_S = 10.0  # how long Ctrl-C / an abort waits for runs in flight
_RESULT_POLL_S = 0.2  # how often the main thread wakes while waiting (keeps Ctrl-C responsive)


class BenchAborted(WardenError):
    """The pass stopped because the infrastructure failed (not the agent). ``outcome`` is what the
    attempt did up to the abort, when it got as far as running jobs (for ``bench``'s report)."""

    outcome: "PassOutcome | None" = None


class BenchBusy(LockBusy):
    """Another live warden process is running the pass (exit status 1, as a busy select or
    nightly): two runners of one pass would run its jobs twice and each spend its budget."""


class BenchInterrupted(WardenError):
    """SIGTERM arrived; raised in the main thread so the normal clean-up runs."""

    exit_code = 143


# ---------------------------------------------------------------- configurations and plans


def config_key(rule_ids: Iterable[int]) -> str:
    """The configuration's identity: sorted, de-duplicated rule ids joined by ','; '' = no rules
    (the decision core's :func:`warden.select.runner.config_key`, which names the stored runs)."""
    return rule_set_key(frozenset(int(i) for i in rule_ids))


def parse_config_key(key: str) -> tuple[int, ...]:
    return tuple(int(part) for part in key.split(",") if part.strip()) if key else ()


def job_seed(base_seed: int, task_id: str, rep: int) -> int:
    """The seed of replicate ``rep`` of a task: shared by every configuration of the block."""
    digest = hashlib.sha256(f"{base_seed}:{task_id}:{rep}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class JobSpec:
    task_id: str
    rule_ids: tuple[int, ...]
    rep: int  # replicate index: together with the task, it picks the seed

    @property
    def config_key(self) -> str:
        return config_key(self.rule_ids)


def interleave(configs: Sequence[Iterable[int]], task_ids: Sequence[str],
               runs: int | Mapping[str, int], seed: int,
               rep_start: int | Mapping[str, int] = 0) -> list[JobSpec]:
    """Pair and interleave: one block per (task, replicate) holding every configuration, the
    jobs within a block and the blocks in seeded random order."""
    normalized = []
    for cfg in configs:
        ids = tuple(sorted({int(i) for i in cfg}))
        if ids not in normalized:
            normalized.append(ids)
    jobs: list[JobSpec] = []
    for task in task_ids:
        n = runs.get(task, 0) if isinstance(runs, Mapping) else runs
        start = rep_start.get(task, 0) if isinstance(rep_start, Mapping) else rep_start
        jobs.extend(JobSpec(task, ids, rep) for rep in range(start, start + n) for ids in normalized)
    return shuffle_blocks(jobs, seed)


def shuffle_blocks(jobs: Iterable[JobSpec], seed: int) -> list[JobSpec]:
    """Group jobs into blocks by (task, replicate) and put both the jobs within each block and
    the blocks in seeded random order (the jobs of a block stay adjacent)."""
    rng = random.Random(seed)
    blocks: dict[tuple[str, int], list[JobSpec]] = {}
    for job in jobs:
        blocks.setdefault((job.task_id, job.rep), []).append(job)
    ordered = [blocks[key] for key in sorted(blocks)]
    for block in ordered:
        block.sort(key=lambda j: j.config_key)
        rng.shuffle(block)
    rng.shuffle(ordered)
    return [job for block in ordered for job in block]


@dataclass(frozen=True)
class BenchRequest:
    """What to run: the jobs, under which backend/model, with which base seed."""

    agent: str
    jobs: tuple[JobSpec, ...]
    seed: int
    backend: str
    model: str
    purpose: str = "bench"  # bench | select
    budget_tokens: int | None = None
    # select: the rule whose decision the runs are for (kept in the pass's note, not its plan key)
    rule_id: int | None = None

    def family_key(self, suite_hash: str, fixture_hash: str, caps: RunCaps | None = None) -> str:
        """Everything that identifies the plan except its seed (to resume an unseeded bench).
        The job *set* counts, not its order: the order follows from the seed. Run caps other
        than the defaults count too: runs under other caps are another measurement."""
        payload: dict[str, Any] = {"agent": self.agent, "purpose": self.purpose, "backend": self.backend,
                                   "model": self.model, "suite": suite_hash, "fixture": fixture_hash,
                                   "jobs": sorted([j.task_id, j.config_key, j.rep] for j in self.jobs)}
        if caps is not None and caps != RunCaps():  # the default caps keep the keys passes already have
            payload["caps"] = asdict(caps)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]

    def plan_key(self, suite_hash: str, fixture_hash: str, caps: RunCaps | None = None) -> str:
        return f"{self.family_key(suite_hash, fixture_hash, caps)}:{self.seed}"


# ---------------------------------------------------------------- what a run carries


@dataclass(frozen=True)
class RunMemory:
    """The memory a configuration runs with: the rendered text and where it came from."""

    rule_ids: tuple[int, ...]
    text: str
    sha256: str  # the rules' rendering with the version label left out: what reuse matches
    ruleset_version: int | None
    # the identity runs stored before the label was left out carry (sha256 of ``text``): still
    # reused, so an upgrade does not buy the freshness window's runs again
    labelled_sha256: str = ""


def active_rule_ids(session: Session, agent: str) -> tuple[int, ...]:
    return tuple(session.scalars(select(Rule.id).where(Rule.agent == agent, Rule.state.in_(IN_MEMORY_STATES))
                                 .order_by(Rule.id)).all())


def memory_for(session: Session, agent: str, rule_ids: Iterable[int]) -> RunMemory:
    """Render the memory of exactly ``rule_ids`` the way ``compile`` renders MEMORY.md.

    The ruleset version is recorded only when the set equals the agent's current active set
    (and that set was compiled); any other set is a candidate memory, never compiled.
    """
    ids = tuple(sorted({int(i) for i in rule_ids}))
    rows = session.scalars(select(Rule).where(Rule.id.in_(ids))).all() if ids else []
    found = {r.id: r for r in rows}
    missing = [i for i in ids if i not in found]
    if missing:
        raise UsageError(f"unknown rule id(s): {', '.join(map(str, missing))}")
    foreign = [i for i in ids if found[i].agent != agent]
    if foreign:
        raise UsageError(f"rule(s) {', '.join(map(str, foreign))} belong to another agent, not {agent!r}")
    rules = [MemoryRule.of(found[i]) for i in ids]
    version: int | None = None
    latest = session.scalars(select(RulesetVersion).where(RulesetVersion.agent == agent)
                             .order_by(RulesetVersion.version.desc()).limit(1)).first()
    if latest is not None and ids == active_rule_ids(session, agent) \
            and sorted(int(i) for i in latest.rule_ids) == list(ids):
        version = latest.version
    # Any other set is labelled as the version it would compile to, so that the header line
    # costs every arm the same bytes; before the first compile that is version 1, so the runs of
    # a night with nothing compiled yet stay reusable once its compile makes the empty set v1.
    label = version if version is not None else (latest.version + 1 if latest is not None else 1)
    text = render_memory(agent, rules, label)
    # The runs' identity leaves the label out: a compile moves the label a candidate set would
    # get, not what its rules say, and its paid runs must stay reusable (stored as memory_sha256).
    identity = render_memory(agent, rules, None)
    return RunMemory(ids, text, hashlib.sha256(identity.encode("utf-8")).hexdigest(), version,
                     hashlib.sha256(text.encode("utf-8")).hexdigest())


def system_prompt(suite: AgentSuite, memory: RunMemory) -> str:
    """The agent's agent.md body followed by the memory under test."""
    return suite.system_prompt.rstrip("\n") + "\n\n" + memory.text


# ---------------------------------------------------------------- progress


class ProgressSink(Protocol):
    """How the scheduler reports while it works (the CLI renders it; tests record it)."""

    def start(self, pass_id: int, total: int, done: int) -> None: ...

    def job_started(self, job: "JobView") -> None: ...

    def job_finished(self, job: "JobView", run: "RunRecord") -> None: ...

    def message(self, text: str) -> None: ...


class NullProgress:
    def start(self, pass_id: int, total: int, done: int) -> None:
        pass

    def job_started(self, job: "JobView") -> None:
        pass

    def job_finished(self, job: "JobView", run: "RunRecord") -> None:
        pass

    def message(self, text: str) -> None:
        pass


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class JobView:
    job_id: int
    order_index: int
    task_id: str
    config_key: str
    seed: int


@dataclass(frozen=True)
class RunRecord:
    """A stored run, detached from the session (what summaries and the suite runner read)."""

    run_id: int
    task_id: str
    config_key: str
    seed: int
    outcome: str
    completed: bool
    weighted_tokens: float
    raw_tokens: int
    cost_usd: float
    turns: int
    duration_s: float
    ruleset_version: int | None = None
    error: str = ""
    copy_s: float = 0.0  # fixture copy time (only known for runs of this attempt)

    @classmethod
    def from_row(cls, row: BenchRun, copy_s: float = 0.0) -> "RunRecord":
        return cls(row.id, row.task_id, row.config_key, int(row.seed), row.outcome, row.completed,
                   row.weighted_tokens, row.usage.total, row.cost_usd, row.turns, row.duration_s,
                   row.ruleset_version, row.error, copy_s)


@dataclass
class PassOutcome:
    pass_id: int
    plan_key: str
    status: str  # done | partial (budget) | aborted
    total_jobs: int
    runs: list[RunRecord]  # the result of every finished job of the pass, in plan order
    executed: int  # jobs run by this attempt
    resumed: bool
    done_before: int  # jobs an earlier attempt finished (a budget stop leaves others pending)
    spent_weighted: float  # by this attempt, infra errors included
    spent_raw: int
    copy_s: float  # this attempt's total fixture-copy time
    run_s: float  # this attempt's total job time (copy + run + clean-up)
    wall_s: float
    message: str = ""
    infra_pending: int = 0  # jobs whose last run was an infra_error: the next attempt retries them


# ---------------------------------------------------------------- work directories


# Temp directories named with the process that made them (a run's TMPDIR, a demo's home; see
# names.process_tag): a later bench removes them once that process is gone, as it does passes'.
STALE_TEMP_PREFIXES = ("warden-run-tmp-pid", "warden-demo-pid")


def _process_started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat``), None where
    that cannot be read: with the pid it names one process, not whichever reuses the pid later."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return stat_line[stat_line.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _this_runner() -> dict[str, Any]:
    """Who runs a pass, as its note records it: host, PID namespace, pid and the pid's start
    time (so a later bench can tell whether it is still alive), when the claim was made, and a
    token of this attempt (every claim changes the note: what the claim's compare-and-set tests)."""
    return {"host": socket.gethostname(), "pidns": pid_namespace(), "pid": os.getpid(),
            "started": _process_started(os.getpid()), "claimed_at": utcnow().isoformat(),
            "attempt": uuid.uuid4().hex}


def _runner_of(bench_pass: BenchPass) -> dict[str, Any] | None:
    runner = pass_note(bench_pass).get("runner")
    return runner if isinstance(runner, dict) and isinstance(runner.get("pid"), int) else None


def _runner_on_this_machine(runner: Mapping[str, Any]) -> bool:
    """The runner's pid means something here: same host and PID namespace."""
    return runner.get("host") == socket.gethostname() and runner.get("pidns") == pid_namespace()


def _local_runner_alive(runner: Mapping[str, Any]) -> bool:
    """A runner of this host and PID namespace (not this process) is alive: its pid runs, and
    is the same process (its start time, when recorded, matches: a reused pid is another)."""
    pid = runner["pid"]
    if pid == os.getpid() or not pid_alive(pid):
        return False
    recorded, now = runner.get("started"), _process_started(pid)
    return recorded is None or now is None or recorded == now


def runner_silence(caps: RunCaps) -> timedelta:
    """How long a pass whose runner cannot be asked (another host or PID namespace on SQLite) may
    go with no job starting or ending before its runner is taken for gone: a live runner starts or
    ends a job at least once per run wall cap (plus the fixture copy); twice that and ten minutes."""
    return timedelta(seconds=2 * caps.max_wall_s + 600)


def _describe_runner(runner: Mapping[str, Any] | None) -> str:
    if runner is None:
        return "its runner unknown"
    return f"pid {runner.get('pid')} on {strip_controls(str(runner.get('host') or '?'), keep_newlines=False)[:100]}"


def busy_message(pass_id: int, runner: Mapping[str, Any] | None) -> str:
    return (f"another warden process is running bench pass #{pass_id} ({_describe_runner(runner)}); "
            "run again when it ends")


def pass_note(bench_pass: BenchPass) -> dict[str, Any]:
    """A pass's note (JSON: seed, jobs, runner; a select pass's rule), {} if unreadable."""
    try:
        note = json.loads(bench_pass.note or "{}")
    except ValueError:
        return {}
    return note if isinstance(note, dict) else {}


def _close_abandoned_passes(session: Session) -> None:
    """Passes left "running" by a process of this host that is gone (SIGKILLed): "interrupted",
    their running jobs pending again, as a clean interruption leaves them. A pass the resumed
    selector planned afresh would otherwise stay "running" for good."""
    for bench_pass in session.scalars(select(BenchPass).where(BenchPass.status == "running")):
        runner = _runner_of(bench_pass)
        if (runner is None or not _runner_on_this_machine(runner) or runner["pid"] == os.getpid()
                or _local_runner_alive(runner)):
            continue
        bench_pass.status = "interrupted"
        for job in session.scalars(select(BenchJob).where(BenchJob.pass_id == bench_pass.id,
                                                          BenchJob.status == "running")):
            job.status = "pending"


def make_private_root(root: Path) -> None:
    """Make ``root`` (0700), or take an existing one only when it is a real directory of this
    user's: in a shared /tmp another user could have made it first, then swapped a fixture copy
    for code the runs execute as us. A directory of ours that others may enter is closed (0700).
    OSError says why not."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(root)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, "it is a symlink or not a directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise OSError(errno.EPERM, f"it belongs to uid {st.st_uid}, not to this user (someone else made it first)")
    if st.st_mode & 0o077:
        try:
            os.chmod(root, 0o700)
        except PermissionError:  # a filesystem without POSIX modes (vfat): the mount decides
            pass


def sweep_stale_workdirs(root: Path = WORK_ROOT, temp_root: Path | None = None) -> int:
    """Remove pass directories, and run and demo temp directories, whose process is gone (it was
    SIGKILLed, so its own clean-up never ran)."""
    temp_root = Path(tempfile.gettempdir()) if temp_root is None else temp_root
    entries: list[Path] = []
    for directory, prefixes in ((root, None), (temp_root, STALE_TEMP_PREFIXES)):
        try:
            entries += [e for e in directory.iterdir() if prefixes is None or e.name.startswith(prefixes)]
        except OSError:
            continue
    removed = 0
    for entry in entries:
        if not tagged_process_gone(entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    return removed


# ---------------------------------------------------------------- the scheduler


CopyFixture = Callable[[Path, Path], Any]  # (fixture_dir, destination) -> anything


@dataclass
class Workbench:
    """The collaborators one pass needs."""

    suite: AgentSuite
    fixture_dir: Path
    fixture_hash: str
    copy_fixture: CopyFixture
    backend_factory: Callable[[], AgentBackend]  # called once per worker thread
    caps: RunCaps = field(default_factory=RunCaps)
    pricing: PriceTable = DEFAULT_TABLE
    work_root: Path = WORK_ROOT

    def task(self, task_id: str) -> GoldenTask:
        for task in self.suite.tasks:
            if task.id == task_id:
                return task
        raise UsageError(f"agent {self.suite.agent!r} has no golden task {task_id!r}")


@dataclass
class _Finished:
    job: JobView
    result: RunResult | None
    copy_s: float
    job_s: float
    crash: str = ""  # the worker itself failed (copy, clean-up): an infra error


# A job one attempt may claim: never run, or its last run was an infra error (retried).
CLAIMABLE_JOB_STATES = ("pending", "infra_error")
_KEEP_BUDGET = object()  # run() of a pass not planned by this scheduler: keep the pass's budget


class BenchScheduler:
    def __init__(self, store: Store, bench: Workbench, *, concurrency: int = 2,
                 max_consecutive_infra: int = DEFAULT_MAX_CONSECUTIVE_INFRA,
                 progress: ProgressSink | None = None) -> None:
        if concurrency < 1:
            raise UsageError("concurrency must be at least 1")
        if max_consecutive_infra < 1:
            raise UsageError("max consecutive infra errors must be at least 1")
        self.store = store
        self.bench = bench
        self.concurrency = concurrency
        self.max_consecutive_infra = max_consecutive_infra
        self.progress: ProgressSink = progress or NullProgress()
        self.last_attempt: _ExecState | None = None
        # The budget each planned pass runs under (its request's): set on the pass when it is claimed.
        self._planned_budgets: dict[int, int | None] = {}

    # ------------------------------------------------------------ who runs a pass

    @property
    def _postgres(self) -> bool:
        return self.store.engine.url.get_backend_name() == "postgresql"

    def _pass_lock_free(self, pass_id: int) -> bool:
        """PostgreSQL: no process (on any host sharing the database) holds the pass's lock."""
        from warden.store.locks import exclusive

        try:
            with exclusive(self.store, f"bench-pass-{pass_id}", ""):
                return True
        except LockBusy:
            return False

    def _pass_busy(self, session: Session, bench_pass: BenchPass) -> str | None:
        """Why the pass cannot be run now (its runner lives), else None (no runner, or a dead one).

        PostgreSQL: its runner holds an advisory lock on it for the attempt, which any host sharing
        the database can test, and the server releases it when the runner dies. SQLite: a runner of
        this host and PID namespace is alive while its pid runs (the same process: its start time);
        one of another host or namespace cannot be asked, and is taken for alive while the pass
        moves (a job started or ended, or the pass was claimed) within :func:`runner_silence`."""
        if bench_pass.status != "running":
            return None
        runner = _runner_of(bench_pass)
        if self._postgres:
            return None if self._pass_lock_free(bench_pass.id) else busy_message(bench_pass.id, runner)
        if runner is None:
            return None
        if _runner_on_this_machine(runner):
            return busy_message(bench_pass.id, runner) if _local_runner_alive(runner) else None
        moments = [session.scalar(select(func.max(BenchJob.updated_at)).where(BenchJob.pass_id == bench_pass.id))]
        try:
            moments.append(datetime.fromisoformat(str(runner.get("claimed_at"))))
        except ValueError:
            pass
        latest = max((m for m in moments if m is not None), default=None)
        if latest is not None and utcnow() - latest.replace(tzinfo=None) < runner_silence(self.bench.caps):
            return busy_message(bench_pass.id, runner)
        return None

    @contextmanager
    def _pass_guard(self, pass_id: int, runner: Mapping[str, Any] | None) -> Iterator[None]:
        """PostgreSQL: hold the pass's advisory lock for the attempt (:class:`BenchBusy` if another
        process holds it). SQLite: nothing (the claim's compare-and-set on the note decides)."""
        if not self._postgres:
            yield
            return
        from warden.store.locks import exclusive

        entered = False
        try:
            with exclusive(self.store, f"bench-pass-{pass_id}", busy_message(pass_id, runner)):
                entered = True
                yield
        except LockBusy as exc:
            if entered or isinstance(exc, BenchBusy):
                raise
            raise BenchBusy(str(exc)) from None

    def _claim_pass(self, pass_id: int, budget: "int | None | object") -> None:
        """Become the pass's runner, or raise :class:`BenchBusy` while a live one runs it.

        The claim is a compare-and-set on the pass row (its status and note, which names the
        runner and a token of its attempt): of two processes that both found the pass free, one
        claim matches and the other's finds the note changed, re-reads it and refuses. A dead
        runner's pass is taken over: its jobs left "running" go back to pending."""
        for _ in range(5):
            with self.store.session() as session:
                bench_pass = session.get(BenchPass, pass_id)
                assert bench_pass is not None
                status, note = bench_pass.status, bench_pass.note
                busy = None if self._postgres else self._pass_busy(session, bench_pass)  # PG: the guard decided
                unfinished = session.scalar(select(func.count()).select_from(BenchJob).where(
                    BenchJob.pass_id == pass_id, BenchJob.status != "done")) or 0
                claimed_note = json.dumps({**pass_note(bench_pass), "runner": _this_runner()})
            if busy is not None:
                raise BenchBusy(busy)
            if status == "done" and not unfinished:
                return  # nothing to run (the outcome reports the finished pass)
            values: dict[str, Any] = {"status": "running", "finished_at": None, "note": claimed_note}
            if budget is not _KEEP_BUDGET:
                values["budget_tokens"] = budget
            # The UPDATE is the transaction's first statement: SQLite takes its write lock with a
            # fresh view of the row, PostgreSQL re-checks the WHERE on the row it waited for.
            with self.store.session() as session:
                same_note = BenchPass.note.is_(None) if note is None else BenchPass.note == note
                claimed = session.execute(update(BenchPass).where(BenchPass.id == pass_id, BenchPass.status == status,
                                                                  same_note).values(**values)
                                          .execution_options(synchronize_session=False)).rowcount
                if claimed == 1:
                    session.execute(update(BenchJob).where(BenchJob.pass_id == pass_id, BenchJob.status == "running")
                                    .values(status="pending").execution_options(synchronize_session=False))
                    _close_abandoned_passes(session)
                    return
        with self.store.session() as session:
            bench_pass = session.get(BenchPass, pass_id)
            runner = _runner_of(bench_pass) if bench_pass is not None else None
        raise BenchBusy(busy_message(pass_id, runner))

    def _claim_job(self, job_id: int) -> bool:
        """Mark a pending job (or one whose last run was an infra error) running, atomically: a
        compare-and-set on its status, so of two processes claiming it exactly one wins."""
        with self.store.session() as session:
            claimed = session.execute(update(BenchJob).where(BenchJob.id == job_id,
                                                             BenchJob.status.in_(CLAIMABLE_JOB_STATES))
                                      .values(status="running", updated_at=utcnow())
                                      .execution_options(synchronize_session=False)).rowcount
        return claimed == 1

    # ------------------------------------------------------------ planning

    def plan(self, request: BenchRequest) -> tuple[int, bool]:
        """The pass for ``request``: the unfinished one with the same plan key (resume), or a new
        one (a finished plan asked again is measured again). Returns (pass id, resumed?)."""
        suite = self.bench.suite
        known = {t.id for t in suite.tasks}
        unknown = sorted({j.task_id for j in request.jobs} - known)
        if unknown:
            raise UsageError(f"agent {request.agent!r} has no golden task(s): {', '.join(unknown)}")
        if not request.jobs:
            raise UsageError("nothing to run: the plan has no jobs")
        key = request.plan_key(suite.suite_hash, self.bench.fixture_hash, self.bench.caps)
        with self._planning(key):
            return self._find_or_create(request, key)

    @contextmanager
    def _planning(self, key: str) -> Iterator[None]:
        """PostgreSQL: one process at a time finds or creates the pass of a plan key (held for the
        milliseconds that takes; a process finding it held waits). Its sequence numbers passes in
        the order they were begun, not committed, so the oldest-wins rule below needs this there;
        SQLite writes one transaction at a time, which numbers them in commit order."""
        if not self._postgres:
            yield
            return
        from warden.store.locks import exclusive

        deadline = time.monotonic() + 30.0
        with contextlib.ExitStack() as stack:
            while True:
                try:
                    stack.enter_context(exclusive(self.store, f"bench-plan-{key}", ""))
                    break
                except LockBusy:
                    if time.monotonic() > deadline:
                        raise BenchBusy("another warden process has been planning this bench pass for 30 s; "
                                        "run again when it ends") from None
                    time.sleep(0.05)
            yield

    def _find_or_create(self, request: BenchRequest, key: str) -> tuple[int, bool]:
        with self.store.session() as session:
            for ids in {j.rule_ids for j in request.jobs}:
                memory_for(session, request.agent, ids)  # refuses unknown / foreign rules now
            existing = session.scalars(select(BenchPass).where(BenchPass.plan_key == key, BenchPass.status != "done")
                                       .order_by(BenchPass.id.desc()).limit(1)).first()
            if existing is not None:
                return self._reuse(session, existing, request), True
        created = self._create_pass(request, key)
        # Two processes planning the same new pass at once both created one: the older stays, the
        # newer is dropped (it has no runs yet), and both go on with the older (one then refuses).
        with self.store.session() as session:
            oldest = session.scalar(select(func.min(BenchPass.id)).where(BenchPass.plan_key == key,
                                                                         BenchPass.status != "done"))
        if oldest is None or oldest == created:
            self._planned_budgets[created] = request.budget_tokens
            return created, False
        with self.store.session() as session:
            session.execute(delete(BenchJob).where(BenchJob.pass_id == created))
            session.execute(delete(BenchPass).where(BenchPass.id == created))
        with self.store.session() as session:
            return self._reuse(session, session.get(BenchPass, oldest), request), True

    def _reuse(self, session: Session, existing: BenchPass, request: BenchRequest) -> int:
        """Resume ``existing``, unless a live process runs it (:class:`BenchBusy`): nothing of it
        changes now; its claim sets this attempt's budget (None = none)."""
        busy = self._pass_busy(session, existing)
        if busy is not None:
            raise BenchBusy(busy)
        self._planned_budgets[existing.id] = request.budget_tokens
        return existing.id

    def _create_pass(self, request: BenchRequest, key: str) -> int:
        suite = self.bench.suite
        with self.store.session() as session:
            bench_pass = BenchPass(agent=request.agent, purpose=request.purpose, backend=request.backend,
                                   model=request.model, suite_hash=suite.suite_hash,
                                   fixture_hash=self.bench.fixture_hash, plan_key=key, status="planned",
                                   budget_tokens=request.budget_tokens,
                                   note=json.dumps({"seed": request.seed, "jobs": len(request.jobs),
                                                    **({} if request.rule_id is None else {"rule": request.rule_id})}))
            session.add(bench_pass)
            session.flush()
            for index, spec in enumerate(request.jobs):
                session.add(BenchJob(pass_id=bench_pass.id, order_index=index, task_id=spec.task_id,
                                     config_key=spec.config_key,
                                     seed=job_seed(request.seed, spec.task_id, spec.rep)))
            return bench_pass.id

    # ------------------------------------------------------------ executing

    def run(self, pass_id: int) -> PassOutcome:
        """Execute the pass's pending jobs; returns when all are done, the budget stops it, or
        raises :class:`BenchAborted` (infra) / KeyboardInterrupt / :class:`BenchInterrupted`."""
        started = time.monotonic()
        with self.store.session() as session:
            bench_pass = session.get(BenchPass, pass_id)
            if bench_pass is None:
                raise UsageError(f"no bench pass #{pass_id}")
            if bench_pass.fixture_hash != self.bench.fixture_hash or bench_pass.suite_hash != self.bench.suite.suite_hash:
                raise WardenError(f"bench pass #{pass_id} was planned for another fixture or suite; plan it again")
            runner = _runner_of(bench_pass)
        budget_asked = self._planned_budgets.pop(pass_id, _KEEP_BUDGET)
        with self._pass_guard(pass_id, runner):  # PostgreSQL: held while this attempt runs
            self._claim_pass(pass_id, budget_asked)
            return self._run_claimed(pass_id, started)

    def _run_claimed(self, pass_id: int, started: float) -> PassOutcome:
        with self.store.session() as session:
            bench_pass = session.get(BenchPass, pass_id)
            assert bench_pass is not None
            agent, backend_name, model = bench_pass.agent, bench_pass.backend, bench_pass.model
            budget = bench_pass.budget_tokens
            plan_key = bench_pass.plan_key
            jobs = session.scalars(select(BenchJob).where(BenchJob.pass_id == pass_id)
                                   .order_by(BenchJob.order_index)).all()
            views = [JobView(j.id, j.order_index, j.task_id, j.config_key, int(j.seed)) for j in jobs]
            done_ids = {j.id for j in jobs if j.status == "done"}
            memories = {key: memory_for(session, agent, parse_config_key(key)) for key in {j.config_key for j in jobs}}
            estimates = self._cost_estimates(session, agent, backend_name, model, {j.task_id for j in jobs})
            # The budget covers the whole pass: what earlier attempts spent counts against it.
            spent_before = float(session.scalar(
                select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0))
                .join(BenchJob, BenchJob.bench_run_id == BenchRun.id).where(BenchJob.pass_id == pass_id)) or 0.0)
        pending = [v for v in views if v.job_id not in done_ids]
        resumed = bool(done_ids)
        self.progress.start(pass_id, len(views), len(done_ids))
        if resumed and pending:
            self.progress.message(f"resuming bench pass #{pass_id}: {len(done_ids)} of {len(views)} runs "
                                  "already done, running the rest")
        if budget is not None:
            estimate = sum(self._estimate(v.task_id, estimates, _ExecState()) for v in pending)
            if spent_before + estimate > budget:
                earlier = (f", of which this pass's earlier attempts spent {spent_before:,.0f} (the budget "
                           "covers the whole pass)," if spent_before > 0 else "")
                self.progress.message(f"the pending runs are estimated at {estimate:,.0f} weighted tokens; "
                                      f"the budget of {budget:,}{earlier} stops the pass before that")

        state = _ExecState(spent_before=spent_before)
        self.last_attempt = state  # readable even when the attempt raised (spend accounting)

        def infra_pending(session: Session) -> int:
            return session.scalar(select(func.count()).select_from(BenchJob).where(
                BenchJob.pass_id == pass_id, BenchJob.status == "infra_error")) or 0

        def outcome(session: Session, status: str, message: str) -> PassOutcome:
            return PassOutcome(pass_id=pass_id, plan_key=plan_key, status=status, total_jobs=len(views),
                               runs=self._pass_runs(session, pass_id, state.copy_by_run),
                               executed=state.executed, resumed=resumed, done_before=len(done_ids),
                               spent_weighted=state.spent_weighted, spent_raw=state.spent_raw,
                               copy_s=state.copy_s, run_s=state.run_s, wall_s=time.monotonic() - started,
                               message=message, infra_pending=infra_pending(session))

        message = ""
        status = "done"
        if pending:
            try:
                status, message = self._execute(pass_id, agent, backend_name, model, pending, memories,
                                                estimates, budget, state)
            except BenchAborted as exc:
                with self.store.session() as session:
                    exc.outcome = outcome(session, "aborted", str(exc))
                raise
        with self.store.session() as session:
            bench_pass = session.get(BenchPass, pass_id)
            retry = infra_pending(session)
            elsewhere = 0 if not state.claimed_elsewhere else session.scalar(
                select(func.count()).select_from(BenchJob).where(BenchJob.pass_id == pass_id,
                                                                 BenchJob.status.in_(("pending", "running")))) or 0
            if status == "done" and retry:
                status = "partial"
                message = (f"{retry} run(s) ended in infra_error and were not counted; "
                           "re-run the same command to retry them")
            elif status == "done" and elsewhere:  # another process claimed them (its runs are its own)
                status = "partial"
                message = (f"{elsewhere} run(s) were taken by another warden process running this pass; "
                           "re-run the same command when it ends to report the whole pass")
            bench_pass.status = status
            if status == "done":
                bench_pass.finished_at = utcnow()
            return outcome(session, status, message)

    def run_request(self, request: BenchRequest) -> PassOutcome:
        pass_id, _ = self.plan(request)
        return self.run(pass_id)

    # ------------------------------------------------------------ internals

    def _cost_estimates(self, session: Session, agent: str, backend: str, model: str,
                        task_ids: set[str]) -> dict[str, float]:
        """Mean weighted tokens of earlier non-infra runs per task (for budget checks)."""
        rows = session.execute(
            select(BenchRun.task_id, func.avg(BenchRun.weighted_tokens))
            .where(BenchRun.agent == agent, BenchRun.backend == backend, BenchRun.model == model,
                   BenchRun.task_id.in_(task_ids), BenchRun.outcome != Outcome.INFRA_ERROR.value)
            .group_by(BenchRun.task_id)).all()
        return {task: float(avg) for task, avg in rows}

    def _execute(self, pass_id: int, agent: str, backend_name: str, model: str, pending: list[JobView],
                 memories: dict[str, RunMemory], estimates: dict[str, float], budget: int | None,
                 state: "_ExecState") -> tuple[str, str]:
        bench = self.bench
        try:
            make_private_root(bench.work_root)
            sweep_stale_workdirs(bench.work_root)
            pass_dir = Path(tempfile.mkdtemp(prefix=f"pass-{pass_id}-{process_tag()}-", dir=bench.work_root))
        except OSError as exc:  # read-only, full or not ours: the machine, not the agent
            with self.store.session() as session:
                session.get(BenchPass, pass_id).status = "aborted"
            raise BenchAborted(f"bench pass #{pass_id} aborted: cannot make its work directory under "
                               f"{bench.work_root}: {exc.strerror or exc}; fix it (or set TMPDIR) and re-run "
                               "the same command to resume") from None
        work_q: queue.Queue[JobView | None] = queue.Queue()
        results_q: queue.Queue[_Finished] = queue.Queue()
        stop = threading.Event()
        prompts = {key: system_prompt(bench.suite, mem) for key, mem in memories.items()}

        def worker() -> None:
            backend: AgentBackend | None = None
            while not stop.is_set():
                job = work_q.get()
                if job is None or stop.is_set():
                    return
                begun = time.monotonic()
                copy_s = 0.0
                workdir = pass_dir / f"job-{job.job_id}"
                try:
                    if backend is None:
                        backend = bench.backend_factory()
                    t0 = time.monotonic()
                    bench.copy_fixture(bench.fixture_dir, workdir)
                    copy_s = time.monotonic() - t0
                    with cancelled_by(stop):  # a stopping pass kills the run's commands: it ends now
                        result = backend.run(bench.task(job.task_id), workdir, prompts[job.config_key], job.seed,
                                             bench.caps)
                    finished = _Finished(job, result, copy_s, 0.0)
                except Exception as exc:  # a crash of the backend or the copy is infrastructure
                    finished = _Finished(job, None, copy_s, 0.0, crash=f"{type(exc).__name__}: {exc}")
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                    if stop.is_set():  # an abandoned run ending after the pass was cleaned up
                        shutil.rmtree(pass_dir, ignore_errors=True)
                finished.job_s = time.monotonic() - begun
                results_q.put(finished)

        threads = [threading.Thread(target=worker, name=f"warden-bench-{i}", daemon=True)
                   for i in range(self.concurrency)]
        previous_term = _install_sigterm()
        queue_pos = 0
        in_flight: dict[int, JobView] = {}
        consecutive_infra = 0
        status, message = "done", ""
        budget_stop = False
        left_pending = 0
        blocks_seen: set[tuple[str, int]] = set()
        try:
            for thread in threads:
                thread.start()
            while queue_pos < len(pending) or in_flight:
                # Dispatch up to `concurrency` jobs, whole blocks only while the budget allows.
                while queue_pos < len(pending) and len(in_flight) < self.concurrency and not budget_stop:
                    job = pending[queue_pos]
                    block = (job.task_id, job.seed)
                    if budget is not None and block not in blocks_seen:
                        block_jobs = [j for j in pending[queue_pos:] if (j.task_id, j.seed) == block]
                        cost = sum(self._estimate(j.task_id, estimates, state) for j in block_jobs)
                        if cost <= 0 and in_flight:
                            break  # nothing prices this block yet: the runs in flight will
                        committed = sum(self._estimate(j.task_id, estimates, state) for j in in_flight.values())
                        spent = state.spent_before + state.spent_weighted
                        if spent + committed + cost > budget or spent >= budget:
                            budget_stop = True
                            status = "partial"
                            left_pending = len(pending) - queue_pos
                            break
                    blocks_seen.add(block)
                    queue_pos += 1
                    if not self._claim_job(job.job_id):  # another process runs it: never twice
                        state.claimed_elsewhere += 1
                        continue
                    in_flight[job.job_id] = job
                    self.progress.job_started(job)
                    work_q.put(job)
                if not in_flight:
                    break
                try:
                    finished = results_q.get(timeout=_RESULT_POLL_S)
                except queue.Empty:
                    continue
                in_flight.pop(finished.job.job_id, None)
                record = self._record(agent, backend_name, model, finished, memories[finished.job.config_key])
                state.add(record, finished)
                self.progress.job_finished(finished.job, record)
                if record.outcome == Outcome.INFRA_ERROR.value:
                    consecutive_infra += 1
                    if consecutive_infra >= self.max_consecutive_infra:
                        stop.set()
                        with self.store.session() as session:
                            session.get(BenchPass, pass_id).status = "aborted"
                        raise BenchAborted(
                            f"bench pass #{pass_id} aborted: {counted(consecutive_infra, 'consecutive run')} ended in "
                            f"infra_error (last: {strip_controls(record.error or 'no detail', keep_newlines=False)}); "
                            "this is the backend, not the agent — fix it and re-run the same command to resume")
                else:
                    consecutive_infra = 0
            if budget_stop:  # said once the runs in flight at the stop have finished and counted
                # The budget covers the whole pass: a resumed attempt says what its earlier ones spent.
                spent_text = (f"{state.spent_before:,.0f} spent by this pass's earlier attempts and "
                              f"{state.spent_weighted:,.0f} by this one (the budget covers the whole pass, "
                              "resumes included; " if state.spent_before > 0
                              else f"{state.spent_weighted:,.0f} spent (")
                message = (f"budget of {budget:,} weighted tokens reached: {spent_text}estimates price the "
                           f"next block; runs in flight finish); {left_pending} run(s) left pending "
                           "(re-run with a larger --budget to continue)")
        except BaseException:
            stop.set()
            with self.store.session() as session:  # jobs that were in flight go back to pending
                for job_id in in_flight:
                    job_row = session.get(BenchJob, job_id)
                    if job_row is not None and job_row.status == "running":
                        job_row.status = "pending"
                bench_pass = session.get(BenchPass, pass_id)
                if bench_pass.status == "running":
                    bench_pass.status = "interrupted"
            raise
        finally:
            stop.set()
            for _ in threads:
                work_q.put(None)
            # Give in-flight runs a moment to end, so none re-creates its copy after the clean-up.
            deadline = time.monotonic() + _STOP_GRACE_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            _restore_sigterm(previous_term)
            shutil.rmtree(pass_dir, ignore_errors=True)
        return status, message

    @staticmethod
    def _estimate(task_id: str, estimates: dict[str, float], state: "_ExecState") -> float:
        """A run of ``task_id``'s expected cost: its own recorded runs, else this attempt's runs,
        else the other tasks' (a resumed attempt has run nothing yet: 0 would let any block in)."""
        if task_id in estimates:
            return estimates[task_id]
        mean = state.mean_weighted()
        if mean <= 0 and estimates:
            mean = sum(estimates.values()) / len(estimates)
        return mean

    def _record(self, agent: str, backend_name: str, model: str, finished: _Finished,
                memory: RunMemory) -> RunRecord:
        """Store the run, mark its job, and update the task's baseline — one transaction."""
        job = finished.job
        result = finished.result
        if result is None:
            result = RunResult(task_id=job.task_id, backend=backend_name, model=model, seed=job.seed,
                               outcome=Outcome.INFRA_ERROR, completed=False, turns=0,
                               duration_s=finished.job_s, error=finished.crash)
        outcome = Outcome(result.outcome)
        usage = result.usage
        run_model = result.model or model
        pricing = self.bench.pricing
        cost = sum(pricing.cost_usd(c.model or run_model, c.usage) for c in result.calls)
        weighted = sum(pricing.weighted_tokens(c.model or run_model, c.usage) for c in result.calls)
        # Two passes recording a task's first active-set run at once (two benches sharing a
        # PostgreSQL database) both try to create its baseline: the second's transaction fails on
        # the unique key and is taken again, finding the first's baseline (the run is kept, once).
        for attempt in range(3):
            try:
                with self.store.session() as session:
                    row = BenchRun(agent=agent, task_id=job.task_id, config_key=job.config_key,
                                   rule_ids=list(memory.rule_ids), ruleset_version=memory.ruleset_version,
                                   memory_sha256=memory.sha256, backend=backend_name, model=model, seed=job.seed,
                                   suite_hash=self.bench.suite.suite_hash, fixture_hash=self.bench.fixture_hash,
                                   outcome=outcome.value,
                                   completed=bool(result.completed and outcome == Outcome.COMPLETED),
                                   turns=result.turns, duration_s=result.duration_s,
                                   input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                                   cache_write_5m_tokens=usage.cache_write_5m,
                                   cache_write_1h_tokens=usage.cache_write_1h, cache_read_tokens=usage.cache_read,
                                   cost_usd=cost, weighted_tokens=weighted,
                                   calls=[c.as_dict() for c in result.calls],
                                   error=redact_credentials(result.error or "", os.environ)[:2000])
                    session.add(row)
                    session.flush()
                    job_row = session.get(BenchJob, job.job_id)
                    job_row.bench_run_id = row.id
                    # An infra error is not a result: the job stays to be retried on the next attempt.
                    job_row.status = "infra_error" if outcome == Outcome.INFRA_ERROR else "done"
                    if row.completed and memory.rule_ids == active_rule_ids(session, agent):
                        update_baseline(session, row)
                    return RunRecord.from_row(row, finished.copy_s)
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _pass_runs(self, session: Session, pass_id: int, copy_by_run: dict[int, float]) -> list[RunRecord]:
        rows = session.execute(select(BenchRun).join(BenchJob, BenchJob.bench_run_id == BenchRun.id)
                               .where(BenchJob.pass_id == pass_id, BenchJob.status == "done")
                               .order_by(BenchJob.order_index)).scalars().all()
        return [RunRecord.from_row(r, copy_by_run.get(r.id, 0.0)) for r in rows]


@dataclass
class _ExecState:
    spent_before: float = 0.0  # by earlier attempts of the same pass (budget accounting)
    executed: int = 0
    claimed_elsewhere: int = 0  # jobs another process claimed first (this attempt skipped them)
    spent_weighted: float = 0.0
    spent_raw: int = 0
    copy_s: float = 0.0
    run_s: float = 0.0
    copy_by_run: dict[int, float] = field(default_factory=dict)
    _weights: list[float] = field(default_factory=list)

    def add(self, record: RunRecord, finished: _Finished) -> None:
        self.executed += 1
        self.spent_weighted += record.weighted_tokens
        self.spent_raw += record.raw_tokens
        self.copy_s += finished.copy_s
        self.run_s += finished.job_s
        self.copy_by_run[record.run_id] = finished.copy_s
        if record.outcome != Outcome.INFRA_ERROR.value:
            self._weights.append(record.weighted_tokens)

    def mean_weighted(self) -> float:
        return statistics.fmean(self._weights) if self._weights else 0.0


def _install_sigterm() -> Any:
    """SIGTERM → BenchInterrupted in the main thread, so the same clean-up as Ctrl-C runs."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise BenchInterrupted("terminated (SIGTERM); re-run the same command to resume")

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous: Any) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


# ---------------------------------------------------------------- baselines


def update_baseline(session: Session, run: BenchRun) -> Baseline:
    """A task's first completed run with the active set on a fixture version freezes ``run1``
    forever; later ones on the same fixture only ever lower ``best``. A run on a new fixture
    version starts that version's own baseline: the old one is left as it was, never mixed."""
    baseline = session.scalars(select(Baseline).where(
        Baseline.agent == run.agent, Baseline.task_id == run.task_id, Baseline.backend == run.backend,
        Baseline.model == run.model, Baseline.fixture_hash == run.fixture_hash)).first()
    if baseline is None:
        baseline = Baseline(agent=run.agent, task_id=run.task_id, backend=run.backend, model=run.model,
                            fixture_hash=run.fixture_hash, run1_weighted=run.weighted_tokens, run1_run_id=run.id,
                            best_weighted=run.weighted_tokens, best_run_id=run.id)
        session.add(baseline)
    elif run.weighted_tokens < baseline.best_weighted:
        baseline.best_weighted = run.weighted_tokens
        baseline.best_run_id = run.id
    return baseline


# ---------------------------------------------------------------- summaries (pure)


@dataclass(frozen=True)
class ConfigSummary:
    task_id: str
    config_key: str
    n: int  # runs with a result (infra errors excluded)
    completed: int
    mean_weighted: float
    stdev_weighted: float  # sample standard deviation (0 with one run)
    min_weighted: float
    max_weighted: float
    mean_raw: float

    @property
    def completion_rate(self) -> float:
        return self.completed / self.n if self.n else 0.0

    @property
    def cv(self) -> float:
        return self.stdev_weighted / self.mean_weighted if self.mean_weighted else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task_id, "config": self.config_key, "n": self.n, "completed": self.completed,
                "completion_rate": round(self.completion_rate, 4), "mean_weighted": round(self.mean_weighted, 1),
                "stdev_weighted": round(self.stdev_weighted, 1), "cv": round(self.cv, 4),
                "min_weighted": round(self.min_weighted, 1), "max_weighted": round(self.max_weighted, 1),
                "mean_raw": round(self.mean_raw, 1)}


def summarize(runs: Iterable[RunRecord]) -> list[ConfigSummary]:
    """Per task and configuration: mean, spread, completion (infra errors are not results)."""
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for run in runs:
        if run.outcome == Outcome.INFRA_ERROR.value:
            continue
        groups.setdefault((run.task_id, run.config_key), []).append(run)
    out = []
    for (task, key), items in sorted(groups.items(), key=lambda kv: (kv[0][0], parse_config_key(kv[0][1]))):
        weights = [r.weighted_tokens for r in items]
        out.append(ConfigSummary(task, key, len(items), sum(r.completed for r in items), statistics.fmean(weights),
                                 statistics.stdev(weights) if len(weights) > 1 else 0.0, min(weights),
                                 max(weights), statistics.fmean(r.raw_tokens for r in items)))
    return out


def paired_differences(runs: Iterable[RunRecord], reference: str, other: str) -> dict[str, list[float]]:
    """Per task: reference minus other weighted tokens for blocks (same seed) where both ran.
    Positive = ``other`` is cheaper."""
    by_key: dict[tuple[str, int, str], RunRecord] = {}
    for run in runs:
        if run.outcome != Outcome.INFRA_ERROR.value:
            by_key[(run.task_id, run.seed, run.config_key)] = run
    diffs: dict[str, list[float]] = {}
    for (task, seed, key), run in sorted(by_key.items()):
        if key != reference:
            continue
        twin = by_key.get((task, seed, other))
        if twin is not None:
            diffs.setdefault(task, []).append(run.weighted_tokens - twin.weighted_tokens)
    return diffs


# ---------------------------------------------------------------- spend share


@dataclass(frozen=True)
class SpendShare:
    bench_weighted: float  # bench runs in the window
    work_weighted: float  # real-work session runs in the window
    window_days: float

    @property
    def share(self) -> float | None:
        return self.bench_weighted / self.work_weighted if self.work_weighted > 0 else None

    @property
    def warning(self) -> str | None:
        share = self.share
        if share is not None and share > SPEND_WARN_SHARE:
            return (f"bench spend is {share:.0%} of the last {self.window_days:g} days' real-work tokens "
                    f"(above {SPEND_WARN_SHARE:.0%}); consider a smaller --runs or a --budget")
        return None

    def as_dict(self) -> dict[str, Any]:
        share = self.share
        return {"bench_weighted": round(self.bench_weighted, 1), "work_weighted": round(self.work_weighted, 1),
                "window_days": self.window_days, "share": None if share is None else round(share, 4),
                "warning": self.warning}


def spend_share(session: Session, now: datetime | None = None, window: timedelta = SPEND_WINDOW) -> SpendShare:
    """Bench spend in the window as a share of the real-work tokens collected in it."""
    since = (now or utcnow()) - window
    bench = session.scalar(select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0))
                           .where(BenchRun.created_at >= since)) or 0.0
    when = func.coalesce(SessionRun.ended_at, SessionRun.started_at, SessionRun.created_at)
    work = session.scalar(select(func.coalesce(func.sum(SessionRun.weighted_tokens), 0.0))
                          .where(when >= since)) or 0.0
    return SpendShare(float(bench), float(work), window.total_seconds() / 86400)


# ---------------------------------------------------------------- lookups


def find_resumable_pass(session: Session, family_key: str) -> BenchPass | None:
    """The newest unfinished pass of a plan family (same plan, any seed)."""
    return session.scalars(select(BenchPass).where(BenchPass.plan_key.like(f"{family_key}:%"),
                                                   BenchPass.status != "done")
                           .order_by(BenchPass.id.desc()).limit(1)).first()


def seed_of(bench_pass: BenchPass) -> int:
    return int(bench_pass.plan_key.rsplit(":", 1)[1])



# ---------------------------------------------------------------- the entry point (CLI, selector)


def _load_suite(settings: "Settings", agent: str) -> AgentSuite:
    from warden.bench.tasks import load_suite

    return load_suite(settings.golden_dir, agent, settings.fixture_dir)


def _fixture(settings: "Settings") -> tuple[str, CopyFixture]:
    """The frozen fixture's hash (refusing a modified fixture) and its copy function."""
    from warden.bench import fixture

    return fixture.verify_fixture(settings.fixture_dir), fixture.make_run_copy


def caps_from(settings: "Settings") -> RunCaps:
    return RunCaps(max_turns=settings.max_turns, max_output_tokens=settings.max_output_tokens,
                   max_total_tokens=settings.max_total_tokens, max_wall_s=settings.max_wall_s)


def requested_model(settings: "Settings", backend: str, model: str | None = None,
                    agent_model: str | None = None) -> str | None:
    """The model a bench on ``backend`` asks its backend for: ``model``, else the settings' model,
    else the one agent.md names (``agent_model``); None leaves it to the backend's default. The
    sim plays personas ("sim-naive-1"): a real model id in the settings or agent.md is not one.
    :func:`warden.bench.agents.backend_model` turns it into the id the backend runs."""
    if backend == "sim":
        return model or (settings.model if (settings.model or "").startswith("sim") else None)
    return model or settings.model or agent_model


def open_workbench(settings: "Settings", agent: str, backend: str, model: str | None = None,
                   **backend_options: Any) -> tuple[Workbench, str]:
    """Suite + verified fixture + a backend factory for ``agent``; returns it and the model id.

    The model is ``model``, else the settings' model, else the one agent.md names, else the
    backend's default (the backend reports the id it will use)."""
    from warden.bench.agents import get_backend
    from warden.names import validate_agent_name

    validate_agent_name(agent)
    # The fixture first: the suite's reference edits are checked against it, so a missing or
    # modified fixture would otherwise surface as a puzzling golden-task error.
    fixture_hash, copy = _fixture(settings)
    suite = _load_suite(settings, agent)
    chosen = requested_model(settings, backend, model, suite.model)
    options = dict(backend_options)
    if chosen:
        options["model"] = chosen
    probe = get_backend(backend, settings, **options)  # fails early (unknown backend, no key)
    spare = [probe]

    def factory() -> AgentBackend:
        # The probe serves the first worker; every other worker gets its own instance.
        return spare.pop() if spare else get_backend(backend, settings, **options)

    bench = Workbench(suite=suite, fixture_dir=settings.fixture_dir, fixture_hash=fixture_hash,
                      copy_fixture=copy, backend_factory=factory, caps=caps_from(settings),
                      pricing=PriceTable(settings.pricing))
    return bench, str(getattr(probe, "model", chosen or backend))


@dataclass(frozen=True)
class Comparison:
    """A configuration against the reference on one task, over paired (same-seed) runs."""

    task_id: str
    reference: str
    config_key: str
    pairs: int
    mean_saving: float  # reference minus configuration, weighted tokens per run (positive = cheaper)
    reference_mean: float

    @property
    def relative(self) -> float:
        return self.mean_saving / self.reference_mean if self.reference_mean else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task_id, "reference": self.reference, "config": self.config_key,
                "pairs": self.pairs, "mean_saving": round(self.mean_saving, 1),
                "relative_saving": round(self.relative, 4)}


def compare(runs: Sequence[RunRecord], reference: str, others: Sequence[str]) -> list[Comparison]:
    out = []
    for other in others:
        for task, diffs in sorted(paired_differences(runs, reference, other).items()):
            ref_weights = [r.weighted_tokens for r in runs if r.task_id == task and r.config_key == reference
                           and r.outcome != Outcome.INFRA_ERROR.value]
            out.append(Comparison(task, reference, other, len(diffs), statistics.fmean(diffs),
                                  statistics.fmean(ref_weights)))
    return out


@dataclass(frozen=True)
class SuiteTotal:
    """A configuration against the reference over the whole suite: one run of each compared task."""

    reference: str
    config_key: str
    saving: float  # summed per-task mean savings, weighted tokens (positive = cheaper)
    reference_total: float  # summed per-task reference means

    @property
    def relative(self) -> float:
        return self.saving / self.reference_total if self.reference_total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "config": self.config_key, "saving": round(self.saving, 1),
                "relative_saving": round(self.relative, 4)}


def suite_totals(comparisons: Sequence[Comparison]) -> list[SuiteTotal]:
    """Per configuration, in first-seen order, the sum of its per-task comparisons."""
    sums: dict[tuple[str, str], list[float]] = {}
    for c in comparisons:
        pair = sums.setdefault((c.reference, c.config_key), [0.0, 0.0])
        pair[0] += c.mean_saving
        pair[1] += c.reference_mean
    return [SuiteTotal(ref, key, saving, total) for (ref, key), (saving, total) in sums.items()]


@dataclass
class BenchReport:
    agent: str
    backend: str
    model: str
    seed: int
    configs: list[str]  # configuration keys; the first is the reference of the comparisons
    outcome: PassOutcome
    summaries: list[ConfigSummary]
    comparisons: list[Comparison]
    spend: SpendShare
    suites: list[SuiteTotal]  # suite_totals(comparisons): what the text report and --json both show

    def as_dict(self) -> dict[str, Any]:
        o = self.outcome
        return {"agent": self.agent, "backend": self.backend, "model": self.model,
                "measured_on": measured_on([self.backend]), "seed": self.seed, "pass_id": o.pass_id,
                "status": o.status, "message": o.message, "resumed": o.resumed,
                "infra_pending": o.infra_pending,
                "jobs": o.total_jobs, "executed": o.executed, "done_before": o.done_before, "configs": self.configs,
                "spent_weighted": round(o.spent_weighted, 1), "spent_raw": o.spent_raw,
                "wall_s": round(o.wall_s, 2), "summary": [s.as_dict() for s in self.summaries],
                "comparisons": [c.as_dict() for c in self.comparisons],
                "suite_totals": [t.as_dict() for t in self.suites], "spend_share": self.spend.as_dict(),
                "runs": [{"run_id": r.run_id, "task": r.task_id, "config": r.config_key, "seed": r.seed,
                          "outcome": r.outcome, "weighted_tokens": round(r.weighted_tokens, 1),
                          "raw_tokens": r.raw_tokens, "turns": r.turns} for r in o.runs]}


def bench_agent(store: Store, settings: "Settings", agent: str, *, rule_sets: Sequence[Iterable[int]] = (),
                include_active: bool = False, active_first: bool = True, runs: int = 3,
                backend: str | None = None,
                model: str | None = None, concurrency: int | None = None, budget: int | None = None,
                seed: int | None = None, progress: ProgressSink | None = None,
                max_consecutive_infra: int = DEFAULT_MAX_CONSECUTIVE_INFRA,
                bench: Workbench | None = None) -> BenchReport:
    """``warden bench``: run each configuration ``runs`` times on every golden task of ``agent``,
    paired and interleaved. Without ``rule_sets`` the active set is benchmarked. The first
    configuration is the reference: the active set (``include_active``) when ``active_first``,
    else the first of ``rule_sets`` (the active set then comes after them). Without a ``seed``
    an unfinished pass of the same plan is resumed, else a fresh seed is drawn."""
    if runs < 1:
        raise UsageError("--runs must be at least 1")
    if budget is not None and budget <= 0:
        raise UsageError("--budget must be a positive number of tokens")
    backend = backend or settings.backend
    model_id = model
    if bench is None:
        bench, model_id = open_workbench(settings, agent, backend, model)
    model_id = model_id or model or backend
    with store.session() as session:
        active = active_rule_ids(session, agent)
    with_active = include_active or not rule_sets
    configs: list[tuple[int, ...]] = [active] if with_active and (active_first or not rule_sets) else []
    for ids in rule_sets:
        normalized = tuple(sorted({int(i) for i in ids}))
        if normalized not in configs:
            configs.append(normalized)
    if with_active and active not in configs:  # --active written after a --rules: after the rule sets
        configs.append(active)
    task_ids = [t.id for t in bench.suite.tasks]
    if not task_ids:
        raise UsageError(f"agent {agent!r} has no golden tasks")
    chosen_seed = seed
    if chosen_seed is None:  # resume an unfinished pass of the same plan (the job set ignores the seed)
        family = BenchRequest(agent, tuple(interleave(configs, task_ids, runs, 0)), 0, backend,
                              model_id).family_key(bench.suite.suite_hash, bench.fixture_hash, bench.caps)
        with store.session() as session:
            unfinished = find_resumable_pass(session, family)
            chosen_seed = seed_of(unfinished) if unfinished is not None else random.SystemRandom().randrange(2**31)
    request = BenchRequest(agent, tuple(interleave(configs, task_ids, runs, chosen_seed)), chosen_seed, backend,
                           model_id, budget_tokens=budget)
    scheduler = BenchScheduler(store, bench, concurrency=settings.concurrency if concurrency is None else concurrency,
                               max_consecutive_infra=max_consecutive_infra, progress=progress)
    try:
        outcome = scheduler.run_request(request)
    except BenchAborted as exc:
        if exc.outcome is None:  # aborted before any job ran: nothing to report but the error
            raise
        outcome = exc.outcome  # the report shows what ran before the abort; the CLI exits 1
    keys = [config_key(c) for c in configs]
    with store.session() as session:
        share = spend_share(session)
    comparisons = compare(outcome.runs, keys[0], keys[1:])
    return BenchReport(agent=agent, backend=backend, model=model_id, seed=chosen_seed, configs=keys,
                       outcome=outcome, summaries=summarize(outcome.runs), comparisons=comparisons,
                       spend=share, suites=suite_totals(comparisons))
