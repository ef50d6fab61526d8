"""``warden recover`` and ``warden checkpoints list|show|forget|prune`` (DESIGN.md §6).

Checkpoint text is untrusted: it reaches the terminal only fenced as data (``show``, ``recover``)
or through :func:`safe` (listings); JSON output has controls stripped as well.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from warden.cli.common import (MAX_ID, MAX_ROWS, console, keep_limit, print_json, print_uncut_table, safe, say_error,
                               settings, store)
from warden.continuity import service
from warden.errors import UsageError
from warden.sanitize import strip_controls

def _recompile_memories(s: Any) -> bool:
    """After checkpoints were removed, no MEMORY.md keeps pointing at one: the agents whose
    MEMORY.md points at a checkpoint no longer stored are recompiled (no other: nothing removed,
    nothing rewritten). The removal is committed first and each agent's compile is a transaction
    of its own: a MEMORY.md that cannot be written (a symlink, a read-only directory) never keeps a
    checkpoint from being forgotten. False when some file could not be rewritten (one stderr line
    each). (The selector, and its statistics stack, is imported only by the commands that change
    checkpoints.)"""
    from sqlalchemy import select

    from warden.cli.common import warn_if_drifted
    from warden.continuity.memory_section import pointed_checkpoint_ids
    from warden.errors import WardenError
    from warden.select.compile import memory_path
    from warden.select.selector import compiled_agents, recompile_memory
    from warden.store.models import Checkpoint

    st = store(s)
    stale: list[str] = []
    with st.session() as db:
        for agent in compiled_agents(db):
            pointed = pointed_checkpoint_ids(memory_path(s, agent).parent)
            if pointed is None or (pointed and len(set(db.scalars(select(Checkpoint.id).where(
                    Checkpoint.id.in_(sorted(pointed)))))) < len(pointed)):
                stale.append(agent)
    rewritten = True
    for agent in stale:
        try:
            with st.session() as db:
                warn_if_drifted(recompile_memory(db, s, agent))
        except (WardenError, OSError) as exc:
            rewritten = False
            say_error(f"forgotten in the store, but {agent}'s MEMORY.md could not be rewritten ({exc}) and may "
                      f"still point at it: fix the file, then run `warden memory compile --agent {agent}`")
    return rewritten


checkpoints_app = typer.Typer(help="Recovered checkpoints: list, show, forget, prune, reindex.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("recover")(recover)
    app.add_typer(checkpoints_app, name="checkpoints")


def _clean(value: Any) -> Any:
    """JSON output of untrusted text: same control/bidi stripping as everywhere else."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _write_block(text: str) -> None:
    # The fenced block is already defanged; write it raw so rich markup cannot reinterpret it.
    sys.stdout.write(strip_controls(text) + "\n")


def recover(prompt: str = typer.Option(..., "--prompt", help="The new session's prompt."),
            cwd: Optional[str] = typer.Option(None, "--cwd", help="Current project; other projects' items are dropped."),
            session_id: Optional[str] = typer.Option(None, "--session-id", help="Current session (never recovered)."),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Recover the one earlier checkpoint relevant to a new prompt (--prompt), fenced as data."""
    s = settings()
    with store(s).session() as db:
        outcome = service.recover(db, s, prompt=prompt, session_id=session_id, cwd=cwd)
    if as_json:
        print_json(_clean(outcome.as_json()))
    elif outcome.block is not None:
        _write_block(outcome.block)
    else:
        kind = "nothing relevant found" if outcome.result.status == "below_threshold" else "nothing to score"
        # exactly one line, never wrapped by the terminal renderer
        sys.stdout.write(strip_controls(f"warden: {kind}: {outcome.result.reason}", keep_newlines=False) + "\n")


@checkpoints_app.command("list")
def list_cmd(session_id: Optional[str] = typer.Option(None, "--session", help="Only this session (its id, or the start of it)."),
             project: Optional[str] = typer.Option(None, "--project", help="Only this project (cwd)."),
             limit: int = typer.Option(50, "--limit", min=1, max=MAX_ROWS, help="At most this many, newest first."),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Stored checkpoints, newest first."""
    s = settings()
    with store(s).session() as db:
        if session_id is not None:  # a cut id as this listing shows it names its session
            session_id = service.resolve_session_id(db, session_id)
        rows = [service.checkpoint_summary(r) for r in service.list_checkpoints(db, session_id=session_id,
                                                                                 project=project, limit=limit + 1)]
    rows = keep_limit(rows, limit, "checkpoint")
    if as_json:
        print_json(_clean(rows))
        return
    if not rows:
        console.print("no checkpoints match" if session_id or project else "no checkpoints stored")
        return
    headers = ("id", "captured UTC", "session", "trigger", "fill", "quality", "project", "task")
    cells = [[str(r["id"]), r["captured_at"].strftime("%Y-%m-%d %H:%M") if r["captured_at"] else "undated",
              safe(r["session_id"], 12), safe(r["trigger"], 28), f"{r['fill']:.0f}%", f"{r['quality']:.0f}",
              safe(r["project"] or "-", 40), safe(r["active_task"], 60)] for r in rows]
    print_uncut_table(headers, cells, left={"captured UTC", "session", "trigger", "project", "task"},
                      shrink={"project", "task"})


@checkpoints_app.command("show")
def show_cmd(checkpoint_id: int = typer.Argument(..., min=1, max=MAX_ID,
                                               help="Checkpoint id (see `warden checkpoints list`)."),
             cwd: Optional[str] = typer.Option(None, "--cwd", help="Scope to this project."),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """One checkpoint, fenced as data."""
    s = settings()
    with store(s).session() as db:
        data, block = service.show(db, checkpoint_id, cwd)
    if as_json:
        print_json(_clean({**data.__dict__, "block": block}))
    else:
        _write_block(block)


@checkpoints_app.command("forget")
def forget_cmd(checkpoint_ids: list[int] = typer.Argument(None, min=1, max=MAX_ID, help="Checkpoint ids to delete."),
               session_id: Optional[str] = typer.Option(None, "--session", help="Delete every checkpoint of a session (its id, or the start of it)."),
               as_json: bool = typer.Option(False, "--json")) -> None:
    """Delete checkpoints by id, or all of one session."""
    s = settings()
    with store(s).session() as db:
        n = service.forget(db, checkpoint_ids=list(checkpoint_ids or []), session_id=session_id)
    rewritten = _recompile_memories(s)  # no MEMORY.md keeps pointing at a forgotten checkpoint
    if as_json:
        print_json({"forgotten": n})
    else:
        console.print(f"forgot {n} checkpoint(s)")
    if not rewritten:
        raise typer.Exit(1)


@checkpoints_app.command("prune")
def prune_cmd(older_than: Optional[float] = typer.Option(None, "--older-than", help="Days (default: checkpoint_max_age_days)."),
              keep: Optional[int] = typer.Option(None, "--keep", max=MAX_ID,
                                                 help="Keep at most N newest (default: checkpoint_keep)."),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """Retention: delete checkpoints older than --older-than days, then all but the --keep newest."""
    s = settings()
    if (older_than is not None and not older_than >= 0) or (keep is not None and keep < 0):  # NaN too
        raise UsageError("--older-than and --keep must be numbers ≥ 0")
    with store(s).session() as db:
        res = service.prune(db, max_age_days=s.checkpoint_max_age_days if older_than is None else older_than,
                            keep=s.checkpoint_keep if keep is None else keep)
    rewritten = _recompile_memories(s)
    if as_json:
        print_json({"deleted_by_age": res.by_age, "deleted_by_count": res.by_count, "remaining": res.remaining})
    else:
        console.print(f"pruned {res.by_age} by age, {res.by_count} by count; {res.remaining} remain")
    if not rewritten:
        raise typer.Exit(1)


@checkpoints_app.command("reindex")
def reindex_cmd(as_json: bool = typer.Option(False, "--json")) -> None:
    """Rebuild the recall index, and redact stored checkpoints again (after upgrading warden)."""
    s = settings()
    with store(s).session() as db:
        n = service.reindex(db)
    if as_json:
        print_json({"reindexed": n})
    else:
        console.print(f"reindexed {n} checkpoint(s)")
