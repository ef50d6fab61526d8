"""``--budget``: one parser for every command that spends tokens. Budgets are big numbers, so
2e6 and 2_000_000 are taken (exactly); a fraction, a sign, zero, inf or nan is one line, exit 2."""

from __future__ import annotations

import pytest

from warden.cli.app import main
from warden.errors import WardenError

# each command that takes a token budget: its argv, and the function (module, name) it hands it to
COMMANDS = {
    "select": (["select", "--agent", "backend"], "warden.select.selector", "select_agents"),
    "plan": (["plan", "--agent", "backend"], "warden.select.plan", "plan_agent"),
    "nightly": (["nightly"], "warden.select.nightly", "run_nightly"),
    "bench": (["bench", "--agent", "backend"], "warden.bench.scheduler", "bench_agent"),
}


class _Captured(WardenError):
    exit_code = 42


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("text, tokens", [("2e6", 2_000_000), ("2_000_000", 2_000_000), ("2000000", 2_000_000),
                                          ("1.5E6", 1_500_000), ("1e15", 10**15)])
def test_a_budget_is_taken_as_people_write_big_numbers(command: str, text: str, tokens: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    argv, module, name = COMMANDS[command]
    seen: list[object] = []

    def capture(*args: object, **kwargs: object) -> None:
        seen.append(kwargs.get("budget_tokens", kwargs.get("budget", args[3] if len(args) > 3 else None)))
        raise _Captured("captured")

    monkeypatch.setattr(f"{module}.{name}", capture)
    assert main([*argv, "--budget", text]) == 42
    assert seen == [tokens] and type(seen[0]) is int


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("text, message", [
    ("2.5", "'2.5' is not a whole number of tokens"),
    ("1e-3", "'1e-3' is not a whole number of tokens"),
    ("-5", "'-5' is not a positive number of tokens"),
    ("0", "'0' is not a positive number of tokens"),
    ("0e9", "'0e9' is not a positive number of tokens"),
    ("inf", "'inf' is not a number of tokens (write e.g. 2000000, 2_000_000 or 2e6)"),
    ("nan", "'nan' is not a number of tokens"),
    ("1__000", "'1__000' is not a number of tokens"),
    ("2,000,000", "'2,000,000': write e.g. 2000000, 2_000_000 or 2e6"),
    ("1e16", "'1e16' is more than the largest budget, 1e15 tokens"),
    ("1e99999999999", "is more than the largest budget"),
])
def test_a_bad_budget_is_one_line_exit_2(command: str, text: str, message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    argv, _, _ = COMMANDS[command]
    assert main([*argv, f"--budget={text}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("warden: Invalid value for '--budget': ") and message in err and "\n" not in err


def test_the_help_says_how_to_write_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["select", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "--budget TOKENS" in out and "2_000_000 or 2e6" in out
