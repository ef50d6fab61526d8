"""Commands of the simulated agent: ``warden sim truth`` and ``warden sim sessions``.

Both are simulations (backend ``sim``): ground truth for benchmarks and offline demo input,
never a real model's result — the output says so.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from warden.cli.common import (MAX_SEED, agent_names, bounded_float_option, console, print_json, progress_bar, safe,
                               settings)
from warden.errors import UsageError, WardenError


def _persona(name: str) -> str:
    from warden.bench.agents.sim import PERSONAS

    if name not in PERSONAS:
        raise UsageError(f"unknown persona {name!r}; choose one of: {', '.join(sorted(PERSONAS))}")
    return name


def register(app: typer.Typer) -> None:
    sim = typer.Typer(help="The simulated agent: ground truth and offline sessions (simulations).",
                      no_args_is_help=True)
    app.add_typer(sim, name="sim")

    @sim.command("truth")
    def truth(
        agent: str = typer.Option(..., "--agent", help="agent whose golden suite to play"),
        rules: list[str] = typer.Option([], "--rules", "--rule",
                                        help="a rule body (repeat for a rule set), measured against the bare agent"),
        seeds: int = typer.Option(10, "--seeds", min=1, max=10_000, help="seeds averaged per task and arm"),
        persona: str = typer.Option("naive", "--persona", help="naive | careful"),
        exact: bool = typer.Option(False, "--exact", help="run the real success checks (slower)"),
        as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    ) -> None:
        """True expected cost and saving of a rule set on the sim (averaged over many seeds)."""
        from warden.bench.agents.sim_truth import true_expected_cost
        from warden.bench.tasks import load_suite
        from warden.distill.rule_text import validate_rule_body

        if not rules:
            raise UsageError("give the rule set to measure: --rules BODY (repeat for several rules)")
        s = settings()
        rules = [validate_rule_body(body) for body in rules]  # RuleTextError is a UsageError
        suite = load_suite(s.golden_dir, agent, s.fixture_dir)
        with progress_bar("sim truth", not as_json) as bar:
            task = bar.add_task("runs", total=None)
            result = true_expected_cost(suite, rules, seeds, fixture_dir=s.fixture_dir,
                                        persona=_persona(persona), fast=not exact,
                                        progress=lambda done, total: bar.update(task, completed=done, total=total))
        if as_json:
            print_json(result, figures=True)
            return
        table = Table(title=f"{safe(agent)} · {len(result['seeds'])} seeds · {result['model']}")
        for column in ("task", "without", "with", "saving", "share", "done w/o", "done with"):
            table.add_column(column, justify="left" if column == "task" else "right")
        for task_id, entry in result["tasks"].items():
            table.add_row(safe(task_id), f"{entry['without']['mean_weighted_tokens']:,.0f}",
                          f"{entry['with']['mean_weighted_tokens']:,.0f}", f"{entry['saving']:,.0f}",
                          f"{entry['saving_share']:.1%}", f"{entry['without']['completion_rate']:.0%}",
                          f"{entry['with']['completion_rate']:.0%}")
        suite_row = result["suite"]
        table.add_row("[bold]suite[/]", f"{suite_row['without_weighted_tokens']:,.0f}",
                      f"{suite_row['with_weighted_tokens']:,.0f}", f"{suite_row['saving']:,.0f}",
                      f"{suite_row['saving_share']:.1%}", f"{suite_row['completion_without']:.0%}",
                      f"{suite_row['completion_with']:.0%}")
        console.print(table)
        console.print(f"costs in cost-weighted tokens per run; {result['label']}")

    def _start(text: str) -> datetime:
        try:
            day = datetime.strptime(text.strip(), "%Y-%m-%d")
        except ValueError:
            raise UsageError(f"--start {text!r}: expected a date like 2026-11-29") from None
        if not 1970 <= day.year <= 9000:  # the simulated clock runs on for days; transcripts write 4-digit years
            raise UsageError(f"--start {text!r}: expected a year from 1970 to 9000")
        return day.replace(hour=9, tzinfo=timezone.utc)

    @sim.command("sessions")
    def sessions(
        out_dir: str = typer.Option(..., "--out", help="directory to write projects/<encoded cwd>/… into"),
        count: int = typer.Option(12, "--sessions", min=1, max=10_000, help="sessions to play"),
        seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="session sequence seed"),
        agent: Optional[list[str]] = typer.Option(None, "--agent", help="only these agents (repeat, or comma-separated)"),
        memory_dir: Optional[Path] = typer.Option(
            None, "--memory-dir", help="read <dir>/<agent>/MEMORY.md into each agent's system prompt"),
        delegate_share: float = bounded_float_option(0.75, "--delegate-share", 0.0, 1.0,
                                                     "share of sessions delegated to a subagent"),
        persona: str = typer.Option("naive", "--persona", help="naive | careful"),
        start_date: Optional[str] = typer.Option(
            None, "--start", metavar="YYYY-MM-DD",
            help="date of the first session, which starts 20-200 simulated minutes after 09:00 UTC that day;"
                 " sessions that would run past now are refused (nothing is written): give an earlier date or"
                 " fewer sessions (default: dated backwards from midnight UTC so that the last one ends before"
                 " today - yesterday for a few sessions, earlier for more)"),
        as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    ) -> None:
        """Play simulated work sessions and write them as Claude Code transcripts (demo input)."""
        from warden.bench.agents.sim_sessions import TimelineOverrun, play_sessions
        from warden.bench.tasks import load_all_suites

        if not out_dir.strip():
            raise UsageError("--out is empty: give the directory to write the transcripts into")
        out = Path(out_dir)
        s = settings()
        suites = load_all_suites(s.golden_dir, s.fixture_dir)
        agent = agent_names(agent)
        if agent:
            unknown = sorted(set(agent) - set(suites))
            if unknown:
                raise UsageError(f"unknown agent(s): {', '.join(unknown)} (known: {', '.join(sorted(suites))})")
            suites = {a: suites[a] for a in agent}
        memories: dict[str, str] = {}
        if memory_dir is not None:
            if not memory_dir.is_dir():  # a typo would otherwise play every agent without memory
                raise UsageError(f"--memory-dir {safe(memory_dir)}: no such directory")
            for name in suites:
                memory_file = memory_dir / name / "MEMORY.md"
                if memory_file.is_file():  # an agent with no compiled memory yet plays without one
                    try:
                        memories[name] = memory_file.read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError) as exc:
                        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                        raise UsageError(f"cannot read {safe(memory_file)}: {reason or exc}") from None
        persona = _persona(persona)
        if start_date is None:  # backwards from today's midnight: the same transcripts all day
            timeline = {"end": datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)}
        else:  # forwards from the given day, never past the moment they are generated
            timeline = {"start": _start(start_date), "not_after": datetime.now(timezone.utc)}
        with progress_bar("sim sessions", not as_json) as bar:
            bar.add_task("sessions", total=None)
            try:
                played = play_sessions(out, suites, s.fixture_dir, sessions=count, seed=seed,
                                       memory_by_agent=memories, delegate_share=delegate_share,
                                       persona=persona, **timeline)
            except TimelineOverrun as exc:
                raise UsageError(
                    f"--start {start_date.strip()}: {count} sessions from that day would run past now (session "
                    f"{exc.index + 1} would end after {exc.not_after:%Y-%m-%d %H:%M} UTC); nothing written: give"
                    " an earlier --start or fewer --sessions, or leave --start out") from None
            except OSError as exc:
                raise WardenError(f"cannot write the sessions under {out}: {exc.strerror or exc}") from None
        rows = [p.__dict__ for p in played]
        if as_json:
            print_json({"label": "simulated sessions (sim backend), not a real model", "sessions": rows}, figures=True)
            return
        table = Table(title=f"{len(played)} simulated sessions → {safe(out)}")
        for column in ("session", "agent", "task", "delegated", "completed", "weighted tokens"):
            table.add_column(column)
        for p in played:
            table.add_row(p.session_id[:8], safe(p.agent), safe(p.task_id), "yes" if p.delegated else "no",
                          "yes" if p.completed else "no", f"{p.weighted_tokens:,.0f}")
        console.print(table)
        console.print(f"collect them with: warden collect {safe(out / 'projects')}")
