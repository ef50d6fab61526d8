"""Redaction cost of the trace digest: every tool call's path or command in a corpus of
transcripts, redacted as the parser does (``redacted_prefix(text, 320)``), CPU time per call.

Run it against another checkout for an A/B (the ``warden`` imported is the first on the path)::

    python benchmarks/redaction_cost.py --corpus DIR
    PYTHONPATH=/path/to/base python benchmarks/redaction_cost.py --corpus DIR

(for ``--parse-mb``, the other checkout needs the collector's C fast path too: copy its built
``warden/ingest/_skim*.so`` there when ``_skim.c`` is the same, or run both with WARDEN_PURE_PYTHON=1).

The targets are extracted once into ``--cache`` (a JSON list) and read from it on later runs.
Also times ``parse_file`` over the first ``--parse-mb`` of the corpus when asked.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

import warden
from warden.ingest.parser import MAX_CACHED_TEXT, MAX_DIGEST_TARGET, TOOL_KIND_BY_NAME
from warden.sanitize import REDACT_MARGIN, _may_hold_secret, redacted_prefix

LIMIT = 4 * MAX_DIGEST_TARGET  # what _redacted_target asks for
PASSING_PREFIX = "git push https://github.com/o/r && "


def targets_of(corpus: Path) -> list[str]:
    """Each tool call's digest target, as TranscriptParser picks it: the path, else a Bash
    command or a Grep/Glob pattern."""
    out: list[str] = []
    for file in sorted(corpus.rglob("*.jsonl")):
        with file.open("rb") as fh:
            for line in fh:
                if b'"tool_use"' not in line:
                    continue
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                message = record.get("message") if isinstance(record, dict) else None
                content = message.get("content") if isinstance(message, dict) else None
                for block in content if isinstance(content, list) else ():
                    if not isinstance(block, dict) or block.get("type") != "tool_use":
                        continue
                    tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                    kind = TOOL_KIND_BY_NAME.get(block.get("name") if isinstance(block.get("name"), str) else "?", "other")
                    path = tool_input.get("file_path", tool_input.get("path", tool_input.get("notebook_path")))
                    text = path if isinstance(path, str) and path else None
                    if text is None and kind in ("bash", "grep", "glob"):
                        value = tool_input.get("command" if kind == "bash" else "pattern")
                        text = value if isinstance(value, str) else None
                    if text:
                        out.append(text)
    return out


def cpu_seconds(texts: list[str], repeat: int) -> list[float]:
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        for text in texts:
            redacted_prefix(text, LIMIT)
        runs.append(time.process_time() - start)
    return runs


def parse_seconds(corpus: Path, megabytes: float, repeat: int) -> tuple[float, list[float]]:
    from warden.ingest.collector import parse_file

    files, size = [], 0
    for file in sorted(corpus.rglob("*.jsonl")):
        if size >= megabytes * 1e6:
            break
        files.append(str(file))
        size += file.stat().st_size
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        for file in files:
            parse_file(file)
        runs.append(time.process_time() - start)
    return size / 1e6, runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="a projects/ directory of transcripts")
    ap.add_argument("--cache", type=Path, help="the extracted targets (JSON), written on the first run")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parse-mb", type=float, default=0, help="also time parse_file over this much of the corpus")
    args = ap.parse_args()
    print(f"warden from {Path(warden.__file__).parent}", file=sys.stderr)
    if args.cache and args.cache.exists():
        texts = orjson.loads(args.cache.read_bytes())
    else:
        texts = targets_of(args.corpus)
        if args.cache:
            args.cache.parent.mkdir(parents=True, exist_ok=True)
            args.cache.write_bytes(orjson.dumps(texts))
    long = [t for t in texts if len(t) > MAX_CACHED_TEXT]
    distinct_short = list(dict.fromkeys(t for t in texts if len(t) <= MAX_CACHED_TEXT))
    # what the patterns run on (the rest costs the quick screen only): every distinct target
    # whose window passes it, as the parser's window reads it
    passing = [t for t in dict.fromkeys(texts) if _may_hold_secret(t[:LIMIT + REDACT_MARGIN].lower())]
    for label, group in ((f"long (> {MAX_CACHED_TEXT} chars, uncached in the parser)", long),
                         ("short, distinct (the parser's cache misses at most)", distinct_short),
                         ("distinct, passing the quick screen", passing),
                         # a long command that names a URL, as many do: it passes the screen
                         ("long, after a URL (passing the screen)", [PASSING_PREFIX + t for t in long])):
        runs = cpu_seconds(group, args.repeat)
        median = statistics.median(runs)
        print(f"{label}: {len(group)} texts, median {1e3 * median:.1f} CPU-ms of {args.repeat} "
              f"({1e6 * median / max(1, len(group)):.1f} µs each; runs {', '.join(f'{1e3 * r:.1f}' for r in runs)})")
    if args.parse_mb:
        size, runs = parse_seconds(args.corpus, args.parse_mb, args.repeat)
        print(f"parse_file over {size:.0f} MB: median {statistics.median(runs):.2f} CPU-s of {args.repeat} "
              f"(runs {', '.join(f'{r:.2f}' for r in runs)})")


if __name__ == "__main__":
    main()
