"""The selector's decision core: does a rule earn its place? (DESIGN.md §4, issue 5 item 1)

Pure: :func:`decide` maps the runs measured so far to a :class:`Decision`; :func:`decide_rule`
drives rounds through a :class:`~warden.select.runner.SuiteRunner` until a verdict and reports
what it spent. Neither does I/O of its own.

Method
======

**Data.** Every round runs the reference configuration (the active rule set) and the measured
configuration (active set + the rule) on the same task, interleaved. For each task *t* and
paired round *r* the observation is the paired log cost ratio
``d = log(reference weighted tokens) - log(rule weighted tokens)``. Logs make a relative effect
additive and remove the task's own size (task means differ tenfold), so pairs of all tasks share
one scale; pairing removes drift and cache warmth common to both arms. Runs that died of an
infrastructure error are dropped with their partner.

**Estimand and estimator.** θ = the task-weighted location of *d*; relative saving = 1 - e^-θ.
θ is estimated with a weighted Huber M-estimator (Huber 1964, c = 1.345, MAD scale), each pair
weighted ``w_t / n_t`` so every task counts with its golden-task weight whatever its number of
pairs; its variance is the sandwich (M-estimator) variance. Why Huber: a derailed run (×1.5–2 in
10–15% of runs) shifts *d* by ~0.6, three times the spread of ordinary noise; the mean lets a
few such pairs decide a verdict, a median throws away a third of the information on clean data,
Huber's ψ keeps ~95% efficiency on clean data and bounds each run's influence. Trimmed means need
a trimming fraction tuned to the unknown derail rate; median-of-means needs many blocks. The
calibration benchmark shows the false-keep rate stays under α with derailments (2.7–4.5% at α = 5%
with 12% of runs ×1.8), and its ablation with heavier derailments (×3) that Huber keeps more
power than the plain mean (35% vs 29% of 10%-rules kept) at a false-keep rate still under α.
With mild derailments (×1.8, about one noise SD) Huber and the mean are about equally
efficient: the guard matters when a run blows up.

**Margin.** ``k × rent`` weighted tokens per run (k = 2 by default) is a *safety margin*: the
measured saving already includes the rule's rent. It is converted to the log scale with the
reference cost per run (task-weighted mean of the reference means): m = -log(1 - margin/cost).

**Sequential test.** A truncated sequential probability ratio test (Wald 1945, "Sequential
tests of statistical hypotheses") on the robust estimate, looked at after every round:
``LLR = δ/v · (θ̂ - m - δ/2)`` compares θ = m + δ (the rule saves the design effect δ above its
margin) with θ = m (it saves no more than its margin). Keep when LLR ≥ log(1/α), refute when
LLR ≤ log β. The thresholds are Ville's (1939) inequality rather than Wald's approximations, so
under the normal model ``P(false keep) ≤ α`` and ``P(refute | θ ≥ m + δ) ≤ β`` hold *however many
looks* are taken, and across nights when evidence is pooled. Equivalently, keep iff the
anytime-valid lower confidence bound ``θ̂ - δ/2 - v·log(1/α)/δ`` clears the margin, refute iff the
upper bound ``θ̂ + δ/2 + v·log(1/β)/δ`` falls below margin + δ; these bounds are the interval the
receipt shows. Discrete looks only make the errors smaller (the statistic overshoots). The
variance is replaced by the upper limit ``v·df/χ²_df(q)``, and no keep or refute is taken
before ``min_pairs_per_task`` pairs per task, so the first looks do not trust a spread estimated
from a handful of heavy-tailed pairs (the calibration showed that first-look keeps on 8–10 pairs
were most of the excess false keeps of a plug-in variance). A test that reaches the evidence budget undecided is
*inconclusive* — not refuted.

**Re-audits** ask a different question of an active rule: is it still above its margin? The same
SPRT runs between θ = m - δr and θ = m + δr (δr = ``reaudit_effect``): a *miss* (verdict refute)
when the evidence favours below-the-margin at level β, a pass (keep) when above at level α.
Pooled across nights, the chance that a rule truly saving m + δr is ever missed stays ≤ β, and
a two-strike eviction needs two consecutive misses.

**Completion.** Compared per task before any statistics: a task whose every reference run passed
and that failed at least once with the rule is a *regression* — verdict at once, whatever the
tokens say. Any other drop of a task's pass rate under the rule is flagged in the reasons.

**Allocation.** A round plans paired runs to buy the most variance reduction per token:
greedily the task maximising ``w_t² σ_t² / (n_t (n_t + 1) c_t)`` (Neyman allocation with costs;
σ_t shrunk toward the pooled scale, c_t the task's mean pair cost), every task covered once first,
until the round costs about ``round_size`` full paired passes and fits the remaining budget.

**Budget.** Tuned on the calibration suite (8–16 tasks, 30k–300k tokens per run) at about ten
paired passes of the suite per admission; with less, more rules end inconclusive (never kept).

**Assumptions.** Runs are independent given the task and configuration (separate seeds and
copies); the effect is multiplicative per task (the log scale); the estimate is approximately
normal at each look (pairs ≥ number of tasks). Heterogeneous effects across tasks are allowed:
the estimand is their weighted location, and the pooled variance then errs on the safe side.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np

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
    beta: float = 0.10  # false evict of a rule saving `design_effect` above its margin
    design_effect: float = 0.10  # relative saving (fraction of a run) above the margin
    reaudit_effect: float = 0.05  # re-audit: relative distance from the margin tested
    keep_margin_k: float = 2.0
    variance_quantile: float = 0.25  # χ² quantile of the conservative variance
    round_size: float = 0.5  # a round costs about this many full paired passes of the suite
    huber_c: float = stats.HUBER_C  # math.inf = the plain weighted mean (calibration ablation)
    min_pairs_per_task: float = 2.0  # no keep/refute on fewer pairs (× tasks): a spread needs replicates
    shrink_pairs: float = 4.0  # pseudo-pairs of pooled spread in a task's own spread
    infra_abort_fraction: float = 0.5  # a round with more infra errors than this aborts
    # Rounds in a row without a usable pair abort once they hold this many infra errors: an arm
    # that always fails is half the runs (never "more than half"), one flaky run alone is not.
    infra_unpaired_abort: int = 2
    max_rounds: int = 200

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
        return Evidence(self.reference + tuple(reference), self.rule + tuple(rule))

    def next_round(self, task_id: str) -> int:
        rounds = [r.round_index for r in self.reference + self.rule if r.task_id == task_id]
        return max(rounds) + 1 if rounds else 0


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


def _pairs(reference: list[RunRecord], rule: list[RunRecord]) -> list[tuple[RunRecord, RunRecord]]:
    """Pair by paired-round index; leftovers (e.g. runs recorded without a shared index) pair
    in round order."""
    ref_by_round = {r.round_index: r for r in reference}
    rule_by_round = {r.round_index: r for r in rule}
    common = sorted(set(ref_by_round) & set(rule_by_round))
    pairs = [(ref_by_round[i], rule_by_round[i]) for i in common]
    left_ref = sorted((r for r in reference if r.round_index not in rule_by_round), key=lambda r: r.round_index)
    left_rule = sorted((r for r in rule if r.round_index not in ref_by_round), key=lambda r: r.round_index)
    pairs.extend(zip(left_ref, left_rule))
    return pairs


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
    return {task: _pairs(ref, rule) for task, (ref, rule, _) in _runs_by_task(evidence, tasks).items()}


def summarize(evidence: Evidence, weights: Mapping[str, float]) -> list[TaskSummary]:
    out = []
    for task_id, (ref, rule, infra) in _runs_by_task(evidence, weights).items():
        pairs = _pairs(ref, rule)
        out.append(TaskSummary(
            task_id=task_id, weight=weights[task_id], n_reference=len(ref), n_rule=len(rule),
            pass_reference=sum(r.completed for r in ref), pass_rule=sum(r.completed for r in rule),
            infra=infra,
            mean_reference=sum(r.weighted_tokens for r in ref) / len(ref) if ref else math.nan,
            mean_rule=sum(r.weighted_tokens for r in rule) / len(rule) if rule else math.nan,
            log_ratios=tuple(math.log(max(a.weighted_tokens, 1.0)) - math.log(max(b.weighted_tokens, 1.0))
                             for a, b in pairs),
            token_diffs=tuple(a.weighted_tokens - b.weighted_tokens for a, b in pairs)))
    return out


def _pair_cost(t: TaskSummary, fallback: float) -> float:
    sides = [x for x in (t.mean_reference, t.mean_rule) if not math.isnan(x)]
    if not sides:
        return fallback
    return 2.0 * sum(sides) / len(sides)


def plan_round(summaries: Sequence[TaskSummary], theta: float, scale: float, params: DecisionParams,
               budget_remaining: float, cost_hints: Mapping[str, float] | None = None,
               paid: Mapping[str, Sequence[float]] | None = None) -> tuple[list[tuple[str, int]], float]:
    """Next round: cover tasks without pairs, then greedy variance reduction per token.
    ``cost_hints`` (task → expected weighted tokens per run, e.g. its frozen baseline) prices
    tasks not yet run; without them the first round is one pair per task, unpriced.
    ``paid`` (task → weighted tokens already paid for its next pairs, in round order: stored runs
    the runner reuses, see :func:`paid_ahead`) lowers what those pairs cost against the budget;
    the round's size and its choice of tasks stay those of an unpaid round. Returns the plan and
    what it is expected to spend."""
    if budget_remaining <= 0:
        return [], 0.0
    prepaid = paid or {}

    def due(task_id: str, cost: float) -> float:
        """What the next pair of ``task_id`` in this round costs beyond what is already paid."""
        ahead = prepaid.get(task_id, ())
        k = added.get(task_id, 0)
        return max(cost - ahead[k], 0.0) if k < len(ahead) else cost
    hints = cost_hints or {}
    known = [_pair_cost(t, 2.0 * hints[t.task_id] if t.task_id in hints else math.nan) for t in summaries]
    known_costs = [c for c in known if not math.isnan(c)]
    fallback = sum(known_costs) / len(known_costs) if known_costs else 0.0
    costs = {t.task_id: (c if not math.isnan(c) else fallback) for t, c in zip(summaries, known)}
    full_pass = sum(costs.values())
    # Without any cost yet (first round) a round is one pair per task.
    target = params.round_size * full_pass if full_pass > 0 else 0.0
    added: dict[str, int] = {}
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
    pooled_var = scale ** 2 if scale > 0 else 1.0
    heap: list[tuple[float, str]] = []
    sigma2: dict[str, float] = {}
    for t in summaries:
        n = len(t.log_ratios)
        if n:
            resid = np.clip((np.asarray(t.log_ratios) - theta) / max(scale, 1e-9), -params.huber_c,
                            params.huber_c) * max(scale, 1e-9)
            own = float(np.sum(resid ** 2))
            sigma2[t.task_id] = (own + params.shrink_pairs * pooled_var) / (n + params.shrink_pairs)
        else:
            sigma2[t.task_id] = pooled_var
    weights = {t.task_id: t.weight for t in summaries}
    counts = {t.task_id: len(t.log_ratios) + added.get(t.task_id, 0) for t in summaries}

    def gain(task_id: str) -> float:
        n = max(counts[task_id], 1)
        return weights[task_id] ** 2 * sigma2[task_id] / (n * (n + 1) * max(costs[task_id], 1.0))

    for task_id in counts:
        heapq.heappush(heap, (-gain(task_id), task_id))
    while heap and spent < target:
        _, task_id = heapq.heappop(heap)
        cost = costs[task_id]
        charge = due(task_id, cost)
        if owed + charge > budget_remaining:
            continue  # does not fit; cheaper tasks still may
        added[task_id] = added.get(task_id, 0) + 1
        counts[task_id] += 1
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
    method = {"estimator": "weighted Huber M-estimate of paired log cost ratios",
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

    theta, variance, scale_llr, n_pairs = pooled_estimate(summaries, params)
    covered = all(t.log_ratios for t in summaries)
    enough = covered and n_pairs >= max(2.0, params.min_pairs_per_task * len(summaries))
    if covered and n_pairs >= 2 and math.isfinite(variance):
        llr = stats.sprt_llr(theta, variance, low, high)
    else:
        llr = 0.0
    scale = scale_llr if math.isfinite(scale_llr) else 0.0
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

    plan, cost = plan_round(summaries, theta if math.isfinite(theta) else 0.0, scale, params,
                            budget_remaining, cost_hints, paid)
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


def pooled_estimate(summaries: Sequence[TaskSummary], params: DecisionParams) -> tuple[float, float, float, int]:
    """(θ̂, conservative variance, robust scale, pairs) from all tasks' paired log ratios."""
    values: list[float] = []
    weights: list[float] = []
    for t in summaries:
        n = len(t.log_ratios)
        if not n:
            continue
        values.extend(t.log_ratios)
        weights.extend([t.weight / n] * n)
    if not values:
        return math.nan, math.inf, math.nan, 0
    if len(values) == 1:
        return values[0], math.inf, math.nan, 1
    robust = stats.huber_location(values, weights, c=params.huber_c)
    variance = robust.variance * stats.variance_inflation(robust.n - 1, params.variance_quantile)
    return robust.estimate, variance, robust.scale, robust.n


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


# Stored pairs looked up ahead per task for a round's price: each look is a query of the runner,
# and a long shared reference would make every round ask for all of it; pairs past this are
# priced in full (a budget can only be spent more slowly than it is charged).
PAID_AHEAD_PAIRS = 16


def paid_ahead(runner: SuiteRunner, configs: Sequence[Config], evidence: Evidence, tasks: Sequence[str],
               limit: int) -> dict[str, list[float]]:
    """Task → weighted tokens already paid for its next pairs (rounds ``next_round``, +1, …, as
    long as the runner holds a stored run of either configuration for them, at most ``limit``):
    asked of the runner's optional ``stored_runs`` (nothing for a runner without it)."""
    paid: dict[str, list[float]] = {}
    if getattr(runner, "stored_runs", None) is None or limit < 1:
        return paid

    def found_in(slots: list[PairRequest]) -> dict[tuple[str, int], float]:
        found: dict[tuple[str, int], float] = {}
        for r in stored_records(runner, configs, slots):
            found[(r.task_id, r.round_index)] = found.get((r.task_id, r.round_index), 0.0) + r.weighted_tokens
        return found

    # Two asks at most: each task's next pair (usually none is stored), then the rest of the
    # look-ahead for the tasks whose next pair is.
    found = found_in([PairRequest(t, evidence.next_round(t)) for t in tasks])
    started = [t for t in tasks if (t, evidence.next_round(t)) in found]
    found.update(found_in([PairRequest(t, evidence.next_round(t) + k) for t in started for k in range(1, limit)]))
    for t in started:  # a task's paid pairs are the unbroken run from its next round
        for k in range(limit):
            cost = found.get((t, evidence.next_round(t) + k))
            if cost is None:
                break
            paid.setdefault(t, []).append(cost)
    return paid


def decide_rule(runner: SuiteRunner, reference_config: Config, rule_config: Config,
                tasks: Mapping[str, float] | Sequence[str], rent_tokens: float,
                params: DecisionParams | None = None, budget_tokens: float | None = None,
                prior_evidence: Evidence | None = None, kind: str = ADMISSION,
                cost_hints: Mapping[str, float] | None = None) -> RuleDecision:
    """Decide one rule: drive paired rounds through ``runner`` until a verdict.

    ``reference_config`` is the active rule set, ``rule_config`` the same set plus the rule
    (frozensets of rule ids, or opaque keys). ``tasks`` are the golden task ids (or id → weight).
    ``rent_tokens`` is the rule's rent; the margin is ``params.keep_margin_k × rent``.
    ``budget_tokens`` caps the weighted tokens this call may spend (None = unlimited): when the
    next round no longer fits, the verdict is *inconclusive*. ``prior_evidence`` pools earlier
    runs of the same rule (its admission, earlier re-audits, an inconclusive earlier night);
    new rounds continue its round indices. A re-audit always buys at least one fresh round.
    ``cost_hints`` (task → expected weighted tokens per run) let the first round respect the
    budget too; without them the first round is one pair per task whatever it costs. Runs the
    runner already holds (its optional ``stored_runs``: e.g. the rounds a killed invocation made)
    are priced at nothing when a round is planned, so a budget already charged for them (a
    resumed night's) still buys the rounds they belong to.

    Raises :class:`InfraAbort` when a round is mostly infrastructure errors, or when infra errors
    leave rounds without a usable pair (see :func:`infra_abort_reason`; no verdict).
    """
    params = params or DecisionParams()
    weights = _task_weights(tasks)
    if config_key(reference_config) == config_key(rule_config):
        raise ValueError("the measured configuration equals the reference")
    budget = math.inf if budget_tokens is None else float(budget_tokens)
    evidence = prior_evidence or Evidence()
    new_runs: list[RunRecord] = []
    spent = 0.0
    raw = 0
    rounds = 0
    looks: list[tuple[int, float]] = []
    unpaired_infra = 0  # infra errors in the rounds in a row that gave no usable pair
    configs = (reference_config, rule_config)
    while True:
        paid = paid_ahead(runner, configs, evidence, list(weights), PAID_AHEAD_PAIRS)
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
            plan, _ = plan_round(decision.tasks, 0.0, 0.0, params, budget - spent, cost_hints, paid)
            if not plan:  # ... and without one the old evidence alone clears no probation
                decision = replace(decision, verdict=Verdict.INCONCLUSIVE, reasons=decision.reasons + (
                    "the budget does not buy the re-audit's fresh round: the earlier evidence alone decides "
                    "nothing",))
                break
        slots: list[PairRequest] = []
        for task_id, count in plan:
            first = evidence.next_round(task_id)
            slots.extend(PairRequest(task_id, first + i) for i in range(count))
        records = runner.run([reference_config, rule_config], slots)
        ref_key, rule_key = config_key(reference_config), config_key(rule_config)
        ref_new = [r for r in records if config_key(r.config) == ref_key]
        rule_new = [r for r in records if config_key(r.config) == rule_key]
        evidence = evidence.extend(ref_new, rule_new)
        new_runs.extend(records)
        spent += sum(r.weighted_tokens for r in records if not r.reused)
        raw += sum(r.raw_tokens for r in records if not r.reused)
        rounds += 1
        unpaired_infra = unpaired_infra + sum(r.is_infra for r in records) if not _usable_pairs(records) else 0
        why = infra_abort_reason(records, unpaired_infra, params)
        if why:
            raise InfraAbort(f"{why} in round {rounds}; decision aborted", evidence, spent)
    return RuleDecision(decision, evidence, tuple(new_runs), spent, raw, rounds, tuple(looks))
