"""Commands of the select stage: select, receipt(s), memory, plan, nightly, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from warden.cli.common import (MAX_CONCURRENCY, MAX_ID, MAX_SEED, agent_names, compile_outcome, console, err_console, print_json,
                               print_measured, safe, say_error, warn_if_drifted, safe_block, settings, store,
                               token_budget_option, wide_console)
from warden.errors import UsageError, WardenError
from warden.sanitize import count_text, counted

memory_app = typer.Typer(help="The compiled MEMORY.md of an agent.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("select")(select_command)
    app.command("receipt")(receipt_command)
    app.command("receipts")(receipts_command)
    app.command("plan")(plan_command)
    app.command("nightly")(nightly_command)
    app.command("demo")(demo_command)
    app.add_typer(memory_app, name="memory")


def _say(message: str) -> None:
    err_console.print(f"[dim]· {safe(message)}[/]")


def memory_change(memory: dict[str, Any]) -> str:
    """What a compile did to MEMORY.md, in words: "created with rule 3", "added rule 4; removed
    rule 2", "unchanged" (a first compile is no "change: added none")."""
    ids = lambda xs: ", ".join(f"rule {i}" for i in xs)  # noqa: E731
    outcome = compile_outcome(memory)
    if outcome == "created":
        return "created " + (f"with {ids(memory['rule_ids'])}" if memory.get("rule_ids")
                             else "(no rules in it yet)")
    if outcome == "unchanged":
        return outcome
    moves = [f"{verb} {ids(memory[key])}" for verb, key in (("added", "added"), ("removed", "removed")) if memory[key]]
    return "; ".join(moves) if moves else "rewritten (same rules)"


def render_select_report(report: dict[str, Any]) -> None:
    # A resumed night's agent line counts what was spent since the resume (the runs of a decision
    # the kill cut off are reused at no cost): never the whole night's. It lists the decisions its
    # interrupted part made, their spend theirs.
    earlier = [d["rule_id"] for d in report["decisions"] if d.get("decided_before_resume")]
    resumed = not report.get("decided_before_resume") and bool(report.get("since_resume") or earlier)
    console.print(f"[bold]{safe(report['agent'])}[/] · backend {safe(report['backend'])} · model "
                  f"{safe(report['model'])} · spent {count_text(report['tokens_spent'])} weighted tokens "
                  + ("since the resume " if resumed else "")
                  + f"({report['runs_made']} runs, {report['runs_reused']} reused)"
                  + (" · decided before this night was resumed" if report.get("decided_before_resume") else ""))
    if report["decisions"]:
        table = Table(show_edge=False, pad_edge=False)
        for col in ("rule", "kind", "verdict", "state", "saving/run", "interval", "margin", "spent", "body"):
            table.add_column(col, justify="right" if col in ("rule", "saving/run", "margin", "spent") else "left")
        for d in report["decisions"]:
            lo, hi = d["interval_tokens"]
            table.add_row(str(d["rule_id"]), d["kind"], d["verdict"], f"{d['state_before']} → {d['state_after']}",
                          count_text(d["estimate_tokens"]), f"[{count_text(lo)}, {count_text(hi)}]", count_text(d["margin_tokens"]),
                          count_text(d["tokens_spent"]), safe(d["body"], 200))
        wide_console().print(table)
        if resumed and earlier:
            console.print(f"  decided before this night was resumed: {', '.join(f'rule {i}' for i in earlier)}")
    elif not report["skipped"] and not report["aborted"]:
        console.print("  no pending candidates and nothing to re-audit")
    for note in report["skipped"]:
        console.print(f"  skipped: {safe(note)}")
    if report["aborted"]:
        console.print(f"  [red]aborted (infrastructure): {safe(report['aborted'])}[/] — no verdict, receipt or strike written")
    memory = report["memory"]
    if memory:
        console.print(f"  MEMORY.md v{memory['version']} {memory_change(memory)} → "
                      f"{safe(memory['path'])}" + (f"  [yellow](it had drifted — {safe(memory.get('drift') or 'edited by hand, or stale')}: recompiled)[/]"
                         if memory["drifted"] else ""))


# The bench options select and nightly share (one declaration each; typer reads them as metadata).
BACKEND_OPTION = typer.Option(None, "--backend", help="sim (default), anthropic or claude-code.")
MODEL_OPTION = typer.Option(None, "--model", help="Model the bench runs (default: settings, agent.md, the backend's).")
CONCURRENCY_OPTION = typer.Option(None, "--concurrency", min=1, max=MAX_CONCURRENCY,
                                  help="Bench runs at a time (default: concurrency setting).")


def select_command(
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent to decide rules for."),
    all_agents: bool = typer.Option(False, "--all", help="Every agent with a golden suite."),
    budget: Optional[int] = token_budget_option("Weighted-token budget of this invocation."),
    backend: Optional[str] = BACKEND_OPTION,
    model: Optional[str] = MODEL_OPTION,
    concurrency: Optional[int] = CONCURRENCY_OPTION,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Measure pending candidates against the active set and re-audit the longest-undecided rule."""
    from warden.select.nightly import resolve_agents, select_report_json
    from warden.select.selector import select_agents

    s = settings()
    if bool(agent) == all_agents:
        raise UsageError("give exactly one of --agent A or --all")
    agents = resolve_agents(s, None if all_agents else [agent])  # type: ignore[list-item]
    if not agents:
        err_console.print(f"warden: nothing to select: no golden suites under {safe(s.golden_dir)}", markup=False)
    reports = []
    unusable: list[str] = []
    for turn in select_agents(store(s), s, agents, budget_tokens=budget, strict=not all_agents, backend=backend,
                              model=model, concurrency=concurrency, log=None if as_json else _say):
        if turn.report is None:  # with --all, the others go on
            say_error(f"skipped {turn.agent}: {turn.reason}")
            if turn.skipped == "unusable":
                unusable.append(turn.agent)
            continue
        reports.append(select_report_json(turn.report))
    if as_json:
        print_json(reports, figures=True)
    else:
        for r in reports:
            render_select_report(r)
    if any(r["aborted"] for r in reports):  # a busy agent was skipped (said above), as nightly does
        raise typer.Exit(1)
    if unusable:  # said above, after every usable agent was done
        raise typer.Exit(2)


RECEIPT_DIFFS_SHOWN = 12  # paired differences per task in the text view; --json has them all


def receipt_command(rule_id: int = typer.Argument(..., metavar="RULE", min=1, max=MAX_ID),
                    as_json: bool = typer.Option(False, "--json")) -> None:
    """A rule's whole history: every decision with its evidence, provenance and current state."""
    from warden.select.receipts import provenance_summary, rule_history

    with store().session() as session:
        history = rule_history(session, rule_id)
    if as_json:
        print_json(history, figures=True)
        return
    rule = history["rule"]
    console.print(f"[bold]rule {rule['id']}[/] ({safe(rule['agent'])}) — {rule['state']}"
                  + (f" ({rule['evict_reason']})" if rule["evict_reason"] else "")
                  + f" · rent {rule['rent_tokens']} tokens · origin {safe(rule['origin'])}")
    console.print(f"  {safe(rule['body'])}")
    if rule["scope"]:
        console.print(f"  scope: {safe(rule['scope'])}")
    console.print(f"  born of: {safe(provenance_summary(rule['provenance_digest']), 400)}")
    if rule["claimed_evidence"]:
        _render_claimed(rule["claimed_evidence"])
    if not history["receipts"]:
        console.print("  no decisions yet")
    for r in history["receipts"]:
        lo, hi = r["interval"]
        console.print(f"\n  [bold]#{r['id']}[/] {r['created_at']} {r['kind']} → {r['verdict']} (state {r['state_after']})"
                      f" · measured on {safe(r['measured_on'])} · suite {r['suite_hash'][:10]} · fixture {r['fixture_hash'][:10]}"
                      f" · warden {safe(r['warden_version'], 40)}")
        console.print(f"    saving {count_text(r['estimate'])}/run, interval [{count_text(lo)}, {count_text(hi)}], margin "
                      f"{count_text(r['margin'])} (= {r['k']:g} × rent {r['rent']}), spent {count_text(r['tokens_spent'])} weighted "
                      f"tokens ({count_text(r['raw_tokens_spent'])} raw)")
        console.print(f"    {safe(r['reason'], 400)}")
        pairs = sum(len(p) for p in r["paired_run_ids"].values())
        console.print(f"    evidence: {pairs} pairs of bench runs" + (" (their run ids in --json)" if pairs else ""))
        for task, diffs in sorted(r["paired_diffs"].items()):
            passes = r["pass_counts"].get(task, [0, 0, 0, 0])
            shown = ", ".join(str(round(x)) for x in diffs[:RECEIPT_DIFFS_SHOWN])
            more = f", … {len(diffs) - RECEIPT_DIFFS_SHOWN} more (all in --json)" if len(diffs) > RECEIPT_DIFFS_SHOWN else ""
            console.print(f"    {safe(task, 40)}: n={r['n_per_side'].get(task)} passes ref {passes[0]}/{passes[1]} "
                          f"rule {passes[2]}/{passes[3]} diffs [{shown}{more}]")
    print_measured(r["backend"] for r in history["receipts"])


def _render_claimed(claimed: Any) -> None:
    """An adopted rule's foreign evidence, item by item: shown, never used in a verdict."""
    if not isinstance(claimed, dict):
        console.print(f"  claimed (foreign, not trusted): {safe(str(claimed), 300)}")
        return
    console.print(f"  claimed (foreign, never used in a verdict): ledger {safe(claimed.get('ledger'), 80)}, "
                  f"exported by {safe(claimed.get('exported_by'), 80)}, state there {safe(claimed.get('state'), 20)}")
    evidence = claimed.get("evidence")
    for item in evidence if isinstance(evidence, list) else []:
        if not isinstance(item, dict):
            continue
        lo, hi = (list(item.get("interval") or []) + ["?", "?"])[:2]
        console.print(f"    {safe(item.get('decided_at'), 30)} {safe(item.get('kind'), 20)} → {safe(item.get('verdict'), 20)}"
                      f" · saving {count_text(item.get('estimate'))}/run [{count_text(lo)}, {count_text(hi)}], margin "
                      f"{count_text(item.get('margin'))}, {count_text(item.get('n_pairs'))} pairs, passes "
                      f"{safe(item.get('pass_counts'), 40)} · {safe(item.get('backend'), 40)}/{safe(item.get('model'), 60)}")


def receipts_command(agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent's rules."),
                     as_json: bool = typer.Option(False, "--json")) -> None:
    """The latest receipt of every rule."""
    from warden.select.receipts import latest_receipts
    from warden.select.selector import require_rule_agent

    s = settings()
    with store(s).session() as session:
        if agent is not None:
            require_rule_agent(session, s, agent, path_safe=False)  # read-only: any agent the store holds
        rows = latest_receipts(session, agent)
    if as_json:
        print_json(rows, figures=True)
        return
    if not rows:
        console.print("no receipts yet")
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("rule", "agent", "state", "last", "verdict", "saving/run", "margin", "measured on", "spent", "body"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["rule_id"]), safe(r["agent"]), r["state"], r["kind"], r["verdict"], count_text(r["estimate"]),
                      count_text(r["margin"]), safe(r["measured_on"]), count_text(r["tokens_spent"]), safe(r["body"], 200))
    wide_console().print(table)
    print_measured(r["backend"] for r in rows)


@memory_app.command("show")
def memory_show(agent: str = typer.Option(..., "--agent", help="The agent whose MEMORY.md to show."),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """Print the installed MEMORY.md (and whether it drifted from the last compile)."""
    from warden.select.compile import check_drift, memory_path, read_existing
    from warden.select.selector import require_rule_agent

    s = settings()
    path = memory_path(s, agent)
    with store(s).session() as session:
        if not path.is_file():  # a file installed by hand is worth showing, known agent or not
            require_rule_agent(session, s, agent)
        drift = check_drift(session, s, agent)
    data = read_existing(path)
    if as_json:
        print_json({"agent": agent, "path": str(path), "exists": data is not None, "drift": drift,
                    "text": None if data is None else data.decode("utf-8", "replace")})
        return
    if drift:
        err_console.print(f"warning: {drift} — run `warden memory compile --agent {agent}`", markup=False)
    if data is None:
        console.print(f"no MEMORY.md for {safe(agent)} at {safe(path)}")
        return
    console.print(safe_block(data.decode("utf-8", "replace")), markup=False)


@memory_app.command("compile")
def memory_compile(agent: str = typer.Option(..., "--agent", help="The agent whose MEMORY.md to compile."),
                   as_json: bool = typer.Option(False, "--json")) -> None:
    """Recompile MEMORY.md from the rule ledger (and recovered checkpoints)."""
    from warden.select.selector import recompile_memory, require_rule_agent

    s = settings()
    with store(s).session() as session:
        require_rule_agent(session, s, agent)
        result = recompile_memory(session, s, agent)
    warn_if_drifted(result)
    payload = {"agent": agent, "path": str(result.path), "version": result.version, "changed": result.changed,
               "created": result.created, "drifted": result.drifted, "drift": result.drift or None,
               "rule_ids": result.rule_ids}
    if as_json:
        print_json(payload)
    else:
        console.print(f"MEMORY.md v{result.version} ({compile_outcome(result)}) → {safe(result.path)}")


def plan_command(agent: str = typer.Option(..., "--agent", help="The agent whose pending rules to plan."),
                 budget: Optional[int] = token_budget_option(
                     "Weighted tokens per rule to plan for (default and cap: the evidence budget)."),
                 backend: Optional[str] = BACKEND_OPTION,
                 model: Optional[str] = typer.Option(None, "--model", help="Model to plan for (default: the one select "
                                                     "would run: settings, agent.md, the backend's)."),
                 as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Estimate, before spending, the tokens needed to decide each pending rule."""
    from warden.select.plan import plan_agent

    s = settings()
    with store(s).session() as session:
        plan = plan_agent(session, s, agent, budget, model, backend)
    if as_json:
        print_json(plan, figures=True)
        return
    console.print(f"[bold]{safe(agent)}[/]: reference cost {count_text(plan['reference_cost'])} weighted tokens per run "
                  f"on {safe(plan['backend'])}/{safe(plan['model'])} ({plan['basis']}); budget per rule {count_text(plan['budget'])}"
                  + (" (the evidence budget caps --budget)" if budget and budget > plan["budget"] else ""))
    for r in plan["rules"]:
        fits = ("likely decided within the budget" if r["fits_budget"]
                else "[red]may end inconclusive within the budget[/]")
        shown = ("" if r["shown_saving"] is None
                 else f" (its evidence so far shows a {100 * r['shown_saving']:.1f}% saving)")
        console.print(f"  rule {r['rule_id']} ({r['kind']}): ~{count_text(r['expected_tokens'])} expected{shown}, "
                      f"≤ {count_text(r['worst_case_tokens'])} worst case — {fits} · {safe(r['body'], 200)}")
    if not plan["rules"]:
        console.print("  nothing pending")
    else:
        console.print(f"  at most {count_text(plan['total_worst_case_tokens'])} in all: each decision stops at its budget")
    print_measured([plan["backend"]])


def nightly_command(
    agents: Optional[list[str]] = typer.Option(None, "--agents", "--agent",
                                               help="Agents to select (repeat, or comma-separated); default: all."),
    budget: Optional[int] = token_budget_option("Weighted-token budget of the whole night."),
    backend: Optional[str] = BACKEND_OPTION,
    model: Optional[str] = MODEL_OPTION,
    concurrency: Optional[int] = CONCURRENCY_OPTION,
    distiller: Optional[str] = typer.Option(None, "--distiller", help="heuristic (default) or anthropic."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """collect → distill → select every agent within the budget → compile. Exit 1 on an infrastructure abort."""
    from warden.select.nightly import run_nightly

    s = settings()
    names = agent_names(agents, "--agents")
    summary = run_nightly(store(s), s, agents=names, budget_tokens=budget, backend=backend, model=model,
                          concurrency=concurrency, distiller=distiller, log=None if as_json else _say)
    payload = summary.to_json()
    if as_json:
        print_json(payload, figures=True)
    else:
        console.print(f"[bold]night #{payload['night_id']}[/]{' (resumed)' if payload['resumed'] else ''}: "
                      f"{payload['collected_runs']} runs collected, {payload['distilled_runs']} distilled, "
                      f"{payload['candidates_added']} new candidates, {count_text(payload['tokens_spent'])} bench tokens"
                      + (f", {count_text(payload['distill_model_tokens'])} distiller tokens"
                         if payload["distill_model_tokens"] else "")
                      + (f"; {counted(payload['distill_left_queued'], 'queued run')} left for a later night"
                         if payload["distill_left_queued"] else ""))
        for report in payload["agents"]:
            render_select_report(report)
    for name, why in summary.unusable_agents.items():
        say_error(f"skipped {name}: {why}")
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)


def demo_command(
    sessions: int = typer.Option(12, "--sessions", min=6, max=1000, help="Simulated real-work sessions to play."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="Seed of the simulated sessions."),
    agent: str = typer.Option("backend", "--agent", help="The sim agent to run the loop for."),
    keep: Optional[str] = typer.Option(None, "--keep", help="Keep the demo home in this directory."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The whole loop offline on the simulated agent, in a temporary home."""
    from warden.demo import run_demo

    result = run_demo(sessions=sessions, seed=seed, agent=agent, keep=keep, log=None if as_json else _say)
    if as_json:
        print_json({k: v for k, v in result.items() if k != "kept"}, figures=True)
    else:
        _render_demo(result)
    if result["aborted"]:
        raise WardenError(f"demo aborted: {result['aborted']}")


def receipt_line(r: dict) -> str:
    """One receipt for the demo's summary; figures as ``select`` prints them (an open or unknown
    interval end is ±∞ or —, never a crash)."""
    lo, hi = r["interval"]
    return (f"  rule {r['rule_id']} {r['verdict']:>12} → {r['state']:<9} saving {count_text(r['estimate'])}"
            f"/run [{count_text(lo)}, {count_text(hi)}] margin {count_text(r['margin'])} · {safe(r['body'], 70)}")


def _render_demo(result: dict) -> None:
    home = result["home"]
    console = wide_console()
    console.print(f"\n[bold]warden demo[/] — measured on the [bold]sim[/] backend (a simulated agent, "
                  f"not a model's result); home {safe(home)}")
    night = result["night"]
    console.print(f"{night['collected_runs']} session runs collected, {night['distilled_runs']} distilled, "
                  f"{night['candidates_added']} candidate rules")
    for report in night["agents"]:
        render_select_report(report)
    console.print("\n[bold]receipts[/] (`warden receipt ID` for the evidence):")
    for r in result["receipts"]:
        console.print(receipt_line(r))
    console.print(f"\n[bold]{safe(result['memory_path'])}[/]:")
    typer.echo(safe_block(result["memory"]), nl=False)  # as the agent reads it: never re-wrapped
    if result["kept"]:
        console.print(f"\nexplore it: WARDEN_HOME={safe(Path(home) / 'warden')} CLAUDE_CONFIG_DIR="
                      f"{safe(Path(home) / 'claude')} warden status", markup=False, soft_wrap=True)
    else:  # the paths above were printed from a home that is gone now
        console.print("\nthe demo home was temporary and is removed; `warden demo --keep DIR` keeps it to explore "
                      "(warden receipt, status, memory show)", markup=False, soft_wrap=True)
