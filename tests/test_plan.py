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
