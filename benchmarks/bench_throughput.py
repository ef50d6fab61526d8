"""Bench throughput on this machine: simulated runs per minute at concurrency 1 and 2, and the
share of run time spent copying the fixture (target < 10%).

Everything real: a fresh temporary warden home (SQLite), the frozen fixture copied once per
run, the sim backend behind the real SDK client and harness, the real success checks. The
same plan (same tasks, same seeds) is run at each concurrency, so the figures compare like
with like; the speed-up is reported as a ratio against concurrency 1 measured in the same run.

    .venv/bin/python benchmarks/bench_throughput.py [--agent A] [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def measure(agent: str, runs: int, concurrency: int, seed: int) -> dict:
    from warden.bench.scheduler import bench_agent
    from warden.config import load_settings
    from warden.store.db import open_store

    with tempfile.TemporaryDirectory(prefix="warden-throughput-") as home:
        os.environ["WARDEN_HOME"] = home
        settings = load_settings()
        store = open_store(settings)
        started = time.monotonic()
        report = bench_agent(store, settings, agent, runs=runs, backend="sim", concurrency=concurrency,
                             seed=seed)
        wall = time.monotonic() - started
        o = report.outcome
        n = o.executed
        return {"agent": agent, "concurrency": concurrency, "runs": n, "wall_s": round(wall, 2),
                "runs_per_min": round(n / wall * 60, 1) if wall else 0.0,
                "copy_s": round(o.copy_s, 3), "job_s": round(o.run_s, 2),
                "copy_share": round(o.copy_s / o.run_s, 4) if o.run_s else 0.0,
                "mean_copy_ms": round(o.copy_s / n * 1000, 1) if n else 0.0,
                "completed": sum(r.completed for r in o.runs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", action="append", help="agent(s) to run (default: every agent)")
    parser.add_argument("--runs", type=int, default=2, help="runs per task (default 2)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("WARDEN_REPO", str(REPO))
    from warden.bench.tasks import list_agents
    from warden.config import load_settings

    agents = args.agent or list_agents(load_settings().golden_dir)
    rows = []
    for concurrency in (1, 2):
        totals = {"concurrency": concurrency, "runs": 0, "wall_s": 0.0, "copy_s": 0.0, "job_s": 0.0,
                  "completed": 0}
        for agent in agents:
            row = measure(agent, args.runs, concurrency, args.seed)
            for key in ("runs", "wall_s", "copy_s", "job_s", "completed"):
                totals[key] += row[key]
        totals["runs_per_min"] = round(totals["runs"] / totals["wall_s"] * 60, 1)
        totals["copy_share"] = round(totals["copy_s"] / totals["job_s"], 4)
        totals["mean_copy_ms"] = round(totals["copy_s"] / totals["runs"] * 1000, 1)
        totals["wall_s"] = round(totals["wall_s"], 2)
        totals["job_s"] = round(totals["job_s"], 2)
        totals["copy_s"] = round(totals["copy_s"], 3)
        rows.append(totals)
    speedup = rows[1]["runs_per_min"] / rows[0]["runs_per_min"] if rows[0]["runs_per_min"] else 0.0
    result = {"agents": agents, "runs_per_task": args.runs, "cpus": os.cpu_count(), "rows": rows,
              "speedup_c2_vs_c1": round(speedup, 2),
              "copy_share_max": max(r["copy_share"] for r in rows), "copy_share_target": 0.10}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"bench throughput — sim backend, agents {', '.join(agents)}, {args.runs} run(s) per task, "
          f"{os.cpu_count()} CPU(s)")
    print(f"{'concurrency':>11} {'runs':>5} {'wall s':>8} {'runs/min':>9} {'copy ms/run':>12} {'copy share':>11}")
    for r in rows:
        print(f"{r['concurrency']:>11} {r['runs']:>5} {r['wall_s']:>8.1f} {r['runs_per_min']:>9.1f} "
              f"{r['mean_copy_ms']:>12.1f} {r['copy_share']:>10.1%}")
    print(f"speed-up at concurrency 2 vs 1 (same plan, same run): {speedup:.2f}×")
    verdict = "meets" if result["copy_share_max"] < 0.10 else "MISSES"
    print(f"fixture copy share of run time: max {result['copy_share_max']:.1%} — {verdict} the < 10% target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
