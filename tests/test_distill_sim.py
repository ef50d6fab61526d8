"""On the sim backend's real-work sessions of a naive agent (SIMULATED Claude Code transcripts):
collect queues the expensive runs, the heuristic distiller proposes a rule for the run's most
expensive habit — one the sim recognises — and distilling again proposes nothing new."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_support import AGENT_MD, TWO_EDIT_TASK, make_project

from warden.bench.agents.sim_sessions import play_sessions
from warden.bench.fixture import write_manifest
from warden.bench.tasks import AgentSuite
from warden.config import load_settings
from warden.distill.service import distill_runs
from warden.habits import HABITS_BY_WASTE, habits_named_by
from warden.ingest.collector import collect_paths
from warden.store.db import open_store
from warden.store.models import Rule, SessionRun

pytestmark = pytest.mark.slow  # plays 8 simulated sessions (real tools in a real copy)


@pytest.fixture(scope="module")
def naive_sessions(tmp_path_factory: pytest.TempPathFactory):
    fixture = make_project(tmp_path_factory.mktemp("fixture") / "shop-repo")
    write_manifest(fixture)
    suites = {"backend": AgentSuite("backend", AGENT_MD, None, (TWO_EDIT_TASK,), "hash")}
    out = tmp_path_factory.mktemp("sessions")
    return play_sessions(out, suites, fixture, sessions=8, seed=0, delegate_share=1.0, persona="naive")


def test_naive_agent_gets_a_rule_for_its_most_expensive_habit(naive_sessions) -> None:
    settings = load_settings()
    store = open_store(settings)
    for played in naive_sessions:  # as the hooks would: one session after the other
        main = Path(played.path)
        collect_paths(settings, [main, main.with_suffix("")], store=store)
    with store.session() as session:
        runs = session.query(SessionRun).filter(SessionRun.agent == "backend").all()
        assert len(runs) == 8 and all(r.completed for r in runs)
        queued = [r.id for r in runs if r.distill_state == "queued"]
        assert queued, "no backend run above the rolling p75"
        # main sessions have no bench suite here: never queued
        assert not session.query(SessionRun).filter(SessionRun.agent == "main",
                                                    SessionRun.distill_state.is_not(None)).count()
    reports = distill_runs(store, settings, agent="backend")
    assert [r.run_id for r in reports] == sorted(queued)
    first = reports[0]
    top = first.findings[0]
    assert top.saving_tokens == max(f.saving_tokens for f in first.findings)
    assert first.admitted[0]["body"] == HABITS_BY_WASTE[top.waste_kind].rule_sentence
    assert HABITS_BY_WASTE[top.waste_kind] in habits_named_by(first.admitted[0]["body"])  # the sim obeys it
    with store.session() as session:
        stored = session.query(Rule).count()
        assert stored >= 1
    # distilling the same runs again proposes nothing new
    for run_id in queued:
        [again] = distill_runs(store, settings, run_id=run_id)
        assert again.admitted == [] and all("near-duplicate" in r.reason for r in again.refused)
    with store.session() as session:
        assert session.query(Rule).count() == stored
