"""``warden bench`` end to end through the CLI entry point, on a fake backend and tiny suite."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from sqlalchemy import select

import warden.bench.scheduler as scheduler
from test_scheduler_support import AGENT, MODEL, FakeBackend, make_workbench
from warden.cli.app import main
from warden.config import load_settings
from warden.store.db import open_store
from warden.store.models import BenchRun, Rule


@pytest.fixture
def fake_bench(tmp_path, monkeypatch):
    state = {"factory": FakeBackend}

    def fake_open(settings, agent, backend, model=None, **options):
        if agent != AGENT:
            from warden.errors import UsageError
            raise UsageError(f"unknown agent {agent!r}")
        return make_workbench(tmp_path, lambda: state["factory"]()), MODEL

    monkeypatch.setattr(scheduler, "open_workbench", fake_open)
    return state


def add_rule(body: str) -> int:
    store = open_store(load_settings())
    with store.session() as s:
        rule = Rule(agent=AGENT, body=body, state="candidate")
        s.add(rule)
        s.flush()
        return rule.id


def test_bench_json_pairs_configurations_and_reports_savings(fake_bench, capsys):
    rule = add_rule("Grep for the symbol before opening any file.")
    code = main(["bench", "--agent", AGENT, "--rules", "none", "--rules", str(rule), "--runs", "2",
                 "--seed", "3", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["status"] == "done" and report["jobs"] == 12 and report["seed"] == 3
    assert report["configs"] == ["", str(rule)]
    assert len(report["summary"]) == 6 and all(s["completion_rate"] == 1.0 for s in report["summary"])
    assert all(c["mean_saving"] > 0 for c in report["comparisons"])
    assert report["spend_share"]["share"] is None  # no real-work sessions collected
    # The whole-suite figure the text report prints is in --json too: the per-task savings summed.
    [suite] = report["suite_totals"]
    assert suite["config"] == str(rule) and suite["reference"] == ""
    assert suite["saving"] == pytest.approx(sum(c["mean_saving"] for c in report["comparisons"]), abs=0.5)
    assert 0 < suite["relative_saving"] < 1


def test_bench_text_prints_the_suite_total_of_the_report(fake_bench, capsys):
    rule = add_rule("Grep for the symbol before opening any file.")
    assert main(["bench", "--agent", AGENT, "--rules", "none", "--rules", str(rule), "--runs", "1",
                 "--seed", "3", "--json"]) == 0
    [suite] = json.loads(capsys.readouterr().out)["suite_totals"]
    assert main(["bench", "--agent", AGENT, "--rules", "none", "--rules", str(rule), "--runs", "1",
                 "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert (f"whole suite (one run of each task), rules {rule}: {suite['saving']:+,.0f} wt "
            f"({suite['relative_saving']:+.1%})") in out


def test_bench_table_output(fake_bench, capsys):
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "golden-01" in out and "mean wt" in out and "pass #1 (done)" in out
    assert "no real-work sessions" in out
    # the sim backend's figures say they are the simulation's, in the text and in --json
    assert "bench figures measured on warden's simulated agent (sim backend), not a real model" in out
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "sim" and report["measured_on"] == "on warden's simulated agent (sim backend), not a real model"


def test_a_resumed_pass_counts_the_runs_done_before_not_those_still_pending(fake_bench, capsys):
    """A budget stop leaves runs pending: the re-run says how many were done before it, not how
    many it did not run."""
    first = json.loads((main(["bench", "--agent", AGENT, "--runs", "3", "--seed", "4", "--json"]) == 0
                        and capsys.readouterr().out) or "{}")
    cost = first["spent_weighted"] / first["executed"]
    capsys.readouterr()
    assert main(["bench", "--agent", AGENT, "--runs", "4", "--seed", "5", "--budget", str(int(cost * 2.5)),
                 "--json"]) == 0
    done = json.loads(capsys.readouterr().out)["executed"]
    assert 0 < done < 8
    assert main(["bench", "--agent", AGENT, "--runs", "4", "--seed", "5", "--budget", str(int(cost * 2.5))]) == 0
    assert f"; {done} run(s) were already done" in capsys.readouterr().out


def test_unseeded_bench_resumes_an_unfinished_pass(fake_bench, capsys, monkeypatch):
    calls = {"n": 0}
    original = scheduler.BenchScheduler._record

    def interrupting(self, *args, **kwargs):
        record = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return record

    monkeypatch.setattr(scheduler.BenchScheduler, "_record", interrupting)
    assert main(["bench", "--agent", AGENT, "--runs", "2", "--concurrency", "1"]) == 130
    assert "interrupted; finished work is kept: re-run the same command to resume" in capsys.readouterr().err
    monkeypatch.setattr(scheduler.BenchScheduler, "_record", original)
    assert main(["bench", "--agent", AGENT, "--runs", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["resumed"] and report["pass_id"] == 1 and report["executed"] == 4


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "--runs must be at least 1"),
    (["--rules", "3;7"], "--rules expects rule ids"),
    (["--rules", "99"], "unknown rule id(s): 99"),
    (["--budget", "-5"], "'-5' is not a positive number of tokens"),
    (["--concurrency", "0"], "concurrency must be at least 1"),
])
def test_bad_usage_is_one_line_exit_2(fake_bench, capsys, args, message):
    assert main(["bench", "--agent", AGENT, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("warden: ") and message in err and "\n" not in err


def test_unknown_agent_is_one_line_exit_2(fake_bench, capsys):
    assert main(["bench", "--agent", "nobody"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "warden: unknown agent 'nobody'"


def test_infra_abort_with_json_reports_the_runs_before_it_and_exits_1(fake_bench, capsys):
    calls = itertools.count()

    class FailsAfterTwo(FakeBackend):  # the backend breaks after two good runs
        def run(self, *args, **kwargs):
            self.infra = next(calls) >= 2
            return super().run(*args, **kwargs)

    fake_bench["factory"] = FailsAfterTwo
    assert main(["bench", "--agent", AGENT, "--runs", "2", "--seed", "1", "--concurrency", "1", "--json"]) == 1
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["status"] == "aborted" and report["message"].startswith("bench pass #1 aborted: 3 consecutive")
    assert [r["outcome"] for r in report["runs"]] == ["completed", "completed"]
    assert report["executed"] == 5 and report["spent_weighted"] > 0
    assert out.err.strip() == f"warden: {report['message']}"


def test_a_key_echoed_back_in_an_error_is_neither_stored_nor_printed(fake_bench, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "gateway-key-of-no-known-shape")

    class EchoesTheKey(FakeBackend):  # a gateway that quotes the key it refused
        def run(self, *args, **kwargs):
            result = FakeBackend(infra=True).run(*args, **kwargs)
            return dataclasses.replace(result, error="401 invalid x-api-key: gateway-key-of-no-known-shape; "
                                                     "Authorization: Bearer sk-ant-api03-abcdefghijklmnop")

    fake_bench["factory"] = EchoesTheKey
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "1"]) == 1
    out = capsys.readouterr()
    assert "gateway-key" not in out.out + out.err and "abcdefghijklmnop" not in out.out + out.err
    assert "invalid x-api-key: [REDACTED]" in out.err
    with open_store(load_settings()).session() as s:
        errors = s.scalars(select(BenchRun.error)).all()
    assert errors and all("gateway-key" not in e and "abcdefghijklmnop" not in e for e in errors)


def test_infra_errors_below_the_abort_threshold_still_exit_1(fake_bench, capsys):
    fake_bench["factory"] = lambda: FakeBackend(infra=True)
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "1", "--max-infra-errors", "50",
                 "--json"]) == 1
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["status"] == "partial" and report["infra_pending"] == report["jobs"] and report["runs"] == []
    assert "ended in infra_error and were not counted" in out.err


def test_infra_abort_is_one_line_exit_1(fake_bench, capsys):
    fake_bench["factory"] = lambda: FakeBackend(infra=True)
    assert main(["bench", "--agent", AGENT, "--runs", "1", "--seed", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("warden: bench pass #1 aborted: 3 consecutive runs ended in infra_error")
    assert "\n" not in err
