"""Fast paths of the collector and its post-ingest capture give exactly what the plain code does.

Each speed-up keeps a reference: the recall index built part by part equals
``recall.checkpoint_terms`` of the joined text, on the real corpus's checkpoints and on random text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from warden.continuity.capture import CheckpointData, capture, searchable_terms
from warden.continuity.recall import checkpoint_terms
from warden.ingest.collector import discover_transcripts, parse_file


def _checkpoint(parts: list[str]) -> CheckpointData:
    return CheckpointData(run_key="s:main", session_id="s", agent_id=None, agent="main", project=None,
                          projects=[], trigger="fill:20", fill=20.0, quality=100.0, active_task=parts[0],
                          decisions=[{"text": p, "project": None} for p in parts[1:]])


def test_searchable_terms_equal_checkpoint_terms_on_the_corpus(corpus: Path) -> None:
    checked = 0
    for path in discover_transcripts([corpus]):
        run, _state, _end = parse_file(str(path))
        for data in capture(run)[0]:
            assert searchable_terms(data) == checkpoint_terms(data.searchable_text())
            checked += 1
    assert checked > 20


# Letters, digits, CJK, Hangul, combining marks, separators and newlines: where tokenizing the
# parts and the joined text could differ if it were not exact.
_TEXT = st.text(alphabet=st.sampled_from(list("ab É é\u0301\u0308ç1_-./\n\tß") + ["漢", "字", "か", "한", "ﬁ", "İ"]),
                max_size=40)


@given(st.lists(_TEXT, min_size=1, max_size=8))
@hsettings(max_examples=300, deadline=None)
def test_searchable_terms_equal_checkpoint_terms_on_random_text(parts: list[str]) -> None:
    data = _checkpoint(parts)
    assert searchable_terms(data) == checkpoint_terms(data.searchable_text())


def test_searchable_terms_respect_the_cap() -> None:
    words = [" ".join(f"word{i}x{j}" for j in range(100)) for i in range(10)]
    data = _checkpoint(words)
    assert searchable_terms(data) == checkpoint_terms(data.searchable_text())


def _checkpoint_rows(home: Path) -> list[tuple]:  # type: ignore[type-arg]
    import sqlite3

    con = sqlite3.connect(home / "warden.db")
    try:
        cps = sorted(con.execute(
            "select run_key, trigger, session_id, agent_id, agent, project, projects, fill, quality, active_task,"
            " decisions, edited_files, read_files, open_questions, errors, last_state, captured_at from checkpoints"))
        terms = sorted(con.execute("select c.run_key, c.trigger, t.term, t.captured_at from checkpoint_terms t"
                                   " join checkpoints c on c.id = t.checkpoint_id"))
        states = sorted(con.execute("select run_key, state from capture_states"))
    finally:
        con.close()
    return [cps, terms, states]


@pytest.mark.usefixtures("timeless_retention")
def test_capture_in_parser_processes_stores_what_the_writer_would(corpus: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A bulk collect captures fresh runs' checkpoints in its parser processes; a one-process
    collect captures them in the writer. The stored checkpoints, terms and carry states are equal."""
    from warden.config import load_settings
    from warden.ingest.collector import collect_paths

    homes = []
    for jobs in (1, 2):
        home = tmp_path / f"home{jobs}"
        monkeypatch.setenv("WARDEN_HOME", str(home))
        collect_paths(load_settings(), [corpus], jobs=jobs, post_ingest=True)
        homes.append(home)
    one, two = (_checkpoint_rows(h) for h in homes)
    assert one[0] and one[1]  # the corpus does produce checkpoints
    assert one == two


@pytest.mark.usefixtures("timeless_retention")
def test_a_bulk_collect_reads_stored_captures_once_per_batch(corpus: Path, tmp_path: Path,
                                                             monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The writer loads a batch's capture states and checkpoints with one query each, not two per
    run, and keeps them current as it adds rows: with a second copy of the largest transcript (one
    run in two files of the batch), the stored rows equal those of a collect of one file at a time."""
    import shutil

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from warden.config import load_settings
    from warden.ingest.collector import collect_paths

    tree = tmp_path / "tree"
    shutil.copytree(corpus, tree)
    largest = max((tree / "projects").rglob("*.jsonl"), key=lambda p: p.stat().st_size)
    (tree / "projects" / "-copy").mkdir()
    shutil.copy(largest, tree / "projects" / "-copy" / largest.name)

    reads: list[str] = []

    def count(_conn, _cursor, statement: str, *_args) -> None:  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("SELECT") and ("FROM capture_states" in statement
                                                               or "FROM checkpoints" in statement):
            reads.append(statement)

    from warden.ingest import collector

    batches: list[int] = []
    store_files = collector.Collector._store_files
    monkeypatch.setattr(collector.Collector, "_store_files", lambda self, session, items, *args, **kwargs: (
        batches.append(len(items)), store_files(self, session, items, *args, **kwargs))[1])
    homes = []
    for jobs in (1, 2):
        home = tmp_path / f"home{jobs}"
        monkeypatch.setenv("WARDEN_HOME", str(home))
        event.listen(Engine, "before_cursor_execute", count)
        try:
            reads.clear()
            batches.clear()
            summary = collect_paths(load_settings(), [tree], jobs=jobs, post_ingest=True)
        finally:
            event.remove(Engine, "before_cursor_execute", count)
        homes.append(home)
    assert summary.files_ingested > 10 and len(batches) < summary.files_ingested / 3
    # a batch's four (the retention horizon, its runs' capture states and checkpoints, what is
    # kept), not two per run; and at the end the two of the recall index's write (the checkpoints
    # without terms, then their rows)
    assert len(reads) <= 4 * len(batches) + 2
    one, two = (_checkpoint_rows(h) for h in homes)
    assert one[0] and one == two


@pytest.mark.usefixtures("timeless_retention")
def test_a_bulk_collect_indexes_once_what_retention_keeps(corpus: Path, tmp_path: Path,
                                                          monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A bulk collect writes the recall index at its end, of the checkpoints retention kept:
    none is indexed and then deleted, none twice; and one stopped before its end leaves its
    checkpoints without terms, which the next collect indexes though it reads nothing new. The
    stored rows are those of a collect of one file at a time, which indexes as it goes."""
    import warden.continuity.capture as capture_module
    from warden.config import load_settings
    from warden.ingest.collector import Collector, collect_paths

    monkeypatch.setenv("WARDEN_CHECKPOINT_KEEP", "30")  # fewer than the corpus captures: retention trims
    plain_index = capture_module.index_terms
    indexed: list[int] = []

    def record(session, rows):  # type: ignore[no-untyped-def]
        indexed.extend(row.id for row in rows)
        return plain_index(session, rows)

    monkeypatch.setattr(capture_module, "index_terms", record)
    homes = {}
    for name, jobs in (("one", 1), ("bulk", 2)):
        homes[name] = tmp_path / name
        monkeypatch.setenv("WARDEN_HOME", str(homes[name]))
        indexed.clear()
        collect_paths(load_settings(), [corpus], jobs=jobs)
    rows = _checkpoint_rows(homes["bulk"])
    assert len(rows[0]) == 30 and rows == _checkpoint_rows(homes["one"])
    import sqlite3

    con = sqlite3.connect(homes["bulk"] / "warden.db")
    kept = sorted(i for (i,) in con.execute("select id from checkpoints"))
    created = con.execute("select seq from sqlite_sequence where name = 'checkpoints'").fetchone()[0]
    con.close()
    assert created > 30 and sorted(indexed) == kept  # more were stored on the way; only the kept indexed, once

    stopped = tmp_path / "stopped"
    monkeypatch.setenv("WARDEN_HOME", str(stopped))
    with monkeypatch.context() as patch:
        patch.setattr(Collector, "_index_missing_checkpoints", lambda self: None)
        collect_paths(load_settings(), [corpus], jobs=2)
    cps, terms, _states = _checkpoint_rows(stopped)
    assert len(cps) == 30 and terms == []
    monkeypatch.setattr(capture_module, "INDEX_GROUP", 7)  # in groups: what one insert of all writes
    summary = collect_paths(load_settings(), [corpus], jobs=2)
    assert summary.files_ingested == 0 and _checkpoint_rows(stopped) == rows


@pytest.mark.usefixtures("timeless_retention")
def test_two_collects_ending_at_once_index_the_checkpoints_once(corpus: Path, tmp_path: Path,
                                                                monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two collects that end together find the same checkpoints without terms: the one that
    writes second, finding terms the first wrote while it waited and a checkpoint it deleted
    (retention), takes its transaction again and indexes only what is still without terms."""
    import sqlite3

    import warden.continuity.capture as capture_module
    from warden.config import load_settings
    from warden.ingest.collector import Collector, collect_paths
    from warden.store.db import open_store

    monkeypatch.setenv("WARDEN_HOME", str(tmp_path / "home"))
    with monkeypatch.context() as patch:  # a first collect stopped before its end: no terms yet
        patch.setattr(Collector, "_index_missing_checkpoints", lambda self: None)
        collect_paths(load_settings(), [corpus], jobs=2)
    plain_index = capture_module.index_terms
    other = open_store(load_settings())
    gone: list[int] = []

    def the_other_collect_first(session, rows):  # type: ignore[no-untyped-def]
        if not gone:  # once: the other collect writes (and deletes) while this one waits
            gone.append(rows[-1].id)
            with other.session() as theirs:
                capture_module.index_missing(theirs)
            con = sqlite3.connect(tmp_path / "home" / "warden.db")
            con.execute("pragma foreign_keys=on")
            con.execute("delete from checkpoints where id = ?", (gone[0],))
            con.commit()
            con.close()
        return plain_index(session, rows)

    monkeypatch.setattr(capture_module, "index_terms", the_other_collect_first)
    Collector(open_store(load_settings()), load_settings())._index_missing_checkpoints()
    cps, terms, _states = _checkpoint_rows(tmp_path / "home")
    assert gone and len(cps) > 1 and terms
    con = sqlite3.connect(tmp_path / "home" / "warden.db")
    unindexed = con.execute("select count(*) from checkpoints c where not exists"
                            " (select 1 from checkpoint_terms t where t.checkpoint_id = c.id)").fetchone()[0]
    stored = con.execute("select count(*) from checkpoint_terms").fetchone()[0]
    con.close()
    assert unindexed == 0 and stored == len(terms)


def test_a_line_over_the_limit_is_skipped_wherever_its_block_boundary_falls(tmp_path: Path) -> None:
    """The limit holds for a line that ends in the block after the one where it started, and
    for one that spans whole blocks: counted oversized, unread, on both paths alike."""
    from warden.ingest.transcripts import READ_CHUNK, parse_file

    limit = READ_CHUNK + 10
    path = tmp_path / "t.jsonl"
    ok = b'{"type":"user","message":{"content":"hi"}}\n'
    # the first long line ends 5 bytes into the second block, so carry + block holds all of it;
    # the second spans three blocks
    path.write_bytes(ok + b"x" * (READ_CHUNK + 20) + b"\n" + ok + b"y" * (3 * READ_CHUNK) + b"\n" + ok)
    for pure in (False, True):
        run, _state, end = parse_file(str(path), max_line=limit, pure=pure)
        assert (run.stats.lines, run.stats.oversized, run.stats.malformed) == (5, 2, 0)
        assert len(run.user_prompts) == 3 and end == run.bytes_consumed == path.stat().st_size
