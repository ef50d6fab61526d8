"""Appending is parsing: a transcript read while it is being written — cut at any byte, even
inside a long tool-result line — and resumed from the parser's state gives what one whole parse
gives, line for line. (A former decode fast path read only the head of tool-result lines and so consumed a
half-written one as whole; these tests pin that it is gone.)"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from warden.ingest.collector import discover_transcripts, parse_file
from warden.ingest.parser import TranscriptParser


def _stats(state: dict[str, Any]) -> dict[str, int]:
    stats = dict(state["stats"])
    stats.pop("truncated")  # a read that met the unfinished line counted it
    stats.pop("duplicate_usage")  # turn-level dedupe restarts at the offset (parser.state docstring)
    return stats


def _usage(*runs: Any) -> dict[str, Any]:
    """Per response, the largest usage any part saw (the collector's max-wins dedupe)."""
    best: dict[str, Any] = {}
    for run in runs:
        for turn in run.turns:
            current = best.get(turn.message_key)
            if current is None or (turn.usage.total, turn.usage.output_tokens) > (current.total, current.output_tokens):
                best[turn.message_key] = turn.usage
    return best


def _parse_in_two(path: Path, cut: int, tmp: Path) -> tuple[Any, Any]:
    data = path.read_bytes()
    partial = tmp / path.name
    partial.write_bytes(data[:cut])
    first, state, _end = parse_file(str(partial))
    partial.write_bytes(data)
    second, state2, _end = parse_file(str(partial), start=first.bytes_consumed, state=state)
    return first, (second, state2)


def test_a_half_written_tool_result_line_is_not_consumed() -> None:
    line = (b'{"type":"user","sessionId":"s1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user",'
            b'"content":[{"type":"tool_result","tool_use_id":"t1","content":"' + b"x" * 3000 + b'"}]},'
            b'"toolUseResult":{"stdout":"' + b"y" * 3000 + b'","stderr":""}}')
    cut = line.index(b'"toolUseResult"') + 40
    parser = TranscriptParser(source_path="p")
    assert parser.feed(line[:cut], end_offset=cut) is False  # still being written: not consumed
    assert parser.offset == 0 and parser.stats.truncated == 1
    assert parser.feed(line + b"\n", end_offset=len(line) + 1) is True
    assert parser.stats.malformed == 0 and parser.offset == len(line) + 1


def test_cut_anywhere_and_resumed_equals_whole_parse(corpus: Path, tmp_path: Path) -> None:
    rng = random.Random(5)
    checked = 0
    for path in discover_transcripts([corpus]):
        data = path.read_bytes()
        if len(data) < 10_000:
            continue
        whole_run, whole_state, _end = parse_file(str(path))
        # cuts inside long tool-result lines (after their toolUseResult key) and anywhere
        marks = [i + 30 for i in range(len(data)) if data.startswith(b',"toolUseResult":', i)][:3]
        for cut in marks + [rng.randrange(1, len(data)) for _ in range(2)]:
            first, (second, state) = _parse_in_two(path, cut, tmp_path)
            assert first.bytes_consumed <= cut
            # every line read exactly once, none malformed by the cut, the same counts and usage
            assert _stats(state) == _stats(whole_state)
            assert second.counters == whole_run.counters
            assert _usage(first, second) == _usage(whole_run)
            # a response cut between its lines is judged whole by the placeholder check
            assert (second.placeholder_output, second.placeholder_turns) == (whole_run.placeholder_output,
                                                                             whole_run.placeholder_turns), cut
            checked += 1
    assert checked >= 20
