"""The tool-use loop, driven through the real anthropic SDK client and an in-process transport."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from harness_scripted import (CHECK, FIX_SCRIPT, PYTEST_CHECK, NoSleep, ScriptedModel, error_response, make_project,
                              make_task, message, text, tool_use)
from warden.bench.agents.harness import RetryPolicy, run_task
from warden.bench.agents.tools import TOOL_NAMES, sandbox_env
from warden.bench.results import Outcome, RunCaps


def play(model: ScriptedModel, workdir: Path, *, caps: RunCaps = RunCaps(), task=None, **kwargs):
    return run_task(model.client(), task=task or make_task(), workdir=workdir, system_prompt="You are careful.",
                    model="scripted-model", caps=caps, backend_name="test", seed=7,
                    retry=kwargs.pop("retry", RetryPolicy(sleep=NoSleep())), **kwargs)


def test_full_tool_loop_fixes_the_task_and_the_check_completes_it(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    script = [*FIX_SCRIPT[:3], [tool_use("t4", "run_command", command="python -m pytest -q test_calc.py")],
              FIX_SCRIPT[4]]
    model = ScriptedModel(script)
    result = play(model, project, task=make_task(check=PYTEST_CHECK))

    assert result.outcome is Outcome.COMPLETED and result.completed
    assert result.turns == 5 and len(model.requests) == 5
    assert "return a + b" in (project / "calc.py").read_text()
    assert (result.task_id, result.backend, result.model, result.seed) == ("calc-01", "test", "scripted-model", 7)
    # The tool results the model saw are the tools' real outputs.
    assert model.tool_results(1)[0]["content"] == "calc.py:1:def add(a, b):"
    assert model.tool_results(2)[0]["content"] == "     1\tdef add(a, b):\n     2\t    return a - b\n" \
        "… (6 lines in total; use offset=3 to read on)"
    assert model.tool_results(3)[0]["content"] == "edited calc.py"
    run_output = model.tool_results(4)[0]["content"]
    assert run_output.startswith("exit code 0") and "1 passed" in run_output
    assert not any(r.get("is_error") for i in range(1, 5) for r in model.tool_results(i))


def test_request_shape_follows_the_contract(tmp_path: Path) -> None:
    model = ScriptedModel(FIX_SCRIPT)
    play(model, make_project(tmp_path / "copy"), max_tokens_per_call=4096)
    first, third = model.requests[0], model.requests[2]
    assert first["model"] == "scripted-model" and first["max_tokens"] == 4096
    assert first["system"] == [{"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in first["tools"]] == list(TOOL_NAMES)
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Fix add() in calc.py so the tests pass.", "cache_control": {"type": "ephemeral"}}]}]
    # Assistant turns go back as sent; only the last block of the last message carries the breakpoint.
    assert third["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Searching."}, {"type": "tool_use", "id": "t1", "name": "grep",
                                                 "input": {"pattern": "def add"}}]}
    marked = [(i, j) for i, m in enumerate(third["messages"]) for j, b in enumerate(m["content"])
              if "cache_control" in b]
    assert marked == [(len(third["messages"]) - 1, 0)]
    assert third["messages"][-1]["content"][0]["tool_use_id"] == "t2"


def test_usage_is_recorded_per_call_with_cache_split(tmp_path: Path) -> None:
    model = ScriptedModel(FIX_SCRIPT)
    result = play(model, make_project(tmp_path / "copy"))
    assert [c.model for c in result.calls] == ["scripted-model"] * 5
    assert [(c.usage.input_tokens, c.usage.output_tokens, c.usage.cache_write_5m, c.usage.cache_write_1h,
             c.usage.cache_read) for c in result.calls] == [(100 + i, 10 + i, 20, 5, 1000 * i) for i in range(5)]
    total = result.usage
    assert (total.input_tokens, total.output_tokens, total.cache_write_5m, total.cache_write_1h,
            total.cache_read) == (510, 60, 100, 25, 10_000)
    assert all(c.duration_s >= 0 for c in result.calls)


def test_unsplit_cache_creation_counts_as_5m(tmp_path: Path) -> None:
    unsplit = {"input_tokens": 3, "output_tokens": 4, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 9}
    model = ScriptedModel([message(0, [text("nothing to do")], usage_override=unsplit)])
    result = play(model, make_project(tmp_path / "copy"))
    u = result.calls[0].usage
    assert (u.input_tokens, u.output_tokens, u.cache_write_5m, u.cache_write_1h, u.cache_read) == (3, 4, 50, 0, 9)


def test_the_success_check_decides_task_failed(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    model = ScriptedModel([[tool_use("t1", "read_file", path="calc.py")], [text("Looks fine to me.")]])
    result = play(model, project)
    assert result.outcome is Outcome.TASK_FAILED and not result.completed
    assert result.error.startswith("success check failed (exit 1)")
    assert result.turns == 2


def test_a_failed_check_with_a_traceback_is_stored_as_one_line(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    task = make_task("python -c \"import calc; assert calc.add(2, 3) == 5, 'add is wrong'\"")
    result = play(ScriptedModel([[text("Done.")]]), project, task=task)
    assert result.outcome is Outcome.TASK_FAILED
    assert "\n" not in result.error and "Traceback" in result.error  # like claude-code's (same helper)
    assert result.error.endswith("AssertionError: add is wrong")


def test_turn_cap_ends_the_run_and_the_check_still_decides(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    looping = [[tool_use(f"t{i}", "list_dir", path=".")] for i in range(10)]
    model = ScriptedModel(looping)
    result = play(model, project, caps=RunCaps(max_turns=3))
    assert result.turns == 3 and len(model.requests) == 3
    assert result.outcome is Outcome.TASK_FAILED and result.error.startswith("success check failed")

    # The tools asked for on the last allowed turn still run: an edit there completes the task.
    fixing_late = [[tool_use("a", "list_dir", path=".")],
                   [tool_use("b", "edit_file", path="calc.py", old_string="a - b", new_string="a + b")]]
    result = play(ScriptedModel(fixing_late), make_project(tmp_path / "copy2"), caps=RunCaps(max_turns=2))
    assert result.outcome is Outcome.COMPLETED and result.turns == 2


def test_output_token_cap_is_budget_exceeded_and_bounds_max_tokens(tmp_path: Path) -> None:
    model = ScriptedModel([[tool_use(f"t{i}", "list_dir", path=".")] for i in range(10)])
    # outputs are 10, 11, 12, …: the cap of 25 is reached on the third call
    result = play(model, make_project(tmp_path / "copy"), caps=RunCaps(max_output_tokens=25))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and not result.completed
    assert result.turns == 3 and "output-token cap" in result.error
    assert [r["max_tokens"] for r in model.requests] == [25, 15, 4]


def test_total_token_cap_is_budget_exceeded(tmp_path: Path) -> None:
    model = ScriptedModel([[tool_use(f"t{i}", "list_dir", path=".")] for i in range(10)])
    # totals per call: 135, 1137, 2139 … → cumulative 3411 after three calls
    result = play(model, make_project(tmp_path / "copy"), caps=RunCaps(max_total_tokens=3000))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and result.turns == 3
    assert "total-token cap" in result.error


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_wall_time_cap_is_budget_exceeded(tmp_path: Path) -> None:
    clock = FakeClock()
    script = [[tool_use(f"t{i}", "list_dir", path=".")] for i in range(10)]

    class SlowModel(ScriptedModel):
        def __call__(self, request: httpx2.Request) -> httpx2.Response:
            clock.now += 10.0  # every call takes ten (fake) seconds
            return super().__call__(request)

    model = SlowModel(script)
    result = play(model, make_project(tmp_path / "copy"), caps=RunCaps(max_wall_s=25.0), clock=clock)
    assert result.outcome is Outcome.BUDGET_EXCEEDED and "wall-time cap" in result.error
    assert result.turns == 3 and result.duration_s == pytest.approx(30.0)
    assert model.requests[-1]["messages"]  # the third request went out with ~5 s left


def test_max_tokens_stop_asks_the_model_to_continue(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    model = ScriptedModel([message(0, [text("I will now expla")], stop_reason="max_tokens"),
                           [tool_use("t1", "edit_file", path="calc.py", old_string="a - b", new_string="a + b")],
                           [text("done")]])
    result = play(model, project)
    assert result.outcome is Outcome.COMPLETED and result.turns == 3
    assert model.requests[1]["messages"][-1]["content"][0]["text"].startswith("Your reply hit the output limit")


def test_tool_errors_reach_the_model_as_error_results(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    model = ScriptedModel([
        [tool_use("a", "read_file", path="../outside.txt"), tool_use("b", "delete_everything"),
         tool_use("c", "edit_file", path="calc.py", old_string="a", new_string="b"),
         tool_use("d", "read_file", wrong="x"), tool_use("e", "run_command", command="rm -rf .")],
        [text("giving up")]])
    result = play(model, project)
    results = model.tool_results(1)
    assert [r["tool_use_id"] for r in results] == ["a", "b", "c", "d", "e"]
    assert all(r.get("is_error") is True for r in results)
    assert "outside the project" in results[0]["content"]
    assert "unknown tool" in results[1]["content"]
    assert "occurs" in results[2]["content"]
    assert "bad arguments" in results[3]["content"]
    assert "not allowed" in results[4]["content"]
    assert (project / "calc.py").exists() and result.outcome is Outcome.TASK_FAILED


def test_an_api_key_in_the_environment_never_reaches_the_check(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "secret-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("HOME", str(tmp_path))
    dump = "python -c \"import os, json; json.dump(dict(os.environ), open('env.json', 'w'))\""
    task = make_task(check=f"{dump} && {CHECK}")
    project = make_project(tmp_path / "copy")
    model = ScriptedModel([
        [tool_use("t1", "run_command", command=dump)],  # one simple command of the check: allowed
        [tool_use("t2", "edit_file", path="calc.py", old_string="a - b", new_string="a + b")],
        [text("done")]])
    result = play(model, project, task=task)
    assert result.outcome is Outcome.COMPLETED
    env = json.loads((project / "env.json").read_text())  # written by the check itself, last
    assert "PATH" in env and env["HOME"] == env["TMPDIR"] != str(tmp_path)  # the run's, not the user's
    leaked = [k for k, v in env.items() if "secret" in v or k.startswith("ANTHROPIC") or "AWS" in k]
    assert leaked == []
    assert not model.tool_results(1)[0].get("is_error")


def test_the_check_timing_out_is_task_failed(tmp_path: Path) -> None:
    task = make_task(check="python -c \"import time; time.sleep(30)\"", timeout_s=0.5)
    result = play(ScriptedModel([[text("done")]]), make_project(tmp_path / "copy"), task=task)
    assert result.outcome is Outcome.TASK_FAILED and "timed out" in result.error


def test_a_missing_copy_is_infra_error(tmp_path: Path) -> None:
    model = ScriptedModel([])
    result = play(model, tmp_path / "missing")
    assert result.outcome is Outcome.INFRA_ERROR and model.requests == []


def test_an_unusable_response_is_infra_error(tmp_path: Path) -> None:
    model = ScriptedModel([httpx2.Response(200, text="<html>proxy error</html>")])
    result = play(model, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and not result.completed


def test_a_reply_of_broken_json_is_infra_error_that_says_where_it_came_from(tmp_path: Path) -> None:
    model = ScriptedModel([httpx2.Response(200, text='{"id": "m", "content": [{"type": "te',
                                           headers={"content-type": "application/json"})])
    result = play(model, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and result.error.startswith("unreadable Messages API reply")


@pytest.mark.parametrize("bad_usage, why", [
    ({"output_tokens": 10}, "no input_tokens"),  # a gateway dropping a count: the call is not nearly free
    ({"input_tokens": 1e300, "output_tokens": 10}, "absurd"),
    ({"input_tokens": 10**14, "output_tokens": 10}, "more than any call reads"),
    ({"input_tokens": 100, "output_tokens": 20_000}, "more output than max_tokens allowed"),
    # each count in range, the prompt they add up to none
    ({"input_tokens": 9_999_999, "cache_read_input_tokens": 9_999_999, "output_tokens": 10}, "a prompt too large"),
    # a split of the cache writes larger than their total
    ({"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 0,
      "cache_creation": {"ephemeral_5m_input_tokens": 9_999_999, "ephemeral_1h_input_tokens": 9_999_999}}, "split"),
])
def test_usage_no_call_could_have_is_infra_error_and_charges_nothing(bad_usage: dict, why: str,
                                                                     tmp_path: Path) -> None:
    model = ScriptedModel([message(0, [text("done")], usage_override=bad_usage)])
    result = play(model, make_project(tmp_path / "copy"), caps=RunCaps(max_output_tokens=16_000))
    assert result.outcome is Outcome.INFRA_ERROR and "unusable model response" in result.error, why
    assert result.usage.total == 0


def test_a_call_is_priced_as_the_model_asked_for_whatever_the_reply_names(tmp_path: Path) -> None:
    """A reply naming "<synthetic>" (free in the price table) or an unknown model must not make
    a paid call free or unpriceable."""
    model = ScriptedModel([message(0, [text("done")], model="<synthetic>")])
    result = play(model, make_project(tmp_path / "copy"))
    assert [c.model for c in result.calls] == ["scripted-model"]


def test_prompt_too_long_is_the_agents_budget(tmp_path: Path) -> None:
    model = ScriptedModel([[tool_use("t1", "list_dir", path=".")],
                           error_response(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000")])
    result = play(model, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and result.turns == 1
    assert "prompt is too long" in result.error


def test_context_window_stop_is_budget_exceeded(tmp_path: Path) -> None:
    model = ScriptedModel([message(0, [text("…")], stop_reason="model_context_window_exceeded")])
    result = play(model, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.BUDGET_EXCEEDED and "context window" in result.error


_DUMP_ENV = ("python -c \"import os, json; e = dict(os.environ); e['tmp_exists'] = os.path.isdir(e['TMPDIR']); "
             "open('env.jsonl', 'a').write(json.dumps(e) + chr(10))\"")
_TMP_TEST = "def test_where(tmp_path):\n    open('where.txt', 'w').write(str(tmp_path))\n"


def test_each_run_has_a_private_tmpdir_and_no_pytest_plugins(tmp_path: Path) -> None:
    """Concurrent runs must not share /tmp/pytest-of-<user> (its clean-up races print warnings the
    agent pays for): tool commands and the check of each run see their own TMPDIR, which pytest
    uses, and which is gone afterwards; plugin autoload is off for both."""
    check = f"{_DUMP_ENV} && python -m pytest -q test_where.py && {CHECK}"
    seen: list[list[dict]] = []
    for run in ("a", "b"):
        project = make_project(tmp_path / run)
        (project / "test_where.py").write_text(_TMP_TEST)
        model = ScriptedModel([[tool_use("t1", "run_command", command=_DUMP_ENV)], *FIX_SCRIPT[2:3], [text("done")]])
        # A given env's TMPDIR (here the shared /tmp) is replaced by the run's own.
        env = sandbox_env({"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"}) if run == "b" else None
        result = play(model, project, task=make_task(check=check), env=env)
        assert result.outcome is Outcome.COMPLETED, result.error
        assert not model.tool_results(1)[0].get("is_error")
        dumps = [json.loads(line) for line in (project / "env.jsonl").read_text().splitlines()]
        assert len(dumps) == 2  # the agent's tool command, then the check
        assert {d["TMPDIR"] for d in dumps} == {dumps[0]["TMPDIR"]} and all(d["tmp_exists"] for d in dumps)
        assert all(d["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1" for d in dumps)
        tmp = Path(dumps[0]["TMPDIR"])
        assert tmp != Path("/tmp") and tmp not in project.parents and project not in tmp.parents
        assert tmp in Path((project / "where.txt").read_text()).parents  # pytest's tmp_path lives there
        assert not tmp.exists()  # removed with the run
        seen.append(dumps)
    assert seen[0][0]["TMPDIR"] != seen[1][0]["TMPDIR"]


def test_a_secret_in_a_tool_result_is_redacted_before_it_leaves(tmp_path: Path) -> None:
    project = make_project(tmp_path / "copy")
    (project / "leak.txt").write_text("ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123\n")
    model = ScriptedModel([[tool_use("t1", "read_file", path="leak.txt")], [text("done")]])
    play(model, project)
    sent = model.tool_results(1)[0]["content"]
    assert "abcdefghijklmnopqrstuvwxyz0123" not in sent and "[REDACTED]" in sent


def test_a_prompt_too_long_on_the_first_call_is_infra_not_the_agents_budget(tmp_path: Path) -> None:
    """Before any turn only the task's own prompt was sent: a 0-token 'budget exceeded' run would
    count as a measurement, and look like a ~100% saving."""
    model = ScriptedModel([error_response(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000")])
    result = play(model, make_project(tmp_path / "copy"))
    assert result.outcome is Outcome.INFRA_ERROR and result.turns == 0
    assert "prompt is too long" in result.error and "first call" in result.error
