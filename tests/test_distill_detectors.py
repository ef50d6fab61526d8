"""Waste detectors over parsed runs: each kind found with evidence, savings from measured sizes."""

from __future__ import annotations

from distill_fixtures import Call, Step, cmd, file_text, naive_session, parse, read

from warden.distill import detectors as d
from warden.habits import HABITS_BY_WASTE


def kinds(run) -> dict[str, d.Finding]:  # noqa: ANN001
    return {f.waste_kind: f for f in d.detect_waste(run)}


def test_naive_session_shows_its_habits_with_evidence() -> None:
    found = kinds(parse(naive_session()))
    for kind in ("blind_read", "reread", "whole_file_read", "full_test_suite", "repeated_command",
                 "listing_loop", "plan_churn"):
        assert kind in found, kind
    for finding in found.values():
        assert finding.waste_kind in HABITS_BY_WASTE
        assert finding.occurrences >= 1 and finding.saving_tokens > 0
        assert finding.evidence and all(("index" in e and "tool_use_id" in e) or "turn" in e
                                        for e in finding.evidence)
    blind = found["blind_read"]
    assert blind.occurrences == 5  # the five unrelated modules opened before any search
    assert {e["path"] for e in blind.evidence} == {f"pkg/mod_{i}.py" for i in range(5)}
    assert found["reread"].evidence[0]["path"] == "pkg/mod_0.py"
    # the biggest finding comes first
    ordered = d.detect_waste(parse(naive_session()))
    assert ordered[0].waste_kind == "blind_read"
    assert [f.saving_tokens for f in ordered] == sorted((f.saving_tokens for f in ordered), reverse=True)


def test_saving_scales_with_measured_sizes_not_a_constant() -> None:
    small = kinds(parse(naive_session(scale=1)))["blind_read"].saving_tokens
    large = kinds(parse(naive_session(scale=2)))["blind_read"].saving_tokens
    assert 1.8 < large / small < 2.2


def test_carried_cost_counts_later_turns() -> None:
    big = "y" * 40_000
    early = parse([Step("", [cmd("cat big.log", big)])] + [Step("", [cmd(f"echo {i}")]) for i in range(10)])
    late = parse([Step("", [cmd(f"echo {i}")]) for i in range(10)] + [Step("", [cmd("cat big.log", big)])])
    assert kinds(early)["ignored_output"].saving_tokens > kinds(late)["ignored_output"].saving_tokens


def test_grep_first_is_not_blind_reading_and_ranged_reads_are_not_whole() -> None:
    target = file_text(400)
    run = parse([Step("", [Call("grep", {"pattern": "function_x_10"}, "pkg/parser.py:11: def function_x_10")]),
                 Step("", [read("pkg/other.py", file_text(50, "o"))]),
                 Step("", [read("pkg/parser.py", target, offset=1, limit=40)]),
                 Step("", [Call("edit_file", {"path": "pkg/parser.py", "old_string": "a", "new_string": "b"})]),
                 Step("", [cmd("python -m pytest -q tests/test_parser.py::test_one", "1 passed")])])
    found = kinds(run)
    assert "blind_read" not in found and "whole_file_read" not in found
    assert "full_test_suite" not in found and "reread" not in found


def test_reread_after_edit_is_not_waste() -> None:
    text = file_text(20)
    run = parse([Step("", [read("a.py", text)]),
                 Step("", [Call("edit_file", {"path": "a.py", "old_string": "x", "new_string": "y"})]),
                 Step("", [read("a.py", text)])])
    assert "reread" not in kinds(run)


def test_repeated_commands_and_retry_churn() -> None:
    run = parse([Step("", [cmd("git status", "clean")]), Step("", [cmd("git status", "clean")]),
                 Step("", [Call("read_file", {"path": "missing.py"}, "File does not exist.", True)]),
                 Step("", [Call("read_file", {"path": "missing.py"}, "File does not exist.", True)]),
                 Step("", [Call("read_file", {"path": "missing.py"}, "File does not exist.", True)])])
    found = kinds(run)
    assert found["repeated_command"].occurrences == 1
    assert found["repeated_command"].evidence[0]["first_index"] == 0
    assert found["retry_churn"].occurrences == 2
    assert found["retry_churn"].evidence[0]["failed_index"] == 2


def test_command_rerun_after_an_edit_is_not_repeated() -> None:
    run = parse([Step("", [cmd("python -m pytest -q tests/test_a.py", "1 failed")]),
                 Step("", [Call("edit_file", {"path": "a.py", "old_string": "x", "new_string": "y"})]),
                 Step("", [cmd("python -m pytest -q tests/test_a.py", "1 passed")])])
    assert "repeated_command" not in kinds(run)


def test_ignored_output_vs_used_output() -> None:
    listing = "".join(f"src/component_{i}/module_file_{i}.py\n" for i in range(600))
    ignored = parse([Step("", [cmd("find . -name '*.py'", listing)]), Step("", [cmd("echo done")])])
    used = parse([Step("", [cmd("find . -name '*.py'", listing)]),
                  Step("", [read("src/component_7/module_file_7.py", "x = 1\n")])])
    assert "ignored_output" in kinds(ignored)
    assert "ignored_output" not in kinds(used)


def test_oversized_write_vs_new_file() -> None:
    original = file_text(200)
    changed = original.replace("function_x_5(", "function_x_5_renamed(")
    run = parse([Step("", [read("a.py", original)]),
                 Step("", [Call("write_file", {"path": "a.py", "content": changed})]),
                 Step("", [Call("write_file", {"path": "new.py", "content": file_text(200, "n")})])])
    finding = kinds(run)["oversized_write"]
    assert finding.occurrences == 1 and finding.evidence[0]["path"] == "a.py"
    assert finding.evidence[0]["changed_share"] < 0.2


def test_verbose_output_and_plan_churn() -> None:
    narration = "I am now going to carefully consider the structure of the code base. " * 30
    run = parse([Step("Plan A."), Step("Plan B."), Step("Plan C."),
                 Step(narration, [cmd("echo hi")]), Step("", [cmd("echo again")])])
    found = kinds(run)
    assert found["plan_churn"].occurrences == 2
    assert found["verbose_output"].occurrences == 1
    assert found["verbose_output"].evidence[0]["text_chars"] == len(narration)


def test_targeted_test_command_classification() -> None:
    assert d.test_run_is_targeted("python -m pytest -q") is False
    assert d.test_run_is_targeted("python -m pytest -q tests/") is False
    assert d.test_run_is_targeted("cd /x && pytest") is False
    assert d.test_run_is_targeted("pytest tests/test_a.py -q") is True
    assert d.test_run_is_targeted("python -m pytest -k parse") is True
    assert d.test_run_is_targeted("pytest tests/test_a.py::test_b") is True
    assert d.test_run_is_targeted("npm test") is False
    assert d.test_run_is_targeted("go test ./...") is False
    assert d.test_run_is_targeted("go test ./pkg/parser") is True
    assert d.test_run_is_targeted("ls -la") is None


def test_empty_run_has_no_findings() -> None:
    assert d.detect_waste(parse([])) == []


def test_result_sizes_are_measured_whatever_the_key_order() -> None:
    """The sim writes ``toolUseResult`` before ``type``/``timestamp``; sizes must still count."""
    import json

    from warden.ingest.parser import parse_bytes

    call = {"type": "assistant", "timestamp": "2026-01-01T00:00:01Z", "requestId": "r1",
            "message": {"id": "m1", "model": "sim-naive-1", "role": "assistant", "usage": {"output_tokens": 9},
                        "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}}]}}
    result = {"message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 500}]},
              "toolUseResult": {"stdout": "x" * 500}, "type": "user", "timestamp": "2026-01-01T00:00:02Z"}
    run = parse_bytes((json.dumps(call) + "\n" + json.dumps(result, separators=(",", ":")) + "\n").encode())
    assert run.tool_calls[0].result_bytes == 500


def test_per_test_report_lines_are_ignored_output_not_full_suite_waste() -> None:
    per_test = "".join(f"PASSED tests/test_mod_{i % 9}.py::test_case_number_{i}\n" for i in range(400))
    edit = Step("", [Call("edit_file", {"path": "a.py", "old_string": "x", "new_string": "y"})])
    verbose = parse([edit, Step("", [cmd("python -m pytest -q -rA", per_test + "400 passed\n")]),
                     Step("", [cmd("echo done")])])
    found = kinds(verbose)
    quiet = d.quiet_test_output_bytes(verbose.tool_calls[1])
    assert 400 <= quiet <= 400 + d.QUIET_SUMMARY_BYTES + 50
    assert found["ignored_output"].evidence[0]["quiet_bytes"] == quiet
    assert "full_test_suite" not in found  # its quiet output is below a targeted run's: no double count
    assert d.test_run_is_targeted("python -m pytest -q -rA") is False


def test_a_glob_is_not_a_search_for_blind_reading() -> None:
    edit = Step("", [Call("edit_file", {"path": "pkg/target.py", "old_string": "x", "new_string": "y"})])
    globbed = parse([Step("", [Call("glob", {"pattern": "**/*.py"}, "pkg/a.py\npkg/target.py")]),
                     Step("", [read("pkg/a.py", file_text(100))]), edit])
    grepped = parse([Step("", [cmd("rg -n 'def target' pkg", "pkg/target.py:3:def target")]),
                     Step("", [read("pkg/a.py", file_text(100))]), edit])
    assert "blind_read" in kinds(globbed)
    assert "blind_read" not in kinds(grepped)


def test_evidence_shows_a_path_with_its_secrets_redacted() -> None:
    """Evidence is printed and written as JSON (distill --json): a password or key in a path is not."""
    from warden.ingest.records import ToolCall

    for path, secret in (("postgres://admin:S3cretPassw0rd@db/x.sql", "S3cretPassw0rd"),
                         ("/tmp/AKIAIOSFODNN7EXAMPLE/notes.md", "AKIAIOSFODNN7EXAMPLE")):
        item = d.evidence_of(ToolCall(0, "t0", "Read", "read", {"file_path": path}, 10, path=path))
        assert secret not in item["path"] and "[REDACTED]" in item["path"]
