"""What a bulk collect's parser processes hand the writer: the hashes of what a parse consumed,
taken from the bytes it read, and the usage rows of its turns, each key once as the dedupe keeps
it."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from collect_support import SESSION, assistant, jsonl, usage, write
from warden.config import load_settings
from warden.ingest import discovery, parser, transcripts
from warden.ingest.transcripts import HEAD_BYTES, READ_CHUNK, _ReadEnds, parse_file
from warden.ingest.collector import collect_paths


def _expected_hashes(data: bytes, consumed: int) -> tuple[int, str, str]:
    length = min(consumed, HEAD_BYTES)
    if not length:
        return 0, "", ""
    return (length, hashlib.sha256(data[:length]).hexdigest(),
            hashlib.sha256(data[consumed - length:consumed]).hexdigest())


_LINE = jsonl([assistant("m1", "r1", usage(1, 2))])


@pytest.mark.parametrize("data", [
    b"",
    _LINE,  # shorter than the hashed length
    _LINE * 200,  # one block
    _LINE * (2 * READ_CHUNK // len(_LINE) + 7),  # blocks whose lines end past a block's start
    _LINE * 200 + _LINE[:-9],  # a half-written last line, not consumed
    _LINE * 200 + b'{"type":"summary"}',  # a whole last line without its newline, consumed
    _LINE * 3 + b"x" * 5000 + b"\n",  # an oversized last line (the limit below), skipped unread
], ids=["empty", "short", "one-block", "blocks", "half-line", "unterminated", "oversized"])
def test_a_parse_hashes_what_it_consumed_from_the_bytes_it_read(tmp_path: Path, data: bytes,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    opened: list[str] = []
    plain_open = os.open
    monkeypatch.setattr(os, "open", lambda name, *args, **kw: opened.append(name) or plain_open(name, *args, **kw))
    for start in (0, len(_LINE)):  # from the start, and resumed (the head read then)
        if start > len(data):
            continue
        ends = _ReadEnds()
        run, _state, _end = parse_file(str(path), start=start, max_line=4000, ends=ends)
        assert ends.hashes == _expected_hashes(data, run.bytes_consumed)
        assert run.stats.oversized == (b"x" * 5000 in data)
    assert opened == [str(path)] * len(opened)  # the file is opened once a parse, never again to hash


def test_keys_made_equal_by_the_columns_length_keep_the_larger_copy(tmp_path: Path) -> None:
    """Two responses of one file whose keys differ past the column's 400 characters are one usage
    row, as when they are offered one by one: the larger counts, in the order they came."""
    long_id = "m" * 400
    write(tmp_path / "projects" / "-p" / f"{SESSION}.jsonl",
          [assistant(long_id + "a", None, usage(10, 20)), assistant(long_id + "b", None, usage(1, 2))])
    run, _state, _end = parse_file(str(next(tmp_path.rglob("*.jsonl"))), ledger_only=True)
    convert = transcripts._timestamp_converter("sqlite")
    rows = transcripts._usage_rows(run, f"{SESSION}:main", convert)
    assert [row[:2] + row[4:6] for row in rows.values()] == [(long_id, f"{SESSION}:main", 10, 20)]
    summary = collect_paths(load_settings(), [tmp_path / "projects"], post_ingest=False)
    assert summary.usage_messages == 1


_STAMPS = [datetime(2026, 1, 2, 3, 4, 5, 123456), datetime(2026, 12, 31, 23, 59, 59), datetime(999, 1, 1),
           datetime(1, 2, 3, 4, 5, 6, 7), datetime(9999, 12, 31, 23, 59, 59, 999999), None,
           datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)]


@pytest.mark.parametrize("convert", [transcripts._timestamp_converter("sqlite"), None, repr],
                         ids=["sqlite-text", "as-is", "another-driver's"])
def test_usage_rows_built_in_c_are_the_python_ones(convert: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C reader's usage rows (keys and models cut to their columns, timestamps as the driver
    takes them) equal the Python ones, row for row and in order, keys made equal by the cut too."""
    reader = parser.fast_reader()
    if reader is None:
        pytest.skip("the C fast path is not built")
    long_key = "k" * 400
    turns = [(f"msg_{i}|req_{i}", "claude-sonnet-4-5", i, 2 * i, 3, 300 + i, 1 << 40, stamp)
             for i, stamp in enumerate(_STAMPS)]
    turns += [(long_key + "a", "m" * 130, 1, 2, 3, 4, 5, _STAMPS[0]), (long_key + "b", "m", 9, 9, 9, 9, 9, None),
              ("é" * 401, "ü" * 121, 0, 0, 0, 0, 0, _STAMPS[2])]
    run = SimpleNamespace(usage_of_turns=lambda: turns, embedded_usage=[])
    built_in_c = transcripts._usage_rows(run, f"{SESSION}:main", convert)  # type: ignore[arg-type]
    monkeypatch.setattr(transcripts, "fast_reader", lambda: None)
    in_python = transcripts._usage_rows(run, f"{SESSION}:main", convert)  # type: ignore[arg-type]
    assert list(built_in_c.items()) == list(in_python.items())
    assert len(built_in_c) == len(turns) - 1  # the two long keys are one row: the larger one's counts
    if convert is not None and convert is not repr:
        assert built_in_c["msg_0|req_0"][3] == "2026-01-02 03:04:05.123456"
        assert built_in_c["msg_3|req_3"][3] == "0001-02-03 04:05:06.000007"


def test_usage_rows_in_c_refuse_what_is_not_a_parse_s_turns() -> None:
    reader = parser.fast_reader()
    if reader is None:
        pytest.skip("the C fast path is not built")
    with pytest.raises(TypeError):
        reader.usage_rows([("k", "m", 1, 2, 3, 4, 5)], "s:main", None, False)
    with pytest.raises(TypeError):
        reader.usage_rows((), "s:main", None, False)
    with pytest.raises(ZeroDivisionError):  # the converter's own error comes through
        reader.usage_rows([("k", "m", 1, 2, 3, 4, 5, None)], "s:main", lambda value: 1 / 0, False)


def _names_by_os_walk(paths: list[Path]) -> list[str]:
    """What collect found before its own walk (os.walk and a realpath a directory): the reference."""
    found: set[str] = set()
    for path in paths:
        if not path.is_dir():
            found.add(str(path))
            continue
        walked: set[str] = set()
        for root, dirs, files in os.walk(path, followlinks=True):
            real = os.path.realpath(root)
            if real in walked:
                dirs[:] = []
                continue
            walked.add(real)
            base = str(Path(root))
            prefix = "" if base == "." else os.path.join(base, "")
            found.update(prefix + name for name in files if name.endswith(".jsonl"))
    unique: dict[object, str] = {}
    for file in sorted(found, key=discovery.ingest_order):
        try:
            st = os.stat(file)
            identity: object = (st.st_dev, st.st_ino)
        except OSError:
            identity = file
        unique.setdefault(identity, file)
    return list(unique.values())


def test_transcripts_are_found_as_os_walk_finds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Symlinked directories (a second name, a link up the tree, a loop, a link to a link), links
    to files and dangling ones, names that only look like transcripts: the same names in the same
    order as the os.walk the collector used before, from absolute and relative roots."""
    tree = tmp_path / "tree"
    for name in ("p1/s1.jsonl", "p1/sub/agent-a1.jsonl", "p1/sub/deeper/s2.jsonl", "p2/s3.jsonl", "p2/notes.txt",
                 "elsewhere/proj/s4.jsonl", "elsewhere/proj/inner/agent-a2.jsonl", "s0.jsonl"):
        write(tree / name, [assistant("m1", "r1", usage(1, 1))])
    (tree / "p3").symlink_to(tmp_path / "tree" / "elsewhere" / "proj")  # a project kept elsewhere
    (tree / "p4").symlink_to(tree / "p3")  # a link to a link
    (tree / "p1" / "sub" / "up").symlink_to(tree / "p1")  # a loop
    (tree / "p2" / "again").symlink_to(tree / "p1" / "sub")  # a second name deeper down
    (tree / "p2" / "link.jsonl").symlink_to(tree / "p1" / "s1.jsonl")
    (tree / "p2" / "dangling.jsonl").symlink_to(tree / "gone.jsonl")
    (tree / "p2" / "dir.jsonl").mkdir()
    write(tree / "p2" / "dir.jsonl" / "s5.jsonl", [assistant("m1", "r1", usage(1, 1))])
    monkeypatch.chdir(tree)
    for roots in ([tree], [Path(".")], [Path("p2"), Path("."), tree / "p3"], [Path("p1/sub"), tree / "p1"],
                  [tree / "p2" / "link.jsonl", Path("p4")]):
        assert discovery.transcript_names(roots) == _names_by_os_walk(roots), roots


def test_a_parsers_usage_sums_are_per_owner_and_model() -> None:
    """What a parser process hands over beside its usage rows: their counts summed per (owner,
    model), for a file of one run and model (summed by column) and for any other."""
    def row(key: str, owner: str, model: str, *counts: int) -> tuple:
        return (key, owner, model, None, *counts)

    one = [row("k1", "s:main", "opus", 1, 2, 3, 4, 5), row("k2", "s:main", "opus", 10, 20, 30, 40, 50)]
    assert transcripts._usage_sums(one) == {("s:main", "opus"): [11, 22, 33, 44, 55]}
    mixed = one + [row("k3", "s:a1", "opus", 1, 1, 1, 1, 1), row("k4", "s:main", "haiku", 2, 0, 0, 0, 7)]
    assert transcripts._usage_sums(mixed) == {("s:main", "opus"): [11, 22, 33, 44, 55], ("s:a1", "opus"): [1, 1, 1, 1, 1],
                                              ("s:main", "haiku"): [2, 0, 0, 0, 7]}
    assert transcripts._usage_sums([]) == {}
