"""One warden process at a time decides an agent's rules: a named lock across processes."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO
from warden.distill.admission import ADMISSION_LOCK
from warden.store.locks import LockBusy, exclusive


def test_a_held_lock_is_busy_for_anyone_else_and_free_after(any_store: Any) -> None:
    with exclusive(any_store, "select-backend", "busy: backend"):
        with pytest.raises(LockBusy, match="busy: backend"):
            with exclusive(any_store, "select-backend", "busy: backend"):
                pass
        with exclusive(any_store, "select-sql", "busy: sql"):  # another name is another lock
            pass
    with exclusive(any_store, "select-backend", "busy: backend"):  # released
        pass


def test_select_refuses_while_another_process_decides_the_agent(any_store: Any, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from warden.config import load_settings
    from warden.select.selector import select_agent

    with exclusive(any_store, "select-backend", "held by the test"):
        with pytest.raises(LockBusy, match="another warden process is deciding backend's rules"):
            select_agent(any_store, load_settings(), "backend")


def test_nightly_skips_an_agent_another_process_is_deciding(warden_home) -> None:  # type: ignore[no-untyped-def]
    from warden.config import load_settings
    from warden.select.nightly import run_nightly
    from warden.store.db import open_store

    store = open_store(load_settings())
    with exclusive(store, "select-docs", "held by the test"):
        summary = run_nightly(store, load_settings(), agents=["docs"], collect=False)
    assert summary.busy_agents == ["docs"] and summary.exit_code == 0 and not summary.selects


def test_the_cli_says_so_in_one_line_and_exits_1(warden_home) -> None:  # type: ignore[no-untyped-def]
    import os

    from warden.config import load_settings
    from warden.store.db import open_store

    store = open_store(load_settings())
    with exclusive(store, "select-docs", "held by the test"):
        proc = subprocess.run([sys.executable, "-m", "warden", "select", "--agent", "docs"], cwd=REPO,
                              env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "warden: another warden process is deciding docs's rules (select or nightly); run again when it ends"]


def test_one_process_distills_at_a_time_and_nightly_goes_on_without(warden_home) -> None:  # type: ignore[no-untyped-def]
    from warden.config import load_settings
    from warden.distill.service import distill_runs
    from warden.select.nightly import run_nightly
    from warden.store.db import open_store

    store = open_store(load_settings())
    with exclusive(store, ADMISSION_LOCK, "held by the test"):
        with pytest.raises(LockBusy, match="another warden process is adding candidate rules"):
            distill_runs(store, load_settings())
        assert distill_runs(store, load_settings(), dry_run=True) == []  # a dry run needs no lock
        logged: list[str] = []
        summary = run_nightly(store, load_settings(), agents=["docs"], collect=False, log=logged.append)
    assert any(line.startswith("distill: skipped, another warden process is adding candidate rules") for line in logged)
    assert summary.exit_code == 0


def test_a_second_nightly_says_busy_instead_of_sharing_the_night(warden_home) -> None:  # type: ignore[no-untyped-def]
    from warden.config import load_settings
    from warden.select.nightly import run_nightly
    from warden.store.db import open_store
    from warden.store.models import NightlyRun

    store = open_store(load_settings())
    with exclusive(store, "nightly", "held by the test"):
        with pytest.raises(LockBusy, match="another `warden nightly` is running"):
            run_nightly(store, load_settings(), agents=["docs"], collect=False)
    with store.session() as s:
        assert s.query(NightlyRun).count() == 0  # no night opened, none claimed


def test_select_all_skips_a_busy_agent_and_exits_0(warden_home) -> None:  # type: ignore[no-untyped-def]
    from warden.cli.app import main
    from warden.config import load_settings
    from warden.store.db import open_store

    store = open_store(load_settings())
    with exclusive(store, "select-docs", "held by the test"):
        assert main(["select", "--all", "--budget", "1", "--json"]) == 0
