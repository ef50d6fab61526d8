"""``warden memory show|compile``: drift warnings, JSON, unknown agents."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_memory_compile_refuses_an_unknown_agent(warden_home: Path, capsys) -> None:
    assert main(["memory", "compile", "--agent", "backedn"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "warden: unknown agent 'backedn': no golden suite and no rules"
    assert not memory_path(load_settings(), "backedn").parent.exists()
