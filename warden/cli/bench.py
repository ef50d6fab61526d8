"""Commands of the bench stage: ``warden bench`` (``warden sim …`` lives in ``cli/sim.py``)."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from warden.cli.common import (MAX_CONCURRENCY, MAX_ID, MAX_SEED, console, err_console, print_json, print_measured, safe,
                               say_error, settings, store, token_budget_option)
from warden.errors import UsageError
from warden.names import plain_int


def parse_rule_set(text: str) -> tuple[int, ...]:
    """``"3,7"`` → (3, 7); ``"none"`` → () (the agent with no rules). An empty value is a
    usage error: it is more likely a shell variable that was not set than a choice."""
    cleaned = text.strip()
    if not cleaned:
        raise UsageError("--rules is empty: give rule ids like 3,7, or 'none' for the agent without rules")
    if cleaned.lower() == "none":
        return ()
    ids = []
    for part in cleaned.split(","):
        rule_id = plain_int(part.strip())
        if rule_id is None or not 1 <= rule_id <= MAX_ID:
            raise UsageError(f"--rules expects rule ids like 3,7 (or 'none'), got {text!r}")
        ids.append(rule_id)
    return tuple(sorted(set(ids)))


_ORDER_KEY = "warden.bench.config_order"  # ctx.meta: which of --rules / --active the command line gave first


def _note_order(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """Record the options the command line gave, in the order it gave them: click processes the
    options it was given in invocation order (then the rest in declaration order), so this
    callback sees --rules before --active exactly when --rules was written first."""
    source = ctx.get_parameter_source(param.name or "")
    if source is not None and source.name == "COMMANDLINE":
        ctx.meta.setdefault(_ORDER_KEY, []).append(param.name)
    return value


def active_written_first(ctx: typer.Context) -> bool:
    """--active came before every --rules (or there is no --rules): the active set is the reference."""
    order = ctx.meta.get(_ORDER_KEY, [])
    return "rules" not in order or ("active" in order and order.index("active") < order.index("rules"))


class RichProgress:
    """The scheduler's progress sink as a rich progress bar on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.bar = Progress(TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"),
                            console=err_console, transient=True, disable=not enabled)
        self.task: Any = None
        self.failed = 0

    def __enter__(self) -> "RichProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def start(self, pass_id: int, total: int, done: int) -> None:
        self.task = self.bar.add_task(f"pass #{pass_id}", total=total, completed=done)

    def job_started(self, job: Any) -> None:
        pass

    def job_finished(self, job: Any, run: Any) -> None:
        if run.outcome != "completed":
            self.failed += 1
        config = run.config_key or "no rules"
        self.bar.update(self.task, advance=1 if run.outcome != "infra_error" else 0,
                        description=f"{safe(run.task_id, 40)} rules {safe(config, 30)}: {run.outcome} "
                                    f"{run.weighted_tokens:,.0f} wt" + (f" · {self.failed} not completed"
                                                                       if self.failed else ""))

    def message(self, text: str) -> None:
        self.bar.console.print(f"warden: {text}", markup=False, highlight=False)


def _render(report: Any) -> None:
    o = report.outcome
    console.print(f"[bold]bench[/] agent {safe(report.agent)} · backend {safe(report.backend)} · model "
                  f"{safe(report.model)} · seed {report.seed} · pass #{o.pass_id} ({o.status})")
    table = Table(show_edge=False, pad_edge=False)
    for column in ("task", "rules", "n", "completed", "mean wt", "sd", "cv", "min–max"):
        table.add_column(column, justify="left" if column in ("task", "rules") else "right")
    for s in report.summaries:
        table.add_row(safe(s.task_id, 40), safe(s.config_key or "none", 30), str(s.n), f"{s.completed}/{s.n}",
                      f"{s.mean_weighted:,.0f}", f"{s.stdev_weighted:,.0f}", f"{s.cv:.0%}",
                      f"{s.min_weighted:,.0f}–{s.max_weighted:,.0f}")
    console.print(table)
    print_measured([report.backend])  # the sim's figures say they are the simulation's
    if report.comparisons:
        reference = safe(report.configs[0] or "none")
        console.print(f"paired against rules {reference} (same seeds; positive = cheaper):")
        for c in report.comparisons:
            console.print(f"  {safe(c.task_id, 40)}, rules {safe(c.config_key or 'none')}: "
                          f"{c.mean_saving:+,.0f} wt/run ({c.relative:+.1%}) over {c.pairs} pair(s)")
        for t in report.suites:
            console.print(f"  whole suite (one run of each task), rules {safe(t.config_key or 'none')}: "
                          f"{t.saving:+,.0f} wt ({t.relative:+.1%})")
    console.print(f"spent {o.spent_weighted:,.0f} weighted tokens ({o.spent_raw:,} raw) on {o.executed} run(s) "
                  f"in {o.wall_s:.1f}s" + (f"; {o.done_before} run(s) were already done" if o.resumed else ""))
    share = report.spend.share
    if share is None:
        console.print("bench spend share: no real-work sessions collected in the last 7 days")
    else:
        console.print(f"bench spend over the last 7 days (all agents): {share:.1%} of all real-work tokens")
    if report.spend.warning:
        err_console.print(f"warden: warning: {report.spend.warning}", markup=False, highlight=False)
    if o.message:
        say_error(o.message)


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench_command(
        ctx: typer.Context,
        agent: str = typer.Option(..., "--agent", help="The agent whose golden tasks to run."),
        rules: Optional[list[str]] = typer.Option(
            None, "--rules", callback=_note_order,
            help="A rule set to run, e.g. 3,7 ('none' = no rules); repeat to pair several. The first "
                 "configuration written (--rules or --active) is the reference."),
        active: bool = typer.Option(False, "--active", callback=_note_order,
                                    help="Also run the agent's active set (the default when no --rules is "
                                         "given): the reference when written before every --rules, else "
                                         "after the rule sets."),
        runs: int = typer.Option(3, "--runs", max=1000, help="Runs per task and configuration."),
        backend: Optional[str] = typer.Option(None, "--backend", help="sim | anthropic | claude-code"),
        model: Optional[str] = typer.Option(None, "--model", help="Model id (default: settings, agent.md, backend)."),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", max=MAX_CONCURRENCY, help="Runs at a time."),
        budget: Optional[int] = token_budget_option("Stop before spending more weighted tokens."),
        seed: Optional[int] = typer.Option(None, "--seed", min=0, max=MAX_SEED,
                                           help="Base seed (default: resume or draw one)."),
        max_infra: int = typer.Option(3, "--max-infra-errors", max=1000, help="Consecutive infra errors that abort."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Replay the agent's golden tasks on throwaway fixture copies and report what runs cost."""
        from warden.bench.scheduler import bench_agent

        rule_sets = [parse_rule_set(r) for r in rules or []]
        s = settings()
        db = store(s)
        with RichProgress(enabled=err_console.is_terminal) as progress:
            report = bench_agent(db, s, agent, rule_sets=rule_sets, include_active=active,
                                 active_first=active_written_first(ctx), runs=runs,
                                 backend=backend, model=model, concurrency=concurrency, budget=budget,
                                 seed=seed, progress=progress, max_consecutive_infra=max_infra)
        if as_json:
            print_json(report.as_dict())
        else:
            _render(report)
        if report.outcome.status == "aborted" or report.outcome.infra_pending:  # infrastructure: not done
            if as_json:  # the table's last line says it otherwise
                say_error(report.outcome.message)
            raise typer.Exit(1)
