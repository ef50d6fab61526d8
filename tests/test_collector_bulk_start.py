"""A bulk collect's start: into a database not made yet, its parser processes take the first
files before the database is made and migrated; into a made one, they are planned from the
offsets it stores."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from collect_support import append, assert_runs_own_their_usage, assistant, ledger_values, usage, write
from warden.config import load_settings
from warden.ingest import collector, transcripts
from warden.ingest.collector import collect_paths
from warden.store.db import open_store


def _in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    home = tmp_path / name
    home.mkdir()
    monkeypatch.setenv("WARDEN_HOME", str(home))


def test_a_bulk_collect_into_a_new_database_parses_while_it_is_made(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsers are handed the first AHEAD_BYTES of files before the database is opened (made
    and migrated), the rest after; the ledger is what a collect into a made one stores."""
    events: list[str] = []
    plain_submit = concurrent.futures.ProcessPoolExecutor.submit
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit",
                        lambda self, *args, **kw: events.append("parse") or plain_submit(self, *args, **kw))
    plain_open = collector.open_store
    monkeypatch.setattr(collector, "open_store", lambda settings: events.append("open") or plain_open(settings))
    monkeypatch.setattr(transcripts, "TASK_FILES", 1)  # a task per file
    files = collector.discover_transcripts([corpus])
    monkeypatch.setattr(transcripts, "AHEAD_BYTES", sum(f.stat().st_size for f in files[:5]))
    settings = load_settings()
    assert settings.sqlite_path is not None and not settings.sqlite_path.exists()
    summary = collect_paths(settings, [corpus], jobs=2, post_ingest=False)
    assert events.index("open") == 5  # the first five files' tasks first
    assert events.count("parse") == summary.files_ingested == summary.files_seen == 22
    ahead = ledger_values()

    monkeypatch.undo()
    _in_home(tmp_path, monkeypatch, "made-first")
    made = open_store(load_settings())  # made and migrated before the collect
    try:
        made_summary = collect_paths(load_settings(), [corpus], jobs=2, post_ingest=False, store=made)
        assert_runs_own_their_usage(made)
    finally:
        made.engine.dispose()
    assert (summary.bytes_read, summary.lines, summary.run_keys) == \
           (made_summary.bytes_read, made_summary.lines, made_summary.run_keys)
    assert ahead == ledger_values()


def test_a_file_a_hook_stores_while_a_new_database_is_made_is_redone_not_doubled(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files planned before the database is opened are parsed from their start (nothing is
    stored yet); one a hook stored meanwhile (making the database) is found stale when its parse
    is stored, and taken again from what the hook stored: counted once."""
    files = collector.discover_transcripts([corpus])
    plain_open, plain_ingest = collector.open_store, collector.Collector.ingest_file

    def open_after_a_hook(settings):  # type: ignore[no-untyped-def]
        hook = plain_open(settings)
        plain_ingest(collector.Collector(hook, settings), str(files[0]))
        hook.engine.dispose()
        return plain_open(settings)

    redone: list[str] = []  # files the writing process ingested again by itself
    monkeypatch.setattr(collector, "open_store", open_after_a_hook)
    monkeypatch.setattr(collector.Collector, "ingest_file",
                        lambda self, path, **kw: redone.append(path) or plain_ingest(self, path, **kw))
    summary = collect_paths(load_settings(), [corpus], jobs=2, post_ingest=False)
    assert redone == [str(files[0])]
    assert (summary.files_unchanged, summary.files_ingested, summary.files_seen) == (1, 21, 22)
    raced = ledger_values()

    monkeypatch.undo()
    _in_home(tmp_path, monkeypatch, "clean")
    collect_paths(load_settings(), [corpus], jobs=1, post_ingest=False)
    assert raced == ledger_values()


def test_a_bulk_collect_into_a_made_database_parses_from_its_stored_offsets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No file is parsed ahead from its start: an appended transcript is read from where the last
    collect stopped, the others are skipped unchanged, and no parse is found stale and redone."""
    proj = tmp_path / "claude" / "projects" / "-proj"
    sessions = [f"{n}1111111-2222-3333-4444-555555555555" for n in range(1, 4)]
    for n, session in enumerate(sessions):
        write(proj / f"{session}.jsonl", [assistant(f"m{n}", f"r{n}", usage(10 + n, 1), session=session)])
    collect_paths(load_settings(), [proj], jobs=2)
    grown = proj / f"{sessions[1]}.jsonl"
    size = grown.stat().st_size
    append(grown, [assistant("m9", "r9", usage(5, 7), session=sessions[1])])
    redone: list[str] = []
    plain_ingest = collector.Collector.ingest_file
    monkeypatch.setattr(collector.Collector, "ingest_file",
                        lambda self, path, **kw: redone.append(path) or plain_ingest(self, path, **kw))
    summary = collect_paths(load_settings(), [proj], jobs=2)
    assert redone == []
    assert (summary.files_ingested, summary.files_unchanged) == (1, 2)
    assert summary.bytes_read == grown.stat().st_size - size
    runs, _, _ = ledger_values()
    assert runs[f"{sessions[1]}:main"][:2] == (16, 8)
    assert_runs_own_their_usage(open_store(load_settings()))


def test_a_bulk_collect_into_a_made_database_sizes_its_tasks_by_what_is_left_to_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsers' tasks are sized by the bytes the changed files hold past their stored offsets,
    not by the files' whole size: a line appended to each of eight large transcripts still goes
    in several tasks (sized by the whole files, one task took them all, and one parser)."""
    proj = tmp_path / "claude" / "projects" / "-proj"
    sessions = [f"{n}1111111-2222-3333-4444-555555555555" for n in range(1, 9)]
    long_text = [{"type": "text", "text": "x" * 20_000}]
    for n, session in enumerate(sessions):
        write(proj / f"{session}.jsonl", [assistant(f"m{n}-{k}", f"r{n}-{k}", usage(10, 1), long_text, session=session)
                                          for k in range(10)])
    collect_paths(load_settings(), [proj], jobs=2, post_ingest=False)
    for n, session in enumerate(sessions):
        append(proj / f"{session}.jsonl", [assistant(f"a{n}", f"q{n}", usage(5, 7), session=session)])
    tasks: list[int] = []  # the files of each task handed to the parsers
    plain_submit = concurrent.futures.ProcessPoolExecutor.submit
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit",
                        lambda self, fn, task, *args: tasks.append(len(task)) or plain_submit(self, fn, task, *args))
    monkeypatch.setattr(transcripts, "MIN_TASK_BYTES", 1)  # tasks as small as the bytes left make them
    summary = collect_paths(load_settings(), [proj], jobs=2, post_ingest=False)
    assert (summary.files_ingested, sum(tasks)) == (8, 8)
    assert len(tasks) >= 4


def test_a_parser_process_yields_the_cpu_to_the_writer() -> None:
    """A bulk collect's parser processes run at a lower priority than the writer, whose stores
    are the collect's critical path (niceness is capped at 19)."""
    import os

    pool = transcripts.start_parser_pool(1)
    with pool:
        parser, writer = pool.submit(os.nice, 0).result(), os.nice(0)
    assert parser == min(19, writer + transcripts.PARSER_NICENESS)
    assert parser > writer or writer == 19
