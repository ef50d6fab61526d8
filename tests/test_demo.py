"""``warden demo``: the whole loop offline ends with a kept rule, a refuted one, a receipt per
decision and a MEMORY.md an agent would read. (Slow: it plays and benches the sim for real.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from warden.select.memory import GENERATED_HEADER


def test_a_receipt_line_with_an_open_or_unknown_interval_prints_not_crashes() -> None:
    from warden.cli.select import receipt_line
    line = receipt_line({"rule_id": 4, "verdict": "inconclusive", "state": "candidate", "estimate": float("nan"),
                         "interval": [None, float("inf")], "margin": 1234.4, "body": "Grep first."})
    assert "saving —/run [—, ∞] margin 1,234 · Grep first." in line



@pytest.mark.parametrize("kept", [False, True])
def test_the_demo_summary_says_whether_its_home_is_still_there(kept: bool, capsys) -> None:  # type: ignore[no-untyped-def]
    """The summary names paths inside the demo home: it says when that home is already gone."""
    from warden.cli.select import _render_demo
    _render_demo({"home": "/tmp/wd", "kept": kept, "receipts": [], "memory_path": "/tmp/wd/claude/MEMORY.md",
                  "memory": "# Working rules\n", "night": {"collected_runs": 0, "distilled_runs": 0,
                                                           "candidates_added": 0, "agents": []}})
    out = capsys.readouterr().out
    assert ("explore it: WARDEN_HOME=/tmp/wd/warden" in out) is kept
    assert ("the demo home was temporary and is removed" in out) is not kept
def test_demo_runs_the_whole_loop(tmp_path) -> None:
    keep = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "warden", "demo", "--json", "--keep", str(keep)], cwd=REPO,
                          env=dict(os.environ), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    decisions = [d for agent in result["night"]["agents"] for d in agent["decisions"]]
    states = {r["rule_id"]: r["state"] for r in result["receipts"]}
    assert "active" in states.values()
    assert any(r["verdict"] == "refute" for r in result["receipts"])
    assert len(decisions) == len(result["receipts"]) and all(d["receipt_id"] for d in decisions)
    memory = result["memory"]
    assert memory.startswith(GENERATED_HEADER) and len(memory.splitlines()) <= 200
    active = [r["body"] for r in result["receipts"] if r["state"] == "active"]
    assert all(f"- {body}" in memory for body in active)
    assert (keep / "claude" / "agent-memory" / "backend" / "MEMORY.md").read_text() == memory


@pytest.mark.parametrize("keep, message", [("", "empty value for --keep"), ("FILE", "is not a directory")])
def test_demo_keep_that_cannot_be_a_home_is_one_line(keep: str, message: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from warden.cli.app import main

    if keep == "FILE":
        keep = str(tmp_path / "a-file")
        Path(keep).write_text("x")
    assert main(["demo", "--keep", keep]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_sim_sessions_refuses_an_empty_out(capsys) -> None:  # type: ignore[no-untyped-def]
    from warden.cli.app import main

    assert main(["sim", "sessions", "--out", "", "--sessions", "1"]) == 2
    assert "empty value for --out" in capsys.readouterr().err


def test_sim_sessions_are_dated_yesterday_unless_told(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from datetime import datetime, timedelta, timezone

    from warden.cli.app import main

    assert main(["sim", "sessions", "--out", str(tmp_path / "a"), "--sessions", "1", "--json"]) == 0
    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%d")
    first = next((tmp_path / "a").rglob("*.jsonl")).read_text()
    assert f'"timestamp":"{yesterday}T' in first.replace(" ", "")
    # by default, however many sessions, the last of them is over before now (12 sessions from
    # yesterday 09:00 ran into the afternoon of today: work dated in the future)
    assert main(["sim", "sessions", "--out", str(tmp_path / "many"), "--sessions", "20", "--json"]) == 0
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    stamps = [json.loads(line)["timestamp"] for path in (tmp_path / "many").rglob("*.jsonl")
              for line in path.read_text().splitlines() if '"timestamp"' in line]
    assert stamps and max(stamps) < now
    assert main(["sim", "sessions", "--out", str(tmp_path / "b"), "--sessions", "1", "--start", "2026-11-01"]) == 0
    assert '"timestamp":"2026-11-01T' in next((tmp_path / "b").rglob("*.jsonl")).read_text().replace(" ", "")
    assert main(["sim", "sessions", "--out", str(tmp_path / "c"), "--start", "soon"]) == 2
    capsys.readouterr()
    # a start its clock would run off the calendar from, or that no transcript writes as ISO-8601
    for start in ("9999-12-31", "0001-01-01"):
        assert main(["sim", "sessions", "--out", str(tmp_path / "d"), "--sessions", "1", "--start", start]) == 2
        assert "--start" in capsys.readouterr().err


def test_sim_progress_writes_nothing_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    """The progress bar is for a person watching: piped, stderr holds errors only (it held a
    blank line, so every error came out as two lines)."""
    import subprocess
    import sys

    warden = str(Path(sys.executable).parent / "warden")
    proc = subprocess.run([warden, "sim", "sessions", "--out", str(tmp_path / "s"), "--sessions", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""
