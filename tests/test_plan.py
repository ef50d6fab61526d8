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
    asked for, else the one select would run (on the sim: the configured persona, else the
    default one, whichever was benched last) — and says which."""
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
        default = plan_agent(s, settings, "backend")
        asked = plan_agent(s, settings, "backend", model="sim-careful-1")
        configured = plan_agent(s, load_settings(model="sim-careful-1"), "backend")
        with pytest.raises(UsageError, match="unknown sim persona"):
            plan_agent(s, settings, "backend", model="sim-nobody-1")
    assert default["model"] == "sim-naive-1" and default["reference_cost"] == pytest.approx(22_000)
    assert default["basis"] == f"{3 * len(tasks)} reference runs of the current rule set"
    assert asked["model"] == configured["model"] == "sim-careful-1"
    assert asked["reference_cost"] == pytest.approx(6_000) == configured["reference_cost"]
    assert main(["plan", "--agent", "backend", "--model", "sim-careful-1"]) == 0
    assert "6,000 weighted tokens per run on sim/sim-careful-1" in " ".join(capsys.readouterr().out.split())
    assert main(["plan", "--agent", "backend", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "sim-naive-1"


def _golden_with_model(tmp_path, model: str):
    """A copy of the golden tasks whose backend agent.md names ``model``."""
    import shutil

    golden = tmp_path / "golden"
    shutil.copytree(load_settings().golden_dir, golden)
    agent_md = golden / "backend" / "agent.md"
    agent_md.write_text(agent_md.read_text(encoding="utf-8").replace("model: claude-sonnet-4-6", f"model: {model}", 1),
                        encoding="utf-8")
    return golden


def test_plan_resolves_the_model_select_would_run(warden_home, tmp_path, monkeypatch) -> None:
    """--model, else the settings' model, else agent.md's, else the backend's default (the sim: its
    default persona; a real model id in the settings is no persona) — what select's runner
    resolves, not the model benched last."""
    from warden.bench.suite_runner import BenchSuiteRunner
    from warden.select.plan import plan_model

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")  # the runner's backend probe wants one
    golden = _golden_with_model(tmp_path, "claude-opus-4-6")
    # plan_agent itself: agent.md's model, though another was benched last
    settings = load_settings(golden_dir=golden, backend="anthropic")
    tasks = [t.id for t in load_suite(golden, "backend").tasks]
    with open_store(settings).session() as s:
        for model, cost in (("claude-opus-4-6", 30_000.0), ("claude-haiku-4-5", 5_000.0)):
            for task in tasks:
                run = _run(task, cost)
                run.backend, run.model = "anthropic", model
                s.add(run)
    with open_store(settings).session() as s:
        plan = plan_agent(s, settings, "backend")
    assert plan["backend"] == "anthropic" and plan["model"] == "claude-opus-4-6"
    assert plan["reference_cost"] == pytest.approx(30_000)

    cases = [("anthropic", None, None, "claude-opus-4-6"),  # agent.md's
             ("anthropic", "claude-haiku-4-5", None, "claude-haiku-4-5"),  # the settings'
             ("anthropic", "claude-haiku-4-5", "claude-sonnet-4-5", "claude-sonnet-4-5"),  # --model
             ("sim", None, None, "sim-naive-1"), ("sim", "claude-haiku-4-5", None, "sim-naive-1"),
             ("sim", "sim-careful-1", None, "sim-careful-1"), ("sim", None, "sim-careful-1", "sim-careful-1")]
    for backend, configured, asked, expected in cases:
        settings = load_settings(golden_dir=golden, backend=backend, model=configured)
        suite = load_suite(settings.golden_dir, "backend")
        runner = BenchSuiteRunner(open_store(settings), settings, "backend", backend=backend, model=asked)
        assert plan_model(settings, backend, asked, suite.model) == runner.model == expected, (backend, configured, asked)
    # agent.md naming no model: the backend's default
    bare = tmp_path / "bare"
    (bare / "backend").mkdir(parents=True)
    for f in golden.joinpath("backend").iterdir():
        (bare / "backend" / f.name).write_bytes(f.read_bytes())
    text = (bare / "backend" / "agent.md").read_text(encoding="utf-8").replace("model: claude-opus-4-6\n", "", 1)
    (bare / "backend" / "agent.md").write_text(text, encoding="utf-8")
    settings = load_settings(golden_dir=bare, backend="anthropic")
    assert load_suite(bare, "backend").model is None
    assert plan_model(settings, "anthropic") == BenchSuiteRunner(open_store(settings), settings, "backend").model


def test_plan_pools_only_evidence_measured_on_the_current_suite_and_fixture(warden_home) -> None:
    """As select does: a receipt measured on another golden suite or fixture is not the rule's
    evidence now (select would start afresh), so the plan does not estimate from it."""
    from warden.bench.fixture import fixture_hash
    from warden.select.receipts import write_receipt

    settings = load_settings(evidence_budget_tokens=10**10)
    suite = load_suite(settings.golden_dir, "backend")
    tasks = [t.id for t in suite.tasks]
    store = open_store(settings)
    with store.session() as s:
        for task in tasks:
            for k in range(3):
                s.add(_run(task, 40_000 * (1 + 0.3 * k)))
        rule = Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.")
        s.add(rule)
        s.flush()
        rows = []
        for task in tasks:
            for r in range(2):
                ref = 40_000 * (1 + 0.3 * r)
                rows += [["ref", task, r, ref, int(ref), True, "completed", None],
                         ["rule", task, r, ref * 0.8, int(ref * 0.8), True, "completed", None]]
        rule_id = rule.id

    def shown(suite_hash: str, fixture: str) -> float | None:
        with store.session() as s:
            write_receipt(s, s.get(Rule, rule_id), kind="admission", verdict="inconclusive", reason="r",
                          state_after="candidate", estimate=0.0, ci_low=0.0, ci_high=0.0, margin=1.0, k=2.0,
                          n_per_side={}, paired_diffs={}, pass_counts={}, tokens_spent=1.0, model="sim-naive-1",
                          backend="sim", suite_hash=suite_hash, fixture_hash=fixture, method={}, evidence=rows)
        with store.session() as s:
            [planned] = plan_agent(s, settings, "backend")["rules"]
        return planned["shown_saving"]

    current_fixture = fixture_hash(settings.fixture_dir)
    assert shown(suite.suite_hash, "0" * 64) is None  # another fixture
    assert shown("0" * 64, current_fixture) is None  # another golden suite
    assert shown(suite.suite_hash, current_fixture) == pytest.approx(0.2, abs=0.01)


def test_plan_refuses_a_model_the_backend_does_not_know_and_advises_a_bench_that_works(warden_home, capsys) -> None:
    """A real model id on the sim is refused in one line (exit 2), as bench refuses it; without
    runs the advice is a bench command that records them (--backend when not the configured one)."""
    import re

    from warden.cli.app import main

    assert main(["plan", "--agent", "backend", "--model", "claude-sonnet-4-6"]) == 2
    err = capsys.readouterr().err
    assert "unknown sim persona 'claude-sonnet-4-6'" in err and len(err.strip().splitlines()) == 1
    assert main(["bench", "--agent", "backend", "--model", "claude-sonnet-4-6", "--runs", "1"]) == 2
    capsys.readouterr()

    assert main(["plan", "--agent", "backend", "--backend", "anthropic", "--model", "claude-opus-4-6"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "`warden bench --agent backend --backend anthropic --model claude-opus-4-6 --runs 3`" in err

    assert main(["plan", "--agent", "backend", "--model", "sim-careful-1"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    advice = re.search(r"`(warden bench [^`]*)`", err).group(1)
    assert advice == "warden bench --agent backend --model sim-careful-1 --runs 3"
    # the advised command works (one run per task keeps the test quick), and then the plan does
    argv = advice.split()[1:]
    argv[argv.index("--runs") + 1] = "1"
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["plan", "--agent", "backend", "--model", "sim-careful-1"]) == 0
    assert "on sim/sim-careful-1" in " ".join(capsys.readouterr().out.split())
