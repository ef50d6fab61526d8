"""Shared helpers for the scheduler tests: a fake agent backend, a tiny fixture and suite.

The fake backend is deterministic per seed and system prompt (like the sim): its cost grows
with the fixture bytes it "reads", shrinks when the memory holds a rule saying "grep", and it
proves it ran inside a real copy by editing a file there. It can be told to fail with infra
errors or to sleep (so a subprocess can be killed mid-pass).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sys
import time
from pathlib import Path

from warden.bench.results import CallUsage, Outcome, RunCaps, RunResult
from warden.bench.scheduler import BenchScheduler, Workbench
from warden.bench.tasks import AgentSuite, GoldenTask
from warden.ingest.pricing import Usage

AGENT = "fakeagent"
MODEL = "sim-fake-1"


class FakeBackend:
    name = "fake"

    def __init__(self, *, infra: bool = False, crash: bool = False, sleep_s: float = 0.0,
                 fail_on: str | None = None) -> None:
        self.infra = infra
        self.crash = crash
        self.sleep_s = sleep_s
        self.fail_on = fail_on  # a memory phrase that makes the check fail (a false economy)
        self.workdirs: list[Path] = []

    def run(self, task: GoldenTask, workdir: Path, system_prompt: str, seed: int, caps: RunCaps) -> RunResult:
        self.workdirs.append(workdir)
        if self.crash:
            raise ConnectionError("backend exploded")
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.infra:
            return RunResult(task.id, self.name, MODEL, seed, Outcome.INFRA_ERROR, False, 1, 0.01,
                             calls=[CallUsage(MODEL, Usage(input_tokens=100))], error="529 overloaded")
        target = workdir / "app.py"
        assert target.is_file(), "the run must see a copy of the fixture"
        target.write_text(target.read_text() + f"# fixed {task.id}\n")
        rng = random.Random(f"{seed}:{task.id}")
        size = sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file())
        reads = rng.randint(3, 6) if "grep" not in system_prompt.lower() else 1
        prompt_tokens = len(system_prompt) // 4
        calls = [CallUsage(MODEL, Usage(input_tokens=prompt_tokens + size * reads // 4 + i * 50,
                                        output_tokens=40 + rng.randint(0, 20), cache_read=200 * i))
                 for i in range(reads + 1)]
        failed = self.fail_on is not None and self.fail_on in system_prompt
        outcome = Outcome.TASK_FAILED if failed else Outcome.COMPLETED
        return RunResult(task.id, self.name, MODEL, seed, outcome, not failed, len(calls), 0.01, calls=calls)


def make_fixture(root: Path) -> Path:
    fixture = root / "fixture"
    fixture.mkdir(parents=True)
    (fixture / "app.py").write_text("def total(xs):\n    return sum(xs)\n" * 20)
    (fixture / "README.md").write_text("# tiny fixture\n" * 10)
    return fixture


def copy_fixture(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest)


def make_suite(n_tasks: int = 3) -> AgentSuite:
    tasks = tuple(GoldenTask(id=f"golden-{i:02d}", agent=AGENT, prompt=f"fix thing {i}",
                             success_check="true") for i in range(1, n_tasks + 1))
    digest = hashlib.sha256("|".join(t.id for t in tasks).encode()).hexdigest()
    return AgentSuite(agent=AGENT, system_prompt="You are a fake agent.", model=MODEL, tasks=tasks,
                      suite_hash=digest)


def make_workbench(tmp: Path, backend_factory, n_tasks: int = 3) -> Workbench:
    fixture = tmp / "fixture" if (tmp / "fixture").is_dir() else make_fixture(tmp)
    return Workbench(suite=make_suite(n_tasks), fixture_dir=fixture, fixture_hash="f" * 64,
                     copy_fixture=copy_fixture, backend_factory=backend_factory,
                     work_root=tmp / "runs")


class CommandBackend(FakeBackend):
    """The fake backend whose run first runs a command, as the sim runs pytest: it takes
    ``command_s`` and then writes into the copy and its TMPDIR, as a pytest run does at its end
    (``.pytest_cache``, its basetemp) — into directories that would be gone had its run been
    abandoned, re-creating them."""

    def __init__(self, command_s: float) -> None:
        super().__init__()
        self.command_s = command_s

    def run(self, task: GoldenTask, workdir: Path, system_prompt: str, seed: int, caps: RunCaps) -> RunResult:
        from warden.bench.agents.tools import run_process, run_tmpdir, sandbox_env

        with run_tmpdir() as tmp:
            run_process(f'sleep {self.command_s}; mkdir -p "$PWD/.pytest_cache" "$TMPDIR/pytest-of-x"',
                        workdir, timeout_s=60, env=sandbox_env(tmpdir=tmp), shell=True)
        return super().run(task, workdir, system_prompt, seed, caps)


def subprocess_main() -> None:  # pragma: no cover - runs in a child process
    """Run one pass of the standard plan with a slow backend; the test SIGKILLs us mid-pass.
    With a third argument "command", each run runs a command of that many seconds instead, and
    an interrupt waits 1 s for the runs in flight (less than one command takes)."""
    from warden.bench import scheduler
    from warden.config import load_settings
    from warden.store.db import open_store

    tmp = Path(sys.argv[1])
    sleep_s = float(sys.argv[2])
    store = open_store(load_settings())
    if sys.argv[3:] == ["command"]:
        scheduler._STOP_GRACE_S = 1.0
        bench = make_workbench(tmp, lambda: CommandBackend(sleep_s))
    else:
        bench = make_workbench(tmp, lambda: FakeBackend(sleep_s=sleep_s))
    request = standard_request(bench)
    BenchScheduler(store, bench, concurrency=1).run_request(request)
    print("finished", os.getpid())


def standard_request(bench: Workbench, rule_ids: tuple[int, ...] = ()):
    from warden.bench.scheduler import BenchRequest, interleave

    jobs = interleave([(), rule_ids] if rule_ids else [()], [t.id for t in bench.suite.tasks], 2, seed=11)
    return BenchRequest(agent=AGENT, jobs=tuple(jobs), seed=11, backend="fake", model=MODEL)


if __name__ == "__main__":
    subprocess_main()
