"""Commands of shared rule ledgers: share, verify-ledger, adopt."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from warden.cli.common import console, print_json, refuse_output_path, safe, settings, store
from warden.sanitize import strip_controls


def register(app: typer.Typer) -> None:
    app.command("share")(share_command)
    app.command("verify-ledger")(verify_command)
    app.command("adopt")(adopt_command)


def share_command(agent: str = typer.Option(..., "--agent", help="The agent whose rules to share."),
                  out: Optional[str] = typer.Option(None, "--out", help="Default: ledgers/<agent>.json of the directory configured (WARDEN_LEDGERS_DIR, ledgers_dir, WARDEN_REPO's ledgers/), else of the git repository here, else of warden's checkout."),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """Write the agent's active and protected rules with their evidence as a canonical ledger."""
    from warden.ledger.service import share

    out_path = None if out is None else Path(out)
    if out_path is not None:  # the path as given, links unresolved: share refuses to write through any
        refuse_output_path("--out", out, out_path.expanduser().absolute(), "ledger file")
    s = settings()
    with store(s).session() as session:
        shared = share(session, s, agent, out_path.expanduser() if out_path is not None else None)
    attributes = str(shared.gitattributes) if shared.gitattributes else None
    if as_json:
        print_json({"path": str(shared.path), "rules": shared.rules, "gitattributes": attributes})
    else:
        console.print(f"wrote {shared.rules} rule(s) to {safe(shared.path)}")
        if attributes:
            console.print(f"wrote {safe(attributes)} (`*.json -text`: no checkout turns a ledger's line endings "
                          "into CRLF, which the gate would fail); commit it with the ledger")


def verify_command(paths: Optional[list[Path]] = typer.Argument(
                       None, help="Default: ledgers/*.json of the directory configured (WARDEN_LEDGERS_DIR, ledgers_dir, "
                                "WARDEN_REPO's ledgers/), else of the git repository here, else of warden's checkout; any other file under ledgers/ but a README.md and a .gitattributes "
                                "(`*.json -text`) fails."),
                   as_json: bool = typer.Option(False, "--json")) -> None:
    """Offline CI gate: schema, hashes, rule bodies, duplicates, evidence, size. Exit 0 only if all pass."""
    from warden.ledger.service import ledgers_dir_here
    from warden.ledger.verify import gate_files, verify_path

    files = list(paths or [])
    results: dict[str, list[str]] = {}
    if not files:
        root = ledgers_dir_here(settings())
        files, strays = gate_files(root)
        for stray in strays:
            results.setdefault(stray.file, []).append(str(stray))
        if not files and not strays:  # a pull request that removes the last ledger passes the gate
            if as_json:
                print_json({"ok": True, "files": {}})
            else:
                console.print(f"no ledgers in {safe(str(root))}: nothing to verify")
            return
    results.update({str(f): [str(p) for p in verify_path(f, gated=not paths)] for f in files})
    if not paths:
        results = dict(sorted(results.items()))  # the directory's files and strays in one listing
    if as_json:
        print_json({"ok": not any(results.values()), "files": results})
    else:
        # Plain lines, never wrapped: CI logs and reviewers grep them.
        for name, problems in results.items():
            for problem in problems:
                typer.echo(f"FAIL {problem}")  # Problem.__str__ strips control characters
            if not problems:
                typer.echo(f"ok   {strip_controls(name, keep_newlines=False)}")
    if any(results.values()):
        raise typer.Exit(1)


def adopt_command(path: Path = typer.Argument(..., help="A ledger file (verified first)."),
                  agent: Optional[str] = typer.Option(None, "--agent", help="Import for this agent instead."),
                  dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be imported; import nothing."),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """Import a ledger's new rules as local candidates; their foreign evidence is shown, never trusted."""
    from warden.ledger.service import adopt
    from warden.select.selector import known_agents

    config = settings()
    report = adopt(store(config), path, agent=agent, dry_run=dry_run, suites=known_agents(config),
                   max_candidates=config.adopt_max_candidates)
    if as_json:
        print_json(report.to_json())
        return
    verb = "would import" if dry_run else "imported"
    console.print(f"{verb} {len(report.imported)} rule(s) as candidates for {safe(report.agent)} "
                  "(measured locally by the next `warden select` before any can reach MEMORY.md)")
    # Whole, as the agent would read it: "(when SCOPE) BODY". This is the human check on foreign
    # text (a body's last words may be the instruction), and the schema caps both fields.
    def scoped(item: dict[str, object]) -> str:
        scope = f"(when {safe(item['scope'])}) " if item.get("scope") else ""
        return scope + safe(item["body"])

    for item in report.imported:
        console.print(f"  + {scoped(item)}" + (f"  (rule {item['rule_id']})" if "rule_id" in item else ""))
    for item in report.skipped:
        console.print(f"  skipped: {scoped(item)} — {safe(item['reason'])}")
