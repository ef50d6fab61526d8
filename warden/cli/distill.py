"""Commands of the distill stage: ``warden distill`` and ``warden rules`` (list, add, protect, …)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from warden.cli.common import MAX_ID, compile_outcome, console, print_json, print_measured, safe, settings, store, warn_if_drifted, wide_console
from warden.distill import rules_admin
from warden.errors import UsageError, WardenError
from warden.sanitize import counted, strip_controls

rules_app = typer.Typer(help="List the rule ledger, or manage rules by hand (add, protect, unprotect, scope, forget).",
                        invoke_without_command=True, no_args_is_help=False)


def _sanitised(value: object) -> object:
    """Transcript-derived strings made safe for a terminal/JSON consumer, recursively."""
    from warden.sanitize import strip_controls

    if isinstance(value, str):
        return strip_controls(value, keep_newlines=False)
    if isinstance(value, list):
        return [_sanitised(v) for v in value]
    if isinstance(value, dict):
        return {k: _sanitised(v) for k, v in value.items()}
    return value


def distill_command(
    paths: list[Path] = typer.Argument(None, help="Transcript files or directories (implies --dry-run)."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent's queued runs."),
    run: Optional[int] = typer.Option(None, "--run", min=1, max=MAX_ID,
                                      help="Distill this session run (its id in `warden sessions`; queued or not)."),
    distiller: Optional[str] = typer.Option(None, "--distiller", help="heuristic (offline) or anthropic."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show findings and proposals; write nothing."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, max=10**6,
                                        help="Distill at most this many queued runs, the newest (the rest stay queued)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Distill candidate rules from expensive session runs (the queue the collector fills)."""
    s = settings()
    chosen = distiller or s.distiller
    if limit is not None and (paths or run is not None):
        raise UsageError("--limit takes from the queue: not with transcript PATHS or --run")
    if paths:
        if agent or run is not None:
            raise UsageError("give transcript PATHS or --agent/--run, not both")
        from warden.distill.service import distill_dry_run  # the SDK loads only when distilling

        reports = distill_dry_run(list(paths), s, distiller=chosen)
        dry_run = True
        unreadable = [r for r in reports if r.error and not r.infra_error]
    else:
        from warden.distill.service import distill_runs

        from warden.distill.service import queued_count

        db = store(s)
        if agent is not None:  # a typo is an error, as in select and sessions, not an empty queue
            from warden.select.selector import require_rule_agent

            with db.session() as session:
                require_rule_agent(session, s, agent)
        reports = distill_runs(db, s, agent=agent, run_id=run, distiller=chosen, dry_run=dry_run, limit=limit)
        unreadable = []
        # a dry run dequeues nothing: what a real one would leave (a --run not in the queue takes none)
        left = queued_count(db, agent, besides=[r.run_id for r in reports] if dry_run else ())
    if as_json:
        print_json(_sanitised({"dry_run": dry_run, "distiller": chosen, "runs": [r.to_dict() for r in reports],
                               **({} if paths else {"left_queued": left})}))
    else:
        _render_reports(reports, dry_run)
        if not paths and left:
            console.print(f"{counted(left, 'queued run')} left for a later distill")
    if any(r.infra_error for r in reports):
        raise WardenError("the model distiller failed for at least one run (see above): nothing was admitted from "
                          "it, and it keeps its distill state (a queued run is tried again on a later night)")
    if unreadable:
        raise UsageError(f"{len(unreadable)} of {len(reports)} transcript(s) could not be distilled: "
                         f"{strip_controls(unreadable[0].error or '', keep_newlines=False)[:200]}")


def _run_kind(report: Any) -> str:
    """What ran: "main session", or "subagent <type>" (a bare type read like part of the path or
    of the run id, and "main" like a subagent named so)."""
    key = report.run_key or ""
    if key.endswith(":main") or (not key and report.agent == "main"):
        return "main session"
    from warden.ingest.collector import UNKNOWN_SUBAGENT

    return "subagent" + ("" if report.agent in (None, "", UNKNOWN_SUBAGENT) else f" {report.agent}")


def _render_reports(reports: list, dry_run: bool) -> None:  # noqa: ANN001 - service.RunReport
    if not reports:
        console.print("nothing to distill (no queued runs)")
        return
    for report in reports:
        head = f"run {report.run_id}" if report.run_id is not None else safe(report.source_path)
        cost = f", {report.weighted_tokens:,.0f} weighted tokens" if report.weighted_tokens else ""
        console.print(f"[bold]{head}[/bold] ({safe(_run_kind(report))}) — "
                      f"{counted(report.tool_calls, 'tool call')}{cost}")
        if report.error:
            console.print(f"  error: {safe(report.error)}")
        for finding in report.findings:
            calls = ", ".join(str(e.get("index", f"turn {e.get('turn')}")) for e in finding.evidence[:8])
            console.print(f"  {finding.waste_kind:<17} ×{finding.occurrences:<3} ~{finding.saving_tokens:>9,.0f} "
                          f"tokens  calls {calls}")
        for body in report.proposals:
            console.print(f"  proposed: {safe(body, 220)}")
        for rule in report.admitted:
            label = "would admit" if dry_run else f"admitted rule {rule['id']}"
            console.print(f"  {label}: {safe(rule['body'], 220)}")
        for refusal in report.refused:
            console.print(f"  refused: {safe(refusal.body, 120)} — {safe(refusal.reason)}")
        for why in report.dropped:
            console.print(f"  model reply dropped: {safe(why)}")


# ---------------------------------------------------------------- rules


@rules_app.callback(invoke_without_command=True)
def rules_list(
    ctx: typer.Context,
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent's rules."),
    status: Optional[str] = typer.Option(None, "--status", help="candidate|active|probation|protected|evicted"),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List rules (``warden rules --agent A``); subcommands manage them by hand."""
    if ctx.invoked_subcommand is not None:
        return
    s = settings()
    with store(s).session() as session:
        if agent is not None:
            from warden.select.selector import require_rule_agent

            require_rule_agent(session, s, agent)
        rows = rules_admin.list_rules(session, agent=agent, status=status)
        rents = rules_admin.memory_rent(session, agent=agent)
    if as_json:
        print_json({"rules": rows, "memory_rent_tokens": rents}, figures=True)
        return
    if not rows:
        console.print("no rules" + (f" for {safe(agent)}" if agent else ""))
        return
    table = Table("id", "agent", "state", "rent", "saving", "backend", "origin", "rule")
    for row in rows:
        scope = f"(when {row['scope']}) " if row["scope"] else ""
        state = row["state"] + (f" ({row['evict_reason']})" if row["evict_reason"] else "")
        saving = "" if row["measured_saving"] is None else f"{row['measured_saving']:,.0f}"
        table.add_row(str(row["id"]), safe(row["agent"]), state, str(row["rent_tokens"]), saving,
                      safe(row["measured_backend"] or ""), row["origin"], safe(scope + row["body"], 200))
    wide_console().print(table)
    print_measured(row["measured_backend"] for row in rows)
    for name, rent in rents.items():
        console.print(f"{safe(name)}: {rent} tokens of rent in memory (active, probation, protected)")


def _done(as_json: bool, payload: dict, message: str) -> None:
    if as_json:
        print_json(payload, figures=True)
    else:
        console.print(message)


def _change_message(session: Any, row: dict, done: str, unchanged: str) -> str:
    """What a by-hand change says; only one that changed the rule recompiles MEMORY.md."""
    return done + _recompile(session, row["agent"]) if row["changed"] else unchanged


def _recompile(session: Any, agent: str) -> str:
    """Changes by hand reach MEMORY.md at once, in the same transaction."""
    from warden.select.selector import recompile_memory

    result = recompile_memory(session, settings(), agent)
    warn_if_drifted(result)
    return f" — MEMORY.md v{result.version} {compile_outcome(result)}"


def _candidate_hint(agent: str) -> str:
    """A candidate waits for `warden select`, which needs the agent's golden suite: say so when it is missing."""
    from warden.select.selector import known_agents

    if agent in known_agents(settings()):
        return " (a candidate: `warden select` measures it)"
    return (f" (a candidate, but {safe(agent)} has no golden suite: `warden select` cannot measure it; "
            "add golden_tasks/<agent>/ or use --protected)")


@rules_app.command("add")
def rules_add(
    body: str = typer.Argument(..., help="One imperative sentence, 10–200 characters."),
    agent: str = typer.Option(..., "--agent", help="The agent the rule is for."),
    protected: bool = typer.Option(False, "--protected", help="Human-authored: in memory at once, never token-evicted."),
    scope: Optional[str] = typer.Option(None, "--scope", help="Only when … (e.g. 'editing SQL migrations')."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Add a rule by hand: a candidate to be measured, or --protected."""
    from warden.select.selector import require_rule_agent

    with store().session() as session:
        require_rule_agent(session, settings(), agent)  # a typo must not start an agent of its own
        row = rules_admin.add_rule(session, agent, body, protected=protected, scope=scope)
        hint = _recompile(session, agent) if protected else _candidate_hint(agent)
    _done(as_json, row, f"added rule {row['id']} for {safe(agent)} as {row['state']}, "
                        f"rent {row['rent_tokens']} tokens{hint}")


@rules_app.command("protect")
def rules_protect(rule_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID), as_json: bool = typer.Option(False, "--json")) -> None:
    """Protect a rule: kept in memory, counted for rent, never evicted for tokens."""
    with store().session() as session:
        row = rules_admin.protect(session, rule_id)
        message = _change_message(session, row, f"rule {rule_id} is protected",
                                  f"rule {rule_id} is already protected: unchanged")
    _done(as_json, row, message)


@rules_app.command("unprotect")
def rules_unprotect(rule_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID), as_json: bool = typer.Option(False, "--json")) -> None:
    """Unprotect a rule: back to where its latest measured decision left it (active, probation or
    evicted); never measured → a candidate."""
    with store().session() as session:
        row = rules_admin.unprotect(session, rule_id)
        message = _change_message(session, row, f"rule {rule_id} is now {row['state']}",
                                  f"rule {rule_id} is {row['state']}, not protected: unchanged")
    _done(as_json, row, message)


@rules_app.command("scope")
def rules_scope(
    rule_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID),
    scope: Optional[str] = typer.Argument(None, help="When the rule applies; omit with --clear."),
    clear: bool = typer.Option(False, "--clear", help="Remove the scope."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Set (or --clear) the scope a rule applies in: rendered as "(when SCOPE) …"."""
    if clear == (scope is not None):
        raise UsageError("give a SCOPE or --clear (not both)")
    with store().session() as session:
        row = rules_admin.set_scope(session, rule_id, None if clear else scope)
        hint = _recompile(session, row["agent"])
    what = f"scoped to '{safe(row['scope'])}'" if row["scope"] else "unscoped"
    _done(as_json, row, f"rule {rule_id} is {what}, rent {row['rent_tokens']} tokens"
                        f"{hint}")


@rules_app.command("forget")
def rules_forget(rule_id: int = typer.Argument(..., metavar="ID", min=1, max=MAX_ID), as_json: bool = typer.Option(False, "--json")) -> None:
    """Evict a rule by hand (reason: manual). It stays in the ledger as negative data."""
    with store().session() as session:
        row = rules_admin.forget(session, rule_id)
        message = _change_message(session, row, f"rule {rule_id} evicted (manual)",
                                  f"rule {rule_id} is already forgotten: unchanged")
    _done(as_json, row, message)


def register(app: typer.Typer) -> None:
    app.command("distill")(distill_command)
    app.add_typer(rules_app, name="rules")
