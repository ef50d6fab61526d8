"""`warden rules` (listing) and rules by hand: add, protect, unprotect, scope, forget."""

from __future__ import annotations

import json

import pytest

from warden.cli.app import main
from warden.config import load_settings
from warden.select.memory import MemoryRule, rule_rent
from warden.store.db import open_store
from warden.store.models import Rule

BODY = "Grep for the symbol or text you need before opening any file."


@pytest.fixture(autouse=True)
def _claude_code_agents() -> None:
    """coder and nobody are Claude Code agents (an agent file each) with no golden suite: warden
    knows them, and refuses rules for a name it knows nothing of (a typo)."""
    agents = load_settings().claude_home / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    for name in ("coder", "nobody"):
        (agents / f"{name}.md").write_text(f"---\nname: {name}\n---\nA test agent.\n")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_add_protected_lists_and_counts_rent(capsys) -> None:
    row = run_json(capsys, "rules", "add", "--agent", "coder", "--protected", BODY)
    assert row["state"] == "protected" and row["origin"] == "manual"
    assert row["rent_tokens"] == rule_rent(MemoryRule(id=0, body=BODY))
    listing = run_json(capsys, "rules", "--agent", "coder")
    assert [r["id"] for r in listing["rules"]] == [row["id"]]
    assert listing["memory_rent_tokens"] == {"coder": row["rent_tokens"]}
    assert run_json(capsys, "rules", "--agent", "coder", "--status", "candidate")["rules"] == []
    assert main(["rules", "--agent", "coder"]) == 0
    out = capsys.readouterr().out
    assert "protected" in out and "Grep for the symbol" in out


def test_add_without_protected_is_a_candidate_to_measure(capsys) -> None:
    row = run_json(capsys, "rules", "add", "--agent", "coder", BODY)
    assert row["state"] == "candidate"


def test_add_refuses_invalid_and_duplicate_bodies(capsys) -> None:
    assert main(["rules", "add", "--agent", "coder", BODY]) == 0
    assert main(["rules", "add", "--agent", "coder", BODY.replace("any file", "any files")]) == 2
    assert "near-duplicate of rule 1" in capsys.readouterr().err
    assert main(["rules", "add", "--agent", "coder", "Grep first\u202e before reading."]) == 2
    assert main(["rules", "add", "--agent", "coder", "too short"]) == 2
    assert main(["rules", "add", "--agent", "../../etc", BODY + " Always."]) == 2
    err = capsys.readouterr().err
    assert "bidi" in err and "shorter than 10" in err and "invalid agent name" in err
    assert len(err.strip().splitlines()) == 3  # one line each, no traceback


def test_protect_unprotect_scope_forget(capsys) -> None:
    rule_id = run_json(capsys, "rules", "add", "--agent", "coder", BODY)["id"]
    assert run_json(capsys, "rules", "protect", str(rule_id))["changed"] is True
    again = run_json(capsys, "rules", "protect", str(rule_id))  # twice: nothing to do, not an error
    assert again["state"] == "protected" and again["changed"] is False
    # never measured: unprotecting makes it a candidate that must earn its place
    assert run_json(capsys, "rules", "unprotect", str(rule_id))["state"] == "candidate"
    again = run_json(capsys, "rules", "unprotect", str(rule_id))
    assert again["state"] == "candidate" and again["changed"] is False
    scoped = run_json(capsys, "rules", "scope", str(rule_id), "editing SQL migrations")
    assert scoped["scope"] == "editing SQL migrations"
    assert scoped["rent_tokens"] == rule_rent(MemoryRule(id=0, body=BODY, scope="editing SQL migrations"))
    cleared = run_json(capsys, "rules", "scope", str(rule_id), "--clear")
    assert cleared["scope"] is None and cleared["rent_tokens"] < scoped["rent_tokens"]
    assert main(["rules", "scope", str(rule_id)]) == 2  # neither a scope nor --clear
    forgotten = run_json(capsys, "rules", "forget", str(rule_id))
    assert forgotten["state"] == "evicted" and forgotten["evict_reason"] == "manual" and forgotten["changed"]
    assert run_json(capsys, "rules", "forget", str(rule_id))["changed"] is False
    assert main(["rules", "protect", str(rule_id)]) == 2  # forgotten stays forgotten
    # the forgotten rule stays as negative data: a near-duplicate cannot come back
    assert main(["rules", "add", "--agent", "coder", BODY.replace("any file", "any files")]) == 2
    assert main(["rules", "protect", "999"]) == 2
    assert "no rule with id 999" in capsys.readouterr().err


def _decided(verdict: str, state_after: str, strikes: int = 0) -> int:
    """A protected rule whose latest measured decision was ``verdict`` → ``state_after``."""
    from warden.select.receipts import write_receipt

    store = open_store(load_settings())
    with store.session() as session:
        rule = Rule(agent="coder", body=BODY, state="protected", measured_saving=1500.0, rent_tokens=16,
                    strikes=strikes)
        session.add(rule)
        session.flush()
        write_receipt(session, rule, kind="admission", verdict=verdict, reason="r", state_after=state_after,
                      estimate=1500.0, ci_low=100.0, ci_high=2000.0, margin=32.0, k=2.0, n_per_side={},
                      paired_diffs={}, pass_counts={}, tokens_spent=1.0, model="m", backend="sim",
                      suite_hash="s", fixture_hash="f", method={})
        return rule.id


@pytest.mark.parametrize("verdict, state_after, strikes, expected", [
    ("keep", "active", 0, ("active", None)),
    ("refute", "probation", 1, ("probation", None)),
    ("refute", "evicted", 0, ("evicted", "refuted")),  # protect + unprotect is no way back in
])
def test_unprotect_returns_a_rule_to_where_its_latest_decision_left_it(capsys, verdict, state_after, strikes,
                                                                       expected) -> None:
    rule_id = _decided(verdict, state_after, strikes)
    row = run_json(capsys, "rules", "unprotect", str(rule_id))
    assert (row["state"], row["evict_reason"]) == expected
    assert row["strikes"] == strikes  # a strike survives protect and unprotect


def test_a_forgotten_rule_cannot_be_protected_back(capsys) -> None:
    rule_id = run_json(capsys, "rules", "add", "--agent", "coder", BODY)["id"]
    run_json(capsys, "rules", "forget", str(rule_id))
    assert main(["rules", "protect", str(rule_id)]) == 2
    assert "forgotten" in capsys.readouterr().err


def test_bad_status_is_a_usage_error(capsys) -> None:
    assert main(["rules", "--status", "zombie"]) == 2
    assert "unknown status" in capsys.readouterr().err


def test_listing_sanitises_stored_text(capsys) -> None:
    store = open_store(load_settings())
    with store.session() as session:  # a row written by an older or foreign writer
        session.add(Rule(agent="coder", body="Grep first \x1b[2J\u202e before reading files.", state="active"))
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out


def test_add_candidate_for_an_agent_without_a_golden_suite_says_it_cannot_be_measured(capsys) -> None:
    assert main(["rules", "add", "--agent", "nobody", BODY]) == 0
    assert "nobody has no golden suite" in " ".join(capsys.readouterr().out.split())
    assert main(["rules", "add", "--agent", "backend", BODY]) == 0
    assert "no golden suite" not in capsys.readouterr().out


def test_rules_json_and_receipt_json_show_a_rule_alike(capsys) -> None:  # type: ignore[no-untyped-def]
    """One view of a rule: `rules --json` and `receipt --json` agree field for field."""
    added = run_json(capsys, "rules", "add", "--agent", "backend", "--protected", BODY)
    [listed] = run_json(capsys, "rules", "--agent", "backend")["rules"]
    shown = run_json(capsys, "receipt", str(added["id"]))["rule"]
    assert listed == shown == added and listed["created_at"].endswith("Z") and "provenance_digest" in listed


def test_forgetting_a_rule_a_verdict_evicted_makes_it_forgotten_for_good(capsys) -> None:
    rule_id = _decided("refute", "evicted")
    assert run_json(capsys, "rules", "unprotect", str(rule_id))["evict_reason"] == "refuted"
    forgotten = run_json(capsys, "rules", "forget", str(rule_id))
    assert forgotten["changed"] is True and forgotten["evict_reason"] == "manual"
    assert main(["rules", "protect", str(rule_id)]) == 2
