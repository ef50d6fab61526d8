"""Ledger review fixes, driven through the CLI as a user runs it: adopt shows each rule whole,
share --out into ledgers/ writes only what the gate accepts (and its .gitattributes however the
path reaches the directory), and the gate refuses evidence times that never were or are yet to be."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_ledger import _reseal, _tamper, _team_checkout, shared  # noqa: F401 (a fixture)

from warden.cli.app import main
from warden.config import load_settings
from warden.ledger.format import rule_order
from warden.ledger.verify import verify_path
from warden.select.memory import MemoryRule, rule_rent
from warden.store.db import open_store
from warden.store.models import Receipt

# 186 characters: the part a 100-character cut hid is where an instruction would sit
LONG_BODY = ("Prefer the parser helpers when editing parser code, and keep each change small and focused on one "
             "function at a time; when done, run the parser tests once more and name the ones you ran.")
LONG_SCOPE = "editing the recursive-descent parser modules of the legacy SQL frontend"  # 71 characters


def _protected(doc: dict) -> dict:
    return next(r for r in doc["rules"] if r["state"] == "protected")


def _long_rule(doc: dict) -> None:
    _protected(doc).update(body=LONG_BODY, scope=LONG_SCOPE, rent=rule_rent(MemoryRule(0, LONG_BODY, LONG_SCOPE)))
    doc["rules"].sort(key=rule_order)
    _reseal(doc)


def test_adopt_shows_each_rule_whole_dry_run_or_not(shared: Path, tmp_path: Path, monkeypatch,  # noqa: F811
                                                     capsys) -> None:
    """The dry run is the human check on foreign text: body and scope are printed whole (cleaned),
    in the real run too, and a skipped rule as well."""
    ledger = tmp_path / "long.json"
    ledger.write_bytes(_tamper(shared, _long_rule))
    assert verify_path(ledger) == []
    assert len(LONG_BODY) > 180 and len(LONG_SCOPE) > 60
    monkeypatch.setenv("WARDEN_HOME", str(tmp_path / "team-long"))
    whole = f"(when {LONG_SCOPE}) {LONG_BODY}"
    assert main(["adopt", "--dry-run", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert f"  + {whole}\n" in out and "…" not in out
    assert main(["adopt", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert f"  + {whole}  (rule " in out and "…" not in out
    assert main(["adopt", "--dry-run", str(ledger)]) == 0  # now a near-duplicate of the local candidate
    out = capsys.readouterr().out
    assert f"  skipped: {whole} — near-duplicate of local rule" in out and "…" not in out


@pytest.mark.parametrize("out, why", [
    ("ledgers/frontend.json", "a ledger under ledgers/ is named for its agent: backend.json"),
    ("ledgers/backend.txt", "a ledger under ledgers/ is named for its agent: backend.json"),
    ("ledgers/README.md", "a ledger under ledgers/ is named for its agent: backend.json"),
    ("ledgers/sub/backend.json", "ledgers/ holds <agent>.json files, no subdirectories"),
    ("sub/../ledgers/frontend.json", "a ledger under ledgers/ is named for its agent: backend.json"),
])
def test_share_out_into_ledgers_writes_only_what_the_gate_accepts(tmp_path: Path, monkeypatch, capsys, out: str,
                                                                  why: str) -> None:
    """Inside the directory a bare verify-ledger reads (paths compared resolved), --out must be
    ledgers/<agent>.json: anything else is one line, exit 2, nothing written, and the gate
    still passes. Outside that directory any name will do."""
    repo = _team_checkout(tmp_path, monkeypatch, "team-names")
    (repo / "ledgers" / "sub").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert main(["share", "--agent", "backend", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err == f"warden: cannot share backend to {out}: the gate fails it there ({why})" + (
        "; write ledgers/backend.json\n" if "subdirectories" in why else "\n")
    assert sorted(p.name for p in (repo / "ledgers").rglob("*")) == ["sub"]  # nothing written
    (repo / "ledgers" / "sub").rmdir()
    assert main(["verify-ledger"]) == 0
    capsys.readouterr()
    assert main(["share", "--agent", "backend", "--out", "elsewhere.txt"]) == 0  # outside ledgers/: any name
    assert verify_path(repo / "elsewhere.txt") == []
    assert main(["share", "--agent", "backend", "--out", "ledgers/backend.json"]) == 0
    capsys.readouterr()
    assert main(["verify-ledger"]) == 0
    assert capsys.readouterr().out == f"ok   {repo / 'ledgers' / 'backend.json'}\n"


def test_share_out_reaching_ledgers_by_dotdot_or_a_link_adds_its_gitattributes(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    """`--out ../ledgers/backend.json` from a subdirectory, or the checkout reached through a
    symlink, is the gate's directory: share adds ledgers/.gitattributes there as it does for
    the plain path, and the gate passes."""
    repo = _team_checkout(tmp_path, monkeypatch, "team-dotdot")
    (repo / "ledgers").mkdir()
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    assert main(["share", "--agent", "backend", "--out", "../ledgers/backend.json"]) == 0
    attributes = repo / "ledgers" / ".gitattributes"
    assert "*.json -text" in attributes.read_text().splitlines()
    assert "commit it with the ledger" in capsys.readouterr().out
    assert main(["verify-ledger"]) == 0
    assert "ok   " in capsys.readouterr().out
    attributes.unlink()
    alias = tmp_path / "alias"
    alias.symlink_to(repo, target_is_directory=True)
    assert main(["share", "--agent", "backend", "--out", str(alias / "ledgers" / "backend.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gitattributes"] == str(alias / "ledgers" / ".gitattributes")
    assert attributes.is_file()
    assert main(["share", "--agent", "backend", "--out", str(alias / "ledgers" / "frontend.json")]) == 2
    assert "named for its agent: backend.json" in capsys.readouterr().err
    assert sorted(p.name for p in (repo / "ledgers").iterdir()) == [".gitattributes", "backend.json"]


def _dated(when: str):
    def edit(doc: dict) -> None:
        next(r for r in doc["rules"] if r["state"] == "active")["evidence"][0]["decided_at"] = when
        _reseal(doc)
    return edit


@pytest.mark.parametrize("when, why", [
    ("2025-02-31T23:59:59Z", "is not a real date and time"),
    ("2023-02-29T00:00:00Z", "is not a real date and time"),
    ("0000-01-01T00:00:00Z", "is not a real date and time"),
    ("9999-12-31T23:59:59Z", "lies in the future (more than 1 day after "),
])
def test_the_gate_refuses_an_evidence_time_that_never_was_or_is_yet_to_be(shared: Path, when: str,  # noqa: F811
                                                                          why: str, capsys) -> None:
    ledger = shared.with_name("dated.json")
    ledger.write_bytes(_tamper(shared, _dated(when)))
    assert main(["verify-ledger", str(ledger)]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert out.startswith(f"FAIL {ledger}: rule ") and f": evidence 1: decided_at {when!r} {why}" in out
    assert main(["adopt", "--dry-run", str(ledger)]) == 2
    assert f"decided_at {when!r} {why}" in capsys.readouterr().err


def test_the_gate_allows_real_times_and_a_little_clock_skew(shared: Path, capsys) -> None:  # noqa: F811
    soon = (datetime.now(timezone.utc) + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for when in ("2024-02-29T23:59:59Z", "2026-01-31T00:00:00.5Z", soon):
        ledger = shared.with_name("dated.json")
        ledger.write_bytes(_tamper(shared, _dated(when)))
        assert main(["verify-ledger", str(ledger)]) == 0, capsys.readouterr().out
    from warden.ledger.verify import decided_at_problem

    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert decided_at_problem("2026-03-02T00:00:00Z", now) is None  # the allowance's edge
    assert "in the future" in decided_at_problem("2026-03-02T00:00:01Z", now)


def test_share_never_writes_a_decision_time_the_gate_refuses(tmp_path: Path, monkeypatch, capsys) -> None:
    """A stored decision dated past this machine's clock (a clock ahead where it was measured):
    share names the rule and the time instead of writing a ledger the gate would fail."""
    repo = _team_checkout(tmp_path, monkeypatch, "team-clock")
    store = open_store(load_settings())
    with store.session() as s:
        receipt = s.query(Receipt).one()
        receipt.created_at = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(days=3)
    assert main(["share", "--agent", "backend"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warden: cannot share backend: rule ")
    assert "evidence 1: decided_at '" in err[0] and "lies in the future" in err[0] and "clock" in err[0]
    assert not (repo / "ledgers").exists()
    with store.session() as s:  # the clock was put right
        s.query(Receipt).one().created_at = datetime.now(timezone.utc).replace(tzinfo=None)
    assert main(["share", "--agent", "backend"]) == 0
    assert verify_path(repo / "ledgers" / "backend.json", gated=True) == []


def test_share_writes_the_stored_decision_times(tmp_path: Path, monkeypatch) -> None:
    """What share writes of a receipt's time is the stored second, a real past instant."""
    from warden.ledger.verify import decided_at_problem

    repo = _team_checkout(tmp_path, monkeypatch, "team-times")
    assert main(["share", "--agent", "backend"]) == 0
    doc = json.loads((repo / "ledgers" / "backend.json").read_bytes())
    times = [e["decided_at"] for r in doc["rules"] for e in r["evidence"]]
    assert times and all(decided_at_problem(t) is None for t in times)
    with open_store(load_settings()).session() as s:
        stored = s.query(Receipt).one().created_at
    assert times == [stored.strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert os.environ.get("WARDEN_REPO") is None  # _team_checkout: nothing written into warden's checkout
