"""Property: the parser never raises, whatever the lines — random bytes, random JSON, and real
transcript lines mutated (truncated, bytes flipped, values swapped for odd types)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CORPUS as CORPUS_HOME
from collect_support import assistant, progress, tool_result, tool_use, usage
from warden.ingest.parser import TranscriptParser, parse_bytes
from warden.ingest.pricing import Usage

CORPUS = CORPUS_HOME / "projects"


def _seed_lines() -> list[bytes]:
    lines = [json.dumps(r).encode() for r in (
        assistant("m1", "r1", usage(1, 2, 3, 4, w5=1, w1=2), [tool_use("t1", "Read", file_path="/a", offset=1, limit=2)]),
        tool_result("t1", "x" * 50, is_error=True, tool_use_result={"agentId": "a1", "usage": {}}),
        progress("a1", "s1", "sr1", usage(5, 5)),
    )]
    if CORPUS.is_dir():
        for path in sorted(CORPUS.rglob("*.jsonl"))[:6]:
            lines.extend(line for line in path.read_bytes().splitlines()[:15] if len(line) < 20_000)
    return lines


SEEDS = _seed_lines()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
KEYS = ["type", "message", "usage", "content", "id", "requestId", "input", "tool_use_id", "is_error", "data",
        "agentId", "sessionId", "timestamp", "model", "cache_creation", "file_path", "offset", "limit", "name"]


def _mutate_json(value, data) -> object:  # type: ignore[no-untyped-def]
    """Replace one nested value (preferring the keys the parser reads) by an arbitrary JSON value."""
    if isinstance(value, dict) and value:
        keys = sorted(value, key=lambda k: (k not in KEYS, k))
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            value[key] = data.draw(json_values)
        else:
            value[key] = _mutate_json(value[key], data)
    elif isinstance(value, list) and value:
        i = data.draw(st.integers(0, len(value) - 1))
        value[i] = _mutate_json(value[i], data)
    else:
        return data.draw(json_values)
    return value


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    parse_bytes(b"\n".join(chunks))
    # every newline-terminated line is counted once, whatever it holds (blank, binary, JSON)
    terminated = b"".join(chunk.replace(b"\r", b" ") + b"\n" for chunk in chunks)
    assert parse_bytes(terminated).stats.lines == terminated.count(b"\n")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_values, max_size=10))
def test_random_json_never_raises(values: list[object]) -> None:
    parse_bytes(b"\n".join(json.dumps(v).encode() for v in values))
    run = parse_bytes(b"".join(json.dumps(v).encode() + b"\n" for v in values))
    assert run.stats.lines == len(values)
    assert run.stats.malformed >= sum(not isinstance(v, dict) for v in values)  # JSON, but no record


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_transcript_lines_never_raise(data: st.DataObject) -> None:
    lines = data.draw(st.lists(st.sampled_from(SEEDS), min_size=1, max_size=8))
    out: list[bytes] = []
    for line in lines:
        how = data.draw(st.sampled_from(["json", "truncate", "flip", "keep"]))
        if how == "json":
            out.append(json.dumps(_mutate_json(json.loads(line), data)).encode())
        elif how == "truncate":
            out.append(line[: data.draw(st.integers(0, len(line)))])
        elif how == "flip" and line:
            i = data.draw(st.integers(0, len(line) - 1))
            out.append(line[:i] + bytes([data.draw(st.integers(0, 255))]) + line[i + 1:])
        else:
            out.append(line)
    joiner = data.draw(st.sampled_from([b"\n", b"\r\n", b"\n\n"]))
    run = parse_bytes(joiner.join(out))
    # and the parser's state always survives the JSON round trip the collector stores it through
    parser = TranscriptParser()
    for raw in out:
        parser.feed(raw + b"\n")
    resumed = TranscriptParser(state=json.loads(json.dumps(parser.state())))
    resumed.feed(out[0] + b"\n")
    assert resumed.result().stats.lines == parser.result().stats.lines + 1
    # one turn per distinct API response, and the run's usage is exactly theirs summed
    keys = [turn.message_key for turn in run.turns]
    assert len(keys) == len(set(keys))
    assert run.usage == sum((turn.usage for turn in run.turns), Usage())
