"""Transcript files into parses, with nothing of the store: reading them through the parser
(:func:`parse_file`), and what a bulk collect's parser processes do with each
(:func:`_parse_in_worker`: the run's usage rows and JSON text built ahead of the writer). Finding
the files is :mod:`warden.ingest.discovery`.

Nothing here imports SQLAlchemy (a test keeps it so): ``warden collect`` starts its parser
processes before it loads the CLI and the store (:func:`start_parsers_early`), so that they parse
on the core the start-up leaves idle. The writing side is :mod:`warden.ingest.collector`.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import os
import stat
import sys
from collections import deque
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator

import orjson

from warden.config import load_settings
from warden.errors import WardenError
from warden.ingest.discovery import ChildDiscovery, early_collect_paths, transcript_sizes
from warden.ingest.parser import TranscriptParser, fast_reader, ids_from_path
from warden.ingest.pricing import counts_by_key
from warden.ingest.records import ParsedRun
from warden.store.sqlite_text import SQLiteDateTime, is_sqlite

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

READ_CHUNK = 8 << 20
MAX_LINE_BYTES = 64 << 20  # longer lines are counted (LineStats.oversized) and skipped unread
HEAD_BYTES = 4096  # hashed, at the start and before the offset, to notice a transcript rewritten under the same name
MAX_PATH_CHARS = 1000  # the length of the offsets' key column (ingest_offsets.path), which a test checks
MAIN_AGENT = "main"

PARALLEL_MIN_BYTES = 32 << 20  # a backlog this large is parsed in parser processes
# A bulk collect's parser-process task: at most TASK_FILES files and, past MIN_TASK_BYTES, at most
# TASK_BYTES and a fraction of what is left to plan (ParseQueue.task_bytes)
TASK_FILES = 256
TASK_BYTES = 64 << 20
MIN_TASK_BYTES = 4 << 20
# transcript bytes a bulk collect hands its parsers before it makes a new database: more than two
# read while the CLI loads and the database is made (256 MB left them idle 0.1-0.2 s in 3 of 4
# runs at a slow moment of this machine; 512 MB, in none), and what they hand back meanwhile is
# only held until the writer starts (+1 MB of its peak RSS)
AHEAD_BYTES = 512 << 20
BULK_GC_THRESHOLD = (50_000, 20, 100)  # the cyclic collector's thresholds in a bulk collect's processes
PARSER_NICENESS = 10  # added to a bulk collect's parser processes' niceness: the writer comes first


@dataclass
class CollectSummary:
    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    files_skipped: int = 0  # not a regular file, unreadable, vanished
    bytes_read: int = 0
    lines: int = 0
    runs_updated: int = 0
    usage_messages: int = 0  # usage rows offered to the global dedupe: a response two files hold, twice
    skipped: list[str] = field(default_factory=list)  # "path: reason"
    run_keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def absorb(self, other: "CollectSummary") -> None:
        """Add ``other``'s counts and lists to these (a transaction's, once it is committed)."""
        for key, value in other.__dict__.items():
            if isinstance(value, list):
                getattr(self, key).extend(value)
            else:
                setattr(self, key, getattr(self, key) + value)

    def snapshot(self) -> dict[str, int]:
        """The counts and list lengths now (lists only ever grow)."""
        return {k: len(v) if isinstance(v, list) else v for k, v in self.__dict__.items()}

    def restore(self, snapshot: dict[str, int]) -> None:
        """Back to ``snapshot``: the counts of a transaction that rolled back never happened."""
        for key, value in snapshot.items():
            current = getattr(self, key)
            if isinstance(current, list):
                del current[value:]
            else:
                setattr(self, key, value)


def _total_size(files: list[str]) -> int:
    total = 0
    for path in files:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


def _stat_to_ingest(path: str, summary: CollectSummary) -> os.stat_result | None:
    """The stat of ``path`` if it is a regular file whose path the store can keep, else None
    (the file counted as skipped, and why)."""
    why = _unstorable_path(path)
    if why:
        summary.files_skipped += 1
        summary.skipped.append(why)
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        summary.files_skipped += 1
        summary.skipped.append(f"{path}: {exc.strerror or exc}")
        return None
    if not stat.S_ISREG(st.st_mode):
        summary.files_skipped += 1
        summary.skipped.append(f"{path}: not a regular file")
        return None
    return st


def _unstorable_path(path: str) -> str | None:
    """Why the store cannot keep ``path`` (it keeps paths as bounded UTF-8 text), or None."""
    if len(path) > MAX_PATH_CHARS:
        return f"{path[:80]}…: path longer than {MAX_PATH_CHARS} characters"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (os.fsdecode's surrogate escapes)
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
        return f"{shown}: file name is not valid UTF-8"
    return None


Block = tuple[bytes, int, int]  # (data, upto, offset): the complete lines of data[:upto], data[0] at offset


Oversized = int  # the end offset of a line longer than the cap, skipped unread


Tail = tuple[bytes, int]  # (the unterminated last line, its end offset)


def _read_blocks(fd: int, start: int, max_line: int) -> Iterator[tuple[str, Any]]:
    """What a transcript holds from ``start`` to EOF, read in large blocks: ("lines", Block) for
    a block's complete lines, ("oversized", Oversized) for a line longer than ``max_line``
    (skipped without being buffered), and last ("tail", Tail) for an unterminated line."""
    os.lseek(fd, start, os.SEEK_SET)
    offset = start
    carry = b""
    skipping = False
    while True:
        block = os.read(fd, READ_CHUNK)
        if not block:
            break
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                offset += len(block)
                continue
            offset += nl + 1
            yield "oversized", offset
            block = block[nl + 1:]
            skipping = False
        data = carry + block if carry else block
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            carry = data
        else:
            # a line that ends in this block may still be over the limit (carry + block)
            yield "lines", (data, last_nl, offset)
            offset += last_nl + 1
            carry = data[last_nl + 1:]
        if len(carry) > max_line:
            offset += len(carry)
            carry = b""
            skipping = True
    if skipping:
        yield "oversized", offset
    elif carry:
        yield "tail", (carry, offset + len(carry))


ConsumedHashes = tuple[int, str, str]  # (length, sha256 of the head, of the tail): see _hashes_of_consumed


class _ReadEnds:
    """The bytes at both ends of what a parse read, kept as it reads (the file's first
    HEAD_BYTES, and the HEAD_BYTES before the end of its last block of lines), so the hashes of
    what it consumed need not read the file again."""

    __slots__ = ("head", "tail", "tail_end", "hashes")

    def __init__(self) -> None:
        self.head = b""
        self.tail = b""
        self.tail_end = -1  # the file offset just past ``tail``
        self.hashes: ConsumedHashes | None = None  # set once the parse has read the file

    def saw(self, data: bytes, offset: int, end: int) -> None:
        """A block ``data`` read at ``offset``, whose complete lines end at ``end``."""
        if offset == 0:
            self.head = data[:HEAD_BYTES]
        self.tail = data[max(0, end - offset - HEAD_BYTES):end - offset]
        self.tail_end = end


def parse_file(path: str, *, start: int = 0, state: dict[str, Any] | None = None,
               agent_type: str | None = None, max_line: int = MAX_LINE_BYTES,
               pure: bool = False, ledger_only: bool = False,
               ends: _ReadEnds | None = None) -> tuple[ParsedRun, dict[str, Any], int]:
    """Read ``path`` from ``start`` into a ParsedRun; returns (run, resumable state, bytes scanned
    up to EOF). Opens non-blocking, so a FIFO that slipped past the caller's check cannot hang.
    ``pure``: without the C fast path (the reference it is tested against); ``ledger_only``: the
    run as the ledger reads it (TranscriptParser's ``ledger_only``); ``ends``: given its
    ``hashes`` of the bytes the run consumed (:func:`_hashes_of_consumed`), from those it read."""
    session_hint, agent_hint = ids_from_path(path)
    parser = TranscriptParser(session_id=session_hint, agent_id=agent_hint, agent_type=agent_type,
                              source_path=path, start_offset=start, state=state, pure=pure,
                              ledger_only=ledger_only)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    end = start
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        for what, value in _read_blocks(fd, start, max_line):
            if what == "lines":
                data, upto, offset = value
                parser.feed_block(data, upto, offset, max_line)
                end = offset + upto + 1
                if ends is not None:
                    ends.saw(data, offset, end)
            elif what == "oversized":
                parser.feed_oversized(value)
                end = value
            else:
                parser.feed_lines([value[0]], [value[1]], complete=False)
                end = value[1]
        result = parser.result()
        if ends is not None:
            ends.hashes = _hashes_of_consumed(fd, result.bytes_consumed, ends)
    finally:
        os.close(fd)
    return result, parser.state(), end


def _offset_state(hashes: ConsumedHashes, parser_state: dict[str, Any]) -> dict[str, Any]:
    """An offset row's parser_state: the head/tail hashed (:func:`_hashes_of_consumed`) and the
    parser's state to resume from."""
    length, _, tail_sha256 = hashes
    return {"head_len": length, "tail_len": length, "tail_sha256": tail_sha256, "parser": parser_state}


def _hashes_of_consumed(fd: int, consumed: int, ends: _ReadEnds) -> ConsumedHashes:
    """(length, sha256 of the head, of the tail) of the first ``consumed`` bytes of the file open
    as ``fd``, which an offset row keeps to resume only a file that still holds them: hashed from
    the bytes a parse kept in ``ends`` where those are the ones, else read."""
    length = min(consumed, HEAD_BYTES)
    if length <= 0:
        return 0, "", ""
    head = ends.head[:length] if len(ends.head) >= length else os.pread(fd, length, 0)
    tail = ends.tail[-length:] if ends.tail_end == consumed and len(ends.tail) >= length \
        else os.pread(fd, length, consumed - length)
    return length, hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


def _span_hashes(path: str, *spans: tuple[int, int]) -> list[str]:
    """sha256 of each (start, length) span of ``path`` ("" for an empty one), in one open."""
    if all(length <= 0 for _, length in spans):
        return ["" for _ in spans]
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return [hashlib.sha256(os.pread(fd, length, start)).hexdigest() if length > 0 else ""
                for start, length in spans]
    finally:
        os.close(fd)


def _file_session_id(path: str) -> str:
    """The session id of a transcript whose records and name give none: stable per file."""
    return "file-" + hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()[:24]


def run_key_for(session_id: str, agent_id: str | None) -> str:
    return f"{session_id}:{agent_id or MAIN_AGENT}"


def _run_key_of(parsed: ParsedRun, path: str) -> str:
    return run_key_for(parsed.session_id or _file_session_id(path), parsed.agent_id)


# A usage_messages row as its driver takes it: the values in _USAGE_COLUMNS order (the table's,
# which the compiled INSERT binds in), the timestamp already converted (bind_converter), so a
# parser process can build the rows for the writer.
UsageRow = tuple[Any, ...]


_USAGE_COLUMNS = ("message_key", "run_key", "model", "timestamp", "input_tokens", "output_tokens",
                  "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens")


@functools.cache
def _timestamp_converter(drivername: str) -> Callable[[Any], Any] | None:
    """The usage timestamps' conversion for an engine of ``drivername`` (from its URL: a parser
    process has no engine). SQLite's is made without SQLAlchemy, which parsers started early
    have not imported (:func:`start_parsers_early`)."""
    if is_sqlite(drivername):
        return SQLiteDateTime()
    from sqlalchemy.engine import URL

    from warden.store.bulk import bind_converter
    from warden.store.ledger_models import UsageMessage

    return bind_converter(UsageMessage.__table__.c.timestamp, URL.create(drivername).get_dialect()())


def _json_as_text(drivername: str) -> bool:
    """Whether an engine of ``drivername`` takes a JSON column's value as the text a parser process
    encodes (SQLite keeps that text; another engine's driver encodes the values itself)."""
    return is_sqlite(drivername)


def _usage_rows(parsed: ParsedRun, run_key: str, convert: Callable[[Any], Any] | None) -> dict[str, UsageRow]:
    """The run's usage rows by message key, its turns' then the responses its progress lines
    embed (owned by their subagent's run), each key once as :func:`_offer` keeps it."""
    turns = parsed.usage_of_turns()
    # A parse's turns are distinct responses: each key once, unless cutting it to the column's
    # length made two equal (then the copies are offered in order).
    reader = fast_reader()
    if reader is not None:  # the same rows built in C: in Python they cost a parse ~9% more
        rows = reader.usage_rows(turns, run_key, convert, convert.__class__ is SQLiteDateTime)
    else:
        rows = {(key := message_key[:400]): (key, run_key, model[:120], stamp, i_t, o_t, w5, w1, r)
                for (message_key, model, i_t, o_t, w5, w1, r, _), stamp in zip(turns, _stamps(turns, convert))}
    if len(rows) < len(turns):
        rows = {}
        for (message_key, model, i_t, o_t, w5, w1, r, _), stamp in zip(turns, _stamps(turns, convert)):
            _offer(rows, (message_key[:400], run_key, model[:120], stamp, i_t, o_t, w5, w1, r))
    session_id = run_key.rsplit(":", 1)[0]
    for emb in parsed.embedded_usage:
        owner = run_key_for(session_id, emb.agent_id) if emb.agent_id else run_key
        u, ts = emb.usage, emb.timestamp
        _offer(rows, (emb.message_key[:400], owner, emb.model[:120], ts if convert is None else convert(ts),
                      u.input_tokens, u.output_tokens, u.cache_write_5m, u.cache_write_1h, u.cache_read))
    return rows


def _stamps(turns: list[Any], convert: Callable[[Any], Any] | None) -> list[Any]:
    """The turns' timestamps as the driver takes them."""
    stamps = list(map(itemgetter(7), turns))
    return stamps if convert is None else list(map(convert, stamps))


def _offer(rows: dict[str, UsageRow], row: UsageRow) -> None:
    """Keep the larger copy of a response, owned by the run that offered it first."""
    current = rows.get(row[0])
    if current is None:
        rows[row[0]] = row
    elif _row_rank(row) > _row_rank(current):
        rows[row[0]] = (row[0], current[1], *row[2:])


def _row_rank(row: UsageRow) -> tuple[int, int]:
    return row[4] + row[5] + row[6] + row[7] + row[8], row[5]


UsageSums = dict[tuple[str, str], list[int]]  # (owner run key, model) -> the five counts summed


def _usage_sums(rows: Collection[UsageRow]) -> UsageSums:
    """The counts of usage rows summed per (owner, model) (a parser process sums its file's)."""
    if rows:
        columns = list(zip(*rows))
        if len(set(columns[1])) == 1 and len(set(columns[2])) == 1:  # most files: one run, one model
            return {(columns[1][0], columns[2][0]): [sum(counts) for counts in columns[4:]]}
    return counts_by_key(((owner, model), *counts) for _, owner, model, _, *counts in rows)


class _EncodedJSON(str):
    """A JSON column's value that is already :func:`_ledger_json`'s text (a parser process's)."""


def _ledger_json(value: Any) -> str:
    """A ledger JSON column's text (SQLite), by orjson: the values are the parser's ints, strings,
    lists and dicts, which read back the same; what orjson refuses (a non-string key, an integer
    past 64 bits) the standard library encodes."""
    if value.__class__ is _EncodedJSON:
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value)


def _run_digest(parsed: ParsedRun) -> dict[str, Any]:
    """A run row's trace_digest: the parser's, with the subagent types its Task calls name."""
    digest = dict(parsed.trace_digest)
    if parsed.subagent_types:
        digest["subagents"] = dict(sorted(parsed.subagent_types.items()))
    digest["compactions"] = parsed.compactions
    return digest


def default_jobs() -> int:
    """Parser processes for a bulk collect: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def _parser_process_init(writer_pid: int) -> None:
    """A parser process leaves Ctrl-C to the writer, which stops the pool, and dies with the
    writer: an orphan would wait on its pipe forever, holding what the writer had open (the
    nightly lock's file among it).

    It also collects cyclic garbage less often: a parse allocates many small containers that
    reference counting frees, and the collector's passes over them cost ~6% of a parse (and the
    objects forked from the writer are frozen, so no pass touches, and copies, their pages).

    And it yields the CPU to the writer (PARSER_NICENESS): the writer, which stores every parse
    in turn, is the collect's critical path, and with parsers started before the CLI has loaded
    there are more busy processes than cores; the parsers run ahead of it within a bounded
    window, so one kept waiting for a core costs nothing (1 GB into a new database, 12 runs each
    in turn: median 2.51 -> 2.29 s, with the early start; without it, niceness alone gained
    nothing)."""
    import signal

    try:
        os.nice(PARSER_NICENESS)
    except OSError:  # not allowed here: the writer's priority, then
        pass
    gc.freeze()
    gc.set_threshold(*BULK_GC_THRESHOLD)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the writer's handler, forked with it: terminate() ends us quietly
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != writer_pid:  # the writer died before the line above took effect
        os._exit(0)


def _stop_pool(pool: Any) -> None:
    """Cancel what is queued and end the parser processes at once (``shutdown`` alone would wait
    for every queued parse; there is no public terminate before Python 3.14)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)  # shutdown drops the pool's reference to it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
    # A parser ended while it wrote its result leaves half a message in the pipe, on which the
    # pool's manager thread would wait forever (and the interpreter joins that thread at exit:
    # Ctrl-C printed its line and never returned). With every parser gone, closing this process's
    # copy of the write end lets the read end see EOF: the thread finds the pool broken and ends.
    writer = getattr(results, "_writer", None)
    if writer is not None and not any(process.is_alive() for process in processes):
        try:
            writer.close()
        except OSError:
            pass


@dataclass(slots=True)
class _FromParser:
    """What a parser process hands the writer beside a parse, done there so the (serial) writer
    does less: the checkpoints it captured (or None), the run's usage rows ready for the driver
    and their sums per (owner, model), the hashes of the parsed bytes' head and tail
    (:func:`_hashes_of_consumed`), and on SQLite JSON columns' text: for a parse from the start
    the offset row's parser_state (the parse result's parser state is None then: sent once, as
    text), and where the writer is sent the ledger view, the run row's trace digest (the view's
    is left empty)."""

    precaptured: Any
    usage_rows: list[UsageRow]  # each key once (:func:`_usage_rows`)
    usage_sums: UsageSums
    hashes: ConsumedHashes
    # plain text, not _EncodedJSON: a str subclass is pickled through copyreg, ~4 µs a run each way
    offset_state: str | None = None
    digest: str | None = None  # the run row's _run_digest


def _parse_in_worker(path: str, start: int, state: dict[str, Any] | None, agent_type: str | None, max_line: int,
                     post_ingest: bool, drivername: str) -> tuple[tuple[ParsedRun, dict[str, Any] | None, int],
                                                                  _FromParser]:
    """A bulk collect's parser process: parse, and for a parse from the start (which needs
    nothing from the store) also the pure checkpoint capture, so the writing process does less.
    ``drivername``: the store's engine, whose driver the usage rows are built for."""
    # without the later stages' steps the writer reads only the ledger: nothing else is built
    ends = _ReadEnds()
    parsed, parser_state, end = parse_file(path, start=start, state=state, agent_type=agent_type, max_line=max_line,
                                           ledger_only=not post_ingest, ends=ends)
    hashes = ends.hashes
    assert hashes is not None
    precaptured = None
    if post_ingest and start == 0 and parsed.has_activity:
        from warden.continuity.capture import capture_fresh

        precaptured = capture_fresh(parsed)
    usage_rows = list(_usage_rows(parsed, _run_key_of(parsed, path), _timestamp_converter(drivername)).values())
    from_parser = _FromParser(precaptured, usage_rows, _usage_sums(usage_rows), hashes)
    json_as_text = _json_as_text(drivername)
    if precaptured is not None or not post_ingest:  # the writer needs the full run only to capture
        parsed = _ledger_view(parsed)
        parsed.usage_by_model = {}  # the writer sums the usage rows instead
        if json_as_text:  # sent as the row's text: one string, not the many objects it holds
            from_parser.digest = _ledger_json(_run_digest(parsed))
            parsed.trace_digest = {}
    if start == 0 and json_as_text:  # a new file's offset row (most, in a bulk collect)
        from_parser.offset_state = _ledger_json(_offset_state(hashes, parser_state))
        return (parsed, None, end), from_parser
    return (parsed, parser_state, end), from_parser


def _ledger_view(parsed: ParsedRun) -> ParsedRun:
    """``parsed.ledger_view()``; a ledger-only parse is one already but for its turns' usage (sent
    as usage rows), which is dropped in place instead of copying the run."""
    if parsed.had_activity is None or parsed.turns or parsed.tool_calls or parsed.user_prompts:
        return parsed.ledger_view()
    parsed.turn_usage = None
    return parsed


def _parse_files_in_worker(task: list[tuple[str, int, dict[str, Any] | None]], agent_type: str | None, max_line: int,
                           post_ingest: bool, drivername: str) -> list[Any]:
    """A parser process's task: :func:`_parse_in_worker` for each (path, start, state), in order;
    a file that cannot be read gives its OSError in its place, and the others are still parsed."""
    outcomes: list[Any] = []
    for path, start, state in task:
        try:
            outcomes.append(_parse_in_worker(path, start, state, agent_type, max_line, post_ingest, drivername))
        except OSError as exc:
            outcomes.append(exc)
    return outcomes


# ---------------------------------------------------------------------------- parser processes

Planned = tuple[str, os.stat_result, int]  # a file handed to a parser: (path, its stat, the offset parsed from)


def start_parser_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` parser processes (forked where the platform can: they start at once, with what
    this process has imported)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_parser_process_init,
                               initargs=(os.getpid(),))


class ParseQueue:
    """Files handed to a pool of ``jobs`` parser processes many at a time (:meth:`task_bytes`):
    one round trip, wake-up and result message per task, not per file. ``window`` holds the tasks
    in flight, in order: each the files it parses, as planned, and the future of their outcomes
    (:func:`_parse_files_in_worker`). ``backlog``: the bytes the files the collect will add hold
    past the offsets they are parsed from, as far as it knows them yet (:meth:`expect`)."""

    def __init__(self, pool: ProcessPoolExecutor, agent_type: str | None, max_line: int, post_ingest: bool,
                 drivername: str, *, jobs: int, backlog: int) -> None:
        self.pool = pool
        self.options = (agent_type, max_line, post_ingest, drivername)
        self.jobs = jobs
        self.window: deque[tuple[list[Planned], Future[list[Any]]]] = deque()
        self._task: list[tuple[str, int, dict[str, Any] | None]] = []
        self._planned: list[Planned] = []
        self._bytes = 0
        self._unplanned = backlog

    def expect(self, backlog: int) -> None:
        """The bytes the files still to be added hold past their offsets, once they are planned."""
        self._unplanned = backlog

    def task_bytes(self) -> int:
        """The bytes a task is handed over at. Large: each task costs the writer a hand-over and a
        result through the pool's threads in its process, which take turns with it on the GIL
        (1 GB into a new database, 8 paired runs: 8 MB tasks, 205 of them, median 1.43 s; these,
        28 of them, 1.18 s). And at most half of what is left to plan per parser, so that a smaller
        backlog is still shared among all the parsers, and the last tasks end together."""
        return max(MIN_TASK_BYTES, min(TASK_BYTES, self._unplanned // (2 * self.jobs)))

    def add(self, path: str, st: os.stat_result, start: int, state: dict[str, Any] | None) -> None:
        """Parse ``path`` from ``start`` (with the parser ``state`` it left off in)."""
        self._task.append((path, start, state))
        self._planned.append((path, st, start))
        self._bytes += st.st_size - start
        self._unplanned -= st.st_size - start
        if len(self._task) >= TASK_FILES or self._bytes >= self.task_bytes():
            self.submit()

    def submit(self) -> None:
        """Hand over the files added since the last task, if any."""
        if self._task:
            self.window.append((self._planned, self.pool.submit(_parse_files_in_worker, self._task, *self.options)))
            self._task, self._planned, self._bytes = [], [], 0


def plan_ahead(queue: ParseQueue, files: list[str], summary: CollectSummary) -> int:
    """Hand the parsers the first AHEAD_BYTES of ``files``, each from its start, before the
    database is opened (into a new one, nothing is stored yet; a file a hook stores meanwhile is
    caught when its parse is stored, as any other): how many of the files that took. Those that
    cannot be ingested are counted skipped in ``summary``."""
    ahead = ahead_bytes = 0
    while ahead < len(files) and ahead_bytes < AHEAD_BYTES:
        summary.files_seen += 1
        st = _stat_to_ingest(files[ahead], summary)
        if st is not None:
            queue.add(files[ahead], st, 0, None)
            ahead_bytes += st.st_size
        ahead += 1
    return ahead


@dataclass
class EarlyParsers:
    """Parser processes :func:`start_parsers_early` started, and the first files of the collect
    they were handed, in order (those that cannot be ingested counted skipped in ``summary``);
    ``found``: the transcripts under ``paths`` with their sizes, as the start found them
    (:func:`early_transcripts`)."""

    files: list[str]
    jobs: int
    queue: ParseQueue
    summary: CollectSummary
    paths: list[Path]
    found: dict[str, int]


_early: EarlyParsers | None = None  # started, not yet taken over by a collect


def start_parsers_early(paths: list[str], jobs: int | None, *, post_ingest: bool = True,
                        discovery: ChildDiscovery | None = None) -> bool:
    """Start the parser processes of ``warden collect PATHS [--jobs JOBS]`` (the settings'
    Claude Code projects if no path is given) before the command loads the CLI and the store:
    those imports take ~0.4 s of one core, and the parsers take the first AHEAD_BYTES on the
    other meanwhile. Only for a collect the parsers will serve whole: a backlog large enough for
    parser processes, into a SQLite database not made yet (planned from their start, as any
    collect into one). The collect takes them over if its first files are the ones they were
    handed, with the same options (:func:`take_early_parsers`). Anything else, or anything wrong
    (which the command itself reports), starts nothing: returns whether they were started.
    ``discovery``: the transcripts under these paths, being found meanwhile (``entry.start_early``)."""
    global _early
    discard_early_parsers()
    # the paths entry.start_early found these for (it asked early_collect_paths a moment ago)
    given = discovery.paths if discovery is not None else early_collect_paths(paths)
    found = discovery.result() if discovery is not None else None  # the child reaped, whatever follows
    if given is None:
        return False
    try:
        if found is None:
            found = transcript_sizes(given)
        driver = load_settings().database_url.partition(":")[0]
    except (WardenError, OSError, ValueError):
        return False
    if jobs is None:
        jobs = default_jobs() if sum(found.values()) >= PARALLEL_MIN_BYTES else 1
    if jobs <= 1 or len(found) <= 1:
        return False
    files = [os.path.abspath(file) for file in found]
    queue = ParseQueue(start_parser_pool(jobs), None, MAX_LINE_BYTES, post_ingest, driver, jobs=jobs,
                       backlog=sum(found.values()))
    summary = CollectSummary()
    ahead = plan_ahead(queue, files, summary)
    _early = EarlyParsers(files[:ahead], jobs, queue, summary, given, found)
    return True


def early_transcripts(paths: list[Path]) -> dict[str, int] | None:
    """The transcripts under ``paths`` and their sizes as :func:`start_parsers_early` found them,
    if it started parsers for these paths that no collect has taken over yet; else None. The
    collect they serve takes this listing, made as the command started, rather than walking the
    tree again (3,000 transcripts: ~30 ms of the writer's core)."""
    return dict(_early.found) if _early is not None and _early.paths == paths else None


def take_early_parsers(files: list[str], jobs: int, options: tuple[Any, ...]) -> EarlyParsers | None:
    """The parsers :func:`start_parsers_early` started, if they were handed the first of these
    ``files`` (a transcript that appeared since, after those, is this collect's to plan), with
    these ``options`` (ParseQueue's) and as many processes; else None (and any that were started
    are stopped)."""
    global _early
    early, _early = _early, None
    if early is not None and (files[:len(early.files)] != early.files or early.jobs != jobs
                              or early.queue.options != options):
        _stop_pool(early.queue.pool)
        return None
    return early


def discard_early_parsers() -> None:
    """Stop parsers started early that no collect took over (the command failed, or collected
    something else)."""
    global _early
    early, _early = _early, None
    if early is not None:
        _stop_pool(early.queue.pool)
