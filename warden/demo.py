"""``warden demo``: the whole loop, offline, on the simulated agent, in a temporary home.

simulated real-work sessions of a naive agent (Claude Code–format transcripts) → collect →
distill → bench → select → compile, then the receipts and the MEMORY.md. Everything it returns
is measured on the sim backend and labelled so; it is a demonstration of warden's machinery,
not a model's result. ``warden demo`` (warden/cli/select.py) prints it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from warden.config import Settings, load_settings
from warden.errors import UsageError
from warden.names import process_tag
from warden.store.db import open_store

if TYPE_CHECKING:
    from warden.bench.agents.sim_sessions import PlayedSession
    from warden.bench.tasks import AgentSuite


def play_demo_sessions(settings: Settings, agent: str, suite: AgentSuite, *, sessions: int, seed: int,
                       now: datetime | None = None) -> list[PlayedSession]:
    """The demo's real work: ``sessions`` delegated sessions of the naive ``agent``, written into
    the home's Claude Code directory, laid out backwards from the hour of ``now`` (default: the
    clock) — the work of the last hours and days, recent enough for checkpoint retention and
    recall, and every session over before the collect that follows. A session dated later would
    be filed under the rule set in force at its start, one the naive agent never had. (Whole
    hours keep the transcripts identical within an hour.)"""
    from warden.bench.agents.sim_sessions import play_sessions

    end = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    return play_sessions(settings.claude_home, {agent: suite}, settings.fixture_dir, sessions=sessions, seed=seed,
                         delegate_share=1.0, end=end, namespace="demo")


def run_demo(*, sessions: int = 12, seed: int = 0, agent: str = "backend", keep: str | None = None,
             log: Callable[[str], None] | None = None) -> dict:
    """Play the sessions and run one night in a fresh home (``keep``, or a temporary one removed
    afterwards); the night's summary, the receipts and the compiled MEMORY.md, with ``aborted``
    set when the night stopped on an infrastructure failure."""
    from warden.bench.tasks import load_suite
    from warden.select.compile import memory_path
    from warden.select.nightly import resolve_agents, run_nightly
    from warden.select.receipts import latest_receipts

    say = log or (lambda _m: None)
    if keep is not None and not keep.strip():
        raise UsageError("--keep needs a directory (leave it out to use a temporary one)")
    # a temporary home is named with this pid: if the demo is killed, a later bench sweeps it
    home = Path(keep).expanduser().resolve() if keep else Path(tempfile.mkdtemp(prefix=f"warden-demo-{process_tag()}-"))
    try:
        if keep and home.exists() and (not home.is_dir() or any(home.iterdir())):
            raise UsageError(f"--keep {home}: " + ("is not empty (the demo starts from scratch: name a new "
                                                    "directory, or delete this one)" if home.is_dir()
                                                    else "is not a directory"))
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--keep {home}: {exc.strerror or exc}") from None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDEN_", "ANTHROPIC_"))}
    env.update(WARDEN_HOME=str(home / "warden"), CLAUDE_CONFIG_DIR=str(home / "claude"))
    if "WARDEN_REPO" in os.environ:
        env["WARDEN_REPO"] = os.environ["WARDEN_REPO"]
    settings = load_settings(env, backend="sim")
    try:
        resolve_agents(settings, [agent])
        suite = load_suite(settings.golden_dir, agent)
        say(f"demo home {home} (sim backend: a simulated agent, not a model)")
        say(f"playing {sessions} simulated real-work sessions of the naive {agent} agent")
        play_demo_sessions(settings, agent, suite, sessions=sessions, seed=seed)
        store = open_store(settings)
        summary = run_nightly(store, settings, agents=[agent], log=say, base_seed=seed)
        with store.session() as session:
            receipts = latest_receipts(session, agent)
        memory_file = memory_path(settings, agent)
        memory_text = memory_file.read_text(encoding="utf-8") if memory_file.exists() else ""
        return {"home": str(home), "kept": bool(keep), "backend": "sim", "night": summary.to_json(),
                "receipts": receipts, "memory_path": str(memory_file), "memory": memory_text,
                "aborted": summary.aborted}
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
