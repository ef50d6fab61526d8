"""The selector's suite runner over the bench scheduler (``warden.select.runner.SuiteRunner``).

``BenchSuiteRunner.run(configs, slots)`` answers "run these configurations on these
(task, round) slots" with real runs on an agent backend:

* every (configuration, slot) is one job; the jobs of one slot form a block that shares a seed,
  derived from (base seed, task, round) — so the reference and the rule of a round meet the
  same noise (common random numbers) and the decision core pairs them by round index;
* before planning, each (configuration, slot) is looked up among stored ``BenchRun`` rows with
  the same agent, task, configuration, memory bytes (hence ruleset version and rule text),
  backend, model, suite hash, fixture hash and seed, created within the freshness window
  (``reference_freshness_days``, default 7). A match is *reused* instead of re-run: reference
  runs are shared across the decisions of one selector invocation, across invocations and
  nights, and a killed invocation re-asking the same question only runs what is missing;
* what is missing runs as one scheduler pass (purpose ``select``), paired and interleaved,
  concurrently, with one throwaway fixture copy per run;
* a run that died of an infrastructure error comes back as ``outcome="infra_error"`` (never a
  task failure) and is never reused. When ``max_consecutive_infra`` runs in a row fail that way
  the runner is unusable and :class:`~warden.bench.scheduler.BenchAborted` propagates: the
  selector must then write no verdict, no receipt and no strike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from warden.bench.results import Outcome
from warden.bench.scheduler import (DEFAULT_MAX_CONSECUTIVE_INFRA, BenchRequest, BenchScheduler, JobSpec,
                                    ProgressSink, RunMemory, Workbench, job_seed, memory_for, open_workbench,
                                    parse_config_key, shuffle_blocks)
from warden.select.runner import Config, PairRequest, RunRecord, config_key
from warden.store.db import Store
from warden.store.models import BenchJob, BenchRun, utcnow

if TYPE_CHECKING:
    from warden.config import Settings


def _rule_ids(config: Config) -> tuple[int, ...]:
    if isinstance(config, str):
        return parse_config_key(config)
    return tuple(sorted(int(i) for i in config))


class BenchSuiteRunner:
    """A :class:`warden.select.runner.SuiteRunner` that runs golden tasks through the scheduler."""

    def __init__(self, store: Store, settings: "Settings", agent: str, *, backend: str | None = None,
                 model: str | None = None, concurrency: int | None = None, base_seed: int = 0,
                 freshness_days: float | None = None, progress: ProgressSink | None = None,
                 max_consecutive_infra: int = DEFAULT_MAX_CONSECUTIVE_INFRA,
                 bench: Workbench | None = None, model_id: str | None = None) -> None:
        self.store = store
        self.agent = agent
        self.backend = backend or settings.backend
        if bench is None:
            bench, model_id = open_workbench(settings, agent, self.backend, model)
        self.bench = bench
        self.model = model_id or model or self.backend
        self.base_seed = base_seed
        days = settings.reference_freshness_days if freshness_days is None else freshness_days
        self.freshness = timedelta(days=days)
        self.scheduler = BenchScheduler(store, bench, concurrency=settings.concurrency if concurrency is None else concurrency,
                                        max_consecutive_infra=max_consecutive_infra, progress=progress)
        # What this runner spent (runs it executed; reused runs cost nothing now).
        self.tokens_spent = 0.0
        self.raw_tokens_spent = 0
        self.runs_made = 0
        self.runs_reused = 0
        self.pass_ids: list[int] = []
        # The rule whose decision the next passes are for (set by the selector): recorded on each
        # select pass, so what a killed decision spent is still the rule's on resume.
        self.rule_id: int | None = None

    @property
    def suite_hash(self) -> str:
        return self.bench.suite.suite_hash

    @property
    def fixture_hash(self) -> str:
        return self.bench.fixture_hash

    @property
    def task_ids(self) -> list[str]:
        return [t.id for t in self.bench.suite.tasks]

    def seed_for(self, task_id: str, round_index: int) -> int:
        return job_seed(self.base_seed, task_id, round_index)

    def stored_runs(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
        """The records :meth:`run` would reuse for these (configuration, slot)s, running nothing
        (the optional part of the runner protocol): the decision core prices them at zero."""
        if not configs or not slots:
            return []
        with self.store.session() as session:
            memories = {config_key(c): memory_for(session, self.agent, _rule_ids(c)) for c in configs}
            by_key = {config_key(c): c for c in configs}
            unique_slots = list(dict.fromkeys(slots))
            found = self._reusable(session, memories, unique_slots)
            return [self._record(found[(key, slot)], by_key[key], slot.round_index, reused=True)
                    for slot in unique_slots for key in memories if (key, slot) in found]

    def run(self, configs: Sequence[Config], slots: Sequence[PairRequest]) -> list[RunRecord]:
        """One record per (configuration, slot): reused when fresh, otherwise run now."""
        if not configs or not slots:
            return []
        with self.store.session() as session:
            memories = {config_key(c): memory_for(session, self.agent, _rule_ids(c)) for c in configs}
        by_key = {config_key(c): c for c in configs}
        records: dict[tuple[str, str, int], RunRecord] = {}
        missing: list[JobSpec] = []
        unique_slots = list(dict.fromkeys(slots))
        with self.store.session() as session:
            found = self._reusable(session, memories, unique_slots)
        for slot in unique_slots:
            for key, memory in memories.items():
                row = found.get((key, slot))
                if row is not None:
                    records[(key, slot.task_id, slot.round_index)] = self._record(
                        row, by_key[key], slot.round_index, reused=True)
                    self.runs_reused += 1
                else:
                    missing.append(JobSpec(slot.task_id, memory.rule_ids, slot.round_index))
        if missing:
            jobs = shuffle_blocks(missing, self.base_seed)
            request = BenchRequest(self.agent, tuple(jobs), self.base_seed, self.backend, self.model,
                                   purpose="select", rule_id=self.rule_id)
            try:
                outcome = self.scheduler.run_request(request)
            finally:
                self._account()
            self.pass_ids.append(outcome.pass_id)
            with self.store.session() as session:
                rows = session.execute(select(BenchJob, BenchRun)
                                       .join(BenchRun, BenchJob.bench_run_id == BenchRun.id)
                                       .where(BenchJob.pass_id == outcome.pass_id)).all()
                rounds = {(j.task_id, self.seed_for(j.task_id, j.rep)): j.rep for j in missing}
                for job, run in rows:
                    round_index = rounds.get((job.task_id, int(job.seed)))
                    if round_index is None or job.config_key not in by_key:
                        continue
                    records[(job.config_key, job.task_id, round_index)] = self._record(
                        run, by_key[job.config_key], round_index)
        out = []
        for slot in dict.fromkeys(slots):
            for key in memories:
                record = records.get((key, slot.task_id, slot.round_index))
                if record is None:  # not run (cannot happen unless the pass stopped early)
                    record = RunRecord(slot.task_id, by_key[key], slot.round_index, 0.0, 0, False,
                                       Outcome.INFRA_ERROR.value)
                out.append(record)
        return out

    # ------------------------------------------------------------ internals

    def _reusable(self, session: Any, memories: Mapping[str, RunMemory],
                  slots: Sequence[PairRequest]) -> dict[tuple[str, PairRequest], BenchRun]:
        """(configuration key, slot) → the newest fresh stored run for it: one query per
        configuration (a decision's look-ahead asks for dozens of slots at a time)."""
        cutoff = utcnow() - self.freshness
        slot_of = {(s.task_id, self.seed_for(s.task_id, s.round_index)): s for s in slots}
        found: dict[tuple[str, PairRequest], BenchRun] = {}
        for key, memory in memories.items():
            rows = session.scalars(select(BenchRun).where(
                BenchRun.agent == self.agent, BenchRun.task_id.in_({t for t, _ in slot_of}),
                BenchRun.config_key == key,
                BenchRun.memory_sha256.in_([memory.sha256, memory.labelled_sha256 or memory.sha256]),
                BenchRun.backend == self.backend,
                BenchRun.model == self.model, BenchRun.suite_hash == self.suite_hash,
                BenchRun.fixture_hash == self.fixture_hash, BenchRun.seed.in_({seed for _, seed in slot_of}),
                BenchRun.outcome != Outcome.INFRA_ERROR.value, BenchRun.created_at >= cutoff)
                .order_by(BenchRun.id))
            for row in rows:  # ascending id: the newest run of a slot is the one left
                slot = slot_of.get((row.task_id, int(row.seed)))
                if slot is not None:
                    found[(key, slot)] = row
        return found

    @staticmethod
    def _record(row: BenchRun, config: Config, round_index: int, reused: bool = False) -> RunRecord:
        # reused=True: served from a stored run, so the decision core does not count it as spent.
        return RunRecord(row.task_id, config, round_index, float(row.weighted_tokens), row.usage.total,
                         bool(row.completed), row.outcome, row.id, reused=reused)

    def _account(self) -> None:
        """Add what the scheduler's last attempt spent (infra errors included)."""
        attempt = self.scheduler.last_attempt
        if attempt is None:
            return
        self.tokens_spent += attempt.spent_weighted
        self.raw_tokens_spent += attempt.spent_raw
        self.runs_made += attempt.executed
        self.scheduler.last_attempt = None
