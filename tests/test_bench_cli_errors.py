"""``warden bench`` refusals on the real golden suites: one line on stderr, exit 2."""

from __future__ import annotations

import pytest

from warden.cli.app import main


@pytest.mark.parametrize("args, message", [
    (["--agent", "nobody"], "unknown agent 'nobody'"),
    (["--agent", "../etc"], "agent name"),
    (["--agent", "backend", "--backend", "bogus"], "unknown backend 'bogus'"),
])
def test_refusals_are_one_line_exit_2(capsys, args, message):
    assert main(["bench", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("warden: ") and message in err and "\n" not in err


def test_a_missing_or_modified_fixture_is_named_before_the_tasks(capsys, monkeypatch, tmp_path):
    import shutil

    from warden.config import load_settings

    fixture = shutil.copytree(load_settings().fixture_dir, tmp_path / "fixture")
    monkeypatch.setenv("WARDEN_FIXTURE_DIR", str(tmp_path / "nowhere"))
    assert main(["bench", "--agent", "backend"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("warden: fixture directory not found") and "\n" not in err
    money = fixture / "ledgerly" / "money.py"  # a file golden tasks' reference edits change
    money.write_text(money.read_text().replace("ROUND_HALF_EVEN", "ROUND_HALF_UP"))
    monkeypatch.setenv("WARDEN_FIXTURE_DIR", str(fixture))
    assert main(["bench", "--agent", "backend"]) == 1
    err = capsys.readouterr().err.strip()
    assert "was modified (changed: ledgerly/money.py)" in err and "\n" not in err


def test_a_model_id_no_column_can_hold_is_a_usage_error() -> None:
    import pytest

    from warden.bench.agents.anthropic_backend import resolve_model
    from warden.config import load_settings
    from warden.errors import UsageError

    assert resolve_model(load_settings(), "claude-sonnet-4-6") == "claude-sonnet-4-6"
    for bad in ("m" * 121, "claude sonnet", "claude\x1b[2J"):
        with pytest.raises(UsageError, match="invalid model id"):
            resolve_model(load_settings(), bad)


def test_rule_ids_beyond_64_bits_are_a_usage_error() -> None:
    import pytest

    from warden.cli.bench import parse_rule_set
    from warden.errors import UsageError

    assert parse_rule_set("3,7") == (3, 7)
    with pytest.raises(UsageError, match="--rules expects rule ids"):
        parse_rule_set(str(2**64))
    with pytest.raises(UsageError, match="--rules expects rule ids"):
        parse_rule_set("3,²")  # a digit to str.isdigit, not to int()
    assert parse_rule_set("none") == ()
    with pytest.raises(UsageError, match="--rules is empty"):
        parse_rule_set("  ")
