"""The claude-code backend against a fake ``claude`` executable on PATH (a small Python script)
that records how it was started, writes a Claude Code–format transcript into its config dir,
optionally fixes the task, and prints a ``--output-format json`` result."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from harness_scripted import CHECK, make_project, make_task
from warden.bench.agents import get_backend
from warden.bench.agents.claude_code_backend import ClaudeCodeBackend, allowed_tools, split_system_prompt
from warden.bench.results import Outcome, RunCaps
from warden.config import load_settings
from warden.errors import UsageError
from warden.select.memory import MemoryRule, render_memory

FAKE_CLAUDE = r'''#!{python}
import json, os, sys, time, uuid
from pathlib import Path

here = Path(__file__).resolve().parent
scenario = json.loads((here / "scenario.json").read_text())
cwd = Path.cwd()
args = sys.argv[1:]
agent = args[args.index("--agent") + 1]
agent_md = cwd / ".claude" / "agents" / (agent + ".md")
memory_md = cwd / ".claude" / "agent-memory" / agent / "MEMORY.md"
settings = cwd / ".claude" / "settings.json"
with open(here / "calls.jsonl", "a") as fh:
    fh.write(json.dumps({{"argv": args, "env": dict(os.environ), "cwd": str(cwd),
                         "agent_md": agent_md.read_text() if agent_md.exists() else None,
                         "memory_md": memory_md.read_text() if memory_md.exists() else None,
                         "settings": json.loads(settings.read_text()) if settings.exists() else None}}) + "\n")
mode = scenario["mode"]
if mode == "sleep_detached":  # a helper outside the CLI's process group keeps its stdout open
    import subprocess
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"], start_new_session=True)
    mode = "sleep_after_work"
if mode == "sleep":  # hangs before any API call
    time.sleep(30)
if mode == "garbage":
    print("Error: something broke before JSON")
    sys.exit(3)
if mode == "binary":  # random bytes on stdout, and a clean exit
    sys.stdout.buffer.write(bytes(range(128, 256)) * 40 + b"\x1b[31mred\x07 \xe2\x80\xae evil")
    sys.exit(0)
session = str(uuid.UUID(int=42))
config = Path(os.environ["CLAUDE_CONFIG_DIR"])
project_dir = config / "projects" / str(cwd).replace("/", "-")
project_dir.mkdir(parents=True, exist_ok=True)
model = args[args.index("--model") + 1]

def line(**fields):
    base = {{"sessionId": session, "cwd": str(cwd), "version": "2.1.114", "userType": "external",
            "timestamp": "2026-11-30T08:00:00.000Z", "uuid": str(uuid.uuid4())}}
    base.update(fields)
    return json.dumps(base) + "\n"

def usage(inp, out, w5, w1, read):
    return {{"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": w5 + w1,
            "cache_read_input_tokens": read,
            "cache_creation": {{"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1}}}}

def assistant(msg_id, req, content, u, stop=None):
    return line(type="assistant", requestId=req, message={{"model": model, "id": msg_id, "type": "message",
                "role": "assistant", "content": content, "stop_reason": stop, "usage": u}})

prompt = args[args.index("-p") + 1]
lines = [line(type="user", message={{"role": "user", "content": prompt}})]
# one response written as two lines; the first carries a streaming placeholder count
lines.append(assistant("msg_A", "req_A", [{{"type": "text", "text": "Looking."}}], usage(3, 1, 1000, 0, 0)))
lines.append(assistant("msg_A", "req_A", [{{"type": "tool_use", "id": "tu1", "name": "Edit",
              "input": {{"file_path": str(cwd / "calc.py"), "old_string": "a - b", "new_string": "a + b"}}}}],
              usage(3, 120, 1000, 0, 0), "tool_use"))
lines.append(line(type="user", message={{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "tu1",
              "content": "ok"}}]}}))
last_usage = {{"no_usage": None, "negative_usage": usage(-5, -1, 0, 0, 0),
              "partly_negative_usage": {{"input_tokens": -5000, "output_tokens": 100, "cache_read_input_tokens": 3}},
              "fractional_usage": usage(2.5, 40, 0, 0, 0), "missing_output_usage": {{"input_tokens": 5000}},
              "huge_usage": usage(10**14, 40, 0, 0, 0)}}.get(mode, usage(5, 40, 200, 50, 1000))
lines.append(assistant("msg_B", "req_B", [{{"type": "text", "text": "Fixed."}}], last_usage, "end_turn"))
if mode == "no_usage":
    lines = [ln for ln in lines if '"msg_A"' not in ln]
if mode == "no_calls":
    lines = lines[:1]
if mode != "no_transcript":
    (project_dir / (session + ".jsonl")).write_text("".join(lines))
if mode == "sleep_after_work":
    time.sleep(30)
if mode in ("fix", "max_turns"):
    calc = cwd / "calc.py"
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
result = {{"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1234, "num_turns": 2,
          "result": "Fixed.", "session_id": session, "total_cost_usd": 99.0,
          "usage": {{"input_tokens": 999999, "output_tokens": 999999}}}}
if mode == "max_turns":
    result.update(subtype="error_max_turns", is_error=True, result="")
if mode == "api_error":
    result.update(is_error=True, result="API Error: 529 {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\"}}}}")
if mode == "flood":  # a flood of output that runs into the result line
    sys.stdout.write("x" * 300_000)
print(json.dumps(result))
sys.exit(1 if result["is_error"] and mode != "max_turns" else 0)
'''

SYSTEM_BODY = "You are the backend agent. Fix bugs carefully."


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "scenario.json").write_text(json.dumps({"mode": "fix"}))
    return bin_dir


def scenario(fake_bin: Path, mode: str) -> None:
    (fake_bin / "scenario.json").write_text(json.dumps({"mode": mode}))


def calls(fake_bin: Path) -> list[dict]:
    path = fake_bin / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def env(fake_bin: Path, tmp_path: Path) -> dict[str, str]:
    return {"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "realhome"),
            "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": "sk-ant-run-key", "GITHUB_TOKEN": "ghp-secret",
            "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli", "CLAUDE_CODE_SSE_PORT": "4242",
            "CLAUDE_SESSION_ID": "outer-session", "CLAUDE_PROJECT_DIR": "/somewhere",
            "CLAUDE_CONFIG_DIR": os.environ["CLAUDE_CONFIG_DIR"], "PYTHONPATH": "/evil"}


def system_prompt() -> str:
    memory = render_memory("backend", [MemoryRule(id=1, body="Grep for a symbol before opening files.",
                                                  saving=1200.0)], ruleset_version=4)
    return SYSTEM_BODY + "\n\n" + memory


def play(backend: ClaudeCodeBackend, workdir: Path, caps: RunCaps = RunCaps()):
    return backend.run(make_task(), workdir, system_prompt(), 11, caps)


def test_a_run_installs_memory_scopes_permissions_and_reads_usage_from_the_transcript(
        fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    backend = ClaudeCodeBackend(load_settings(), env=env, model="claude-sonnet-4-6")
    result = play(backend, project)

    assert result.outcome is Outcome.COMPLETED and result.completed, result.error
    assert (result.backend, result.model, result.seed, result.task_id) == ("claude-code", "claude-sonnet-4-6", 11,
                                                                           "calc-01")
    # Usage comes from the transcript (deduped, largest line per response), not the JSON summary.
    assert [(c.model, c.usage.input_tokens, c.usage.output_tokens, c.usage.cache_write_5m, c.usage.cache_write_1h,
             c.usage.cache_read) for c in result.calls] == [
        ("claude-sonnet-4-6", 3, 120, 1000, 0, 0), ("claude-sonnet-4-6", 5, 40, 200, 50, 1000)]
    assert result.turns == 2

    (call,) = calls(fake_bin)
    argv = call["argv"]
    assert argv[:4] == ["-p", "Fix add() in calc.py so the tests pass.", "--output-format", "json"]
    assert argv[argv.index("--agent") + 1] == "backend"
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-6"
    assert argv[argv.index("--max-turns") + 1] == "40"
    assert not any("dangerously" in a or a == "bypassPermissions" for a in argv)
    allowed = argv[argv.index("--allowedTools") + 1: argv.index("--disallowedTools")]
    assert allowed == allowed_tools(make_task())
    assert "Bash" not in allowed and all(not a.startswith("Bash(") or a.endswith(")") for a in allowed)
    assert f"Bash({CHECK})" in allowed and "Bash(python -m pytest:*)" in allowed
    assert {"WebFetch", "WebSearch", "Task"} <= set(argv[argv.index("--disallowedTools") + 1:])

    # The memory under test is installed as a project-scoped agent memory in the copy.
    assert call["cwd"] == str(project.resolve())
    body, memory = split_system_prompt(system_prompt())
    assert body == SYSTEM_BODY
    assert call["memory_md"] == memory and "- Grep for a symbol before opening files." in memory
    assert call["agent_md"].startswith("---\nname: backend\n") and "memory: project" in call["agent_md"]
    assert call["agent_md"].rstrip().endswith(SYSTEM_BODY) and "Grep for a symbol" not in call["agent_md"]
    assert call["settings"]["permissions"]["allow"] == allowed_tools(make_task())

    # Environment: identity variables stripped, a private config dir, only the credentials it needs.
    child = call["env"]
    for var in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT", "CLAUDE_SESSION_ID",
                "CLAUDE_PROJECT_DIR", "GITHUB_TOKEN", "PYTHONPATH"):
        assert var not in child, var
    assert child["ANTHROPIC_API_KEY"] == "sk-ant-run-key"
    private = Path(child["CLAUDE_CONFIG_DIR"])
    assert private != Path(os.environ["CLAUDE_CONFIG_DIR"]) and project not in private.parents
    assert child["HOME"] != env["HOME"]
    assert not private.exists()  # the private config dir is thrown away after the run
    # Its own TMPDIR (concurrent runs' pytest never share a temp root), also thrown away; no plugins.
    assert Path(child["TMPDIR"]).parent == private.parent and not Path(child["TMPDIR"]).exists()
    assert child["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert not (Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects").exists()


def test_without_a_fix_the_check_makes_it_task_failed(fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    scenario(fake_bin, "nofix")
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.TASK_FAILED and result.error.startswith("success check failed")
    assert result.turns == 2


def test_max_turns_lets_the_check_decide(fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    scenario(fake_bin, "max_turns")
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"), RunCaps(max_turns=2))
    assert result.outcome is Outcome.COMPLETED
    assert calls(fake_bin)[0]["argv"][calls(fake_bin)[0]["argv"].index("--max-turns") + 1] == "2"


@pytest.mark.parametrize("mode,needle", [("api_error", "API Error: 529"), ("garbage", "without a JSON result"),
                                         ("no_transcript", "no transcript")])
def test_cli_failures_are_infra_error(fake_bin: Path, env: dict[str, str], tmp_path: Path, mode: str,
                                      needle: str) -> None:
    scenario(fake_bin, mode)
    project = make_project(tmp_path / "copy")
    result = play(ClaudeCodeBackend(load_settings(), env=env), project)
    assert result.outcome is Outcome.INFRA_ERROR and needle in result.error
    assert not result.completed


def test_binary_output_is_one_short_line_not_the_bytes(fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    scenario(fake_bin, "binary")
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR
    assert result.error == "claude exited 0 and printed no JSON result (5,138 bytes of output, not UTF-8 text)"


def test_the_result_line_after_a_flood_of_output_is_kept(fake_bin: Path, env: dict[str, str], tmp_path: Path,
                                                          monkeypatch) -> None:
    from warden.bench.agents import tools

    monkeypatch.setattr(tools, "MAX_OUTPUT_BYTES", 100_000)  # the flood is three times the cap
    scenario(fake_bin, "flood")
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.TASK_FAILED and result.turns == 2


@pytest.mark.parametrize("mode,outcome,needle", [
    ("sleep_after_work", Outcome.BUDGET_EXCEEDED, "wall-time cap of 1s reached"),
    ("sleep_detached", Outcome.BUDGET_EXCEEDED, "wall-time cap of 1s reached"),
    # no API call answered in all that time: the API or the CLI hung, not the agent
    ("sleep", Outcome.INFRA_ERROR, "reached before any API call was answered"),
])
def test_wall_time_cap_kills_the_cli(fake_bin: Path, env: dict[str, str], tmp_path: Path, mode: str,
                                     outcome: Outcome, needle: str) -> None:
    """Also when a process the CLI started in a session of its own still holds the output pipe:
    the wait for output after the kill is bounded."""
    scenario(fake_bin, mode)
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"),
                  RunCaps(max_wall_s=1.0))
    assert result.outcome is outcome and needle in result.error
    assert result.duration_s < 10


@pytest.mark.parametrize("mode,needle", [("no_calls", "records no API call"),
                                         ("no_usage", "an API call with no token counts"),
                                         ("negative_usage", "missing, negative or non-integer token count"),
                                         ("partly_negative_usage", "1 API usage record(s) with a missing, negative"),
                                         ("fractional_usage", "non-integer token count"),
                                         ("missing_output_usage", "missing, negative or non-integer token count"),
                                         ("huge_usage", "more than any call can use")])
def test_usage_no_call_could_have_is_infra_error_never_spend(fake_bin: Path, env: dict[str, str], tmp_path: Path,
                                                             mode: str, needle: str) -> None:
    scenario(fake_bin, mode)
    result = play(ClaudeCodeBackend(load_settings(), env=env), make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and needle in result.error
    assert result.calls == [] and result.usage.total == 0


def test_token_caps_are_enforced_after_the_run(fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    backend = ClaudeCodeBackend(load_settings(), env=env)
    result = play(backend, make_project(tmp_path / "a"), RunCaps(max_output_tokens=100))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and "output-token cap" in result.error
    result = play(backend, make_project(tmp_path / "b"), RunCaps(max_total_tokens=2000))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and "total-token cap" in result.error


def test_a_symlinked_claude_dir_in_the_copy_is_refused(fake_bin: Path, env: dict[str, str], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = make_project(tmp_path / "copy")
    (project / ".claude").symlink_to(elsewhere, target_is_directory=True)
    result = play(ClaudeCodeBackend(load_settings(), env=env), project)
    assert result.outcome is Outcome.INFRA_ERROR and list(elsewhere.iterdir()) == []
    assert calls(fake_bin) == []


def test_missing_cli_or_credentials_are_usage_errors(fake_bin: Path, env: dict[str, str]) -> None:
    with pytest.raises(UsageError, match="claude.*CLI on PATH"):
        ClaudeCodeBackend(load_settings(), env={**env, "PATH": "/nonexistent"})
    no_auth = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"):
        ClaudeCodeBackend(load_settings(), env=no_auth)
    assert get_backend("claude-code", load_settings(), env=env).name == "claude-code"


def test_split_system_prompt_without_memory() -> None:
    assert split_system_prompt("just the agent") == ("just the agent", "")
