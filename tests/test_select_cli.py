"""``warden select`` through the CLI on the fake backend: --all, --json, exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import warden.bench.suite_runner as suite_runner
from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
from warden.cli.app import main
from warden.config import load_settings
from warden.store.db import open_store
from warden.store.models import Receipt, Rule


@pytest.fixture
def fake(warden_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    golden = tmp_path / "golden"
    (golden / AGENT).mkdir(parents=True)
    (golden / AGENT / "agent.md").write_text("---\nname: fakeagent\n---\nYou are a fake agent.\n")
    monkeypatch.setenv("WARDEN_GOLDEN_DIR", str(golden))
    monkeypatch.setenv("WARDEN_EVIDENCE_BUDGET_TOKENS", "2000000")
    state = {"factory": FakeBackend}
    monkeypatch.setattr(suite_runner, "open_workbench",
                        lambda *a, **kw: (make_workbench(tmp_path, lambda: state["factory"]()), MODEL))
    with open_store(load_settings()).session() as s:
        s.add(Rule(agent=AGENT, body="Keep replies brief: no narration between tool calls."))
    return state


def test_select_all_json_decides_and_writes_a_receipt(fake, capsys) -> None:
    assert main(["select", "--all", "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    [decision] = report["decisions"]
    assert report["agent"] == AGENT and report["aborted"] is None and decision["receipt_id"]
    with open_store(load_settings()).session() as s:
        receipt = s.get(Receipt, decision["receipt_id"])
        assert receipt.verdict == decision["verdict"] and receipt.backend == report["backend"] and receipt.model == MODEL == report["model"]
        assert receipt.suite_hash and receipt.fixture_hash and receipt.warden_version and receipt.paired_diffs


def test_select_usage_errors_exit_2(fake, capsys) -> None:
    for args in (["select"], ["select", "--all", "--agent", AGENT], ["select", "--agent", "nobody"],
                 ["select", "--agent", AGENT, "--budget", "0"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("warden: ") and "\n" not in err


def test_select_infra_abort_exits_1_without_a_receipt(fake, capsys) -> None:
    fake["factory"] = lambda: FakeBackend(infra=True)
    assert main(["select", "--agent", AGENT]) == 1
    assert "aborted (infrastructure)" in capsys.readouterr().out
    with open_store(load_settings()).session() as s:
        assert s.query(Receipt).count() == 0 and s.query(Rule).one().state == "candidate"


def test_an_aborted_pass_still_reports_what_its_runs_spent(fake, capsys) -> None:
    """The runs an infrastructure abort interrupted were made and paid for: the report says so,
    equal to the stored runs' weighted tokens (which the budget and the nightly summary use)."""
    from sqlalchemy import func, select

    from warden.store.models import BenchRun

    fake["factory"] = lambda: FakeBackend(infra=True)
    assert main(["select", "--agent", AGENT, "--json"]) == 1
    [report] = json.loads(capsys.readouterr().out)
    with open_store(load_settings()).session() as s:
        stored = s.scalar(select(func.sum(BenchRun.weighted_tokens)))
    assert report["aborted"] and stored and report["tokens_spent"] == pytest.approx(stored)


def test_a_receipt_lists_the_bench_runs_behind_each_paired_difference(fake, capsys) -> None:
    """`receipt --json` names, per task, the [reference, rule] bench run ids of every paired
    difference (in their order, from the stored evidence): each pair is auditable against its runs."""
    from warden.store.models import BenchRun

    assert main(["select", "--agent", AGENT, "--json"]) == 0
    [decision] = json.loads(capsys.readouterr().out)[0]["decisions"]
    assert main(["receipt", str(decision["rule_id"]), "--json"]) == 0
    [receipt] = json.loads(capsys.readouterr().out)["receipts"]
    pairs = receipt["paired_run_ids"]
    assert pairs.keys() == receipt["paired_diffs"].keys() and sum(map(len, pairs.values())) >= 2
    with open_store(load_settings()).session() as s:
        for task, task_pairs in pairs.items():
            assert len(task_pairs) == len(receipt["paired_diffs"][task])
            for (ref_id, rule_id), diff in zip(task_pairs, receipt["paired_diffs"][task]):
                ref, rule = s.get(BenchRun, ref_id), s.get(BenchRun, rule_id)
                assert ref.task_id == rule.task_id == task
                assert ref.config_key == "" and rule.config_key == str(decision["rule_id"])
                assert ref.weighted_tokens - rule.weighted_tokens == pytest.approx(diff, abs=0.1)
    assert main(["receipt", str(decision["rule_id"])]) == 0
    n = sum(map(len, pairs.values()))
    assert f"evidence: {n} pairs of bench runs (their run ids in --json)" in " ".join(capsys.readouterr().out.split())


def test_a_plugin_agent_the_store_holds_is_known_to_read_only_commands(warden_home: Path, capsys) -> None:
    """Claude Code names a plugin's subagents 'plugin:agent': status and sessions list them, so
    receipts takes them too; a command that writes files by the name still refuses it."""
    from warden.store.models import SessionRun

    store = open_store(load_settings())
    with store.session() as session:
        session.add(SessionRun(run_key="s1:a1", session_id="s1", agent_id="a1", agent="my-plugin:code-reviewer"))
        session.commit()
    assert main(["receipts", "--agent", "my-plugin:code-reviewer"]) == 0
    assert "no receipts yet" in capsys.readouterr().out
    assert main(["receipts", "--agent", "my-plugin:other"]) == 2
    assert "unknown agent 'my-plugin:other'" in capsys.readouterr().err
    assert main(["memory", "compile", "--agent", "my-plugin:code-reviewer"]) == 2
    assert "invalid agent name" in capsys.readouterr().err
