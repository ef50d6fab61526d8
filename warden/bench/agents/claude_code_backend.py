"""The ``claude-code`` backend: the real ``claude`` CLI, headless, in the run's copy.

One run = ``claude -p <prompt> --output-format json --agent <agent> --model <model>
--max-turns N --allowedTools … --disallowedTools …`` with the copy as working directory:

* **Memory under test as a project-scoped agent memory.** The run's system prompt (agent.md
  body + the compiled MEMORY.md) is split at MEMORY.md's generated header: the body becomes
  the agent definition ``.claude/agents/<agent>.md`` (``memory: project``) and the memory
  ``.claude/agent-memory/<agent>/MEMORY.md`` — exactly where Claude Code reads it in production,
  so the rule's rent is what it costs there.
* **Scoped permissions, never bypassed.** File tools, and Bash only for pytest and the task's
  own check commands (``--allowedTools`` plus the same rules in the copy's
  ``.claude/settings.json``); web, subagent and notebook tools denied. In ``-p`` mode anything
  not allowed is refused, never prompted. ``--dangerously-skip-permissions`` is never passed.
* **A private, throwaway ``CLAUDE_CONFIG_DIR``** (and ``HOME`` and ``TMPDIR``) per run, so the
  run neither reads the user's settings, memory or sessions nor writes into them, and concurrent
  runs' pytest processes never share a temp root; it is deleted afterwards.
* **Environment allowlist.** The child gets :func:`sandbox_env` plus the variables it needs to
  authenticate (:data:`AUTH_VARS`). Session-identity variables of an enclosing Claude Code
  session (:data:`IDENTITY_VARS` — ``CLAUDECODE``, ``CLAUDE_CODE_ENTRYPOINT``, …) never pass, so
  the run is a fresh top-level session. (Like any Claude Code session, the agent's own allowed
  Bash commands inherit its credentials; the success check, run by warden, never does.)
* **Usage from the transcript** the run wrote under the private config dir, parsed by the
  collector's parser (``warden/ingest/parser.py``) with the same dedupe as ``warden collect``:
  one :class:`CallUsage` per deduplicated API response.

Outcomes: wall-time cap (process killed) → ``budget_exceeded``, unless no API call had been
answered by then (``infra_error``: the API or the CLI hung, not the agent); ``error_max_turns`` →
the check decides; an error result (API errors, auth, quota), a crash, unparseable output, a
missing transcript, a transcript with no API call or with a call whose usage no call could have
(no tokens at all; a missing, negative or non-integer count; a count over 10M) → ``infra_error``,
never spend; token caps are checked after the run (the CLI has none) →
``budget_exceeded``; otherwise the task's success check decides ``completed``/``task_failed``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from warden.api_client import MAX_CALL_TOKENS
from warden.bench.agents.anthropic_backend import resolve_model
from warden.bench.agents.harness import check_failure, run_success_check
from warden.bench.agents.tools import (CommandResult, anchor_pytest, run_process, sandbox_env,
                                      split_check_commands)
from warden.bench.results import CallUsage, Outcome, RunCaps, RunResult
from warden.bench.tasks import GoldenTask
from warden.config import Settings
from warden.errors import UsageError
from warden.ingest.parser import parse_bytes
from warden.ingest.pricing import FREE_MODELS, Usage
from warden.sanitize import one_line
from warden.select.memory import GENERATED_HEADER

# What the child may inherit beyond the sandbox allowlist: credentials and endpoints only, and a
# cloud's credentials only when Claude Code is told to use that cloud (they reach every command
# the agent runs, the tests it writes included).
AUTH_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN",
             "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")
CLOUD_VARS = {"CLAUDE_CODE_USE_BEDROCK": ("AWS_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                          "AWS_SESSION_TOKEN"),
              "CLAUDE_CODE_USE_VERTEX": ("ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION",
                                         "GOOGLE_APPLICATION_CREDENTIALS")}
_AUTH_PRESENT = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                 "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
# Set by an enclosing Claude Code session; inherited, they would make the run a nested session.
IDENTITY_VARS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT", "CLAUDE_SESSION_ID",
                 "CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE", "CLAUDE_AGENT_ID",
                 "CLAUDE_CONFIG_DIR")
# Run-scoped settings: no auto-update, telemetry or other side traffic during a measurement.
_RUN_ENV = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}

FILE_TOOLS = ("Read", "Glob", "Grep", "LS", "Edit", "MultiEdit", "Write")
TEST_COMMAND_RULES = ("Bash(python -m pytest:*)", "Bash(python3 -m pytest:*)", "Bash(pytest:*)")
DENIED_TOOLS = ("WebFetch", "WebSearch", "Task", "Agent", "NotebookEdit")
_AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_STDERR_CHARS = 400
_RESULT_STARTS = 32  # places a line is tried as ending in the result object


def allowed_tools(task: GoldenTask) -> list[str]:
    """The run's permission allowlist: file tools, pytest, and the task's own check commands."""
    rules = [*FILE_TOOLS, *TEST_COMMAND_RULES]
    checks = split_check_commands(task.success_check)
    if len(checks) > 1:
        checks.append(task.success_check.strip())
    for command in checks:
        if "\n" not in command:  # a rule is one line; its content runs to the last ')'
            rules.append(f"Bash({command})")
    return list(dict.fromkeys(rules))


def split_system_prompt(system_prompt: str) -> tuple[str, str]:
    """(agent definition body, MEMORY.md) — split at MEMORY.md's generated header."""
    at = system_prompt.find(GENERATED_HEADER)
    if at < 0:
        return system_prompt.strip(), ""
    return system_prompt[:at].strip(), system_prompt[at:]


def child_env(source: dict[str, str], config_dir: Path, home: Path,
              tmpdir: Path | None = None) -> dict[str, str]:
    env = sandbox_env(source, tmpdir=tmpdir)
    wanted = [*AUTH_VARS, *(name for switch, names in CLOUD_VARS.items() if source.get(switch) for name in names)]
    env.update({k: source[k] for k in wanted if source.get(k) and k not in IDENTITY_VARS})
    env.update(_RUN_ENV)
    env["CLAUDE_CONFIG_DIR"] = str(config_dir)
    env["HOME"] = str(home)
    return env


class ClaudeCodeBackend:
    """Plays golden tasks with the ``claude`` CLI. One instance per worker thread."""

    name = "claude-code"

    def __init__(self, settings: Settings, *, model: str | None = None, agent_model: str | None = None,
                 env: dict[str, str] | None = None, claude_bin: str = "claude",
                 keep_config_dir: bool = False) -> None:
        self.source_env = dict(os.environ if env is None else env)
        found = shutil.which(claude_bin, path=self.source_env.get("PATH"))
        if found is None:
            raise UsageError(f"the claude-code backend needs the `{claude_bin}` CLI on PATH "
                             "(npm install -g @anthropic-ai/claude-code)")
        if not any(self.source_env.get(k) for k in _AUTH_PRESENT):
            raise UsageError("the claude-code backend needs ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN "
                             "(each run uses a private config dir, so an interactive login is not seen)")
        self.claude = found
        self.model = resolve_model(settings, model, agent_model)
        self.keep_config_dir = keep_config_dir

    def command(self, task: GoldenTask, agent: str, caps: RunCaps) -> list[str]:
        # The prompt comes right after -p: the variadic tool lists at the end cannot swallow it.
        return [self.claude, "-p", task.prompt, "--output-format", "json", "--model", self.model,
                "--agent", agent, "--max-turns", str(caps.max_turns), "--permission-mode", "default",
                "--strict-mcp-config",  # no MCP servers: the run sees only the scoped tools
                "--allowedTools", *allowed_tools(task), "--disallowedTools", *DENIED_TOOLS]

    def run(self, task: GoldenTask, workdir: Path, system_prompt: str, seed: int,
            caps: RunCaps) -> RunResult:
        started = time.monotonic()
        workdir = Path(workdir)

        def result(outcome: Outcome, error: str = "", calls: list[CallUsage] | None = None,
                   completed: bool = False) -> RunResult:
            calls = calls or []
            return RunResult(task_id=task.id, backend=self.name, model=self.model, seed=seed,
                             outcome=outcome, completed=completed, turns=len(calls),
                             duration_s=time.monotonic() - started, calls=calls, error=error)

        agent = task.agent
        if not _AGENT_NAME.match(agent):
            return result(Outcome.INFRA_ERROR, f"agent name {agent!r} cannot name a Claude Code agent")
        if task.prompt.lstrip().startswith("-"):
            return result(Outcome.INFRA_ERROR, "task prompt starts with '-' and would be read as a flag")
        if not workdir.is_dir():
            return result(Outcome.INFRA_ERROR, f"run copy {workdir} does not exist")
        private = Path(tempfile.mkdtemp(prefix="warden-claude-"))
        try:
            config_dir, home, tmp = private / "config", private / "home", private / "tmp"
            for made in (config_dir, home, tmp):
                made.mkdir()
            self.install(task, workdir, agent, system_prompt)
            exit_ = run_process(self.command(task, agent, caps), workdir, timeout_s=caps.max_wall_s,
                                # the CLI's own Bash pytest too (as of its start: see anchor_pytest)
                                env=anchor_pytest(child_env(self.source_env, config_dir, home, tmp), workdir),
                                stderr_apart=True)
            calls, transcript_error = read_usage(config_dir, _session_id(exit_.output))
            if exit_.timed_out:
                if not calls:  # no answer in all that time: the API (or the CLI) hung, not the agent
                    return result(Outcome.INFRA_ERROR,
                                  f"wall-time cap of {caps.max_wall_s:g}s reached before any API call was answered")
                return result(Outcome.BUDGET_EXCEEDED, f"wall-time cap of {caps.max_wall_s:g}s reached",
                              calls)
            payload = _result_json(exit_.output)
            if payload is None:
                return result(Outcome.INFRA_ERROR, _no_result(exit_), calls)
            subtype = str(payload.get("subtype", ""))
            if payload.get("is_error") and subtype != "error_max_turns":
                return result(Outcome.INFRA_ERROR,
                              _one_line(f"claude reported an error ({subtype or 'error'}): "
                                        f"{payload.get('result', '')}"), calls)
            if transcript_error:  # never spend: the calls it has are not to be trusted
                return result(Outcome.INFRA_ERROR, transcript_error)
            unusable = unusable_usage(calls)
            if unusable:  # priced, it would make the run nearly free or price later plans out of reach
                return result(Outcome.INFRA_ERROR, unusable)
            usage = sum((c.usage for c in calls), Usage())
            if usage.output_tokens > caps.max_output_tokens:
                return result(Outcome.BUDGET_EXCEEDED,
                              f"output-token cap of {caps.max_output_tokens} exceeded", calls)
            if usage.total > caps.max_total_tokens:
                return result(Outcome.BUDGET_EXCEEDED,
                              f"total-token cap of {caps.max_total_tokens} exceeded", calls)
            try:
                check = run_success_check(task, workdir, env=sandbox_env(self.source_env, tmpdir=tmp))
            except OSError as exc:
                return result(Outcome.INFRA_ERROR, f"success check could not start: {exc}", calls)
            if check.exit_code == 0:
                return result(Outcome.COMPLETED, "", calls, completed=True)
            return result(Outcome.TASK_FAILED, check_failure(task, check), calls)
        except OSError as exc:
            return result(Outcome.INFRA_ERROR, _one_line(f"claude-code run failed: {exc}"))
        finally:
            if not self.keep_config_dir:
                shutil.rmtree(private, ignore_errors=True)

    @staticmethod
    def install(task: GoldenTask, workdir: Path, agent: str, system_prompt: str) -> None:
        """Agent definition, project-scoped agent memory and permission settings in the copy."""
        body, memory = split_system_prompt(system_prompt)
        claude_dir = workdir / ".claude"
        if claude_dir.is_symlink():
            raise OSError(f"{claude_dir} is a symlink; refusing to install the agent through it")
        (claude_dir / "agents").mkdir(parents=True, exist_ok=True)
        memory_dir = claude_dir / "agent-memory" / agent
        memory_dir.mkdir(parents=True, exist_ok=True)
        definition = (f"---\nname: {agent}\n"
                      f"description: warden bench agent {agent} (golden-task replay)\n"
                      f"tools: {', '.join(FILE_TOOLS)}, Bash\nmemory: project\n---\n\n{body}\n")
        _write_inside(workdir, claude_dir / "agents" / f"{agent}.md", definition)
        _write_inside(workdir, memory_dir / "MEMORY.md", memory)
        settings = {"permissions": {"allow": allowed_tools(task), "deny": list(DENIED_TOOLS),
                                    "defaultMode": "default"}}
        _write_inside(workdir, claude_dir / "settings.json", json.dumps(settings, indent=2) + "\n")

def read_usage(config_dir: Path, session_id: str | None) -> tuple[list[CallUsage], str]:
    """Per-call usage of the run from its transcripts under ``config_dir/projects``.

    The main transcript ``<session>.jsonl`` and its subagents' ``<session>/subagents/*.jsonl``
    are parsed by the collector's parser; responses are deduplicated across files by message
    key, and a subagent's responses seen only through ``progress`` lines count once.
    Returns ``(calls, error)`` — ``error`` is non-empty when no transcript was found, or when one
    has a usage count the parser had to read as 0 (missing, negative, non-integral, absurd):
    priced, such a run would look nearly free.
    """
    projects = config_dir / "projects"
    if session_id and re.fullmatch(r"[A-Za-z0-9_-]{1,128}", session_id):
        files = sorted(projects.glob(f"*/{session_id}.jsonl"))
        files += sorted(projects.glob(f"*/{session_id}/subagents/*.jsonl"))
    else:
        files = sorted(projects.glob("**/*.jsonl"))
    if not files:
        return [], f"no transcript found under the run's private config dir ({projects})"
    calls: list[CallUsage] = []
    seen: set[str] = set()
    embedded: list[Any] = []
    zeroed = 0
    for path in files:
        parsed = parse_bytes(path.read_bytes(), source_path=str(path))
        zeroed += parsed.stats.zeroed_usage
        for turn in parsed.turns:
            if turn.message_key in seen or turn.model in FREE_MODELS:
                continue
            seen.add(turn.message_key)
            calls.append(CallUsage(model=turn.model, usage=turn.usage))
        embedded.extend(getattr(parsed, "embedded_usage", []))
    for item in embedded:
        if item.message_key not in seen and item.model not in FREE_MODELS:
            seen.add(item.message_key)
            calls.append(CallUsage(model=item.model, usage=item.usage))
    if zeroed:
        return calls, (f"the run's transcript has {zeroed} API usage record(s) with a missing, negative or "
                       "non-integer token count")
    return calls, ""


def unusable_usage(calls: list[CallUsage]) -> str:
    """Why the transcript's usage cannot price the run ('' when it can): no API call at all, a
    call with no tokens, or a count over :data:`MAX_CALL_TOKENS` — what the anthropic backend
    refuses in a reply's ``usage`` (a count the parser zeroed is caught by :func:`read_usage`)."""
    if not calls:
        return "the run's transcript records no API call: nothing to price it by"
    for call in calls:
        u = call.usage
        if u.total == 0:
            return "the run's transcript has an API call with no token counts"
        if max(u.input_tokens, u.output_tokens, u.cache_write_5m, u.cache_write_1h, u.cache_read) > MAX_CALL_TOKENS:
            return f"the run's transcript has an API call of {u.total:,} tokens, more than any call can use"
    return ""


def _no_result(exit_: CommandResult) -> str:
    """The error line of a run that printed no JSON result: stderr's tail, else stdout's — or,
    for output that is not text (random bytes), only how much there was."""
    for text, name in ((exit_.errors, "error output"), (exit_.output, "output")):
        text = text.strip()
        if "\ufffd" in text:  # bytes that are not UTF-8: no use to a reader, and no line of text
            size = f"{exit_.output_bytes:,} bytes of output" if name == "output" else "its error output"
            return f"claude exited {exit_.exit_code} and printed no JSON result ({size}, not UTF-8 text)"
        if text:
            return _one_line(f"claude exited {exit_.exit_code} without a JSON result: {text[-_STDERR_CHARS:]}")
    return f"claude exited {exit_.exit_code} without a JSON result (no output)"


def _result_json(stdout: str) -> dict[str, Any] | None:
    """The ``--output-format json`` result object (the last JSON line that is one, or ends one)."""
    for line in reversed(stdout.strip().splitlines()):
        value = _result_object(line)
        if value is not None:
            return value
    try:
        value = json.loads(stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "result" in value else None


def _result_object(line: str) -> dict[str, Any] | None:
    """The result object ``line`` is — or ends with, when other output ran into it without a
    newline (a few candidate starts, from the right: each is a parse of the line's end)."""
    start = 0
    for _ in range(_RESULT_STARTS):
        try:
            value = json.loads(line[start:])
        except ValueError:
            value = None
        if isinstance(value, dict) and value.get("type") == "result":
            return value
        if value is not None and start == 0:
            return None  # a whole JSON line, not the result
        start = line.rfind('{"type"', 0, start or len(line))
        if start <= 0:
            return None
    return None


def _session_id(stdout: str) -> str | None:
    payload = _result_json(stdout)
    value = payload.get("session_id") if payload else None
    return str(value) if value else None


def _write_inside(root: Path, path: Path, text: str) -> None:
    """Write ``path``, refusing a location the copy redirects outside itself by a symlink."""
    if path.is_symlink():
        path.unlink()
    real_root = root.resolve()
    if real_root not in path.resolve().parents:
        raise OSError(f"{path} resolves outside the run copy")
    path.write_text(text, encoding="utf-8")


def _one_line(text: str) -> str:
    return one_line(text, 500)
