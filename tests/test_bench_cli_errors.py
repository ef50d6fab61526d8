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
