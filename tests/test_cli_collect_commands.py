"""The collect-stage commands as a user runs them: collect, sessions, status — and bad input
giving one clear line and a non-zero exit with nothing stored lost."""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest

from warden.cli.app import main
from warden.errors import UsageError

REQUIRED = {"session_id", "agent_id", "agent", "project", "models", "input_tokens", "output_tokens",
            "cache_creation_tokens", "cache_read_tokens", "cost_usd", "weighted_tokens", "tool_calls", "rereads",
            "completed", "started_at", "ended_at"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_collect_sessions_status(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "collect", str(corpus), "--json")
    assert code == 0 and json.loads(out)["files_ingested"] == 22
    code, out, _ = run(capsys, "sessions", "--json", "--limit", "100")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 21
    assert all(REQUIRED <= set(r) for r in rows)
    main_rows = [r for r in rows if r["agent_id"] is None]
    assert len(main_rows) == 15 and all(r["agent"] == "main" for r in main_rows)
    code, out, _ = run(capsys, "sessions", "--json", "--agent", "Explore")
    assert {r["agent_id"] for r in json.loads(out)} == {"a2271d1", "c8d9b115"}
    code, out, _ = run(capsys, "sessions", "--json", "--project", "deep-manifest", "--since", "2025-11-01")
    assert {r["session_id"][:8] for r in json.loads(out)} == {"a7da6a22"}
    code, out, _ = run(capsys, "status", "--json")
    status = json.loads(out)
    by_agent = {a["agent"]: a for a in status["agents"]}
    assert by_agent["main"]["runs"] == 15 and status["totals"]["sessions"] == 17
    assert status["totals"]["input_tokens"] == sum(r["input_tokens"] for r in rows)
    assert 0 < by_agent["main"]["reread_rate"] < 1
    code, out, _ = run(capsys, "status")
    assert code == 0 and "main" in out and "p75" in out
    code, out, _ = run(capsys, "sessions")
    assert code == 0 and "a7da6a22" in out


@pytest.mark.parametrize("argv,message", [
    (("sessions", "--agent", "nobody"), "unknown agent 'nobody'"),
    (("sessions", "--since", "last tuesday"), "--since"),
    (("collect", "/no/such/dir"), "no such file or directory"),
    (("cost", "--project", "--sessions-per-week", "inf", "--json"), "--sessions-per-week"),  # JSON has no Infinity
])
def test_bad_input_is_one_line_and_non_zero(argv: tuple[str, ...], message: str, corpus: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    small = next(corpus.rglob("agent-c8d9b115.jsonl"))
    assert run(capsys, "collect", str(small), "--json")[0] == 0
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == ""
    assert err.startswith("warden: ") and message in err and err.count("\n") == 1


def test_unreadable_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        code, _, err = run(capsys, "collect", str(locked))
    finally:
        locked.chmod(0o755)
    assert code == 2 and "permission denied" in err and err.count("\n") == 1


def test_bad_database_url(corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WARDEN_DATABASE_URL", "nosuchdb://user:secret@host/x")
    code, out, err = run(capsys, "collect", str(corpus))
    assert code != 0 and out == "" and err.count("\n") == 1
    assert "bad database URL" in err and "secret" not in err


@pytest.mark.parametrize("url, secret", [
    ("postgresql+psycopg://alice@127.0.0.1:1/wdb?password=S3cretPW3", "S3cretPW3"),
    ("postgresql+psycopg:///wdb?user=alice&password=S3cretPW4&host=127.0.0.1&port=1", "S3cretPW4"),
    ("postgresql+psycopg://alice:S3c@retPW2@127.0.0.1:1/wdb", "retPW2"),
    ("postgresql+psycopg://alice:S3cretPW5@127.0.0.1:1/wdb", "S3cretPW5"),
])
def test_a_database_password_never_reaches_a_message(url: str, secret: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Not in the URL shown (user:***@, password=***), and not in what the driver echoes back of
    a raw password holding '@'."""
    from warden.store.db import redact_url

    assert secret not in redact_url(url)
    monkeypatch.setenv("WARDEN_DATABASE_URL", url)
    for command in (["status"], ["db", "current"], ["db", "check", "--json"]):
        code, out, err = run(capsys, *command)
        assert code != 0 and secret not in out + err, (command, out, err)


def test_corrupt_database_file_is_reported_and_left_as_is(corpus: Path, warden_home: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = warden_home / "warden.db"
    db.write_bytes(b"this is not a database" * 100)
    before = db.read_bytes()
    for argv in (("collect", str(next(corpus.rglob("agent-c8d9b115.jsonl")))), ("sessions",), ("status", "--json")):
        code, out, err = run(capsys, *argv)
        assert code != 0 and out == "" and err.startswith("warden: ") and err.count("\n") == 1, argv
    assert db.read_bytes() == before


def test_collect_keeps_what_is_stored_when_a_later_run_fails(corpus: Path, tmp_path: Path, warden_home: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "c"
    shutil.copytree(corpus, tree)
    assert run(capsys, "collect", str(tree), "--json")[0] == 0
    _, before, _ = run(capsys, "sessions", "--json", "--limit", "100")
    code, _, err = run(capsys, "collect", str(tree), str(tmp_path / "missing"))
    assert code == 2 and "missing" in err
    _, after, _ = run(capsys, "sessions", "--json", "--limit", "100")
    assert json.loads(after) == json.loads(before)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_name_that_is_not_utf8_is_skipped_not_fatal(jobs: str, corpus: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "c"
    shutil.copytree(corpus, tree)
    small = next(tree.rglob("agent-c8d9b115.jsonl"))
    bad = os.fsdecode(os.fsencode(str(small.parent)) + b"/zz\xff.jsonl")
    shutil.copyfile(small, bad)
    code, out, err = run(capsys, "collect", str(tree), "--jobs", jobs, "--json")
    summary = json.loads(out)
    assert code == 0 and summary["files_ingested"] == 22 and summary["files_skipped"] == 1
    assert any("not valid UTF-8" in why and "\\udcff" in why for why in summary["skipped"])


def test_control_characters_in_a_bad_path_do_not_reach_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "collect", "/no/such\x1b]0;pwned\x07dir\nsecond line")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "\x1b" not in err and "\x07" not in err and "pwned" in err


def test_since_further_back_than_any_date_lists_everything() -> None:
    from datetime import datetime

    from warden.ingest.collector import parse_since

    assert parse_since("9999999999d") == datetime.min
    assert parse_since("9" * 5000 + "d") == datetime.min
    assert parse_since("0001-01-01T00:00:00+01:00") == datetime.min
    assert parse_since("9999-12-31T23:59:59-01:00") == datetime.max
    with pytest.raises(UsageError, match="expected an ISO date"):
        parse_since("\u00b2d")  # a superscript two is a digit to str.isdigit, not to int()


def test_version(capsys) -> None:  # type: ignore[no-untyped-def]
    from warden import __version__
    from warden.cli.app import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"warden {__version__}"


def test_a_database_locked_past_the_busy_timeout_is_one_line(corpus: Path, warden_home: Path, monkeypatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    from warden.store import db

    assert run(capsys, "status", "--json")[0] == 0  # the database exists, migrated
    monkeypatch.setattr(db, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(warden_home / "warden.db")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, out, err = run(capsys, "collect", str(next(corpus.rglob("agent-c8d9b115.jsonl"))))
    finally:
        holder.rollback()
        holder.close()
    assert code == 1 and err.count("\n") == 1 and "database is locked" in err and "internal error" not in err
    assert run(capsys, "collect", str(next(corpus.rglob("agent-c8d9b115.jsonl"))))[0] == 0


def test_a_subagent_collected_before_its_parent_gets_its_type_from_the_parent(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sub = next(corpus.rglob("agent-c8d9b115.jsonl"))
    parent = next(sub.parent.glob("a7da6a22-*.jsonl"))
    assert run(capsys, "collect", str(sub))[0] == 0
    assert run(capsys, "collect", str(parent))[0] == 0
    rows = json.loads(run(capsys, "sessions", "--json")[1])
    assert {(r["agent_id"], r["agent"]) for r in rows} == {("c8d9b115", "Explore"), (None, "main")}


def test_json_output_escapes_bidi_and_zero_width_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from warden.cli.common import print_json

    print_json({"cwd": "/w/a\u202eb\u200bc", "name": "caf\u00e9"})
    out = capsys.readouterr().out
    assert "\u202e" not in out and "\u200b" not in out and "caf\u00e9" in out
    assert json.loads(out) == {"cwd": "/w/a\u202eb\u200bc", "name": "caf\u00e9"}  # the same data


@pytest.mark.parametrize("command", [(), ("select",), ("rules", "add"), ("db", "upgrade"), ("checkpoints", "prune")])
def test_help_shows_no_value_type_after_a_flag(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out


def test_sessions_says_when_the_limit_cut_rows_and_main_is_always_an_agent(corpus: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--agent", "main", "--json"]) == 0  # an empty ledger: no rows, no error
    assert json.loads(capsys.readouterr().out) == []
    assert main(["collect", str(corpus)]) == 0
    capsys.readouterr()
    assert main(["sessions", "--json", "--limit", "3"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 3 and "showing the newest 3 runs; there are more" in err
    assert main(["sessions", "--json", "--limit", "1000"]) == 0
    assert "there are more" not in capsys.readouterr().err


def test_status_counts_the_transcripts_still_on_disk(corpus: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(corpus, tree)
    assert main(["collect", str(tree)]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)["transcripts"]
    next(tree.rglob("*.jsonl")).unlink()
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["transcripts"] == before - 1


def test_a_terminal_that_is_not_utf8_gets_readable_output_not_an_internal_error(corpus: Path, tmp_path: Path) -> None:
    """LC_ALL=en_US.ISO-8859-1 (here: PYTHONIOENCODING): tables show '?' for what the encoding
    lacks, JSON stays whole through \\u escapes."""
    import subprocess
    import sys

    warden = str(Path(sys.executable).parent / "warden")
    env = {**os.environ, "PYTHONIOENCODING": "latin-1", "WARDEN_HOME": str(tmp_path / "home")}
    assert subprocess.run([warden, "collect", str(corpus)], env=env, capture_output=True).returncode == 0
    table = subprocess.run([warden, "sessions"], env=env, capture_output=True)
    assert table.returncode == 0 and b"internal error" not in table.stderr
    as_json = subprocess.run([warden, "sessions", "--json", "--limit", "1000"], env=env, capture_output=True)
    assert as_json.returncode == 0 and as_json.stdout.isascii()
    assert len(json.loads(as_json.stdout)) >= 20


def test_status_figures_do_not_depend_on_the_order_rows_come_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Float sums in row order differ in the last place (and then in the shown decimal) between
    engines and after updates; status sums exactly, so the same runs give the same figures."""
    import itertools

    from warden.config import load_settings
    from warden.ingest.collector import status
    from warden.store.db import open_store
    from warden.store.models import SessionRun

    weights = [385.87, 350.91, 585.07]  # summed in some orders: 1321.8 after rounding, in others 1321.9
    shown = set()
    for n, order in enumerate(itertools.permutations(weights)):
        monkeypatch.setenv("WARDEN_HOME", str(tmp_path / f"home{n}"))
        store = open_store(load_settings())
        with store.session() as s:
            s.add_all(SessionRun(run_key=f"s{i}:main", session_id=f"s{i}", agent="main", weighted_tokens=w, cost_usd=w / 1e6)
                      for i, w in enumerate(order))
            s.commit()
            totals = status(s)["totals"]
        store.engine.dispose()
        shown.add((totals["weighted_tokens"], totals["cost_usd"]))
    assert shown == {(1321.9, 0.001322)}


def test_a_database_holding_tables_named_like_wardens_is_refused_untouched(
        warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first migration must not run over someone else's "rules" (or a cut-short first run);
    other tables may stay beside warden's (an extension's, such as PostGIS's spatial_ref_sys)."""
    import sqlite3

    db = warden_home / "warden.db"
    warden_home.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db)
    con.execute("create table rules (id integer)")
    con.execute("create table orders (id integer)")
    con.commit()
    con.close()
    for command in (["status"], ["db", "upgrade"]):  # `db upgrade` as well: never the raw SQL error
        code, out, err = run(capsys, *command)
        assert code == 1 and out == "" and err.count("\n") == 1, (command, err)
        assert "already holds tables named like warden's (rules) but no warden revision" in err
    con = sqlite3.connect(db)
    assert sorted(r[0] for r in con.execute("select name from sqlite_master where type = 'table'")) == ["orders", "rules"]
    con.execute("drop table rules")
    con.commit()
    con.close()
    assert run(capsys, "status")[0] == 0  # another program's table beside warden's is fine
    assert run(capsys, "db", "check")[0] == 0


def test_db_check_ignores_tables_beside_wardens_and_names_a_missing_one(
        warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    assert run(capsys, "status")[0] == 0
    con = sqlite3.connect(warden_home / "warden.db")
    con.execute("create table notes (id integer)")  # another program's, added later: not a drift
    con.commit()
    assert run(capsys, "db", "check")[0] == 0
    code, out, _ = run(capsys, "db", "check", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    con.execute("drop table checkpoint_terms")
    con.commit()
    con.close()
    code, _, err = run(capsys, "db", "check")
    assert code != 0 and err.count("\n") == 1 and "first: add_table checkpoint_terms" in err
    code, out, err = run(capsys, "db", "check", "--json")  # a script gets the verdict as JSON too
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and "first: add_table checkpoint_terms" in report["problem"]
    assert err.strip() == f"warden: {report['problem']}"


def test_db_check_on_a_database_holding_foreign_tables_says_so_not_upgrade(
        warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    warden_home.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(warden_home / "warden.db")
    con.execute("create table rules (id integer)")  # another program's database
    con.commit()
    con.close()
    code, _, err = run(capsys, "db", "check")
    assert code == 1 and "already holds tables named like warden's (rules)" in err and "db upgrade" not in err
    code, out, _ = run(capsys, "db", "check", "--json")
    assert code == 1 and "already holds tables named like warden's" in json.loads(out)["problem"]


def test_db_check_json_on_a_database_that_is_not_there_is_a_json_verdict(
        warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "db", "check", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["current"] is None and "no database at" in report["problem"]
    assert err.strip() == f"warden: {report['problem']}"


def test_db_upgrade_base_says_warden_does_not_downgrade(warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "db", "upgrade", "base")
    assert code == 2 and "does not downgrade" in err


def test_a_missing_table_is_one_line_naming_it(warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    assert run(capsys, "status")[0] == 0
    con = sqlite3.connect(warden_home / "warden.db")
    con.execute("pragma foreign_keys = off")
    con.execute("drop table checkpoint_terms")
    con.execute("drop table checkpoints")
    con.commit()
    con.close()
    code, out, err = run(capsys, "checkpoints", "list")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "no such table: checkpoints" in err and "warden's tables are missing" in err


def test_a_postgres_url_without_its_driver_says_how_to_write_it(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WARDEN_DATABASE_URL", "postgres://user:secret@host/db")
    code, out, err = run(capsys, "status")
    assert code == 1 and "postgresql+psycopg://" in err and "secret" not in err and err.count("\n") == 1


@pytest.mark.parametrize("argv,named", [
    (("collect", ""), None), (("select", "--all", "--agent", ""), "--agent"), (("sessions", "--agent="), "--agent"),
    (("db", "upgrade", ""), None), (("sessions", "--since", ""), "--since"),
    (("sessions", "--since", " "), "--since"), (("sessions", "--since= \t"), "--since"), (("collect", "  "), None),
])
def test_an_empty_argument_is_a_usage_error_not_a_default(argv: tuple[str, ...], named: str | None,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """An unset shell variable must not turn into 'the current directory' or 'every agent'."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert (f"empty value for {named}" if named else "an argument is empty") in err


@pytest.mark.parametrize("argv,named", [
    (("sim", "truth", "--agent", "backend", "--rules", ""), "--rules"), (("sim", "truth", "--rules="), "--rules"),
    (("plan", "--agent", ""), "--agent"), (("bench", "--agent="), "--agent"),
])
def test_an_empty_required_option_is_not_advised_to_be_left_out(argv: tuple[str, ...], named: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Leaving out an option the command requires is no way out: the advice is one correct line."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err == f"warden: empty value for {named}: give one (the option is required)\n"


def test_empty_values_hook_scripts_pass_are_still_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """README's recover call passes "$SESSION" and "$PWD", which a just-started session may not have."""
    code, out, err = run(capsys, "recover", "--prompt", "csv exporter", "--cwd", "", "--session-id", "")
    assert code == 0 and err == "" and out.startswith("warden: nothing")


def test_hook_help_is_shown_not_taken_for_a_payload(warden_home: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([str(Path(sys.executable).parent / "warden"), "hook", "stop", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Usage: warden hook stop" in proc.stdout
    # "-h" is no option of the CLI: the hook runs (and exits 0) as Claude Code would have it
    proc = subprocess.run([str(Path(sys.executable).parent / "warden"), "hook", "stop", "-h"], input="{}",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert not (warden_home / "hooks.log").exists() or "not JSON" not in (warden_home / "hooks.log").read_text()


def test_every_option_of_every_command_has_help_and_a_plain_metavar(capsys: pytest.CaptureFixture[str]) -> None:
    import typer.main

    from warden.cli.app import _without_flag_types, app

    missing: list[str] = []

    def walk(command, path: list[str]) -> None:  # type: ignore[no-untyped-def]
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help" and not param.help:
                missing.append(f"{' '.join(path)} {param.opts[0]}")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(_without_flag_types(typer.main.get_command(app)), ["warden"])
    assert missing == []
    for argv in (["sessions", "--help"], ["nightly", "--help"], ["checkpoints", "list", "--help"]):
        assert run(capsys, *argv)[0] == 0
        shown = capsys.readouterr().out + run(capsys, *argv)[1]
        assert "AGENT" in shown or "LIMIT" in shown
        assert "<str>" not in shown and "<int" not in shown and "list[" not in shown


def test_each_command_is_registered_by_the_module_the_cli_imports_for_it() -> None:
    """`warden <command>` imports only COMMAND_MODULE[command]: that module registers the command,
    and the table names every command of the whole CLI, in the order --help lists them."""
    import typer.main

    from warden.cli.app import COMMAND_MODULE, COMMAND_MODULES, app, app_of

    for module in COMMAND_MODULES:
        registered = list(typer.main.get_command(app_of((module,))).commands)
        assert registered == [c for c, m in COMMAND_MODULE.items() if m == module], module
    whole = list(typer.main.get_command(app).commands)
    assert sorted(whole) == sorted(COMMAND_MODULE)
    assert whole == list(typer.main.get_command(app_of(tuple(reversed(COMMAND_MODULES)))).commands)


def test_a_command_imports_no_other_command_module() -> None:
    import subprocess
    import sys

    from warden.cli.app import COMMAND_MODULES

    script = ("import sys; from warden.cli.app import main; main(['collect', '--help']); "
              "print(sorted(m for m in sys.modules if m.startswith('warden.cli.')))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(ast.literal_eval(proc.stdout.splitlines()[-1]))
    assert {f"warden.cli.{name}" for name in COMMAND_MODULES} & loaded == {"warden.cli.collect"}
    assert {"warden.cli.app", "warden.cli.common"} <= loaded


def _migrated_then(warden_home: Path, capsys: pytest.CaptureFixture[str], sql: str) -> None:
    """A database a first command migrated, then changed behind warden's back by ``sql``."""
    import sqlite3

    assert run(capsys, "status")[0] == 0
    con = sqlite3.connect(warden_home / "warden.db")
    con.execute(sql)
    con.commit()
    con.close()


def test_a_missing_column_is_one_line_pointing_at_db_check(warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _migrated_then(warden_home, capsys, "alter table checkpoints drop column quality")
    code, out, err = run(capsys, "checkpoints", "list")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "no such column" in err and "warden db check" in err and "tables are missing" not in err


def test_db_check_json_names_a_newer_wardens_revision(warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _migrated_then(warden_home, capsys, "update alembic_version set version_num = '0099'")
    code, out, _ = run(capsys, "db", "check", "--json")
    report = json.loads(out)
    assert code == 1 and report["current"] == "0099" and "newer warden" in report["problem"]


def test_a_postgres_server_that_never_answers_fails_in_seconds_not_forever(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A port that accepts connections and never speaks (a hung server, a proxy) must not hold a
    cron nightly for ever: connecting has a deadline unless the URL sets its own."""
    import socket
    import time

    from warden.store import db

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    monkeypatch.setattr(db, "POSTGRES_CONNECT_TIMEOUT_S", 1)
    monkeypatch.setenv("WARDEN_DATABASE_URL", f"postgresql+psycopg://postgres@127.0.0.1:{port}/x")
    try:
        started = time.monotonic()
        code, out, err = run(capsys, "status")
        assert code == 1 and err.count("\n") == 1 and "timeout" in err.lower(), err
        assert time.monotonic() - started < 15
    finally:
        listener.close()


def test_a_claude_config_dir_that_does_not_exist_is_an_error_not_zero_transcripts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in CLAUDE_CONFIG_DIR would make a cron nightly learn nothing, for ever, silently."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "typo-claude"))
    code, out, err = run(capsys, "collect")
    assert code == 2 and "typo-claude" in err and "CLAUDE_CONFIG_DIR" in err and err.count("\n") == 1
    (tmp_path / "typo-claude").write_text("")
    assert run(capsys, "collect")[0] == 2
    (tmp_path / "typo-claude").unlink()
    (tmp_path / "typo-claude").mkdir()  # Claude Code installed, no session yet: nothing to collect
    code, out, err = run(capsys, "collect")
    assert code == 0 and "0 transcript(s)" in out
    (tmp_path / "typo-claude" / "projects").write_text("")
    code, out, err = run(capsys, "collect")
    assert code == 2 and "projects" in err


def test_what_the_database_driver_logs_is_not_printed_over_warden_s_own_output(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two collects at once on PostgreSQL: the loser's driver logged "error ignored terminating
    <psycopg.Pipeline …>: pipeline aborted" on stderr, for a conflict warden recovers from."""
    import subprocess
    import sys

    script = ("import logging; from warden.cli.app import main; code = main(['status']); "
              "logging.getLogger('psycopg').error('error ignored terminating <psycopg.Pipeline>: pipeline aborted'); "
              "raise SystemExit(code)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "pipeline aborted" not in proc.stderr, proc.stderr


def test_tables_on_a_narrow_terminal_cut_free_text_never_numbers_or_run_ids() -> None:
    """At 80 columns (and always under TERM=dumb) rich cut every column alike ("1…" for 12.3k, the
    run column gone), and when min widths could not fit it dropped whole columns (the "in" one)."""
    import io

    from rich.console import Console

    from warden.cli.common import print_uncut_table

    headers = ("run", "agent", "project", "started UTC", "in", "out", "cache w", "cache r", "cost $",
               "weighted", "tools", "rereads", "done")
    rows = [["3f2a9c1e:a1b2c3d", "general-purpose-agent", "…/some/very/long/project/path", "2026-11-30 20:00",
             "12.3k", "4.5M", "23.4M", "120.5M", "1234.56", "98.7M", "17", "3", "yes"],
            ["5d1e0a2b", "main", "…/app", "2026-11-30 21:00", "1.1k", "900", "0", "1.2M", "0.40", "2.3k", "4", "0",
             "no"]]
    for width in (200, 80, 60, 20):
        out = io.StringIO()
        print_uncut_table(headers, rows, left={"run", "agent", "project", "started UTC", "done"},
                          shrink={"agent", "project"}, on=Console(file=out, width=width, force_terminal=False))
        text = out.getvalue()
        header_line = text.splitlines()[0].split()
        assert "in" in header_line and "done" in header_line and "run" in header_line, (width, text)
        for row in rows:
            for cell in [row[0], *row[3:]]:
                assert cell in text, (width, cell, text)


def test_json_figures_are_rounded_to_read_and_integers_stay_integers(capsys: pytest.CaptureFixture[str]) -> None:
    """A sum of floats (0.1 + 0.2, a week of weighted tokens) is no 0.30000000000000004 in --json."""
    from warden.config import load_settings
    from warden.store.db import open_store
    from warden.store.models import SessionRun, utcnow

    with open_store(load_settings()).session() as db:
        for n, (cost, weighted) in enumerate([(0.1, 25710.150000000005), (0.2, 1714592.8500000006)]):
            db.add(SessionRun(run_key=f"s{n}:a{n}", session_id=f"s{n}", agent_id=f"a{n}", agent="backend", cost_usd=cost,
                              weighted_tokens=weighted, input_tokens=3, completed=True, started_at=utcnow(),
                              ended_at=utcnow()))
    code, out, _ = run(capsys, "sessions", "--json")
    rows = {r["session_id"]: r for r in json.loads(out)}
    assert code == 0 and rows["s0"]["weighted_tokens"] == 25710.2 and rows["s1"]["weighted_tokens"] == 1714592.9
    code, out, _ = run(capsys, "status", "--json")
    [backend] = json.loads(out)["agents"]
    assert backend["cost_usd"] == 0.3 and backend["input_tokens"] == 6 and type(backend["input_tokens"]) is int
    assert "0.30000000000000004" not in out and "1740303.0000000007" not in out
    [learning] = json.loads(out)["learning"]
    assert learning["learning_curve"][0]["mean_weighted_tokens"] == 870151.5
    assert learning["spend_this_week"]["real_work_weighted_tokens"] == 1740303.0


def test_display_figures_round_by_what_a_figure_is() -> None:
    from warden.cli.common import display_figures

    assert display_figures({"cost_usd": 0.06659027448938298, "estimate": 346.98718180951033,
                            "interval_tokens": [-1104.8363956768549, 1710.7335109533599], "bench_share": 0.30000000000000004,
                            "relative_margin": 0.000662223503364104, "p": 1e-12, "runs": 7, "flag": True, "none": None}) == {
        "cost_usd": 0.06659, "estimate": 347.0, "interval_tokens": [-1104.8, 1710.7], "bench_share": 0.3,
        "relative_margin": 0.000662224, "p": 1e-12, "runs": 7, "flag": True, "none": None}
    # dollars wherever "usd" is a word of the key, not only at its end
    assert display_figures({"saving_usd_per_session": 0.0335573123, "bench_usd_spent": 3.731694321,
                            "usdt_ratio": 0.123456789}) == {
        "saving_usd_per_session": 0.033557, "bench_usd_spent": 3.731694, "usdt_ratio": 0.123457}


def test_collect_on_a_terminal_shows_one_progress_line_that_updates_in_place(tmp_path: Path) -> None:
    """Rich drops a leading "\\r" from printed text: the counter used to run on as "1/3 files2/3
    files…" on one ever longer line. A real terminal (a pty) must see a bar redrawn in place,
    gone before the summary."""
    import pty
    import subprocess
    import sys

    from collect_support import assistant, usage, write

    for n in range(3):
        write(tmp_path / "projects" / "p" / f"s{n}.jsonl",
              [assistant(f"m{n}", f"r{n}", usage(), session=f"{n}1111111-2222-3333-4444-555555555555")])
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "warden"), "collect", str(tmp_path / "projects")],
                            stdin=follower, stdout=follower, stderr=follower, close_fds=True,
                            env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the pty closes when the command exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    screen = b"".join(chunks).decode()
    assert "3 transcript(s): 3 ingested" in screen
    assert "files2/3" not in screen and "1/3 files" not in screen
    assert "3/3" in screen and "\x1b[2K" in screen  # the bar's last state, then erased in place


def test_a_database_with_damaged_pages_is_a_database_error_not_an_internal_one(
        corpus: Path, warden_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that opens as SQLite but whose pages are damaged (a bad disk, a copy cut short)
    is the database's problem: one line naming it, exit 1, and the file left as it is."""
    import random

    assert run(capsys, "collect", str(corpus))[0] == 0
    db = warden_home / "warden.db"
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    noise = random.Random(7)
    for offset in range(2 * page, len(data) - page, page):  # every page but the schema's and the last
        data[offset:offset + page] = noise.randbytes(page)
    db.write_bytes(bytes(data))
    code, out, err = run(capsys, "status")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith("warden: database error: ") and "damaged" in err and "internal error" not in err
    assert db.read_bytes() == bytes(data)


def test_an_output_name_too_long_for_the_file_system_is_one_line(tmp_path: Path, warden_home: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    too_long = tmp_path / ("x" * 300 + ".html")
    code, out, err = run(capsys, "report", "--html", str(too_long))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("warden: --html ") and "cannot write there (File name too long)" in err


@pytest.mark.parametrize("argv", [("report", "--html", "reports/"), ("share", "--agent", "backend", "--out", "team/")])
def test_an_output_path_written_as_a_directory_is_refused_not_made_a_file(argv: tuple[str, ...], tmp_path: Path,
                                                                          warden_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "names a directory" in err
    assert list(here.iterdir()) == []


def test_a_missing_config_dir_is_named_by_the_variable_that_set_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))  # exists, but WARDEN_CLAUDE_HOME beats it
    monkeypatch.setenv("WARDEN_CLAUDE_HOME", str(tmp_path / "missing"))
    code, out, err = run(capsys, "collect")
    assert code == 2 and err.count("\n") == 1 and "set WARDEN_CLAUDE_HOME to it" in err
    monkeypatch.delenv("WARDEN_CLAUDE_HOME")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "missing"))
    code, out, err = run(capsys, "collect")
    assert code == 2 and "set CLAUDE_CONFIG_DIR (or claude_home in warden.toml) to it" in err
