"""``warden memory show|compile``: drift warnings, JSON, unknown agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warden.cli.app import main
from warden.config import load_settings
from warden.select.compile import memory_path

BODY = "Never commit secrets or credentials to the repository."


def test_memory_compile_show_and_drift(warden_home: Path, capsys) -> None:
    assert main(["rules", "add", "--agent", "backend", "--protected", BODY]) == 0
    capsys.readouterr()
    assert main(["memory", "compile", "--agent", "backend", "--json"]) == 0
    compiled = json.loads(capsys.readouterr().out)
    assert compiled["version"] == 1 and not compiled["changed"] and not compiled["drifted"]
    path = memory_path(load_settings(), "backend")
    assert compiled["path"] == str(path)
    assert main(["memory", "show", "--agent", "backend"]) == 0
    out = capsys.readouterr()
    assert f"- {BODY}" in out.out and out.err == ""
    path.write_text(path.read_text() + "- a hand-written line\x1b[31m\n")
    assert main(["memory", "show", "--agent", "backend", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "differs from the last compile" in shown["drift"] and "hand-written" in shown["text"]
    assert main(["memory", "show", "--agent", "backend"]) == 0
    out = capsys.readouterr()
    assert "warning: MEMORY.md differs" in out.err and "\x1b[31m" not in out.out
    assert main(["memory", "compile", "--agent", "backend"]) == 0
    out = capsys.readouterr()
    assert "had drifted" in out.err and "hand-written" not in path.read_text()
    # a change by hand recompiles too, and says so when it overwrites a hand edit
    path.write_text(path.read_text() + "- another hand-written line\n")
    assert main(["rules", "scope", "1", "editing code"]) == 0
    out = capsys.readouterr()
    assert "had drifted" in out.err and "another hand-written" not in path.read_text()


def test_memory_compile_refuses_an_unknown_agent(warden_home: Path, capsys) -> None:
    assert main(["memory", "compile", "--agent", "backedn"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("warden: unknown agent 'backedn': no golden suite, Claude Code agent file, rules or sessions "
                   "(known: backend, docs, sql, testing)")
    assert not memory_path(load_settings(), "backedn").parent.exists()


@pytest.mark.parametrize("argv", [["memory", "show", "--agent", "backedn"], ["receipts", "--agent", "backedn"],
                                  ["rules", "--agent", "backedn"], ["share", "--agent", "backedn"]])
def test_a_mistyped_agent_is_a_usage_error_not_an_empty_answer(argv: list[str], warden_home: Path, capsys) -> None:
    """'no receipts yet' for a typo would read as if all were well."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().startswith("warden: unknown agent 'backedn'") and err.count("\n") == 1


def test_receipt_of_an_adopted_rule_shows_the_claimed_foreign_evidence(warden_home: Path, capsys) -> None:
    from warden.store.db import open_store
    from warden.store.models import Rule

    claimed = {"ledger": "backend.json", "exported_by": "team-a\x1b[2J", "state": "active",
               "evidence": [{"kind": "admission", "verdict": "keep", "estimate": 4210.5, "interval": [1500.0, 6900.0],
                             "margin": 40.0, "n_pairs": 24, "pass_counts": [12, 12, 12, 12], "backend": "anthropic",
                             "model": "claude-sonnet-4-5", "decided_at": "2026-11-01T03:17:00Z"}]}
    with open_store(load_settings()).session() as s:
        rule = Rule(agent="backend", body="Grep for the symbol before opening any file.", origin="adopted",
                    claimed_evidence=claimed, provenance_digest={"adopted_from": "backend.json"})
        s.add(rule)
        s.flush()
        rule_id = rule.id
    assert main(["receipt", str(rule_id)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console may wrap long lines
    assert "claimed (foreign, never used in a verdict): ledger backend.json" in out and "\x1b" not in out
    assert "admission → keep · saving 4,210/run [1,500, 6,900], margin 40, 24 pairs" in out
    assert "anthropic/claude-sonnet-4-5" in out and "no decisions yet" in out
    assert main(["receipt", str(rule_id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rule"]["claimed_evidence"]["evidence"][0]["n_pairs"] == 24


def test_provenance_reads_as_a_sentence_for_every_origin() -> None:
    from warden.select.receipts import provenance_summary

    distilled = {"run_key": "s1:main", "distiller": "model", "model": "claude-sonnet-4-6",
                 "findings": [{"waste_kind": "reread", "occurrences": 2, "saving_tokens": 6889.6}],
                 "trace_sha256": "ab" * 32, "trace": [["read", "x", 1, 2, 0]]}
    assert provenance_summary(distilled) == ("run s1:main · model distiller, model claude-sonnet-4-6 · "
                                             "waste seen: reread ×2 (~6,890 tokens) · trace abababababab")
    assert provenance_summary({"origin": "manual"}) == "added by hand"
    assert provenance_summary({"adopted_from": "team.json", "ledger_agent": "backend"}).startswith("adopted from team.json")
    assert provenance_summary({}) == "unknown" and provenance_summary({"x": 1}) == "x=1"


def test_numbers_beyond_what_the_database_holds_are_usage_errors(warden_home, capsys) -> None:  # type: ignore[no-untyped-def]
    from warden.cli.app import main

    for argv in (["receipt", str(2**64)], ["rules", "protect", str(2**64)], ["checkpoints", "show", str(2**64)],
                 ["sessions", "--limit", str(2**64)], ["bench", "--agent", "docs", "--runs", str(10**20)],
                 ["select", "--agent", "docs", "--concurrency", "100000"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("warden: Invalid value"), (argv, err)


def test_rules_past_the_cap_are_named_and_pay_no_rent(warden_home: Path, capsys) -> None:
    from warden.config import load_settings
    from warden.store.db import open_store
    from warden.store.models import Rule

    with open_store(load_settings()).session() as s:
        for i in range(150):
            s.add(Rule(agent="backend", state="protected", rent_tokens=50,
                       body=f"Rule number {i:03d}: " + "keep every reply short and avoid narration. " * 4))
    assert main(["memory", "compile", "--agent", "backend"]) == 0
    err = capsys.readouterr().err
    assert "do not fit MEMORY.md's 200-line / 25 KB cap" in err
    assert main(["rules", "--agent", "backend", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    path = memory_path(load_settings(), "backend")
    in_file = sum(1 for line in path.read_text().splitlines() if line.startswith("- Rule number"))
    assert 0 < in_file < 150 and listing["memory_rent_tokens"]["backend"] == 50 * in_file


def test_agents_known_from_sessions_or_an_installed_memory_are_not_refused(warden_home: Path, capsys) -> None:
    """'main' and subagent types come from collected sessions; a MEMORY.md installed by hand can be shown."""
    from warden.store.db import open_store
    from warden.store.models import SessionRun

    with open_store(load_settings()).session() as s:
        s.add(SessionRun(run_key="s1:main", session_id="s1", agent="main"))
    assert main(["rules", "--agent", "main"]) == 0 and main(["receipts", "--agent", "main"]) == 0
    path = memory_path(load_settings(), "reviewer")
    path.parent.mkdir(parents=True)
    path.write_text("# hand-written\n")
    capsys.readouterr()
    assert main(["memory", "show", "--agent", "reviewer"]) == 0
    assert "# hand-written" in capsys.readouterr().out


def test_rules_add_refuses_an_agent_warden_never_heard_of(warden_home: Path, capsys) -> None:
    """A typo in --agent started an agent of its own, listed in status, cost and every 'known:'."""
    assert main(["rules", "add", "--agent", "bakcend", BODY]) == 2
    assert "unknown agent 'bakcend'" in capsys.readouterr().err
    assert main(["rules", "--agent", "bakcend"]) == 2
    capsys.readouterr()
    # an agent Claude Code defines (agents/<name>.md) is known before warden has seen its sessions
    agents = load_settings().claude_home / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\n---\nReviews diffs.\n")
    assert main(["rules", "add", "--agent", "reviewer", "--protected", BODY]) == 0


def test_receipt_text_says_when_it_cuts_the_paired_differences_and_shows_raw_tokens(warden_home: Path, capsys) -> None:
    """The text view shows 12 differences per task: a cut without a marker reads as the whole evidence."""
    from warden.store.db import open_store
    from warden.store.models import Receipt, Rule

    with open_store(load_settings()).session() as s:
        rule = Rule(agent="backend", body="Grep for the symbol before opening any file.", state="active")
        s.add(rule)
        s.flush()
        s.add(Receipt(rule_id=rule.id, agent="backend", kind="admission", verdict="keep", state_after="active",
                      estimate=900.0, ci_low=100.0, ci_high=1500.0, margin=80.0, rent=40, k=2.0,
                      n_per_side={"backend-01": [15, 15]}, paired_diffs={"backend-01": [float(i) for i in range(15)]},
                      pass_counts={"backend-01": [15, 15, 15, 15]}, tokens_spent=123456.0, raw_tokens_spent=654321,
                      model="sim-naive-1", backend="sim", suite_hash="a" * 64, fixture_hash="b" * 64,
                      warden_version="test"))
        rule_id = rule.id
    assert main(["receipt", str(rule_id)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "diffs [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, … 3 more (all in --json)]" in out
    assert "spent 123,456 weighted tokens (654,321 raw)" in out


def test_every_compile_names_what_it_did_in_the_same_words() -> None:
    """`memory compile`, a by-hand rule change and a select's summary say it alike: created,
    written or unchanged (a by-hand change used to say "recompiled", `memory compile` "written")."""
    from types import SimpleNamespace

    from warden.cli.common import compile_outcome

    for created, changed, word in ((True, True, "created"), (False, True, "written"), (False, False, "unchanged")):
        assert compile_outcome(SimpleNamespace(created=created, changed=changed)) == word
        assert compile_outcome({"created": created, "changed": changed}) == word
