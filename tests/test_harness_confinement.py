"""Confinement of the harness's commands to the run's copy: every file operand of a read-only
helper is checked (grep's pattern told apart by position, not by what it looks like), and pytest
— run by the agent or by a success check — never loads configuration or conftest.py from a
folder above the copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_scripted import PYTEST_CHECK, make_project, make_task
from warden.bench.agents.harness import run_success_check
from warden.bench.agents.tools import Toolbox, anchor_pytest, sandbox_env


@pytest.fixture
def box(tmp_path: Path, outside: Path) -> Toolbox:
    root = make_project(tmp_path / "copy")
    (root / "5").symlink_to(outside / "secret.txt")  # a file operand that looks like a number
    return Toolbox(root, command_timeout_s=30, env=sandbox_env(tmpdir=tmp_path))


def run(box: Toolbox, command: str) -> tuple[bool, str]:
    result = box.execute("run_command", {"command": command})
    return result.is_error, result.text


@pytest.mark.parametrize("command", [
    "grep -v 999999 {secret}", "grep -rv 12345 {outside}", "grep -r 1 ..", "grep -c 7 {secret}",
    "grep -n -A 2 1 {secret}", "grep -m1 1 calc.py {secret}", "grep TOP 5", "cat 5", "cat calc.py 5",
    "head -n 1 5", "head -5 {secret}", "head -5c {secret}", "tail -5c {secret}", "tail -cf {secret}",
    "tail -c 3 5", "wc -l 5", "ls 5", "ls -l docs {outside}",
])
def test_a_helper_never_opens_a_file_outside_the_copy(box: Toolbox, outside: Path, command: str) -> None:
    is_error, text = run(box, command.format(secret=outside / "secret.txt", outside=outside))
    assert is_error and "outside the project" in text, text
    assert "SECRET" not in text


@pytest.mark.parametrize("command, why", [
    ("head calc.py -n {secret}", "before the files"),  # BSD head would open -n and the secret
    ("grep TOP -A 1 {secret}", "before the pattern"),
    ("ls -w {outside}", "GNU and BSD ls disagree"), ("ls -lI x {outside}", "GNU and BSD ls disagree"),
    ("grep -rS TOP .", "not -e, -f, -R or -S"),  # BSD grep -S follows symlinks
    ("tail -b {secret}", "GNU and BSD tail disagree"),  # GNU: the last 10 blocks of the secret
])
def test_options_whose_operands_are_ambiguous_are_refused(box: Toolbox, outside: Path, command: str,
                                                          why: str) -> None:
    is_error, text = run(box, command.format(secret=outside / "secret.txt", outside=outside))
    assert is_error and why in text, text


@pytest.mark.parametrize("command, output", [
    ("grep -c 5 test_calc.py", "1"), ("grep -n 3 test_calc.py", "5:    assert add(2, 3) == 5"),
    ("grep -A 1 -m 1 def calc.py", "def add(a, b):\n    return a - b"), ("head -n 1 calc.py", "def add(a, b):"),
    ("head -n1 calc.py", "def add(a, b):"), ("tail -n +6 calc.py", "    return a * b"),
    ("head -1 calc.py", "def add(a, b):"), ("tail -2c docs/notes.md", "s"),
    ("wc -l docs/notes.md", "1 docs/notes.md"), ("ls -1 docs", "notes.md"),
])
def test_helpers_with_numeric_patterns_and_option_values_still_run(box: Toolbox, command: str,
                                                                   output: str) -> None:
    is_error, text = run(box, command)
    assert not is_error and text == f"exit code 0\n{output}", text


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A pytest.ini (``addopts = -v``) and a conftest.py writing a marker, in a folder above the
    copy — as /tmp or a pass directory could hold them. Returns the marker's path."""
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -v\n")
    (tmp_path / "conftest.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('MARKER').write_text('ran')\n")
    return tmp_path / "MARKER"


def _copy(tmp_path: Path, pyproject: bool) -> Path:
    root = make_project(tmp_path / "pass-1" / "job 1" / "copy")  # a space: PYTEST_ADDOPTS is quoted
    if pyproject:  # like the fixture's: no [tool.pytest.ini_options], so pytest looks further up
        (root / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0"\n')
    return root


@pytest.mark.parametrize("pyproject", [True, False], ids=["pyproject", "no-config"])
def test_pytest_in_a_copy_ignores_config_and_conftest_above_it(tmp_path: Path, planted: Path,
                                                                pyproject: bool) -> None:
    root = _copy(tmp_path, pyproject)
    env = sandbox_env(tmpdir=tmp_path)
    box = Toolbox(root, check_command=PYTEST_CHECK, command_timeout_s=60, env=env)
    outputs = [box.execute("run_command", {"command": "pytest -q test_calc.py"}).text,
               box.execute("run_command", {"command": PYTEST_CHECK}).text,  # the check, through sh
               run_success_check(make_task(PYTEST_CHECK), root, env=env).output,
               # a check's in-process pytest.main reads PYTEST_ADDOPTS too
               run_success_check(make_task("python -c \"import pytest, sys; "
                                           "sys.exit(pytest.main(['-q', 'test_calc.py']))\""), root, env=env).output]
    for output in outputs:
        assert "1 failed" in output, output
        assert "test session starts" not in output, output  # the -v of the pytest.ini above
    assert not planted.exists(), "a conftest.py above the copy ran"


def test_the_copys_own_conftest_and_config_still_apply(tmp_path: Path, planted: Path) -> None:
    root = _copy(tmp_path, pyproject=False)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -v\n")
    (root / "conftest.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('OWN').write_text('ran')\n")
    output = run_success_check(make_task(PYTEST_CHECK), root, env=sandbox_env(tmpdir=tmp_path)).output
    assert "test session starts" in output and "1 failed" in output, output  # its -v against -q
    assert (root / "OWN").exists() and not planted.exists()
    addopts = anchor_pytest({"PATH": "/bin"}, root)
    assert addopts["PATH"] == "/bin" and f"--rootdir={root}" in addopts["PYTEST_ADDOPTS"]
