"""``warden plan``: estimates from recorded replicates, refusals without them."""

from __future__ import annotations

import pytest

from warden.bench.tasks import load_suite
from warden.config import load_settings
from warden.errors import UsageError, WardenError
from warden.select.plan import plan_agent
from warden.store.db import open_store
from warden.store.models import BenchRun, Rule


def _run(task: str, weighted: float) -> BenchRun:
    return BenchRun(agent="backend", task_id=task, config_key="", backend="sim", model="sim-naive-1", seed=1,
                    suite_hash="s", fixture_hash="f", outcome="completed", completed=True, weighted_tokens=weighted)


def test_plan_from_replicates_and_budget_fit(warden_home) -> None:
    settings = load_settings(evidence_budget_tokens=10**10)  # the per-rule cap; --budget may lower it
    store = open_store(settings)
    tasks = [t.id for t in load_suite(settings.golden_dir, "backend").tasks]
    with store.session() as s:
        s.add(Rule(agent="backend", body="Grep for the symbol or text you need before opening any file."))
        for i, task in enumerate(tasks):
            for k in range(3):
                s.add(_run(task, 40_000 * (1 + i) * (1 + 0.2 * k)))
    with store.session() as s:
        with pytest.raises(WardenError, match="no recorded bench runs"):
            plan_agent(s, load_settings(backend="anthropic"), "backend")
        roomy = plan_agent(s, settings, "backend", 10**10)
        tight = plan_agent(s, settings, "backend", 10_000)
    [rule] = roomy["rules"]
    assert rule["kind"] == "admission" and rule["fits_budget"] and not rule["sigma_assumed"]
    assert rule["tokens_if_dead"] > 0 and rule["worst_case_tokens"] >= rule["tokens_if_effective"]
    assert not tight["rules"][0]["fits_budget"]
    # a tight budget caps the spend, not what deciding needs
    assert tight["rules"][0]["expected_tokens"] == pytest.approx(rule["expected_tokens"])
    assert tight["rules"][0]["expected_spend_tokens"] == 10_000 < tight["rules"][0]["expected_tokens"]


def test_plan_refuses_unknown_agent(warden_home) -> None:
    settings = load_settings()
    with open_store(settings).session() as s, pytest.raises(UsageError, match="unknown agent"):
        plan_agent(s, settings, "nobody")


def test_plan_command_prints_each_pending_rule(warden_home, capsys) -> None:
    from warden.cli.app import main

    settings = load_settings()
    tasks = [t.id for t in load_suite(settings.golden_dir, "backend").tasks]
    with open_store(settings).session() as s:
        s.add(Rule(agent="backend", body="Grep for the symbol or text you need before opening any file."))
        for i, task in enumerate(tasks):
            for k in range(3):
                s.add(_run(task, 40_000 * (1 + i) * (1 + 0.2 * k)))
    assert main(["plan", "--agent", "backend"]) == 0
    out = capsys.readouterr().out
    assert "rule 1 (admission)" in out and "worst case" in out and "Grep for the symbol" in out
    # the reference cost and any saving shown so far were measured on the sim, and the plan says so
    assert "simulated agent (sim backend), not a real model" in " ".join(out.split())


def test_pairs_observed_by_earlier_decisions_price_a_new_rule(warden_home) -> None:
    """Seed-sharing pairs are far less noisy than two independent runs: once earlier decisions
    observed them, a new rule's plan uses their spread (minus each rule's own effect)."""
    from warden.select.receipts import write_receipt

    settings = load_settings(evidence_budget_tokens=10**10)
    tasks = [t.id for t in load_suite(settings.golden_dir, "backend").tasks]
    store = open_store(settings)
    with store.session() as s:
        for i, task in enumerate(tasks):
            for k in range(3):
                s.add(_run(task, 40_000 * (1 + i) * (1 + 0.3 * k)))  # replicates: a wide spread
        s.add(Rule(agent="backend", body="Grep for the symbol or text you need before opening any file."))
    with store.session() as s:
        before = plan_agent(s, settings, "backend")["rules"][0]["expected_tokens"]
        old = Rule(agent="backend", body="Never re-read a file you have already read.", state="evicted")
        s.add(old)
        s.flush()
        rows = []
        for i, task in enumerate(tasks):
            for r in range(4):  # pairs within 1% of each other around a 10% effect
                ref = 40_000 * (1 + i) * (1 + 0.3 * (r % 3))
                rows += [["ref", task, r, ref, int(ref), True, "completed", None],
                         ["rule", task, r, ref * 0.9 * (1 + 0.01 * (-1) ** r), int(ref), True, "completed", None]]
        write_receipt(s, old, kind="admission", verdict="refute", reason="r", state_after="evicted", estimate=0.0,
                      ci_low=0.0, ci_high=0.0, margin=1.0, k=2.0, n_per_side={}, paired_diffs={}, pass_counts={},
                      tokens_spent=1.0, model="sim-naive-1", backend="sim", suite_hash="s", fixture_hash="f",
                      method={}, evidence=rows)
    with store.session() as s:
        after = plan_agent(s, settings, "backend")["rules"][0]
    assert after["expected_tokens"] < before / 5 and not after["sigma_assumed"]


def test_the_reference_cost_is_a_weighted_mean_whatever_the_weights_scale() -> None:
    from warden.select.plan import _weighted_mean_cost

    assert _weighted_mean_cost({"a": [40_000.0], "b": [39_000.0]}, {"a": 1e-300, "b": 1e-300}) == 39_500.0
    assert _weighted_mean_cost({"a": [10.0, 30.0], "b": []}, {"a": 2.0, "b": 5.0}) == 20.0


def test_plan_estimates_from_one_models_runs_and_names_it(warden_home, capsys) -> None:
    """Runs of two models are two agents: the plan prices from one model's runs only — the one
    asked for, else the configured one, else the one benched last — and says which."""
    import json

    from warden.cli.app import main

    settings = load_settings()
    tasks = [t.id for t in load_suite(settings.golden_dir, "backend").tasks]
    with open_store(settings).session() as s:
        s.add(Rule(agent="backend", body="Grep for the symbol or text you need before opening any file."))
        for task in tasks:
            for k in range(3):
                s.add(_run(task, 20_000 * (1 + 0.1 * k)))  # sim-naive-1: 22,000 a run on average
        for task in tasks:
            run = _run(task, 6_000.0)
            run.model = "sim-careful-1"  # benched last, on every task, much cheaper
            s.add(run)
    with open_store(settings).session() as s:
        latest = plan_agent(s, settings, "backend")
        asked = plan_agent(s, settings, "backend", model="sim-naive-1")
        configured = plan_agent(s, load_settings(model="sim-naive-1"), "backend")
        with pytest.raises(WardenError, match="model 'sim-nobody-1'"):
            plan_agent(s, settings, "backend", model="sim-nobody-1")
    assert latest["model"] == "sim-careful-1" and latest["reference_cost"] == pytest.approx(6_000)
    assert latest["basis"] == f"{len(tasks)} reference runs of the current rule set"
    assert asked["model"] == configured["model"] == "sim-naive-1"
    assert asked["reference_cost"] == pytest.approx(22_000) == configured["reference_cost"]
    assert main(["plan", "--agent", "backend", "--model", "sim-naive-1"]) == 0
    assert "22,000 weighted tokens per run on sim/sim-naive-1" in " ".join(capsys.readouterr().out.split())
    assert main(["plan", "--agent", "backend", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "sim-careful-1"
