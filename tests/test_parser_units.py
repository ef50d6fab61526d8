"""The transcript parser on hand-built lines: usage dedupe, cache split, subagent messages,
tool statistics, odd lines, and resuming from a saved state."""

from __future__ import annotations

import json

import pytest

from collect_support import SESSION, assistant, jsonl, progress, prompt, tool_result, tool_use, usage
from warden.ingest.parser import TranscriptParser, ids_from_path, parse_bytes, usage_from_json
from warden.ingest.pricing import Usage


def test_streamed_response_counts_once_with_its_largest_line() -> None:
    lines = [
        assistant("msg_1", "req_1", usage(3, 1, 100, 50), [{"type": "text", "text": "hi"}]),
        assistant("msg_1", "req_1", usage(3, 240, 100, 50), [tool_use("t1", "Read", file_path="/a.py")]),
        assistant("msg_2", "req_2", usage(1, 5, 0, 150)),
    ]
    run = parse_bytes(jsonl(lines))
    assert run.usage == Usage(4, 245, 100, 0, 200)
    assert len(run.turns) == 2
    assert run.turns[0].tool_call_indexes == [0]
    assert run.stats.duplicate_usage == 1


def test_same_message_id_with_another_request_id_is_another_response() -> None:
    run = parse_bytes(jsonl([assistant("msg_1", "req_1", usage(1, 1)), assistant("msg_1", "req_2", usage(1, 1))]))
    assert run.usage.input_tokens == 2


def test_missing_request_id_dedupes_on_message_id_alone() -> None:
    run = parse_bytes(jsonl([assistant("msg_1", None, usage(1, 2)), assistant("msg_1", None, usage(1, 9))]))
    assert run.usage == Usage(1, 9, 0, 0, 0)
    assert run.turns[0].message_key == "msg_1"


def test_cache_write_split_5m_1h_and_bare_total_counts_as_5m() -> None:
    assert usage_from_json(usage(0, 0, 300, w5=100, w1=200)) == Usage(0, 0, 100, 200, 0)
    assert usage_from_json(usage(0, 0, 300)) == Usage(0, 0, 300, 0, 0)
    # A split that undercounts the billed total keeps the remainder as 5-minute writes.
    assert usage_from_json(usage(0, 0, 300, w5=0, w1=200)) == Usage(0, 0, 100, 200, 0)
    assert usage_from_json({"input_tokens": "5", "output_tokens": -3, "cache_read_input_tokens": True}) == Usage()
    assert usage_from_json("nope") is None


def test_usage_counts_read_as_zero_are_counted_not_priced_differently() -> None:
    lines = [
        assistant("m1", "r1", {"input_tokens": -5000, "output_tokens": 100, "cache_read_input_tokens": 3}),
        assistant("m2", "r2", {"input_tokens": 7}),  # no output count
        assistant("m3", "r3", usage(2.5, 1)),  # type: ignore[arg-type]  # fractional: no count, read as 0
        assistant("m4", "r4", usage(1, 1, w5=-1, w1=0)),
        assistant("m5", "r5", usage(10**16, 1)),
        progress("agent1", "m6", "r6", {"input_tokens": 4, "output_tokens": -1}),
        assistant("m7", "r7", {"input_tokens": 1, "output_tokens": 2}),  # cache counts are optional
        assistant("m8", "r8", usage(2.0, 1)),  # type: ignore[arg-type]  # an integral float is a count
        assistant("m9", "r9", {}, model="<synthetic>"),  # free: never priced, not counted
    ]
    run = parse_bytes(jsonl(lines))
    assert run.stats.zeroed_usage == 6
    assert run.usage == Usage(0 + 7 + 0 + 1 + 0 + 1 + 2, 100 + 0 + 1 + 1 + 1 + 2 + 1, 0, 0, 3)


def test_per_message_models() -> None:
    run = parse_bytes(jsonl([
        assistant("m1", "r1", usage(10, 1), model="claude-opus-4-5-20251101"),
        assistant("m2", "r2", usage(20, 1), model="claude-haiku-4-5-20251001"),
        assistant("m3", "r3", usage(0, 0), model="<synthetic>"),
    ]))
    assert run.models == ["claude-opus-4-5-20251101", "claude-haiku-4-5-20251001"]
    assert run.usage_by_model["claude-opus-4-5-20251101"].input_tokens == 10
    assert run.usage_by_model["claude-haiku-4-5-20251001"].input_tokens == 20


def test_tool_use_result_usage_never_counts() -> None:
    result = tool_result("t1", "done", tool_use_result={"status": "completed", "agentId": "abc",
                                                        "usage": {"input_tokens": 9999, "output_tokens": 9999}})
    run = parse_bytes(jsonl([assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Task", subagent_type="Explore",
                                                                          prompt="x")]), result]))
    assert run.usage == Usage(1, 1, 0, 0, 0)
    assert run.subagent_types == {"abc": "Explore"}


def test_progress_lines_report_subagent_usage_apart_from_the_run() -> None:
    run = parse_bytes(jsonl([
        assistant("m1", "r1", usage(1, 1), [tool_use("toolu_task", "Task", subagent_type="Explore", prompt="p")]),
        progress("agent9", "sub_1", "sreq_1", usage(5, 1)),
        progress("agent9", "sub_1", "sreq_1", usage(5, 7)),  # the same response streamed twice
        progress("agent9", "sub_2", "sreq_2", usage(2, 2)),
    ]))
    assert run.usage == Usage(1, 1, 0, 0, 0)
    embedded = {e.message_key: e for e in run.embedded_usage}
    assert set(embedded) == {"sub_1|sreq_1", "sub_2|sreq_2"}
    assert embedded["sub_1|sreq_1"].usage.output_tokens == 7
    assert embedded["sub_1|sreq_1"].agent_id == "agent9"
    assert run.subagent_types == {"agent9": "Explore"}


def test_reads_rereads_edits_greps_and_failures() -> None:
    lines = [
        assistant("m1", "r1", usage(), [tool_use("t1", "Read", file_path="/a.py")]),
        tool_result("t1", "x" * 500),
        assistant("m2", "r2", usage(), [tool_use("t2", "Read", file_path="/a.py")]),  # re-read
        tool_result("t2", "x" * 500),
        assistant("m3", "r3", usage(), [tool_use("t3", "Read", file_path="/a.py", offset=10, limit=5)]),  # new range
        tool_result("t3", "x"),
        assistant("m4", "r4", usage(), [tool_use("t4", "Edit", file_path="/a.py", old_string="a", new_string="b")]),
        tool_result("t4", "boom", is_error=True),
        assistant("m5", "r5", usage(), [tool_use("t5", "Read", file_path="/a.py")]),  # changed since: not a re-read
        tool_result("t5", "x"),
        assistant("m6", "r6", usage(), [tool_use("t6", "Grep", pattern="def foo")]),
        tool_result("t6", "a.py:1"),
        assistant("m7", "r7", usage(), [tool_use("t7", "read_file", path="/b.py"),
                                        tool_use("t8", "read_file", path="/b.py")]),
    ]
    run = parse_bytes(jsonl(lines))
    assert run.counters == {"tool_calls": 8, "file_reads": 6, "rereads": 2, "greps": 1, "edits": 1,
                            "failed_tool_results": 1}
    assert [c.is_reread for c in run.tool_calls] == [False, True, False, False, False, False, False, True]
    assert run.tool_calls[0].result_bytes == 500
    assert run.tool_calls[2].line_range == (10, 5)
    assert run.tool_calls[3].is_error and run.tool_calls[3].result_text == "boom"
    steps = run.trace_digest["steps"]
    assert [s[0] for s in steps] == ["read", "read", "read", "edit", "read", "grep", "read", "read"]
    assert steps[0][3] == 500 and steps[3][4] == 1
    json.dumps(run.trace_digest)  # stored as JSON


def test_completion_heuristic() -> None:
    done = parse_bytes(jsonl([prompt("fix it"), assistant("m1", "r1", usage(), [tool_use("t1", "Bash", command="ls")]),
                              tool_result("t1", "a"),
                              assistant("m2", "r2", usage(), [{"type": "text", "text": "Fixed."}], stop_reason="end_turn")]))
    assert done.completed and [p.text for p in done.user_prompts] == ["fix it"]
    pending = parse_bytes(jsonl([assistant("m1", "r1", usage(), [tool_use("t1", "Bash", command="ls")])]))
    assert not pending.completed
    interrupted = parse_bytes(jsonl([assistant("m2", "r2", usage(), [{"type": "text", "text": "Working"}]),
                                     prompt("[Request interrupted by user]")]))
    assert not interrupted.completed


def test_placeholder_output_counts_are_flagged() -> None:
    big = [tool_use("t1", "Write", file_path="/x.py", content="print('hello world')\n" * 40)]
    run = parse_bytes(jsonl([assistant("m1", "r1", usage(3, 1), big)]))
    assert run.placeholder_output and run.placeholder_turns == 1
    honest = parse_bytes(jsonl([assistant("m1", "r1", usage(3, 300), big)]))
    assert not honest.placeholder_output


def test_odd_lines_are_tolerated_and_counted() -> None:
    good = json.dumps(assistant("m1", "r1", usage(7, 1))).encode()
    data = (b"\xef\xbb\xbf" + good + b"\r\n"  # BOM + CRLF
            + b"\n   \n"  # blank lines
            + b"{not json\n"  # malformed
            + b"[1, 2]\n"  # JSON but not an object
            + json.dumps(assistant("m2", "r2", usage(5, 1), [{"type": "text", "text": "caf\u00e9"}])).encode()
            .replace("caf\\u00e9".encode(), b"caf\xe9") + b"\n"  # Latin-1 byte: not UTF-8
            + b"\r\n"  # a blank CRLF line
            + good[: len(good) // 2] + b"\r")  # unterminated half line (its "\r" ends nothing yet)
    run = parse_bytes(data)
    s = run.stats
    assert (s.bom, s.crlf, s.blank, s.malformed, s.non_utf8, s.truncated) == (1, 2, 3, 2, 1, 1)
    assert run.usage.input_tokens == 12
    assert run.bytes_consumed == len(data) - len(good) // 2 - 1  # the half line is left for later


def test_invalid_utf8_only_in_a_field_the_ledger_never_reads_is_not_a_finding() -> None:
    record = assistant("m1", "r1", usage(7, 1))
    record["gitBranch"] = "caf\u00e9"
    line = json.dumps(record).encode().replace("caf\\u00e9".encode(), b"caf\xe9")
    assert b"caf\xe9" in line
    run = parse_bytes(line + b"\n")
    assert (run.stats.malformed, run.stats.non_utf8) == (0, 0)
    assert run.usage.input_tokens == 7


def test_a_lone_surrogate_escape_keeps_the_line_and_its_usage() -> None:
    """Node writes half an emoji as a lone \\ud83d escape: valid JSON, not Unicode text. The
    line still counts (as non-UTF-8), its usage too, and no surrogate reaches a stored string."""
    record = assistant("m1", "r1", usage(7, 3), [{"type": "text", "text": "cut \ud83d here, pair \ud83d\ude00"}],
                       cwd="/proj\ud83d")
    line = json.dumps(record).encode()
    assert b"\\ud83d" in line
    run = parse_bytes(line + b"\n")
    assert (run.stats.malformed, run.stats.non_utf8) == (0, 1)
    assert run.usage.input_tokens == 7 and run.usage.output_tokens == 3
    assert run.cwd == "/proj\ufffd"
    run.cwd.encode("utf-8")  # storable


def test_a_surrogate_line_is_read_as_any_other_whatever_its_numbers() -> None:
    """The second chance a surrogate escape gets reads a line as the first decode would: an
    integer past 64 bits is kept (the line and its usage count), Infinity is not JSON (malformed,
    still a line). Both had raised inside the parser: the line was lost from the count."""
    huge, infinite = (json.dumps(assistant("m1", "r1", usage(7, 3), [{"type": "text", "text": "cut \ud83d"}]) | extra)
                      .encode() for extra in ({"requestId": {"x": -(2**63) - 1}}, {"requestId": {"x": float("inf")}}))
    run = parse_bytes(huge + b"\n")
    assert (run.stats.lines, run.stats.malformed, run.stats.non_utf8) == (1, 0, 1) and run.usage.input_tokens == 7
    run = parse_bytes(infinite + b"\n")
    assert (run.stats.lines, run.stats.malformed) == (1, 1) and run.usage.input_tokens == 0


@pytest.mark.parametrize(("content", "size", "head", "non_utf8"), [
    ("a\n\"b\u00e9\U0001F600", 10, "a\n\"b\u00e9\U0001F600", 0),  # escapes, and a pair as one character
    ("\u00e9" * 3000, 6000, "\u00e9" * 2048, 0),  # the size of all of it, the head cut
    ([{"type": "text", "text": "x"}, 3, "junk", {"type": "image", "source": {"data": "QUJD"}}], 5, "x", 0),
    (5, 0, "", 0), (None, 0, "", 0), ({"text": "an object"}, 0, "", 0),  # no content
    ("lone \ud83d here", 13, "lone \ufffd here", 1),  # half an emoji: read with a replacement character
])
def test_a_tool_results_content_is_read_whatever_its_shape(content: object, size: int, head: str,
                                                           non_utf8: int) -> None:
    """A tool result's content is kept raw when a line is decoded and read after (its size, its
    head): text, a list of items (objects only), any other value as none; text that is not Unicode
    sends the line to the lenient decode, as a decode of the whole content did."""
    data = jsonl([assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Bash", command="ls")]),
                  tool_result("t1", content)])  # type: ignore[arg-type]
    run = parse_bytes(data)
    call = run.tool_calls[0]
    assert (call.result_bytes, call.result_text, run.stats.non_utf8, run.stats.malformed) == (size, head[:2048], non_utf8, 0)
    assert run.trace_digest["steps"][0][3] == size


def test_a_tool_result_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    data = jsonl([assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Bash", command="ls")]), tool_result("t1", "ok X")])
    run = parse_bytes(data.replace(b"ok X", b"ok \xed\xa0\x80 \xff"))
    call = run.tool_calls[0]
    assert (run.stats.non_utf8, run.stats.malformed, call.result_text) == (1, 0, "ok \ufffd\ufffd\ufffd \ufffd")


@pytest.mark.parametrize("cut_after", range(1, 6))
def test_resumed_parse_equals_full_parse(cut_after: int) -> None:
    """Cut anywhere, a tool call's result in the next read included."""
    lines = [prompt("go"),
             assistant("m1", "r1", usage(1, 1, 10, 5), [tool_use("t1", "Read", file_path="/a.py")]),
             tool_result("t1", "abc"),
             assistant("m2", "r2", usage(1, 2), [tool_use("t2", "Read", file_path="/a.py")]),
             tool_result("t2", "abc", is_error=True),
             assistant("m3", "r3", usage(1, 3), [{"type": "text", "text": "done"}], stop_reason="end_turn")]
    data = jsonl(lines)
    full = parse_bytes(data)
    cut = len(jsonl(lines[:cut_after]))
    first = TranscriptParser()
    for raw in data[:cut].splitlines(keepends=True):
        first.feed(raw, end_offset=None)
    state = json.loads(json.dumps(first.state()))  # survives a JSON round trip (stored in the DB)
    second = TranscriptParser(state=state, start_offset=cut)
    offset = cut
    for raw in data[cut:].splitlines(keepends=True):
        offset += len(raw)
        second.feed(raw, end_offset=offset)
    resumed = second.result()
    assert resumed.counters == full.counters
    assert resumed.trace_digest == full.trace_digest
    assert resumed.completed == full.completed and resumed.stats == full.stats
    assert first.result().usage + resumed.usage == full.usage
    assert resumed.start_offset == cut and resumed.bytes_consumed == len(data)


def test_ids_from_path_both_subagent_layouts() -> None:
    assert ids_from_path(f"/p/proj/{SESSION}.jsonl") == (SESSION, None)
    assert ids_from_path("/p/proj/agent-abc123.jsonl") == (None, "abc123")
    assert ids_from_path(f"/p/proj/{SESSION}/subagents/agent-a9.jsonl") == (SESSION, "a9")


def test_subagent_records_carry_parent_session_and_own_agent_id() -> None:
    run = parse_bytes(jsonl([assistant("m1", "r1", usage(), agent_id="a77")]), agent_id="from-name")
    assert run.session_id == SESSION and run.agent_id == "a77"


def test_absurd_token_counts_count_as_zero_and_collect_still_stores_the_line(tmp_path) -> None:
    from warden.config import load_settings
    from warden.ingest.collector import collect_paths
    from warden.store.db import open_store
    from warden.store.models import SessionRun

    huge = 10**30  # beyond any response, and beyond the database's 64-bit integers
    data = jsonl([assistant("m1", "r1", usage(huge, 5)), assistant("m2", "r2", usage(7, 2**63 - 1))])
    run = parse_bytes(data)
    assert (run.usage.input_tokens, run.usage.output_tokens) == (7, 5) and run.stats.malformed == 0
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(data)
    summary = collect_paths(load_settings(), [path])
    assert summary.runs_updated == 1
    with open_store(load_settings()).session() as s:
        row = s.query(SessionRun).one()
        assert (row.input_tokens, row.output_tokens) == (7, 5)


def test_json_nested_too_deep_is_one_malformed_line() -> None:
    deep = b'{"type":"user","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    run = parse_bytes(jsonl([assistant("m1", "r1", usage(3, 5))]) + deep)
    assert (run.stats.lines, run.stats.malformed) == (2, 1) and run.usage.input_tokens == 3


def test_a_read_range_in_digits_int_refuses_is_no_range_not_a_lost_line() -> None:
    """'²'.isdigit() is True but int('²') raises: the call is kept, with no range."""
    run = parse_bytes(jsonl([assistant("m1", "r1", usage(1, 2), [tool_use("t1", "Read", file_path="/a.py",
                                                                          offset="²", limit="12")])]))
    assert run.stats.malformed == 0 and run.usage == Usage(1, 2, 0, 0, 0)
    assert run.counters["tool_calls"] == len(run.tool_calls) == 1
    assert run.tool_calls[0].line_range == (0, 12)


def test_a_key_in_a_command_is_redacted_where_the_digest_is_written() -> None:
    """The trace digest is stored (the run row, the parser state): a key typed into a command
    never reaches it, while the command's own call (for checkpoint capture, which redacts on its
    own) stays as the agent ran it."""
    key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123"
    parser = TranscriptParser()
    for raw in jsonl([assistant("m1", "r1", usage(), [tool_use("t1", "Bash", command=f"ANTHROPIC_API_KEY={key} python run.py")]),
                      assistant("m2", "r2", usage(), [tool_use("t2", "Bash", command="curl -H 'Authorization: Bearer abcdefgh12345678' x")])]
                     ).splitlines(keepends=True):
        parser.feed(raw)
    run = parser.result()
    stored = json.dumps([run.trace_digest, parser.state()])
    assert key not in stored and "abcdefgh12345678" not in stored and stored.count("[REDACTED]") == 4
    assert run.trace_digest["steps"][0][1].startswith("ANTHROPIC_API_KEY=[REDACTED] python")


def test_a_secret_in_a_path_is_redacted_where_the_digest_is_written() -> None:
    """A path is a target too: a connection string's password, a token in a query or a key in a
    name must not be stored in the run row or the parser state."""
    secrets = ["S3cretPassw0rd", "ghp_" + "a1B2" * 8, "AKIAIOSFODNN7EXAMPLE"]
    paths = [f"postgres://admin:{secrets[0]}@db/x.sql", f"https://example.com/x.py?token={secrets[1]}",
             f"/tmp/{secrets[2]}/notes.md"]
    parser = TranscriptParser()
    for raw in jsonl([assistant(f"m{i}", f"r{i}", usage(), [tool_use(f"t{i}", "Read", file_path=p)])
                      for i, p in enumerate(paths)]).splitlines(keepends=True):
        parser.feed(raw)
    run = parser.result()
    stored = json.dumps([run.trace_digest, parser.state()])
    assert not any(secret in stored for secret in secrets)
    assert [step[1] for step in run.trace_digest["steps"]][0] == "postgres://admin:[REDACTED]@db/x.sql"


def test_labels_from_the_transcript_are_stored_without_controls() -> None:
    """Model names, the project path and subagent types are validated where they are written."""
    lines = [assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Task", subagent_type="back\x1b[31mend\U000e0041")],
                       model="claude-x\u202e", cwd="/proj\x1b]0;evil\x07"),
             {"type": "user", "sessionId": SESSION, "toolUseResult": {"agentId": "a1"},
              "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}]
    run = parse_bytes(jsonl(lines))
    assert run.models == ["claude-x"] and run.turns[0].model == "claude-x"
    assert run.cwd == "/proj]0;evil" and run.subagent_types == {"a1": "back[31mend"}


def test_a_half_written_last_line_is_counted_once_it_is_whole_not_at_every_read() -> None:
    data = jsonl([assistant("m1", "r1", usage(1, 1)), assistant("m2", "r2", usage(1, 2))])
    state, offset = None, 0
    for end in range(40, len(data), 37):  # a hook after every few bytes written
        parser = TranscriptParser(state=state, start_offset=offset)
        for raw in data[offset:end].splitlines(keepends=True):
            parser.feed(raw, end_offset=parser.offset + len(raw))
        state, offset = json.loads(json.dumps(parser.state())), parser.offset
    parser = TranscriptParser(state=state, start_offset=offset)
    for raw in data[offset:].splitlines(keepends=True):
        parser.feed(raw, end_offset=parser.offset + len(raw))
    assert parser.result().stats == parse_bytes(data).stats


def test_a_key_cut_in_half_by_the_digest_limit_is_redacted_first() -> None:
    """A heredoc whose token starts just before the 320-character cut: redacted before the cut
    (a half key is no longer recognisable), so no part of it is stored."""
    token = "ghp_" + "Z9y8X7w6" * 5
    command = "cat <<EOF\n" + "\n" * 290 + f"export GH={token}\nEOF"  # the token starts at 310
    parser = TranscriptParser()
    for raw in jsonl([assistant("m1", "r1", usage(), [tool_use("t1", "Bash", command=command)])]).splitlines(keepends=True):
        parser.feed(raw)
    stored = json.dumps([parser.result().trace_digest, parser.state()])
    assert "Z9y8" not in stored and "GH=[REDACTED" in stored


def test_distill_evidence_shows_a_command_with_its_key_redacted() -> None:
    from warden.distill.detectors import evidence_of
    from warden.ingest.records import ToolCall

    call = ToolCall(index=0, tool_use_id="t1", name="Bash", kind="bash", input={}, input_bytes=0,
                    command="AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3 ls")
    assert "wJalrXUtnFEMI" not in json.dumps(evidence_of(call))


def test_redacted_prefix_screens_past_what_an_earlier_redaction_took_away() -> None:
    from warden.sanitize import redacted_prefix

    jwt = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" * 14 + ".c2lnbmF0dXJlc2lnbmF0dXJl"
    text = f'curl -H "Authorization: Bearer {jwt}" -d {{"password":"correct horse battery staple"}}'
    out = redacted_prefix(text, 200)
    assert "horse" not in out and "eyJzdWIi" not in out and len(out) <= 200
    assert redacted_prefix("pass=abcd", 9) == redacted_prefix("pass=abcd", 100)[:9]
    assert redacted_prefix("", 0) == "" and redacted_prefix("short text", 200) == "short text"


def test_redacted_prefix_widens_its_window_in_a_few_passes(monkeypatch) -> None:
    """A redaction that swallows the window (a private-key header with no end) must not make the
    window grow a few characters per pass: it doubles, so a 10 MB command costs a few passes."""
    import warden.sanitize as sanitize

    calls = []
    real = sanitize.redact_secrets
    monkeypatch.setattr(sanitize, "redact_secrets", lambda text: calls.append(len(text)) or real(text))
    text = "y" * 433 + "-----BEGIN PRIVATE KEY----- " + "a " * 5_000_000
    out = sanitize.redacted_prefix(text, 200)
    assert len(out) <= 200 and len(calls) <= 12


@pytest.mark.parametrize("text", ["2026-11-30T20:00:00+05:30Z", "2026-11-30T20:00:00ZZ"[:-1] + "+00:00Z",
                                  "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "not-a-time", ""])
def test_a_timestamp_that_is_not_one_utc_instant_reads_as_missing(text: str) -> None:
    """An offset and a Z at once, or an offset that leaves the calendar, is malformed: missing,
    never an aware datetime (compared with naive ones later) nor an OverflowError."""
    from warden.ingest.parser import parse_timestamp

    assert parse_timestamp(text) is None


def test_start_and_end_are_the_earliest_and_latest_instants_not_the_smallest_strings() -> None:
    from datetime import datetime

    lines = [assistant("m1", "r1", usage(1, 1), ts="2026-12-01T01:30:00.000+05:30"),  # 20:00Z
             assistant("m2", "r2", usage(1, 1), ts="2026-11-30T20:10:00.000Z"),
             assistant("m3", "r3", usage(1, 1), ts="not-a-time"),
             assistant("m4", "r4", usage(1, 1), ts="0000")]
    run = parse_bytes(jsonl(lines))
    assert run.started_at == datetime(2026, 11, 30, 20, 0) and run.ended_at == datetime(2026, 11, 30, 20, 10)
    # read in two parts (an append collected later), the same
    parser = TranscriptParser()
    for raw in jsonl(lines[:2]).splitlines(keepends=True):
        parser.feed(raw)
    resumed = TranscriptParser(state=json.loads(json.dumps(parser.state())))
    for raw in jsonl(lines[2:]).splitlines(keepends=True):
        resumed.feed(raw)
    done = resumed.result()
    assert (done.started_at, done.ended_at) == (run.started_at, run.ended_at)


GH_KEY = "ghp_" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"  # a GitHub token's shape: 36 letters and digits


@pytest.mark.parametrize(("cwd", "stored", "leak"), [
    (f"/home/u/proj-{GH_KEY}", "/home/u/proj-[REDACTED]", GH_KEY[4:]),
    ("/srv/token=SuperSecretValue123/app", "/srv/token=[REDACTED]", "SuperSecretValue123"),
    ("/home/dev/my proj/café-2", "/home/dev/my proj/café-2", None),  # no secret: as it was written
])
def test_a_secret_in_the_project_directory_is_redacted_as_in_a_path(cwd: str, stored: str, leak: str | None) -> None:
    """The run's cwd is stored (session_runs.project, the parser state) with a key or password in
    it redacted, as the trace digest's paths are; a cwd without one is kept as it is."""
    lines = [prompt("go"), assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Write", file_path=f"{cwd}/a.py")]),
             tool_result("t1", "ok")]
    for line in lines:
        line["cwd"] = cwd
    parser = TranscriptParser()
    for raw in jsonl(lines).splitlines(keepends=True):
        parser.feed(raw)
    run = parser.result()
    assert run.cwd == stored
    if leak:
        assert leak not in json.dumps([run.cwd, run.trace_digest, parser.state()])
    # a state kept before the cwd was redacted is redacted when the parse resumes from it
    state = {**json.loads(json.dumps(parser.state())), "cwd": cwd}
    assert TranscriptParser(state=state).result().cwd == stored


def _parse_in_parts(data: bytes, cuts: list[int]) -> "tuple[list, object]":
    """Parse ``data`` in reads ending at ``cuts`` (each resumed from the last one's JSON state)."""
    runs, state, start = [], None, 0
    for end in [*cuts, len(data)]:
        parser = TranscriptParser(state=state, start_offset=start)
        offset = start
        for raw in data[start:end].splitlines(keepends=True):
            offset += len(raw)
            parser.feed(raw, end_offset=offset)
        runs.append(parser.result())
        state, start = json.loads(json.dumps(parser.state())), end
    return runs, runs[-1]


def test_a_response_cut_between_its_lines_is_judged_whole_by_the_placeholder_check() -> None:
    """Claude Code writes a response as several lines, the first with a placeholder output count
    (1): a read that stops between them must not judge that part alone (a placeholder), nor count
    the response twice — every way of cutting gives the whole read's verdict and counts."""
    long_text = "x" * 2000
    lines = [prompt("go"),
             assistant("m1", "r1", usage(5, 1), [{"type": "text", "text": long_text}]),
             assistant("m1", "r1", usage(5, 600), [tool_use("t1", "Read", file_path="/a.py")]),
             tool_result("t1", "abc"),
             assistant("m2", "r2", usage(5, 1), [{"type": "text", "text": long_text}]),  # a placeholder for real
             assistant("m3", "r3", usage(5, 700), [{"type": "text", "text": long_text}], stop_reason="end_turn")]
    data = jsonl(lines)
    full = parse_bytes(data)
    assert full.placeholder_turns == 1  # m2; m1's first line alone would be another
    bounds = [len(jsonl(lines[:i])) for i in range(1, len(lines))]
    for first in bounds:
        for second in [b for b in bounds if b > first] + [None]:
            runs, last = _parse_in_parts(data, [first] if second is None else [first, second])
            assert (last.placeholder_turns, last.placeholder_output) == (1, full.placeholder_output), (first, second)
            # each read on its own says what a whole read of the bytes so far would
            assert runs[0].placeholder_output == parse_bytes(data[:first]).placeholder_output
