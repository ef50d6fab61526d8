"""`warden collect` starts its parser processes before it loads the CLI and the store
(transcripts.start_parsers_early): into a new database they take the first files, and the collect
takes them over; a collect of other files stops them, and anything unusual starts none."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collect_support import ledger_values
from warden.cli.entry import _collect_arguments
from warden.config import load_settings
from warden.ingest import collector, transcripts
from warden.ingest.collector import collect_paths, discover_transcripts
from warden.store.db import open_store
from warden.store.models import IngestOffset


def _pools_started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Who starts parser pools from now on: "early" (start_parsers_early) or "collect"."""
    started: list[str] = []
    plain = transcripts.start_parser_pool
    monkeypatch.setattr(transcripts, "start_parser_pool", lambda jobs: started.append("early") or plain(jobs))
    monkeypatch.setattr(collector, "start_parser_pool", lambda jobs: started.append("collect") or plain(jobs))
    return started


def test_the_collect_takes_over_the_parsers_started_before_it(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started early, the parsers are handed the first AHEAD_BYTES (a task per file here); the
    collect of the same files parses the rest with them, and stores what a collect without an
    early start stores."""
    monkeypatch.setattr(transcripts, "TASK_FILES", 1)
    files = discover_transcripts([corpus])
    monkeypatch.setattr(transcripts, "AHEAD_BYTES", sum(f.stat().st_size for f in files[:5]))
    started = _pools_started(monkeypatch)
    assert transcripts.start_parsers_early([str(corpus)], 2, post_ingest=False)
    early = transcripts._early
    assert early is not None and early.files == [str(f) for f in files[:5]] and len(early.queue.window) == 5
    assert not load_settings().sqlite_path.exists()  # nothing made yet
    summary = collect_paths(load_settings(), [corpus], jobs=2, post_ingest=False)
    assert started == ["early"] and transcripts._early is None
    assert summary.files_seen == summary.files_ingested == len(files) and summary.files_skipped == 0
    taken_over = ledger_values()

    monkeypatch.setenv("WARDEN_HOME", str(tmp_path / "without"))
    (tmp_path / "without").mkdir()
    plain = collect_paths(load_settings(), [corpus], jobs=2, post_ingest=False)
    assert started == ["early", "collect"]
    assert (summary.bytes_read, summary.lines, summary.run_keys, summary.usage_messages) == \
           (plain.bytes_read, plain.lines, plain.run_keys, plain.usage_messages)
    assert taken_over == ledger_values()


def test_a_file_it_cannot_ingest_is_counted_skipped_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the early start finds unreadable is the collect's skipped file, with its reason."""
    from collect_support import assistant, usage, write

    projects = tmp_path / "projects"
    for n in range(4):
        write(projects / "p" / f"s{n}.jsonl", [assistant(f"m{n}", f"r{n}", usage(n + 1, 1))])
    (projects / "p" / "s1.jsonl").unlink()
    os.mkfifo(projects / "p" / "s1.jsonl")  # not a regular file
    started = _pools_started(monkeypatch)
    assert transcripts.start_parsers_early([str(projects)], 2, post_ingest=True)
    summary = collect_paths(load_settings(), [projects], jobs=2)
    assert started == ["early"]
    assert summary.files_seen == 4 and summary.files_ingested == 3 and summary.files_skipped == 1
    assert summary.skipped == [f"{projects / 'p' / 's1.jsonl'}: not a regular file"]


def test_the_collect_takes_the_listing_made_as_the_command_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code keeps writing while the CLI loads: the collect of the paths its parsers were
    started for takes the transcripts found as the command started (it does not walk the tree
    again), and takes the parsers over; a transcript new since then, wherever it sorts, is the
    next collect's (or its hook's). A collect of other paths walks them itself."""
    from collect_support import assistant, usage, write

    projects = tmp_path / "projects"
    for n in range(6):
        write(projects / "p" / f"s{n}.jsonl", [assistant(f"m{n}", f"r{n}", usage(n + 1, 1))])
    monkeypatch.setattr(transcripts, "AHEAD_BYTES", 1)  # the first file only
    started = _pools_started(monkeypatch)
    assert transcripts.start_parsers_early([str(projects)], 2, post_ingest=False)
    assert transcripts.early_transcripts([projects / "p"]) is None  # other paths: none of theirs
    write(projects / "p" / "s9.jsonl", [assistant("m9", "r9", usage(10, 1))])  # sorts after s0
    write(projects / "a" / "s.jsonl", [assistant("ma", "ra", usage(1, 1))])  # sorts first
    walked: list[object] = []
    walk = collector.transcript_sizes
    monkeypatch.setattr(collector, "transcript_sizes", lambda paths: walked.append(paths) or walk(paths))
    summary = collect_paths(load_settings(), [projects], jobs=2, post_ingest=False)
    assert started == ["early"] and walked == [] and summary.files_ingested == summary.files_seen == 6
    assert transcripts.early_transcripts([projects]) is None  # taken over: once

    summary = collect_paths(load_settings(), [projects], jobs=1, post_ingest=False)  # the next collect
    assert walked == [[projects]] and summary.files_seen == 8 and summary.files_ingested == 2


def test_parsers_started_for_other_files_are_stopped(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started for a whole tree, they are not the parsers of a collect of three of its files."""
    started = _pools_started(monkeypatch)
    assert transcripts.start_parsers_early([str(corpus / "projects")], 2, post_ingest=False)
    early = transcripts._early
    assert early is not None
    processes = list(early.queue.pool._processes.values())
    files = discover_transcripts([corpus])
    summary = collect_paths(load_settings(), files[:3], jobs=2, post_ingest=False)
    assert started == ["early", "collect"] and transcripts._early is None
    assert summary.files_ingested == 3
    for process in processes:
        process.join(timeout=5)
        assert not process.is_alive()


@pytest.mark.parametrize("case", ["made database", "one process", "small backlog", "missing path", "no transcripts"])
def test_nothing_starts_where_the_parsers_would_not_serve_the_collect(
        case: str, tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Into a made database the collect plans from its offsets (most files unchanged); one
    process, or a backlog too small for parser processes, parses in the writer; a path that is
    not there is the command's error to report."""
    started = _pools_started(monkeypatch)
    paths, jobs = [str(corpus)], 2
    if case == "made database":
        open_store(load_settings()).engine.dispose()
    elif case == "one process":
        jobs = 1
    elif case == "small backlog":
        jobs = None  # the default: parser processes from PARALLEL_MIN_BYTES on (32 MB; the corpus is smaller)
    elif case == "missing path":
        paths = [str(tmp_path / "nowhere")]
    else:
        paths = [str(tmp_path)]
    assert not transcripts.start_parsers_early(paths, jobs)
    assert started == [] and transcripts._early is None


def test_the_command_s_arguments_are_read_before_the_cli_loads() -> None:
    assert _collect_arguments(["collect"]) == ([], False, None)
    assert _collect_arguments(["collect", "a", "--json", "b", "--jobs", "3"]) == (["a", "b"], True, 3)
    assert _collect_arguments(["collect", "--jobs=2", "a"]) == (["a"], False, 2)
    for args in (["status"], [], ["collect", "--help"], ["collect", "-h"], ["collect", "--jobs"],
                 ["collect", "--jobs", "0"], ["collect", "--jobs", "65"], ["collect", "--jobs=x"],
                 ["collect", "--jobs", "-1"], ["collect", "--since", "7d"], ["collect", "--", "a"],
                 ["collect", "--jobsx=2"], ["collect", "--jobs", "\u00b2"], ["collect", "--jobs", "\uff13"],
                 ["collect", ""], ["collect", "a", " "], ["collect", "--json=1"]):
        assert _collect_arguments(args) is None, args


COUNTED_COMMAND = """
import json, sys
from warden.ingest import collector, transcripts

started = []
plain = transcripts.start_parser_pool
transcripts.start_parser_pool = lambda jobs: started.append("early") or plain(jobs)
collector.start_parser_pool = lambda jobs: started.append("collect") or plain(jobs)
from warden.cli.entry import main

code = main(sys.argv[1:])
print(json.dumps({"started": started, "left": transcripts._early is not None}), file=sys.stderr)
sys.exit(code)
"""


def test_warden_collect_starts_its_parsers_before_the_cli(tmp_path: Path, corpus: Path) -> None:
    """The console script's path: into a new database the early parsers do the collect (and
    the command's JSON is what it was); into the made one, the collect starts its own."""
    def collect() -> tuple[dict, dict]:
        proc = subprocess.run([sys.executable, "-c", COUNTED_COMMAND, "collect", "--json", "--jobs", "2", str(corpus)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), json.loads(proc.stderr.strip().splitlines()[-1])

    first, pools = collect()
    assert pools == {"started": ["early"], "left": False}
    assert first["files_ingested"] == first["files_seen"] == len(discover_transcripts([corpus]))
    again, pools = collect()
    assert pools == {"started": ["collect"], "left": False}
    assert again["files_unchanged"] == first["files_seen"] and again["files_ingested"] == 0


def test_parsers_no_collect_took_over_are_stopped_when_the_command_ends(
        corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that fails before its collect (here, its imports raise) leaves no parser behind."""
    from warden.cli import entry

    seen: list[object] = []

    def failing_load() -> None:
        seen.append(transcripts._early)
        raise RuntimeError("the imports failed")

    monkeypatch.setattr(entry, "load_collect", failing_load)
    with pytest.raises(RuntimeError):
        entry.main(["collect", "--jobs", "2", str(corpus)])
    early = seen[0]
    assert isinstance(early, transcripts.EarlyParsers) and transcripts._early is None
    for process in early.queue.pool._processes.values() if early.queue.pool._processes else ():
        process.join(timeout=5)
        assert not process.is_alive()


def test_the_path_limit_is_the_offsets_column() -> None:
    assert transcripts.MAX_PATH_CHARS == IngestOffset.__table__.c.path.type.length


def test_the_parser_side_imports_no_sqlalchemy(corpus: Path) -> None:
    """What runs before the CLI loads, and in the parser processes into SQLite, imports no
    SQLAlchemy (its import is what the early start overlaps)."""
    code = (
        "import sys\n"
        "from warden.ingest import discovery, transcripts\n"
        f"paths = discovery.discover_transcripts([__import__('pathlib').Path({str(corpus)!r})])\n"
        "outcomes = transcripts._parse_files_in_worker([(str(p), 0, None) for p in paths], None, 1 << 20, True, 'sqlite')\n"
        "assert all(not isinstance(o, Exception) for o in outcomes)\n"
        "assert any(rows for _, handed in outcomes for rows in [handed.usage_rows])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_transcripts_are_found_by_a_child_while_the_parser_loads(
        tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`warden collect` walks the tree in a child process (entry.start_early): its answer is
    the walk this process would make, names that are not UTF-8 included, and the parsers start
    on it without this process walking at all."""
    from warden.cli.entry import start_early
    from warden.ingest import discovery

    tree = tmp_path / "projects"
    shutil.copytree(corpus / "projects", tree)
    odd = tree / os.fsdecode(b"-odd\xff")
    odd.mkdir()
    (odd / "s.jsonl").write_bytes(b'{"type":"user"}\n')
    child = discovery.ChildDiscovery([tree])
    assert child.result() == discovery.transcript_sizes([tree]) and str(odd / "s.jsonl") in discovery.transcript_sizes([tree])
    assert child.result() is None  # once
    assert discovery.ChildDiscovery([tmp_path / "nowhere"]).result() is None  # the caller reports it

    walked: list[object] = []
    monkeypatch.setattr(transcripts, "transcript_sizes", lambda paths: walked.append(paths) or {})
    start_early([str(corpus)], 2, post_ingest=False)
    early = transcripts._early
    assert early is not None and walked == []
    names = discovery.transcript_names([corpus])
    assert early.files == [os.path.abspath(f) for f in names][:len(early.files)]
    summary = collect_paths(load_settings(), [corpus], jobs=2, post_ingest=False)
    assert transcripts._early is None and summary.files_ingested == len(names)


def test_a_ledger_collect_into_a_new_database_sets_up_no_orm_mapping(corpus: Path) -> None:
    """The writer's bulk path reads and writes through the tables into a new database: nothing
    in it configures the ORM's mappers (~15 ms of the writer's core), which only loading stored
    rows as objects needs."""
    code = (
        "import sys\n"
        "from sqlalchemy import inspect\n"
        "from warden.config import load_settings\n"
        "from warden.ingest.collector import collect_paths\n"
        "from warden.store.models import SessionRun\n"
        "summary = collect_paths(load_settings(), [sys.argv[1]], jobs=2, post_ingest=False)\n"
        "assert summary.files_ingested > 1 and summary.runs_updated > 1\n"
        "print(inspect(SessionRun).configured)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(corpus)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False"]
