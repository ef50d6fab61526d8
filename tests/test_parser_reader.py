"""The C record reader (warden/ingest/_reader.c) against the pure-Python parser, its specification:
generated transcripts — every record shape the parser reads, with odd values, escapes, text that is
not UTF-8, duplicated fields and bytes mutated at random — parse to the same run and the same state
on both paths, whole or resumed, in full and in ledger-only parses."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import warden.ingest.collector as collector
import warden.ingest.transcripts as transcripts
from warden.ingest.collector import discover_transcripts, parse_file
from warden.ingest.parser import TranscriptParser, fast_path

skim = pytest.importorskip("warden.ingest._skim", reason="the C fast path is not built (no compiler at install)")


def test_the_fast_path_is_built_where_there_is_a_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An install with a compiler builds it (setup.py); every parser then reads through it."""
    monkeypatch.delenv("WARDEN_PURE_PYTHON", raising=False)
    assert fast_path() is skim
    assert isinstance(TranscriptParser()._reader, skim.Reader)


def test_warden_pure_python_turns_the_fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDEN_PURE_PYTHON", "1")
    assert fast_path() is None and TranscriptParser()._reader is None

_TEXT = st.text(st.sampled_from(list("ab \n\t\"\\/é€😀") + ["\x00", "\x01", "\u2028", "\u00a0", "\u3000", "\ufeff"]),
                max_size=12)
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(10**15 - 1, 10**15 + 1),
                    st.integers(2**63, 2**64), st.sampled_from([0.0, 1.0, 2.5, -0.0, 1e300]), _TEXT,
                    st.sampled_from(["12", "007", "１２", "", "abc"]))
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.sampled_from(["a", "b", "type", "data"]),
                                                                      inner, max_size=3)), max_leaves=6)


def _mostly(good: st.SearchStrategy[Any], odd: st.SearchStrategy[Any] = _SCALAR) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else ``odd``: lines mostly of the shapes Claude Code writes
    (which the C reader reads itself), with odd values often enough to reach every fallback."""
    return st.integers(0, 9).flatmap(lambda i: good if i else odd)


_WORDS = st.text(st.sampled_from(list("abc xyz\n\t\"\\/é€😀") + ["\u2028", "\u00a0", "\x01"]), max_size=40)
# long texts too: past the SIMD scan's 16 bytes, and past the heads' cuts (2048 and 4096 characters)
_WORDS = st.one_of(_WORDS, _WORDS, st.tuples(_WORDS, st.sampled_from([3, 60, 300])).map(lambda t: (t[0] or "x") * t[1]))
_IDS = st.sampled_from(["t1", "t2", "t3"])
_TIMESTAMP = _mostly(st.sampled_from(["2026-01-01T10:00:00.000Z", "2026-01-01T09:00:00.000Z", "2026-01-01T11:30:00.000Z"]),
                     st.one_of(st.sampled_from(["2026-01-01T10:00:00Z", "2026-01-01T12:00:00+02:00", "not a time", "",
                                                "2026-02-30T10:00:00.000Z", "2026-01-01T10:00:00.00éZ"]), _SCALAR))


def _object(required: dict[str, st.SearchStrategy[Any]],
            optional: dict[str, st.SearchStrategy[Any]] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with ``required`` and a random subset of ``optional``, in random order (mostly)."""
    optional = optional or {}
    return st.tuples(st.lists(st.sampled_from(sorted(optional)), unique=True) if optional else st.just([]),
                     st.booleans()).flatmap(
        lambda picked: st.permutations([*required, *picked[0]]).flatmap(
            lambda order: st.tuples(*[{**optional, **required}[k] for k in order]).map(
                lambda values: dict(zip(order, values)))) if picked[1] else
        st.tuples(*[{**optional, **required}[k] for k in [*required, *picked[0]]]).map(
            lambda values, keys=[*required, *picked[0]]: dict(zip(keys, values))))


_INPUT = _object({}, {"file_path": _mostly(st.sampled_from(["/a.py", "/b/c.py", ""])),
                      "path": _mostly(st.just("/b")), "notebook_path": st.just("/n.ipynb"),
                      "offset": _mostly(st.one_of(st.integers(-2, 12), st.just("5"), st.just("12345678901"))),
                      "limit": _mostly(st.integers(0, 5)), "pattern": _mostly(st.just("def x")),
                      "command": _mostly(st.one_of(st.just("ls -la"), _WORDS)),
                      "subagent_type": _mostly(st.sampled_from(["explorer", " x\u200b "])),
                      "content": _mostly(_WORDS, _VALUE), "edits": _VALUE})
_TOOL_USE = _object({"type": st.just("tool_use"), "id": _mostly(_IDS), "input": _mostly(_INPUT)},
                    {"name": st.sampled_from(["Read", "Edit", "Write", "Bash", "Grep", "Glob", "Task", "LS", "Mystery"])})
_TEXT_BLOCK = _object({"type": st.just("text"), "text": _mostly(st.one_of(_WORDS, st.just("  \n")), _TEXT)})
_THINKING = _object({"type": st.just("thinking"), "thinking": _mostly(_WORDS)}, {"signature": st.just("c2ln")})
_ITEM = _object({"type": st.sampled_from(["text", "image", "other"])},
                {"text": _mostly(_WORDS), "source": _mostly(_object({"data": _mostly(st.just("QUJD"))},
                                                                    {"type": st.just("base64")})),
                 "cache_control": _VALUE})
_RESULT = _object({"type": st.just("tool_result"), "tool_use_id": _mostly(_IDS)},
                  {"content": _mostly(st.one_of(_WORDS, st.just("[Request interrupted by user for tool use]"),
                                                st.lists(_mostly(_ITEM), max_size=3))),
                   "is_error": _mostly(st.booleans())})
_USAGE = _object({"input_tokens": _mostly(st.integers(0, 50)), "output_tokens": _mostly(st.integers(0, 50)),
                  "cache_creation_input_tokens": _mostly(st.integers(0, 9)),
                  "cache_creation": _mostly(_object({}, {"ephemeral_5m_input_tokens": _mostly(st.integers(0, 5)),
                                                         "ephemeral_1h_input_tokens": _mostly(st.integers(0, 5))}))},
                 {"cache_read_input_tokens": _mostly(st.integers(0, 900)), "service_tier": st.just("standard")})
_ASSISTANT = _object({"type": st.just("assistant"), "message": _mostly(_object(
    {"id": _mostly(st.sampled_from(["m1", "m2", "m3"]), st.one_of(st.just("m\x004"), _SCALAR)),
     "content": _mostly(st.lists(_mostly(st.one_of(_TEXT_BLOCK, _TOOL_USE, _THINKING)), max_size=3), _WORDS)},
    {"model": _mostly(st.sampled_from(["claude-sonnet-4-6", "claude-opus-4-6", "<synthetic>"]),
                      st.sampled_from(["bad\x07model", "", "ünï"])),
     "role": st.just("assistant"), "usage": _mostly(_USAGE),
     "stop_reason": _mostly(st.sampled_from(["end_turn", "tool_use", "stop_sequence"]))}))},
    {"requestId": _mostly(st.sampled_from(["r1", "r2"])), "timestamp": _TIMESTAMP})
_USER = _object({"type": st.just("user"), "message": _mostly(_object(
    {"content": _mostly(st.lists(_mostly(st.one_of(_RESULT, _TEXT_BLOCK)), max_size=3),
                        st.one_of(_WORDS, st.sampled_from(["<command-name>x", "Caveat: y", "[Request interrupted by user]"])))},
    {"role": st.just("user")}))},
    {"timestamp": _TIMESTAMP, "isMeta": _mostly(st.booleans()), "isCompactSummary": _mostly(st.just(False), st.booleans()),
     "toolUseResult": _mostly(_VALUE, st.just({"agentId": "a7"}))})
_OTHER = _object({"type": st.sampled_from(["progress", "system", "attachment", "summary"])},
                 {"subtype": st.sampled_from(["compact_boundary", "informational"]), "timestamp": _TIMESTAMP,
                  "data": st.one_of(_VALUE, st.just({"message": {"type": "assistant", "requestId": "r9", "message": {
                      "id": "m9", "model": "claude-haiku-4-5", "usage": {"input_tokens": 1, "output_tokens": 2}}},
                      "agentId": "a1"})), "parentToolUseID": _mostly(_IDS)})
_COMMON = {"sessionId": _mostly(st.sampled_from(["s1", "s2"]), st.just("s:2")), "agentId": _mostly(st.just("a1")),
           "isSidechain": _mostly(st.booleans()), "cwd": _mostly(st.sampled_from(["/home/u/p", "/srv/x?password=hunter2hunter2"])),
           "version": _mostly(st.sampled_from(["2.0.1", "2.1.0"])), "uuid": _mostly(st.just("u1")),
           "gitBranch": st.just("main"), "userType": st.just("external")}
_LINE = st.tuples(st.one_of(_ASSISTANT, _ASSISTANT, _USER, _USER, _OTHER), _object({}, _COMMON)).map(
    lambda parts: {**parts[1], **parts[0]})

_MUTATIONS = _mostly(st.none(), st.one_of(
    st.tuples(st.just("byte"), st.integers(0, 10**6), st.sampled_from([b"\xff", b"\x00", b"\\", b'"', b"}", b"\xc3", b"1"])),
    st.tuples(st.just("dup"), st.just(0), st.sampled_from([b'"type":"user"', b'"message":null', b'"sessionId":"s9"',
                                                           b'"timestamp":"2026-01-01T11:00:00.000Z"'])),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(b""))))


def _encode(line: dict[str, Any], ascii_only: bool, spaced: bool, mutation: Any) -> bytes:
    try:
        text = json.dumps(line, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
    except ValueError:  # a float json refuses (never drawn) — no line
        return b""
    raw = text.encode("utf-8", "surrogatepass")
    if mutation is None:
        return raw
    kind, at, piece = mutation
    if kind == "byte" and raw:
        i = at % len(raw)
        return raw[:i] + piece + raw[i + 1:]
    if kind == "dup" and raw.endswith(b"}") and len(raw) > 2:
        return raw[:-1] + b"," + piece + b"}"
    if kind == "cut" and raw:
        return raw[:at % len(raw)]
    return raw


def _parse(path: Path, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any], int]:
    if "state" in kwargs:
        kwargs["state"] = copy.deepcopy(kwargs["state"])
    run, state, end = parse_file(str(path), **kwargs)
    return dataclasses.asdict(run), state, end


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(st.tuples(_LINE, st.booleans(), st.booleans(), _MUTATIONS), min_size=1, max_size=12),
       chunk=st.sampled_from([64, 4096]), cut=st.integers(0, 10**6))
def test_generated_transcripts_parse_the_same_on_both_paths(tmp_path_factory: pytest.TempPathFactory,
                                                            lines: list[Any], chunk: int, cut: int) -> None:
    data = b"\n".join(_encode(*line) for line in lines) + b"\n"
    path = tmp_path_factory.mktemp("gen") / "s1.jsonl"
    path.write_bytes(data)
    plain_chunk = transcripts.READ_CHUNK
    transcripts.READ_CHUNK = chunk
    try:
        for ledger_only in (False, True):
            assert _parse(path, ledger_only=ledger_only) == _parse(path, ledger_only=ledger_only, pure=True)
        # read up to a cut, then resumed from the state the other path left: alike too
        path.write_bytes(data[:cut % (len(data) + 1)])
        first, state, _end = parse_file(str(path), pure=True)
        path.write_bytes(data)
        for ledger_only in (False, True):
            assert _parse(path, start=first.bytes_consumed, state=state, ledger_only=ledger_only) == \
                   _parse(path, start=first.bytes_consumed, state=state, ledger_only=ledger_only, pure=True)
    finally:
        transcripts.READ_CHUNK = plain_chunk


def test_the_reader_reads_claude_code_lines_itself(monkeypatch: pytest.MonkeyPatch, corpus: Path) -> None:
    """The fast path is the common path: of the corpus's lines, only the rare shapes it leaves to
    the Python parser get there (a Task result whose toolUseResult it cannot read as orjson does,
    a progress line's response)."""
    fallbacks: list[bytes] = []
    feed_fallback = TranscriptParser._feed_fallback

    def counted(self: TranscriptParser, line: bytes, end_offset: int) -> None:
        fallbacks.append(line)
        feed_fallback(self, line, end_offset)

    monkeypatch.setattr(TranscriptParser, "_feed_fallback", counted)
    lines = 0
    for path in collector.discover_transcripts([corpus]):
        run, _state, _end = parse_file(str(path))
        lines += run.stats.lines
    assert lines > 2000
    assert len(fallbacks) < lines / 100
    assert all(b'"toolUseResult"' in line or b'"type":"progress"' in line for line in fallbacks)


def test_a_state_that_is_not_the_parsers_own_is_read_by_the_python_parser(tmp_path: Path) -> None:
    """A stored state whose values were tampered with (a digest position that is no index) is read
    line by line in Python, which the C reader never second-guesses: both paths agree."""
    line = (b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},'
            b'"timestamp":"2026-01-01T10:00:00.000Z"}\n')
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line)
    state = {"awaiting": {"t1": -1}, "digest": [["read", "/a", 3, 0, 0]], "counters": {"tool_calls": 1}}
    assert _parse(path, state=state) == _parse(path, state=state, pure=True)


_SCENARIO = [  # every branch of the reader, in lines as Claude Code writes them
    {"type": "user", "sessionId": "s1", "cwd": "/home/u/p", "version": "2.0.1", "timestamp": "2026-01-01T10:00:00.000Z",
     "message": {"role": "user", "content": "fix the bug in a.py\n"}},
    {"type": "user", "isMeta": True, "message": {"content": "meta"}, "timestamp": "2026-01-01T09:59:00.000Z"},
    {"type": "user", "message": {"content": [{"type": "text", "text": "<command-name>/clear"}, {"type": "text",
                                                                                               "text": " \u3000 "}]}},
    *[{"type": "assistant", "requestId": "r1", "timestamp": "2026-01-01T10:00:01.000Z",
       "message": {"id": "m1", "model": "claude-sonnet-4-6", "stop_reason": None, "usage": {
           "input_tokens": 3, "output_tokens": out, "cache_creation_input_tokens": 9, "cache_read_input_tokens": 100,
           "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 4}}, "content": [block]}}
      for out, block in [(1, {"type": "thinking", "thinking": "hmm é😀" * 50, "signature": "c2ln"}),
                         (1, {"type": "text", "text": "Let me look.\n" + "x" * 5000}),
                         (40, {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a.py"}}),
                         (40, {"type": "tool_use", "id": "t2", "name": "Read",
                               "input": {"file_path": "/a.py", "offset": "5", "limit": 10}})]],
    {"type": "user", "timestamp": "2026-01-01T10:00:02.000Z", "toolUseResult": {"file": {"content": "x"}},
     "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "line\n" * 600},
                             {"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": [
                                 {"type": "text", "text": "plain ascii"}, {"type": "image", "source": {"data": "QUJD"}},
                                 {"type": "text", "text": "é" * 3000}]}]}},
    {"type": "assistant", "requestId": "r2", "timestamp": "2026-01-01T10:00:03.000Z",
     "message": {"id": "m2", "model": "claude-sonnet-4-6", "stop_reason": "tool_use", "usage": {
         "input_tokens": 5, "output_tokens": 60}, "content": [
         {"type": "tool_use", "id": "t3", "name": "Read", "input": {"file_path": "/a.py"}},
         {"type": "tool_use", "id": "t4", "name": "Edit", "input": {"file_path": "/a.py", "old_string": "a\tb",
                                                                       "new_string": "c\u0001d", "replace_all": False}},
         {"type": "tool_use", "id": "t5", "name": "Read", "input": {"file_path": "/a.py"}},
         {"type": "tool_use", "id": "t6", "name": "Bash", "input": {"command": "pytest -q -k 'not slow'", "timeout": 120000}},
         {"type": "tool_use", "id": "t7", "name": "Grep", "input": {"pattern": "def \\w+", "path": "/src"}},
         {"type": "tool_use", "id": "t8", "name": "Task", "input": {"subagent_type": "explorer", "prompt": "look"}},
         {"type": "tool_use", "id": "t8", "name": "Task", "input": {"subagent_type": "explorer", "prompt": "look"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t6",
                                              "content": "[Request interrupted by user for tool use]"}]}},
    {"type": "user", "toolUseResult": {"agentId": "a7"}, "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t8", "content": [{"type": "text", "text": "done"}]}]}},
    {"type": "progress", "parentToolUseID": "t8", "data": {"agentId": "a7", "message": {
        "type": "assistant", "requestId": "r9", "timestamp": "2026-01-01T10:00:04.000Z",
        "message": {"id": "m9", "model": "claude-haiku-4-5", "usage": {"input_tokens": 1, "output_tokens": 2}}}}},
    {"type": "progress", "data": {"type": "hook_progress", "hookEvent": "Stop"}},
    {"type": "system", "subtype": "compact_boundary", "version": "2.1.0", "timestamp": "2026-01-01T10:00:05.000Z"},
    {"type": "user", "isCompactSummary": True, "message": {"content": "summary of before"}},
    {"type": "assistant", "requestId": "r3", "message": {"id": "m3", "model": "<synthetic>", "usage": {
        "input_tokens": -1, "output_tokens": 0}, "content": [{"type": "text", "text": "No response requested."}]}},
    {"type": "assistant", "message": {"id": "m4", "model": "claude-opus-4-6", "stop_reason": "end_turn",
                                      "usage": {"input_tokens": 7, "output_tokens": 9}, "content": "Done."}},
]


@pytest.mark.parametrize("ascii_only", [True, False])
@pytest.mark.parametrize("ledger_only", [True, False])
def test_a_session_of_every_shape_parses_the_same_on_both_paths(tmp_path: Path, ascii_only: bool,
                                                                 ledger_only: bool) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(json.dumps(line, ensure_ascii=ascii_only).encode() + b"\n" for line in _SCENARIO))
    fast, pure = _parse(path, ledger_only=ledger_only), _parse(path, ledger_only=ledger_only, pure=True)
    assert fast == pure
    run = fast[0]
    if ledger_only:  # what the ledger reads of a whole parse: all but its per-model sums, kept per turn
        whole, _state, _end = parse_file(str(path), pure=True)
        view = dataclasses.replace(whole.ledger_view(), usage_by_model={}, turn_usage=whole.usage_of_turns())
        assert run == dataclasses.asdict(view)
    assert run["counters"] == {"tool_calls": 8, "file_reads": 4, "rereads": 1, "greps": 1, "edits": 1,
                               "failed_tool_results": 1}
    assert run["compactions"] == 2 and run["subagent_types"] == {"a7": "explorer"}


def test_every_corpus_transcript_parses_the_same_on_both_paths(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = discover_transcripts([corpus])
    assert len(files) >= 20
    for chunk in (transcripts.READ_CHUNK, 4096, 97):  # small reads: lines split across blocks and carried
        monkeypatch.setattr(transcripts, "READ_CHUNK", chunk)
        for path in files:
            assert _parse(path) == _parse(path, pure=True), path
    monkeypatch.setattr(transcripts, "READ_CHUNK", 4096)
    for path in files[:6]:  # lines over the cap skipped unread, on both paths alike
        assert _parse(path, max_line=3000) == _parse(path, pure=True, max_line=3000), path


_ODD_LINES = [
    b'{"type":"assistant","sessionId":"s1","timestamp":"2026-01-01T00:00:01.000Z","requestId":"r1",'
    b'"message":{"id":"m1","model":"claude-sonnet-4-6","usage":{"input_tokens":3,"output_tokens":5},'
    b'"content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a.py"}}]}}',
    b'{"type":"user","sessionId":"s1","message":{"role":"user","content":[{"type":"tool_result",'
    b'"tool_use_id":"t1","content":"ok \xc3\xa9"}]}}',
    b'{"type":"user","message":{"content":"caf\xe9 \xff"}}',  # not UTF-8
    b"\xef\xbb\xbf" + b'{"type":"system","subtype":"compact_boundary"}',  # BOM
    b'{"type":"summary","summary":"x"}\r',  # CRLF
    b"", b"   ", b"{not json", b"[1, 2]", b'"text"', b'{"type":"file-history-snapshot","x":1}',
    b'{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":30,"output_tokens":1e400}}}',
    b'{"type":"assistant","message":"not an object"}',
    # tool results' content, read from its raw JSON: escapes, pairs, lists, odd shapes, refused text
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"a\\n\\"b\\u00e9\\ud83d\\ude00"}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"},'
    b'3,{"type":"image","source":{"data":"QUJD"}}]}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":5},{"type":"tool_result",'
    b'"content":null}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"lone \\ud83d here"}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"bad \xed\xa0\x80 \xc0\xaf"}]}}',
    b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"' + b"\xc3\xa9" * 1500 + b'"}]}}',
]


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.sampled_from(_ODD_LINES), max_size=14), terminated=st.booleans(),
       tail=st.sampled_from([b"", b'{"type":"user","message":{"con', b"\xef\xbb"]), chunk=st.sampled_from([64, 4096]),
       cut=st.integers(0, 2000))
def test_odd_transcripts_parse_the_same_on_both_paths(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes],
                                                      terminated: bool, tail: bytes, chunk: int, cut: int) -> None:
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"") + tail
    folder = tmp_path_factory.mktemp("odd")
    path = folder / "s1.jsonl"
    path.write_bytes(data)
    plain_chunk = transcripts.READ_CHUNK
    transcripts.READ_CHUNK = chunk
    try:
        assert _parse(path) == _parse(path, pure=True)
        # written up to any byte, read, then resumed once whole (an incremental ingest): alike too
        path.write_bytes(data[:cut])
        first, state, _end = parse_file(str(path), pure=True)
        path.write_bytes(data)
        assert _parse(path, start=first.bytes_consumed, state=state) == \
               _parse(path, pure=True, start=first.bytes_consumed, state=state)
    finally:
        transcripts.READ_CHUNK = plain_chunk
        shutil.rmtree(folder, ignore_errors=True)


def test_placeholder_verdicts_read_as_the_reference() -> None:
    """The reader's verdicts over a finished parse's turns are the Python ones, on a grid that
    crosses each threshold (8 content tokens, output a quarter of them) and a synthetic reply."""
    from warden.ingest.parser import _fast_reader, _placeholder_verdicts
    from warden.ingest.pricing import Usage
    from warden.ingest.records import Turn

    turns = [Turn(0, f"m{i}", model, Usage(output_tokens=output), None, "", [], content)
             for i, (model, output, content) in enumerate(
                 (model, output, content) for model in ("claude-sonnet-4-6", "<synthetic>")
                 for output in range(0, 12) for content in (-5, 0, 1, 28, 29, 32, 33, 36, 37, 40, 41, 4000))]
    reader = _fast_reader(skim)
    for first, last in ((0, len(turns)), (3, 40), (17, 17), (len(turns) - 1, len(turns))):
        assert reader.placeholder_verdicts(turns, first, last) == _placeholder_verdicts(turns[first:last])
    with pytest.raises(ValueError):
        reader.placeholder_verdicts(turns, 5, 2)


@pytest.mark.parametrize("ledger_only", [True, False])
def test_texts_of_megabytes_parse_the_same_on_both_paths(tmp_path: Path, ledger_only: bool) -> None:
    """A command, a prompt and a tool result of megabytes (escapes and multi-byte characters
    throughout): read whole where the parser keeps them whole, cut where it cuts them."""
    big = "line \"é\" \\ 😀\t" * 150_000
    lines = [
        {"type": "user", "message": {"content": big}},
        {"type": "assistant", "requestId": "r1", "message": {"id": "m1", "model": "claude-sonnet-4-6", "usage": {
            "input_tokens": 1, "output_tokens": 2}, "content": [
            {"type": "text", "text": big},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": big}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]}},
    ]
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    fast = _parse(path, ledger_only=ledger_only)
    assert fast == _parse(path, ledger_only=ledger_only, pure=True)
    if not ledger_only:
        assert fast[0]["tool_calls"][0]["command"] == big and fast[0]["tool_calls"][0]["result_bytes"] == len(
            big.encode())


# Pieces of a JSON string's text, as raw bytes: plain runs, every escape (two-byte ones, \u ones,
# a surrogate pair), even runs of backslashes, multi-byte characters; and, in some strings, what
# msgspec refuses or reads apart: bad escapes, lone surrogates, odd runs of backslashes (which
# escape what follows them), raw controls, bytes that are not UTF-8.
_GOOD_PIECES = st.one_of(
    st.sampled_from([b"a", b" ", b"abcdefghijklmnopqrstuvwxyz0123456789", b'\\"', b"\\\\", b"\\/", b"\\n", b"\\t",
                     b"\\b", b"\\f", b"\\r", b"\\u00e9", b"\\u0000", b"\\ud83d\\ude00", b"\xc3\xa9", b"\xe2\x82\xac",
                     b"\xf0\x9f\x98\x80"]),
    st.integers(1, 4).map(lambda n: b"\\\\" * n),
    st.integers(1, 130).map(lambda n: b"x" * n))
_ODD_PIECES = st.one_of(
    st.sampled_from([b"\\ud83d", b"\\ude00", b"\\u12", b"\\uZZZZ", b"\\x", b"\x01", b"\x1f", b"\xff", b"\xc3",
                     b"\xed\xa0\x80"]),
    st.integers(0, 4).map(lambda n: b"\\" * (2 * n + 1)))
_STRING_BODY = _mostly(st.lists(_GOOD_PIECES, max_size=40),
                       st.lists(st.one_of(_GOOD_PIECES, _GOOD_PIECES, _ODD_PIECES), max_size=40)).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(_STRING_BODY, min_size=3, max_size=3), pad=st.integers(0, 63),
       closed=_mostly(st.just(True), st.just(False)))
def test_strings_of_escapes_read_64_bytes_at_a_time_parse_the_same_on_both_paths(
        tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes], pad: int, closed: bool) -> None:
    """The C reader reads a long string 64 bytes at a time, telling its escapes from bit masks:
    strings of every escape, of backslash runs across the blocks' edges, of controls and of text
    that is not UTF-8, at every alignment, in a field it skips, in a text it reads and in a
    command it keeps, parse as the Python parser parses them (whole, or refused alike)."""
    skipped, text, command = bodies
    quote = b'"' if closed else b""
    line = (b'{"type":"assistant","pad":"' + b"p" * pad + b'","toolUseResult":"' + skipped + quote +
            b',"requestId":"r1","message":{"id":"m1","model":"claude-sonnet-4-6","usage":{"input_tokens":1,'
            b'"output_tokens":2},"content":[{"type":"text","text":"' + text + b'"},{"type":"tool_use","id":"t1",'
            b'"name":"Bash","input":{"command":"' + command + b'"}}]}}\n')
    path = tmp_path_factory.mktemp("strings") / "s1.jsonl"
    path.write_bytes(line + line.replace(b'"m1"', b'"m2"'))
    for ledger_only in (False, True):
        assert _parse(path, ledger_only=ledger_only) == _parse(path, ledger_only=ledger_only, pure=True)


@pytest.mark.parametrize("escape", [b'\\"', b"\\\\", b"\\n", b"\\/", b"\\\\\\\\\\\\\\n", b"\\u00e9",
                                    b"\\xn", b"\\a\\\\"])  # the last two: bad escapes, before good characters
def test_an_escape_at_every_offset_of_a_block_parses_the_same_on_both_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, escape: bytes) -> None:
    """An escape at each offset of a string's first 64-byte blocks, the last byte of a block
    included (its character is the next block's first): read by the C reader itself, as the
    Python parser reads it."""
    fallbacks: list[bytes] = []
    feed_fallback = TranscriptParser._feed_fallback
    monkeypatch.setattr(TranscriptParser, "_feed_fallback",
                        lambda self, line, end_offset: fallbacks.append(line) or feed_fallback(self, line, end_offset))
    lines = []
    for offset in range(140):
        body = b"x" * offset + escape + b"y" * 100
        lines.append(b'{"type":"assistant","toolUseResult":"' + body + b'","requestId":"r%d","message":{"id":"m%d",'
                     b'"model":"claude-sonnet-4-6","usage":{"input_tokens":1,"output_tokens":2},"content":[{"type":'
                     b'"text","text":"' % (offset, offset) + body + b'"},{"type":"tool_use","id":"t%d","name":"Bash",'
                     b'"input":{"command":"' % offset + body + b'"}}]}}\n')
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(lines))
    fast = _parse(path)
    assert fast == _parse(path, pure=True)
    assert len(fallbacks) == (len(lines) if escape in (b"\\xn", b"\\a\\\\") else 0)  # refused: the Python parser's


_TASK_CALL = (b'{"type":"assistant","sessionId":"s1","message":{"id":"m1","role":"assistant","model":"claude-opus-4-6",'
              b'"content":[{"type":"tool_use","id":"t1","name":"Task","input":{"subagent_type":"Explore"}},'
              b'{"type":"tool_use","id":"t2","name":"Task","input":{"subagent_type":"Plan"}}],'
              b'"usage":{"input_tokens":1,"output_tokens":2}}}')


def _task_result(tool_use_result: bytes, ids: bytes = b'"t1"') -> bytes:
    blocks = b",".join(b'{"type":"tool_result","tool_use_id":%s,"content":"done"}' % i for i in ids.split(b"|"))
    return b'{"type":"user","sessionId":"s1","message":{"role":"user","content":[%s]},"toolUseResult":%s}' % (
        blocks, tool_use_result)


@pytest.mark.parametrize("tool_use_result, ids, in_c, named", [
    (b'{"status":"completed","agentId":"a7","totalTokens":12,"content":[{"type":"text","text":"x"}]}', b'"t1"', True,
     {"a7": "Explore"}),
    (b'{"agentId":"a1","agentId":"a2"}', b'"t1"', True, {"a2": "Explore"}),  # orjson keeps the last
    (b'{"agentId":"a\\u0037\\u00e9"}', b'"t1"', True, {"a7\u00e9": "Explore"}),  # an escaped value
    (b'{"agentId":"a:b"}', b'"t1"', True, {}), (b'{"agentId":""}', b'"t1"', True, {}),  # not valid ids
    (b'{"agentId":5}', b'"t1"', True, {}), (b'{"agentId":null}', b'"t1"', True, {}), (b'{}', b'"t1"', True, {}),
    (b'["agentId","a7"]', b'"t1"', True, {}), (b'"a7"', b'"t1"', True, {}), (b'null', b'"t1"', True, {}),
    (b'{"agentId":"a7"}', b'"t1"|"t2"', True, {"a7": "Plan"}),  # the last call's type
    (b'{"agentId":"a7"}', b'"t9"', True, {}),  # not a Task's result: nothing to name
    (b'{"agentId":"a7","ms":1.5}', b'"t1"', False, {"a7": "Explore"}),  # a float: left to Python
    (b'{"agentId":"a7","n":123456789012345678901}', b'"t1"', False, {"a7": "Explore"}),  # orjson: a float
    (b'{"agentId":"a7","x":"\xff"}', b'"t1"', False, {}),  # not UTF-8: orjson refuses it all
    # a lone surrogate: the line is read as text that is not UTF-8 (non_utf8), the surrogate replaced
    (b'{"agentId":"a7","x":"\\ud800"}', b'"t1"', False, {"a7": "Explore"}),
    (b'{"agent\\u0049d":"a7"}', b'"t1"', False, {"a7": "Explore"}),  # an escaped key spelling agentId
    (b'{"agentId":"a7","deep":' + b"[" * 70 + b"]" * 70 + b"}", b'"t1"', False, {"a7": "Explore"}),
])
def test_a_task_result_names_its_subagent_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         tool_use_result: bytes, ids: bytes, in_c: bool,
                                                         named: dict[str, str]) -> None:
    """The subagent a Task result's toolUseResult names takes its call's type, as the Python parser
    reads it (orjson): read in C where the scan reads it as orjson does, else left to Python."""
    path = tmp_path / "s1.jsonl"
    path.write_bytes(_TASK_CALL + b"\n" + _task_result(tool_use_result, ids) + b"\n")
    fallbacks: list[bytes] = []
    feed_fallback = TranscriptParser._feed_fallback
    monkeypatch.setattr(TranscriptParser, "_feed_fallback",
                        lambda self, line, end: fallbacks.append(line) or feed_fallback(self, line, end))
    for ledger_only in (False, True):
        fast, pure = _parse(path, ledger_only=ledger_only), _parse(path, ledger_only=ledger_only, pure=True)
        assert fast == pure
        assert fast[0]["subagent_types"] == named
    assert (fallbacks == []) == in_c
