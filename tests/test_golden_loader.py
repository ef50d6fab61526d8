"""The golden-task loader: validation refusals (one clear line each) and the suite hash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from warden.bench.tasks import (
    MAX_CHECK_BYTES,
    compute_suite_hash,
    list_agents,
    load_all_suites,
    load_suite,
    split_front_matter,
)
from warden.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "golden_tasks"
FIXTURE = REPO / "fixture_repo"


def _front(path: Path) -> tuple[dict, str]:
    data, body = split_front_matter(path.read_text(encoding="utf-8"))
    assert data is not None
    return data, body


def _write(path: Path, data: dict, body: str = "Prose.\n") -> None:
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True) + "---\n\n" + body,
                    encoding="utf-8")


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A one-agent golden dir holding a copy of a real backend task (valid as it stands)."""
    root = tmp_path / "golden"
    (root / "backend").mkdir(parents=True)
    shutil.copy(GOLDEN / "backend" / "agent.md", root / "backend" / "agent.md")
    shutil.copy(GOLDEN / "backend" / "golden-01.md", root / "backend" / "golden-01.md")
    return root


def _mutate(golden: Path, **changes) -> Path:
    path = golden / "backend" / "golden-01.md"
    data, body = _front(path)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    _write(path, data, body)
    return path


def _refusal(golden: Path) -> str:
    with pytest.raises(UsageError) as info:
        load_suite(golden, "backend", FIXTURE)
    message = str(info.value)
    assert "\n" not in message, "refusals are one line"
    assert info.value.exit_code == 2
    return message


# ----------------------------------------------------------------------------- the real suites


def test_real_suites_load_with_fixture_validation() -> None:
    suites = load_all_suites(GOLDEN, FIXTURE)
    assert set(suites) >= {"backend", "sql", "testing", "docs"}
    for agent, suite in suites.items():
        assert len(suite.tasks) >= 4, agent
        assert suite.system_prompt and len(suite.suite_hash) == 64
        assert any(t.sim.anchor for t in suite.tasks), f"{agent} has no anchor task"
        for task in suite.tasks:
            assert task.agent == agent and task.id.startswith(f"{agent}-")
            assert task.sim.edits and task.sim.test_command.startswith("python -m pytest")
    assert suites["backend"].model == "claude-sonnet-4-6"
    assert suites["sql"].model is None


def test_agent_prompts_stay_naive() -> None:
    """The system prompts leave room for rules: they do not already teach the habits rules teach."""
    for agent in list_agents(GOLDEN):
        prompt = load_suite(GOLDEN, agent).system_prompt.lower()
        for habit_word in ("grep", "search first", "brief", "concise", "re-read", "targeted test"):
            assert habit_word not in prompt, (agent, habit_word)


def test_task_sizes_span_a_range() -> None:
    """Bytes a blind reader opens (target + related) plus the fix: the cheapest and the dearest
    task differ by a factor of three or more, so costs span a range."""
    tasks = [t for s in load_all_suites(GOLDEN, FIXTURE).values() for t in s.tasks]
    sizes = sorted(sum((FIXTURE / p).stat().st_size for p in {t.sim.target, *t.sim.related})
                   + sum(len(e.new) + len(e.old) for e in t.sim.edits) for t in tasks)
    assert sizes[-1] >= 3 * sizes[0]
    assert sum(t.sim.anchor for t in tasks) >= 4


# ----------------------------------------------------------------------------- suite hash


def test_suite_hash_is_stable_and_path_independent(golden: Path, tmp_path: Path) -> None:
    first = load_suite(golden, "backend", FIXTURE).suite_hash
    assert load_suite(golden, "backend", FIXTURE).suite_hash == first
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(golden, elsewhere)
    assert load_suite(elsewhere, "backend").suite_hash == first


def test_suite_hash_ignores_crlf_checkouts(golden: Path) -> None:
    before = load_suite(golden, "backend").suite_hash
    for path in (golden / "backend").iterdir():
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert load_suite(golden, "backend", FIXTURE).suite_hash == before


def test_suite_hash_changes_when_a_task_or_the_agent_changes(golden: Path) -> None:
    before = load_suite(golden, "backend").suite_hash
    task = golden / "backend" / "golden-01.md"
    original = task.read_text(encoding="utf-8")
    task.write_text(original + "One more sentence of prose.\n", encoding="utf-8")
    after_body = load_suite(golden, "backend").suite_hash
    assert after_body != before
    task.write_text(original, encoding="utf-8")
    assert load_suite(golden, "backend").suite_hash == before
    _mutate(golden, timeout_s=61)
    assert load_suite(golden, "backend").suite_hash not in (before, after_body)
    task.write_text(original, encoding="utf-8")
    agent_md = golden / "backend" / "agent.md"
    agent_md.write_text(agent_md.read_text(encoding="utf-8") + "Be careful.\n", encoding="utf-8")
    assert load_suite(golden, "backend").suite_hash != before


def test_adding_a_task_changes_the_hash(golden: Path) -> None:
    before = load_suite(golden, "backend").suite_hash
    shutil.copy(GOLDEN / "backend" / "golden-02.md", golden / "backend" / "golden-02.md")
    assert load_suite(golden, "backend", FIXTURE).suite_hash != before


def test_compute_suite_hash_orders_tasks_canonically() -> None:
    suite = load_suite(GOLDEN, "sql")
    assert compute_suite_hash("sql", "x", suite.tasks) == compute_suite_hash("sql", "x", suite.tasks[::-1])


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "Backend-01", ".hidden", "-x", "x" * 65, 7, "a b"])
def test_path_escaping_or_malformed_id_is_refused(golden: Path, bad_id: object) -> None:
    _mutate(golden, id=bad_id)
    message = _refusal(golden)
    assert "backend/golden-01.md" in message and "id" in message


def test_prompt_starting_with_a_dash_is_refused(golden: Path) -> None:
    _mutate(golden, prompt="--dangerously-skip-permissions and fix the rounding")
    assert "prompt must not start with '-'" in _refusal(golden)


def test_oversized_success_check_is_refused(golden: Path) -> None:
    _mutate(golden, success_check="python -c 'pass'  # " + "x" * MAX_CHECK_BYTES)
    assert f"success_check is longer than {MAX_CHECK_BYTES} bytes" in _refusal(golden)


@pytest.mark.parametrize("field", ["id", "agent", "prompt", "success_check", "sim"])
def test_missing_required_field_is_refused(golden: Path, field: str) -> None:
    _mutate(golden, **{field: None})
    message = _refusal(golden)
    assert f"missing required field(s): {field}" in message


@pytest.mark.parametrize("field", ["locate", "target", "edits", "test_command"])
def test_missing_sim_field_is_refused(golden: Path, field: str) -> None:
    data, _ = _front(golden / "backend" / "golden-01.md")
    sim = dict(data["sim"])
    del sim[field]
    _mutate(golden, sim=sim)
    assert f"sim block is missing required field(s): {field}" in _refusal(golden)


def test_agent_mismatch_is_refused(golden: Path) -> None:
    _mutate(golden, agent="sql")
    assert "does not match its directory 'backend'" in _refusal(golden)


def test_duplicate_ids_are_refused(golden: Path) -> None:
    shutil.copy(golden / "backend" / "golden-01.md", golden / "backend" / "golden-07.md")
    message = _refusal(golden)
    assert "duplicate id 'backend-01'" in message and "golden-01.md" in message


def test_duplicate_ids_across_agents_are_refused(golden: Path) -> None:
    (golden / "other").mkdir()
    shutil.copy(golden / "backend" / "agent.md", golden / "other" / "agent.md")
    data, body = _front(golden / "backend" / "golden-01.md")
    data["agent"] = "other"
    _write(golden / "other" / "golden-01.md", data, body)
    with pytest.raises(UsageError, match="duplicate id 'backend-01'.*agent backend"):
        load_all_suites(golden, FIXTURE)


def _edit_sim(golden: Path, **edit_changes) -> None:
    data, _ = _front(golden / "backend" / "golden-01.md")
    sim = dict(data["sim"])
    edits = [dict(e) for e in sim["edits"]]
    edits[0].update(edit_changes)
    sim["edits"] = edits
    _mutate(golden, sim=sim)


def test_edit_whose_old_text_is_missing_is_refused(golden: Path) -> None:
    _edit_sim(golden, old="this text is nowhere in the fixture")
    assert "sim.edits[1] 'old' text is not found in ledgerly/money.py" in _refusal(golden)


def test_edit_whose_old_text_is_ambiguous_is_refused(golden: Path) -> None:
    _edit_sim(golden, old="ROUND_HALF_EVEN")
    assert "sim.edits[1] 'old' text is found 2 times in ledgerly/money.py" in _refusal(golden)


def test_edits_apply_in_sequence(golden: Path) -> None:
    """The second edit of backend-01 must still find its text after the first one applied."""
    data, _ = _front(golden / "backend" / "golden-01.md")
    sim = dict(data["sim"])
    sim["edits"] = [sim["edits"][0], {"path": "ledgerly/money.py", "old": "from decimal import ROUND_HALF_EVEN",
                                      "new": "from decimal import ROUND_HALF_DOWN"}]
    _mutate(golden, sim=sim)
    assert "sim.edits[2] 'old' text is not found" in _refusal(golden)


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "ledgerly/../../x.py", "BUGS.md",
                                  "MANIFEST.sha256", "ledgerly/nope.py"])
def test_sim_paths_must_stay_in_the_copy(golden: Path, path: str) -> None:
    _edit_sim(golden, path=path)
    message = _refusal(golden)
    assert "sim.edits[1].path" in message or "edits[1]" in message


def test_sim_target_must_be_edited(golden: Path) -> None:
    data, _ = _front(golden / "backend" / "golden-01.md")
    _mutate(golden, sim={**data["sim"], "target": "ledgerly/db.py", "locate": "def connect"})
    assert "sim.target ledgerly/db.py is not edited" in _refusal(golden)


def test_sim_locate_must_be_findable(golden: Path) -> None:
    data, _ = _front(golden / "backend" / "golden-01.md")
    _mutate(golden, sim={**data["sim"], "locate": "no such text anywhere"})
    assert "sim.locate text" in _refusal(golden)


def test_unknown_sim_field_is_refused(golden: Path) -> None:
    data, _ = _front(golden / "backend" / "golden-01.md")
    _mutate(golden, sim={**data["sim"], "solution": "cheat"})
    assert "unknown field(s): solution" in _refusal(golden)


@pytest.mark.parametrize("changes, expected", [
    ({"weight": 0}, "weight"),
    ({"weight": True}, "weight"),
    ({"timeout_s": -1}, "timeout_s"),
    ({"prompt": "fix it\u202e now"}, "bidi"),
    ({"prompt": "  "}, "'prompt' must be a non-empty string"),
])
def test_bad_optional_values_are_refused(golden: Path, changes: dict, expected: str) -> None:
    _mutate(golden, **changes)
    assert expected in _refusal(golden)


def test_malformed_front_matter_is_refused(golden: Path) -> None:
    path = golden / "backend" / "golden-01.md"
    path.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    assert "front matter is not valid YAML" in _refusal(golden)
    path.write_text("no front matter here\n", encoding="utf-8")
    assert "has no YAML front matter" in _refusal(golden)
    path.write_text("---\nid: backend-01\n", encoding="utf-8")
    assert "no closing '---'" in _refusal(golden)
    path.write_text("---\n- a\n- b\n---\n", encoding="utf-8")
    assert "must be a YAML mapping" in _refusal(golden)


def test_unknown_agent_names_the_known_ones(golden: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown agent 'frontend'.*known agents: backend"):
        load_suite(golden, "frontend")
    with pytest.raises(UsageError, match="agent name"):
        load_suite(golden, "../backend")


def test_agent_md_model_and_body(golden: Path) -> None:
    agent_md = golden / "backend" / "agent.md"
    agent_md.write_text("---\nmodel: claude-haiku-4-5\n---\n\nYou fix bugs.\n", encoding="utf-8")
    suite = load_suite(golden, "backend")
    assert (suite.model, suite.system_prompt) == ("claude-haiku-4-5", "You fix bugs.")
    agent_md.write_text("You fix bugs, no front matter.\n", encoding="utf-8")
    assert load_suite(golden, "backend").model is None
    agent_md.write_text("---\nmodel: claude\n---\n\n", encoding="utf-8")
    with pytest.raises(UsageError, match="system prompt"):
        load_suite(golden, "backend")


def test_extra_front_matter_is_kept_and_files_not_named_golden_are_ignored(golden: Path) -> None:
    _mutate(golden, notes="added 2026-11")
    (golden / "backend" / "README.md").write_text("not a task\n", encoding="utf-8")
    task = load_suite(golden, "backend", FIXTURE).tasks[0]
    assert task.extra == {"notes": "added 2026-11"} and len(load_suite(golden, "backend").tasks) == 1


def test_reference_edits_and_the_loaders_check_apply_edits_the_same_way(tmp_path: Path) -> None:
    """One function applies a task's edits in order (the loader's check and the reference fix):
    each edit sees the previous ones, and one that does not match exactly once changes no file."""
    from dataclasses import replace

    from warden.bench.tasks import EditMismatch, SimEdit, apply_edits, apply_reference_edits

    edits = (SimEdit("a.py", "x = 1", "x = 2"), SimEdit("a.py", "x = 2", "x = 3"), SimEdit("b.py", "y", "z"))
    files = {"a.py": "x = 1\n", "b.py": "y\n"}
    assert apply_edits(edits, lambda index, path: files[path]) == {"a.py": "x = 3\n", "b.py": "z\n"}
    with pytest.raises(EditMismatch) as caught:
        apply_edits((SimEdit("a.py", "a", "b"), SimEdit("a.py", "c", "d")), lambda index, path: "a c c\n")
    assert (caught.value.index, caught.value.path, caught.value.count) == (2, "a.py", 2)

    task = next(iter(load_all_suites(GOLDEN, FIXTURE).values())).tasks[0]
    work = tmp_path / "copy"
    work.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    apply_reference_edits(replace(task, sim=replace(task.sim, edits=edits)), work)
    assert {p.name: p.read_text() for p in work.iterdir()} == {"a.py": "x = 3\n", "b.py": "z\n"}
    for name, text in files.items():
        (work / name).write_text(text)
    with pytest.raises(UsageError, match=r"sim.edits\[2\] 'old' text does not occur exactly once in a.py"):
        apply_reference_edits(replace(task, sim=replace(task.sim, edits=(edits[2], SimEdit("a.py", "no", "q")))),
                              work)
    assert (work / "b.py").read_text() == "y\n"  # nothing half-applied
