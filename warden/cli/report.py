"""Commands for people who look: cost projection and the HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from warden.cli.common import (agent_names, bounded_float_option, console, print_json, print_measured, refuse_output_path, safe, settings,
                               store, wide_console)
from warden.sanitize import count_text


def register(app: typer.Typer) -> None:
    app.command("cost")(cost_command)
    app.command("report")(report_command)


def cost_command(
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent (default: every agent)."),
    project: bool = typer.Option(False, "--project", help="Scale over a horizon, bench spend included."),
    weeks: int = typer.Option(12, "--weeks", min=1, max=520, help="Horizon of the projection (with --project)."),
    sessions_per_week: float = bounded_float_option(50.0, "--sessions-per-week", 0.0, 1_000_000.0,
                                                    "Sessions a week to scale by (with --project)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Price each active rule from its receipts: saving per session, rent, bench spend, break-even."""
    from warden.ingest.pricing import PriceTable
    from warden.report.figures import agents_in_store, bench_tokens_per_week, project as project_cost, rule_costs

    from warden.select.selector import require_rule_agent

    s = settings()
    with store(s).session() as session:
        agents = [require_rule_agent(session, s, agent, path_safe=False)] if agent else agents_in_store(session)
        results = []
        for name in agents:
            cost = rule_costs(session, name, PriceTable(s.pricing))
            if project:
                cost["projection"] = project_cost(cost, weeks, sessions_per_week, bench_tokens_per_week(session, name))
            results.append(cost)
    if as_json:
        print_json(results, figures=True)
        return
    if not results:
        console.print("nothing to price: no agent has rules, bench runs or sessions yet")
    for cost in results:
        # savings on real work are at its runs' dollars per weighted token; before any, at the
        # input price of the model that measured each (price_basis says which)
        console.print(f"[bold]{safe(cost['agent'])}[/] · {safe(cost['price_basis'])}"
                      f" · basis: {safe(cost['basis'])} ({count_text(cost['real_work_tokens_per_session'])} weighted tokens/session)")
        table = Table(show_edge=False, pad_edge=False)
        for col in ("rule", "state", "saving/session", "$/session", "measured on", "rent", "bench spent", "break-even", "body"):
            table.add_column(col, justify="left" if col in ("state", "measured on", "body") else "right")
        for r in cost["rules"]:
            usd = r["saving_usd_per_session"]
            table.add_row(str(r["rule_id"]), r["state"], count_text(r["saving_tokens_per_session"]),
                          "—" if usd is None else f"{usd:.4f}", safe(r["measured_on"] or "—"), str(r["rent_tokens"]),
                          count_text(r["bench_tokens_spent"]), count_text(r["break_even_sessions"]), safe(r["body"], 200))
        wide_console().print(table)
        print_measured(r["backend"] for r in cost["rules"])
        if "projection" in cost and not cost["real_work_tokens_per_session"]:
            console.print("  no projection: no real-work sessions collected yet to scale (run `warden collect`)")
        elif "projection" in cost:
            p = cost["projection"]
            console.print(f"  {weeks} weeks × {sessions_per_week:g} sessions: without warden {count_text(p['without_warden_tokens'])}"
                          f" (${p['without_warden_usd']:.2f}), with warden {count_text(p['with_warden_tokens'])} "
                          f"(${p['with_warden_usd']:.2f}, bench {count_text(p['bench_tokens'])} included)")
        console.print("  dollars are advisory; every verdict is in cost-weighted tokens")


def report_command(html_out: str = typer.Option("warden-report.html", "--html",
                                                 help="Write the HTML report here (default: warden-report.html in "
                                                      "the current directory)."),
                   agent: Optional[list[str]] = typer.Option(None, "--agent", help="Only these agents (repeat, or comma-separated; default: every agent).")) -> None:
    """One self-contained HTML file: learning curves, savings vs margins, bench spend, every receipt."""
    from warden.ingest.pricing import PriceTable
    from warden.report.html import render_report
    from warden.report.service import report_data
    from warden.files import write_atomic

    from warden.select.selector import require_rule_agent

    # The directory may be reached through a link; the file itself is never written through one
    # (a ./warden-report.html symlink shipped in a cloned repository).
    given = Path(html_out).expanduser().absolute()
    target = given.parent.resolve() / given.name
    refuse_output_path("--html", html_out, target, "HTML file")  # as typed: "reports/" names a directory
    s = settings()
    with store(s).session() as session:
        # the agents `warden cost --agent` knows (a golden suite, an agent file, rules or sessions:
        # `main` too), each checked as cost checks it
        agent = [require_rule_agent(session, s, a, path_safe=False) for a in agent_names(agent) or []]
        data = report_data(session, PriceTable(s.pricing), agent or None)
    page = render_report(data).encode("utf-8")
    write_atomic(target, page, target.parent)
    console.print(f"wrote {safe(target)} ({len(page):,} bytes, {len(data['agents'])} agent(s))")
