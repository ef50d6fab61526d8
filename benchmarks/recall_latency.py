"""Recall latency over 10,000 stored checkpoints (issue 6 target: median < 100 ms).

Fills a throwaway SQLite store with synthetic checkpoints (Zipf-distributed vocabulary in
English, Spanish, Korean and Japanese, spread over 30 days and 2,000 sessions), then times two
recall implementations in the same run on the same prompts:

* **indexed** — what ``warden recover`` runs: ``service.recall_from_store`` looks up only the
  prompt's terms in the ``checkpoint_terms`` inverted index;
* **naive** (the baseline) — load every checkpoint of the window, re-tokenize its text and score
  with the same pure scorer (``recall.recall``), no index.

Both must pick the same checkpoint for every prompt (checked). Reports medians, p95 and the
speed-up ratio naive/indexed.

    .venv/bin/python benchmarks/recall_latency.py [--n 10000] [--queries 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import select

from warden.config import load_settings
from warden.continuity.capture import CheckpointData, index_terms
from warden.continuity.recall import Candidate, checkpoint_terms, recall
from warden.continuity.service import recall_from_store
from warden.store.db import open_store
from warden.store.models import Checkpoint, utcnow

TARGET_MEDIAN_MS = 100.0
WINDOW_DAYS = 7.0

EN = ("parser exporter streaming generator migration index schema alembic websocket reconnect timer "
      "flaky jest react component render cache invalidation token budget pricing ledger receipt bench "
      "fixture golden selector eviction probation retry backoff upload download queue worker thread "
      "lock deadlock timeout sqlite postgres transaction rollback commit hook session transcript "
      "checkpoint recall fence marker sanitize unicode bidi control terminal color rich typer click "
      "config toml environment variable secret redact docker compose kubernetes helm chart deploy "
      "pipeline lint mypy ruff format refactor rename extract inline module package import circular "
      "dependency upgrade pin version lockfile wheel build release changelog docs readme tutorial").split()
ES = ("configuración autenticación sesión validación contraseña módulo corrección migración índice "
      "esquema búsqueda rendimiento caché página usuario función prueba despliegue canción").split()
KO = ("데이터베이스 마이그레이션 인덱스 스크립트 작성 추가 테스트 실패 수정 배포 설정 인증 세션 "
      "캐시 성능 사용자 페이지").split()
JA = "ログイン 画面 バグ 修正 テスト 追加 設定 認証 データベース 移行 性能 改善".split()
VOCAB = EN + ES + KO + JA + [f"ident{i}" for i in range(3000)]


def zipf_words(rng: random.Random, k: int) -> list[str]:
    return [VOCAB[min(len(VOCAB) - 1, int(rng.paretovariate(1.1)) - 1)] if rng.random() < 0.6
            else rng.choice(VOCAB) for _ in range(k)]


def populate(store, n: int, rng: random.Random) -> None:
    """Bulk-insert synthetic checkpoints and index them with the same ``index_terms`` that
    ``record_checkpoints`` uses (Core executemany: the ORM's per-object flush is not under test)."""
    now = utcnow()
    table = Checkpoint.__table__
    with store.session() as s:
        for start in range(0, n, 1000):
            rows = []
            for i in range(start, min(n, start + 1000)):
                sid = f"sess-{i % 2000:04d}"
                project = f"/w/proj{i % 50}"
                rows.append(dict(
                    id=i + 1, run_key=f"{sid}:main", session_id=sid, agent_id=None, agent="main", project=project,
                    projects=[project], trigger=f"milestone:edits:{i:08x}", fill=rng.uniform(0, 90),
                    quality=rng.uniform(40, 100), active_task=" ".join(zipf_words(rng, 25)),
                    decisions=[{"text": "I'll use " + " ".join(zipf_words(rng, 12)), "project": project}
                               for _ in range(3)],
                    edited_files=[f"{project}/src/{w}.py" for w in zipf_words(rng, 4)],
                    read_files=[f"{project}/src/{w}.py" for w in zipf_words(rng, 6)],
                    open_questions=[], errors=[], last_state=" ".join(zipf_words(rng, 30)),
                    captured_at=now - timedelta(minutes=rng.uniform(0, 30 * 24 * 60)), created_at=now))
            s.execute(table.insert(), rows)
            index_terms(s, [SimpleNamespace(**r) for r in rows])


def naive_recall(store, prompt: str, exclude: str):
    """Baseline: no index — load the window, tokenize everything, score."""
    since = utcnow() - timedelta(days=WINDOW_DAYS)
    with store.session() as s:
        rows = s.scalars(select(Checkpoint).where(Checkpoint.captured_at >= since,
                                                  Checkpoint.session_id != exclude)).all()
        cands = [Candidate(r.id, r.session_id, r.captured_at,
                           frozenset(checkpoint_terms(CheckpointData.from_row(r).searchable_text()))) for r in rows]
    return recall(prompt, cands, exclude_session=exclude, since=since)


def indexed_recall(store, prompt: str, exclude: str):
    with store.session() as s:
        return recall_from_store(s, prompt, exclude_session=exclude, window_days=WINDOW_DAYS)


def timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - t) * 1000, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--naive-queries", type=int, default=5, help="the baseline is slow; time fewer of it")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--home", help="reuse this warden home (filled on first use) instead of a temp dir")
    args = ap.parse_args()
    rng = random.Random(6)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(args.home or tmp)
        reuse = (home / "warden.db").exists()
        settings = load_settings(env={"WARDEN_HOME": str(home)})
        store = open_store(settings)
        t0 = time.perf_counter()
        if not reuse:
            populate(store, args.n, rng)
        fill_s = time.perf_counter() - t0
        prompt_rng = random.Random(7)  # independent of the fill, so a reused home sees the same prompts
        prompts = [" ".join(zipf_words(prompt_rng, prompt_rng.randint(3, 12))) for _ in range(args.queries)]
        prompts[:4] = ["데이터베이스 마이그레이션 인덱스 추가", "corregir la configuración de autenticación",
                       "write a limerick about cats", "fix the flaky websocket reconnect test"]
        indexed_recall(store, prompts[0], "none")  # warm the connection pool and page cache
        indexed_ms, naive_ms, mismatches, statuses = [], [], 0, {}
        for i, prompt in enumerate(prompts):
            ms, res = timed(indexed_recall, store, prompt, "sess-0000")
            indexed_ms.append(ms)
            statuses[res.status] = statuses.get(res.status, 0) + 1
            if i < args.naive_queries:
                ms_naive, base = timed(naive_recall, store, prompt, "sess-0000")
                naive_ms.append(ms_naive)
                if (base.status, base.checkpoint_id) != (res.status, res.checkpoint_id):
                    mismatches += 1
        store.engine.dispose()
    med_idx, med_naive = statistics.median(indexed_ms), statistics.median(naive_ms)
    report = {
        "checkpoints": args.n, "populate_s": round(fill_s, 1), "queries": len(prompts),
        "indexed_median_ms": round(med_idx, 2),
        "indexed_p95_ms": round(sorted(indexed_ms)[int(0.95 * (len(indexed_ms) - 1))], 2),
        "baseline": "naive: load window + re-tokenize every checkpoint + same scorer",
        "naive_median_ms": round(med_naive, 2), "speedup_naive_over_indexed": round(med_naive / med_idx, 1),
        "target_median_ms": TARGET_MEDIAN_MS, "meets_target": med_idx < TARGET_MEDIAN_MS,
        "baseline_disagreements": mismatches, "outcomes": statuses,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"recall over {args.n:,} checkpoints ({len(prompts)} prompts; store filled in {fill_s:.1f} s)")
        print(f"  indexed (warden recover): median {med_idx:.1f} ms, p95 {report['indexed_p95_ms']:.1f} ms "
              f"-> target < {TARGET_MEDIAN_MS:.0f} ms: {'PASS' if report['meets_target'] else 'FAIL'}")
        print(f"  naive baseline:           median {med_naive:.1f} ms ({len(naive_ms)} prompts)")
        print(f"  speed-up naive/indexed:   {report['speedup_naive_over_indexed']}x; "
              f"same answer on {len(naive_ms) - mismatches}/{len(naive_ms)}; outcomes {statuses}")
    return 0 if report["meets_target"] and mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
