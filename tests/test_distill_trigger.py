"""The distill trigger: rolling p75 nearest-rank, ≥ 5 priors, each run queued at most once."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from warden.config import load_settings
from warden.distill import trigger
from warden.percentiles import nearest_rank
from warden.store.db import open_store
from warden.store.models import SessionRun


def test_nearest_rank() -> None:
    assert nearest_rank([1, 2, 3, 4], 75) == 3
    assert nearest_rank([5, 1, 4, 2, 3], 75) == 4  # ceil(3.75) = 4th smallest
    assert nearest_rank([7], 75) == 7
    assert nearest_rank(list(range(1, 101)), 75) == 75
    with pytest.raises(ValueError):
        nearest_rank([], 75)


def test_decide_needs_five_priors_and_strictly_above_p75() -> None:
    assert not trigger.decide(1e9, [1, 2, 3, 4]).expensive
    decision = trigger.decide(5, [1, 2, 3, 4, 5])  # p75 of 5 values = 4th = 4
    assert decision.expensive and decision.threshold == 4 and decision.priors == 5
    assert not trigger.decide(4, [1, 2, 3, 4, 5]).expensive


def test_window_is_the_last_fifty() -> None:
    recent = [10.0] * 50
    old_expensive = [1e9] * 100
    decision = trigger.decide(11, recent + old_expensive)  # most recent first
    assert decision.expensive and decision.priors == 50


def _run(n: int, agent: str, cost: float, *, completed: bool = True, day: int = 0) -> SessionRun:
    return SessionRun(run_key=f"s{n}:{agent}", session_id=f"s{n}", agent=agent, weighted_tokens=cost,
                      completed=completed, started_at=datetime(2026, 1, 1) + timedelta(days=day))


@pytest.fixture
def store():
    return open_store(load_settings())


def test_queue_if_expensive_queues_once(store, tmp_path: Path) -> None:
    settings = load_settings()
    with store.session() as session:
        for i in range(6):
            session.add(_run(i, "coder", 1000 + i, day=i))
        session.add(_run(99, "coder", 10**9, completed=False, day=1))  # incomplete: not a prior
        session.add(_run(98, "other", 10**9, day=1))  # another agent: not a prior
        expensive = _run(100, "coder", 5000, day=10)
        cheap = _run(101, "coder", 1001, day=11)
        session.add_all([expensive, cheap])
        session.flush()
        assert trigger.queue_if_expensive(session, expensive, settings)
        assert expensive.distill_state == "queued"
        assert not trigger.queue_if_expensive(session, cheap, settings)
        assert cheap.distill_state is None
        # hooks fire every turn: a queued (or done) run is never queued again
        assert not trigger.queue_if_expensive(session, expensive, settings)
        expensive.distill_state = "done"
        assert not trigger.queue_if_expensive(session, expensive, settings)
        assert trigger.evaluate(session, expensive, settings).reason == "already done"


def test_too_few_priors_and_placeholder_runs(store) -> None:
    settings = load_settings()
    with store.session() as session:
        for i in range(4):
            session.add(_run(i, "coder", 1000, day=i))
        run = _run(50, "coder", 10**8, day=9)
        session.add(run)
        session.flush()
        assert not trigger.queue_if_expensive(session, run, settings)
        session.add(_run(5, "coder", 1000, day=5))
        session.flush()
        assert trigger.queue_if_expensive(session, run, settings)
        flagged = _run(51, "coder", 10**8, day=9)
        flagged.placeholder_output = True
        session.add(flagged)
        session.flush()
        assert not trigger.queue_if_expensive(session, flagged, settings)


def test_main_sessions_need_a_bench_suite(store, tmp_path: Path) -> None:
    settings = replace(load_settings(), golden_dir=tmp_path / "golden")
    with store.session() as session:
        for i in range(6):
            session.add(_run(i, "main", 1000, day=i))
        run = _run(60, "main", 10**7, day=9)
        session.add(run)
        session.flush()
        assert not trigger.queue_if_expensive(session, run, settings)
        assert trigger.evaluate(session, run, settings).reason == "main session without a bench suite"
        (tmp_path / "golden" / "main").mkdir(parents=True)
        assert trigger.queue_if_expensive(session, run, settings)


def test_stored_priors_are_the_last_fifty_before_the_run(store) -> None:
    """The query side of the window: the 50 most recent completed runs started before this one."""
    settings = load_settings()
    with store.session() as session:
        for i in range(10):  # old and very expensive: outside the window
            session.add(_run(i, "coder", 10**9, day=i))
        for i in range(10, 60):
            session.add(_run(i, "coder", 1000 + i, day=i))
        session.add(_run(200, "coder", 10**9, day=200))  # started after the run: not a prior
        run = _run(100, "coder", 1100, day=100)
        session.add(run)
        session.flush()
        priors = trigger.prior_costs(session, run)
        assert len(priors) == 50 and max(priors) < 10**9 and priors[0] == 1059  # most recent first
        decision = trigger.evaluate(session, run, settings)
        assert decision.expensive and decision.priors == 50 and decision.threshold == 1047  # 38th of 50


def test_undated_runs_come_after_the_dated_ones_and_fill_the_window(store) -> None:
    with store.session() as session:
        for i in range(3):
            session.add(_run(i, "coder", 100 + i, day=i))
        for i in range(3, 6):
            undated = _run(i, "coder", 500 + i)
            undated.started_at = None
            session.add(undated)
        run = _run(50, "coder", 1, day=50)
        session.add(run)
        session.flush()
        assert trigger.prior_costs(session, run) == [102, 101, 100, 505, 504, 503]
        assert trigger.prior_costs(session, run, window=2) == [102, 101]


def test_the_priors_are_read_through_the_index_without_sorting_the_agents_history(store) -> None:
    """Each ingested run is priced this way: a sort of all of the agent's runs per run made a
    long history quadratic. Both queries must be index ranges (SQLite's plan says so)."""
    from sqlalchemy import event

    statements: list[tuple[str, object]] = []
    with store.session() as session:
        if session.bind.dialect.name != "sqlite":
            pytest.skip("SQLite's query plan")
        run = _run(1, "coder", 1, day=1)
        session.add(run)
        session.flush()
        connection = session.connection()
        listener = lambda conn, cursor, sql, params, context, many: statements.append((sql, params))  # noqa: E731
        event.listen(connection, "before_cursor_execute", listener)
        trigger.prior_costs(session, run)
        event.remove(connection, "before_cursor_execute", listener)
        assert len(statements) == 2
        for sql, params in statements:
            plan = " ".join(str(row[-1]) for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
            assert "USING INDEX ix_session_runs_agent_started" in plan and "TEMP B-TREE" not in plan, plan


def test_status_shows_the_p75_the_trigger_decides_on(store) -> None:
    """Both say "p75": a run costing 900 must not look above p75 in status (linear
    interpolation gave 850) while the trigger, on nearest rank, said 900 <= p75 1000."""
    from warden.ingest.collector import status

    costs = [100, 200, 300, 400, 1000, 2000]
    with store.session() as session:
        session.add_all([_run(i, "coder", c, day=i) for i, c in enumerate(costs)])
        session.commit()
        shown = status(session)
    row = next(a for a in shown["agents"] if a["agent"] == "coder")
    assert row["p75_weighted_tokens"] == trigger.decide(900, costs).threshold == 1000


def test_status_shows_the_threshold_the_trigger_compares_a_new_run_with(store, capsys) -> None:
    """Status's p75 is of all runs; beside it, the trigger's own: the p75 of the last completed,
    trusted runs — none until there are MIN_PRIORS of them (incomplete and placeholder runs do
    not count)."""
    from warden.cli.app import main
    from warden.ingest.collector import status

    with store.session() as session:
        session.add_all([_run(i, "coder", c, day=i) for i, c in enumerate([100, 200, 300, 400])])
        session.add(_run(10, "coder", 9000, completed=False, day=10))
        untrusted = _run(11, "coder", 8000, day=11)
        untrusted.placeholder_output = True
        session.add(untrusted)
        session.commit()
        row = next(a for a in status(session)["agents"] if a["agent"] == "coder")
        assert row["p75_weighted_tokens"] == 8000  # all six runs
        assert row["trigger_p75_weighted_tokens"] is None and row["trigger_runs"] == 4
        session.add(_run(12, "coder", 500, day=12))
        session.commit()
        row = next(a for a in status(session)["agents"] if a["agent"] == "coder")
    assert row["trigger_runs"] == 5
    assert row["trigger_p75_weighted_tokens"] == trigger.decide(0, [500, 400, 300, 200, 100]).threshold == 400
    assert main(["status"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "distill trigger (a new run is queued above the p75 of the agent's last 50 completed runs): coder 400" in out
