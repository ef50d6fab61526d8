"""The ``sim`` backend: the simulated agent (``sim.py``) driven by the real harness.

Per run it builds a fresh :class:`~warden.bench.agents.sim.SimAgent` (seeded with the run's
seed, holding the task's ``sim:`` block), puts it behind a :class:`SimTransport`, and hands the
REAL ``anthropic.Anthropic`` client wired to that transport to
:func:`warden.bench.agents.harness.run_task` — the same loop, tools, caps, retries, usage
accounting and success check as the ``anthropic`` backend. Results are labelled backend
``sim`` and model ``sim-<persona>-1``: a simulation, never a model's result.

``fast=True`` (ground-truth estimation, ``sim_truth.py``) skips the real success check: the
run's completion is the sim's own knowledge of whether it applied the whole reference fix
(every edit accepted by the real edit tool). Costs are unaffected — every tool still runs (a
task whose ``sim.test_command`` is its check string runs the real check instead).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from warden.bench.agents import register_backend
from warden.bench.agents.harness import RetryPolicy, run_task
from warden.bench.agents.sim import Persona, SimAgent, persona_named
from warden.bench.agents.sim_transport import SimTransport, sim_client
from warden.bench.results import Outcome, RunCaps, RunResult
from warden.bench.tasks import GoldenTask
from warden.config import Settings
from warden.errors import UsageError

DEFAULT_PERSONA = "naive"
_NO_CHECK = ":"  # the shell's no-op: what fast mode runs instead of the success check


def persona_for_model(model: str | None) -> Persona:
    """``None``/"sim" → naive; "sim-<persona>-<n>" or a bare persona name → that persona."""
    if not model or model == "sim":
        return persona_named(DEFAULT_PERSONA)
    name = model
    if name.startswith("sim-"):
        name = name.removeprefix("sim-").rsplit("-", 1)[0]
    try:
        return persona_named(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class SimBackend:
    """AgentBackend for the simulated agent. Safe to use from one thread at a time."""

    name = "sim"

    def __init__(self, persona: Persona | str | None = None, *, retry: RetryPolicy | None = None,
                 faults: dict[int, int] | None = None, fail_every: int | None = None,
                 fast: bool = False) -> None:
        self.persona = persona if isinstance(persona, Persona) else persona_for_model(persona)
        self.model = self.persona.model
        self.retry = retry
        self.faults = dict(faults or {})
        self.fail_every = fail_every
        self.fast = fast
        self.last_transport: SimTransport | None = None  # the last run's exchanges (sessions, tests)

    def run(self, task: GoldenTask, workdir: Path, system_prompt: str, seed: int,
            caps: RunCaps) -> RunResult:
        if task.sim is None:
            return RunResult(task_id=task.id, backend=self.name, model=self.model, seed=seed,
                             outcome=Outcome.INFRA_ERROR, completed=False, turns=0, duration_s=0.0,
                             error=f"task {task.id} has no sim: block; the sim backend cannot play it")
        agent = SimAgent(task.sim, task_id=task.id, prompt=task.prompt, seed=seed, persona=self.persona)
        transport = SimTransport(agent, faults=dict(self.faults), fail_every=self.fail_every)
        self.last_transport = transport
        # Fast mode swaps the check for a no-op — unless the agent's own test command IS the check
        # string (the toolbox allows exactly that string), where the swap would change its bytes.
        fast = self.fast and task.sim.test_command.strip() != task.success_check.strip()
        played = dataclasses.replace(task, success_check=_NO_CHECK) if fast else task
        # The harness's sandbox env keeps the tool output byte-stable: no pytest plugins of
        # warden's own environment, and a private TMPDIR per run (no shared pytest temp root).
        with sim_client(transport) as client:
            result = run_task(client, task=played, workdir=Path(workdir), system_prompt=system_prompt,
                              model=self.model, caps=caps, backend_name=self.name, seed=seed,
                              retry=self.retry)
        if fast and result.outcome in (Outcome.COMPLETED, Outcome.TASK_FAILED):
            done = agent.applied_all_edits
            result.completed = done
            result.outcome = Outcome.COMPLETED if done else Outcome.TASK_FAILED
            result.error = "" if done else "fast mode: the sim did not apply the whole reference fix"
        return result


def _factory(settings: Settings, **options: Any) -> SimBackend:
    return SimBackend(options.pop("persona", None) or options.pop("model", None), **{
        k: v for k, v in options.items() if k in ("retry", "faults", "fail_every", "fast")})


register_backend("sim", _factory)
