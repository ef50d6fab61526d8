"""The collector on the real transcripts of the shared corpus: per-session token totals, idempotent
re-collection, and an append that updates exactly one row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select, text

from collect_support import assert_runs_own_their_usage
from warden.config import load_settings
from warden.ingest.collector import collect_paths
from warden.ingest.pricing import DEFAULT_TABLE
from warden.store.db import open_store
from warden.store.models import SessionRun

EXPECTED_NAME = "claude-home.expected-by-session.json"
CCUSAGE_NAME = "claude-home.ccusage-19.0.3.session.json"


def _by_session(store) -> dict[str, dict[str, int]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, int]] = {}
    with store.session() as db:
        for r in db.scalars(select(SessionRun)):
            t = out.setdefault(r.session_id, {"input_tokens": 0, "output_tokens": 0, "cache_creation_tokens": 0,
                                              "cache_read_tokens": 0})
            t["input_tokens"] += r.input_tokens
            t["output_tokens"] += r.output_tokens
            t["cache_creation_tokens"] += r.cache_write_5m_tokens + r.cache_write_1h_tokens
            t["cache_read_tokens"] += r.cache_read_tokens
    return out


def test_per_session_totals_equal_the_expected_file(corpus: Path) -> None:
    settings = load_settings()
    summary = collect_paths(settings, [corpus], post_ingest=False)
    assert summary.files_seen == 22 and summary.files_skipped == 0
    expected = json.loads((corpus.parent / EXPECTED_NAME).read_text())
    store = open_store(settings)
    got = _by_session(store)
    # The summary-only file (4e27c414…, one "summary" line) holds no session activity: no row.
    assert got == expected


@pytest.mark.parametrize("jobs", [1, 2])
def test_per_session_totals_on_every_database(any_store, corpus: Path, jobs: int) -> None:  # type: ignore[no-untyped-def]
    """The whole collect (checkpoints included), sequential and with parser processes, into SQLite
    and, when configured, PostgreSQL; twice, the second time changing nothing."""
    expected = json.loads((corpus.parent / EXPECTED_NAME).read_text())
    first = collect_paths(load_settings(), [corpus], store=any_store, jobs=jobs)
    assert first.files_skipped == 0 and _by_session(any_store) == expected
    assert_runs_own_their_usage(any_store)
    again = collect_paths(load_settings(), [corpus], store=any_store, jobs=jobs)
    assert again.files_unchanged == 22 and _by_session(any_store) == expected


def test_costs_agree_with_ccusage_except_for_1h_cache_writes(corpus: Path) -> None:
    """ccusage is a cross-check, not the truth: for every one of its 19 entries its cost equals
    ours once 1-hour cache writes are priced its way (at the 5-minute rate, 1.25x input). The API
    bills them at 2x input (``usage.cache_creation.ephemeral_1h_input_tokens``), so ours is higher
    by exactly that. (ccusage names a flat ``agent-<id>.jsonl`` after the file; we attribute it to
    the parent session in its records, as the expected-by-session file does.)"""
    settings = load_settings()
    collect_paths(settings, [corpus], post_ingest=False)
    ccusage = json.loads((corpus.parent / CCUSAGE_NAME).read_text())["session"]
    store = open_store(settings)
    with_1h = 0
    with store.session() as db:
        runs = list(db.scalars(select(SessionRun)))
        for entry in ccusage:
            period = entry["period"]
            if period.startswith("agent-"):
                mine = [r for r in runs if r.agent_id == period[len("agent-"):]]
            else:
                mine = [r for r in runs if r.session_id == period
                        and (r.agent_id is None or "/subagents/" in r.source_path)]
            assert mine, period
            gap = 0.0
            for run in mine:
                for model, w1 in db.execute(text("select model, sum(cache_write_1h_tokens) from usage_messages "
                                                 "where run_key=:k group by model"), {"k": run.run_key}):
                    price = DEFAULT_TABLE.price(model)
                    gap += w1 * (price.cache_write_1h - price.cache_write_5m) / 1e6
            ours = sum(r.cost_usd for r in mine)
            assert ours == pytest.approx(entry["totalCost"] + gap, rel=1e-9, abs=1e-9), period
            assert sum(r.input_tokens for r in mine) == entry["inputTokens"]
            with_1h += gap > 0
    assert len(ccusage) == 19 and with_1h >= 2


def _dump(db_path: Path) -> list[tuple]:
    import sqlite3

    con = sqlite3.connect(db_path)
    try:
        out = []
        for (name,) in con.execute("select name from sqlite_master where type='table' order by name"):
            out.append((name, sorted(map(repr, con.execute(f'select * from "{name}"').fetchall()))))
        return out
    finally:
        con.close()


def test_recollecting_changes_nothing_and_an_append_updates_one_row(corpus: Path, tmp_path: Path) -> None:
    tree = tmp_path / "claude"
    shutil.copytree(corpus, tree)
    settings = load_settings()
    collect_paths(settings, [tree])
    db_path = settings.sqlite_path
    assert db_path is not None
    before = _dump(db_path)
    again = collect_paths(settings, [tree])
    assert again.files_unchanged == 22 and again.files_ingested == 0
    assert _dump(db_path) == before

    # Append one more API response to a real transcript: exactly that row changes, in place.
    target = next(tree.rglob("b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl"))
    last = json.loads(target.read_bytes().splitlines()[-1])
    extra = {**last, "type": "assistant", "uuid": "appended-1", "requestId": "req_appended",
             "message": {"id": "msg_appended", "model": "claude-opus-4-20250514", "role": "assistant",
                         "type": "message", "content": [{"type": "text", "text": "appended"}],
                         "usage": {"input_tokens": 11, "output_tokens": 22, "cache_creation_input_tokens": 33,
                                   "cache_read_input_tokens": 44}}}
    size_before = target.stat().st_size
    with open(target, "ab") as fh:
        fh.write(json.dumps(extra).encode() + b"\n")
    store = open_store(settings)
    with store.session() as db:
        old = {r.run_key: (r.input_tokens, r.output_tokens, r.cache_write_5m_tokens, r.cache_read_tokens, r.id)
               for r in db.scalars(select(SessionRun))}
    summary = collect_paths(settings, [tree])
    assert summary.files_ingested == 1 and summary.bytes_read == target.stat().st_size - size_before
    with store.session() as db:
        new = {r.run_key: (r.input_tokens, r.output_tokens, r.cache_write_5m_tokens, r.cache_read_tokens, r.id)
               for r in db.scalars(select(SessionRun))}
    changed = {k for k in new if new[k] != old.get(k)}
    key = "b45ad5d8-81fb-4bcb-baba-19d9f503d731:main"
    assert changed == {key} and set(new) == set(old)
    o, n = old[key], new[key]
    assert (n[0] - o[0], n[1] - o[1], n[2] - o[2], n[3] - o[3]) == (11, 22, 33, 44)
    assert n[4] == o[4]  # same row, updated in place


def test_parallel_parsing_stores_exactly_what_sequential_parsing_stores(corpus: Path, tmp_path: Path) -> None:
    dumps = []
    for jobs in (1, 2):
        settings = load_settings(env={"WARDEN_HOME": str(tmp_path / f"home{jobs}"),
                                      "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
        summary = collect_paths(settings, [corpus], jobs=jobs, post_ingest=False)
        assert summary.files_ingested == 22
        dumps.append(_strip_times(settings.sqlite_path))
    assert dumps[0] == dumps[1]


def test_a_parallel_collect_after_a_parser_upgrade_stores_what_a_clean_collect_stores(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files whose offset rows an older parser wrote are read again whole by parser processes,
    and their stored rows updated: the ledger holds the values a clean sequential collect stores
    (as values: an updated row's JSON is the ORM's text, a new one's the bulk path's)."""
    import warden.ingest.collector as collector
    from warden.store.models import IngestOffset, UsageMessage

    dumps = []
    for name, versions in (("upgraded", ("0-older", collector.PARSER_VERSION)), ("clean", (collector.PARSER_VERSION,))):
        settings = load_settings(env={"WARDEN_HOME": str(tmp_path / name), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
        for version in versions:
            monkeypatch.setattr(collector, "PARSER_VERSION", version)
            summary = collect_paths(settings, [corpus], jobs=2 if name == "upgraded" else 1, post_ingest=False)
            assert summary.files_ingested == 22
        store = open_store(settings)
        with store.session() as db:
            dumps.append({model.__tablename__: sorted(repr([getattr(row, c.key) for c in model.__table__.columns
                                                             if c.key not in ("id", "created_at", "updated_at")])
                                                        for row in db.scalars(select(model)))
                          for model in (SessionRun, UsageMessage, IngestOffset)})
        store.engine.dispose()
    assert dumps[0] == dumps[1]


def _strip_times(db_path: Path) -> list[tuple]:
    """Table contents without the wall-clock columns (created_at/updated_at)."""
    import sqlite3

    con = sqlite3.connect(db_path)
    try:
        out = []
        for table in ("session_runs", "usage_messages", "ingest_offsets"):
            cols = [r[1] for r in con.execute(f"pragma table_info({table})")
                    if r[1] not in ("id", "created_at", "updated_at")]
            rows = con.execute(f"select {', '.join(cols)} from {table}").fetchall()
            out.append((table, sorted(map(repr, rows))))
        return out
    finally:
        con.close()
