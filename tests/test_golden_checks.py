"""Every golden task's success check, run for real in throwaway copies of the frozen fixture:
it FAILS on the pristine copy (a vacuous check is a bug) and PASSES once the task's reference
fix (its ``sim.edits``) is applied; the task's targeted ``test_command`` passes after the fix.

Checks run through the harness's own ``run_success_check`` (shell, sandboxed environment), in a
small thread pool so the whole suite stays fast.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from warden.bench.agents.harness import run_success_check
from warden.bench.agents.tools import run_process, sandbox_env
from warden.bench.fixture import make_run_copy
from warden.bench.tasks import GoldenTask, apply_reference_edits, load_all_suites

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "golden_tasks"
FIXTURE = REPO / "fixture_repo"
TASKS: list[GoldenTask] = [t for s in load_all_suites(GOLDEN, FIXTURE).values() for t in s.tasks]


def _env() -> dict[str, str]:
    env = sandbox_env()
    # Third-party pytest plugins of warden's venv (hypothesis, xdist) are irrelevant to the
    # fixture and cost ~2 s of CPU per pytest start; the checks' verdicts do not depend on them.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


@dataclass
class Verdict:
    pristine_exit: int | None
    pristine_output: str
    fixed_exit: int | None
    fixed_output: str
    test_command_exit: int | None
    test_command_output: str


def _judge(task: GoldenTask, scratch: Path) -> Verdict:
    copy = make_run_copy(FIXTURE, scratch / task.id)
    env = _env()
    pristine = run_success_check(task, copy, env=env)
    apply_reference_edits(task, copy)
    fixed = run_success_check(task, copy, env=env)
    tests = run_process(task.sim.test_command, copy, timeout_s=task.timeout_s, env=env, shell=True)
    return Verdict(pristine.exit_code, pristine.output[-1500:], fixed.exit_code, fixed.output[-1500:],
                   tests.exit_code, tests.output[-1500:])


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Verdict]:
    scratch = tmp_path_factory.mktemp("golden-checks")
    workers = max(2, min(4, (os.cpu_count() or 2)))
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(lambda task: (task.id, _judge(task, scratch)), TASKS)
        return dict(results)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_check_fails_on_the_pristine_fixture(task: GoldenTask, verdicts: dict[str, Verdict]) -> None:
    verdict = verdicts[task.id]
    assert verdict.pristine_exit not in (0, None), (
        f"{task.id}: success_check passes (or hangs) on the untouched fixture — it is vacuous:\n"
        f"{verdict.pristine_output}")


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_check_passes_with_the_reference_fix(task: GoldenTask, verdicts: dict[str, Verdict]) -> None:
    verdict = verdicts[task.id]
    assert verdict.fixed_exit == 0, f"{task.id}: success_check fails after sim.edits:\n{verdict.fixed_output}"


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_targeted_tests_pass_with_the_reference_fix(task: GoldenTask, verdicts: dict[str, Verdict]) -> None:
    verdict = verdicts[task.id]
    assert verdict.test_command_exit == 0, (
        f"{task.id}: sim.test_command fails after sim.edits:\n{verdict.test_command_output}")


def test_the_fixture_suite_passes_on_a_pristine_copy(tmp_path: Path) -> None:
    """The fixture's own partial test suite is green as shipped (the flaws are untested ones)."""
    copy = make_run_copy(FIXTURE, tmp_path / "copy")
    result = run_process("python -m pytest -q -p no:cacheprovider", copy, timeout_s=120, env=_env(), shell=True)
    assert result.exit_code == 0, result.output[-2000:]
    assert " passed" in result.output and "error" not in result.output.lower()
