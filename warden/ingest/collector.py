"""The collector: transcript files → ledger rows (SessionRun, UsageMessage, IngestOffset).

- **Incremental.** Each file's consumed offset, size, mtime, a hash of its head and the parser's
  resumable state live in ``ingest_offsets``. An unchanged file is skipped without a write (so
  re-collecting changes nothing); an appended one is read from the last consumed offset and its
  run row is updated in place; a rewritten one (head changed, or shorter) is read again whole.
- **Global usage dedupe.** Every API response is one ``usage_messages`` row keyed by
  ``message.id|requestId``; across files the row with the largest counts wins and it stays owned
  by the run that first held it (resumed sessions and sidechains repeat parent messages). A
  run's token totals and cost are always the sums of the rows it owns, so a response counts once
  however many files repeat it. Responses a parent saw through ``progress`` lines are owned by the
  subagent's run (``<session>:<agentId>``), with or without the subagent's own transcript.
- **Bulk.** A large backlog is parsed in parser processes while this process writes
  (:meth:`Collector._collect_parallel`); finding and reading the files, and the parser
  processes' side, are :mod:`warden.ingest.transcripts`.
- **Extension point.** After a run's row is written, :func:`_after_run_ingested` runs the later
  stages' per-run steps (checkpoint capture, distill queueing) in the same transaction.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import stat
import time
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import orjson
from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from warden.config import Settings, load_settings
from warden.errors import UsageError
from warden.ingest.discovery import discover_transcripts, transcript_sizes  # discover_transcripts: the collector's API too
from warden.ingest.parser import PARSER_VERSION
from warden.ingest.pricing import DEFAULT_TABLE, PriceTable, Usage, usage_by_key
from warden.ingest.records import ParsedRun
from warden.ingest.transcripts import (  # parse_file: the collector's API too
    _USAGE_COLUMNS, BULK_GC_THRESHOLD, MAIN_AGENT, MAX_LINE_BYTES, PARALLEL_MIN_BYTES, CollectSummary, ConsumedHashes,
    ParseQueue, UsageRow, UsageSums, _EncodedJSON, _FromParser, _ledger_json, _offset_state, _ReadEnds,
    _row_rank, _run_digest, _run_key_of, _span_hashes, _stat_to_ingest, _stop_pool, _total_size,
    _unstorable_path, _usage_rows, _usage_sums, default_jobs, discard_early_parsers, early_transcripts, parse_file,
    plan_ahead, run_key_for, start_parser_pool, take_early_parsers)
from warden.names import clean_label
from warden.percentiles import nearest_rank
from warden.sanitize import redact_secrets
from warden.store.bulk import bind_converter, execute_many, execute_values, insert_defaults, row_values
from warden.store.db import FillWriteback, Store, back_to_wal, journal_new_pages_in_place, json_loads, open_store
from warden.store.ledger_models import IngestOffset, SessionRun, UsageMessage, iso_utc

if TYPE_CHECKING:  # a later stage's type: imported where it runs, after the ledger is written
    from warden.continuity.capture import StoredCaptures

IN_CHUNK = 500  # bound on SQL IN-lists / multi-row statements
UNKNOWN_SUBAGENT = "subagent"


# ---------------------------------------------------------------------------- files


def read_meta_sidecar(path: str) -> str | None:
    """Agent type from ``agent-<id>.meta.json`` beside a 2.1.x subagent transcript, if any."""
    meta = path[:-len(".jsonl")] + ".meta.json" if path.endswith(".jsonl") else path + ".meta.json"
    try:
        st = os.stat(meta)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
            return None
        with open(meta, "rb") as fh:
            data = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    if isinstance(data, dict):
        for key in ("agentType", "agent_type", "subagent_type", "subagentType"):
            value = clean_label(data.get(key))
            if value:
                return value
    return None


# ---------------------------------------------------------------------------- rows


def _dialect_timestamp_converter(dialect: Dialect) -> Callable[[Any], Any] | None:
    return bind_converter(UsageMessage.__table__.c.timestamp, dialect)


_UPSERT_CACHE: dict[str, Any] = {}  # dialect -> the max-wins upsert statement (built once)
_INSERT_NEW_CACHE: dict[str, Any] = {}  # dialect -> the usage INSERT that skips stored keys
_RUN_INSERT = SessionRun.__table__.insert()
_OFFSET_INSERT = IngestOffset.__table__.insert()


def _dialect_insert(dialect: str) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def _insert_new_usage(session: Session) -> Any:
    """The INSERT of usage rows that skips the keys already stored. On SQLite, ``OR IGNORE``: a
    statement of many rows that may fail part way (as ``ON CONFLICT DO NOTHING`` may, on another
    constraint) keeps a journal of the pages it changes, in a temporary file (a GB's usage rows:
    ~49k page writes, 780 MB); one that ignores every conflict keeps none. The rows have no other
    constraint to break (a parser builds them whole): the two store the same."""
    dialect = session.get_bind().dialect.name
    stmt = _INSERT_NEW_CACHE.get(dialect)
    if stmt is None:
        table = UsageMessage.__table__
        stmt = _INSERT_NEW_CACHE[dialect] = (
            table.insert().prefix_with("OR IGNORE") if dialect == "sqlite"
            else _dialect_insert(dialect)(table).on_conflict_do_nothing(index_elements=[table.c.message_key]))
    return stmt


def _max_wins_upsert(session: Session) -> Any:
    dialect = session.get_bind().dialect.name
    stmt = _UPSERT_CACHE.get(dialect)
    if stmt is not None:
        return stmt
    insert = _dialect_insert(dialect)
    table = UsageMessage.__table__
    stmt = insert(table)
    excluded = stmt.excluded
    new_total = (excluded.input_tokens + excluded.output_tokens + excluded.cache_write_5m_tokens
                 + excluded.cache_write_1h_tokens + excluded.cache_read_tokens)
    old_total = (table.c.input_tokens + table.c.output_tokens + table.c.cache_write_5m_tokens
                 + table.c.cache_write_1h_tokens + table.c.cache_read_tokens)
    stmt = _UPSERT_CACHE[dialect] = stmt.on_conflict_do_update(
        index_elements=[table.c.message_key],
        set_={name: excluded[name] for name in ("model", "input_tokens", "output_tokens",
                                                 "cache_write_5m_tokens", "cache_write_1h_tokens",
                                                 "cache_read_tokens", "timestamp")},
        where=(new_total > old_total) | ((new_total == old_total) & (excluded.output_tokens > table.c.output_tokens)),
    )
    return stmt


_U = UsageMessage.__table__.c
# One statement, compiled once: an IN list of literals is coerced and compiled key by key on
# every call (~2 µs a key), an expanding parameter is only spliced in.
_STORED_USAGE = select(_U.message_key, _U.run_key, _U.input_tokens + _U.output_tokens + _U.cache_write_5m_tokens
                       + _U.cache_write_1h_tokens + _U.cache_read_tokens, _U.output_tokens) \
    .where(_U.message_key.in_(bindparam("keys", expanding=True)))


def _upsert_usage(session: Session, rows: list[UsageRow]) -> tuple[set[str], set[str]]:
    """Max-wins upsert into the global dedupe; returns the run keys owning these messages, and
    those of them that may own a row these ``rows`` did not insert (a chunk only partly inserted).
    ``rows``: in the order they were read, a response two files hold twice: the first copy stored
    keeps its owner and the largest copy's counts win, as offering them one by one would.

    Insert if new: a chunk goes in by an INSERT that skips the keys already stored, and only a
    chunk where some were (few, after a first collect) is looked up, so a larger copy of a stored
    row takes the upsert, whose condition still lets the largest win. Looked up after the INSERT,
    the rows it stored are their own (so never larger) and a stored one keeps its owner."""
    if not rows:
        return set(), set()
    table = UsageMessage.__table__
    owners: set[str] = set()
    mixed: set[str] = set()
    for i in range(0, len(rows), IN_CHUNK):
        chunk = rows[i:i + IN_CHUNK]
        if execute_values(session, _insert_new_usage(session), table, _USAGE_COLUMNS, chunk) == len(chunk):
            owners.update(map(itemgetter(1), chunk))
            continue
        mixed.update(map(itemgetter(1), chunk))
        stored = {key: (run_key, (total, output)) for key, run_key, total, output in session.execute(
            _STORED_USAGE, {"keys": [row[0] for row in chunk]})}
        larger: list[UsageRow] = []
        for row in chunk:
            run_key, rank = stored[row[0]]
            owners.add(run_key)  # the stored row keeps its owner (the upsert never sets run_key)
            mixed.add(run_key)
            if _row_rank(row) > rank:
                larger.append(row)
        execute_values(session, _max_wins_upsert(session), table, _USAGE_COLUMNS, larger)
    return owners, mixed


_TOTALS = (select(_U.run_key, _U.model, func.sum(_U.input_tokens), func.sum(_U.output_tokens),
                  func.sum(_U.cache_write_5m_tokens), func.sum(_U.cache_write_1h_tokens), func.sum(_U.cache_read_tokens))
           .where(_U.run_key.in_(bindparam("keys", expanding=True))).group_by(_U.run_key, _U.model))


def _totals(session: Session, run_keys: Iterable[str]) -> dict[str, dict[str, Usage]]:
    """Per run key, per model: the sums of the usage rows the run owns."""
    result: dict[str, dict[str, Usage]] = {}
    keys = sorted(set(run_keys))
    for i in range(0, len(keys), IN_CHUNK):
        for run_key, model, i_t, o_t, w5, w1, r in session.execute(_TOTALS, {"keys": keys[i:i + IN_CHUNK]}):
            result.setdefault(run_key, {})[model] = Usage(int(i_t or 0), int(o_t or 0), int(w5 or 0),
                                                          int(w1 or 0), int(r or 0))
    return result


def _inserted_totals(sums: Iterable[UsageSums], run_keys: set[str]) -> dict[str, dict[str, Usage]]:
    """:func:`_totals` for runs that had no session_runs row before this transaction and whose
    usage rows all inserted, from the :func:`_usage_sums` of those rows (of the batch, or of each
    of its files): the ledger stores a usage row only with a row for its owner
    (:meth:`Collector._store_runs`), so these rows are all such a run owns (tests hold the rule)."""
    totals: dict[str, dict[str, Usage]] = {}
    for (run_key, model), usage in usage_by_key((key, *counts) for part in sums for key, counts in part.items()
                                                if key[0] in run_keys).items():
        totals.setdefault(run_key, {})[model] = usage
    return totals


def _apply_totals(row: RunRow, by_model: dict[str, Usage], prices: PriceTable) -> None:
    total = Usage()
    cost = weighted = 0.0
    unknown = False
    for model in sorted(by_model):
        usage = by_model[model]
        total = total + usage
        cost += prices.cost_usd(model, usage)
        weighted += prices.weighted_tokens(model, usage)
        if usage.total and not prices.is_known(model):
            unknown = True
    row.input_tokens = total.input_tokens
    row.output_tokens = total.output_tokens
    row.cache_write_5m_tokens = total.cache_write_5m
    row.cache_write_1h_tokens = total.cache_write_1h
    row.cache_read_tokens = total.cache_read
    row.cost_usd = round(cost, 10)
    row.weighted_tokens = round(weighted, 6)
    row.unknown_model = unknown


class _NewRun:
    """A session_runs row to insert (:func:`row_values` takes its attributes), filled like a
    stored SessionRun: a column never set reads None, as on a new SessionRun, but setting one
    costs no ORM attribute event (~30 a row)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # only for attributes never set
        if name in _RUN_COLUMNS:
            return None
        raise AttributeError(name)


_RUN_COLUMNS = frozenset(SessionRun.__table__.columns.keys())
RunRow = SessionRun | _NewRun  # a row the writer fills: stored (ORM) or new


# ---------------------------------------------------------------------------- collector


class Collector:
    """Ingests transcript files into one store. Thin wrapper so a batch shares prices and caches."""

    def __init__(self, store: Store | None, settings: Settings | None = None, *,
                 max_line: int = MAX_LINE_BYTES, post_ingest: bool = True) -> None:
        """``store`` None: the database of ``settings``, opened when the collect first needs it
        (a bulk collect into a new one starts its parsers first: :meth:`_collect_parallel`)."""
        self.store = store
        self.settings = settings
        self.prices = PriceTable(settings.pricing) if settings and settings.pricing else DEFAULT_TABLE
        self.max_line = max_line
        self.post_ingest = post_ingest  # False: the ledger alone (the throughput benchmark's baseline)

    def collect(self, files: list[str], *, agent_type_hint: str | None = None,
                progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
                total_bytes: int | None = None) -> CollectSummary:
        """Ingest files (absolute paths) in order. With ``jobs`` > 1, files are parsed in that many
        worker processes while this one writes the rows (a bounded window, so memory stays flat).
        ``total_bytes``: the files' size, where the caller knows it (else they are looked at)."""
        summary = CollectSummary()
        backlog = 0  # the files' size: whether parser processes pay off, and their first tasks' size
        if jobs is None or jobs > 1:
            backlog = _total_size(files) if total_bytes is None else total_bytes
        if jobs is None:  # worker processes pay off on a large backlog only
            jobs = default_jobs() if backlog >= PARALLEL_MIN_BYTES else 1
        if jobs > 1 and len(files) > 1:
            self._collect_parallel(files, summary, agent_type_hint, progress, jobs, backlog)
        else:
            discard_early_parsers()  # started for a backlog this collect does not parse in processes
            for n, path in enumerate(files, 1):
                summary.files_seen += 1
                self.ingest_file(path, summary=summary, agent_type_hint=agent_type_hint)
                if progress:
                    progress(n, len(files))
        if self.post_ingest:
            self._index_missing_checkpoints()
        return summary

    def _opened_store(self) -> Store:
        if self.store is None:
            assert self.settings is not None, "a Collector without a store needs the settings of one"
            self.store = open_store(self.settings)
        return self.store

    def _database_is_new(self) -> bool:
        """True while the store is not open and its settings name a SQLite file not made yet."""
        database = self.settings.sqlite_path if self.store is None and self.settings is not None else None
        return database is not None and not database.exists()

    def _index_missing_checkpoints(self, attempts: int = 3) -> None:
        """The recall index of the checkpoints a bulk collect stored without it (this one's, or
        one's that was interrupted before its end): written once, for those retention kept.
        Another collect ending at the same time may index the same checkpoints, or delete one
        (retention), while this one waits to write: its transaction is then taken again, and
        finds only what is still without terms."""
        from warden.continuity.capture import index_missing

        for attempt in range(attempts):
            try:
                with self._opened_store().session() as session:
                    index_missing(session)
                return
            except IntegrityError:
                if attempt == attempts - 1:
                    raise

    def _collect_parallel(self, files: list[str], summary: CollectSummary, agent_type_hint: str | None,
                          progress: Callable[[int, int], None] | None, jobs: int, total_bytes: int) -> None:
        in_flight = 4 * jobs  # tasks parsing or parsed: workers never wait on a batch write
        done = 0
        drivername = (self.store.engine.url if self.store is not None else make_url(self.settings.database_url)).drivername
        options = (agent_type_hint, self.max_line, self.post_ingest, drivername)
        # the parsers `warden collect` started before it loaded the CLI, if they parse these files
        early = take_early_parsers(files, jobs, options)
        queue = early.queue if early is not None else \
            ParseQueue(start_parser_pool(jobs), *options, jobs=jobs, backlog=total_bytes)
        window = queue.window
        # Set while the first transaction into an empty ledger runs in a rollback journal: the pages
        # it has written so far go to the disk meanwhile.
        filling: FillWriteback | None = None
        with _fewer_gc_passes(), queue.pool as pool, ExitStack() as open_session:
            try:
                # (path, stat, start, parse result, what its parser process handed over)
                batch: list[tuple[str, os.stat_result, int, Any, _FromParser]] = []
                batch_bytes = 0
                # Batches are committed together for COMMIT_SECONDS (fewer WAL syncs and page
                # rewrites); the paths stored since the last commit are taken again one by one if
                # the transaction fails, and what they added to the summary is dropped.
                uncommitted: list[str] = []
                pending = CollectSummary()  # the counts of the stores not committed yet
                last_commit = time.monotonic()

                def first_transaction_ended(session: Session) -> None:
                    nonlocal filling
                    if filling is not None:
                        filling.stop()
                        filling = None
                        back_to_wal(session)

                def store_batch(session: Session, final: bool = False) -> None:
                    nonlocal batch_bytes, pending, last_commit
                    stored = dict(_rows_in(session, _STORED_OFFSETS, [item[0] for item in batch]))  # one query
                    fresh, stale = [], []
                    for path, st, start, result, from_parser in batch:
                        if stored.get(path, 0) == start:
                            fresh.append((path, st, None, start, result, from_parser.hashes, from_parser))
                        else:  # someone (a hook) ingested it meanwhile: redo from the new offset
                            stale.append(path)
                    if stored:  # the rows to update, as ORM objects
                        offset_rows = _load_offsets(session, [item[0] for item in fresh if item[0] in stored])
                        fresh = [(path, st, offset_rows.get(path), *rest) for path, st, _, *rest in fresh]
                    try:
                        uncommitted.extend(item[0] for item in fresh)
                        if fresh:  # the checkpoints' recall index is written at the collect's end
                            self._store_files(session, fresh, pending, index_checkpoints=False)
                        # stale files are ingested in transactions of their own: ours must not hold the lock
                        if final or stale or time.monotonic() - last_commit >= COMMIT_SECONDS:
                            session.commit()
                            first_transaction_ended(session)
                            summary.absorb(pending)
                            uncommitted.clear()
                            pending, last_commit = CollectSummary(), time.monotonic()
                    except IntegrityError:
                        # Another collect (or a hook) stored some of these files after we read their
                        # offsets: its transaction won and ours rolled back whole. Take them one by one
                        # from what it stored.
                        session.rollback()
                        first_transaction_ended(session)
                        stale.extend(uncommitted)
                        uncommitted.clear()
                        pending = CollectSummary()
                    batch.clear()
                    batch_bytes = 0
                    if filling is not None:
                        filling.kick()
                    for path in stale:
                        self.ingest_file(path, summary=summary, agent_type_hint=agent_type_hint)

                def drain_one(session: Session, last: bool = False) -> None:
                    nonlocal done, batch_bytes
                    planned, future = window.popleft()
                    if last and batch and not future.done():
                        # every task is out: what the writer has is stored while the parsers end,
                        # not after them (the writer would wait)
                        store_batch(session)
                    for (path, st, start), outcome in zip(planned, future.result()):
                        if isinstance(outcome, OSError):
                            summary.files_skipped += 1
                            summary.skipped.append(f"{path}: {outcome.strerror or outcome}")
                        else:
                            result, from_parser = outcome
                            batch.append((path, st, start, result, from_parser))
                            batch_bytes += result[2] - start
                            if batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_FILES:
                                store_batch(session)
                        done += 1
                        if progress:
                            progress(done, len(files))

                ahead = 0
                if early is not None:  # they took the first files while the CLI loaded
                    ahead = len(early.files)
                    summary.absorb(early.summary)
                elif self._database_is_new():
                    # Opening it makes and migrates it (imports and DDL: ~0.2 s): the parsers take
                    # the first files meanwhile.
                    ahead = plan_ahead(queue, files, summary)
                done += summary.files_skipped
                session = open_session.enter_context(self._opened_store().session())
                if _ledger_is_empty(session) and journal_new_pages_in_place(session):
                    filling = FillWriteback(session)
                    open_session.callback(filling.stop)  # whatever happens, before the session closes
                rest = files[ahead:]
                known = {row.path: row for row in _rows_in(session, _OFFSET_ROWS,  # one query (a chunk)
                                                              [f for f in rest if not _unstorable_path(f)])}
                # All planned first (a stat and a look-up each): the bytes left to parse, which size
                # the parsers' tasks, are what the changed files hold past their stored offsets.
                planned: list[tuple[str, tuple[os.stat_result, int, dict[str, Any] | None]]] = []
                for path in rest:
                    summary.files_seen += 1
                    found = self._plan(session, path, summary, agent_type_hint, known)
                    if found is None:  # skipped or unchanged
                        done += 1
                    else:
                        planned.append((path, found))
                queue.expect(sum(st.st_size - start for _, (st, start, _) in planned))
                for path, found in planned:
                    queue.add(path, *found)
                    while len(window) >= in_flight:
                        drain_one(session)
                queue.submit()
                while window:
                    drain_one(session, last=True)
                pool.shutdown(wait=False)  # every parse is in: the parsers exit while the last batch is stored
                store_batch(session, final=True)
            except BaseException:  # Ctrl-C, SIGTERM's exit, a failed write: stop the parsers now
                _stop_pool(pool)
                if filling is not None:  # this process's later sessions may take the connection: WAL again
                    with suppress(Exception):  # what is raised is the error to report
                        session.rollback()
                        first_transaction_ended(session)
                raise

    def _plan(self, session: Session, path: str, summary: CollectSummary, agent_type_hint: str | None,
              known: dict[str, Any] | None = None) -> tuple[os.stat_result, int, dict[str, Any] | None] | None:
        """(stat, start offset, parser state) to ingest ``path`` from, or None (skipped/unchanged).
        ``known``: the offset rows of a bulk collect (plain rows), read at its start (a row a hook
        writes later is caught when the parse is stored, which reads the stored offsets again)."""
        st = _stat_to_ingest(path, summary)
        if st is None:
            return None
        offset_row = known.get(path) if known is not None else session.get(IngestOffset, path)
        if (offset_row is not None and offset_row.size == st.st_size and offset_row.mtime_ns == st.st_mtime_ns
                and offset_row.parser_version == PARSER_VERSION
                and (agent_type_hint is None or not _needs_agent_type(session, offset_row, agent_type_hint))):
            summary.files_unchanged += 1
            return None
        start, state = 0, None
        if offset_row is not None and offset_row.parser_version == PARSER_VERSION \
                and offset_row.offset <= st.st_size and offset_row.parser_state:
            # Resume only if the file still holds what was read: its head, and the bytes just
            # before the offset (a rewrite that kept the head and grew would otherwise be
            # resumed mid-line). Claude Code only appends; anything else is read again whole.
            kept = offset_row.parser_state
            head_len, tail_len = int(kept.get("head_len", 0)), int(kept.get("tail_len", 0))
            try:
                if _span_hashes(path, (0, head_len), (offset_row.offset - tail_len, tail_len)) == \
                        [offset_row.head_sha256, kept.get("tail_sha256", "")]:
                    start, state = offset_row.offset, kept.get("parser")
            except OSError:
                pass
        return st, start, state

    def ingest_file(self, path: str, *, summary: CollectSummary | None = None,
                    agent_type_hint: str | None = None) -> str | None:
        """Ingest one transcript incrementally, in one transaction; returns its run key (None if
        skipped or unchanged)."""
        summary = summary if summary is not None else CollectSummary()
        path = os.path.abspath(path)
        before = summary.snapshot()
        try:
            return self._ingest_file_once(path, summary, agent_type_hint)
        except IntegrityError:
            # Another collect (or a hook) stored this file's rows between our read and our write;
            # ours rolled back whole: take the file again from what it stored.
            summary.restore(before)
            return self._ingest_file_once(path, summary, agent_type_hint)

    def _ingest_file_once(self, path: str, summary: CollectSummary, agent_type_hint: str | None) -> str | None:
        with self._opened_store().session() as session:
            plan = self._plan(session, path, summary, agent_type_hint)
            if plan is None:
                return None
            st, start, state = plan
            ends = _ReadEnds()
            try:
                result = parse_file(path, start=start, state=state, agent_type=agent_type_hint,
                                    max_line=self.max_line, ends=ends)
            except OSError as exc:
                summary.files_skipped += 1
                summary.skipped.append(f"{path}: {exc.strerror or exc}")
                return None
            assert ends.hashes is not None
            item = (path, st, session.get(IngestOffset, path), start, result, ends.hashes, None)
            return self._store_files(session, [item], summary)[0]

    def _store_files(self, session: Session, items: list[tuple[str, os.stat_result, IngestOffset | None, int,
                                                              tuple[ParsedRun, dict[str, Any] | None, int],
                                                              ConsumedHashes, _FromParser | None]],
                     summary: CollectSummary, *, index_checkpoints: bool = True) -> list[str | None]:
        """Write the rows of parsed files, in order, with one statement per kind for the batch.
        An item is (path, stat, offset row, start, parse result, the hashes of what it consumed,
        what its parser process handed over or None). A batch of one is the hook's and the
        sequential path; a larger one, the bulk path's, which leaves the recall index of its
        checkpoints to the collect's end (``index_checkpoints`` False: see capture.index_missing)."""
        runs: list[tuple[str, ParsedRun, str, _FromParser | None] | None] = []  # (path, parsed, run_key, from parser)
        for path, st, offset_row, start, (parsed, parser_state, end), _, from_parser in items:
            prior_state = offset_row.parser_state.get("parser") if offset_row is not None and start else None
            summary.files_ingested += 1
            summary.bytes_read += end - start
            summary.lines += parsed.stats.lines - ((prior_state or {}).get("stats", {}).get("lines", 0))
            if parsed.agent_id and not parsed.agent_type:
                parsed.agent_type = read_meta_sidecar(path)
            if _has_activity(parsed, prior_state):
                runs.append((path, parsed, _run_key_of(parsed, path), from_parser))
            else:
                runs.append(None)
        with session.no_autoflush:
            rows_by_key = self._store_runs(session, [r for r in runs if r is not None], summary)
        keys: list[str | None] = []
        new_offsets: list[dict[str, Any]] = []  # inserted in one statement, not one ORM object each
        offset_defaults = insert_defaults(IngestOffset.__table__)
        for (path, st, offset_row, start, (parsed, parser_state, end), hashes, from_parser), run in zip(items, runs):
            kept: Any
            if from_parser is None or from_parser.offset_state is None:
                kept = _offset_state(hashes, parser_state)
            elif offset_row is None:  # the new row's JSON text, as the parser process encoded it
                kept = _EncodedJSON(from_parser.offset_state)
            else:  # a row stored meanwhile (or a file read again whole): the ORM takes values
                kept = json_loads(from_parser.offset_state)
            values = {"run_key": run[2] if run else None, "offset": parsed.bytes_consumed, "size": end,
                      "mtime_ns": st.st_mtime_ns, "head_sha256": hashes[1], "parser_version": PARSER_VERSION,
                      "parser_state": kept}
            if offset_row is None:
                new_offsets.append(row_values(IngestOffset.__table__, {"path": path, **values}, offset_defaults))
            else:
                for name, value in values.items():
                    setattr(offset_row, name, value)
            keys.append(run[2] if run else None)
        execute_many(session, _OFFSET_INSERT, IngestOffset.__table__, new_offsets, json_dumps=_ledger_json)
        session.flush()
        if self.post_ingest and any(runs):  # summary-only files have no run to capture from
            from warden.continuity.capture import load_stored_captures, write_pending
            from warden.continuity.service import retention_horizon, trim_to_keep

            if self.settings is None:  # read once per collect, not once per run
                self.settings = load_settings()
            stored = load_stored_captures(session, [run[1].run_key for run in runs if run is not None], IN_CHUNK,
                                          retention_horizon(session, self.settings), defer=True,
                                          index=index_checkpoints)
            for run in runs:
                if run is not None:
                    _after_run_ingested(session, rows_by_key[run[2]], run[1], self.settings,
                                        run[3].precaptured if run[3] else None, stored)
            write_pending(session, stored)  # the batch's checkpoints: one flush (and one index insert)
            trim_to_keep(session, self.settings)
        return keys

    def _store_runs(self, session: Session, runs: list[tuple[str, ParsedRun, str, _FromParser | None]],
                    summary: CollectSummary) -> dict[str, RunRow]:
        """``runs``: (path, parsed, run key, what its parser process built or None)."""
        if not runs:
            return {}
        # The files' rows in order, a response offered twice (by two files) twice: the store's
        # dedupe keeps what offering them one by one would (_upsert_usage), and tells which runs
        # own a response offered twice, whose sums are then the database's.
        rows: list[UsageRow] = []
        file_sums: list[UsageSums] = []  # each file's rows summed
        embedded_owners: dict[str, tuple[str, str | None, str, ParsedRun]] = {}  # key -> (session, agent, path, parent)
        convert = _dialect_timestamp_converter(session.get_bind().dialect)
        for path, parsed, run_key, from_parser in runs:
            if from_parser is not None:
                rows += from_parser.usage_rows
                file_sums.append(from_parser.usage_sums)
            else:
                file_rows = list(_usage_rows(parsed, run_key, convert).values())
                rows += file_rows
                file_sums.append(_usage_sums(file_rows))
            session_id = run_key.rsplit(":", 1)[0]
            for emb in parsed.embedded_usage:
                owner = run_key_for(session_id, emb.agent_id) if emb.agent_id else run_key
                if owner != run_key:
                    embedded_owners.setdefault(owner, (session_id, emb.agent_id, path, parsed))
        summary.usage_messages += len(rows)
        own_keys = {run[2] for run in runs}
        owners, mixed = _upsert_usage(session, rows)
        affected = owners | own_keys | set(embedded_owners)
        # A parent's Task calls name its subagents' types: load those rows too, whichever file
        # was ingested first (a subagent collected before its parent knows no type yet).
        named_subagents = {run_key_for(run_key.rsplit(":", 1)[0], agent_id)
                           for _, parsed, run_key, _ in runs if parsed.agent_id is None
                           for agent_id in parsed.subagent_types}
        rows_by_key: dict[str, RunRow] = {**_load_runs(session, affected | named_subagents, updating=True)}
        # A subagent of unknown type takes the type its parent's Task call names (_fill_run): from
        # the parent's digest as stored, until this batch fills the parent.
        subagent_types = {key: (digest or {}).get("subagents", {}) for key, digest in _rows_in(
            session, _RUN_DIGESTS, sorted({run_key_for(run_key.rsplit(":", 1)[0], None) for _, parsed, run_key, _ in runs
                                           if parsed.agent_id is not None and not parsed.agent_type}))}
        # A run new here owns only the rows this batch inserted: summed from them, not looked up
        # (most runs of a bulk collect are new); a stored run, or one sharing a chunk with stored
        # rows, is summed by the database.
        counted = affected - rows_by_key.keys() - mixed
        totals = _totals(session, affected - counted)
        totals.update(_inserted_totals(file_sums, counted))

        # New rows are filled like stored ones but never added to the session: they are inserted
        # in one statement at the end (a flush costs more per row).
        new_rows: list[_NewRun] = []
        for path, parsed, run_key, from_parser in runs:
            row = rows_by_key.get(run_key)
            if row is None:
                row = _NewRun(run_key=run_key, session_id=run_key.rsplit(":", 1)[0][:200], agent_id=parsed.agent_id,
                                 agent=MAIN_AGENT if parsed.agent_id is None else UNKNOWN_SUBAGENT,
                                 distill_state=None)
                new_rows.append(row)
                rows_by_key[run_key] = row
            if not _a_fuller_copy_holds(row, parsed, path):
                self._fill_run(row, parsed, path, subagent_types, from_parser.digest if from_parser else None)
            if parsed.agent_id is None:
                for agent_id, agent_type in parsed.subagent_types.items():
                    # A parent's Task calls name its subagents' types: fill rows that did not know theirs.
                    sub = rows_by_key.get(run_key_for(row.session_id, agent_id))
                    if sub is not None and sub.agent == UNKNOWN_SUBAGENT:
                        sub.agent = agent_type[:200]
            summary.runs_updated += 1
            summary.run_keys.append(run_key)
        for key, (session_id, agent_id, path, parent) in embedded_owners.items():
            if key not in rows_by_key:
                # A subagent known so far only through its parent's progress lines.
                times = [e.timestamp for e in parent.embedded_usage if e.timestamp and e.agent_id == agent_id]
                row = _NewRun(run_key=key, session_id=session_id[:200], agent_id=agent_id,
                                 agent=parent.subagent_types.get(agent_id or "", UNKNOWN_SUBAGENT)[:200],
                                 project=parent.cwd, source_path=path, models=[], trace_digest={}, line_stats={},
                                 parser_version=PARSER_VERSION, distill_state=None,
                                 started_at=min(times) if times else None, ended_at=max(times) if times else None)
                new_rows.append(row)
                rows_by_key[key] = row
        for key in affected:
            row = rows_by_key.get(key)
            if row is None:
                continue
            by_model = totals.get(key, {})
            _apply_totals(row, by_model, self.prices)
            models = list(row.models or [])
            models += sorted(m for m in by_model if m not in models and m != "<synthetic>")
            row.models = models
        table = SessionRun.__table__
        defaults = insert_defaults(table)
        execute_many(session, _RUN_INSERT, table, [row_values(table, row, defaults) for row in new_rows],
                     json_dumps=_ledger_json)
        if self.post_ingest and new_rows:  # the later stages' steps take stored rows (with their ids)
            rows_by_key.update(_load_runs(session, [row.run_key for row in new_rows]))
        return rows_by_key

    def _fill_run(self, row: RunRow, parsed: ParsedRun, path: str, subagent_types: dict[str, dict[str, str]],
                  digest: str | None = None) -> None:
        """``subagent_types``: per parent run key, the subagents its digest names (a main run's
        entry is replaced as it is filled); ``digest``: the run's :func:`_run_digest` as its
        parser process encoded it (or None)."""
        if parsed.agent_id is not None:
            agent = parsed.agent_type or subagent_types.get(run_key_for(row.session_id, None), {}).get(parsed.agent_id)
            if agent:
                row.agent = agent[:200]
            elif not row.agent:
                row.agent = UNKNOWN_SUBAGENT
        else:  # what its digest's "subagents" holds (_run_digest)
            subagent_types[row.run_key] = parsed.subagent_types
        row.project = parsed.cwd or row.project
        row.models = list(parsed.models)  # cumulative over the file (the parser state carries it)
        row.started_at = parsed.started_at or row.started_at
        row.ended_at = parsed.ended_at or row.ended_at
        for name in ("tool_calls", "file_reads", "rereads", "greps", "edits", "failed_tool_results"):
            setattr(row, name, int(parsed.counters.get(name, 0)))
        row.completed = parsed.completed
        row.placeholder_output = parsed.placeholder_output
        row.trace_digest = _EncodedJSON(digest) if digest is not None else _run_digest(parsed)
        row.line_stats = dict(parsed.stats.__dict__)
        row.source_path = path
        row.source_offset = parsed.bytes_consumed
        row.parser_version = PARSER_VERSION


def _a_fuller_copy_holds(row: RunRow, parsed: ParsedRun, path: str) -> bool:
    """True when another file of the same run (a stale backup copy, a second tree) that is still
    on disk was read further than ``path``: the run's counters and times stay that file's, so
    the row never mixes a shorter copy's counters with the fuller copy's tokens."""
    other = row.source_path
    return bool(other and other != path and parsed.bytes_consumed < (row.source_offset or 0)
                and os.path.isfile(other))


# Each compiled once (an expanding parameter is only spliced in; a list is coerced key by key).
# The ORM's are for rows the writer updates; what it only reads, it reads as plain rows.
_R, _O = SessionRun.__table__.c, IngestOffset.__table__.c
_RUNS_BY_KEY = select(SessionRun).where(SessionRun.run_key.in_(bindparam("keys", expanding=True)))
_STORED_RUN_KEYS = select(_R.run_key).where(_R.run_key.in_(bindparam("keys", expanding=True)))
_RUN_DIGESTS = select(_R.run_key, _R.trace_digest).where(_R.run_key.in_(bindparam("keys", expanding=True)))
_OFFSETS_BY_PATH = select(IngestOffset).where(IngestOffset.path.in_(bindparam("keys", expanding=True)))
_OFFSET_ROWS = select(IngestOffset.__table__).where(_O.path.in_(bindparam("keys", expanding=True)))
_STORED_OFFSETS = select(_O.path, _O.offset).where(_O.path.in_(bindparam("keys", expanding=True)))
_ANY_OFFSET = select(_O.path).limit(1)  # the table's column: an ORM attribute would configure the mappers


@functools.cache
def _runs_to_update() -> Any:
    """The rows the writer updates, without their trace digest and line counters (replaced, not
    read). Built when first used: deferring a column configures the ORM's mappers (~20 ms),
    which a bulk collect into a new database never needs."""
    return _RUNS_BY_KEY.options(defer(SessionRun.trace_digest), defer(SessionRun.line_stats))


def _rows_in(session: Session, stmt: Any, keys: Iterable[str]) -> Iterator[Any]:
    """The rows ``stmt`` selects for ``keys`` (its expanding parameter), IN_CHUNK keys a query."""
    keys = list(keys)
    for i in range(0, len(keys), IN_CHUNK):
        yield from session.execute(stmt, {"keys": keys[i:i + IN_CHUNK]})


def _load_runs(session: Session, run_keys: Iterable[str], *, updating: bool = False) -> dict[str, SessionRun]:
    """The stored rows of ``run_keys``, as ORM objects (``updating``: as :func:`_runs_to_update`
    loads them): looked up plainly first, so a key not stored (in a bulk collect into a new
    database, any) costs no ORM query, nor the ORM's set-up for one."""
    stored = [key for key, in _rows_in(session, _STORED_RUN_KEYS, sorted(set(run_keys)))]
    if not stored:
        return {}
    return {row.run_key: row for row, in _rows_in(session, _runs_to_update() if updating else _RUNS_BY_KEY, stored)}


def _load_offsets(session: Session, paths: Iterable[str]) -> dict[str, IngestOffset]:
    """The offset rows of ``paths``, as ORM objects (to update)."""
    return {row.path: row for row, in _rows_in(session, _OFFSETS_BY_PATH, paths)}


def _ledger_is_empty(session: Session) -> bool:
    """No transcript ingested yet: a collect's first transaction only adds pages."""
    return session.execute(_ANY_OFFSET).first() is None


def _has_activity(parsed: ParsedRun, state: dict[str, Any] | None) -> bool:
    """Summary-only files (old versions) hold no session activity and get no run row."""
    return parsed.has_activity or bool((state or {}).get("turn_index"))


def _needs_agent_type(session: Session, offset_row: IngestOffset, agent_type: str) -> bool:
    if not offset_row.run_key:
        return False
    row = session.scalars(select(SessionRun).where(SessionRun.run_key == offset_row.run_key)).first()
    return row is not None and row.agent_id is not None and row.agent != agent_type


@contextmanager
def _fewer_gc_passes() -> Iterator[None]:
    """The cyclic collector less often while a bulk collect writes: the writer, too, allocates
    many short-lived containers (the results it unpickles, statement parameters, ORM rows) that
    reference counting frees, and the passes over them (full ones over the whole heap among
    them) cost ~15% of the writer's CPU."""
    before = gc.get_threshold()
    gc.set_threshold(*BULK_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _after_run_ingested(session: Session, run_row: SessionRun, parsed: ParsedRun, settings: Settings,
                        precaptured: Any = None, stored_captures: StoredCaptures | None = None) -> None:
    """Per-run steps of later stages, run after ``run_row`` is written, in the same transaction.

    ``parsed`` may be a resumed parse (``parsed.start_offset > 0``): its turns, tool calls and
    prompts then cover only the newly appended lines. Add calls here (checkpoint capture,
    distill queueing); keep each one cheap — hooks run this inside a 2-second budget."""
    from warden.continuity.capture import record_checkpoints  # pure capture + upsert, no model call
    from warden.distill.trigger import queue_if_expensive  # one indexed query; never distills here

    record_checkpoints(session, run_row, parsed, precaptured, stored_captures)
    queue_if_expensive(session, run_row, settings)


# ---------------------------------------------------------------------------- entry points


# A bulk collect stores its parses in batches of at most these transcript bytes and files: each
# batch costs the writer a few look-ups and statements whatever its size, and the last one is
# stored after the parsers are done (1 GB of 3,000 files, paired runs: 250 files rather than 100,
# ~0.06 CPU-s less in 18 of 28; 160 MB and 600 files rather than 64 MB and 250, ~0.1 CPU-s less in
# 19 of 28; 100 MB and 400 files rather than 160 MB and 600, 0.05 s faster in 18 of 30, where
# 320 MB and 1,200 files were 0.13 s slower)
BATCH_BYTES = 100 << 20
BATCH_FILES = 400
COMMIT_SECONDS = 2.0  # a bulk collect commits its batches together for this long


def require_claude_home(home: Path, alternative: str) -> None:
    """A :class:`UsageError` unless ``home`` (the Claude Code config dir) is a directory: a typo in
    CLAUDE_CONFIG_DIR must not collect nothing, night after night, or install hooks nobody runs."""
    if not home.is_dir():
        # the setting in effect (WARDEN_CLAUDE_HOME beats CLAUDE_CONFIG_DIR, which beats the file)
        named = ("WARDEN_CLAUDE_HOME" if os.environ.get("WARDEN_CLAUDE_HOME")
                 else "CLAUDE_CONFIG_DIR (or claude_home in warden.toml)")
        raise UsageError(f"Claude Code config directory {home} {'is not a directory' if home.exists() else 'does not exist'}:"
                         f" set {named} to it, {alternative}")


def default_paths(settings: Settings) -> list[Path]:
    """The Claude Code config dir's ``projects/``; none while Claude Code has kept no session.
    A config dir that is not there is a :class:`UsageError`: a typo in CLAUDE_CONFIG_DIR must not
    collect nothing, night after night, without a word."""
    home = settings.claude_home
    require_claude_home(home, "or name the paths to collect")
    projects = home / "projects"
    if projects.exists() and not projects.is_dir():
        raise UsageError(f"{projects} is not a directory: Claude Code keeps its transcripts in a projects/ directory")
    return [projects] if projects.is_dir() else []


def collect_paths(settings: Settings, paths: Iterable[Path | str] | None = None, *,
                  agent_type_hint: str | None = None, store: Store | None = None,
                  progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
                  post_ingest: bool = True) -> CollectSummary:
    """Collect the given files/directories (default: ``$CLAUDE_CONFIG_DIR/projects``): the
    transcripts under them now, or as the command found them when it started parser processes
    for them (:func:`~warden.ingest.transcripts.early_transcripts`).

    Raises :class:`UsageError` for a path that does not exist or cannot be read; a default
    projects directory that does not exist yet simply yields nothing."""
    given = [Path(p).expanduser() for p in (paths or [])]
    if not given:
        given = default_paths(settings)
    found = early_transcripts(given)  # found as the command started, for the parsers it started then
    if found is None:
        found = transcript_sizes(given)
    files = [os.path.abspath(file) for file in found]
    collector = Collector(store, settings, post_ingest=post_ingest)  # no store: it opens the settings' one
    try:
        return collector.collect(files, agent_type_hint=agent_type_hint, progress=progress, jobs=jobs,
                                 total_bytes=sum(found.values()))
    finally:
        if store is None and collector.store is not None:
            collector.store.engine.dispose()


# ---------------------------------------------------------------------------- reading the ledger


def parse_since(value: str | None, *, now: datetime | None = None) -> datetime | None:
    """``--since``: an ISO date/time (UTC unless it says otherwise) or an age like 7d, 12h, 30m."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    units = {"d": 86400, "h": 3600, "m": 60, "w": 7 * 86400}
    digits = text[:-1]
    if len(text) >= 2 and text[-1] in units and digits.isascii() and digits.isdigit():
        if len(digits) > 12:  # more than any calendar holds: everything is since then
            return datetime.min
        try:
            return now - timedelta(seconds=int(digits) * units[text[-1]])
        except OverflowError:  # before year 1: everything is since then
            return datetime.min
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {value!r}: expected an ISO date/time or an age like 7d, 12h") from None
    if dt.tzinfo is not None:
        try:
            dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:  # the UTC time of 0001-01-01+01:00 (or 9999-12-31-01:00) is off the calendar
            return datetime.min if dt.year == 1 else datetime.max
    return dt


def session_row_json(row: SessionRun) -> dict[str, Any]:
    """The ``sessions --json`` element (issue 2 lists the required fields)."""
    return {
        "id": row.id,  # what `warden distill --run` takes
        "session_id": row.session_id, "agent_id": row.agent_id, "agent": row.agent, "project": row.project,
        "models": list(row.models or []), "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
        "cache_creation_tokens": row.cache_write_5m_tokens + row.cache_write_1h_tokens,
        "cache_write_5m_tokens": row.cache_write_5m_tokens, "cache_write_1h_tokens": row.cache_write_1h_tokens,
        "cache_read_tokens": row.cache_read_tokens, "cost_usd": row.cost_usd, "weighted_tokens": row.weighted_tokens,
        "tool_calls": row.tool_calls, "file_reads": row.file_reads, "rereads": row.rereads, "greps": row.greps,
        "edits": row.edits, "failed_tool_results": row.failed_tool_results, "completed": row.completed,
        "placeholder_output": row.placeholder_output, "unknown_model": row.unknown_model,
        "started_at": iso_utc(row.started_at, "seconds"), "ended_at": iso_utc(row.ended_at, "seconds"),
        "source_path": row.source_path, "run_key": row.run_key,
    }


def known_agents(session: Session) -> list[str]:
    return sorted(session.scalars(select(SessionRun.agent).distinct()))


def list_sessions(session: Session, *, agent: str | None = None, project: str | None = None,
                  since: datetime | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Session runs, newest first. An agent the ledger has never seen is a usage error."""
    # the listing never shows a run's trace digest or line counters: a few KB a row not loaded
    stmt = select(SessionRun).options(defer(SessionRun.trace_digest), defer(SessionRun.line_stats))
    if agent is not None:
        if agent != MAIN_AGENT and agent not in known_agents(session):
            known = ", ".join(known_agents(session)[:20]) or "none yet"
            raise UsageError(f"unknown agent {agent!r} (known: {known})")
        stmt = stmt.where(SessionRun.agent == agent)
    if project is not None:  # any case, non-ASCII letters too (SQLite's own lower() knows only ASCII)
        # a secret in it redacted, as the parser stores the project: the same path still matches
        project = redact_secrets(project)
        if session.get_bind().dialect.name == "sqlite":
            stmt = stmt.where(func.warden_casefold(SessionRun.project).contains(project.casefold(), autoescape=True))
        else:
            stmt = stmt.where(SessionRun.project.icontains(project, autoescape=True))
    if since is not None:
        stmt = stmt.where(func.coalesce(SessionRun.ended_at, SessionRun.started_at) >= since)
    stmt = stmt.order_by(SessionRun.started_at.desc(), SessionRun.run_key)
    if limit:
        stmt = stmt.limit(limit)
    return [session_row_json(r) for r in session.scalars(stmt)]


def status(session: Session) -> dict[str, Any]:
    """Per agent: sessions, runs, tokens by type, cost, cost-weighted tokens, p75 per run (of all
    runs, and the distill trigger's over its window), re-read rate."""
    from warden.distill.trigger import current_threshold

    agents: dict[str, dict[str, Any]] = {}
    weighted: dict[str, list[float]] = {}
    costs: dict[str, list[float]] = {}  # summed with fsum: the same figures whatever order rows come in
    sessions_by_agent: dict[str, set[str]] = {}
    stmt = select(SessionRun.agent, SessionRun.session_id, SessionRun.input_tokens, SessionRun.output_tokens,
                  SessionRun.cache_write_5m_tokens, SessionRun.cache_write_1h_tokens, SessionRun.cache_read_tokens,
                  SessionRun.cost_usd, SessionRun.weighted_tokens, SessionRun.file_reads, SessionRun.rereads,
                  SessionRun.placeholder_output)
    for (agent, sid, i_t, o_t, w5, w1, r_t, cost, wt, reads, rereads, placeholder) in session.execute(stmt):
        a = agents.setdefault(agent, {"agent": agent, "sessions": 0, "runs": 0, "input_tokens": 0, "output_tokens": 0,
                                      "cache_write_5m_tokens": 0, "cache_write_1h_tokens": 0, "cache_read_tokens": 0,
                                      "cost_usd": 0.0, "weighted_tokens": 0.0, "file_reads": 0, "rereads": 0,
                                      "placeholder_runs": 0})
        a["runs"] += 1
        a["input_tokens"] += i_t
        a["output_tokens"] += o_t
        a["cache_write_5m_tokens"] += w5
        a["cache_write_1h_tokens"] += w1
        a["cache_read_tokens"] += r_t
        a["file_reads"] += reads
        a["rereads"] += rereads
        a["placeholder_runs"] += 1 if placeholder else 0
        weighted.setdefault(agent, []).append(wt)
        costs.setdefault(agent, []).append(cost)
        sessions_by_agent.setdefault(agent, set()).add(sid)
    out = []
    for agent in sorted(agents, key=lambda k: (k != MAIN_AGENT, k)):
        a = agents[agent]
        a["sessions"] = len(sessions_by_agent[agent])
        a["cost_usd"] = round(math.fsum(costs[agent]), 6)
        a["weighted_tokens"] = round(math.fsum(weighted[agent]), 1)
        a["p75_weighted_tokens"] = round(nearest_rank(weighted[agent], 75), 1)
        # what the distill trigger compares a new run with: the p75 of the last completed,
        # trusted runs (None until there are enough of them)
        trigger = current_threshold(session, agent)
        a["trigger_p75_weighted_tokens"] = None if trigger.threshold is None else round(trigger.threshold, 1)
        a["trigger_runs"] = trigger.priors
        a["reread_rate"] = round(a["rereads"] / a["file_reads"], 4) if a["file_reads"] else 0.0
        out.append(a)
    totals: dict[str, Any] = {k: sum(a[k] for a in out) for k in ("runs", "input_tokens", "output_tokens",
                                                                  "cache_write_5m_tokens", "cache_write_1h_tokens",
                                                                  "cache_read_tokens")}
    totals["cost_usd"] = round(math.fsum(c for values in costs.values() for c in values), 6)
    totals["weighted_tokens"] = round(math.fsum(w for values in weighted.values() for w in values), 1)
    totals["sessions"] = len(set().union(*sessions_by_agent.values())) if sessions_by_agent else 0
    # transcripts still on disk (a moved or deleted file keeps its offset row, and its runs)
    files = sum(1 for path in session.scalars(select(IngestOffset.path)) if os.path.isfile(path))
    return {"agents": out, "totals": totals, "transcripts": files}
