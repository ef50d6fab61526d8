"""How a bulk collect splits its files into parser-process tasks (transcripts.ParseQueue): few
large tasks, none larger than TASK_BYTES or TASK_FILES, and shrinking with what is left to plan,
so a small backlog still reaches every parser and the last tasks are small."""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

from warden.ingest.transcripts import MIN_TASK_BYTES, TASK_BYTES, TASK_FILES, ParseQueue

MB = 1 << 20


class _RecordingPool:
    """A pool that parses nothing: it keeps each task it is handed."""

    def __init__(self) -> None:
        self.tasks: list[list[tuple[str, int, Any]]] = []

    def submit(self, _fn: Any, task: list[tuple[str, int, Any]], *_options: Any) -> Future[list[Any]]:
        self.tasks.append(task)
        return Future()


def _stat(size: int) -> os.stat_result:
    return os.stat_result((0o100644, 0, 0, 1, 0, 0, size, 0, 0, 0))


def _plan(sizes: list[int], jobs: int) -> list[list[int]]:
    """The sizes of the files of each task, planning files of ``sizes`` in order."""
    pool = _RecordingPool()
    queue = ParseQueue(pool, None, 1 << 30, False, "sqlite", jobs=jobs, backlog=sum(sizes))  # type: ignore[arg-type]
    for n, size in enumerate(sizes):
        queue.add(f"/t/{n}.jsonl", _stat(size), 0, None)
    queue.submit()
    planned = [[int(path.rpartition("/")[2].split(".")[0]) for path, _, _ in task] for task in pool.tasks]
    assert [n for task in planned for n in task] == list(range(len(sizes)))  # each file once, in order
    assert [len(task) for task in planned] == [len(files) for files, _ in queue.window]
    return [[sizes[n] for n in task] for task in planned]


def test_a_large_backlog_goes_in_few_large_tasks_that_shrink_toward_its_end() -> None:
    tasks = _plan([MB] * 1024, jobs=2)
    totals = [sum(task) for task in tasks]
    assert totals[0] == TASK_BYTES  # the cap, while a quarter of what is left is more
    assert max(totals) == TASK_BYTES
    assert len(tasks) < 40  # not a task per few files: 1 GB in 8 MB tasks was 128 of them
    assert totals == sorted(totals, reverse=True)
    # Past the cap, a task is at most what is left to plan before it over twice the parsers.
    left = 1024 * MB
    for total in totals:
        assert total <= max(MIN_TASK_BYTES, min(TASK_BYTES, (left - total) // 4)) + 2 * MB
        left -= total
    assert totals[-1] <= MIN_TASK_BYTES


def test_a_small_backlog_still_reaches_every_parser() -> None:
    """40 MB among four parsers: one 64 MB task would leave three of them idle."""
    tasks = _plan([MB] * 40, jobs=4)
    assert len(tasks) >= 4
    assert max(sum(task) for task in tasks) <= 5 * MB


def test_many_small_files_go_at_most_task_files_a_task() -> None:
    tasks = _plan([100] * (3 * TASK_FILES + 5), jobs=2)
    assert [len(task) for task in tasks] == [TASK_FILES] * 3 + [5]


def test_a_file_larger_than_a_task_ends_the_task_it_joins() -> None:
    sizes = [MB, 3 * TASK_BYTES, MB]
    assert _plan(sizes, jobs=2) == [[MB, 3 * TASK_BYTES], [MB]]
