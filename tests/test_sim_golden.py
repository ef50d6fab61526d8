"""The naive sim completes every shipped golden task (real fixture copy, real tools, real check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warden.bench.agents.sim_backend import SimBackend
from warden.bench.fixture import make_run_copy
from warden.bench.results import Outcome, RunCaps
from warden.bench.tasks import load_all_suites
from warden.config import load_settings
from warden.select.memory import render_memory

pytestmark = pytest.mark.slow  # one real run per golden task (~20 runs, each with its check)

SETTINGS = load_settings()
SUITES = load_all_suites(SETTINGS.golden_dir, SETTINGS.fixture_dir) if SETTINGS.golden_dir.is_dir() else {}
TASKS = [(suite, task) for suite in SUITES.values() for task in suite.tasks]


@pytest.mark.parametrize("suite,task", TASKS, ids=[t.id for _, t in TASKS])
def test_naive_sim_completes_the_golden_task(suite, task, tmp_path: Path) -> None:
    copy = make_run_copy(SETTINGS.fixture_dir, tmp_path / "copy")
    system = suite.system_prompt + "\n\n" + render_memory(suite.agent, [])
    result = SimBackend().run(task, copy, system, 0, RunCaps())
    assert result.outcome == Outcome.COMPLETED, result.error
    assert result.model == "sim-naive-1" and result.usage.cache_read > 0


def test_every_agent_has_golden_tasks_the_sim_can_play() -> None:
    assert len(SUITES) >= 4
    assert all(task.sim is not None for _, task in TASKS)
