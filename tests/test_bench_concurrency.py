"""Two benches of one pass at once: the second refuses while the first's runner lives, and every
job is claimed with a compare-and-set, so no job runs twice and no run is paid for and orphaned.
Also: a resumed pass's budget message names the earlier attempts' spend, and the reference of a
bench is the configuration written first (`--rules none --active` compares against no rules)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

import warden.bench.scheduler as scheduler
from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench, standard_request
from warden.bench.scheduler import BenchBusy, BenchScheduler
from warden.cli.app import main
from warden.config import load_settings
from warden.names import pid_namespace
from warden.store.db import open_store
from warden.store.locks import LockBusy
from warden.store.models import BenchJob, BenchPass, BenchRun, Rule, utcnow

TESTS = Path(__file__).resolve().parent

# A `warden bench` process on the fake backend. With GATE set, its first run says so (GATE.started)
# and waits for GATE.release: the test starts the second bench while the first is mid-pass.
CHILD = r"""
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import warden.bench.scheduler as scheduler
from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
from warden.cli.app import main

gate = os.environ.get("GATE")

class Gated(FakeBackend):
    def run(self, *args, **kwargs):
        if gate and not Path(gate + ".started").exists():
            Path(gate + ".started").touch()
            deadline = time.monotonic() + 60
            while not Path(gate + ".release").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return super().run(*args, **kwargs)

scheduler.open_workbench = lambda settings, agent, backend, model=None, **o: (
    make_workbench(Path(sys.argv[2]), Gated), MODEL)
sys.exit(main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "5", "--concurrency", "1", "--json"]))
"""


@pytest.fixture
def store():
    return open_store(load_settings())


def count(store, model, *where) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def assert_one_run_per_job(store, jobs: int) -> None:
    """As many stored runs as jobs, each pointed at by its job: nothing ran twice, nothing orphaned."""
    with store.session() as s:
        runs = s.scalars(select(BenchRun.id)).all()
        pointed = s.scalars(select(BenchJob.bench_run_id)).all()
        statuses = s.scalars(select(BenchJob.status)).all()
    assert len(statuses) == jobs and set(statuses) == {"done"}
    assert len(runs) == jobs and sorted(runs) == sorted(pointed)


BUSY_LINE = "warden: another warden process is running bench pass #1 (pid {pid} on {host}); run again when it ends"


def test_a_second_bench_process_on_a_running_pass_refuses_in_one_line(tmp_path):
    gate = tmp_path / "gate"
    args = [sys.executable, "-c", CHILD, str(TESTS), str(tmp_path)]
    first = subprocess.Popen(args, env={**os.environ, "GATE": str(gate)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: Path(f"{gate}.started").exists() or first.poll() is not None, "the first bench's first run")
        assert first.poll() is None, first.stderr.read()
        second = subprocess.run(args, capture_output=True, text=True, timeout=120)
        Path(f"{gate}.release").touch()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    report = json.loads(out)
    assert report["status"] == "done" and report["executed"] == report["jobs"] == 3
    assert second.returncode == 1, second.stdout
    assert second.stdout == ""
    assert second.stderr.strip() == BUSY_LINE.format(pid=first.pid, host=socket.gethostname())
    store = open_store(load_settings())
    assert_one_run_per_job(store, 3)
    assert count(store, BenchPass) == 1


@pytest.mark.slow
def test_the_reviewers_repro_on_the_sim_two_benches_one_pass(tmp_path):
    """`warden bench` twice at once on the real sim backend (the review's exact commands)."""
    cmd = [sys.executable, "-m", "warden", "bench", "--agent", "docs", "--runs", "1", "--seed", "5",
           "--concurrency", "1", "--json"]
    store = open_store(load_settings())
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def first_run_started() -> bool:
            assert first.poll() is None, first.stderr.read()
            try:
                return count(store, BenchJob, BenchJob.status == "running") > 0
            except Exception:  # the first process may still be creating the database
                return False

        wait_for(first_run_started, "the first bench to start a run", timeout=120)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    jobs = json.loads(out)["jobs"]
    assert second.returncode == 1 and second.stdout == ""
    assert second.stderr.strip() == BUSY_LINE.format(pid=first.pid, host=socket.gethostname())
    assert_one_run_per_job(store, jobs)


def _running_pass(store, tmp_path, runner: dict, seed: int = 31) -> tuple[BenchScheduler, int]:
    """A planned pass marked running under ``runner``, one job left "running" by it."""
    bench = make_workbench(tmp_path, FakeBackend)
    sched = BenchScheduler(store, bench, concurrency=1)
    pass_id, _ = sched.plan(replace(standard_request(bench), seed=seed))
    with store.session() as s:
        s.get(BenchPass, pass_id).status = "running"
        s.get(BenchPass, pass_id).note = json.dumps({"seed": seed, "runner": runner})
        s.scalars(select(BenchJob).where(BenchJob.pass_id == pass_id)).first().status = "running"
    return sched, pass_id


def here(pid: int, **extra) -> dict:
    return {"host": socket.gethostname(), "pidns": pid_namespace(), "pid": pid, **extra}


def test_a_live_runner_on_this_host_makes_the_pass_busy_a_dead_one_is_resumed(store, tmp_path):
    sched, pass_id = _running_pass(store, tmp_path, here(os.getppid()))  # our parent lives
    with pytest.raises(BenchBusy) as busy:
        sched.run(pass_id)
    assert isinstance(busy.value, LockBusy) and busy.value.exit_code == 1
    assert str(busy.value) == (f"another warden process is running bench pass #{pass_id} (pid {os.getppid()} on "
                               f"{socket.gethostname()}); run again when it ends")
    assert count(store, BenchRun) == 0
    with pytest.raises(BenchBusy):  # the second bench's plan refuses too, before touching the pass
        sched.plan(replace(standard_request(sched.bench), seed=31))

    dead = subprocess.Popen(["true"])
    dead.wait()
    sched, pass_id = _running_pass(store, tmp_path, here(dead.pid), seed=32)
    outcome = sched.run(pass_id)
    assert outcome.status == "done" and outcome.executed == 6  # the dead runner's "running" job too
    # a live pid that is not the recorded process (its start time differs: the pid was reused)
    sched, pass_id = _running_pass(store, tmp_path, here(os.getppid(), started="not-that-process"), seed=33)
    assert sched.run(pass_id).executed == 6


def test_another_hosts_runner_is_alive_while_its_pass_moves_on_sqlite(store, tmp_path):
    """SQLite: a runner on another host (or PID namespace) cannot be asked; while its pass moved
    within the silence window it is taken for alive, after it for gone."""
    sched, pass_id = _running_pass(store, tmp_path, {"host": "elsewhere", "pidns": "1", "pid": 4242,
                                                     "claimed_at": utcnow().isoformat()})
    with pytest.raises(BenchBusy, match=r"pid 4242 on elsewhere"):
        sched.run(pass_id)
    long_ago = utcnow() - timedelta(hours=3)
    with store.session() as s:
        s.get(BenchPass, pass_id).note = json.dumps({"runner": {"host": "elsewhere", "pidns": "1", "pid": 4242,
                                                                "claimed_at": long_ago.isoformat()}})
        s.execute(update(BenchJob).where(BenchJob.pass_id == pass_id).values(updated_at=long_ago))
    assert sched.run(pass_id).executed == 6


def test_claim_is_a_compare_and_set(any_store, tmp_path):
    """Two claimers of one job: one wins. On SQLite always, and on PostgreSQL when
    WARDEN_TEST_DATABASE_URL is set (READ COMMITTED re-checks the WHERE on the row it waited for)."""
    bench = make_workbench(tmp_path, FakeBackend)
    a = BenchScheduler(any_store, bench)
    b = BenchScheduler(any_store, bench)
    pass_id, _ = a.plan(standard_request(bench))
    with any_store.session() as s:
        job_ids = s.scalars(select(BenchJob.id).where(BenchJob.pass_id == pass_id).order_by(BenchJob.id)).all()
    assert a._claim_job(job_ids[0]) is True
    assert b._claim_job(job_ids[0]) is False  # already running
    assert a._claim_job(job_ids[0]) is False
    with any_store.session() as s:
        s.get(BenchJob, job_ids[1]).status = "done"
        s.get(BenchJob, job_ids[2]).status = "infra_error"
    assert b._claim_job(job_ids[1]) is False  # done: never again
    assert b._claim_job(job_ids[2]) is True  # an infra error is retried

    # Many claimers at once, each job: exactly one winner per job.
    contested = job_ids[3:]
    wins: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def claimer() -> None:
        mine = BenchScheduler(any_store, bench)
        barrier.wait()
        for job_id in contested:
            if mine._claim_job(job_id):
                with lock:
                    wins.append(job_id)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(wins) == sorted(contested)


def test_two_schedulers_executing_one_pass_never_run_a_job_twice(any_store, tmp_path, monkeypatch):
    """Even when both got past the pass check (two hosts on one PostgreSQL database at the same
    instant), the job claims split the pass: one run per job, none orphaned."""
    bench = make_workbench(tmp_path, lambda: FakeBackend(sleep_s=0.05))
    pass_id, _ = BenchScheduler(any_store, bench).plan(standard_request(bench))
    # both "win" the pass (PostgreSQL: its lock too), as if each had found its runner gone
    monkeypatch.setattr(BenchScheduler, "_claim_pass", lambda self, pass_id, budget: None)
    monkeypatch.setattr(BenchScheduler, "_pass_guard", lambda self, pass_id, runner: contextlib.nullcontext())
    with any_store.session() as s:
        s.get(BenchPass, pass_id).status = "running"
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def runner() -> None:
        try:
            barrier.wait()
            BenchScheduler(any_store, bench, concurrency=2).run(pass_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=runner) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert_one_run_per_job(any_store, 6)


@pytest.mark.skipif(not os.environ.get("WARDEN_TEST_DATABASE_URL"), reason="needs WARDEN_TEST_DATABASE_URL")
def test_on_postgresql_a_runner_on_another_host_holds_its_pass(tmp_path):
    """PostgreSQL: the runner holds an advisory lock on its pass for the attempt, so a bench on any
    host sharing the database sees it alive; once it is gone (lock released) the pass resumes."""
    from conftest import private_postgres_schema
    from warden.store import db
    from warden.store.locks import exclusive

    with private_postgres_schema(os.environ["WARDEN_TEST_DATABASE_URL"], "warden_bench") as engine:
        db.upgrade(engine)
        pg = db.Store(engine)
        sched, pass_id = _running_pass(pg, tmp_path, {"host": "elsewhere", "pidns": "1", "pid": 4242,
                                                      "claimed_at": (utcnow() - timedelta(hours=3)).isoformat()})
        with exclusive(pg, f"bench-pass-{pass_id}", "held"):  # the other host's live runner
            with pytest.raises(BenchBusy, match=r"pid 4242 on elsewhere"):
                sched.run(pass_id)
        assert sched.run(pass_id).executed == 6  # the lock is free: that runner is gone


# ---------------------------------------------------------------- the CLI: budget message, reference


@pytest.fixture
def fake_bench(tmp_path, monkeypatch):
    def fake_open(settings, agent, backend, model=None, **options):
        return make_workbench(tmp_path, FakeBackend), MODEL

    monkeypatch.setattr(scheduler, "open_workbench", fake_open)


def test_a_resumed_pass_says_its_budget_counts_the_earlier_attempts(fake_bench, capsys):
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "9", "--budget", "1", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "partial" and first["executed"] >= 1
    spent = first["spent_weighted"]
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "9", "--budget", str(int(spent * 1.2)),
                 "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["resumed"] and again["executed"] == 0 and again["spent_weighted"] == 0
    message = again["message"]
    assert f"{spent:,.0f} spent by this pass's earlier attempts and 0 by this one" in message
    assert "the budget covers the whole pass" in message


def add_active_rule() -> int:
    with open_store(load_settings()).session() as s:
        rule = Rule(agent=AGENT, body="Grep for the symbol before opening any file.", state="active")
        s.add(rule)
        s.flush()
        return rule.id


@pytest.mark.parametrize("order, reference_is_active", [
    (["--rules", "none", "--active"], False),
    (["--active", "--rules", "none"], True),
])
def test_the_reference_is_the_configuration_written_first(fake_bench, capsys, order, reference_is_active):
    active = str(add_active_rule())
    assert main(["bench", "--agent", AGENT, *order, "--runs", "1", "--seed", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["configs"] == ([active, ""] if reference_is_active else ["", active])
    assert {c["reference"] for c in report["comparisons"]} == {report["configs"][0]}


def test_two_processes_creating_one_new_pass_at_once_keep_the_older(any_store, tmp_path, monkeypatch):
    """Both looked for the plan's pass, found none and created one: the newer is dropped (it has no
    runs yet) and both go on with the older, so the claim then lets only one of them run it."""
    bench = make_workbench(tmp_path, FakeBackend)
    sched = BenchScheduler(any_store, bench)
    request = standard_request(bench)
    original = BenchScheduler._create_pass
    other: list[int] = []

    def racing(self, req, key):  # the other process's pass commits between our lookup and our insert
        if not other:
            other.append(original(self, req, key))
        return original(self, req, key)

    monkeypatch.setattr(BenchScheduler, "_create_pass", racing)
    pass_id, resumed = sched.plan(request)
    assert (pass_id, resumed) == (other[0], True)
    with any_store.session() as s:
        assert s.scalars(select(BenchPass.id)).all() == [other[0]]
        assert s.scalar(select(func.count()).select_from(BenchJob)) == len(request.jobs)
