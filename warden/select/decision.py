"""The selector's decision core: does a rule earn its place? (DESIGN.md §4, issue 5 item 1)

Pure: :func:`decide` maps the runs measured so far to a :class:`Decision`; :func:`decide_rule`
drives rounds through a :class:`~warden.select.runner.SuiteRunner` until a verdict and reports
what it spent. Neither does I/O of its own.

Method
======

**Data.** Every round runs the reference configuration (the active rule set) and the measured
configuration (active set + the rule) on the same task and round — the same seed — interleaved.
Besides these pairs the reference has runs of its own at later rounds: the *shared pool* that
other decisions against the same active set made (the runner reuses stored runs of the same
configuration, model, suite and fixture within the freshness window), and runs bought ahead for
them. Costs are analysed as logs (``log weighted tokens``): a relative effect becomes additive and
the task's own size (task means differ tenfold) drops out. Runs that died of an infrastructure
error are dropped; a round whose partner died leaves its run unpaired.

**Estimand.** θ = Σ_t w_t θ_t / Σ_t w_t, θ_t = μ_reference,t − μ_rule,t (golden-task weights w_t;
relative saving = 1 - e^-θ). Effects may differ across tasks: each task counts with its weight
whatever its number of runs.

**Estimator** (``stats.pooled_effect``). (1) *Robustness*: each run's log cost is replaced by a
Huber pseudo-value (Huber 1964, c = 1.345; a pooled MAD scale; Huber's 1981 small-sample factor),
centred on its task-and-arm Huber centre, so a derailed run (×1.5–2 in 10–15% of runs) has bounded
influence; a task with few runs keeps its plain values, whose spread is honest where an
M-estimate's sandwich variance would be too small, and turns robust gradually (between
``stats.ROBUST_FROM`` and ``stats.ROBUST_FULL`` runs per arm: no jump). Runs are robustified
one by one, where a derailment stands out (a run's residual, not a pair's difference of two noisy
runs). (2) *Pairing*: σ² (one run) is pooled within task and arm, the pair differences give
``Var(x − y) = 2σ²(1 − ρ)``, and the ρ used is the lower end of its confidence interval, never
below 0 (a smaller ρ only overstates the variance). (3) *Per task*, the generalized least squares
estimate from pairs and unpaired runs (``stats.pair_variance``): with ρ ≈ 1 — pairs that share a
seed on a deterministic backend, or drift that hits both arms — it is the paired difference;
with ρ ≈ 0 — independent runs of a real model — it uses every pool run as fully as its own, so a
decision against a well-stocked pool pays about one run per observation instead of two. (4) The
tasks combine with their weights; the variance comes from within-task spread only. Efficient
estimates over growing data have the canonical joint distribution of group-sequential theory
(Jennison & Turnbull 2000, ch. 11), which is what the sequential test below assumes. The
calibration benchmark shows the false-keep rate stays under α with derailments (12% of runs
×1.8), and its ablation with heavier derailments (×3) that the robust estimate keeps more power
for fewer tokens than the plain mean at a false-keep rate still under α.

**Margin.** ``k × rent`` weighted tokens per run (k = 2 by default) is a *safety margin*: the
measured saving already includes the rule's rent. It is converted to the log scale with the
reference cost per run (task-weighted mean of the reference means): m = -log(1 - margin/cost).

**Sequential test.** A truncated sequential probability ratio test (Wald 1945, "Sequential
tests of statistical hypotheses") on the estimate, looked at after every round:
``LLR = δ/v · (θ̂ - m - δ/2)`` compares θ = m + δ (the rule saves the design effect δ above its
margin) with θ = m (it saves no more than its margin). Keep when LLR ≥ log(1/α), refute when
LLR ≤ log β. The thresholds are Ville's (1939) inequality rather than Wald's approximations, so
under the normal model ``P(false keep) ≤ α`` and ``P(refute | θ ≥ m + δ) ≤ β`` hold *however many
looks* are taken, and across nights when evidence is pooled. Equivalently, keep iff the
anytime-valid lower confidence bound ``θ̂ - δ/2 - v·log(1/α)/δ`` clears the margin, refute iff the
upper bound ``θ̂ + δ/2 + v·log(1/β)/δ`` falls below margin + δ; these bounds are the interval the
receipt shows. Discrete looks only make the errors smaller (the statistic overshoots). The
variance is widened for the degrees of freedom it rests on — by the χ² limit ``df/χ²_df(q)`` and
by Student's ``(t_df/z)²`` at α, both fading to 1 as runs accumulate — and no keep or refute is
taken before ``min_pairs_per_task`` × (number of tasks) pairs in all, at least one on every task
(an average, not a floor per task: rounds are allocated where they reduce variance most, and a
task's variance borrows strength from the pooled one). A test that reaches the evidence budget
undecided is *inconclusive* — not refuted.

**Re-audits** ask a different question of an active rule: is it still above its margin? The same
SPRT runs between θ = m - δr and θ = m + δr (δr = ``reaudit_effect``): a *miss* (verdict refute)
when the evidence favours below-the-margin at level β, a pass (keep) when above at level α.
Pooled across nights, the chance that a rule truly saving m + δr is ever missed stays ≤ β, and
a two-strike eviction needs two consecutive misses. Evidence carried to a later decision counts
by its pairs only (it may stand for another reference configuration); the pool's runs are asked
for afresh.

**Completion.** Compared per task before any statistics: a task whose every reference run passed
and that failed at least once with the rule is a *regression* — verdict at once, whatever the
tokens say. Any other drop of a task's pass rate under the rule is flagged in the reasons.

**Allocation.** A round buys the most variance reduction per token (Neyman allocation with
costs, greedy over ``stats.pair_variance``): a pair on a task, priced at what it still costs —
the rule's run alone where the pool holds the round's reference run — every task covered once
first, until the round costs about ``round_size`` full paired passes and fits the remaining
budget. (Buying reference runs ahead of the pairs for later decisions to share was tried: on the
calibration benchmark it cost more than it saved, since a keep changes the reference.)

**Budget.** Tuned on the calibration suite (8–16 tasks, 30k–300k tokens per run); with less,
more rules end inconclusive (never kept). Runs run to the end once started, so the budget is
held where runs start: a round is planned at its expected cost, and its pairs start in batches,
each only if the spend so far plus the batch at its expected cost plus ``round_price_sd`` (4)
standard deviations of that cost — its runs' costs independent, each with the spread
``cost_cv`` of one run (the recorded runs' CV within task and configuration) — fits the budget;
the next batch is priced on what the runs actually cost. A budget is then passed only by a
batch that costs more than that, and by that batch's excess alone: nothing starts after it (in
a simulation of 1,000 decisions ended by their budget — log-normal run costs with CV 30%, 12% of
runs derailed ×1.8 — 2 passed it, by 1.1% at most; started at their mean cost, 355 did, by up to
32%). The price is budget left unused at the end: those decisions used 86% of theirs.

**Assumptions.** Runs are independent given the task, configuration and seed; the effect is
multiplicative per task (the log scale) and equal in the pairs and the pool (same configuration,
model, suite and fixture within the freshness window); the estimate is approximately normal at
each look. The pool's unpaired runs are exposed to drift within the window that pairs cancel;
drift shared by a pair's two runs shows as pair correlation and shifts the weight to the pairs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any


from warden.errors import WardenError
from warden.select import stats
from warden.select.runner import Config, PairRequest, RunRecord, SuiteRunner, config_key, stored_records

ADMISSION = "admission"
REAUDIT = "reaudit"


class Verdict(str, Enum):
    KEEP = "keep"  # admission: saving clears the margin; re-audit: still above it (a pass)
    REFUTE = "refute"  # admission: does not save δ above its margin; re-audit: a miss
    REGRESSION = "regression"  # a task that passes without the rule fails with it
    NEED_MORE = "need_more"  # undecided; run ``next_tasks``
    INCONCLUSIVE = "inconclusive"  # undecided and the evidence budget is spent


@dataclass(frozen=True)
class DecisionParams:
    """Error rates and design of the test (defaults = :class:`warden.config.Settings`)."""

    alpha: float = 0.05  # false keep
    beta: float = 0.01  # false evict of a rule saving `design_effect` above its margin
    design_effect: float = 0.10  # relative saving (fraction of a run) above the margin
    reaudit_effect: float = 0.05  # re-audit: relative distance from the margin tested
    keep_margin_k: float = 2.0
    variance_quantile: float = 0.5  # χ² quantile of the conservative variance
    round_size: float = 0.25  # a round costs about this many full paired passes of the suite
    huber_c: float = stats.HUBER_C  # math.inf = the plain weighted mean (calibration ablation)
    min_pairs_per_task: float = 2.0  # no keep/refute on fewer pairs (× tasks): a spread needs replicates
    shrink_pairs: float = 4.0  # pseudo-pairs of pooled spread in a task's own spread
    infra_abort_fraction: float = 0.5  # a round with more infra errors than this aborts
    # Rounds in a row without a usable pair abort once they hold this many infra errors: an arm
    # that always fails is half the runs (never "more than half"), one flaky run alone is not.
    infra_unpaired_abort: int = 2
    max_rounds: int = 200
    # A batch of a round's runs starts only if it fits the budget at its expected cost plus this
    # many standard deviations of that cost (the spread of one run's cost, ``cost_cv``, from
    # recorded runs): a run in flight always finishes, so runs started at their mean price pass
    # the budget in about a third of the decisions it ends. 0: the mean.
    round_price_sd: float = 4.0

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not 0.0 < value < 0.5:
                raise ValueError(f"{name} must be in (0, 0.5), got {value}")
        for name in ("design_effect", "reaudit_effect"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {value}")
        if self.keep_margin_k < 0:
            raise ValueError("keep_margin_k must be ≥ 0")
        if self.round_size <= 0:
            raise ValueError("round_size must be > 0")
        if not (self.round_price_sd >= 0 and math.isfinite(self.round_price_sd)):
            raise ValueError("round_price_sd must be a finite number ≥ 0")

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> "DecisionParams":
        """Take alpha, beta, design_effect, keep_margin_k (and any other matching field) from a
        settings-like object; ``overrides`` win."""
        values = {f: getattr(settings, f) for f in cls.__dataclass_fields__ if hasattr(settings, f)}
        values.update(overrides)
        return cls(**values)

    def hypotheses(self, kind: str, margin_log: float) -> tuple[float, float]:
        """(θ_low, θ_high) of the SPRT on the log scale."""
        if kind == REAUDIT:
            d = stats.log_ratio_of_saving(self.reaudit_effect)
            return margin_log - d, margin_log + d
        return margin_log, margin_log + stats.log_ratio_of_saving(self.design_effect)


@dataclass(frozen=True)
class Evidence:
    """All runs of the reference and the measured configuration that count for one rule.

    Pool evidence across a rule's admission and re-audits by passing the previous
    :attr:`RuleDecision.evidence` as ``prior_evidence``.
    """

    reference: tuple[RunRecord, ...] = ()
    rule: tuple[RunRecord, ...] = ()

    def extend(self, reference: Sequence[RunRecord] = (), rule: Sequence[RunRecord] = ()) -> "Evidence":
        """Add runs; a result for a (task, round) the side already holds a result for is the same
        run served again (a stored reference run, then its round asked for) and is not added."""
        def fresh(held: tuple[RunRecord, ...], new: Sequence[RunRecord]) -> tuple[RunRecord, ...]:
            seen = {(r.task_id, r.round_index) for r in held if not r.is_infra}
            out = []
            for r in new:
                if r.is_infra or (r.task_id, r.round_index) not in seen:
                    out.append(r)
                    if not r.is_infra:
                        seen.add((r.task_id, r.round_index))
            return tuple(out)
        return Evidence(self.reference + fresh(self.reference, reference), self.rule + fresh(self.rule, rule))

    def next_round(self, task_id: str) -> int:
        """The next paired round of ``task_id``: after the measured configuration's last run.
        Reference runs at later rounds (the shared pool) are the partners its next runs get."""
        rounds = [r.round_index for r in self.rule if r.task_id == task_id]
        return max(rounds) + 1 if rounds else 0

    def paired_only(self) -> "Evidence":
        """The runs of paired rounds only. Carried to a later decision, the evidence may stand for
        another reference configuration (a re-audit's is the active set without the rule): a pair
        still measures the rule against what ran beside it, an unpaired run measures nothing."""
        def rounds(records: tuple[RunRecord, ...]) -> set[tuple[str, int]]:
            return {(r.task_id, r.round_index) for r in records if not r.is_infra}
        both = rounds(self.reference) & rounds(self.rule)
        keep = lambda records: tuple(r for r in records if r.is_infra or (r.task_id, r.round_index) in both)  # noqa: E731
        return Evidence(keep(self.reference), keep(self.rule))


@dataclass(frozen=True)
class TaskSummary:
    task_id: str
    weight: float
    n_reference: int  # non-infra runs
    n_rule: int
    pass_reference: int
    pass_rule: int
    infra: int
    mean_reference: float  # mean weighted tokens (nan without runs)
    mean_rule: float
    log_ratios: tuple[float, ...]  # paired d = log(ref) - log(rule)
    token_diffs: tuple[float, ...]  # paired ref - rule, weighted tokens
    paired_logs: tuple[tuple[float, float], ...] = ()  # (log ref, log rule) per paired round
    reference_only: tuple[float, ...] = ()  # log costs of reference runs without a partner (the pool)
    rule_only: tuple[float, ...] = ()  # log costs of rule runs without a partner

    def runs(self) -> stats.TaskRuns:
        return stats.TaskRuns(self.weight, self.paired_logs, self.reference_only, self.rule_only)


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    kind: str
    reasons: tuple[str, ...]
    # the saving, as relative saving (fraction of a reference run) and weighted tokens per run
    estimate: float
    interval: tuple[float, float]  # (anytime lower bound at α, upper bound at β), relative
    estimate_tokens: float
    interval_tokens: tuple[float, float]
    margin_tokens: float
    margin: float  # relative
    rent_tokens: float
    reference_cost: float  # weighted tokens per reference run (task-weighted)
    llr: float
    thresholds: tuple[float, float]  # (log β, log 1/α)
    n_pairs: int
    tasks: tuple[TaskSummary, ...]
    next_tasks: tuple[tuple[str, int], ...] = ()  # need_more: (task, pairs) to run next
    next_cost: float = 0.0  # estimated weighted tokens of that round
    completion_drops: tuple[str, ...] = ()
    regressions: tuple[str, ...] = ()
    method: Mapping[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.verdict is not Verdict.NEED_MORE

    @property
    def paired_diffs(self) -> dict[str, list[float]]:
        """Per-task paired differences, reference − rule, weighted tokens (receipt field)."""
        return {t.task_id: [round(x, 1) for x in t.token_diffs] for t in self.tasks}

    @property
    def n_per_side(self) -> dict[str, list[int]]:
        return {t.task_id: [t.n_reference, t.n_rule] for t in self.tasks}

    @property
    def pass_counts(self) -> dict[str, list[int]]:
        """task -> [reference passes, reference n, rule passes, rule n] (receipt field)."""
        return {t.task_id: [t.pass_reference, t.n_reference, t.pass_rule, t.n_rule]
                for t in self.tasks}


@dataclass(frozen=True)
class RuleDecision:
    """What :func:`decide_rule` returns: the final decision, the pooled evidence, the spend."""

    decision: Decision
    evidence: Evidence
    new_runs: tuple[RunRecord, ...]
    tokens_spent: float  # weighted tokens of the runs this call made (reused runs excluded)
    raw_tokens_spent: int
    rounds: int
    looks: tuple[tuple[int, float], ...]  # (pairs, LLR) after each look


class InfraAbort(WardenError):
    """Infrastructure errors made a round mostly useless: no verdict, no receipt, no strike."""

    def __init__(self, message: str, evidence: Evidence, tokens_spent: float) -> None:
        super().__init__(message)
        self.evidence = evidence
        self.tokens_spent = tokens_spent


def _task_weights(tasks: Mapping[str, float] | Sequence[str]) -> dict[str, float]:
    if isinstance(tasks, Mapping):
        weights = {str(k): float(v) for k, v in tasks.items()}
    else:
        weights = {str(t): 1.0 for t in tasks}
    if not weights:
        raise ValueError("a decision needs at least one task")
    if any(not (w > 0 and math.isfinite(w)) for w in weights.values()):
        raise ValueError("task weights must be positive")
    return weights


def _pairs(reference: list[RunRecord], rule: list[RunRecord]) -> tuple[list[tuple[RunRecord, RunRecord]],
                                                                     list[RunRecord], list[RunRecord]]:
    """(pairs by paired-round index, reference runs without a partner, rule runs without one).
    Runs of different rounds never pair: they met different seeds and times."""
    ref_by_round = {r.round_index: r for r in reference}
    rule_by_round = {r.round_index: r for r in rule}
    common = sorted(set(ref_by_round) & set(rule_by_round))
    pairs = [(ref_by_round[i], rule_by_round[i]) for i in common]
    left_ref = sorted((r for r in reference if r.round_index not in rule_by_round), key=lambda r: r.round_index)
    left_rule = sorted((r for r in rule if r.round_index not in ref_by_round), key=lambda r: r.round_index)
    return pairs, left_ref, left_rule


def _log_cost(record: RunRecord) -> float:
    return math.log(max(record.weighted_tokens, 1.0))


def _runs_by_task(evidence: Evidence, tasks: Iterable[str]) -> dict[str, tuple[list[RunRecord], list[RunRecord], int]]:
    """Per task of the suite: its non-infra reference and rule runs, and its infra errors."""
    by_task: dict[str, tuple[list[RunRecord], list[RunRecord], int]] = {t: ([], [], 0) for t in tasks}
    for side, records in ((0, evidence.reference), (1, evidence.rule)):
        for record in records:
            if record.task_id not in by_task:
                continue  # a task no longer in the suite does not count
            ref, rule, infra = by_task[record.task_id]
            if record.is_infra:
                by_task[record.task_id] = (ref, rule, infra + 1)
            else:
                (ref if side == 0 else rule).append(record)
    return by_task


def paired_runs(evidence: Evidence, tasks: Iterable[str]) -> dict[str, list[tuple[RunRecord, RunRecord]]]:
    """Per task, the (reference, rule) runs of each paired difference, in
    :attr:`Decision.paired_diffs`' order: what a receipt's figures can be audited against."""
    return {task: _pairs(ref, rule)[0] for task, (ref, rule, _) in _runs_by_task(evidence, tasks).items()}


def summarize(evidence: Evidence, weights: Mapping[str, float]) -> list[TaskSummary]:
    out = []
    for task_id, (ref, rule, infra) in _runs_by_task(evidence, weights).items():
        pairs, ref_only, rule_only = _pairs(ref, rule)
        logs = tuple((_log_cost(a), _log_cost(b)) for a, b in pairs)
        out.append(TaskSummary(
            task_id=task_id, weight=weights[task_id], n_reference=len(ref), n_rule=len(rule),
            pass_reference=sum(r.completed for r in ref), pass_rule=sum(r.completed for r in rule),
            infra=infra,
            mean_reference=sum(r.weighted_tokens for r in ref) / len(ref) if ref else math.nan,
            mean_rule=sum(r.weighted_tokens for r in rule) / len(rule) if rule else math.nan,
            log_ratios=tuple(x - y for x, y in logs),
            token_diffs=tuple(a.weighted_tokens - b.weighted_tokens for a, b in pairs),
            paired_logs=logs, reference_only=tuple(_log_cost(r) for r in ref_only),
            rule_only=tuple(_log_cost(r) for r in rule_only)))
    return out


def _pair_cost(t: TaskSummary, fallback: float) -> float:
    sides = [x for x in (t.mean_reference, t.mean_rule) if not math.isnan(x)]
    if not sides:
        return fallback
    return 2.0 * sum(sides) / len(sides)


def _task_run_variances(summaries: Sequence[TaskSummary], pooled: float, shrink: float) -> dict[str, float]:
    """Each task's spread of one run's log cost (within arm), shrunk toward the pooled one with
    ``shrink`` pseudo-runs: tasks differ in noise, but a handful of runs says little about it."""
    out: dict[str, float] = {}
    for t in summaries:
        ss, df = 0.0, 0
        for arm in ([x for x, _ in t.paired_logs] + list(t.reference_only),
                    [y for _, y in t.paired_logs] + list(t.rule_only)):
            if len(arm) >= 2:
                ss += stats.sum_of_squares(arm)
                df += len(arm) - 1
        out[t.task_id] = (ss + shrink * pooled) / (df + shrink)
    return out


# The spread of one run's cost (its standard deviation over its mean, within task and
# configuration) assumed before enough runs measure it: above the calibration suite's noise
# (CV 25% and 12% derailments ×1.8: about 0.35) and the sim's (about 0.43).
DEFAULT_COST_CV = 0.5
COST_CV_MIN_DF = 10  # degrees of freedom a measured spread needs to replace the assumed one


def cost_spread(summaries: Sequence[TaskSummary]) -> tuple[float, int]:
    """(CV, degrees of freedom): the pooled spread of one run's weighted tokens relative to its
    task-and-arm mean, from the runs in ``summaries`` (NaN, 0 without two runs of an arm)."""
    ss, df = 0.0, 0
    for t in summaries:
        for arm in ([x for x, _ in t.paired_logs] + list(t.reference_only),
                    [y for _, y in t.paired_logs] + list(t.rule_only)):
            if len(arm) >= 2:
                costs = [math.exp(v) for v in arm]
                mean = sum(costs) / len(costs)
                ss += sum((c / mean - 1.0) ** 2 for c in costs)
                df += len(costs) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def round_cost_cv(summaries: Sequence[TaskSummary], cost_cv: float | None = None) -> float:
    """The CV a round is priced with: ``cost_cv`` (measured on the agent's recorded runs) when
    given, else the evidence's own once it rests on :data:`COST_CV_MIN_DF` degrees of freedom,
    else :data:`DEFAULT_COST_CV` (or the evidence's, if larger)."""
    if cost_cv is not None and math.isfinite(cost_cv) and cost_cv >= 0:
        return float(cost_cv)
    measured, df = cost_spread(summaries)
    if df >= COST_CV_MIN_DF:
        return measured
    return max(DEFAULT_COST_CV, measured) if df else DEFAULT_COST_CV


def pair_costs(summaries: Sequence[TaskSummary], cost_hints: Mapping[str, float] | None = None) -> dict[str, float]:
    """Task → expected weighted tokens of its next pair: the mean of its runs so far (both arms),
    else twice its cost hint, else the other tasks' mean (0 when nothing prices a run yet)."""
    hints = cost_hints or {}
    known = [_pair_cost(t, 2.0 * hints[t.task_id] if t.task_id in hints else math.nan) for t in summaries]
    known_costs = [c for c in known if not math.isnan(c)]
    fallback = sum(known_costs) / len(known_costs) if known_costs else 0.0
    return {t.task_id: (c if not math.isnan(c) else fallback) for t, c in zip(summaries, known)}


def priced_costs(summaries: Sequence[TaskSummary], cost_hints: Mapping[str, float] | None = None
                 ) -> tuple[dict[str, float], dict[str, int]]:
    """What the budget prices a task's next pair at, and the runs that price rests on (0: a
    hint, from the agent's recorded runs): the higher of the mean of its runs so far and twice
    its hint — a mean of a few runs, a cheap draw among them, would under-price the pair; and
    :func:`fitting_slots` counts the error of such a mean."""
    hints = cost_hints or {}
    costs = pair_costs(summaries, cost_hints)
    support: dict[str, int] = {}
    for t in summaries:
        n = t.n_reference + t.n_rule
        hinted = 2.0 * hints[t.task_id] if t.task_id in hints else math.nan
        if n and not (math.isfinite(hinted) and hinted >= costs[t.task_id]):
            support[t.task_id] = n
        else:
            support[t.task_id] = 0
            if math.isfinite(hinted):
                costs[t.task_id] = hinted
    return costs, support


def fitting_slots(slots: Sequence[tuple[PairRequest, float, float]], budget_remaining: float, cv: float,
                  params: DecisionParams, support: Mapping[str, int] | None = None
                  ) -> tuple[list[PairRequest], list[tuple[PairRequest, float, float]]]:
    """Which of a round's slots — (slot, what it still costs, its pair's full cost) — to start
    now: in order, each that keeps the batch within ``budget_remaining`` at its expected cost
    plus ``params.round_price_sd`` standard deviations (:func:`round_price`). The variance counts
    each run's spread (``cv`` of its mean, runs independent) and, for a task priced from the
    ``support[task]`` runs of the evidence, the error of that mean (shared by the task's slots).
    Returns (the batch, the slots left)."""
    support = support or {}
    owed = 0.0
    runs_var = 0.0
    due_by_task: dict[str, float] = {}
    batch: list[PairRequest] = []
    rest: list[tuple[PairRequest, float, float]] = []

    def mean_error(task_id: str, due: float) -> float:
        n = support.get(task_id, 0)
        return cv * cv * due * due / n if n else 0.0

    for slot, charge, cost in slots:
        extra = cv * cv * charge * cost / 2.0  # ``charge`` tokens of runs costing ``cost / 2`` each
        task_due = due_by_task.get(slot.task_id, 0.0)
        means_var = sum(mean_error(t, d) for t, d in {**due_by_task, slot.task_id: task_due + charge}.items())
        if round_price(owed + charge, runs_var + extra + means_var, params) <= budget_remaining:
            batch.append(slot)
            owed += charge
            runs_var += extra
            due_by_task[slot.task_id] = task_due + charge
        else:
            rest.append((slot, charge, cost))
    return batch, rest


def round_price(expected: float, variance: float, params: DecisionParams) -> float:
    """What a round is charged against the budget: its expected cost plus
    ``params.round_price_sd`` standard deviations of it."""
    return expected + params.round_price_sd * math.sqrt(max(variance, 0.0))


def plan_round(summaries: Sequence[TaskSummary], estimate: stats.PoolEstimate | None, params: DecisionParams,
               budget_remaining: float, cost_hints: Mapping[str, float] | None = None,
               paid: Mapping[str, Sequence[float]] | None = None) -> tuple[list[tuple[str, int]], float]:
    """Next round: cover tasks without pairs, then greedy variance reduction per token.

    ``estimate`` (the pooled estimate so far) gives the spread of a run and the pair correlation
    the variance reduction is computed with (:func:`stats.pair_variance`).
    ``cost_hints`` (task → expected weighted tokens per run, e.g. its frozen baseline) prices
    tasks not yet run; without them the first round is one pair per task, unpriced.
    ``paid`` (task → weighted tokens already paid for its next pairs, in round order: stored runs
    the runner reuses, see :func:`paid_ahead`) lowers what those pairs cost against the budget —
    a pair whose reference run the shared pool holds costs the rule's run alone, and buys less
    variance reduction (the pool's run already counted). The round's size counts full prices.
    The round fits ``budget_remaining`` at its expected cost; :func:`decide_rule` starts its runs
    only as far as they fit at a high quantile of their cost (:func:`fitting_slots`).
    Returns the plan and what it is expected to spend."""
    if budget_remaining <= 0:
        return [], 0.0
    prepaid = paid or {}
    added: dict[str, int] = {}

    def due(task_id: str, cost: float) -> float:
        """What the next pair of ``task_id`` in this round costs beyond what is already paid."""
        ahead = prepaid.get(task_id, ())
        k = added.get(task_id, 0)
        return max(cost - ahead[k], 0.0) if k < len(ahead) else cost
    costs = pair_costs(summaries, cost_hints)
    full_pass = sum(costs.values())
    # Without any cost yet (first round) a round is one pair per task.
    target = params.round_size * full_pass if full_pass > 0 else 0.0
    spent = 0.0  # the round's size (full costs)
    owed = 0.0  # what it will cost (paid pairs excluded): what the budget must hold
    for t in summaries:  # coverage first: a verdict needs every task
        if not t.log_ratios:
            cost = costs[t.task_id]
            charge = due(t.task_id, cost)
            if owed + charge > budget_remaining:
                continue
            added[t.task_id] = 1
            spent += cost
            owed += charge
    usable = estimate is not None and math.isfinite(estimate.run_variance) and estimate.run_variance > 0
    pooled = estimate.run_variance if usable else 1.0
    rho = estimate.correlation if usable else 0.0
    sigma2 = _task_run_variances(summaries, pooled, params.shrink_pairs)
    by_id = {t.task_id: t for t in summaries}
    weights = {t.task_id: t.weight for t in summaries}

    def variance(task_id: str, pairs_added: int) -> float:
        """The task's variance after this round's pairs; a pair whose reference the pool holds (a
        reference run without a partner, ahead) turns that run into a pair."""
        t = by_id[task_id]
        pool = min(len(t.reference_only), len(prepaid.get(task_id, ())))
        converted = min(pairs_added, pool)
        return stats.pair_variance(max(len(t.log_ratios) + pairs_added, 1), len(t.reference_only) - converted,
                                   len(t.rule_only), sigma2[task_id], rho)

    def gain(task_id: str) -> float:
        k = added.get(task_id, 0)
        price = max(due(task_id, costs[task_id]), 0.01 * costs[task_id], 1.0)
        return weights[task_id] ** 2 * (variance(task_id, k) - variance(task_id, k + 1)) / price

    heap: list[tuple[float, str]] = [(-gain(t), t) for t in costs]
    heapq.heapify(heap)
    while heap and spent < target:
        _, task_id = heapq.heappop(heap)
        cost = costs[task_id]
        charge = due(task_id, cost)
        if owed + charge > budget_remaining:
            continue  # does not fit; cheaper tasks still may
        added[task_id] = added.get(task_id, 0) + 1
        spent += cost
        owed += charge
        heapq.heappush(heap, (-gain(task_id), task_id))
    plan = [(t.task_id, added[t.task_id]) for t in summaries if added.get(t.task_id)]
    return plan, owed


def _fmt_pct(x: float) -> str:
    return f"{100 * x:+.2f}%" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


_LLR_SHOWN = 10_000.0  # far past any threshold; beyond it the digits only say the spread is ~0


def _fmt_llr(llr: float) -> str:
    """The LLR for a reason line: identical paired costs leave no spread, and the ratio then
    runs to ±1e16 — shown as past a bound instead."""
    if abs(llr) < _LLR_SHOWN:
        return f"{llr:.2f}"
    return f"> {_LLR_SHOWN:,.0f}" if llr > 0 else f"< -{_LLR_SHOWN:,.0f}"


def decide(evidence: Evidence, tasks: Mapping[str, float] | Sequence[str], rent_tokens: float,
           params: DecisionParams | None = None, kind: str = ADMISSION,
           budget_remaining: float = math.inf, cost_hints: Mapping[str, float] | None = None,
           paid: Mapping[str, Sequence[float]] | None = None) -> Decision:
    """Decide on the evidence so far (pure). ``tasks`` = the suite (ids, or id → weight);
    ``budget_remaining`` = weighted tokens still allowed for this decision; ``cost_hints`` =
    expected weighted tokens per run of tasks not yet measured; ``paid`` = what the next pairs
    of each task already cost (see :func:`plan_round`: it prices the next round only)."""
    params = params or DecisionParams()
    if kind not in (ADMISSION, REAUDIT):
        raise ValueError(f"unknown decision kind {kind!r}")
    weights = _task_weights(tasks)
    summaries = summarize(evidence, weights)
    reasons: list[str] = []

    ref_means = [(t.weight, t.mean_reference) for t in summaries if not math.isnan(t.mean_reference)]
    ref_w = sum(w for w, _ in ref_means)
    reference_cost = sum(w * m for w, m in ref_means) / ref_w if ref_w else math.nan
    margin_tokens = params.keep_margin_k * float(rent_tokens)
    if math.isnan(reference_cost) or reference_cost <= 0:
        margin_rel = math.nan
    else:
        margin_rel = min(margin_tokens / reference_cost, 0.99)
    margin_log = stats.log_ratio_of_saving(margin_rel) if not math.isnan(margin_rel) else 0.0
    low, high = params.hypotheses(kind, margin_log)
    thresholds = (math.log(params.beta), math.log(1.0 / params.alpha))
    method = {"estimator": "Huber pseudo-values of log costs; per-task GLS of pairs and the shared reference pool",
              "huber_c": params.huber_c, "test": "SPRT (Wald 1945) with Ville thresholds",
              "alpha": params.alpha, "beta": params.beta, "design_effect": params.design_effect,
              "reaudit_effect": params.reaudit_effect, "k": params.keep_margin_k,
              "variance_quantile": params.variance_quantile, "kind": kind}

    regressions = tuple(t.task_id for t in summaries
                        if t.n_reference and t.pass_reference == t.n_reference and t.pass_rule < t.n_rule)
    drops = tuple(t.task_id for t in summaries if t.task_id not in regressions and t.n_reference
                  and t.n_rule and t.pass_rule / t.n_rule < t.pass_reference / t.n_reference)

    def build(verdict: Verdict, theta: float, variance: float, llr: float, n_pairs: int,
              next_tasks: tuple[tuple[str, int], ...] = (), next_cost: float = 0.0) -> Decision:
        offset = high - low
        lo = stats.lower_bound(theta, variance, offset, params.alpha)
        hi = stats.upper_bound(theta, variance, offset, params.beta)
        est = stats.relative_saving(theta) if math.isfinite(theta) else math.nan
        interval = (stats.relative_saving(lo), stats.relative_saving(hi))
        cost = reference_cost if math.isfinite(reference_cost) else 0.0
        return Decision(
            verdict=verdict, kind=kind, reasons=tuple(reasons), estimate=est, interval=interval,
            estimate_tokens=est * cost if math.isfinite(est) else math.nan,
            interval_tokens=(interval[0] * cost, interval[1] * cost),
            margin_tokens=margin_tokens, margin=margin_rel, rent_tokens=float(rent_tokens),
            reference_cost=reference_cost, llr=llr, thresholds=thresholds, n_pairs=n_pairs,
            tasks=tuple(summaries), next_tasks=next_tasks, next_cost=next_cost,
            completion_drops=drops, regressions=regressions, method=method)

    if drops:
        reasons.append("completion dropped with the rule on " + ", ".join(drops))

    if regressions:
        for task_id in regressions:
            t = next(s for s in summaries if s.task_id == task_id)
            reasons.append(f"regression: {task_id} passed {t.pass_reference}/{t.n_reference} "
                           f"without the rule and {t.pass_rule}/{t.n_rule} with it")
        theta, variance, _, n_pairs = pooled_estimate(summaries, params)
        llr = stats.sprt_llr(theta, variance, low, high) if n_pairs >= 2 else 0.0
        return build(Verdict.REGRESSION, theta, variance, llr, n_pairs)

    estimate = pool_estimate(summaries, params)
    theta, variance, n_pairs = estimate.estimate, conservative_variance(estimate, params), estimate.n_pairs
    method["pair_correlation"] = round(estimate.correlation, 4)
    method["unpaired_reference_runs"] = sum(len(t.reference_only) for t in summaries)
    covered = all(t.log_ratios for t in summaries)
    enough = covered and n_pairs >= max(2.0, params.min_pairs_per_task * len(summaries))
    if covered and n_pairs >= 2 and math.isfinite(variance):
        llr = stats.sprt_llr(theta, variance, low, high)
    else:
        llr = 0.0
    if enough and llr >= thresholds[1]:
        if kind == REAUDIT:
            reasons.append(f"still above the margin: saving {_fmt_pct(stats.relative_saving(theta))} "
                           f"of a run, LLR {_fmt_llr(llr)} ≥ log(1/α) = {thresholds[1]:.2f}")
        else:
            reasons.append(f"saving {_fmt_pct(stats.relative_saving(theta))} of a run clears the margin "
                           f"{_fmt_pct(margin_rel)}: LLR {_fmt_llr(llr)} ≥ log(1/α) = {thresholds[1]:.2f}")
        return build(Verdict.KEEP, theta, variance, llr, n_pairs)
    if enough and llr <= thresholds[0]:
        if kind == REAUDIT:
            reasons.append(f"below the margin {_fmt_pct(margin_rel)}: saving "
                           f"{_fmt_pct(stats.relative_saving(theta))}, LLR {_fmt_llr(llr)} ≤ log β = {thresholds[0]:.2f}")
        else:
            reasons.append(f"saving {_fmt_pct(stats.relative_saving(theta))} is not "
                           f"{_fmt_pct(params.design_effect)} above the margin: LLR {_fmt_llr(llr)} ≤ log β "
                           f"= {thresholds[0]:.2f}")
        return build(Verdict.REFUTE, theta, variance, llr, n_pairs)

    plan, cost = plan_round(summaries, estimate, params, budget_remaining, cost_hints, paid)
    missing = [t.task_id for t in summaries if not t.log_ratios]
    if not plan or (missing and not all(any(p[0] == m for p in plan) for m in missing)):
        reasons.append(f"evidence budget spent after {n_pairs} pairs: LLR {_fmt_llr(llr)} between "
                       f"{thresholds[0]:.2f} and {thresholds[1]:.2f}")
        return build(Verdict.INCONCLUSIVE, theta, variance, llr, n_pairs)
    if missing:
        why = f"{len(missing)} task(s) without a pair yet"
    elif not enough:
        needed = math.ceil(max(2.0, params.min_pairs_per_task * len(summaries)))
        why = f"{n_pairs} pairs so far, a verdict needs at least {needed}"
    else:
        why = (f"LLR {_fmt_llr(llr)} between {thresholds[0]:.2f} and {thresholds[1]:.2f}; pairs where they "
               f"reduce variance most per token")
    detail = ", ".join(f"{t}×{n}" for t, n in plan)
    reasons.append(f"need more: {why}: {detail} (~{cost:,.0f} tokens)")
    return build(Verdict.NEED_MORE, theta, variance, llr, n_pairs, tuple(plan), cost)


def pool_estimate(summaries: Sequence[TaskSummary], params: DecisionParams) -> stats.PoolEstimate:
    """The robust, pool-aware estimate of θ (:func:`stats.pooled_effect`) from every task's runs."""
    return stats.pooled_effect([t.runs() for t in summaries if t.paired_logs or t.reference_only or t.rule_only],
                               c=params.huber_c)


def conservative_variance(estimate: stats.PoolEstimate, params: DecisionParams) -> float:
    """The estimate's variance scaled to its upper confidence limit for the degrees of freedom."""
    if estimate.df < 1 or not math.isfinite(estimate.variance):
        return math.inf
    return (estimate.variance * stats.variance_inflation(estimate.df, params.variance_quantile)
            * stats.student_inflation(estimate.df, params.alpha))


def pooled_estimate(summaries: Sequence[TaskSummary], params: DecisionParams) -> tuple[float, float, float, int]:
    """(θ̂, conservative variance, robust scale of a run, pairs) from all tasks' runs."""
    estimate = pool_estimate(summaries, params)
    return estimate.estimate, conservative_variance(estimate, params), estimate.scale, estimate.n_pairs


def _usable_pairs(records: Sequence[RunRecord]) -> int:
    """Slots of a round whose every run is a result (no infra error): the pairs it adds."""
    slots: dict[tuple[str, int], list[RunRecord]] = {}
    for r in records:
        slots.setdefault((r.task_id, r.round_index), []).append(r)
    return sum(len(runs) >= 2 and not any(r.is_infra for r in runs) for runs in slots.values())


def infra_abort_reason(records: Sequence[RunRecord], unpaired_infra: int, params: DecisionParams) -> str | None:
    """Why a round's infra errors abort the decision, or None (pure). ``unpaired_infra`` = infra
    errors in the rounds in a row, this one included, that gave no usable pair."""
    infra = sum(r.is_infra for r in records)
    if records and infra / len(records) > params.infra_abort_fraction:
        return f"{infra} of {len(records)} runs were infrastructure errors"
    if unpaired_infra >= params.infra_unpaired_abort:
        # e.g. one arm fails every run: exactly half the runs, and no pair ever counts
        return f"infrastructure errors left no usable pair ({unpaired_infra} since the last usable one)"
    return None


# Stored rounds looked up ahead per task: each look is a query of the runner per (slot,
# configuration); rounds past this are priced in full (a budget can only be spent more slowly
# than it is charged) and join the pool's evidence as the decision gets to them.
PAID_AHEAD_PAIRS = 48


def stored_ahead(runner: SuiteRunner, configs: Sequence[Config], evidence: Evidence, tasks: Sequence[str],
                 limit: int) -> dict[str, list[list[RunRecord]]]:
    """Task → the stored runs of its next rounds (``next_round``, +1, … as long as the runner holds
    a stored run of either configuration for them, at most ``limit``), one list per round: asked
    of the runner's optional ``stored_runs`` (nothing for a runner without it)."""
    ahead: dict[str, list[list[RunRecord]]] = {}
    if getattr(runner, "stored_runs", None) is None or limit < 1:
        return ahead

    def found_in(slots: list[PairRequest]) -> dict[tuple[str, int], list[RunRecord]]:
        found: dict[tuple[str, int], list[RunRecord]] = {}
        for r in stored_records(runner, configs, slots):
            found.setdefault((r.task_id, r.round_index), []).append(r)
        return found

    # Two asks at most: each task's next round (often none is stored), then the rest of the
    # look-ahead for the tasks whose next round is.
    nexts = {t: evidence.next_round(t) for t in tasks}
    found = found_in([PairRequest(t, nexts[t]) for t in tasks])
    started = [t for t in tasks if (t, nexts[t]) in found]
    found.update(found_in([PairRequest(t, nexts[t] + k) for t in started for k in range(1, limit)]))
    for t in started:  # a task's stored rounds are the unbroken run from its next round
        for k in range(limit):
            records = found.get((t, nexts[t] + k))
            if records is None:
                break
            ahead.setdefault(t, []).append(records)
    return ahead


def paid_ahead(runner: SuiteRunner, configs: Sequence[Config], evidence: Evidence, tasks: Sequence[str],
               limit: int) -> dict[str, list[float]]:
    """Task → weighted tokens already paid for its next pairs (see :func:`stored_ahead`); a
    pair whose every run is stored is paid in full (``inf``: it costs nothing more, whatever a
    pair of its task is priced at)."""
    return _paid(stored_ahead(runner, configs, evidence, tasks, limit), len(configs))


def _paid(ahead: Mapping[str, list[list[RunRecord]]], configs: int = 2) -> dict[str, list[float]]:
    return {t: [math.inf if len({config_key(r.config) for r in records}) >= configs
                else sum(r.weighted_tokens for r in records) for records in rounds] for t, rounds in ahead.items()}


def decide_rule(runner: SuiteRunner, reference_config: Config, rule_config: Config,
                tasks: Mapping[str, float] | Sequence[str], rent_tokens: float,
                params: DecisionParams | None = None, budget_tokens: float | None = None,
                prior_evidence: Evidence | None = None, kind: str = ADMISSION,
                cost_hints: Mapping[str, float] | None = None, cost_cv: float | None = None) -> RuleDecision:
    """Decide one rule: drive paired rounds through ``runner`` until a verdict.

    ``reference_config`` is the active rule set, ``rule_config`` the same set plus the rule
    (frozensets of rule ids, or opaque keys). ``tasks`` are the golden task ids (or id → weight).
    ``rent_tokens`` is the rule's rent; the margin is ``params.keep_margin_k × rent``.
    ``budget_tokens`` caps the weighted tokens this call may spend (None = unlimited): when the
    next round no longer fits, the verdict is *inconclusive*. ``prior_evidence`` pools earlier
    runs of the same rule (its admission, earlier re-audits, an inconclusive earlier night);
    new rounds continue its round indices. A re-audit always buys at least one fresh round.
    ``cost_hints`` (task → expected weighted tokens per run) let the first round respect the
    budget too; without them the first round is one pair per task whatever it costs. A round,
    planned at its expected cost, starts its pairs in batches (one runner call each), a batch
    only as far as the spend so far plus the batch at a high quantile of its cost — its expected
    cost + ``params.round_price_sd`` standard deviations, one run's cost having the spread
    ``cost_cv`` (measured on recorded runs; else the evidence's, or an assumed one:
    :func:`round_cost_cv`) — fits ``budget_tokens``. Runs in flight always finish, so the spend
    passes the budget only when a batch's runs cost more than that, and by no more than that
    batch's excess: the next batch is priced on the actual spend. Runs the
    runner already holds (its optional ``stored_runs``: e.g. the rounds a killed invocation made)
    are priced at nothing when a round is planned, so a budget already charged for them (a
    resumed night's) still buys the rounds they belong to. The reference runs it holds at the
    rule's next rounds (made by other decisions: the shared pool) join the evidence as they are.

    Raises :class:`InfraAbort` when a round is mostly infrastructure errors, or when infra errors
    leave rounds without a usable pair (see :func:`infra_abort_reason`; no verdict).
    """
    params = params or DecisionParams()
    weights = _task_weights(tasks)
    if config_key(reference_config) == config_key(rule_config):
        raise ValueError("the measured configuration equals the reference")
    budget = math.inf if budget_tokens is None else float(budget_tokens)
    # Carried evidence counts by its pairs; the pool's unpaired runs are asked for afresh below.
    evidence = prior_evidence.paired_only() if prior_evidence is not None else Evidence()
    new_runs: list[RunRecord] = []
    spent = 0.0
    raw = 0
    rounds = 0
    looks: list[tuple[int, float]] = []
    unpaired_infra = 0  # infra errors in the rounds in a row that gave no usable pair
    configs = (reference_config, rule_config)
    while True:
        ahead = stored_ahead(runner, configs, evidence, list(weights), PAID_AHEAD_PAIRS)
        # Reference runs other decisions made at this rule's next rounds (the shared pool, same
        # configuration, seeds and freshness window) count now, as the reference's evidence.
        # A round whose rule run is stored too is this rule's own (a killed invocation's): it is
        # replayed as the pair it was, so the re-asked decision sees what the first one saw.
        ref_key, rule_key = config_key(reference_config), config_key(rule_config)
        evidence = evidence.extend([r for rounds in ahead.values() for records in rounds for r in records
                                    if config_key(r.config) == ref_key
                                    and not any(config_key(o.config) == rule_key for o in records)])
        paid = _paid(ahead, len(configs))
        decision = decide(evidence, weights, rent_tokens, params, kind, budget - spent, cost_hints, paid)
        looks.append((decision.n_pairs, decision.llr))
        must_measure = kind == REAUDIT and rounds == 0 and decision.verdict is not Verdict.INCONCLUSIVE
        if decision.final and not (must_measure and decision.verdict is not Verdict.REGRESSION):
            break
        if rounds >= params.max_rounds:
            decision = replace(decision, verdict=Verdict.INCONCLUSIVE,
                               reasons=decision.reasons + (f"stopped after {rounds} rounds",))
            break
        plan = list(decision.next_tasks)
        if not plan:  # a final verdict on prior evidence: re-audits still measure one round
            plan, _ = plan_round(decision.tasks, None, params, budget - spent, cost_hints, paid)
            if not plan:  # ... and without one the old evidence alone clears no probation
                decision = replace(decision, verdict=Verdict.INCONCLUSIVE, reasons=decision.reasons + (
                    "the budget does not buy the re-audit's fresh round: the earlier evidence alone decides "
                    "nothing",))
                break
        # The round's runs start in batches: each only as far as the spend so far plus the batch
        # at a high quantile of its cost fits the budget (runs in flight always finish).
        costs, support = priced_costs(decision.tasks, cost_hints)
        pending: list[tuple[PairRequest, float, float]] = []
        for task_id, count in plan:
            first = evidence.next_round(task_id)
            stored = ahead.get(task_id, [])
            for i in range(count):
                cost = costs.get(task_id, 0.0)
                # what still runs: a pair's runs that are not stored, each at half the pair's price
                held = len({config_key(r.config) for r in stored[i]}) if i < len(stored) else 0
                due = cost * max(len(configs) - held, 0) / len(configs)
                pending.append((PairRequest(task_id, first + i), due, cost))
        cv = round_cost_cv(decision.tasks, cost_cv)
        records: list[RunRecord] = []
        while pending:
            batch, pending = fitting_slots(pending, budget - spent, cv, params, support)
            if not batch:
                break
            made = runner.run([reference_config, rule_config], batch)
            ref_new = [r for r in made if config_key(r.config) == ref_key]
            rule_new = [r for r in made if config_key(r.config) == rule_key]
            evidence = evidence.extend(ref_new, rule_new)
            new_runs.extend(made)
            records.extend(made)
            spent += sum(r.weighted_tokens for r in made if not r.reused)
            raw += sum(r.raw_tokens for r in made if not r.reused)
        if not records:  # not one pair of the round fits the budget at its high-quantile price
            left = max(budget - spent, 0.0)
            low, high = decision.thresholds
            why = (f"evidence budget spent after {decision.n_pairs} pairs: LLR {_fmt_llr(decision.llr)} between "
                   f"{low:.2f} and {high:.2f}; the {left:,.0f} weighted tokens left do not buy the next pair at its "
                   f"expected cost plus {params.round_price_sd:g} standard deviations (a run once started always "
                   "finishes)")
            if must_measure:
                why = "the budget does not buy the re-audit's fresh round: the earlier evidence alone decides nothing"
            kept = tuple(r for r in decision.reasons if not r.startswith("need more: "))
            decision = replace(decision, verdict=Verdict.INCONCLUSIVE, next_tasks=(), next_cost=0.0,
                               reasons=kept + (why,))
            break
        rounds += 1
        unpaired_infra = unpaired_infra + sum(r.is_infra for r in records) if not _usable_pairs(records) else 0
        why = infra_abort_reason(records, unpaired_infra, params)
        if why:
            raise InfraAbort(f"{why} in round {rounds}; decision aborted", evidence, spent)
    return RuleDecision(decision, evidence, tuple(new_runs), spent, raw, rounds, tuple(looks))


def infra_unpaired_tasks(decision: Decision, evidence: Evidence) -> tuple[str, ...]:
    """The tasks of ``decision`` without a pair whose runs in ``evidence`` include an infra error:
    a budget spent with one of them leaves the suite's saving unknown, and not by the agent's doing."""
    infra = {r.task_id for r in (*evidence.reference, *evidence.rule) if r.is_infra}
    return tuple(t.task_id for t in decision.tasks if not t.log_ratios and t.task_id in infra)
