"""The suite-runner protocol (DESIGN.md §3 "Suite runner"): how the selector gets bench runs.

The selector never knows how runs happen. It asks a runner one question:

    "run configurations C1..Cn on these (task, round) slots and give me the results"

and gets back one :class:`RunRecord` per (configuration, slot). A *configuration* is a
``frozenset`` of rule ids (the exact rule set in the agent's memory for that run) or an opaque
string key (e.g. a synthetic config name). A *slot* is a :class:`PairRequest`: a task id plus a
*paired-round index*. All configurations asked for in one call run every slot, so a call with
``(reference, rule)`` and slots ``[(t1, 3), (t2, 3)]`` is one paired round on two tasks: for each
slot the runner runs the reference and the rule, interleaved in random order (concurrently where
the backend allows), so drift and cache warmth hit both arms alike. The decision core pairs the
reference and rule records of the same task by that round index.

Implementations:

* the bench scheduler (``warden/bench``) — real runs on an agent backend, persisted as BenchRun
  rows; it derives each run's seed from (task, config, round) so a resumed pass repeats nothing;
* :class:`SyntheticRunner` below — known true effects and a parametric noise model, used by the
  tests and ``benchmarks/selector_calibration.py`` (any other noise model plugs in the same way).

Contract for implementers:

* return exactly one record per (configuration, slot) asked for, in any order;
* ``weighted_tokens`` is the gate metric (cost-weighted tokens, DESIGN.md §3); ``raw_tokens`` the
  plain token total shown beside it;
* an API error, timeout or quota failure is ``outcome="infra_error"`` — never a task failure. The
  selector drops such runs from the statistics and aborts when a round is mostly infra errors or
  they leave rounds without a usable pair;
* a run must not raise for an agent failure; raising is reserved for the runner being unusable;
* a runner may serve a slot from a stored run (a run of the same rules, rendered the same way
  whatever version number a compile gave the header, on the same model, backend, suite and seed
  within the freshness window) and mark it ``reused=True``: the
  selector then does not count its tokens as spent by this decision;
* optionally, such a runner also answers ``stored_runs(configs, slots)`` — the records it would
  serve from stored runs for those (configuration, slot)s, *without running anything* (the
  others are simply absent). The decision core then prices a planned round at what it would
  still cost, so runs already paid for (e.g. by a killed invocation re-asking the same question)
  do not count against the budget again. A runner without the method is assumed to run every
  slot afresh (the synthetic runners below).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, Union, runtime_checkable

import numpy as np

Config = Union[frozenset[int], str]

# Outcome strings match warden.bench.results.Outcome values (kept as plain strings so synthetic
# runners need not import the bench package).
COMPLETED = "completed"
TASK_FAILED = "task_failed"
INFRA_ERROR = "infra_error"
BUDGET_EXCEEDED = "budget_exceeded"
OUTCOMES = (COMPLETED, TASK_FAILED, INFRA_ERROR, BUDGET_EXCEEDED)


def config_key(config: Config) -> str:
    """Canonical string of a configuration: sorted rule ids joined by commas ("" = no rules);
    an opaque string config is returned as is. Matches ``BenchRun.config_key``."""
    if isinstance(config, str):
        return config
    if not config:
        return ""
    return ",".join(str(i) for i in sorted(config))


@dataclass(frozen=True)
class PairRequest:
    """One slot: run every configuration of the call on ``task_id``, in paired round ``round_index``."""

    task_id: str
    round_index: int


@dataclass(frozen=True)
class RunRecord:
    """What the selector needs of one run (a projection of a BenchRun row)."""

    task_id: str
    config: Config
    round_index: int
    weighted_tokens: float
    raw_tokens: int
    completed: bool
    outcome: str = COMPLETED
    run_id: int | str | None = None  # the BenchRun id, for receipts and resume
    reused: bool = False  # served from earlier runs (shared reference): not spent again

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown run outcome {self.outcome!r}")

    @property
    def is_infra(self) -> bool:
        return self.outcome == INFRA_ERROR


@runtime_checkable
class SuiteRunner(Protocol):
    """Runs configurations on task slots and reports one :class:`RunRecord` per (config, slot)."""

    def run(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]: ...


def stored_records(runner: SuiteRunner, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
    """What ``runner`` would serve from stored runs for (configuration, slot) without running
    anything: its optional ``stored_runs`` method, or nothing for a runner without one."""
    stored_runs = getattr(runner, "stored_runs", None)
    if stored_runs is None or not configs or not slots:
        return []
    return [r for r in stored_runs(configs, slots) if not r.is_infra]


def run_config(runner: SuiteRunner, config: Config, tasks: Iterable[str], times: int,
               first_round: int = 0) -> list[RunRecord]:
    """Convenience: run one configuration on ``tasks``, ``times`` each (rounds first_round…)."""
    slots = [PairRequest(t, first_round + r) for t in tasks for r in range(times)]
    return runner.run([config], slots)


@dataclass
class SyntheticTask:
    task_id: str
    mean_cost: float  # reference configuration's mean weighted tokens per run


@dataclass
class SyntheticRunner:
    """A runner with known truth: per-task mean costs, log-normal run noise, derailments.

    The cost of a run of task *t* under configuration *c* is
    ``mean_cost[t] * (1 - saving[c]) * exp(N(mu, s^2)) * (derail_factor if derailed)`` with
    ``s^2 = log(1 + cv^2)`` and ``mu = -s^2/2`` (mean 1, coefficient of variation ``cv``) and a
    derailment with probability ``derail_p``. ``broken_tasks[c]`` fail their check under ``c``;
    ``infra_p`` is the chance a run dies of an infrastructure error.

    Draws are reproducible per (seed, task, config, run number): the *k*-th run of a given
    (task, configuration) has the same noise whoever asks for it and in whatever batch, so two
    policies driven by runners with the same seed see the same draws.
    """

    tasks: list[SyntheticTask]
    savings: dict[str, float] = field(default_factory=dict)  # config_key -> true relative saving
    broken_tasks: dict[str, frozenset[str]] = field(default_factory=dict)
    cv: float = 0.25
    derail_p: float = 0.12
    derail_factor: float = 1.8
    infra_p: float = 0.0
    seed: int = 0
    tokens_spent: float = 0.0
    runs_made: int = 0
    _streams: dict[tuple[str, str], list[tuple[float, float, float]]] = field(default_factory=dict)
    _next: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_id = {t.task_id: t for t in self.tasks}
        self._sigma = math.sqrt(math.log1p(self.cv ** 2))

    def _draw(self, task_id: str, key: str) -> tuple[float, float, float]:
        stream_key = (task_id, key)
        stream = self._streams.setdefault(stream_key, [])
        index = self._next.get(stream_key, 0)
        if index >= len(stream):
            # A child generator per (task, config, block) keeps draws independent of call order.
            block = len(stream) // 64
            rng = np.random.default_rng([self.seed, _stable_hash(task_id), _stable_hash(key), block])
            normals = rng.standard_normal(64)
            uniforms = rng.random((64, 2))
            stream.extend(zip(normals.tolist(), uniforms[:, 0].tolist(), uniforms[:, 1].tolist()))
        self._next[stream_key] = index + 1
        return stream[index]

    def run(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
        records: list[RunRecord] = []
        for slot in slots:
            task = self._by_id[slot.task_id]
            for config in configs:
                key = config_key(config)
                z, u_derail, u_infra = self._draw(task.task_id, key)
                noise = math.exp(self._sigma * z - self._sigma ** 2 / 2)
                derailed = u_derail < self.derail_p
                cost = task.mean_cost * (1.0 - self.savings.get(key, 0.0)) * noise
                if derailed:
                    cost *= self.derail_factor
                infra = u_infra < self.infra_p
                if infra:
                    cost *= 0.1  # died early: some tokens spent, no verdict on the agent
                completed = not infra and task.task_id not in self.broken_tasks.get(key, frozenset())
                outcome = INFRA_ERROR if infra else (COMPLETED if completed else TASK_FAILED)
                self.tokens_spent += cost
                self.runs_made += 1
                records.append(RunRecord(task.task_id, config, slot.round_index, cost, int(cost),
                                         completed, outcome))
        return records


class ReusingRunner:
    """Wraps any :class:`SuiteRunner` with the reference reuse the bench runner does for real.

    The first time a (configuration in ``reusable``, task, round) slot is asked for it is run by
    ``inner``; every later ask — by another decision of the same invocation, night or freshness
    window — gets the same record back with ``reused=True``, so the decision core does not count
    it as spent again. Only configurations in ``reusable`` (the reference) are shared: a rule's
    own runs belong to its decision.
    """

    def __init__(self, inner: SuiteRunner, reusable: Iterable[Config]) -> None:
        self.inner = inner
        self.reusable = {config_key(c) for c in reusable}
        self._stored: dict[tuple[str, str, int], RunRecord] = {}  # as served again: reused=True
        self.runs_reused = 0

    def stored_runs(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
        """The records :meth:`run` would serve from stored runs (the protocol's optional part)."""
        out = []
        for config in configs:
            key = config_key(config)
            if key in self.reusable:
                for slot in slots:
                    stored = self._stored.get((key, slot.task_id, slot.round_index))
                    if stored is not None:
                        out.append(stored)
        return out

    def run(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
        out: list[RunRecord] = []
        # Configurations still to run on the same slots go in one inner call, so they stay paired
        # and interleaved there.
        to_run: dict[tuple[PairRequest, ...], list[Config]] = {}
        for config in configs:
            key = config_key(config)
            fresh = list(slots)
            if key in self.reusable:
                fresh = []
                for slot in slots:
                    stored = self._stored.get((key, slot.task_id, slot.round_index))
                    if stored is None:
                        fresh.append(slot)
                    else:
                        out.append(stored)
                        self.runs_reused += 1
            if fresh:
                to_run.setdefault(tuple(fresh), []).append(config)
        for fresh, group in to_run.items():
            records = self.inner.run(group, fresh)
            for r in records:  # infra errors are never reused (as in the bench runner)
                if config_key(r.config) in self.reusable and not r.is_infra:
                    self._stored[(config_key(r.config), r.task_id, r.round_index)] = replace(r, reused=True)
            out.extend(records)
        return out


def _stable_hash(text: str) -> int:
    """A process-independent 32-bit hash (Python's str hash is salted per process)."""
    value = 2166136261
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def log_uniform_tasks(rng: np.random.Generator, count: int, low: float = 30_000.0,
                      high: float = 300_000.0) -> list[SyntheticTask]:
    """``count`` synthetic tasks with mean costs spread log-uniformly over [low, high]."""
    costs = np.exp(rng.uniform(math.log(low), math.log(high), size=count))
    return [SyntheticTask(f"golden-{i + 1:02d}", float(c)) for i, c in enumerate(costs)]
