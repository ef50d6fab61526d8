"""Ground truth on the simulated agent: a rule set's expected cost and saving on a suite.

Because the sim's behaviour model is known and seeded, averaging many seeds estimates what a
rule set *truly* does to its cost — the reference that the selector's calibration and the
whole loop's learning-efficacy benchmarks compare warden's decisions against. The figures are
measured on the simulation (backend ``sim``, model ``sim-<persona>-1``), never on a real model,
and every result says so in its ``label``.

Each seed plays every task twice on fresh copies of the fixture — without the rules and with
them (common random numbers: the same seed draws the same habits, derailments and slips for
both arms, so the paired difference isolates the rules' effect, rent included). Costs are
cost-weighted tokens (the gate metric).

``fast=True`` (the default here) skips the real success check: completion is the sim's own
knowledge of whether the whole reference fix was applied (every edit accepted by the real edit
tool). That saves one subprocess per run and agrees with the check whenever the task's check
tests exactly its reference fix — which the golden-task tests enforce. Costs are identical in
both modes: every tool still really runs. Pass ``fast=False`` to run the checks.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from warden.bench.agents.sim import persona_named
from warden.bench.agents.sim_backend import SimBackend
from warden.bench.fixture import make_run_copy
from warden.bench.results import RunCaps, RunResult
from warden.bench.tasks import AgentSuite
from warden.ingest.pricing import DEFAULT_TABLE
from warden.select.memory import MemoryRule, render_memory

LABEL = "ground truth measured on the simulated agent (sim backend), not on a real model"


def system_prompt_for(suite: AgentSuite, rule_bodies: Sequence[str]) -> str:
    """agent.md + the MEMORY.md compiled from exactly ``rule_bodies`` (as a bench run has it)."""
    rules = [MemoryRule(i + 1, body) for i, body in enumerate(rule_bodies)]
    return suite.system_prompt + "\n\n" + render_memory(suite.agent, rules)


def true_expected_cost(suite: AgentSuite, rule_bodies: Sequence[str], seeds: Iterable[int] | int, *,
                       fixture_dir: Path | None = None, persona: str = "naive", fast: bool = True,
                       caps: RunCaps | None = None,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Expected cost with and without ``rule_bodies`` on ``suite``, averaged over ``seeds``.

    Returns a JSON-able dict: per task the mean cost of each arm, the mean paired saving
    (without − with; positive = the rules save) and its share, completion rates; and the same
    for the suite as a task-weighted sum of per-task means. ``seeds`` is a list or a count
    (``range(n)``); ``fixture_dir`` defaults to the settings' frozen fixture."""
    if fixture_dir is None:
        from warden.config import load_settings

        fixture_dir = load_settings().fixture_dir
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        raise ValueError("at least one seed is needed")
    tasks = [t for t in suite.tasks if t.sim is not None]
    if not tasks:
        raise ValueError(f"agent {suite.agent} has no golden tasks with a sim: block")
    model = persona_named(persona).model
    arms = {"without": system_prompt_for(suite, []), "with": system_prompt_for(suite, rule_bodies)}
    backend = SimBackend(persona, fast=fast)
    runs: dict[tuple[str, str], list[RunResult]] = {}
    total_runs, done = len(tasks) * len(seed_list) * 2, 0
    work = Path(tempfile.mkdtemp(prefix="warden-sim-truth-"))
    try:
        for task in tasks:
            for seed in seed_list:
                for arm, system in arms.items():
                    copy = make_run_copy(fixture_dir, work / f"{task.id}-{seed}-{arm}")
                    try:
                        runs.setdefault((task.id, arm), []).append(
                            backend.run(task, copy, system, seed, caps or RunCaps()))
                    finally:
                        shutil.rmtree(copy, ignore_errors=True)
                    done += 1
                    if progress:
                        progress(done, total_runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def cost(result: RunResult) -> float:
        return DEFAULT_TABLE.weighted_tokens(result.model, result.usage)

    per_task: dict[str, Any] = {}
    totals = {"without": 0.0, "with": 0.0, "saving": 0.0}
    completion = {"without": [], "with": []}
    infra = 0
    for task in tasks:
        without, with_ = runs[(task.id, "without")], runs[(task.id, "with")]
        savings = [cost(a) - cost(b) for a, b in zip(without, with_)]
        entry = {"weight": task.weight}
        for arm, results in (("without", without), ("with", with_)):
            costs = [cost(r) for r in results]
            entry[arm] = {"mean_weighted_tokens": round(statistics.mean(costs), 1),
                          "cv": round(statistics.stdev(costs) / statistics.mean(costs), 3) if len(costs) > 1 and statistics.mean(costs) else 0.0,
                          "completion_rate": round(sum(r.completed for r in results) / len(results), 3)}
            completion[arm].extend(r.completed for r in results)
            infra += sum(r.outcome.value == "infra_error" for r in results)
            totals[arm] += task.weight * statistics.mean(costs)
        mean_saving = statistics.mean(savings)
        entry["saving"] = round(mean_saving, 1)
        entry["saving_share"] = round(mean_saving / entry["without"]["mean_weighted_tokens"], 4) if entry["without"]["mean_weighted_tokens"] else 0.0
        totals["saving"] += task.weight * mean_saving
        per_task[task.id] = entry
    return {
        "label": LABEL, "backend": "sim", "model": model, "agent": suite.agent,
        "suite_hash": suite.suite_hash, "rules": list(rule_bodies), "seeds": seed_list, "fast": fast,
        "tasks": per_task,
        "suite": {"without_weighted_tokens": round(totals["without"], 1),
                  "with_weighted_tokens": round(totals["with"], 1),
                  "saving": round(totals["saving"], 1),
                  "saving_share": round(totals["saving"] / totals["without"], 4) if totals["without"] else 0.0,
                  "completion_without": round(sum(completion["without"]) / len(completion["without"]), 3),
                  "completion_with": round(sum(completion["with"]) / len(completion["with"]), 3),
                  "infra_errors": infra},
    }
