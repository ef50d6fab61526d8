"""The harness tools inside a run's copy: outputs, confinement, the command allowlist."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness_scripted import CHECK, make_project
from warden.bench.agents.tools import (MAX_GREP_MATCHES, Toolbox, cap_text, run_tmpdir, sandbox_env,
                                       split_check_commands)


@pytest.fixture
def box(tmp_path: Path) -> Toolbox:
    return Toolbox(make_project(tmp_path / "copy"), check_command=CHECK, command_timeout_s=30)


def ok(box: Toolbox, name: str, **tool_input) -> str:
    result = box.execute(name, tool_input)
    assert not result.is_error, result.text
    return result.text


def err(box: Toolbox, name: str, **tool_input) -> str:
    result = box.execute(name, tool_input)
    assert result.is_error, result.text
    return result.text


def test_read_file_numbers_lines_and_reads_ranges(box: Toolbox) -> None:
    assert ok(box, "read_file", path="calc.py").splitlines()[:2] == ["     1\tdef add(a, b):",
                                                                      "     2\t    return a - b"]
    assert ok(box, "read_file", path="calc.py", offset=5, limit=1) == \
        "     5\tdef mul(a, b):\n… (6 lines in total; use offset=6 to read on)"
    assert "past the end" in err(box, "read_file", path="calc.py", offset=99)
    assert "positive integer" in err(box, "read_file", path="calc.py", offset=0)
    assert "is a directory" in err(box, "read_file", path="docs")
    assert "no such file" in err(box, "read_file", path="nope.py")
    (box.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert "binary" in err(box, "read_file", path="blob.bin")


def test_list_dir_and_glob(box: Toolbox) -> None:
    (box.root / "__pycache__").mkdir()
    assert ok(box, "list_dir", path=".") == "calc.py\ndocs/\ntest_calc.py"
    assert ok(box, "list_dir", path="docs") == "notes.md"
    assert ok(box, "glob", pattern="**/*.md") == "docs/notes.md"
    assert ok(box, "glob", pattern="*.py") == "calc.py\ntest_calc.py"
    assert ok(box, "glob", pattern="*.rs") == "(no matches)"
    assert "cannot contain '..'" in err(box, "glob", pattern="../*")
    assert "cannot contain '..'" in err(box, "glob", pattern="/etc/*")


def test_grep_outputs_path_line_text_with_filters_and_a_cap(box: Toolbox) -> None:
    assert ok(box, "grep", pattern=r"def \w+") == "calc.py:1:def add(a, b):\ncalc.py:5:def mul(a, b):\n" \
        "test_calc.py:4:def test_add():"
    assert ok(box, "grep", pattern="add", glob="*.md") == "docs/notes.md:1:add() adds two numbers"
    assert ok(box, "grep", pattern="add", path="docs") == "docs/notes.md:1:add() adds two numbers"
    assert ok(box, "grep", pattern="add", path="calc.py") == "calc.py:1:def add(a, b):"
    assert ok(box, "grep", pattern="nothing-like-this") == "(no matches)"
    assert "bad regular expression" in err(box, "grep", pattern="(")
    (box.root / "many.txt").write_text("hit\n" * (MAX_GREP_MATCHES + 50))
    out = ok(box, "grep", pattern="hit", path="many.txt").splitlines()
    assert len(out) == MAX_GREP_MATCHES + 1 and out[-1] == f"… ({MAX_GREP_MATCHES + 50} matches; showing the first 200)"


def test_edit_file_replaces_exactly_one_occurrence(box: Toolbox) -> None:
    assert ok(box, "edit_file", path="calc.py", old_string="a - b", new_string="a + b") == "edited calc.py"
    assert "return a + b" in (box.root / "calc.py").read_text()
    assert "occurs 2 times" in err(box, "edit_file", path="calc.py", old_string="def ", new_string="def  ")
    assert "not found" in err(box, "edit_file", path="calc.py", old_string="zzz", new_string="y")
    assert "identical" in err(box, "edit_file", path="calc.py", old_string="a + b", new_string="a + b")
    assert "empty" in err(box, "edit_file", path="calc.py", old_string="", new_string="x")
    before = (box.root / "calc.py").read_text()
    assert "would be larger than" in err(box, "edit_file", path="calc.py", old_string="a + b",
                                         new_string="x" * 3_000_000)  # write_file's cap holds for edits too
    assert (box.root / "calc.py").read_text() == before


def test_write_file_creates_and_overwrites(box: Toolbox) -> None:
    assert ok(box, "write_file", path="pkg/new.py", content="x = 1\ny = 2\n") == "created pkg/new.py (2 lines)"
    assert ok(box, "write_file", path="pkg/new.py", content="x = 3\n") == "overwrote pkg/new.py (1 lines)"
    assert (box.root / "pkg" / "new.py").read_text() == "x = 3\n"
    assert "is a directory" in err(box, "write_file", path="docs", content="x")


@pytest.mark.parametrize("path", ["../outside/secret.txt", "docs/../../outside/secret.txt", "/etc/passwd"])
def test_paths_outside_the_copy_are_refused(box: Toolbox, outside: Path, path: str) -> None:
    for name, extra in [("read_file", {}), ("list_dir", {}), ("grep", {"pattern": "x"}),
                        ("write_file", {"content": "pwned"}), ("edit_file", {"old_string": "a", "new_string": "b"})]:
        assert "outside the project" in err(box, name, path=path, **extra)
    assert (outside / "secret.txt").read_text() == "TOP SECRET 12345\n"


def test_absolute_paths_inside_the_copy_are_fine(box: Toolbox) -> None:
    assert ok(box, "read_file", path=str(box.root / "calc.py"), limit=1).startswith("     1\tdef add")


def test_symlink_escapes_are_refused(box: Toolbox, outside: Path) -> None:
    (box.root / "link.txt").symlink_to(outside / "secret.txt")
    (box.root / "linkdir").symlink_to(outside, target_is_directory=True)
    assert "outside the project" in err(box, "read_file", path="link.txt")
    assert "outside the project" in err(box, "read_file", path="linkdir/secret.txt")
    assert "outside the project" in err(box, "write_file", path="linkdir/new.txt", content="x")
    assert "outside the project" in err(box, "write_file", path="link.txt", content="x")
    assert "outside the project" in err(box, "list_dir", path="linkdir")
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "TOP SECRET 12345\n"
    # Searching the whole copy never surfaces what a symlink points at.
    assert "TOP SECRET" not in ok(box, "grep", pattern="TOP SECRET")
    assert "secret" not in ok(box, "glob", pattern="**/*.txt")
    # A symlink that stays inside the copy is fine.
    (box.root / "alias.py").symlink_to(box.root / "calc.py")
    assert ok(box, "read_file", path="alias.py", limit=1).startswith("     1\tdef add")


def test_run_command_allowlist(box: Toolbox) -> None:
    assert ok(box, "run_command", command=CHECK).startswith("exit code 1")  # the check, verbatim
    listing = ok(box, "run_command", command="ls docs")
    assert listing == "exit code 0\nnotes.md"
    assert ok(box, "run_command", command="cat docs/notes.md") == "exit code 0\nadd() adds two numbers"
    assert ok(box, "run_command", command="grep -n add calc.py") == "exit code 0\n1:def add(a, b):"
    for refused in ["rm -rf .", "python -c 'print(1)'", "curl http://example.com", "bash -c ls",
                    "find . -delete", "python script.py"]:
        assert "not allowed" in err(box, "run_command", command=refused), refused
    assert "shell operators" in err(box, "run_command", command="ls | wc")
    assert "shell operators" in err(box, "run_command", command="cat calc.py > /tmp/x")
    assert "outside the project" in err(box, "run_command", command="cat /etc/passwd")
    assert "outside the project" in err(box, "run_command", command="ls ..")
    assert "cannot parse" in err(box, "run_command", command="cat 'unclosed")
    assert ok(box, "run_command", command="head -n 1 calc.py") == "exit code 0\ndef add(a, b):"
    for sneaky in ["wc --files0-from=/etc/passwd", "grep -f /etc/passwd calc.py", "cat --help"]:
        assert "only short flags" in err(box, "run_command", command=sneaky), sneaky


def test_pytest_commands_run_with_warden_interpreter(box: Toolbox) -> None:
    assert box.allowed_argv("python -m pytest -q test_calc.py") == [sys.executable, "-m", "pytest", "-q",
                                                                     "test_calc.py"]
    assert box.allowed_argv("pytest -x") == [sys.executable, "-m", "pytest", "-x"]
    out = ok(box, "run_command", command="pytest -q test_calc.py")
    assert out.startswith("exit code 1") and "1 failed" in out


def test_command_timeout_kills_the_process(tmp_path: Path) -> None:
    slow = "python -c \"import time; time.sleep(20)\""
    box = Toolbox(make_project(tmp_path / "copy"), check_command=slow, command_timeout_s=0.3)
    assert "timed out" in err(box, "run_command", command=slow)


def test_sandbox_env_is_an_allowlist_without_secrets() -> None:
    source = {"PATH": "/usr/bin", "HOME": "/home/u", "ANTHROPIC_API_KEY": "sk", "GITHUB_TOKEN": "t",
              "AWS_SECRET_ACCESS_KEY": "s", "PYTHONPATH": "/evil", "LANG": "C.UTF-8", "CLAUDECODE": "1"}
    env = sandbox_env(source)
    assert set(env) >= {"PATH", "HOME", "LANG"}
    assert not {"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PYTHONPATH", "CLAUDECODE"} & set(env)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_a_runs_commands_get_its_temp_dir_as_home_and_cloud_keys_only_for_their_cloud(tmp_path: Path) -> None:
    """A command the agent chooses sees the run's temp dir as HOME (not the user's ~/.aws or
    ~/.warden); Claude Code gets AWS or Google credentials only when told to use that cloud."""
    from warden.bench.agents.claude_code_backend import child_env

    source = {"PATH": "/usr/bin", "HOME": "/home/u", "ANTHROPIC_API_KEY": "sk",
              "AWS_SECRET_ACCESS_KEY": "s", "AWS_PROFILE": "p", "GOOGLE_APPLICATION_CREDENTIALS": "/g.json"}
    assert sandbox_env(source, tmpdir=tmp_path)["HOME"] == str(tmp_path)
    plain = child_env(source, tmp_path / "cfg", tmp_path / "home", tmp_path)
    assert plain["ANTHROPIC_API_KEY"] == "sk" and not {"AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                                                       "GOOGLE_APPLICATION_CREDENTIALS"} & set(plain)
    bedrock = child_env({**source, "CLAUDE_CODE_USE_BEDROCK": "1"}, tmp_path / "cfg", tmp_path / "home", tmp_path)
    assert bedrock["AWS_SECRET_ACCESS_KEY"] == "s" and "GOOGLE_APPLICATION_CREDENTIALS" not in bedrock


def test_split_check_commands_respects_quotes() -> None:
    assert split_check_commands('python -c "import a; b" && pytest -q t.py || ls; wc') == [
        'python -c "import a; b"', "pytest -q t.py", "ls", "wc"]


def test_cap_text_keeps_head_and_tail() -> None:
    text = "a" * 100 + "b" * 100
    capped = cap_text(text, 60)
    assert capped.startswith("a" * 40) and capped.endswith("b" * 20) and "characters cut" in capped
    assert cap_text("short", 60) == "short"


def test_bad_tool_inputs(box: Toolbox) -> None:
    assert "must be a JSON object" in box.execute("read_file", ["calc.py"]).text
    assert "bad arguments" in err(box, "read_file")
    assert "unknown tool" in err(box, "__init__")
    (box.root / "latin1.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    assert "failed" in err(box, "edit_file", path="latin1.py", old_string="caf", new_string="x")


def test_sandbox_env_disables_plugin_autoload_and_takes_a_run_tmpdir(tmp_path: Path) -> None:
    source = {"PATH": "/usr/bin", "TMPDIR": "/tmp", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "", "PYTEST_ADDOPTS": "-p x"}
    assert sandbox_env(source)["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1" and "PYTEST_ADDOPTS" not in sandbox_env(source)
    assert sandbox_env(source)["TMPDIR"] == "/tmp"  # no run: the inherited one
    assert sandbox_env(source, tmpdir=tmp_path)["TMPDIR"] == str(tmp_path)
    with run_tmpdir() as first, run_tmpdir() as second:
        assert first != second and Path(first).is_dir() and Path(second).is_dir()
    assert not Path(first).exists() and not Path(second).exists()


def test_grep_and_pytest_options_that_reach_outside_the_copy_are_refused(box: Toolbox, outside: Path) -> None:
    secret = outside / "secret.txt"
    for sneaky in [f"grep -eTOP {secret}", f"grep -neTOP {secret}", "grep -R TOP .", f"grep -e TOP {secret}"]:
        assert "not -e, -f, -R or -S" in err(box, "run_command", command=sneaky), sneaky
    # ls would follow a symlink in the copy out of it (-L; -H for an operand)
    (box.root / "way_out").symlink_to(outside, target_is_directory=True)
    for sneaky in ["ls -L way_out", "ls -RL", "ls -lH .", "ls --dereference", "ls -R -L ."]:
        assert "for ls not -L or -H" in err(box, "run_command", command=sneaky), sneaky
    assert ok(box, "run_command", command="ls -lR").startswith("exit code 0")
    for option in [f"--basetemp={outside}", f"--junitxml={outside}/j.xml", "-o cache_dir=/tmp/x", "-c /dev/null",
                   f"--rootdir={outside}", "-p evil_plugin"]:
        assert "is not allowed" in err(box, "run_command", command=f"pytest -q {option}"), option
    assert "outside the project" in err(box, "run_command", command=f"pytest -q {secret}")
    # @FILE: pytest would read options from a file the agent wrote (a decoy makes the path valid)
    ok(box, "write_file", path="@args.txt", content="decoy")
    ok(box, "write_file", path="args.txt", content=f"--junitxml={outside}/j.xml\n--co\n")
    for command in ["python -m pytest @args.txt", "pytest -q -k @args.txt"]:
        assert "@FILE would read options" in err(box, "run_command", command=command), command
    assert not (outside / "j.xml").exists()
    for fine in ["pytest -q -x test_calc.py", "pytest -q -k add", "python -m pytest --maxfail=1 -p no:cacheprovider",
                 "pytest -rA --tb=short test_calc.py::test_add"]:
        assert ok(box, "run_command", command=fine).startswith("exit code"), fine


def test_a_backtracking_grep_pattern_gives_up_within_its_limit(box: Toolbox, monkeypatch) -> None:
    import time

    from warden.bench.agents import tools

    monkeypatch.setattr(tools, "GREP_TIMEOUT_S", 1.0)
    ok(box, "write_file", path="redos.txt", content="a" * 40 + "!\n")
    started = time.monotonic()
    assert "gave up" in err(box, "grep", pattern="(a+)+$", path="redos.txt")
    assert time.monotonic() - started < 5


def test_a_detached_child_cannot_hold_a_command_past_its_timeout(tmp_path: Path) -> None:
    import time

    holder = ("python -c \"import subprocess, sys, time; subprocess.Popen(['sleep', '30'], start_new_session=True, "
              "stdout=sys.stdout); time.sleep(30)\"")
    box = Toolbox(make_project(tmp_path / "copy"), check_command=holder, command_timeout_s=0.5)
    started = time.monotonic()
    assert "timed out" in err(box, "run_command", command=holder)
    assert time.monotonic() - started < 5


def test_a_command_that_exits_is_done_though_a_detached_child_holds_its_output(tmp_path: Path) -> None:
    import time

    from warden.bench.agents.tools import run_process

    # the holder outlives the 2 s drain, and not by much: it is no process of ours to kill
    leaves_a_holder = ("python -c \"import subprocess, sys; subprocess.Popen(['sleep', '8'], start_new_session=True, "
                       "stdout=sys.stdout); print('answer'); sys.exit(3)\"")
    started = time.monotonic()
    result = run_process(leaves_a_holder, tmp_path, timeout_s=20, env=sandbox_env(), shell=True, stderr_apart=True)
    assert (result.exit_code, result.timed_out, result.output.strip()) == (3, False, "answer")
    assert time.monotonic() - started < 6  # its exit, then at most the 2 s drain: not the 20 s timeout


def test_a_command_that_closes_its_output_but_keeps_running_is_timed_out(tmp_path: Path) -> None:
    from warden.bench.agents.tools import run_process

    closes_early = "python -c \"import os, time; os.close(1); os.close(2); time.sleep(30)\""
    result = run_process(closes_early, tmp_path, timeout_s=0.5, env=sandbox_env(), shell=True)
    assert result.timed_out and result.exit_code is None


def test_a_flood_of_output_keeps_its_head_and_tail_within_the_cap(tmp_path: Path, monkeypatch) -> None:
    from warden.bench.agents import tools

    monkeypatch.setattr(tools, "MAX_OUTPUT_BYTES", 1600)
    flood = "python -c \"import sys; sys.stdout.write('h' * 100 + 'x' * 5_000_000 + 'END'); sys.stdout.flush()\""
    result = tools.run_process(flood, tmp_path, timeout_s=20, env=sandbox_env(), shell=True, stderr_apart=True)
    assert result.exit_code == 0 and result.output_bytes == 5_000_103  # the writer was never blocked
    head, cut, tail = result.output.split("\n")
    assert head == "h" * 100 and tail == "x" * 1497 + "END"  # the tail: where a program's answer is
    assert cut == "… [4998503 bytes cut] …"


def test_list_dir_output_is_capped(box: Toolbox) -> None:
    from warden.bench.agents.tools import MAX_GLOB_RESULTS

    crowd = box.root / "crowd"
    crowd.mkdir()
    for i in range(MAX_GLOB_RESULTS + 50):
        (crowd / f"f{i:04d}.txt").write_text("x")
    lines = ok(box, "list_dir", path="crowd").splitlines()
    assert len(lines) == MAX_GLOB_RESULTS + 1 and lines[-1].startswith(f"… ({MAX_GLOB_RESULTS + 50} entries")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_process_left_in_a_session_of_its_own_is_killed_when_the_command_ends(tmp_path: Path) -> None:
    from warden.bench.agents.tools import run_process

    escape = ("python -c \"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(60)'], start_new_session=True, stdout=subprocess.DEVNULL, "
              "stderr=subprocess.DEVNULL); print(p.pid)\"")
    result = run_process(escape, tmp_path, timeout_s=20, env=sandbox_env(), shell=True)
    pid = int(result.output.split()[-1])
    stat_file = Path(f"/proc/{pid}/stat")

    def dead() -> bool:  # gone, or a zombie waiting for its new parent to reap it
        try:
            return stat_file.read_text().rsplit(")", 1)[1].split()[0] in "ZX"
        except OSError:
            return True

    deadline = time.monotonic() + 5  # SIGKILL was sent; dying takes a moment
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dead()


def test_a_glob_of_many_recursive_wildcards_over_a_deep_tree_ends_at_once(box: Toolbox) -> None:
    """'**/**/…' is '**', which pathlib walked once per wildcard in a row: over a tree 40 levels
    deep the call ran for minutes inside warden's process, where no wall cap reaches."""
    deep = box.root.joinpath(*[f"d{i}" for i in range(40)])
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("x = 1\n")
    started = time.monotonic()
    found = ok(box, "glob", pattern="/".join(["**"] * 7 + ["x.py"]))
    assert found.endswith("/d39/x.py") and time.monotonic() - started < 5
    assert "at most 3 '**'" in err(box, "glob", pattern="**/a/**/b/**/c/**/x.py")
