"""Status figures, cost projection and the HTML report (rendered in headless Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import REPO
from warden.config import load_settings
from warden.ingest.pricing import DEFAULT_TABLE
from warden.report.figures import project, rule_costs
from warden.report.html import render_report
from warden.report.service import report_data
from warden.select.compile import compile_memory
from warden.select.receipts import write_receipt
from warden.store.db import open_store
from warden.store.models import Baseline, BenchRun, Rule, SessionRun, utcnow

EVIL = "Grep first <script>alert('x')</script> before opening files."


def _benched(s, model: str, *, run1: float, now: float) -> None:
    """backend-01 benched on the sim with ``model``: its frozen first run and one run of today."""
    run = BenchRun(agent="backend", task_id="backend-01", config_key="", backend="sim", model=model,
                   seed=1, suite_hash="a" * 64, fixture_hash="b" * 64, outcome="completed", completed=True,
                   weighted_tokens=now, ruleset_version=1)
    s.add(run)
    s.flush()
    s.add(Baseline(agent="backend", task_id="backend-01", backend="sim", model=model, fixture_hash="b" * 64,
                   run1_weighted=run1, run1_run_id=run.id, best_weighted=now, best_run_id=run.id))


def _populate(store) -> dict[str, int]:
    now = utcnow()
    with store.session() as s:
        for i in range(4):
            s.add(SessionRun(run_key=f"s{i}:main", session_id=f"s{i}", agent_id=f"a{i}", agent="backend",
                             models=["claude-sonnet-4-5"], weighted_tokens=100_000.0 + 10_000 * i,
                             started_at=now - timedelta(days=1, hours=i), ended_at=now - timedelta(days=1)))
        good = Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.",
                    state="active", rent_tokens=17, measured_saving=9000.0)
        evil = Rule(agent="backend", body=EVIL, state="evicted", evict_reason="refuted", rent_tokens=15)
        s.add_all([good, evil])
        s.flush()
        for rule, verdict, est, lo, hi, rel in ((good, "keep", 9000.0, 4000.0, 14000.0, 0.1),
                                                (evil, "refute", -500.0, -3000.0, 20.0, -0.005)):
            write_receipt(s, rule, kind="admission", verdict=verdict, reason="test", state_after=rule.state,
                          estimate=est, ci_low=lo, ci_high=hi, margin=2.0 * rule.rent_tokens, k=2.0,
                          n_per_side={"backend-01": [4, 4]}, paired_diffs={"backend-01": [est] * 4},
                          pass_counts={"backend-01": [4, 4, 4, 4]}, tokens_spent=2_000_000.0, model="sim-naive-1",
                          backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64,
                          method={"relative_estimate": rel, "reference_cost": 90_000.0, "n_pairs": 4})
        _benched(s, "sim-naive-1", run1=100_000.0, now=90_000.0)
        compile_memory(s, load_settings(), "backend")
        return {"good": good.id, "evil": evil.id}


def test_cost_figures_agree_with_receipts(warden_home: Path) -> None:
    settings = load_settings()
    store = open_store(settings)
    ids = _populate(store)
    with store.session() as s:
        cost = rule_costs(s, "backend", DEFAULT_TABLE)
    [rule] = cost["rules"]
    assert rule["rule_id"] == ids["good"] and cost["real_work_tokens_per_session"] == pytest.approx(115_000)
    assert rule["saving_tokens_per_session"] == pytest.approx(0.1 * 115_000)
    assert rule["bench_tokens_spent"] == pytest.approx(2_000_000)
    assert rule["break_even_sessions"] == 174  # 2,000,000 / 11,500 = 173.9: the 174th session pays it back
    assert rule["saving_usd_per_session"] == pytest.approx(11_500 * 3.0 / 1e6)
    p = project(cost, weeks=10, sessions_per_week=20, bench_tokens_per_week=100_000)
    assert p["without_warden_tokens"] == pytest.approx(200 * 115_000)
    assert p["with_warden_tokens"] == pytest.approx(200 * (115_000 - 11_500) + 10 * 100_000)
    cli = subprocess.run([sys.executable, "-m", "warden", "cost", "--agent", "backend", "--project", "--weeks", "10",
                          "--sessions-per-week", "20", "--json"], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ), timeout=120)
    assert cli.returncode == 0, cli.stderr
    [out] = json.loads(cli.stdout)
    assert out["rules"][0]["saving_tokens_per_session"] == pytest.approx(11_500)
    assert out["projection"]["without_warden_tokens"] == pytest.approx(200 * 115_000)
    bad = subprocess.run([sys.executable, "-m", "warden", "cost", "--agent", "nobody"], capture_output=True,
                         text=True, cwd=REPO, env=dict(os.environ), timeout=120)
    assert bad.returncode == 2 and "unknown agent" in bad.stderr


def _report(store) -> str:
    with store.session() as s:
        return render_report(report_data(s, DEFAULT_TABLE))


def test_report_escapes_untrusted_text(warden_home: Path) -> None:
    store = open_store(load_settings())
    _populate(store)
    page = _report(store)
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # only the page's own readiness marker
    assert 'id="learning-backend"' in page and 'id="savings-backend"' in page and 'id="bench-spend"' in page
    assert "http://" not in page and "https://" not in page  # self-contained: nothing to fetch


def test_report_shows_each_rules_provenance_and_raw_spend_escaped(warden_home: Path) -> None:
    """Per rule, the report says what it was born of (as `warden receipt` does), escaped, and each
    receipt's raw tokens beside its cost-weighted spend."""
    store = open_store(load_settings())
    with store.session() as s:
        rule = Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.",
                    state="active", rent_tokens=17,
                    provenance_digest={"run_key": "s9:<img src=x onerror=alert(1)>", "distiller": "heuristic",
                                       "trace_sha256": "cd" * 32})
        s.add(rule)
        s.flush()
        write_receipt(s, rule, kind="admission", verdict="keep", reason="test", state_after="active",
                      estimate=9000.0, ci_low=4000.0, ci_high=14000.0, margin=34.0, k=2.0,
                      n_per_side={"backend-01": [2, 2]}, paired_diffs={"backend-01": [9000.0, 9000.0]},
                      pass_counts={"backend-01": [2, 2, 2, 2]}, tokens_spent=1_234_567.0, raw_tokens_spent=4_321_000,
                      model="sim-naive-1", backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64)
    page = _report(store)
    assert "<img" not in page
    assert ("born of: run s9:&lt;img src=x onerror=alert(1)&gt; · heuristic distiller · trace cdcdcdcdcdcd"
            in page)
    assert "spent 1,234,567 weighted tokens (4,321,000 raw)" in page


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_loads_in_headless_chromium(warden_home: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian package 'chromium'; .ci/run installs it)")
    store = open_store(load_settings())
    _populate(store)
    out = tmp_path / "report.html"
    cli = subprocess.run([sys.executable, "-m", "warden", "report", "--html", str(out)], capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ), timeout=120)
    assert cli.returncode == 0, cli.stderr
    profile = tmp_path / "chrome-profile"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           "--virtual-time-budget=2000", "--dump-dom", out.as_uri()],
                          capture_output=True, text=True, timeout=90)
    dom = proc.stdout
    assert 'data-ready="3"' in dom, proc.stderr[-2000:]  # the page's script ran and found all three charts
    assert "Grep for the symbol or text you need" in dom and "&lt;script&gt;alert" in dom
    console_errors = [line for line in proc.stderr.splitlines()
                      if "CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line or "error" in line.lower())]
    assert console_errors == []


def test_status_shows_learning_curve_and_rules(warden_home: Path) -> None:
    store = open_store(load_settings())
    _populate(store)
    cli = subprocess.run([sys.executable, "-m", "warden", "status", "--json"], capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ), timeout=120)
    assert cli.returncode == 0, cli.stderr
    [backend] = [a for a in json.loads(cli.stdout)["learning"] if a["agent"] == "backend"]
    assert backend["rules"]["active"] == 1 and backend["rules"]["evicted"] == 1
    assert backend["golden_suite"]["run1_total"] == 100_000 and backend["golden_suite"]["now_total"] == 90_000
    assert sum(p["sessions"] for p in backend["learning_curve"]) == 4
    text = subprocess.run([sys.executable, "-m", "warden", "status"], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ), timeout=120)
    assert text.returncode == 0
    assert "golden suite 90,000 now vs 100,000 first runs (-10.0%)" in " ".join(text.stdout.split())


def test_report_figures_agree_with_receipts_and_cost(warden_home: Path) -> None:
    """The savings chart states each receipt's figures, the cost table and projection are `warden cost`'s."""
    settings = load_settings()
    store = open_store(settings)
    ids = _populate(store)
    page = _report(store)
    assert "9,000 [4,000, 14,000] · 34" in page and "-500 [-3,000, 20] · 30" in page  # estimate [interval] · margin
    with store.session() as s:
        cost = rule_costs(s, "backend", DEFAULT_TABLE)
    [rule] = cost["rules"]
    assert rule["rule_id"] == ids["good"] and f'<td>{rule["saving_tokens_per_session"]:,.0f}</td>' in page
    assert f'${rule["saving_usd_per_session"]:.4f}' in page
    cli = subprocess.run([sys.executable, "-m", "warden", "cost", "--agent", "backend", "--project", "--json"],
                         capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=120)
    assert cli.returncode == 0, cli.stderr
    p = json.loads(cli.stdout)[0]["projection"]  # the CLI's default horizon is the page's
    assert f"{p['weeks']} weeks × {p['sessions_per_week']:g} sessions: without warden {p['without_warden_tokens']:,.0f}" in page
    assert f"with warden {p['with_warden_tokens']:,.0f}" in page


def test_chart_axes_have_round_ticks() -> None:
    from warden.report.html import _ticks, bar_chart, interval_chart

    assert _ticks(0.0, 45_071.0, 4) == [0, 20_000, 40_000, 60_000]
    assert _ticks(-1_103.0, 29_218.0, 6)[0] <= -1_103 and _ticks(-1_103.0, 29_218.0, 6)[-1] >= 29_218
    one_day = bar_chart([("2026-11-30", 1_740_263.0)], "spend", "bench-spend")
    assert 'width="60.0"' in one_day and ">1.74M<" in one_day  # a lone bar is capped and labelled
    assert "no decisions yet" in interval_chart([], "savings", "savings-x")
    from warden.report.html import line_chart

    assert "no real-work sessions collected yet" in line_chart([], "curve", "learning-x")  # no fake zero point


def test_report_bad_input_is_one_line_usage_error(warden_home: Path, tmp_path: Path) -> None:
    _populate(open_store(load_settings()))
    for args in (["--html", str(tmp_path)], ["--html", str(tmp_path / "r.html"), "--agent", "nobody"],
                 ["--html", str(tmp_path / "no-such-dir" / "r.html")]):
        cli = subprocess.run([sys.executable, "-m", "warden", "report", *args], capture_output=True, text=True,
                             cwd=REPO, env=dict(os.environ), timeout=120)
        assert cli.returncode == 2 and cli.stderr.startswith("warden: ") and "Traceback" not in cli.stderr
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "no-such-dir").exists()


def test_report_never_writes_through_a_symlink(warden_home: Path, tmp_path: Path, capsys) -> None:
    """A ./warden-report.html symlink (shipped in a cloned repository, say) is refused, dangling
    or not; the file it points at is untouched. A linked directory is fine."""
    from warden.cli.app import main

    _populate(open_store(load_settings()))
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    for name, points_at in (("r.html", victim), ("dangling.html", tmp_path / "nowhere")):
        (tmp_path / name).symlink_to(points_at)
        assert main(["report", "--html", str(tmp_path / name)]) == 2
        assert "is a symlink" in capsys.readouterr().err
    assert victim.read_text() == "mine" and not (tmp_path / "nowhere").exists()
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    assert main(["report", "--html", str(tmp_path / "linked" / "r.html")]) == 0
    assert (tmp_path / "real" / "r.html").is_file()


def test_report_without_html_writes_the_default_file_here(warden_home: Path, tmp_path: Path) -> None:
    _populate(open_store(load_settings()))
    cli = subprocess.run([sys.executable, "-m", "warden", "report"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "WARDEN_REPO": str(REPO)}, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "warden-report.html").read_text().startswith("<!doctype html>")


def test_report_shows_adopted_rules_claimed_evidence_as_untrusted(warden_home: Path) -> None:
    store = open_store(load_settings())
    _populate(store)
    with store.session() as s:
        s.add(Rule(agent="backend", body="Read only the lines you need with offset and limit.", state="candidate",
                   origin="adopted", claimed_evidence={"ledger": "<b>team</b>.json", "exported_by": "warden 0.1.0",
                                                       "state": "active", "evidence": [
                                                           {"verdict": "keep", "estimate": 7000.0,
                                                            "interval": [3000.0, 9000.0], "margin": 30.0,
                                                            "n_pairs": 8, "backend": "sim", "model": "sim-naive-1"}]}))
    page = _report(store)
    assert "claimed</b> by ledger &lt;b&gt;team&lt;/b&gt;.json" in page and "never used in a verdict" in page
    assert "keep: saving 7,000 [3,000, 9,000], margin 30, 8 pairs on sim/sim-naive-1" in page
    assert "no local decision yet" in page


def test_cost_project_without_real_work_says_so(warden_home: Path) -> None:
    with open_store(load_settings()).session() as s:
        s.add(Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.",
                   state="candidate"))
    cli = subprocess.run([sys.executable, "-m", "warden", "cost", "--project"], capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ), timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "no projection" in cli.stdout and "without warden 0" not in " ".join(cli.stdout.split())


def test_an_open_interval_is_drawn_to_the_axis_edge_and_printed_as_standard_json(warden_home: Path, capsys) -> None:
    """An inconclusive receipt after a single pair has an infinite interval end: the report draws
    it to the edge of the axis, `receipt` prints −∞, and `--json` says null (not -Infinity,
    which JSON readers refuse)."""
    from warden.cli.app import main
    from warden.strict_json import loads_strict

    store = open_store(load_settings())
    with store.session() as s:
        rule = Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.",
                    state="candidate", rent_tokens=17)
        s.add(rule)
        s.flush()
        write_receipt(s, rule, kind="admission", verdict="inconclusive", reason="budget spent", state_after="candidate",
                      estimate=1200.0, ci_low=float("-inf"), ci_high=42_228.0, margin=34.0, k=2.0,
                      n_per_side={"backend-01": [1, 1]}, paired_diffs={"backend-01": [1200.0]},
                      pass_counts={"backend-01": [1, 1, 1, 1]}, tokens_spent=120_000.0, model="sim-naive-1",
                      backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64,
                      method={"relative_interval": [float("-inf"), 0.4], "llr": float("nan")})
    page = _report(store)
    assert "−∞" in page and "nan" not in page.lower().replace("nanos", "")
    assert main(["receipt", "1"]) == 0
    assert "−∞" in capsys.readouterr().out
    for command in (["receipt", "1", "--json"], ["receipts", "--json"]):
        assert main(command) == 0
        out = capsys.readouterr().out
        assert "Infinity" not in out and "NaN" not in out
        loads_strict(out)


def _keep(s, rule: Rule, relative: float, kind: str = "admission") -> None:
    write_receipt(s, rule, kind=kind, verdict="keep", reason="test", state_after="active",
                  estimate=relative * 90_000, ci_low=1.0, ci_high=2.0, margin=34.0, k=2.0,
                  n_per_side={}, paired_diffs={}, pass_counts={}, tokens_spent=1_000_000.0,
                  model="sim-naive-1", backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64,
                  method={"relative_estimate": relative, "reference_cost": 90_000.0})


def _stacked_store(relatives: list[float]):
    """A store with 100,000-token sessions and one active rule kept per relative saving."""
    store = open_store(load_settings())
    with store.session() as s:
        s.add(SessionRun(run_key="s:main", session_id="s", agent="backend", weighted_tokens=100_000.0,
                         started_at=utcnow(), ended_at=utcnow()))
        rules = [Rule(agent="backend", body=f"Rule number {i} of the stack.", state="active", rent_tokens=15)
                 for i in range(len(relatives))]
        s.add_all(rules)
        s.flush()
        for rule, relative in zip(rules, relatives):
            _keep(s, rule, relative)
        ids = [r.id for r in rules]
    return store, ids


def _savings(store) -> tuple[dict[int, float], float]:
    with store.session() as s:
        cost = rule_costs(s, "backend", DEFAULT_TABLE)
    total = project(cost, weeks=1, sessions_per_week=1, bench_tokens_per_week=0)["saving_tokens"]
    return {r["rule_id"]: r["saving_tokens_per_session"] for r in cost["rules"]}, total


def test_stacked_rules_add_up_to_the_combined_saving_split_by_log_share(warden_home: Path) -> None:
    """Savings add up to the combined effect 1 − (1 − 0.5)(1 − 0.2) = 0.6 of a session, never to
    0.5 + 0.2 of it; each rule's part is its share of the log savings −ln(1 − s)."""
    import math

    store, (first, second) = _stacked_store([0.5, 0.2])
    saving, total = _savings(store)
    log_first, log_second = -math.log(0.5), -math.log(0.8)
    assert saving[first] == pytest.approx(60_000 * log_first / (log_first + log_second))
    assert saving[second] == pytest.approx(60_000 * log_second / (log_first + log_second))
    assert total == pytest.approx(60_000) == pytest.approx(saving[first] + saving[second])


def test_a_rules_saving_does_not_hang_on_which_rule_was_re_audited_last(warden_home: Path) -> None:
    """QA: re-audits of rule 1, rule 3, rule 1 moved rule 1's saving per session down (and its
    break-even out) though its own estimate rose — the stack was ordered by latest receipt."""
    store, (one, two, three) = _stacked_store([0.2, 0.15, 0.1])
    before, total_before = _savings(store)
    with store.session() as s:  # re-audits that measure what the admissions did move nothing
        _keep(s, s.get(Rule, one), 0.2, kind="reaudit")
        _keep(s, s.get(Rule, three), 0.1, kind="reaudit")
    same, total_same = _savings(store)
    assert same == pytest.approx(before) and total_same == pytest.approx(total_before)
    with store.session() as s:  # rule 1 re-audited last, with a higher estimate: its saving rises
        _keep(s, s.get(Rule, one), 0.22, kind="reaudit")
    after, total_after = _savings(store)
    assert after[one] > before[one] and after[two] < before[two] and after[three] < before[three]
    assert total_after == pytest.approx(100_000 * (1 - 0.78 * 0.85 * 0.9)) == pytest.approx(sum(after.values()))


def test_cost_knows_the_agents_every_other_command_knows(warden_home: Path, capsys) -> None:
    """An agent with a golden suite and nothing measured yet is priced as having no rules (as
    `rules`, `receipts` and `plan` accept it); an empty home says there is nothing to price."""
    from warden.cli.app import main

    assert main(["cost"]) == 0
    assert "nothing to price" in capsys.readouterr().out
    assert main(["cost", "--agent", "backend", "--json"]) == 0
    [out] = json.loads(capsys.readouterr().out)
    assert out["agent"] == "backend" and out["rules"] == []
    assert main(["cost", "--agent", "bakcend"]) == 2


@pytest.mark.parametrize(("value", "said"), [("nan", "'nan' is not a number"), ("inf", "'inf' is not a number"),
                                             ("-1", "'-1' is outside 0 to 1,000,000"), ("x", "'x' is not a number")])
def test_a_sessions_per_week_that_is_no_count_is_named_so(warden_home: Path, capsys, value: str, said: str) -> None:
    from warden.cli.app import main

    assert main(["cost", "--project", "--sessions-per-week", value]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert main(["cost", "--project", "--sessions-per-week", "12.5"]) == 0


SIM_NOTE = "measured on warden's simulated agent (sim backend), not a real model"


def test_every_bench_derived_figure_names_the_backend_that_measured_it(warden_home: Path, capsys) -> None:
    """Savings, dollars and golden-suite change measured on the sim backend say so in text and JSON
    — also once a bench run on a real backend exists beside them."""
    from warden.cli.app import main

    store = open_store(load_settings())
    ids = _populate(store)
    with store.session() as s:
        s.add(BenchRun(agent="backend", task_id="backend-02", config_key="", backend="anthropic",
                       model="claude-sonnet-4-5", seed=1, suite_hash="a" * 64, fixture_hash="b" * 64,
                       outcome="completed", completed=True, weighted_tokens=80_000.0))
    flat = lambda: " ".join(capsys.readouterr().out.split())  # noqa: E731 - the table wraps
    for command in (["cost", "--agent", "backend", "--project"], ["receipts"], ["rules"], ["status"]):
        assert main(command) == 0
        assert SIM_NOTE in flat(), command
    assert main(["cost", "--agent", "backend", "--project", "--json"]) == 0
    [cost] = json.loads(capsys.readouterr().out)
    assert cost["rules"][0]["backend"] == "sim" and cost["projection"]["backends"] == ["sim"]
    assert main(["rules", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rules"]}
    assert rows[ids["good"]]["measured_backend"] == "sim" and rows[ids["evil"]]["measured_backend"] is None
    assert main(["status", "--json"]) == 0
    [learning] = [a for a in json.loads(capsys.readouterr().out)["learning"] if a["agent"] == "backend"]
    assert learning["golden_suite"]["backends"] == ["sim"]


def test_a_receipt_says_what_measured_it(warden_home: Path, capsys) -> None:
    """Each decision names its measuring setup (backend/model) — `measured_on` in `receipt --json`
    and `receipts --json`, "measured on" in the text receipt — and a sim-measured one says it is
    the simulated agent's."""
    from warden.cli.app import main

    ids = _populate(open_store(load_settings()))
    assert main(["receipt", str(ids["good"]), "--json"]) == 0
    [receipt] = json.loads(capsys.readouterr().out)["receipts"]
    assert receipt["measured_on"] == "sim/sim-naive-1"
    assert main(["receipts", "--agent", "backend", "--json"]) == 0
    assert [r["measured_on"] for r in json.loads(capsys.readouterr().out)] == ["sim/sim-naive-1"] * 2
    assert main(["receipt", str(ids["good"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "measured on sim/sim-naive-1" in out and SIM_NOTE in out


def test_the_text_receipt_shows_every_field_a_receipt_holds(warden_home: Path, capsys) -> None:
    """DESIGN.md §3's receipt, field by field, in `warden receipt RULE`."""
    from warden import __version__
    from warden.cli.app import main

    store = open_store(load_settings())
    ids = _populate(store)
    with store.session() as s:
        s.get(Rule, ids["good"]).provenance_digest = {"run_key": "s1:main", "distiller": "heuristic"}
    assert main(["receipt", str(ids["good"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for shown in ("born of: run s1:main · heuristic distiller", "admission → keep", "test",  # kind, verdict, reason
                  "saving 9,000/run, interval [4,000, 14,000], margin 34 (= 2 × rent 17)",
                  "spent 2,000,000 weighted tokens", "backend-01: n=[4, 4] passes ref 4/4 rule 4/4 diffs [9000",
                  "measured on sim/sim-naive-1", "suite aaaaaaaaaa", "fixture bbbbbbbbbb", f"warden {__version__}"):
        assert shown in out, shown


def test_report_labels_each_rules_figures_with_their_backend(warden_home: Path) -> None:
    """One bench run on a real backend does not lift the sim label off figures the sim measured."""
    store = open_store(load_settings())
    _populate(store)
    with store.session() as s:
        s.add(BenchRun(agent="backend", task_id="backend-02", config_key="", backend="anthropic",
                       model="claude-sonnet-4-5", seed=1, suite_hash="a" * 64, fixture_hash="b" * 64,
                       outcome="completed", completed=True, weighted_tokens=80_000.0))
    page = _report(store)
    note = SIM_NOTE.replace("'", "&#x27;")
    assert page.count(note) >= 3  # golden suite, savings chart, cost table and projection
    assert '<td class="t backend">sim/sim-naive-1</td>' in page  # the cost table's row of the sim-measured rule
    assert "keep</tspan> · sim" in page  # the savings chart's row


def test_bench_spend_names_the_backends_that_spent_it(warden_home: Path) -> None:
    """Tokens a sim bench 'spent' are the simulated agent's: the spend chart and the week's
    figure say which backends spent them, like every other bench-derived figure."""
    store = open_store(load_settings())
    _populate(store)  # one sim bench run, today
    page = _report(store)
    spend_section = page[page.index("<h2>Bench spend over time</h2>"):]
    assert SIM_NOTE.replace("'", "&#x27;") in spend_section
    agent_line = page[page.index("bench this week"):]
    assert agent_line[:agent_line.index("</p>")].count("simulated agent") == 1
    with store.session() as s:
        s.add(BenchRun(agent="backend", task_id="backend-02", config_key="", backend="anthropic",
                       model="claude-sonnet-4-5", seed=1, suite_hash="a" * 64, fixture_hash="b" * 64,
                       outcome="completed", completed=True, weighted_tokens=80_000.0))
        data = report_data(s, DEFAULT_TABLE)
    [today] = data["bench_spend_by_day"]
    assert today["backends"] == ["anthropic", "sim"]
    assert data["agents"][0]["spend_this_week"]["bench_backends"] == ["anthropic", "sim"]


def test_status_says_once_which_backend_spent_the_bench_tokens(warden_home: Path, capsys) -> None:
    from warden.cli.app import main

    store = open_store(load_settings())
    _populate(store)  # the golden suite and this week's bench spend both on the sim
    assert main(["status"]) == 0
    line = " ".join(capsys.readouterr().out.split())
    line = line[line.index("backend: cost/session"):]
    assert line.count("simulated agent") == 1 and "bench this week 90,000" in line
    with store.session() as s:  # a real backend's run this week: now the spend names both
        s.add(BenchRun(agent="backend", task_id="backend-02", config_key="", backend="anthropic",
                       model="claude-sonnet-4-5", seed=1, suite_hash="a" * 64, fixture_hash="b" * 64,
                       outcome="completed", completed=True, weighted_tokens=80_000.0))
    assert main(["status"]) == 0
    line = " ".join(capsys.readouterr().out.split())
    assert "bench this week 170,000 spent on the anthropic and sim backends (sim: warden's simulated agent" in line


def test_status_tells_an_agent_without_a_golden_suite_from_one_not_benched_yet(warden_home: Path, capsys) -> None:
    """In text and in --json (has_golden_suite)."""
    from warden.cli.app import main

    with open_store(load_settings()).session() as s:
        for agent in ("Explore", "sql"):  # a subagent type with no suite; an agent whose suite waits
            s.add(SessionRun(run_key=f"{agent}:main", session_id=agent, agent=agent, models=["claude-sonnet-4-5"],
                             weighted_tokens=1000.0, started_at=utcnow(), ended_at=utcnow()))
    assert main(["status"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Explore: cost/session by ruleset" in out and "no golden suite" in out.split("Explore:")[1].split("sql:")[0]
    assert "golden suite not benched yet" in out.split("sql:")[1]
    # --json says the same per agent: why nothing of Explore's is measured
    assert main(["status", "--json"]) == 0
    learning = {a["agent"]: a for a in json.loads(capsys.readouterr().out)["learning"]}
    assert learning["Explore"]["has_golden_suite"] is False and learning["sql"]["has_golden_suite"] is True


def test_golden_suite_now_is_the_median_of_runs_with_todays_rules(warden_home: Path) -> None:
    """'now' was the latest run that carried a ruleset version: after a keep, the reference runs
    of the new active set carried none, so a stale pre-rule run (a derailed one, at that) stood
    for today's cost."""
    from warden.report.figures import golden_suite

    store = open_store(load_settings())
    ids = _populate(store)  # the active rule; one run of the empty set, ruleset v1, 90,000
    with store.session() as s:
        for weighted in (60_000.0, 70_000.0, 200_000.0):  # today's rule set, one run derailed
            s.add(BenchRun(agent="backend", task_id="backend-01", config_key=str(ids["good"]), backend="sim",
                           model="sim-naive-1", seed=1, suite_hash="a" * 64, fixture_hash="b" * 64,
                           outcome="completed", completed=True, weighted_tokens=weighted))
        s.add(BenchRun(agent="backend", task_id="backend-01", config_key="", backend="sim", model="sim-naive-1",
                       seed=2, suite_hash="a" * 64, fixture_hash="b" * 64, outcome="completed", completed=True,
                       weighted_tokens=150_000.0, ruleset_version=1))  # a later run without the rule
    with store.session() as s:
        suite = golden_suite(s, "backend")
    assert suite["now_total"] == 70_000.0 and suite["tasks"][0]["now_runs"] == 3
    assert suite["change"] == pytest.approx(-0.3)


def test_status_reads_the_golden_suite_on_the_fixture_benched_last(warden_home: Path, capsys) -> None:
    """A new fixture version's runs are never compared with the old version's first runs: before
    a baseline freezes on it, status says the suite is not benched on it yet."""
    from warden.cli.app import main

    store = open_store(load_settings())
    _populate(store)  # backend-01 on fixture b…: first run 100,000, now 90,000
    with store.session() as s:  # a run on a new fixture version that froze no baseline (a failed one)
        s.add(BenchRun(agent="backend", task_id="backend-01", config_key="", backend="sim", model="sim-naive-1",
                       seed=3, suite_hash="a" * 64, fixture_hash="c" * 64, outcome="task_failed",
                       completed=False, weighted_tokens=10_000.0))
    assert main(["status", "--json"]) == 0
    suite = {a["agent"]: a for a in json.loads(capsys.readouterr().out)["learning"]}["backend"]["golden_suite"]
    assert suite["tasks"] == [] and suite["fixture_hash"] == "c" * 64 and suite["other_fixtures"] == 1
    assert main(["status"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "golden suite not benched on the current fixture yet" in out and "first runs" not in out


def test_golden_suite_totals_one_model_not_two_models_first_runs_summed(warden_home: Path, capsys) -> None:
    """Bench the suite on a second model and the totals summed both models' first runs: a 1-task
    suite read as two, 'now' and 'first runs' each mixing models."""
    from warden.cli.app import main
    from warden.report.figures import golden_suite

    store = open_store(load_settings())
    _populate(store)  # backend-01 on sim-naive-1: first run 100,000, now 90,000
    with store.session() as s:
        _benched(s, "sim-careful-1", run1=40_000.0, now=30_000.0)
    with store.session() as s:
        suite = golden_suite(s, "backend")
    assert len(suite["tasks"]) == 1 and suite["model"] == "sim-careful-1"  # the model benched last
    assert suite["run1_total"] == 40_000.0 and suite["now_total"] == 30_000.0
    assert suite["other_setups"] == [{"backend": "sim", "model": "sim-naive-1", "run1_total": 100_000.0,
                                      "now_total": 90_000.0, "change": pytest.approx(-0.1), "backends": ["sim"],
                                      "tasks": 1}]
    assert main(["status"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "golden suite 30,000 now vs 40,000 first runs" in out and "model sim-careful-1; 1 other" in out


def test_a_saving_on_real_work_is_priced_at_the_real_work_model(warden_home: Path, capsys) -> None:
    """Two models measured two rules. With real-work sessions (here on a $5 model) each saving is a
    share of the real-work tokens, so it is priced at the real-work model's price whichever model
    measured it, and the rules' $/session add up to what --project saves a session; the table still
    names backend/model (as receipts does), not the same "sim" for both. Without real work each
    saving is a share of its reference run, priced at the model that measured it."""
    from warden.cli.app import main
    from warden.ingest.pricing import PriceTable

    store = open_store(load_settings())
    with store.session() as s:
        real = SessionRun(run_key="s:main", session_id="s", agent="backend", weighted_tokens=100_000.0,
                          models=["claude-opus-4-6"], started_at=utcnow(), ended_at=utcnow())
        s.add(real)
        naive = Rule(agent="backend", body="Grep for the symbol or text you need before opening any file.",
                     state="active", rent_tokens=17)
        careful = Rule(agent="backend", body="Read each file at most once per task and keep notes.",
                       state="active", rent_tokens=15)
        s.add_all([naive, careful])
        s.flush()
        for rule, model in ((naive, "sim-naive-1"), (careful, "sim-careful-1")):
            write_receipt(s, rule, kind="admission", verdict="keep", reason="test", state_after="active",
                          estimate=9_000.0, ci_low=1.0, ci_high=2.0, margin=34.0, k=2.0,
                          n_per_side={}, paired_diffs={}, pass_counts={}, tokens_spent=1_000_000.0,
                          model=model, backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64,
                          method={"relative_estimate": 0.1, "reference_cost": 90_000.0})
    table = PriceTable({"sim-careful-1": {"input": 1.0}})
    with store.session() as s:
        cost = rule_costs(s, "backend", table)
    assert cost["model"] == "claude-opus-4-6" and cost["input_price_per_mtok"] == 5.0
    rows = {r["model"]: r for r in cost["rules"]}
    assert rows["sim-naive-1"]["measured_on"] == "sim/sim-naive-1" and rows["sim-careful-1"]["measured_on"] == "sim/sim-careful-1"
    for model, bench_price in (("sim-naive-1", 3.0), ("sim-careful-1", 1.0)):
        r = rows[model]
        assert r["input_price_per_mtok"] == 5.0  # the real-work model's, not the measuring model's
        assert r["saving_usd_per_session"] == pytest.approx(r["saving_tokens_per_session"] * 5.0 / 1e6)
        assert r["bench_usd_spent"] == pytest.approx(1_000_000 * bench_price / 1e6)  # the bench ran on it
    projection = project(cost, weeks=1, sessions_per_week=1.0, bench_tokens_per_week=0.0)
    assert sum(r["saving_usd_per_session"] for r in cost["rules"]) == pytest.approx(projection["saving_usd"])
    # before any real work: a share of the reference run, at the price of the model that measured it
    with store.session() as s:
        s.delete(s.get(SessionRun, real.id))
    with store.session() as s:
        reference = {r["model"]: r for r in rule_costs(s, "backend", table)["rules"]}
    for model, price in (("sim-naive-1", 3.0), ("sim-careful-1", 1.0)):
        r = reference[model]
        assert r["saving_tokens_per_session"] == pytest.approx(0.1 * 90_000.0)
        assert r["input_price_per_mtok"] == price
        assert r["saving_usd_per_session"] == pytest.approx(9_000.0 * price / 1e6)
        assert r["measured_on"] == f"sim/{model}"
    assert main(["cost", "--agent", "backend"]) == 0
    out = capsys.readouterr().out
    assert "sim/sim-naive-1" in out and "sim/sim-careful-1" in out
    assert main(["receipts", "--agent", "backend"]) == 0
    out = capsys.readouterr().out
    assert "sim/sim-naive-1" in out and "sim/sim-careful-1" in out
