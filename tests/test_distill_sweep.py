"""The nightly trigger sweep: runs ingested before their priors get a fair, final look."""

from __future__ import annotations

from datetime import datetime, timedelta

from warden.config import load_settings
from warden.distill.trigger import sweep
from warden.store.db import open_store
from warden.store.models import SessionRun


def test_sweep_queues_expensive_runs_whatever_the_ingest_order(warden_home) -> None:
    settings = load_settings()
    store = open_store(settings)
    t0 = datetime(2026, 11, 1)
    costs = [100, 110, 90, 105, 95, 400, 100, 98]  # the 6th run is expensive
    with store.session() as s:
        # Ingested newest first, as a backfill in path order may do: at ingest time the expensive
        # run had no priors stored, so the hook-time trigger could not queue it.
        for i in reversed(range(len(costs))):
            s.add(SessionRun(run_key=f"s{i}:a", session_id=f"s{i}", agent_id="a", agent="backend",
                             started_at=t0 + timedelta(hours=i), completed=True, weighted_tokens=float(costs[i])))
        s.add(SessionRun(run_key="m:main", session_id="m", agent="main", started_at=t0, completed=True,
                         weighted_tokens=1e9))
    with store.session() as s:
        assert sweep(s, settings) == 1
    with store.session() as s:
        states = {r.run_key: r.distill_state for r in s.query(SessionRun)}
    assert states["s5:a"] == "queued"
    assert states["m:main"] == "skipped"  # main sessions without a bench suite are never distilled
    assert all(states[f"s{i}:a"] is None for i in range(5))  # too few priors: left for later
    assert states["s6:a"] == states["s7:a"] == "skipped"
    with store.session() as s:
        assert sweep(s, settings) == 0  # each run is queued at most once


def test_a_dry_run_shows_what_the_real_distill_would_sweep_in_and_writes_nothing(warden_home) -> None:
    """`distill --dry-run` answers "what would distill do now": runs the sweep would queue are
    in it, and nothing (queue state included) is written."""
    from warden.distill.service import distill_runs

    settings = load_settings()
    store = open_store(settings)
    t0 = datetime(2026, 11, 1)
    costs = [100, 110, 90, 105, 95, 400, 100, 98]
    with store.session() as s:
        for i in reversed(range(len(costs))):
            s.add(SessionRun(run_key=f"s{i}:a", session_id=f"s{i}", agent_id="a", agent="backend",
                             started_at=t0 + timedelta(hours=i), completed=True, weighted_tokens=float(costs[i])))
    dry = distill_runs(store, settings, dry_run=True)
    assert [r.run_key for r in dry] == ["s5:a"]
    with store.session() as s:
        assert {r.distill_state for r in s.query(SessionRun)} == {None}  # nothing written
    assert [r.run_key for r in distill_runs(store, settings)] == ["s5:a"]
