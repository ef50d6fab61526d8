"""A plain `warden collect` runs without typer and rich (warden.cli.entry): it must print, fail and
exit exactly as the typer command does, for the same command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The console script's path (entry.main) or the typer CLI's (app.main), in a process of its own;
# prints the command's output, then on stderr the frameworks it imported.
COMMAND = """
import json, sys
via, args = sys.argv[1], sys.argv[2:]
if via == "entry":
    from warden.cli.entry import main
else:
    from warden.cli.app import main
code = main(args)
sys.stdout.flush()
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"typer", "rich", "click"})), file=sys.stderr)
sys.exit(code)
"""


def _warden(via: str, *args: str, home: Path) -> tuple[int, str, list[str], list[str]]:
    """(exit code, stdout, stderr lines but the last, the frameworks imported)."""
    env = {**os.environ, "WARDEN_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", COMMAND, via, *args], capture_output=True, text=True, env=env,
                          timeout=120)
    *said, frameworks = proc.stderr.splitlines()
    return proc.returncode, proc.stdout, said, json.loads(frameworks)


@pytest.mark.parametrize("as_json", [True, False])
def test_a_plain_collect_prints_what_the_typer_command_prints_without_typer_or_rich(
        tmp_path: Path, corpus: Path, as_json: bool) -> None:
    flags = ["--json"] if as_json else []
    fast = _warden("entry", "collect", *flags, "--jobs", "2", str(corpus / "projects"), home=tmp_path / "a")
    typer_made = _warden("app", "collect", *flags, "--jobs", "2", str(corpus / "projects"), home=tmp_path / "b")
    assert fast[:3] == typer_made[:3]
    assert fast[0] == 0 and "ingested" in fast[1]
    # the human summary is printed by rich after the collect, as the typer command prints it
    assert fast[3] == ([] if as_json else ["rich"])
    assert "typer" in typer_made[3]


@pytest.mark.parametrize("case", ["missing path", "damaged database", "unreadable directory"])
def test_a_failing_plain_collect_says_and_exits_as_the_typer_command(tmp_path: Path, case: str) -> None:
    """The same one line on stderr and the same exit code, through either path; nothing stored changes."""
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "nowhere"
    if case == "damaged database":
        target = tmp_path / "projects"
        target.mkdir()
        (home / "warden.db").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    elif case == "unreadable directory":
        if os.geteuid() == 0:
            pytest.skip("root reads every directory")
        target.mkdir(mode=0)
    before = sorted((p.name, p.read_bytes()) for p in home.iterdir())
    outcomes = [_warden(via, "collect", "--json", str(target), home=home) for via in ("entry", "app")]
    assert outcomes[0][:3] == outcomes[1][:3]
    code, out, said, _ = outcomes[0]
    assert code != 0 and out == "" and len(said) == 1 and said[0].startswith("warden: ")
    assert sorted((p.name, p.read_bytes()) for p in home.iterdir()) == before
