"""Collector throughput: parse-only and full-ingest MB/s, peak memory, and ccusage in the same run.

Builds a large, realistic corpus — the real transcripts of ``../shared/corpus/claude-home``
cloned with fresh unique ids (session, agent, message, request, tool-use ids), so every dedupe
map really grows — in a temp dir, then measures, each in its own process:

- parse-only: read + parse every transcript (no database), with 1 and with N parser processes;
- full ingest: the collector over the whole tree into a fresh SQLite database (everything the
  ledger records: usage dedupe, tool statistics, trace digests, offsets), whole-process time,
  start-up of the ``warden collect`` command included; and the ``warden collect`` command itself, which also
  captures checkpoints and queues distillation;
- peak memory (ru_maxrss of the measured process and its children), at half and full corpus size,
  to show it is flat in corpus size;
- ccusage 19.0.3's whole-process time on the same tree (``bun node_modules/ccusage/dist/index.js
  session --json --offline``), installed with ``npm install bun ccusage@19.0.3`` into
  ``benchmarks/.work/ccusage`` (gitignored). If npm/bun cannot be installed, that is reported.

    .venv/bin/python benchmarks/collector_throughput.py [--size-mb 200] [--jobs 2] [--keep] [--rounds 3]
        [--corpus benchmarks/.work/corpus-1gb]

``--rounds N`` (default 3): the full ingest and ccusage are measured in turn N times (each ingest
into a fresh home), and the ratio reported is the median, with its range: this machine's speed
drifts from minute to minute, so one pair alone can be off by a third either way.

``--corpus DIR`` builds the corpus into DIR once and reuses it on later runs (building 1 GB takes
longer than measuring it); DIR is kept, so delete it when done (under benchmarks/.work/ it is
git-ignored).

Targets (issue 2): parse ≥ 250 MB/s on a 2-core machine; full ingest no slower than ccusage;
memory flat in corpus size.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus" / "claude-home"
WORK = REPO / "benchmarks" / ".work"
CCUSAGE_DIR = WORK / "ccusage"
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IDS = re.compile(rb'"(msg_|req_|toolu_)([A-Za-z0-9]+)"')


# ----------------------------------------------------------------------------- corpus


def _agent_ids(src: Path) -> set[str]:
    ids = set()
    for path in src.rglob("agent-*.jsonl"):
        ids.add(path.stem[len("agent-"):])
    return ids


def build_corpus(dest: Path, size_mb: float) -> tuple[int, int]:
    """Clone the real corpus into ``dest/projects`` until it holds ``size_mb``; (bytes, files)."""
    files = sorted((CORPUS / "projects").rglob("*.jsonl"))
    sources = [(f.relative_to(CORPUS / "projects"), f.read_bytes()) for f in files]
    if not any(data for _, data in sources):  # nothing to clone: the size would never be reached
        raise SystemExit(f"no transcripts under {CORPUS / 'projects'} to build the corpus from")
    agents = sorted(_agent_ids(CORPUS), key=len, reverse=True)
    agent_re = re.compile(("|".join(re.escape(a) for a in agents)).encode()) if agents else None
    total = count = 0
    clone = 0
    target = size_mb * 1e6
    while total < target:
        clone += 1
        tag = f"{clone:06x}"

        def fresh_uuid(m: re.Match[bytes]) -> bytes:
            return tag.encode() + m.group(0)[6:]  # same shape, unique per clone

        def fresh_id(m: re.Match[bytes]) -> bytes:
            return b'"' + m.group(1) + b"c" + tag.encode() + m.group(2) + b'"'

        def fresh_agent(m: re.Match[bytes]) -> bytes:
            return m.group(0) + b"c" + tag.encode()

        for rel, data in sources:
            out = UUID.sub(fresh_uuid, data)
            out = IDS.sub(fresh_id, out)
            if agent_re is not None:
                out = agent_re.sub(fresh_agent, out)
            rel_s = UUID.sub(fresh_uuid, str(rel).encode()).decode()
            if agent_re is not None:
                rel_s = agent_re.sub(fresh_agent, rel_s.encode()).decode()
            path = dest / "projects" / rel_s
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(out)
            total += len(out)
            count += 1
    return total, count


def link_half(full: Path, half: Path) -> tuple[int, int]:
    """Hard-link the first half of the clones (by clone tag) into ``half``: a corpus half the size."""
    files = sorted(full.rglob("*.jsonl"))
    chosen = files[: len(files) // 2]
    total = 0
    for path in chosen:
        dest = half / path.relative_to(full)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, dest)
        total += path.stat().st_size
    return total, len(chosen)


# ----------------------------------------------------------------------------- measured children

PARSE_CHILD = r"""
import json, os, resource, sys, time
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, sys.argv[3])
from warden.ingest.collector import parse_file

def one(path):
    run, state, end = parse_file(path)
    return end, len(run.turns), len(run.tool_calls)

root, jobs = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".jsonl"))
def cpu():
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))

t, c = time.perf_counter(), cpu()
if jobs > 1:
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(one, files, chunksize=4))
else:
    results = [one(f) for f in files]
elapsed = time.perf_counter() - t
loop_cpu = cpu() - c  # the parse loop (and its workers) only: no interpreter start or imports
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "loop_cpu_s": loop_cpu, "bytes": sum(r[0] for r in results), "turns": sum(r[1] for r in results),
                  "tool_calls": sum(r[2] for r in results), "peak_rss_kb": rss}))
"""


def _children_cpu() -> float:
    """CPU seconds of all waited-for descendants so far (a measured process and its workers)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def warm(root: Path) -> None:
    """Read every transcript under ``root`` just before a measured run reads them: measure
    parsing, not the disk. (Here the host takes page cache back within seconds, also when idle:
    warmed once at the start, the later runs read part of the corpus from the disk.)"""
    for path in root.rglob("*.jsonl"):
        path.read_bytes()


def byte_compile_warden() -> None:
    """Write the bytecode of warden's modules, as installing its wheel does (and an editable
    install's first run, unless PYTHONDONTWRITEBYTECODE is set, as in some sandboxes and CI):
    otherwise every measured process compiles warden's sources at start-up (~0.1 CPU-s of the
    collect's), which a user's install does not."""
    compileall.compile_dir(REPO / "warden", quiet=1)


def measure_parse(root: Path, jobs: int) -> dict:
    warm(root)
    cpu = _children_cpu()
    proc = subprocess.run([sys.executable, "-c", PARSE_CHILD, str(root), str(jobs), str(REPO)],
                          capture_output=True, text=True, check=True)
    return {**json.loads(proc.stdout), "cpu_s": _children_cpu() - cpu}


def measure_ingest(root: Path, home: Path, jobs: int, post_ingest: bool = False) -> dict:
    """Whole-process ``warden collect`` into a fresh SQLite database: the ledger alone, or with
    the later stages' post-ingest steps (checkpoint capture, distill queueing) too."""
    # The corpus is months old: with the default 90-day retention the collector would store none
    # of its checkpoints. Lift the age limit, so the collect writes what recent history would.
    env = {**os.environ, "WARDEN_HOME": str(home), "CLAUDE_CONFIG_DIR": str(root),
           "WARDEN_CHECKPOINT_MAX_AGE_DAYS": "36500"}
    warm(root)
    cpu = _children_cpu()
    t = time.perf_counter()
    # With post-ingest steps: the `warden collect --json --jobs N` command itself, through the
    # console script's entry point as `warden collect` runs it. The ledger alone is not a command
    # of its own: the same start-up (the command's imports), then the collector with the
    # post-ingest steps off. Both start the parser processes before the command's imports and leave
    # opening the database to collect_paths, as the command does: into a new one, the parsers are
    # handed their first files before the command is loaded, as a user's are.
    code = """if True:
        import json, resource, sys
        root, jobs, post = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
        if post:
            from warden.cli.entry import main
            code = main(['collect', '--json', '--jobs', jobs, root])
        else:
            from warden.cli.entry import load_collect, start_early
            start_early([root], int(jobs), post_ingest=False)  # as the command does first
            load_collect()  # the command's start-up: its imports, as the console script does them
            from warden.config import load_settings
            from warden.ingest.collector import collect_paths
            code = print(json.dumps(collect_paths(load_settings(), [root], jobs=int(jobs), post_ingest=False).to_json()))
        r = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        print('RSS', r, file=sys.stderr)
        sys.exit(code or 0)
    """
    proc = subprocess.run([sys.executable, "-c", code, str(root / "projects"), str(jobs), "1" if post_ingest else "0"],
                          capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"warden collect failed: {proc.stderr.strip()}")
    summary = json.loads(proc.stdout)
    rss = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("RSS")))
    db = home / "warden.db"
    return {"seconds": elapsed, "cpu_s": _children_cpu() - cpu, "bytes": summary["bytes_read"],
            "runs": summary["runs_updated"],
            "usage_messages": summary["usage_messages"], "peak_rss_kb": rss,
            "db_mb": db.stat().st_size / 1e6 if db.exists() else 0.0}


# ----------------------------------------------------------------------------- ccusage


def ensure_ccusage() -> tuple[Path, Path] | str:
    """(bun, ccusage entry) installed under benchmarks/.work/ccusage, or why not."""
    bun = CCUSAGE_DIR / "node_modules" / ".bin" / "bun"
    entry = CCUSAGE_DIR / "node_modules" / "ccusage" / "dist" / "index.js"
    if bun.exists() and entry.exists():
        return bun, entry
    if shutil.which("npm") is None:
        return "npm not found: install Node.js/npm to compare with ccusage"
    CCUSAGE_DIR.mkdir(parents=True, exist_ok=True)
    if not (CCUSAGE_DIR / "package.json").exists():
        (CCUSAGE_DIR / "package.json").write_text('{"name": "warden-bench-ccusage", "private": true}\n')
    proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "bun", "ccusage@19.0.3"], cwd=CCUSAGE_DIR,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not (bun.exists() and entry.exists()):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return f"npm install bun ccusage@19.0.3 failed: {tail[0]}"
    return bun, entry


def measure_ccusage(root: Path, bun: Path, entry: Path) -> dict:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(root)}
    warm(root)
    cpu = _children_cpu()
    t = time.perf_counter()
    proc = subprocess.run([str(bun), str(entry), "session", "--json", "--offline"], capture_output=True, env=env,
                          cwd=CCUSAGE_DIR)
    elapsed = time.perf_counter() - t
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace").strip()[:300])
    sessions = len(json.loads(proc.stdout).get("session", []))
    return {"seconds": elapsed, "cpu_s": cpu, "sessions": sessions}


# ----------------------------------------------------------------------------- main


CORPUS_MARK = "corpus.json"  # in a --corpus DIR: what was built there, so a reuse can check it


def corpus_in(root: Path, size_mb: float) -> tuple[int, int, int, int]:
    """(full bytes, full files, half bytes, half files) of the corpus kept in ``root``, built
    there first when it holds none (or one of another size)."""
    mark = root / CORPUS_MARK
    if mark.is_file():
        kept = json.loads(mark.read_text())
        if kept.get("size_mb") == size_mb:
            return kept["full_bytes"], kept["full_files"], kept["half_bytes"], kept["half_files"]
        print(f"{root} holds a {kept.get('size_mb')} MB corpus, not {size_mb} MB: building it again")
    for part in ("full", "half"):
        shutil.rmtree(root / part, ignore_errors=True)
    mark.unlink(missing_ok=True)
    full_bytes, full_files = build_corpus(root / "full", size_mb)
    half_bytes, half_files = link_half(root / "full", root / "half")
    mark.write_text(json.dumps({"size_mb": size_mb, "full_bytes": full_bytes, "full_files": full_files,
                                "half_bytes": half_bytes, "half_files": half_files}) + "\n")
    return full_bytes, full_files, half_bytes, half_files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=200.0)
    ap.add_argument("--jobs", type=int, default=max(1, min(4, len(os.sched_getaffinity(0)))))
    ap.add_argument("--keep", action="store_true", help="keep the generated corpus")
    ap.add_argument("--corpus", type=Path, metavar="DIR",
                    help="build the corpus into DIR once and reuse it on later runs (DIR is kept)")
    ap.add_argument("--no-ccusage", action="store_true")
    ap.add_argument("--ledger-only", action="store_true", help="skip the run with post-ingest steps")
    ap.add_argument("--rounds", type=int, default=3,
                    help="full ingest and ccusage measured in turn this many times: the ratio's median and range")
    args = ap.parse_args()
    if not CORPUS.is_dir():
        print(f"corpus not found: {CORPUS}", file=sys.stderr)
        return 1
    WORK.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="collector-bench-", dir=WORK))
    try:
        t = time.perf_counter()
        corpus_root = args.corpus.resolve() if args.corpus else tmp
        corpus_root.mkdir(parents=True, exist_ok=True)
        half_root, full_root = corpus_root / "half", corpus_root / "full"
        full_bytes, full_files, half_bytes, half_files = corpus_in(corpus_root, args.size_mb)
        print(f"corpus: {full_bytes / 1e6:.0f} MB in {full_files} files (and a half-size copy, "
              f"{half_bytes / 1e6:.0f} MB), {'ready' if args.corpus else 'built'} in {time.perf_counter() - t:.1f}s"
              f"{f' ({corpus_root})' if args.corpus else ''}; "
              f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}")
        results: dict = {"corpus_mb": full_bytes / 1e6, "files": full_files, "cpus": len(os.sched_getaffinity(0)),
                         "load_average_1m": os.getloadavg()[0]}

        byte_compile_warden()
        p1 = measure_parse(full_root, 1)
        pn = measure_parse(full_root, args.jobs)
        results["parse_1_proc_mb_s"] = p1["bytes"] / 1e6 / p1["seconds"]
        results[f"parse_{args.jobs}_procs_mb_s"] = pn["bytes"] / 1e6 / pn["seconds"]
        results["parse_mb_per_cpu_s"] = p1["bytes"] / 1e6 / p1["cpu_s"]
        results["parse_loop_mb_per_cpu_s"] = p1["bytes"] / 1e6 / p1["loop_cpu_s"]
        results[f"parse_{args.jobs}_procs_loop_cpu_s"] = pn["loop_cpu_s"]
        results[f"parse_{args.jobs}_procs_cpu_s"] = pn["cpu_s"]
        results["parse_1_proc_cpu_s"] = p1["cpu_s"]
        print(f"parse-only, 1 process:   {results['parse_1_proc_mb_s']:7.1f} MB/s  "
              f"({p1['seconds']:.2f}s, {results['parse_mb_per_cpu_s']:.0f} MB per CPU-second of the whole "
              f"process, {results['parse_loop_mb_per_cpu_s']:.0f} of the parse loop, "
              f"peak RSS {p1['peak_rss_kb'] / 1024:.0f} MB)")
        print(f"parse-only, {args.jobs} processes: {results[f'parse_{args.jobs}_procs_mb_s']:7.1f} MB/s  "
              f"({pn['seconds']:.2f}s, {pn['cpu_s']:.2f} CPU-s, {pn['loop_cpu_s']:.2f} in the loop; "
              f"{pn['turns']} API responses, "
              f"{pn['tool_calls']} tool calls)")

        ingest_half = measure_ingest(half_root, tmp / "home-half", args.jobs)
        ingest = measure_ingest(full_root, tmp / "home-full", args.jobs)
        results["ingest_mb_s"] = ingest["bytes"] / 1e6 / ingest["seconds"]
        results["ingest_seconds"] = ingest["seconds"]
        results["ingest_cpu_s"] = ingest["cpu_s"]
        results["ingest_peak_rss_mb"] = ingest["peak_rss_kb"] / 1024
        results["ingest_half_peak_rss_mb"] = ingest_half["peak_rss_kb"] / 1024
        print(f"full ingest, ledger (the collector after the command's start-up, whole process): {results['ingest_mb_s']:6.1f} MB/s  "
              f"({ingest['seconds']:.2f}s, {ingest['cpu_s']:.2f} CPU-s, {ingest['runs']} runs, "
              f"{ingest['usage_messages']} API responses, "
              f"db {ingest['db_mb']:.0f} MB)")
        if not args.ledger_only:
            pipeline = measure_ingest(full_root, tmp / "home-pipeline", args.jobs, post_ingest=True)
            results["ingest_with_post_steps_mb_s"] = pipeline["bytes"] / 1e6 / pipeline["seconds"]
            results["ingest_with_post_steps_seconds"] = pipeline["seconds"]
            results["ingest_with_post_steps_cpu_s"] = pipeline["cpu_s"]
            print(f"`warden collect` (the ledger + checkpoints, distill queue; whole process): "
                  f"{results['ingest_with_post_steps_mb_s']:6.1f} MB/s ({pipeline['seconds']:.2f}s, "
                  f"{pipeline['cpu_s']:.2f} CPU-s)")
        print(f"peak RSS: {results['ingest_half_peak_rss_mb']:.0f} MB at {half_bytes / 1e6:.0f} MB corpus, "
              f"{results['ingest_peak_rss_mb']:.0f} MB at {full_bytes / 1e6:.0f} MB corpus")

        if args.no_ccusage:
            print("ccusage: skipped (--no-ccusage)")
        else:
            found = ensure_ccusage()
            if isinstance(found, str):
                results["ccusage"] = found
                print(f"ccusage: NOT MEASURED — {found}")
            else:
                try:
                    # In turn, each ingest into a fresh home: a machine whose speed drifts from
                    # minute to minute (this one's does) gives both the same conditions.
                    rounds = [(ingest, measure_ccusage(full_root, *found))]
                    for n in range(1, max(1, args.rounds)):
                        home = tmp / f"home-round-{n}"
                        again = measure_ingest(full_root, home, args.jobs)
                        shutil.rmtree(home, ignore_errors=True)
                        rounds.append((again, measure_ccusage(full_root, *found)))
                except (RuntimeError, OSError, ValueError) as exc:
                    results["ccusage"] = f"failed: {exc}"
                    print(f"ccusage: NOT MEASURED — it failed: {exc}")
                else:
                    cc = {"seconds": statistics.median(c["seconds"] for _, c in rounds),
                          "cpu_s": statistics.median(c["cpu_s"] for _, c in rounds)}
                    walls = [c["seconds"] / i["seconds"] for i, c in rounds]
                    cpus = [c["cpu_s"] / i["cpu_s"] for i, c in rounds]
                    results["rounds"] = [{"ingest_seconds": i["seconds"], "ingest_cpu_s": i["cpu_s"],
                                          "ccusage_seconds": c["seconds"], "ccusage_cpu_s": c["cpu_s"]}
                                         for i, c in rounds]
                    results["ccusage_seconds"] = cc["seconds"]
                    results["ccusage_cpu_s"] = cc["cpu_s"]
                    results["ccusage_mb_s"] = full_bytes / 1e6 / cc["seconds"]
                    results["ingest_vs_ccusage"] = statistics.median(walls)
                    results["ingest_vs_ccusage_cpu"] = statistics.median(cpus)
                    print(f"ccusage 19.0.3 (bun, whole process): {results['ccusage_mb_s']:6.1f} MB/s "
                          f"(median of {len(rounds)}: {cc['seconds']:.2f}s, {cc['cpu_s']:.2f} CPU-s; "
                          f"{rounds[0][1]['sessions']} sessions)")
                    ingest_times = ", ".join(f"{i['seconds']:.2f}" for i, _ in rounds)
                    ccusage_times = ", ".join(f"{c['seconds']:.2f}" for _, c in rounds)
                    print(f"full ingest speed / ccusage speed = {results['ingest_vs_ccusage']:.2f} wall "
                          f"({min(walls):.2f}–{max(walls):.2f}), {results['ingest_vs_ccusage_cpu']:.2f} by "
                          f"CPU-seconds ({min(cpus):.2f}–{max(cpus):.2f}); medians of {len(rounds)} rounds in turn, "
                          f"ingest {ingest_times} s, ccusage {ccusage_times} s (target ≥ 1.0)")
                    if "ingest_with_post_steps_seconds" in results:
                        results["ingest_with_post_steps_vs_ccusage"] = cc["seconds"] / results["ingest_with_post_steps_seconds"]
                        results["ingest_with_post_steps_vs_ccusage_cpu"] = cc["cpu_s"] / results["ingest_with_post_steps_cpu_s"]
                        print(f"full ingest + post-ingest steps / ccusage speed = "
                              f"{results['ingest_with_post_steps_vs_ccusage']:.2f} wall, "
                              f"{results['ingest_with_post_steps_vs_ccusage_cpu']:.2f} by CPU-seconds")
        best_parse = max(results["parse_1_proc_mb_s"], results[f"parse_{args.jobs}_procs_mb_s"])
        print(f"targets: parse ≥ 250 MB/s: {'met' if best_parse >= 250 else 'NOT met'} ({best_parse:.0f}); "
              f"memory flat: {'yes' if results['ingest_peak_rss_mb'] < 1.5 * results['ingest_half_peak_rss_mb'] else 'NO'}")
        print(json.dumps(results, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
