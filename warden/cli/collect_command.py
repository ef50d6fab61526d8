"""What `warden collect` does, without typer or rich: the console script runs it for a plain
command line (:mod:`warden.cli.entry`), and typer's ``collect`` command for any other. Their
imports and typer's command tree are a sixth of the command's start-up (a collect with nothing
new: 0.30 -> 0.25 s), paid in a bulk collect while the parsers want both cores."""

from __future__ import annotations

from pathlib import Path

from warden.cli.output import print_json
from warden.config import load_settings
from warden.ingest.collector import collect_paths


def run_collect(paths: list[Path] | None, as_json: bool, jobs: int | None) -> int:
    """Collect ``paths`` (None: the default Claude Code projects) and print the summary: JSON,
    or a line with a progress bar on a terminal meanwhile."""
    # collect_paths opens (and migrates) the store itself: into a new database, its parser
    # processes start first
    if as_json:
        print_json(collect_paths(load_settings(), paths or None, jobs=jobs).to_json())
        return 0
    from warden.cli.common import console, err_console, progress_bar  # rich: for the human summary only
    from warden.sanitize import strip_controls

    with progress_bar("collect", True) as bar:
        task = bar.add_task("files", total=None)
        summary = collect_paths(load_settings(), paths or None, jobs=jobs,
                                progress=(lambda n, total: bar.update(task, completed=n, total=total))
                                if not bar.disable else None)
    console.print(f"{summary.files_seen} transcript(s): {summary.files_ingested} ingested, "
                  f"{summary.files_unchanged} unchanged, {summary.files_skipped} skipped; "
                  f"{summary.runs_updated} run(s) updated, {summary.bytes_read / 1e6:.1f} MB read")
    for reason in summary.skipped[:20]:
        err_console.print(f"skipped {strip_controls(reason, keep_newlines=False)[:300]}", markup=False)
    return 0
