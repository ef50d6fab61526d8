"""Commands of the collect stage: collect, sessions, status, hook, install-hooks, uninstall-hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from warden.cli.collect_command import run_collect
from warden.cli.common import (MAX_ROWS, console, keep_limit, print_json, safe,
                               print_uncut_table, settings, store)
from warden.errors import UsageError
from warden.sanitize import compact_count
from warden.ingest import collector
from warden.ingest.discovery import MAX_JOBS

# What only status or (un)install-hooks uses is imported there: `warden collect` starts without it.


def register(app: typer.Typer) -> None:
    app.command("collect")(collect)
    app.command("sessions")(sessions)
    app.command("status")(status)
    app.command("install-hooks")(install_hooks_cmd)
    app.command("uninstall-hooks")(uninstall_hooks_cmd)
    hook_app = typer.Typer(help="Claude Code hook entry points (always exit 0; log to $WARDEN_HOME/hooks.log).",
                           no_args_is_help=True)
    hook_app.command("stop", help="Stop: queue the session's transcript (and its subagents') for ingest.")(
        lambda: _hook("stop"))
    hook_app.command("subagent-stop", help="SubagentStop: queue the subagent's transcript, with its type.")(
        lambda: _hook("subagent-stop"))
    hook_app.command("session-start", help="SessionStart: queue the (resumed) session's transcript.")(
        lambda: _hook("session-start"))
    app.add_typer(hook_app, name="hook")


def collect(
    paths: Optional[list[Path]] = typer.Argument(None, help="Transcript files or directories "
                                                 "(default: $CLAUDE_CONFIG_DIR/projects)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    jobs: Optional[int] = typer.Option(None, "--jobs", min=1, max=MAX_JOBS,
                                       help="Parser processes (default: up to 4 for a large backlog, else 1)."),
) -> None:
    """Ingest Claude Code transcripts into the session ledger (incremental, idempotent)."""
    run_collect(paths, as_json, jobs)


def sessions(
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent (main or a subagent type)."),
    project: Optional[str] = typer.Option(None, "--project", help="Only runs whose project (cwd) contains this (any case)."),
    since: Optional[str] = typer.Option(None, "--since", help="ISO date/time, or an age like 7d, 12h."),
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_ROWS, help="At most this many rows (newest first)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """List session runs (a main session or one subagent transcript each)."""
    with store().session() as db:
        rows = collector.list_sessions(db, agent=agent, project=project, since=collector.parse_since(since),
                                     limit=limit + 1)
    rows = keep_limit(rows, limit, "run")
    if as_json:
        print_json(rows, figures=True)
        return
    headers = ("id", "run", "agent", "project", "started UTC", "in", "out", "cache w", "cache r", "cost $",
               "weighted", "tools", "rereads", "done")
    cells = [[str(r["id"]), safe(r["session_id"][:8] + (f":{r['agent_id'][:7]}" if r["agent_id"] else "")),
              safe(r["agent"], 14), safe(_tail(r["project"] or "", 18)),
              (r["started_at"] or "")[:16].replace("T", " "),
              compact_count(r["input_tokens"]), compact_count(r["output_tokens"]), compact_count(r["cache_creation_tokens"]),
              compact_count(r["cache_read_tokens"]), f"{r['cost_usd']:.2f}", compact_count(r["weighted_tokens"]),
              str(r["tool_calls"]), str(r["rereads"]),
              ("yes" if r["completed"] else "no") + ("*" if r["placeholder_output"] else "")] for r in rows]
    print_uncut_table(headers, cells, left={"run", "agent", "project", "started UTC", "done"},
                      shrink={"agent", "project"})
    if any(r["placeholder_output"] for r in rows):
        console.print("* output counts in that transcript are streaming placeholders; don't trust its output tokens.")


def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Per agent: sessions, tokens by type, cost, cost-weighted tokens, p75, re-read rate."""
    from warden.report.figures import learning_overview
    from warden.select.selector import known_agents

    with store().session() as db:
        data = collector.status(db)
        data["learning"] = learning_overview(db, known_agents(settings()))
    if as_json:
        print_json(data, figures=True)
        return
    headers = ("agent", "sessions", "runs", "in", "out", "cw 5m", "cw 1h", "cache r", "cost $", "weighted",
               "p75/run", "reread")
    cells = [[safe(a["agent"], 16), str(a["sessions"]), str(a["runs"]), compact_count(a["input_tokens"]),
              compact_count(a["output_tokens"]), compact_count(a["cache_write_5m_tokens"]), compact_count(a["cache_write_1h_tokens"]),
              compact_count(a["cache_read_tokens"]), f"{a['cost_usd']:.2f}", compact_count(a["weighted_tokens"]),
              compact_count(a["p75_weighted_tokens"]), f"{a['reread_rate']:.1%}"] for a in data["agents"]]
    print_uncut_table(headers, cells, left={"agent"}, shrink={"agent"})
    if data["agents"]:
        console.print("weighted = cost-weighted tokens (cost ÷ the model's input price); p75 per run, of all runs.")
        from warden.distill.trigger import MIN_PRIORS, WINDOW

        console.print(f"distill trigger (a new run is queued above the p75 of the agent's last {WINDOW} completed "
                      "runs): "
                      + "; ".join(f"{safe(a['agent'], 16)} " + (compact_count(a["trigger_p75_weighted_tokens"])
                                                               if a["trigger_p75_weighted_tokens"] is not None
                                                               else f"not yet ({a['trigger_runs']} of {MIN_PRIORS} runs)")
                                  for a in data["agents"]))
    if not data["agents"]:
        console.print("no sessions yet — run `warden collect`")
    render_learning(data["learning"])


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _hook(event: str) -> None:
    from warden.ingest.hooks import run_hook

    raise typer.Exit(run_hook(event))


def install_hooks_cmd(as_json: bool = typer.Option(False, "--json", help="Print what changed as JSON.")) -> None:
    """Add warden's Stop/SubagentStop/SessionStart hooks to $CLAUDE_CONFIG_DIR/settings.json."""
    from warden.ingest.hooks import install_hooks

    home = settings().claude_home
    collector.require_claude_home(home, "or run Claude Code once (it creates the directory)")
    result = install_hooks(home)
    _report_hooks(result, as_json)


def uninstall_hooks_cmd(as_json: bool = typer.Option(False, "--json", help="Print what changed as JSON.")) -> None:
    """Remove warden's hooks from $CLAUDE_CONFIG_DIR/settings.json (other hooks are kept)."""
    from warden.ingest.hooks import uninstall_hooks

    result = uninstall_hooks(settings().claude_home)
    _report_hooks(result, as_json)


def _report_hooks(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    if result["changed"]:
        console.print(f"{result['action']}: {safe(result['settings_path'])}"
                      + (f" (backup: {safe(result['backup_path'])})" if result.get("backup_path") else ""))
    else:
        console.print(f"nothing to do: {safe(result['settings_path'])} already {result['state']}")


def render_learning(overview: list[dict[str, Any]]) -> None:
    """The learning lines under the status table (report.figures.learning_overview)."""
    from warden.measured import measured_on

    for a in overview:
        curve = " → ".join(f"v{p['ruleset_version']} {p['mean_weighted_tokens']:,.0f} ({p['sessions']})"
                           for p in a["learning_curve"]) or "no real-work sessions"
        suite = a["golden_suite"]
        golden = (f"golden suite {suite['now_total']:,.0f} now vs {suite['run1_total']:,.0f} first runs"
                  + (f" ({suite['change']:+.1%})" if suite["change"] is not None else "")) if suite["tasks"] else \
            ("golden suite not benched on the current fixture yet" if suite.get("other_fixtures") else
             "golden suite not benched yet" if a["has_golden_suite"] else "no golden suite")
        where = measured_on(suite["backends"]) if suite["tasks"] else None
        golden += f" measured {safe(where)}" if where else ""
        if suite["tasks"] and suite.get("other_setups"):  # one model per total: name it, count the rest
            golden += (f" (model {safe(suite['model'])}; {len(suite['other_setups'])} other backend/model "
                       "setup(s) in --json)")
        rules = ", ".join(f"{k} {v}" for k, v in a["rules"].items() if v) or "no rules"
        spend = a["spend_this_week"]
        share = "" if spend["bench_share"] is None else f" ({spend['bench_share']:.1%} of this agent's real work)"
        spent_on = measured_on(spend["bench_backends"])
        # the golden suite's label already names the same backends: said once per line
        spent_on = f" spent {safe(spent_on)}" if spent_on and spent_on != where else ""
        console.print(f"[bold]{safe(a['agent'])}[/]: cost/session by ruleset {safe(curve)} · {golden} · {rules} · "
                      f"bench this week {spend['bench_weighted_tokens']:,.0f}{spent_on}{share}")


__all__ = ["register", "UsageError"]
