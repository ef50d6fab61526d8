"""Learning efficacy of the whole loop, measured on the simulated agent (not a model's result).

Five consecutive nights in a fresh home with fixed seeds. Each night the naive agents do
"real work" (simulated sessions written as Claude Code transcripts, with the MEMORY.md warden
compiled so far), then ``warden nightly`` runs: collect → distill → select → compile. After
each night, the golden suite is measured with the agent's in-memory rules against its frozen
first runs (the naive agent, no rules) on the same seeds — paired, so the figure is the rules'
effect, not noise — with completion rates and the bench tokens warden spent.

The oracle: every rule the distiller proposed over the five nights (the candidate pool) is
measured on its own by the sim's ground truth; the rules that truly save are measured together;
the share of the oracle's saving that warden's final memory reaches is reported.

Targets (issue 5): ≥ 25% golden-suite cost cut within five nights, no completion loss, ≥ 80% of
the oracle's saving.

    python benchmarks/learning_efficacy.py [--nights 5] [--agents backend,sql] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import select  # noqa: E402

from warden.bench.agents.sim_sessions import DEFAULT_START, play_sessions  # noqa: E402
from warden.bench.agents.sim_truth import true_expected_cost  # noqa: E402
from warden.bench.tasks import load_suite  # noqa: E402
from warden.config import load_settings  # noqa: E402
from warden.select.compile import IN_MEMORY_STATES, memory_path  # noqa: E402
from warden.select.nightly import resolve_agents, run_nightly  # noqa: E402
from warden.store.db import open_store  # noqa: E402
from warden.store.models import Rule  # noqa: E402


def in_memory_bodies(store, agent: str) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Rule.body).where(Rule.agent == agent, Rule.state.in_(IN_MEMORY_STATES))
                              .order_by(Rule.id)))


def _token_budget(text: str) -> int:
    """``--budget`` as warden's own commands take it (one parser: warden.cli.common)."""
    from warden.cli.common import parse_token_budget

    try:
        return parse_token_budget(text)
    except Exception as exc:  # typer.BadParameter: argparse's own error line, exit 2
        raise argparse.ArgumentTypeError(str(exc)) from None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nights", type=int, default=5)
    ap.add_argument("--agents", default="", help="comma-separated; default: every agent with a golden suite")
    ap.add_argument("--sessions-per-agent", type=int, default=8, help="simulated real-work sessions per agent per night")
    ap.add_argument("--truth-seeds", type=int, default=4, help="seeds per task for each golden-suite measurement")
    ap.add_argument("--oracle-seeds", type=int, default=4)
    ap.add_argument("--budget", type=_token_budget, default=None,
                    help="nightly bench budget (weighted tokens: 2000000, 2_000_000 or 2e6)")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--keep", default=None, help="keep the benchmark home here")
    args = ap.parse_args()

    home = Path(args.keep or tempfile.mkdtemp(prefix="warden-learning-"))
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDEN_", "ANTHROPIC_"))}
    env.update(WARDEN_HOME=str(home / "warden"), CLAUDE_CONFIG_DIR=str(home / "claude"))
    settings = load_settings(env, backend="sim")
    agents = resolve_agents(settings, [a for a in args.agents.split(",") if a] or None)
    suites = {a: load_suite(settings.golden_dir, a) for a in agents}
    store = open_store(settings)
    seeds = list(range(900_000, 900_000 + args.truth_seeds))  # never the bench's or the sessions' seeds
    nights = []
    started = time.perf_counter()
    print(f"learning efficacy on the sim backend (simulated agents) · agents {', '.join(agents)} · home {home}")
    try:
        for night in range(1, args.nights + 1):
            memory = {a: memory_path(settings, a).read_text() for a in agents if memory_path(settings, a).exists()}
            t0 = time.perf_counter()
            play_sessions(settings.claude_home, suites, settings.fixture_dir,
                          sessions=args.sessions_per_agent * len(agents), seed=night, memory_by_agent=memory,
                          delegate_share=1.0, start=DEFAULT_START + timedelta(days=night - 1))
            summary = run_nightly(store, settings, agents=agents, budget_tokens=args.budget, base_seed=0)
            spent = {r.agent: r.tokens_spent for r in summary.selects}
            row = {"night": night, "aborted": summary.aborted, "agents": {}}
            for agent in agents:
                bodies = in_memory_bodies(store, agent)
                truth = true_expected_cost(suites[agent], bodies, seeds, fixture_dir=settings.fixture_dir)
                s = truth["suite"]
                row["agents"][agent] = {
                    "rules": bodies, "first_runs_cost": s["without_weighted_tokens"], "cost": s["with_weighted_tokens"],
                    "cut": s["saving_share"], "completion_first": s["completion_without"],
                    "completion": s["completion_with"], "bench_tokens": spent.get(agent, 0.0)}
                print(f"night {night} {agent:>8}: cost {s['with_weighted_tokens']:>10,.0f} vs first runs "
                      f"{s['without_weighted_tokens']:>10,.0f} ({s['saving_share']:+.1%} cut) completion "
                      f"{s['completion_with']:.0%} (was {s['completion_without']:.0%}) · bench "
                      f"{spent.get(agent, 0.0):,.0f} · {len(bodies)} rule(s)")
            row["seconds"] = round(time.perf_counter() - t0, 1)
            nights.append(row)
        oracle = {}
        for agent in agents:
            with store.session() as s:
                pool = list(s.scalars(select(Rule.body).where(Rule.agent == agent).order_by(Rule.id)))
            oracle_seeds = list(range(950_000, 950_000 + args.oracle_seeds))
            singles = {b: true_expected_cost(suites[agent], [b], oracle_seeds, fixture_dir=settings.fixture_dir)["suite"]
                       for b in pool}
            good = [b for b, s in singles.items() if s["saving"] > 0 and s["completion_with"] >= s["completion_without"]]
            best = (true_expected_cost(suites[agent], good, seeds, fixture_dir=settings.fixture_dir)["suite"]
                    if good else {"saving_share": 0.0})
            final = nights[-1]["agents"][agent]["cut"] if nights else 0.0
            oracle[agent] = {"pool": len(pool), "oracle_rules": good, "oracle_cut": best["saving_share"],
                             "warden_cut": final,
                             "share_of_oracle": (final / best["saving_share"]) if best["saving_share"] > 0 else None}
            share = oracle[agent]["share_of_oracle"]
            print(f"oracle {agent:>8}: {len(good)} of {len(pool)} proposed rules truly save; oracle cut "
                  f"{best['saving_share']:.1%}, warden's {final:.1%} → "
                  f"{'n/a' if share is None else f'{share:.0%}'} of the oracle's saving")
        result = {"label": "measured on the simulated agent (sim backend), not a real model", "agents": agents,
                  "nights": nights, "oracle": oracle, "seconds": round(time.perf_counter() - started, 1),
                  "targets": {"cut_within_5_nights": 0.25, "share_of_oracle": 0.8}}
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
