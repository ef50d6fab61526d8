"""The C fast path (warden/ingest/_skim.c) against the pure-Python reference: the same lines
framed, the same parse of every transcript — odd lines (BOM, CRLF, blank, truncated, non-UTF-8,
malformed, oversized) included — whichever path reads it."""

from __future__ import annotations

import copy
import json
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warden.ingest.collector as collector
from warden.ingest.collector import _split_lines_py, discover_transcripts, parse_file

skim = pytest.importorskip("warden.ingest._skim", reason="the C fast path is not built (no compiler at install)")


def _parse(path: Path, *, pure: bool, start: int = 0, state: dict[str, Any] | None = None,
           max_line: int = collector.MAX_LINE_BYTES) -> tuple[dict[str, Any], dict[str, Any], int]:
    # a parser resumes on (and updates) the very state it is given: each parse gets its own copy
    run, parser_state, end = parse_file(str(path), start=start, state=copy.deepcopy(state), max_line=max_line,
                                        pure=pure)
    return dataclasses.asdict(run), parser_state, end


def test_the_fast_path_is_built_where_there_is_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install with a compiler builds it (setup.py); the collector then uses it."""
    monkeypatch.delenv("WARDEN_PURE_PYTHON", raising=False)
    assert collector._fast_split_lines() is skim.split_lines


def test_warden_pure_python_turns_the_fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDEN_PURE_PYTHON", "1")
    assert collector._fast_split_lines() is None


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"\n", b"\r", b"{", b"}", b"x", b"\xef\xbb\xbf", b"\xff", b"  "]), max_size=60)
       .map(b"".join), offset=st.integers(0, 2**40), max_line=st.integers(0, 8), cut=st.integers(0, 100))
def test_split_lines_frames_as_the_reference(data: bytes, offset: int, max_line: int, cut: int) -> None:
    upto = min(cut, len(data))
    assert skim.split_lines(data, upto, offset, max_line) == _split_lines_py(data, upto, offset, max_line)


def test_split_lines_refuses_a_bound_outside_the_data() -> None:
    with pytest.raises(ValueError):
        skim.split_lines(b"a\nb", 4, 0, 10)


def test_every_corpus_transcript_parses_the_same_on_both_paths(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = discover_transcripts([corpus])
    assert len(files) >= 20
    for chunk in (collector.READ_CHUNK, 4096, 97):  # small reads: lines split across blocks and carried
        monkeypatch.setattr(collector, "READ_CHUNK", chunk)
        for path in files:
            assert _parse(path, pure=False) == _parse(path, pure=True), path
    monkeypatch.setattr(collector, "READ_CHUNK", 4096)
    for path in files[:6]:  # lines over the cap skipped unread, on both paths alike
        assert _parse(path, pure=False, max_line=3000) == _parse(path, pure=True, max_line=3000), path


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
    plain_chunk = collector.READ_CHUNK
    collector.READ_CHUNK = chunk
    try:
        assert _parse(path, pure=False) == _parse(path, pure=True)
        # written up to any byte, read, then resumed once whole (an incremental ingest): alike too
        path.write_bytes(data[:cut])
        first, state, _end = parse_file(str(path), pure=True)
        path.write_bytes(data)
        assert _parse(path, pure=False, start=first.bytes_consumed, state=state) == \
               _parse(path, pure=True, start=first.bytes_consumed, state=state)
    finally:
        collector.READ_CHUNK = plain_chunk
        shutil.rmtree(folder, ignore_errors=True)


_COUNT = st.one_of(st.none(), st.booleans(), st.integers(-5, 10), st.integers(10**15 - 2, 10**15 + 2),
                   st.integers(2**63 - 2, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, 3.0, 3.5, 1e15, 1e15 - 1]), st.text(max_size=2), st.just([1]))
_USAGE_KEYS = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
_SPLIT_KEYS = ["ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"]


@settings(max_examples=500, deadline=None)
@given(counts=st.dictionaries(st.sampled_from(_USAGE_KEYS + ["service_tier"]), _COUNT),
       split=st.one_of(st.none(), _COUNT, st.dictionaries(st.sampled_from(_SPLIT_KEYS + ["x"]), _COUNT)),
       with_split=st.booleans())
def test_usage_counts_reads_as_the_reference(counts: dict[str, Any], split: Any, with_split: bool) -> None:
    from warden.ingest.parser import _usage_counts_py

    raw = {**counts, "cache_creation": split} if with_split else counts
    assert skim.usage_counts(raw) == _usage_counts_py(raw)


_TEXT_PIECES = st.one_of(st.text(max_size=8), st.sampled_from(["\\n", '\\"', "\\\\", "\\/", "\\b\\f\\r\\t", "\\u00e9",
                                                             "\\u0000", "\\uD83D\\uDE00", "\\ud83d", "\\ude00", "\\u12",
                                                             "\\x", "\x01", '"', "\\"]))
_BYTE_PIECES = st.sampled_from([b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\xaf",
                                b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\xff", b"\xc3", b"\x7f"])


@settings(max_examples=1500, deadline=None)
@given(pieces=st.lists(st.one_of(_TEXT_PIECES.map(lambda t: t.encode("utf-8", "surrogatepass")), _BYTE_PIECES),
                       max_size=40),
       ascii_only=st.booleans(), quoted=st.booleans(), max_chars=st.sampled_from([0, 1, 3, 8, 2048]))
def test_string_text_reads_as_the_reference_or_leaves_it_the_value(pieces: list[bytes], ascii_only: bool,
                                                                   quoted: bool, max_chars: int) -> None:
    """Wherever the C reader answers, the reference (decode, then size and cut) answers the same;
    it answers every JSON string the reference decodes; and it leaves every value the
    reference refuses to it (None), so a refused text fails the line's decode as before."""
    import msgspec

    from warden.ingest.parser import _utf8_size_py

    body = b"".join(pieces)
    raw = b'"' + body + b'"' if quoted else body
    try:
        text = msgspec.json.decode(raw, type=str)
    except (msgspec.DecodeError, msgspec.ValidationError):
        assert skim.string_text(raw, max_chars) is None
    else:
        assert skim.string_text(raw, max_chars) == (_utf8_size_py(text), text[:max_chars])
    # a decodable text written by an encoder, escaped or not, is always read by C
    text = body.decode("utf-8", "replace")
    encoded = json.dumps(text, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    expected = msgspec.json.decode(encoded, type=str)  # no lone surrogate: decoded text has none
    assert skim.string_text(encoded, max_chars) == (_utf8_size_py(expected), expected[:max_chars])


def test_string_text_leaves_other_values_and_checks_its_limit() -> None:
    for raw in (b"", b'"', b"5", b"null", b"[]", b'["a"]', b'{"a":1}', b'"a" ', b' "a"', b'"a"b"'):
        assert skim.string_text(raw, 10) is None, raw
    assert skim.string_text(b'""', 10) == (0, "")
    with pytest.raises(ValueError):
        skim.string_text(b'"a"', -1)
    with pytest.raises(TypeError):
        skim.string_text("not bytes", 10)


def test_read_results_reads_only_a_user_lines_tool_results() -> None:
    import msgspec

    from warden.ingest import parser

    line = (b'{"type":"user","message":{"content":[{"type":"text","text":"hi","content":"kept raw"},'
            b'{"type":"tool_result","content":"ok"},{"type":"tool_result","content":[{"type":"text","text":"ab"}]},'
            b'{"type":"tool_result"}]}}')
    seen: list[bytes] = []

    def reference(raw: msgspec.Raw) -> tuple[int, str]:
        seen.append(bytes(raw))
        return parser._result_text_py(raw)

    fast, pure = parser._LINE_DECODER.decode(line), parser._LINE_DECODER.decode(line)
    skim.read_results(fast, parser.MAX_RESULT_TEXT, reference)
    parser._read_results_py(pure, parser.MAX_RESULT_TEXT, parser._result_text_py)
    blocks = fast.message.content
    assert [b.content for b in blocks[1:]] == [b.content for b in pure.message.content[1:]] == [(2, "ok"), (2, "ab"), (0, "")]
    assert bytes(blocks[0].content) == b'"kept raw"'  # not a tool result: never read
    assert seen == [b'[{"type":"text","text":"ab"}]', b""]  # C read the string itself; the rest went to the reference
    for other in (b'{"type":"assistant","message":{"content":[{"type":"tool_result","content":"x"}]}}',
                  b'{"type":"user","message":{"content":"text"}}', b'{"type":"user"}'):
        record = parser._LINE_DECODER.decode(other)
        assert skim.read_results(record, 10, reference) is None
    assert len(seen) == 2
    failing = parser._LINE_DECODER.decode(b'{"type":"user","message":{"content":[{"type":"tool_result","content":"\xff"}]}}')
    with pytest.raises(msgspec.DecodeError):  # the reference's refusal comes through
        skim.read_results(failing, 10, parser._result_text_py)


def test_usage_counts_takes_only_a_dict() -> None:
    with pytest.raises(TypeError):
        skim.usage_counts([1])


# every width a code point's UTF-8 takes, lone and paired surrogates, and each str storage kind
_CHARS = st.one_of(st.characters(max_codepoint=0x7f), st.characters(min_codepoint=0x80, max_codepoint=0xff),
                   st.characters(min_codepoint=0x100, max_codepoint=0xffff), st.characters(min_codepoint=0x10000),
                   st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00", "\x00", "\u07ff", "\u0800", "\U0010ffff"]))


@settings(max_examples=1000, deadline=None)
@given(text=st.lists(_CHARS, max_size=60).map("".join))
def test_utf8_size_counts_as_the_reference(text: str) -> None:
    from warden.ingest.parser import _utf8_size_py

    assert skim.utf8_size(text) == _utf8_size_py(text) == len(text.encode("utf-8", "surrogatepass"))


def test_utf8_size_takes_only_a_str() -> None:
    with pytest.raises(TypeError):
        skim.utf8_size(b"abc")


def _builders() -> list[tuple[type, Any]]:
    """(class, its C builder) of each record the parser builds."""
    from warden.ingest.parser import _record_builders

    built = list(zip(_record_builders(None), _record_builders(skim)))
    assert all(type(build) is skim.Builder for _, build in built)  # every one takes the fast build
    return built


_VALUE = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_VALUE, min_size=15, max_size=15))
def test_slot_builders_build_what_the_classes_do(values: list[Any]) -> None:
    import pickle

    for cls, build in _builders():
        args = values[:len(dataclasses.fields(cls))]
        made, expected = build(*args), cls(*args)
        assert type(made) is cls and made == expected and repr(made) == repr(expected)
        assert all(getattr(made, f.name) is getattr(expected, f.name) for f in dataclasses.fields(cls))
        assert pickle.loads(pickle.dumps(made)) == expected


def test_slot_builder_refuses_other_layouts_and_counts() -> None:
    from warden.ingest.pricing import ModelPrice, Usage
    from warden.ingest.records import LineStats

    for cls, names in [(dict, ()), (LineStats, tuple(f.name for f in dataclasses.fields(LineStats))),
                       (ModelPrice, tuple(f.name for f in dataclasses.fields(ModelPrice))),
                       (Usage, ("input_tokens",)), (Usage, ("a", "b", "c", "d", "e"))]:
        with pytest.raises(TypeError):
            skim.slot_builder(cls, names)
    build = skim.slot_builder(Usage, tuple(f.name for f in dataclasses.fields(Usage)))
    with pytest.raises(TypeError):
        build(1, 2, 3, 4)
    with pytest.raises(TypeError):
        build(1, 2, 3, 4, 5, x=1)
    with pytest.raises(dataclasses.FrozenInstanceError):  # still frozen
        build(1, 2, 3, 4, 5).input_tokens = 0  # type: ignore[misc]


# Claude Code's form, its look-alikes (other digits, separators, lengths) and impossible dates
_TS_CHARS = st.sampled_from(list("0123456789-T:.Z +٣"))


@settings(max_examples=1000, deadline=None)
@given(when=st.datetimes(), cut=st.integers(0, 30), noise=st.lists(st.tuples(st.integers(0, 25), _TS_CHARS), max_size=3))
def test_utc_datetime_reads_as_parse_timestamp(when: Any, cut: int, noise: list[tuple[int, str]]) -> None:
    from warden.ingest.parser import parse_timestamp

    text = f"{when.year:04d}-{when:%m-%dT%H:%M:%S}.{when.microsecond // 1000:03d}Z"
    assert skim.utc_datetime(text) == parse_timestamp(text) is not None  # the common form: always read
    chars = list(text)
    for at, char in noise:
        chars[at % len(chars)] = char
    for odd in ("".join(chars), text[:cut], text[:cut] + "0" + text[cut:], text.replace("T", " ")):
        made = skim.utc_datetime(odd)
        if made is not None:  # None: parse_timestamp decides
            expected = parse_timestamp(odd)
            assert made == expected and type(made) is type(expected) and made.tzinfo is None and made.fold == 0


def test_utc_datetime_leaves_impossible_dates_and_other_values_to_the_reference() -> None:
    for value in ("2023-02-29T10:00:00.000Z", "2026-13-01T10:00:00.000Z", "0000-01-01T00:00:00.000Z",
                  "2026-01-01T24:00:00.000Z", "2026-01-01T10:60:00.000Z", "2026-01-01T10:00:60.000Z",
                  "2026-01-01T10:00:00.000+", "２０２６-01-01T10:00:00.000Z", None, 5, b"2026-01-01T10:00:00.000Z"):
        assert skim.utc_datetime(value) is None
    assert skim.utc_datetime("2024-02-29T23:59:59.999Z").microsecond == 999000

