"""install-hooks / uninstall-hooks edit Claude Code's settings.json safely: merge, keep what is
there, back up before writing, idempotent, and refuse a file they cannot parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warden.errors import UsageError
from warden.ingest.hooks import HOOK_EVENTS, install_hooks, uninstall_hooks

CMD = "/opt/venv/bin/warden"


def _settings(claude: Path) -> dict:
    return json.loads((claude / "settings.json").read_text())


def test_install_merges_and_is_idempotent(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    theirs = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                                         "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]}}
    (claude / "settings.json").write_text(json.dumps(theirs))
    first = install_hooks(claude, command=CMD)
    assert first["changed"] and Path(first["backup_path"]).read_text() == json.dumps(theirs)
    data = _settings(claude)
    assert data["model"] == "opus" and data["hooks"]["PreToolUse"] == theirs["hooks"]["PreToolUse"]
    commands = [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == ["notify-send done", f"{CMD} hook stop"]
    for claude_event, event in HOOK_EVENTS.items():
        assert any(h["command"] == f"{CMD} hook {event}" for g in data["hooks"][claude_event] for h in g["hooks"])
    before = (claude / "settings.json").read_bytes()
    second = install_hooks(claude, command=CMD)
    assert not second["changed"] and second["backup_path"] is None
    assert (claude / "settings.json").read_bytes() == before
    # A moved installation replaces our old entry instead of adding a second one.
    install_hooks(claude, command="/new/bin/warden")
    stops = [h["command"] for g in _settings(claude)["hooks"]["Stop"] for h in g["hooks"]]
    assert stops == ["notify-send done", "/new/bin/warden hook stop"]


def test_uninstall_removes_only_ours(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    install_hooks(claude, command=CMD)  # creates the file
    data = _settings(claude)
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify-send done"}]})
    data["theme"] = "dark"
    (claude / "settings.json").write_text(json.dumps(data))
    result = uninstall_hooks(claude)
    assert result["changed"]
    assert _settings(claude) == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
                                 "theme": "dark"}
    assert not uninstall_hooks(claude)["changed"]


def test_unparseable_settings_are_left_untouched(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"hooks": {,}')
    with pytest.raises(UsageError, match="not valid JSON"):
        install_hooks(claude, command=CMD)
    assert (claude / "settings.json").read_text() == '{"hooks": {,}'
    assert list(claude.iterdir()) == [claude / "settings.json"]


def test_symlinked_settings_are_written_through_to_their_target(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text("{}")
    (claude / "settings.json").symlink_to(dotfiles / "settings.json")
    install_hooks(claude, command=CMD)
    assert (claude / "settings.json").is_symlink()
    assert "Stop" in json.loads((dotfiles / "settings.json").read_text())["hooks"]


def test_plugin_manifest_and_hooks_json_name_the_hook_commands() -> None:
    repo = Path(__file__).resolve().parent.parent
    plugin = json.loads((repo / ".claude-plugin" / "plugin.json").read_text())
    assert plugin["name"] == "warden"
    hooks = json.loads((repo / "hooks" / "hooks.json").read_text())["hooks"]
    for claude_event, event in HOOK_EVENTS.items():
        assert hooks[claude_event][0]["hooks"][0]["command"] == f"warden hook {event}"


def test_ids_from_a_hook_payload_become_path_parts_only_when_plain() -> None:
    from warden.ingest.hooks import _transcript_paths
    from warden.names import valid_id

    assert valid_id("3f1c2a9e-0b7d-4c1e-9f00-1a2b3c4d5e6f") and valid_id("a2271d1")
    for bad in ("..", "a/b", "a\\\\b", "s:1", "has space", "x" * 129, "", None, 7, "tab\\there", "dots..up"):
        assert valid_id(bad) is None, bad
    for bad in ("\u2003em", "nbsp\u00a0", "line\u2028sep", "\x85", "a\u200bb"):  # Unicode spaces; unprintable
        assert valid_id(bad) is None, bad
    assert valid_id("ñandú-ü") == "ñandú-ü"
    plain = _transcript_paths("subagent-stop", {"transcript_path": "/p/s1.jsonl", "session_id": "s1", "agent_id": "a1"})
    assert plain == ["/p/s1/subagents/agent-a1.jsonl", "/p/agent-a1.jsonl"]
    sneaky = _transcript_paths("subagent-stop", {"transcript_path": "/p/s1.jsonl", "session_id": "../../etc",
                                                 "agent_id": "a1"})
    assert sneaky == []


def test_an_event_entry_claude_code_would_not_read_is_left_for_the_user(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"hooks": {"Stop": "nope"}}')
    for action in (install_hooks, uninstall_hooks):
        with pytest.raises(UsageError, match='"hooks.Stop" is not a list; left untouched'):
            action(claude, command=CMD) if action is install_hooks else action(claude)
    assert (claude / "settings.json").read_text() == '{"hooks": {"Stop": "nope"}}'


def test_a_lookalike_command_is_not_taken_for_ours_and_backups_never_overwrite(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/opt/bin/other-warden hook stop"},
                                            {"type": "command", "command": "warden hook stop --verbose"}]}]}}
    original = json.dumps(theirs)
    (claude / "settings.json").write_text(original)
    first = install_hooks(claude, command="'/my venv/bin/warden'")
    second = uninstall_hooks(claude)  # within the same second as the install
    assert first["backup_path"] != second["backup_path"]
    assert Path(first["backup_path"]).read_text() == original  # the user's original survives
    assert _settings(claude) == theirs  # their look-alike hooks were never ours to remove


@pytest.mark.parametrize("text", ['{"hooks": {}, "a": 1e999}', '{"a": NaN}', '{"a": -Infinity}',
                                  "[" * 100_000 + "]" * 100_000])
def test_settings_json_claude_code_cannot_read_is_refused(tmp_path: Path, text: str) -> None:
    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text(text)
    with pytest.raises(UsageError, match="not valid JSON"):
        install_hooks(claude, command=CMD)
    assert (claude / "settings.json").read_text() == text


def test_a_large_integer_claude_code_reads_does_not_block_install(tmp_path: Path) -> None:
    """JSON.parse reads any integer (rounding it): only ledgers need exact ones."""
    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"x": {"id": 1234567890123456789012}}')
    assert install_hooks(claude, command=CMD)["changed"]
    assert _settings(claude)["x"]["id"] == 1234567890123456789012


def test_a_settings_json_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    claude = tmp_path / "claude"
    claude.mkdir()
    os.mkfifo(claude / "settings.json")
    with pytest.raises(UsageError, match="not a regular file"):
        install_hooks(claude, command=CMD)


def test_a_claude_home_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    home = tmp_path / "claude"
    home.write_text("not a directory")
    with pytest.raises(UsageError, match="cannot write"):
        install_hooks(home, command=CMD)


@pytest.mark.parametrize("failing", ["backup", "settings"])
def test_a_full_disk_leaves_no_backup_beside_the_untouched_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    failing: str) -> None:
    """An empty "backup" (the copy ran out of space) is a trap for whoever restores it; and when
    settings.json stays untouched there is nothing a backup is needed for."""
    import os
    import shutil

    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"theme": "dark"}')
    real_copy, real_replace = shutil.copy2, os.replace

    def copy_out_of_space(src: str, dst: str) -> None:
        Path(dst).write_bytes(b"")
        raise OSError(28, "No space left on device")

    def replace_out_of_space(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    if failing == "backup":
        monkeypatch.setattr(shutil, "copy2", copy_out_of_space)
    else:
        monkeypatch.setattr(os, "replace", replace_out_of_space)
    with pytest.raises((UsageError, OSError)):
        install_hooks(claude, command=CMD)
    monkeypatch.setattr(shutil, "copy2", real_copy)
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(p.name for p in claude.iterdir()) == ["settings.json"]
    assert (claude / "settings.json").read_text() == '{"theme": "dark"}'


def test_settings_json_is_fsynced_before_it_replaces_the_old_one(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash right after install-hooks must not leave an empty settings.json: the new bytes are
    on disk before the rename (the mode the user gave the file is kept)."""
    import os

    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"theme": "dark"}')
    os.chmod(claude / "settings.json", 0o640)
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append("replace") or real_replace(a, b))
    install_hooks(claude, command=CMD)
    assert events[-2:] == ["fsync", "replace"]
    assert os.stat(claude / "settings.json").st_mode & 0o777 == 0o640
    assert _settings(claude)["theme"] == "dark"


def test_a_new_settings_json_is_the_owners_alone(tmp_path: Path) -> None:
    import os

    claude = tmp_path / "claude"
    install_hooks(claude, command=CMD)
    assert os.stat(claude / "settings.json").st_mode & 0o777 == 0o600


def test_install_hooks_refuses_a_claude_config_dir_that_does_not_exist(tmp_path: Path, monkeypatch, capsys) -> None:
    """A typo in CLAUDE_CONFIG_DIR created that directory and a settings.json Claude Code never reads."""
    from warden.cli.app import main

    monkeypatch.setenv("WARDEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cluade"))
    assert main(["install-hooks"]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "cluade").exists()
    (tmp_path / "cluade").mkdir()
    assert main(["install-hooks"]) == 0 and (tmp_path / "cluade" / "settings.json").is_file()


def test_a_lone_surrogate_escape_in_settings_is_kept_as_an_escape(tmp_path: Path) -> None:
    """'\\ud800' is valid JSON (Claude Code reads it) but no UTF-8 text: the merge keeps the value
    written as the escape, never a crash or bytes no JSON reader takes."""
    claude = tmp_path / "claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"note": "\\ud800", "model": "opus \u00e9"}')
    assert install_hooks(claude, command=CMD)["changed"]
    raw = (claude / "settings.json").read_bytes()
    data = json.loads(raw.decode("utf-8"))
    assert data["note"] == "\ud800" and data["model"] == "opus \u00e9" and "Stop" in data["hooks"]
    assert uninstall_hooks(claude)["changed"] and json.loads((claude / "settings.json").read_text())["note"] == "\ud800"


def test_an_id_character_is_refused_exactly_where_the_per_character_definition_refuses_it() -> None:
    """valid_id's one regex refuses what str.isspace, ':' and the slashes do, over every code
    point (the regex's \\s and str.isspace are one table; a future Python could part them)."""
    import sys

    from warden.names import valid_id

    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char.isprintable():
            expected = None if char.isspace() or char in ":/\\" else char
            assert valid_id(char) == expected, hex(code)
            assert valid_id("a" + char + "b") == (None if expected is None else "a" + char + "b"), hex(code)

