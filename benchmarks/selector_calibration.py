"""Selector calibration: warden's decision core vs the fixed anchor policy, same draws.

Drives the real decision core (``warden.select.decision.decide_rule``) through the suite-runner
protocol with a synthetic runner of known truth (``warden.select.runner.SyntheticRunner``):
per suite 8–16 tasks (``--tasks``) with mean costs log-uniform over 30k–300k weighted tokens, log-normal run
noise with CV 25%, 12% of runs derailed ×1.8, a rule rent of 30–60 tokens (margin k×rent ≈
0.05–0.2% of a run). True relative savings 0, 2, 5, 10, 20%, a harmful −5% rule, and a rule that
saves 5% but breaks one task (its check fails with the rule).

Decisions come in freshness windows: ``--nights`` nights (default 7, the default
``reference_freshness_days``) of ``--per-night`` candidates (default 3, what the demo's naive
agent yields) with the same true effect on one suite. Ours decides them one after another through
one ``ReusingRunner`` per window, as the shipped selector does over the bench runner, which reuses
a stored run of the same configuration, model, suite, fixture and seed within the freshness
window: a reference run bought by one decision is reused by every later one (charged once) —
as a partner of their pairs and, where they have not reached its round, as the shared pool the
estimate uses beside the pairs. A keep changes the active set and with it the reference; the kept
rule's own runs are the new reference's when MEMORY.md's order is unchanged by the keep (the rule
measured least of those kept so far, see ``order_rules``), otherwise the new reference starts
empty. ``--nights 1`` reuses within a night only; ``--per-night 1 --nights 1`` not at all.

In the same run, on the same draws (the k-th run of a task under a configuration is the same
number for both policies), a faithful re-implementation of the anchor's fixed policy
(DESIGN.md §4): 3 runs per side per task, unpaired, the baseline re-run on every decision; keep
iff saving ≥ margin + 2·SE with the within-task SE; evict at once when it is clearly below
(saving < margin − 2·SE); when it is within 2·SE of the margin (uncertain either way), one
Neyman top-up (another 3 runs per task per side, allocated across tasks ∝ their within-task
SD), then keep iff saving ≥ margin + 2·SE, else evict ("evict when still uncertain"). Reading
"within 2·SE" as only the band just under the keep line [margin, margin + 2·SE) would evict
uncertain rules before any top-up, against "evict when *still* uncertain"; it would also make
the anchor cheaper (fewer top-ups).

Re-audits: a rule truly saving 5% starts active and is re-audited on 12 nights. Two strikes:
a miss puts it on probation, a second consecutive miss evicts, a pass clears probation. Ours
pools the rule's evidence across nights; the anchor re-decides from scratch every night (a miss
= not kept).

Usage: python benchmarks/selector_calibration.py [--decisions N] [--seed S] [--nights N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warden.select.decision import (REAUDIT, DecisionParams, Evidence,  # noqa: E402
                                    InfraAbort, Verdict, decide_rule)
from warden.select.runner import (ReusingRunner, SyntheticRunner, SyntheticTask,  # noqa: E402
                                  log_uniform_tasks, run_config)

REFERENCE = "active"
RULE = "active+rule"
K = 2.0
# (label, true relative saving, breaks a task)
SCENARIOS: list[tuple[str, float, bool]] = [
    ("0%", 0.0, False), ("2%", 0.02, False), ("5%", 0.05, False), ("10%", 0.10, False),
    ("20%", 0.20, False), ("-5% (harmful)", -0.05, False), ("breaks a task", 0.05, True),
]
DEAD = ("0%", "-5% (harmful)")
# The design tuned with this benchmark (DecisionParams defaults + these budgets).
ADMISSION_BUDGET = 100_000_000  # weighted tokens per admission decision (~36 paired suite passes)
REAUDIT_BUDGET = 5_000_000  # weighted tokens per nightly re-audit (~2 paired suite passes)
NIGHTS = 12
HEAVY_DERAIL = 3.0  # robustness section: derailed runs cost ×3
ROBUST_SAVINGS = (0.0, 0.10)


TASKS_PER_SUITE = (8, 16)
PER_NIGHT = 3  # candidates per selector invocation (the demo's naive agent yields 3)
NIGHTS_PER_WINDOW = 7  # nights of one freshness window: Settings.reference_freshness_days


def make_suite(seed: int) -> tuple[list[SyntheticTask], float]:
    rng = np.random.default_rng([seed, 1])
    count = int(rng.integers(TASKS_PER_SUITE[0], TASKS_PER_SUITE[1] + 1))
    return log_uniform_tasks(rng, count), float(rng.uniform(30, 60))


def make_runner(tasks: list[SyntheticTask], saving: float, breaks: bool, seed: int,
                derail_factor: float = 1.8, rules: tuple[str, ...] = (RULE,)) -> SyntheticRunner:
    """One runner for a suite; every rule in ``rules`` truly saves ``saving`` (its own noise)."""
    broken = {rule: frozenset({tasks[-1].task_id}) for rule in rules} if breaks else {}
    return SyntheticRunner(tasks, savings={rule: saving for rule in rules}, broken_tasks=broken,
                           seed=seed, derail_factor=derail_factor)


def night_rules(seed: int, count: int, first_rent: float) -> list[tuple[str, float]]:
    """The candidates decided in one invocation: (config name, rent); the first keeps the suite's rent."""
    rules = [(RULE, first_rent)]
    for i in range(1, count):
        rules.append((f"{RULE}#{i + 1}", float(np.random.default_rng([seed, 2, i]).uniform(30, 60))))
    return rules


# ---------------------------------------------------------------------------------- anchor policy
def anchor_decide(runner: SyntheticRunner, task_ids: list[str], rent: float, rule_config: str = RULE) -> str:
    """The fixed policy we are out to beat; returns keep | evict | regression. Its baseline is
    run afresh for every decision (it had no reuse: DESIGN.md §4)."""
    ref = run_config(runner, REFERENCE, task_ids, 3)
    rule = run_config(runner, rule_config, task_ids, 3)
    margin = K * rent

    def by_task(records):
        out: dict[str, list] = {t: [] for t in task_ids}
        for r in records:
            out[r.task_id].append(r)
        return out

    def regression(ref_t, rule_t) -> bool:
        return any(all(r.completed for r in ref_t[t]) and not all(r.completed for r in rule_t[t])
                   for t in task_ids)

    def saving_and_se(ref_t, rule_t) -> tuple[float, float]:
        diffs, var = 0.0, 0.0
        for t in task_ids:
            a = np.array([r.weighted_tokens for r in ref_t[t]])
            b = np.array([r.weighted_tokens for r in rule_t[t]])
            diffs += a.mean() - b.mean()
            var += a.var(ddof=1) / a.size + b.var(ddof=1) / b.size
        n = len(task_ids)
        return diffs / n, math.sqrt(var) / n

    ref_t, rule_t = by_task(ref), by_task(rule)
    if regression(ref_t, rule_t):
        return "regression"
    saving, se = saving_and_se(ref_t, rule_t)
    if saving >= margin + 2 * se:
        return "keep"
    if saving < margin - 2 * se:
        return "evict"
    # One Neyman top-up: 3 more runs per task per side, allocated ∝ within-task SD.
    extra = 3 * len(task_ids)
    for config, groups in ((REFERENCE, ref_t), (rule_config, rule_t)):
        sds = np.array([np.std([r.weighted_tokens for r in groups[t]], ddof=1) for t in task_ids])
        shares = sds / sds.sum() if sds.sum() > 0 else np.full(len(task_ids), 1 / len(task_ids))
        counts = np.floor(shares * extra).astype(int)
        for i in np.argsort(-(shares * extra - counts))[: extra - counts.sum()]:
            counts[i] += 1
        for t, c in zip(task_ids, counts):
            if c:
                groups[t].extend(run_config(runner, config, [t], int(c), first_round=len(groups[t])))
    if regression(ref_t, rule_t):
        return "regression"
    saving, se = saving_and_se(ref_t, rule_t)
    return "keep" if saving >= margin + 2 * se else "evict"


# ------------------------------------------------------------------------------------- one trial
def admission_trial(args: tuple[int, int, DecisionParams, float, int, int]) -> list[dict]:
    """One freshness window of ``nights`` × ``per_night`` candidates with the same true effect on
    one suite, decided one after another as the shipped selector decides them.

    Ours decides through one :class:`ReusingRunner` for the whole window: a reference run bought
    by one decision is reused by every later one (charged once), as BenchSuiteRunner reuses stored
    runs within ``reference_freshness_days``. A keep changes the active set and so the reference:
    the kept rule's own runs are the new reference's runs when its keep leaves MEMORY.md's order
    as it was (it measured least of the rules kept so far: ``order_rules``), otherwise the new
    reference starts empty. The anchor re-runs its baseline every time (it had no reuse:
    DESIGN.md §4)."""
    scenario, seed, params, budget, per_night, nights = args
    label, saving, breaks = SCENARIOS[scenario]
    tasks, rent = make_suite(seed)
    ids = [t.task_id for t in tasks]
    rules = night_rules(seed, per_night * nights, rent)
    names = tuple(name for name, _ in rules)
    fresh_references = [f"{REFERENCE}@v{v}" for v in range(len(rules) + 1)]
    inner = make_runner(tasks, saving, breaks, seed, rules=names)
    ours_runner = ReusingRunner(inner, fresh_references + list(names))
    anchor_runner = make_runner(tasks, saving, breaks, seed, rules=names)
    rows = []
    reference, fresh = fresh_references[0], 1
    kept: list[float] = []  # the measured savings of the rules kept so far
    for name, rule_rent in rules:
        # the candidate's configuration = the reference + the rule: savings compound
        inner.savings[name] = 1.0 - (1.0 - saving) * (1.0 - inner.savings.get(reference, 0.0))
        result = decide_rule(ours_runner, reference, name, ids, rule_rent, params, budget_tokens=budget)
        if result.decision.verdict is Verdict.KEEP:
            measured = result.decision.estimate_tokens
            if all(measured <= other for other in kept):
                reference = name  # same memory bytes: its runs are the new reference's
            else:
                reference, fresh = fresh_references[fresh], fresh + 1
            kept.append(measured)
        before = anchor_runner.tokens_spent
        anchor = anchor_decide(anchor_runner, ids, rule_rent, name)
        rows.append({"scenario": label, "ours": result.decision.verdict.value, "ours_tokens": result.tokens_spent,
                     "anchor": anchor, "anchor_tokens": anchor_runner.tokens_spent - before})
    return rows


def robustness_trial(args: tuple[float, int, DecisionParams, float]) -> dict:
    """Heavier derailments (×3 in 12% of runs): the Huber estimate vs the plain mean."""
    saving, seed, params, budget = args
    tasks, rent = make_suite(seed)
    out = {"saving": saving}
    for name, c in (("huber", params.huber_c), ("mean", math.inf)):
        runner = make_runner(tasks, saving, False, seed, derail_factor=HEAVY_DERAIL)
        result = decide_rule(runner, REFERENCE, RULE, [t.task_id for t in tasks], rent,
                             replace(params, huber_c=c), budget_tokens=budget)
        out[name] = result.decision.verdict.value
        out[f"{name}_tokens"] = runner.tokens_spent
    return out


def reaudit_trial(args: tuple[int, DecisionParams, float]) -> dict:
    """A truly-5% rule, active, re-audited nightly; the night it is evicted (or None)."""
    seed, params, budget = args
    tasks, rent = make_suite(seed + 1_000_003)
    ids = [t.task_id for t in tasks]
    out: dict = {}
    runner = make_runner(tasks, 0.05, False, seed)
    evidence: Evidence | None = None
    strikes, evicted, tokens = 0, None, 0.0
    for night in range(1, NIGHTS + 1):
        before = runner.tokens_spent
        try:
            result = decide_rule(runner, REFERENCE, RULE, ids, rent, params, budget_tokens=budget,
                                 prior_evidence=evidence, kind=REAUDIT)
        except InfraAbort:
            continue
        tokens += runner.tokens_spent - before
        evidence = result.evidence
        verdict = result.decision.verdict
        if verdict is Verdict.REGRESSION:
            evicted = night
            break
        if verdict is Verdict.REFUTE:
            strikes += 1
            if strikes >= 2:
                evicted = night
                break
        elif verdict is Verdict.KEEP:
            strikes = 0
    out["ours_evicted_night"], out["ours_tokens_per_night"] = evicted, tokens / NIGHTS
    anchor_runner = make_runner(tasks, 0.05, False, seed)
    strikes, evicted = 0, None
    for night in range(1, NIGHTS + 1):
        verdict = anchor_decide(anchor_runner, ids, rent)
        if verdict == "keep":
            strikes = 0
            continue
        strikes += 1
        if verdict == "regression" or strikes >= 2:
            evicted = night
            break
    out["anchor_evicted_night"] = evicted
    out["anchor_tokens_per_night"] = anchor_runner.tokens_spent / NIGHTS
    return out


# ------------------------------------------------------------------------------------- reporting
def summarize(admissions: list[dict], reaudits: list[dict], robustness: list[dict] | None = None) -> dict:
    table: dict = {"ours": {}, "anchor": {}, "robustness": {}}
    for name in ("huber", "mean"):
        for saving in ROBUST_SAVINGS:
            rows = [r for r in robustness or [] if r["saving"] == saving]
            if rows:
                table["robustness"].setdefault(name, {})[f"{saving:.0%}"] = {
                    "keep_rate": float(np.mean([r[name] == "keep" for r in rows])),
                    "mean_tokens": float(np.mean([r[f"{name}_tokens"] for r in rows])), "n": len(rows)}
    for policy in ("ours", "anchor"):
        for label, _, _ in SCENARIOS:
            rows = [r for r in admissions if r["scenario"] == label]
            verdicts = [r[policy] for r in rows]
            n = len(rows)
            table[policy][label] = {
                "n": n,
                "keep_rate": verdicts.count("keep") / n,
                "refute_rate": (verdicts.count("refute") + verdicts.count("evict")) / n,
                "inconclusive_rate": verdicts.count("inconclusive") / n,
                "regression_rate": verdicts.count("regression") / n,
                "mean_tokens": float(np.mean([r[f"{policy}_tokens"] for r in rows])),
            }
        all_tokens = [r[f"{policy}_tokens"] for r in admissions]
        dead_tokens = [r[f"{policy}_tokens"] for r in admissions if r["scenario"] in DEAD]
        evicted = [r[f"{policy}_evicted_night"] for r in reaudits]
        table[policy]["_overall"] = {
            "mean_tokens": float(np.mean(all_tokens)),
            "dead_mean_tokens": float(np.mean(dead_tokens)),
            "inconclusive_rate": float(np.mean([r[policy] == "inconclusive" for r in admissions])),
            "reaudit_5pct_evicted_within_12": float(np.mean([e is not None for e in evicted])),
            "reaudit_tokens_per_night": float(np.mean([r[f"{policy}_tokens_per_night"] for r in reaudits])),
        }
    o, a = table["ours"], table["anchor"]
    table["targets"] = {
        "false_keep_at_0_le_5pct": o["0%"]["keep_rate"] <= 0.05,
        "power_at_20_ge_0.9": o["20%"]["keep_rate"] >= 0.9,
        "power_at_10_ge_2x_anchor": o["10%"]["keep_rate"] >= 2 * a["10%"]["keep_rate"],
        "tokens_le_anchor": o["_overall"]["mean_tokens"] <= a["_overall"]["mean_tokens"],
        "dead_tokens_le_0.75x_anchor": o["_overall"]["dead_mean_tokens"] <= 0.75 * a["_overall"]["dead_mean_tokens"],
        "reaudit_5pct_eviction_le_15pct": o["_overall"]["reaudit_5pct_evicted_within_12"] <= 0.15,
        "regression_always_evicted": o["breaks a task"]["regression_rate"] == 1.0,
    }
    return table


def render(table: dict) -> str:
    lines = []
    header = f"{'true saving':<15}" + "".join(
        f"{p + ' ' + c:>15}" for p in ("ours", "anchor") for c in ("keep", "inconcl.", "Mtok/dec"))
    lines.append(header)
    for label, _, _ in SCENARIOS:
        cells = []
        for policy in ("ours", "anchor"):
            row = table[policy][label]
            keep = row["keep_rate"] if label != "breaks a task" else 1 - row["regression_rate"]
            cells += [f"{keep:>15.3f}", f"{row['inconclusive_rate']:>15.3f}", f"{row['mean_tokens'] / 1e6:>15.2f}"]
        lines.append(f"{label:<15}" + "".join(cells))
    lines.append("('breaks a task' row: share NOT evicted as a regression)")
    for policy in ("ours", "anchor"):
        o = table[policy]["_overall"]
        lines.append(f"{policy:>6}: mean Mtok/decision {o['mean_tokens'] / 1e6:.2f}, on dead rules "
                     f"{o['dead_mean_tokens'] / 1e6:.2f}; inconclusive {o['inconclusive_rate']:.3f}; "
                     f"5% rule evicted within {NIGHTS} re-audits {o['reaudit_5pct_evicted_within_12']:.3f} "
                     f"({o['reaudit_tokens_per_night'] / 1e6:.2f} Mtok/night)")
    ratio = table["ours"]["_overall"]["mean_tokens"] / table["anchor"]["_overall"]["mean_tokens"]
    dead = table["ours"]["_overall"]["dead_mean_tokens"] / table["anchor"]["_overall"]["dead_mean_tokens"]
    lines.append(f"tokens ours/anchor: {ratio:.2f} overall, {dead:.2f} on dead rules")
    robust = table.get("robustness", {})
    if robust:
        lines.append(f"robustness, derailments ×{HEAVY_DERAIL:g} in 12% of runs (ours, keep rate / Mtok):")
        for name, label in (("huber", "Huber (shipped)"), ("mean", "plain mean")):
            cells = ", ".join(f"true {k}: {v['keep_rate']:.3f} / {v['mean_tokens'] / 1e6:.2f}"
                              for k, v in robust.get(name, {}).items())
            lines.append(f"  {label:<16} {cells}")
    for name, ok in table["targets"].items():
        lines.append(f"  [{'PASS' if ok else 'FAIL'}] {name}")
    needed = 2 * table["anchor"]["10%"]["keep_rate"]
    lines.append(f"  (power_at_10 asks ours to keep ≥ {needed:.3f} of 10% rules"
                 + (": more than all of them, out of reach for any policy on these suites)" if needed > 1 else ")"))
    return "\n".join(lines)


def run(decisions: int, seed: int, reaudits: int, params: DecisionParams, budget: float,
        reaudit_budget: float, workers: int, robust: int = 0, per_night: int = 1, nights: int = 1) -> dict:
    windows = math.ceil(decisions / (per_night * nights))
    admission_jobs = [(s, seed * 1_000_000 + i, params, budget, per_night, nights)
                      for s in range(len(SCENARIOS)) for i in range(windows)]
    reaudit_jobs = [(seed * 1_000_000 + 500_000 + i, params, reaudit_budget) for i in range(reaudits)]
    robust_jobs = [(saving, seed * 1_000_000 + 700_000 + i, params, budget)
                   for saving in ROBUST_SAVINGS for i in range(robust)]
    if workers > 1:
        with multiprocessing.Pool(workers) as pool:
            admissions = [row for rows in pool.map(admission_trial, admission_jobs, chunksize=16) for row in rows]
            audits = pool.map(reaudit_trial, reaudit_jobs, chunksize=4)
            robustness = pool.map(robustness_trial, robust_jobs, chunksize=8)
    else:
        admissions = [row for j in admission_jobs for row in admission_trial(j)]
        audits = [reaudit_trial(j) for j in reaudit_jobs]
        robustness = [robustness_trial(j) for j in robust_jobs]
    table = summarize(admissions, audits, robustness)
    table["config"] = {"decisions_per_scenario": decisions, "reaudit_lifecycles": reaudits, "seed": seed,
                       "admission_budget_tokens": budget, "reaudit_budget_tokens": reaudit_budget,
                       "params": asdict(params), "tasks_per_suite": "%d-%d" % TASKS_PER_SUITE,
                       "task_cost_range": [30_000, 300_000], "cv": 0.25, "derail": [0.12, 1.8],
                       "rent": [30, 60], "k": K, "candidates_per_night": per_night, "nights_per_window": nights}
    return table


def main(argv: list[str] | None = None) -> int:
    global TASKS_PER_SUITE  # read by make_suite in the (forked) trial workers
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=400, help="admission decisions per scenario")
    parser.add_argument("--reaudits", type=int, default=150, help="12-night re-audit lifecycles")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=float, default=ADMISSION_BUDGET)
    parser.add_argument("--reaudit-budget", type=float, default=REAUDIT_BUDGET)
    parser.add_argument("--robust", type=int, default=100,
                        help="decisions per effect in the heavy-derailment robustness section")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", default="%d-%d" % TASKS_PER_SUITE, metavar="MIN-MAX",
                        help="tasks per synthetic suite (warden's golden suites have 5-6)")
    parser.add_argument("--per-night", type=int, default=PER_NIGHT, metavar="C",
                        help="candidates decided per invocation (night)")
    parser.add_argument("--nights", type=int, default=NIGHTS_PER_WINDOW, metavar="N",
                        help="nights of one freshness window, across which ours reuses reference runs "
                             "(1 = reuse within a night only; --per-night 1 --nights 1 = no reuse)")
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    args = parser.parse_args(argv)
    try:
        low, high = (int(x) for x in args.tasks.split("-"))
        if not 1 <= low <= high:
            raise ValueError
    except ValueError:
        parser.error(f"--tasks {args.tasks!r}: expected MIN-MAX with 1 ≤ MIN ≤ MAX, e.g. 5-6")
    TASKS_PER_SUITE = (low, high)
    if args.per_night < 1 or args.nights < 1:
        parser.error("--per-night and --nights must be ≥ 1")
    started = time.perf_counter()
    table = run(args.decisions, args.seed, args.reaudits, DecisionParams(), args.budget,
                args.reaudit_budget, args.workers, args.robust, args.per_night, args.nights)
    table["config"]["seconds"] = round(time.perf_counter() - started, 1)
    print(render(table))
    print(f"({len(SCENARIOS) * args.decisions} admission decisions per policy, {args.reaudits} re-audit "
          f"lifecycles, {table['config']['seconds']} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0 if all(table["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
