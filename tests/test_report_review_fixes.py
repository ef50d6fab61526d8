"""Review fixes to `warden cost` / `warden report` figures (inspection items 1, 4, 5 and 6):
dollars from the runs' real cost, the bench spend chart of the agents reported on, the agents
`report --agent` accepts, and "per session" figures that count sessions."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from warden.config import load_settings
from warden.ingest.pricing import DEFAULT_TABLE
from warden.report.figures import learning_curve, project, real_work_per_session, rule_costs
from warden.report.service import report_data
from warden.select.receipts import write_receipt
from warden.store.db import open_store
from warden.store.models import BenchRun, Rule, SessionRun, utcnow

# The JSON keys `cost --json` had before these fixes: none may go (new ones are added beside them).
COST_KEYS = {"agent", "model", "input_price_per_mtok", "real_work_sessions", "real_work_tokens_per_session",
             "basis", "rules", "dollars"}
RULE_KEYS = {"rule_id", "body", "state", "rent_tokens", "relative_saving", "saving_tokens_per_session",
             "saving_usd_per_session", "input_price_per_mtok", "net_tokens_per_session", "bench_tokens_spent",
             "bench_usd_spent", "break_even_sessions", "receipt_id", "backend", "model", "measured_on",
             "interval_tokens", "margin_tokens"}


def _run(s, key: str, session_id: str, agent: str, model: str, cost: float, *, hours_ago: float = 24.0) -> None:
    """A collected run: its weighted tokens are its cost ÷ its model's input price, as collect stores them."""
    start = utcnow() - timedelta(hours=hours_ago)
    s.add(SessionRun(run_key=key, session_id=session_id, agent_id=None if agent == "main" else key, agent=agent,
                     models=[model], cost_usd=cost, weighted_tokens=cost * 1e6 / DEFAULT_TABLE.price(model).input,
                     started_at=start, ended_at=start + timedelta(minutes=5), completed=True))


def _kept_rule(s, agent: str, relative: float) -> Rule:
    rule = Rule(agent=agent, body="Grep for the symbol or text you need before opening any file.", state="active",
                rent_tokens=17)
    s.add(rule)
    s.flush()
    write_receipt(s, rule, kind="admission", verdict="keep", reason="test", state_after="active",
                  estimate=9_000.0, ci_low=1.0, ci_high=2.0, margin=34.0, k=2.0, n_per_side={}, paired_diffs={},
                  pass_counts={}, tokens_spent=1_000_000.0, model="sim-naive-1", backend="sim",
                  suite_hash="a" * 64, fixture_hash="b" * 64,
                  method={"relative_estimate": relative, "reference_cost": 90_000.0})
    return rule


# --- 1: dollars agree with the runs' real cost for an agent whose runs used several models ---------------------

def test_mixed_model_projection_of_the_collected_sessions_costs_what_status_says(capsys) -> None:
    """An opus session ($10 = 2M weighted) and a haiku one ($1 = 1M weighted): the mean is 1.5M
    weighted tokens, which no one model's input price turns into dollars. Projecting the two
    sessions collected costs what they cost ($11, as `status` says) — not 3M at opus's $5/MTok
    ($15) as when the most expensive run's model priced the mean."""
    from warden.cli.app import main

    store = open_store(load_settings())
    with store.session() as s:
        _run(s, "s1:main", "s1", "main", "claude-opus-4-6", 10.0, hours_ago=30)
        _run(s, "s2:main", "s2", "main", "claude-haiku-4-5", 1.0, hours_ago=20)
        _kept_rule(s, "main", 0.1)
    assert main(["status", "--json"]) == 0
    [status] = [a for a in json.loads(capsys.readouterr().out)["agents"] if a["agent"] == "main"]
    assert status["cost_usd"] == pytest.approx(11.0) and status["sessions"] == 2
    assert main(["cost", "--agent", "main", "--project", "--weeks", "1", "--sessions-per-week", "2", "--json"]) == 0
    [cost] = json.loads(capsys.readouterr().out)
    assert COST_KEYS <= set(cost) and RULE_KEYS <= set(cost["rules"][0])
    p = cost["projection"]
    assert p["without_warden_tokens"] == pytest.approx(3_000_000)
    assert p["without_warden_usd"] == pytest.approx(status["cost_usd"])  # was $15.00
    assert cost["real_work_cost_usd"] == pytest.approx(11.0) and cost["real_work_usd_per_session"] == pytest.approx(5.5)
    assert cost["input_price_per_mtok"] == pytest.approx(11.0 / 3.0)  # $ per M weighted tokens: Σ cost ÷ Σ weighted
    assert cost["model"] == "claude-opus-4-6" and cost["models"] == ["claude-opus-4-6", "claude-haiku-4-5"]
    [rule] = cost["rules"]
    # the saving stays in weighted tokens (10% of the 1.5M mean); only its dollars follow the runs' cost
    assert rule["saving_tokens_per_session"] == pytest.approx(150_000)
    assert rule["saving_usd_per_session"] == pytest.approx(0.1 * 5.5)
    assert rule["saving_usd_per_session"] * p["sessions"] == pytest.approx(p["saving_usd"])
    # the text says what the dollars are at, not "$5/MTok input" of one model
    assert main(["cost", "--agent", "main", "--project", "--weeks", "1", "--sessions-per-week", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "/MTok input" not in out and "$11.00 over 2 sessions (2 runs)" in out
    assert "$3.667 per M weighted tokens (their cost ÷ their weighted tokens)" in out
    assert "without warden 3,000,000 ($11.00)" in out


def test_n_sessions_at_the_collected_mean_cost_n_times_the_mean_real_cost() -> None:
    store = open_store(load_settings())
    with store.session() as s:
        for i, (model, usd) in enumerate((("claude-opus-4-6", 2.5), ("claude-sonnet-4-5", 0.9),
                                          ("claude-haiku-4-5", 0.3), ("claude-opus-4-6", 4.0))):
            _run(s, f"s{i}:main", f"s{i}", "main", model, usd, hours_ago=10 + i)
    with store.session() as s:
        cost = rule_costs(s, "main", DEFAULT_TABLE)
    mean_usd = (2.5 + 0.9 + 0.3 + 4.0) / 4
    for weeks, per_week in ((1, 4.0), (12, 50.0), (3, 7.5)):
        p = project(cost, weeks, per_week, 0.0)
        assert p["without_warden_usd"] == pytest.approx(weeks * per_week * mean_usd)


def test_one_model_real_work_is_still_priced_at_that_models_input_price(capsys) -> None:
    from warden.cli.app import main

    with open_store(load_settings()).session() as s:
        _run(s, "s1:main", "s1", "main", "claude-opus-4-6", 0.5)
    assert main(["cost", "--agent", "main"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "$5 per M weighted tokens (claude-opus-4-6's input price)" in out


# --- 4: the bench spend chart of a report on named agents shows their bench spend only ------------------------

def _bench(s, agent: str, weighted: float, days_ago: int) -> None:
    s.add(BenchRun(agent=agent, task_id=f"{agent}-01", config_key="", backend="sim", model="sim-naive-1", seed=1,
                   suite_hash="a" * 64, fixture_hash="b" * 64, outcome="completed", completed=True,
                   weighted_tokens=weighted, created_at=utcnow() - timedelta(days=days_ago)))


def test_report_on_one_agent_charts_only_its_bench_spend(tmp_path: Path, capsys) -> None:
    from warden.cli.app import main

    store = open_store(load_settings())
    with store.session() as s:
        _bench(s, "backend", 2_671_635.0, 1)
        _kept_rule(s, "sql", 0.05)
        _bench(s, "sql", 123_457.0, 2)
    with store.session() as s:
        only_sql = report_data(s, DEFAULT_TABLE, ["sql"])
        everyone = report_data(s, DEFAULT_TABLE)
    assert [d["weighted_tokens"] for d in only_sql["bench_spend_by_day"]] == [123_457.0]
    assert sorted(d["weighted_tokens"] for d in everyone["bench_spend_by_day"]) == [123_457.0, 2_671_635.0]
    out = tmp_path / "sql.html"
    assert main(["report", "--agent", "sql", "--html", str(out)]) == 0
    page = out.read_text()
    assert "2,671,635" not in page and "123,457" in page
    assert "bench weighted tokens per day of sql" in page


# --- 5: `report --agent` accepts the agents `cost --agent` accepts --------------------------------------------

def test_report_accepts_main_like_cost_does(tmp_path: Path, capsys) -> None:
    from warden.cli.app import main

    with open_store(load_settings()).session() as s:
        _run(s, "s1:main", "s1", "main", "claude-opus-4-6", 0.5)
    assert main(["cost", "--agent", "main"]) == 0
    out = tmp_path / "main.html"
    assert main(["report", "--agent", "main", "--html", str(out)]) == 0
    assert 'id="agent-main"' in out.read_text()


def test_report_accepts_a_golden_suite_agent_on_an_empty_home(tmp_path: Path, capsys) -> None:
    from warden.cli.app import main

    assert main(["cost", "--agent", "backend"]) == 0
    out = tmp_path / "backend.html"
    assert main(["report", "--agent", "backend", "--html", str(out)]) == 0
    assert 'id="agent-backend"' in out.read_text()
    capsys.readouterr()
    assert main(["report", "--agent", "nobody", "--html", str(tmp_path / "x.html")]) == 2
    assert "unknown agent 'nobody'" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


# --- 6: "per session" figures count sessions, a session's cost the sum of its runs of the agent ---------------

def test_two_subagent_runs_in_one_session_are_one_session_costing_both(tmp_path: Path, capsys) -> None:
    """One session that ran Explore twice (3,000 weighted tokens each) is one Explore session of
    6,000 — as `status`'s sessions column counts it — not two sessions of 3,000; projecting one
    session a week costs what that session cost."""
    from warden.cli.app import main

    with open_store(load_settings()).session() as s:
        _run(s, "s1:a1", "s1", "Explore", "claude-haiku-4-5", 0.003, hours_ago=3)
        _run(s, "s1:a2", "s1", "Explore", "claude-haiku-4-5", 0.003, hours_ago=2)
    with open_store(load_settings()).session() as s:
        assert learning_curve(s, "Explore") == [{"ruleset_version": 0, "sessions": 1, "runs": 2,
                                                 "mean_weighted_tokens": pytest.approx(6_000)}]
        assert real_work_per_session(s, "Explore") == (pytest.approx(6_000), 1)
    assert main(["cost", "--agent", "Explore", "--project", "--weeks", "1", "--sessions-per-week", "1", "--json"]) == 0
    [cost] = json.loads(capsys.readouterr().out)
    assert cost["real_work_sessions"] == 1 and cost["real_work_runs"] == 2
    assert cost["real_work_tokens_per_session"] == pytest.approx(6_000)
    assert cost["projection"]["without_warden_tokens"] == pytest.approx(6_000)
    assert cost["projection"]["without_warden_usd"] == pytest.approx(0.006)
    assert main(["status"]) == 0
    status = " ".join(capsys.readouterr().out.split())
    assert "Explore: cost/session by ruleset v0 6,000 (1)" in status
    out = tmp_path / "r.html"
    assert main(["report", "--agent", "Explore", "--html", str(out)]) == 0
    page = out.read_text()
    assert "v0 · 1 session (2 runs)" in page and "6,000 weighted tokens per session" in page
    assert "over 1 session (2 runs)" in page
