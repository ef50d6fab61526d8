"""Global usage dedupe across files, subagent attribution in both layouts, progress lines,
agent types, and rewritten or truncated transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from collect_support import (SESSION, append, assert_runs_own_their_usage, assistant, ledger_values, progress,
                             tool_result, tool_use, usage, write)
from warden.config import load_settings
from warden.errors import UsageError
from warden.ingest import collector
from warden.ingest.collector import collect_paths
from warden.store.db import open_store
from warden.store.models import SessionRun, UsageMessage


def _runs() -> dict[str, SessionRun]:
    store = open_store(load_settings())
    with store.session() as db:
        return {r.run_key: r for r in db.scalars(select(SessionRun))}


def _project(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "projects" / "-proj"


@pytest.mark.parametrize("jobs", [1, 2])  # 2: one batch of parser processes' files that repeat a response
def test_a_response_repeated_in_another_file_counts_once_with_its_largest_counts(tmp_path: Path, jobs: int) -> None:
    proj = _project(tmp_path)
    write(proj / f"{SESSION}.jsonl", [assistant("m1", "r1", usage(10, 1, 100, 0)), assistant("m2", "r2", usage(1, 1))])
    resumed = "99999999-2222-3333-4444-555555555555"
    # A resumed session replays m1 (with its final, larger output count) and adds m3.
    write(proj / f"{resumed}.jsonl", [assistant("m1", "r1", usage(10, 50, 100, 0), session=resumed),
                                      assistant("m3", "r3", usage(2, 2), session=resumed)])
    summary = collect_paths(load_settings(), [proj], jobs=jobs)
    assert summary.usage_messages == 4  # offered: m1 by both files, however they are batched
    runs = _runs()
    first, second = runs[f"{SESSION}:main"], runs[f"{resumed}:main"]
    assert (first.input_tokens, first.output_tokens, first.cache_write_5m_tokens) == (11, 51, 100)
    assert (second.input_tokens, second.output_tokens) == (2, 2)
    assert_runs_own_their_usage(open_store(load_settings()))


# A response: (whether a progress line embeds it, as subagent a9's; its id; input and output counts).
# Its model is its id's, in every copy (as in a real transcript: one response, one model).
_RESPONSE = st.tuples(st.booleans(), st.sampled_from(["m1", "m2", "m3", "m4"]), st.integers(0, 3), st.integers(0, 3))
_MODEL = {"m1": "claude-sonnet-4-5-20250929", "m2": "claude-haiku-4-5-20251001", "m3": "claude-opus-4-6",
          "m4": "claude-sonnet-4-5-20250929"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.lists(_RESPONSE, min_size=1, max_size=4), min_size=2, max_size=4))
def test_responses_files_share_are_stored_in_one_batch_as_one_file_at_a_time(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        files: list[list[tuple[bool, str, int, int]]]) -> None:
    """A bulk collect offers its batch's responses together, a response several files hold once
    per file: the ledger (owners, largest counts, run totals) and the count of responses offered
    are what a collect of one file at a time stores."""
    proj = tmp_path_factory.mktemp("claude") / "projects" / "-proj"
    for n, responses in enumerate(files):
        session = f"{n:08d}-2222-3333-4444-555555555555"
        write(proj / f"{session}.jsonl", [
            progress("a9", message, "r" + message, usage(i, o), session=session, model=_MODEL[message]) if embedded
            else assistant(message, "r" + message, usage(i, o), session=session, model=_MODEL[message])
            for embedded, message, i, o in responses])
    monkeypatch.setattr(collector, "IN_CHUNK", 3)  # a batch's rows in many statements: a copy in a later one
    stored = []
    for jobs in (1, 2):  # one file a transaction; all in one batch of parser processes' files
        monkeypatch.setenv("WARDEN_HOME", str(tmp_path_factory.mktemp("home")))
        summary = collect_paths(load_settings(), [proj], jobs=jobs, post_ingest=False)
        assert_runs_own_their_usage(open_store(load_settings()))
        stored.append((summary.usage_messages, ledger_values()))
    assert stored[0] == stored[1]


def test_a_bulk_collects_new_runs_total_what_they_own_beside_stored_responses(tmp_path: Path) -> None:
    """New runs are summed from the rows their batch inserted, unless they share a chunk with
    stored rows (a resumed session repeating a stored response): then by the database."""
    proj = _project(tmp_path)
    write(proj / f"{SESSION}.jsonl", [assistant("m1", "r1", usage(10, 1, 100, 0)), assistant("m2", "r2", usage(1, 1))])
    collect_paths(load_settings(), [proj], jobs=1)
    resumed, fresh = "99999999-2222-3333-4444-555555555555", "88888888-2222-3333-4444-555555555555"
    write(proj / f"{resumed}.jsonl", [assistant("m1", "r1", usage(10, 50, 100, 0), session=resumed),
                                      assistant("m3", "r3", usage(2, 2), session=resumed)])
    write(proj / f"{fresh}.jsonl", [assistant("f1", "q1", usage(4, 5, 6, 7), session=fresh),
                                    assistant("f2", "q2", usage(1, 2, w5=3, w1=4), session=fresh,
                                              model="claude-haiku-4-5-20251001"),
                                    progress("a9", "s1", "sr1", usage(5, 3, 20, 7), session=fresh)])
    collect_paths(load_settings(), [proj], jobs=2)
    runs = _runs()
    assert (runs[f"{SESSION}:main"].input_tokens, runs[f"{SESSION}:main"].output_tokens) == (11, 51)
    assert (runs[f"{resumed}:main"].input_tokens, runs[f"{resumed}:main"].output_tokens) == (2, 2)
    new = runs[f"{fresh}:main"]
    assert (new.input_tokens, new.output_tokens, new.cache_write_5m_tokens, new.cache_write_1h_tokens,
            new.cache_read_tokens) == (5, 7, 9, 4, 7)
    assert new.models == ["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]
    assert runs[f"{fresh}:a9"].input_tokens == 5
    assert_runs_own_their_usage(open_store(load_settings()))


def test_progress_lines_count_once_with_or_without_the_subagent_transcript(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    main = write(proj / f"{SESSION}.jsonl", [
        assistant("m1", "r1", usage(1, 1), [tool_use("toolu_task", "Task", subagent_type="Explore", prompt="p")]),
        progress("a42", "s1", "sr1", usage(5, 3, 20, 7)),
        progress("a42", "s2", "sr2", usage(6, 4, 0, 9)),
    ])
    collect_paths(load_settings(), [main])
    sub = _runs()[f"{SESSION}:a42"]  # known so far only through the parent's progress lines
    assert (sub.input_tokens, sub.output_tokens, sub.cache_write_5m_tokens, sub.cache_read_tokens) == (11, 7, 20, 16)
    assert sub.agent == "Explore" and sub.agent_id == "a42"
    # Now the subagent's own transcript (2.1.x layout) arrives, repeating s1 and s2 and adding s3.
    write(proj / SESSION / "subagents" / "agent-a42.jsonl", [
        assistant("s1", "sr1", usage(5, 3, 20, 7), agent_id="a42", model="claude-haiku-4-5-20251001"),
        assistant("s2", "sr2", usage(6, 4, 0, 9), agent_id="a42", model="claude-haiku-4-5-20251001"),
        assistant("s3", "sr3", usage(1, 1), agent_id="a42", model="claude-haiku-4-5-20251001"),
    ])
    collect_paths(load_settings(), [proj])
    runs = _runs()
    sub = runs[f"{SESSION}:a42"]
    assert (sub.input_tokens, sub.output_tokens) == (12, 8)
    assert runs[f"{SESSION}:main"].input_tokens == 1
    assert sub.agent == "Explore" and sub.source_path.endswith("agent-a42.jsonl")
    assert_runs_own_their_usage(open_store(load_settings()))


def test_subagent_file_first_then_parent_progress_still_counts_once(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    write(proj / "agent-a7.jsonl", [assistant("s1", "sr1", usage(5, 5), agent_id="a7")])  # flat 1.x/2.0 layout
    collect_paths(load_settings(), [proj])
    write(proj / f"{SESSION}.jsonl", [assistant("m1", "r1", usage(1, 1)), progress("a7", "s1", "sr1", usage(5, 5))])
    collect_paths(load_settings(), [proj])
    runs = _runs()
    assert set(runs) == {f"{SESSION}:main", f"{SESSION}:a7"}
    assert runs[f"{SESSION}:a7"].input_tokens == 5 and runs[f"{SESSION}:main"].input_tokens == 1
    store = open_store(load_settings())
    with store.session() as db:
        assert db.get(UsageMessage, "s1|sr1").run_key == f"{SESSION}:a7"
    assert_runs_own_their_usage(store)


@pytest.mark.parametrize("jobs", [1, 2])  # 2: the parent's row new in the same batch (its digest sent as text)
def test_agent_type_from_meta_sidecar_and_from_the_parents_task_call(tmp_path: Path, jobs: int) -> None:
    proj = _project(tmp_path)
    sub_dir = proj / SESSION / "subagents"
    write(sub_dir / "agent-b1.jsonl", [assistant("s1", "sr1", usage(), agent_id="b1")])
    (sub_dir / "agent-b1.meta.json").write_text(json.dumps({"agentType": "code-reviewer"}))
    write(proj / "agent-c2.jsonl", [assistant("s2", "sr2", usage(), agent_id="c2")])
    write(proj / f"{SESSION}.jsonl", [
        assistant("m1", "r1", usage(), [tool_use("toolu_9", "Task", subagent_type="Plan", prompt="p")]),
        tool_result("toolu_9", "plan ready", tool_use_result={"status": "completed", "agentId": "c2"}),
    ])
    collect_paths(load_settings(), [proj], jobs=jobs)
    runs = _runs()
    assert runs[f"{SESSION}:b1"].agent == "code-reviewer"
    assert runs[f"{SESSION}:c2"].agent == "Plan"
    assert runs[f"{SESSION}:main"].agent == "main"


def test_truncated_last_line_is_read_once_it_is_complete(tmp_path: Path) -> None:
    path = _project(tmp_path) / f"{SESSION}.jsonl"
    write(path, [assistant("m1", "r1", usage(1, 1))])
    half = json.dumps(assistant("m2", "r2", usage(2, 2))).encode()
    with open(path, "ab") as fh:
        fh.write(half[:40])
    collect_paths(load_settings(), [path])
    first = _runs()[f"{SESSION}:main"]
    assert first.input_tokens == 1 and first.line_stats["truncated"] == 1  # still being written
    with open(path, "ab") as fh:
        fh.write(half[40:] + b"\n")
    collect_paths(load_settings(), [path])
    row = _runs()[f"{SESSION}:main"]
    assert row.input_tokens == 3 and row.line_stats["truncated"] == 0  # whole now, as a fresh read says


def test_rewritten_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = _project(tmp_path) / f"{SESSION}.jsonl"
    write(path, [assistant("m1", "r1", usage(1, 1), [tool_use("t1", "Bash", command="ls")])] * 3)
    collect_paths(load_settings(), [path])
    write(path, [assistant("m9", "r9", usage(4, 4), [tool_use("t9", "Grep", pattern="x")])])
    collect_paths(load_settings(), [path])
    row = _runs()[f"{SESSION}:main"]
    assert row.tool_calls == 1 and row.greps == 1  # counters from the new content only
    assert row.input_tokens == 5  # usage seen is never forgotten: m1 was a real, billed response


def test_incremental_counters_match_a_fresh_collect(tmp_path: Path) -> None:
    path = _project(tmp_path) / f"{SESSION}.jsonl"
    lines = [assistant(f"m{i}", f"r{i}", usage(1, 2, 3, 4), [tool_use(f"t{i}", "Read", file_path="/a.py")])
             for i in range(6)]
    write(path, lines[:3])
    collect_paths(load_settings(), [path])
    append(path, lines[3:])
    collect_paths(load_settings(), [path])
    incremental = _runs()[f"{SESSION}:main"]
    fresh_home = tmp_path / "fresh"
    fresh = load_settings(env={"WARDEN_HOME": str(fresh_home), "CLAUDE_CONFIG_DIR": str(tmp_path / "c2")})
    collect_paths(fresh, [path])
    with open_store(fresh).session() as db:
        whole = db.scalars(select(SessionRun)).one()
    for name in ("input_tokens", "output_tokens", "cache_write_5m_tokens", "cache_read_tokens", "tool_calls",
                 "file_reads", "rereads", "cost_usd", "weighted_tokens", "trace_digest", "line_stats"):
        assert getattr(incremental, name) == getattr(whole, name), name
    assert incremental.rereads == 5


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        collect_paths(load_settings(), [tmp_path / "nope"])


def test_non_regular_files_are_skipped_not_opened(tmp_path: Path) -> None:
    import os

    proj = _project(tmp_path)
    write(proj / f"{SESSION}.jsonl", [assistant("m1", "r1", usage(1, 1))])
    os.mkfifo(proj / "agent-fifo.jsonl")
    summary = collect_paths(load_settings(), [proj])
    assert summary.files_skipped == 1 and summary.files_ingested == 1
    assert "not a regular file" in summary.skipped[0]


def test_a_file_a_hook_ingests_during_a_bulk_collect_is_redone_not_doubled(tmp_path: Path, corpus: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Parser processes parse from the offsets read at the start; a file that something else
    ingested meanwhile is found stale at write time and collected again from its new offset."""
    import warden.ingest.collector as collector
    import warden.ingest.transcripts as transcripts
    from warden.store.models import Checkpoint, IngestOffset

    files = collector.discover_transcripts([corpus])
    monkeypatch.setenv("WARDEN_TEST_RACED", str(files[0]))
    monkeypatch.setattr(transcripts, "_parse_in_worker", _parse_after_a_hook)
    redone: list[str] = []  # files this (the writing) process ingested again by itself
    plain_ingest = collector.Collector.ingest_file
    monkeypatch.setattr(collector.Collector, "ingest_file",
                        lambda self, path, **kw: redone.append(path) or plain_ingest(self, path, **kw))
    summary = collect_paths(load_settings(), [corpus], jobs=2)
    assert summary.files_skipped == 0 and redone == [str(files[0])]
    with open_store(load_settings()).session() as s:
        raced_totals = {r.run_key: (r.input_tokens, r.output_tokens, r.cache_read_tokens) for r in s.scalars(select(SessionRun))}
        checkpoints = sorted((c.run_key, c.trigger) for c in s.scalars(select(Checkpoint)))
        assert s.scalars(select(IngestOffset)).all()
    monkeypatch.undo()
    clean_home = tmp_path / "clean"
    monkeypatch.setenv("WARDEN_HOME", str(clean_home))
    clean_home.mkdir()
    collect_paths(load_settings(), [corpus], jobs=1)
    with open_store(load_settings()).session() as s:
        assert raced_totals == {r.run_key: (r.input_tokens, r.output_tokens, r.cache_read_tokens)
                                for r in s.scalars(select(SessionRun))}
        assert checkpoints == sorted((c.run_key, c.trigger) for c in s.scalars(select(Checkpoint)))


def _parse_after_a_hook(path: str, *args):  # type: ignore[no-untyped-def]
    """A parser process's job, for one file after a hook ingested it (module level: pickled by name)."""
    import os

    import warden.ingest.collector as collector

    if path == os.environ["WARDEN_TEST_RACED"]:
        collector.Collector(open_store(load_settings()), load_settings()).ingest_file(path)
    return _REAL_PARSE(path, *args)


def _real_parse():  # type: ignore[no-untyped-def]
    import warden.ingest.transcripts as transcripts

    return transcripts._parse_in_worker


_REAL_PARSE = _real_parse()


def _unreadable_in_worker(path: str, *args):  # type: ignore[no-untyped-def]
    """A parser process's job, for one file that vanished after it was planned."""
    import os

    if path == os.environ["WARDEN_TEST_GONE"]:
        raise FileNotFoundError(2, "No such file or directory")
    return _REAL_PARSE(path, *args)


def test_a_file_a_parser_process_cannot_read_is_skipped_and_its_task_goes_on(
        corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parser processes take files a task of several at a time: one that cannot be read is
    skipped with its reason, and the files around it in the same task are collected."""
    import warden.ingest.collector as collector
    import warden.ingest.transcripts as transcripts

    files = collector.discover_transcripts([corpus])
    gone = files[1]  # inside the first task
    monkeypatch.setenv("WARDEN_TEST_GONE", str(gone))
    monkeypatch.setattr(transcripts, "_parse_in_worker", _unreadable_in_worker)
    summary = collect_paths(load_settings(), [corpus], jobs=2)
    assert summary.skipped == [f"{gone}: No such file or directory"] and summary.files_skipped == 1
    assert summary.files_ingested == len(files) - 1 == summary.files_seen - 1


def test_ids_too_long_or_odd_for_the_ledger_fall_back_and_collect_everywhere(any_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Untrusted ids are validated where they are read: a 500-character session id, an agent id
    with a space, and a file name that is no id at all never reach the ledger's keys."""
    from collect_support import jsonl
    from warden.names import MAX_ID_LENGTH

    project = tmp_path / "projects" / "p"
    project.mkdir(parents=True)
    (project / "s1.jsonl").write_bytes(jsonl([assistant("m1", "r1", usage(3, 5), session="s" * 500)]))
    (project / ("n" * 200 + ".jsonl")).write_bytes(jsonl([assistant("m2", "r2", usage(7, 1), session="",
                                                                      agent_id="has space")]))
    summary = collect_paths(load_settings(), [tmp_path / "projects"], store=any_store)
    assert summary.files_skipped == 0 and summary.runs_updated == 2
    with any_store.session() as s:
        rows = {r.run_key: r for r in s.scalars(select(SessionRun))}
    assert "s1:main" in rows and rows["s1:main"].input_tokens == 3
    [other] = [r for k, r in rows.items() if k != "s1:main"]
    assert other.run_key.startswith("file-") and other.agent_id is None and other.input_tokens == 7
    assert all(len(k) <= 2 * MAX_ID_LENGTH + 1 for k in rows)


@pytest.mark.usefixtures("timeless_retention")
def test_nul_characters_in_transcript_text_are_dropped_and_collect_everywhere(any_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL's text type refuses NUL, which a transcript may hold anywhere: in a prompt, the
    assistant's text, a message or request id, a tool result. The collect stores the run on every
    engine, the same text on each, with the NUL dropped."""
    from collect_support import jsonl, prompt
    from warden.store.models import Checkpoint

    nul = "\x00"
    project = tmp_path / "projects" / "p"
    project.mkdir(parents=True)
    (project / f"{SESSION}.jsonl").write_bytes(jsonl([
        prompt(f"Make the exporter{nul} stream rows"),
        assistant(f"msg{nul}_1", f"req{nul}_1", usage(5, 50, cr=150_000),
                  [{"type": "text", "text": f"I'll use{nul} a generator."},
                   tool_use("toolu_1", "Edit", file_path=f"/proj/a{nul}.py", old_string="a", new_string="b")]),
        tool_result("toolu_1", f"edited{nul}", is_error=True)]))
    summary = collect_paths(load_settings(), [tmp_path / "projects"], store=any_store)
    assert summary.runs_updated == 1
    with any_store.session() as s:
        [message] = s.scalars(select(UsageMessage))
        checkpoints = list(s.scalars(select(Checkpoint)))
    assert message.message_key == "msg_1|req_1" and message.input_tokens == 5
    assert checkpoints and all(cp.active_task == "Make the exporter stream rows" for cp in checkpoints)
    texts = [getattr(cp, column.key) for cp in checkpoints for column in Checkpoint.__table__.columns
             if isinstance(getattr(cp, column.key), str)]
    assert "I'll use a generator." in " ".join(texts) and not any(nul in text for text in texts)


def test_the_project_filter_ignores_case_on_every_engine(any_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``sessions --project`` matches a part of the project path whatever its case, on SQLite
    (whose LIKE ignores ASCII case) and PostgreSQL (whose LIKE does not) alike; % and _ are literal."""
    from collect_support import jsonl
    from warden.ingest.collector import list_sessions

    project = tmp_path / "projects" / "p"
    project.mkdir(parents=True)
    (project / f"{SESSION}.jsonl").write_bytes(jsonl([assistant("m1", "r1", usage(3, 5), cwd="/home/ÄNNA/Shop_2")]))
    collect_paths(load_settings(), [tmp_path / "projects"], store=any_store)
    with any_store.session() as s:
        found = {query: len(list_sessions(s, project=query))
                 for query in ("Shop", "shop", "änna/SHOP", "ÄNNA", "p_2", "p%2", "nope")}
    assert found == {"Shop": 1, "shop": 1, "änna/SHOP": 1, "ÄNNA": 1, "p_2": 1, "p%2": 0, "nope": 0}


def test_a_path_too_long_for_the_ledger_is_skipped_with_its_reason(any_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from collect_support import jsonl

    deep = tmp_path / "projects"
    for i in range(6):  # 6 × 200 characters of directories
        deep = deep / (chr(ord("a") + i) * 200)
    deep.mkdir(parents=True)
    (deep / "s1.jsonl").write_bytes(jsonl([assistant("m1", "r1", usage(3, 5), session="s1")]))
    (tmp_path / "projects" / "s2.jsonl").write_bytes(jsonl([assistant("m2", "r2", usage(7, 1), session="s2")]))
    summary = collect_paths(load_settings(), [tmp_path / "projects"], store=any_store)
    assert summary.files_skipped == 1 and "path longer than 1000 characters" in summary.skipped[0]
    with any_store.session() as s:
        assert [r.run_key for r in s.scalars(select(SessionRun))] == ["s2:main"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_collect_that_loses_a_race_to_another_collect_takes_its_files_again(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """Another collect stores some files between this one's read of their offsets and its write:
    the write fails on the unique keys, rolls back whole, and the files are taken one by one from
    what the other stored — every file counted once, the ledger equal to a clean collect's."""
    import warden.ingest.collector as collector

    plain_store = collector.Collector._store_files
    raced: list[str] = []

    def store_after_another_collect(self, session, items, summary, **kwargs):  # type: ignore[no-untyped-def]
        if not raced and items and items[0][2] is None:  # a file this collect has never seen stored
            raced.append(items[0][0])
            collector.Collector(open_store(load_settings()), load_settings()).ingest_file(items[0][0])
        return plain_store(self, session, items, summary, **kwargs)

    monkeypatch.setattr(collector.Collector, "_store_files", store_after_another_collect)
    summary = collect_paths(load_settings(), [corpus], jobs=jobs)
    assert raced and summary.files_skipped == 0
    assert summary.files_ingested + summary.files_unchanged == summary.files_seen == 22
    assert summary.files_unchanged >= 1  # the raced file: the other collect stored it
    got = _runs()
    monkeypatch.undo()
    clean = tmp_path / "clean"
    clean.mkdir()
    monkeypatch.setenv("WARDEN_HOME", str(clean))
    collect_paths(load_settings(), [corpus], jobs=1)
    want = _runs()
    assert {k: (r.input_tokens, r.output_tokens, r.cache_read_tokens, r.tool_calls) for k, r in got.items()} == \
           {k: (r.input_tokens, r.output_tokens, r.cache_read_tokens, r.tool_calls) for k, r in want.items()}


def test_a_failed_transaction_takes_every_uncommitted_batch_again(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk collect commits several batches together; when its transaction fails on a later
    batch (the unique keys another writer took first), the batches stored since the last commit
    roll back with it and are taken again one by one: every file counted once, the ledger equal
    to a clean collect's."""
    from sqlalchemy.exc import IntegrityError

    import warden.ingest.collector as collector

    monkeypatch.setattr(collector, "BATCH_FILES", 5)
    monkeypatch.setattr(collector, "COMMIT_SECONDS", 3600.0)  # nothing committed before the failure
    plain_store = collector.Collector._store_files
    calls: list[int] = []

    def fail_third_batch(self, session, items, summary, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(items))
        if len(calls) == 3:
            raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))
        return plain_store(self, session, items, summary, **kwargs)

    monkeypatch.setattr(collector.Collector, "_store_files", fail_third_batch)
    summary = collect_paths(load_settings(), [corpus], jobs=2)
    # two batches of the first task's files stored, the third (5 files, or fewer: the writer stores
    # what it holds while the last tasks are parsed) fails: all three taken again one file at a time
    assert len(calls) > 3 and calls[:2] == [5, 5] and calls[3:3 + sum(calls[:3])] == [1] * sum(calls[:3])
    assert summary.files_skipped == 0 and summary.files_unchanged == 0
    assert summary.files_ingested == summary.files_seen == 22
    got = {k: (r.input_tokens, r.output_tokens, r.cache_read_tokens, r.tool_calls) for k, r in _runs().items()}
    monkeypatch.undo()
    clean = tmp_path / "clean"
    clean.mkdir()
    monkeypatch.setenv("WARDEN_HOME", str(clean))
    clean_summary = collect_paths(load_settings(), [corpus], jobs=1)
    assert (summary.lines, summary.bytes_read, sorted(summary.run_keys)) == \
           (clean_summary.lines, clean_summary.bytes_read, sorted(clean_summary.run_keys))  # each counted once
    assert got == {k: (r.input_tokens, r.output_tokens, r.cache_read_tokens, r.tool_calls) for k, r in _runs().items()}


def test_symlinked_project_directories_are_followed_once_and_loops_end(tmp_path: Path) -> None:
    from warden.ingest.collector import discover_transcripts

    real = tmp_path / "elsewhere" / "proj"
    write(real / f"{SESSION}.jsonl", [assistant("m1", "r1", usage(1, 1))])
    projects = tmp_path / "projects"
    projects.mkdir()
    (projects / "-proj").symlink_to(real)  # a project directory kept elsewhere
    (projects / "-proj-again").symlink_to(real)  # the same directory under a second name
    (real / "loop").symlink_to(projects)  # and a loop back up
    files = discover_transcripts([projects])
    assert len(files) == 1 and files[0].name == f"{SESSION}.jsonl"
    summary = collect_paths(load_settings(), [projects])
    assert summary.files_ingested == 1 and _runs()[f"{SESSION}:main"].input_tokens == 1


def test_transcripts_are_named_and_ordered_as_their_paths_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Named as Path joins them (a relative directory's without "./") and ordered main sessions
    first, then by name: which file's copy of a response counts depends on that order."""
    from warden.ingest.collector import discover_transcripts

    for name in ("b/s2.jsonl", "b/agent-a1.jsonl", "a/s3.jsonl", "s1.jsonl"):
        write(tmp_path / "here" / name, [assistant("m1", "r1", usage(1, 1))])
    write(tmp_path / "there" / "s0.jsonl", [assistant("m1", "r1", usage(1, 1))])
    monkeypatch.chdir(tmp_path / "here")
    there = tmp_path / "there"
    assert discover_transcripts([Path("."), there, Path("a")]) == [
        *sorted([there / "s0.jsonl", Path("a/s3.jsonl"), Path("b/s2.jsonl"), Path("s1.jsonl")], key=str),
        Path("b/agent-a1.jsonl")]


def test_a_shorter_stale_copy_of_a_transcript_never_overwrites_the_fuller_ones_counters(tmp_path: Path) -> None:
    """Two files of one session (a backup copy in another folder): whichever sorts last, the row
    keeps the fuller file's counters beside the tokens both files' responses add up to."""
    lines = [assistant(f"m{i}", f"r{i}", usage(1, 1), [tool_use(f"t{i}", "Bash", command="ls")]) for i in range(6)]
    write(tmp_path / "projects" / "a-live" / f"{SESSION}.jsonl", lines)
    write(tmp_path / "projects" / "z-backup" / f"{SESSION}.jsonl", lines[:2])
    collect_paths(load_settings(), [tmp_path / "projects"])
    row = _runs()[f"{SESSION}:main"]
    assert row.input_tokens == 6 and row.tool_calls == 6 and row.source_path.endswith(f"a-live/{SESSION}.jsonl")


SLOW_COLLECT = """
import sys, time
import warden.ingest.transcripts as transcripts

def slow(*args, **kwargs):
    time.sleep(60)

transcripts._parse_in_worker = slow
if sys.argv[2] == "entry":  # the console script's path: without typer
    from warden.cli.entry import main
else:
    from warden.cli.app import main
sys.exit(main(["collect", "--jobs", "2", sys.argv[1]]))
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (an init that does not reap leaves those behind)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("via", ["entry", "app"])
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_stopped_parallel_collect_leaves_no_parser_process_behind(tmp_path: Path, signame: str, via: str) -> None:
    """Killed (SIGTERM) or interrupted (Ctrl-C), the writer's parser processes end with it: an
    orphan would wait on its pipe forever, holding the files the writer had open (the nightly
    lock among them), and Ctrl-C must not wait for every queued parse."""
    import os
    import signal
    import subprocess
    import sys
    import time

    for n in range(4):
        write(tmp_path / "projects" / "p" / f"{SESSION[:-1]}{n}.jsonl", [assistant(f"m{n}", f"r{n}", usage(1, 1))])
    # a suite started in the background by a script runs with SIGINT ignored, and a child inherits
    # that: give the collect Ctrl-C's default, as a terminal would
    proc = subprocess.Popen([sys.executable, "-c", SLOW_COLLECT, str(tmp_path / "projects"), via],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 20
    children: list[int] = []
    while len(children) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        children = [int(pid) for pid in found]
    assert len(children) == 2
    time.sleep(0.5)
    os.kill(proc.pid, getattr(signal, signame))
    # SIGTERM (a service manager, a CI timeout) ends it as Ctrl-C does: one line, 143 not a silent death
    assert proc.wait(timeout=15) == (143 if signame == "SIGTERM" else 130)
    said = proc.stderr.read().strip().splitlines() if proc.stderr else []
    what = "terminated (SIGTERM)" if signame == "SIGTERM" else "interrupted"
    assert said == [f"warden: {what}; finished work is kept: re-run the same command to resume"]
    end = time.monotonic() + 10
    while any(_running(pid) for pid in children) and time.monotonic() < end:
        time.sleep(0.1)
    left = [pid for pid in children if _running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_a_rewrite_that_keeps_the_head_and_grows_is_read_again_not_resumed_mid_line(tmp_path: Path) -> None:
    """Same first 4 KB, longer than before: resuming at the old offset landed mid-line in the new
    content (a malformed line, responses before it never counted). The bytes just before the
    offset are checked too."""
    path = _project(tmp_path) / f"{SESSION}.jsonl"
    head = [assistant(f"h{i}", f"rh{i}", usage(1, 1), [tool_use(f"th{i}", "Bash", command="ls " + "x" * 300)])
            for i in range(20)]
    write(path, head + [assistant(f"old{i}", f"ro{i}", usage(1, 1)) for i in range(5)])
    collect_paths(load_settings(), [path])
    new_tail = [assistant(f"new{i}", f"rn{i}", usage(2, 2), [tool_use(f"tn{i}", "Grep", pattern="y" * 50)])
                for i in range(40)]
    write(path, head + new_tail)
    collect_paths(load_settings(), [path])
    row = _runs()[f"{SESSION}:main"]
    assert row.line_stats["malformed"] == 0 and row.tool_calls == 60 and row.greps == 40
    assert row.input_tokens == 20 + 5 + 80  # the new responses all counted (and the old ones never forgotten)


STOP_MID_RESULT = r"""
import os, struct, sys, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from warden.ingest.collector import _stop_pool

pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"))
assert pool.submit(abs, -1).result() == 1  # the workers and the pool's manager thread are up
# what a parser ended mid-write leaves: a result's length, then only part of it
os.write(pool._result_queue._writer.fileno(), struct.pack("!i", 1 << 20) + b"half a result")
time.sleep(0.3)  # the manager thread has read the length and waits for the rest
_stop_pool(pool)
print("stopped", flush=True)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="the bulk collect forks its parsers")
def test_stopping_the_parsers_mid_result_lets_the_process_exit() -> None:
    """Ctrl-C during a bulk collect ends the parsers at once; one ended while it wrote its result
    left the pool's manager thread waiting on half a message, and the exit (which joins that
    thread) hung for good after 'interrupted' was printed."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", STOP_MID_RESULT], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped", proc.stderr
