"""Golden tasks: ``golden_tasks/<agent>/golden-NN.md`` (DESIGN.md §3 "Golden task").

Front matter (YAML between ``---`` lines) holds ``id``, ``agent``, ``prompt``, ``success_check``,
optional ``weight`` and ``timeout_s``, and a ``sim:`` block that only the simulated agent reads.
The body is prose for humans.

``sim:`` block schema (all paths relative to the fixture root):

    sim:
      locate: "text to grep for"          # what a searching agent greps to find the change
      target: "pkg/module.py"             # the file the fix edits
      related: ["pkg/other.py", ...]      # files a blind reader plausibly opens first
      edits:                              # the reference fix, applied with the edit tool
        - {path: "pkg/module.py", old: "exact old text", new: "replacement"}
      test_command: "python -m pytest -q tests/test_x.py"   # the targeted verification
      anchor: false                       # true = low-variance anchor task
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from warden.errors import UsageError
from warden.sanitize import first_unsafe_char


@dataclass(frozen=True)
class SimEdit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class SimPlan:
    locate: str
    target: str
    related: tuple[str, ...] = ()
    edits: tuple[SimEdit, ...] = ()
    test_command: str = ""
    anchor: bool = False


@dataclass(frozen=True)
class GoldenTask:
    id: str
    agent: str
    prompt: str
    success_check: str
    weight: float = 1.0
    timeout_s: float = 120.0
    sim: SimPlan | None = None
    body: str = ""
    path: str = ""
    source_sha256: str = ""  # hash of the file's bytes (suite hash input)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class AgentSuite:
    agent: str
    system_prompt: str  # agent.md body
    model: str | None  # model named by agent.md front matter, if any
    tasks: tuple[GoldenTask, ...]
    suite_hash: str


# --------------------------------------------------------------------------- loading

AGENT_FILE = "agent.md"
TASK_FILE_RE = re.compile(r"^golden-[0-9]{2,4}\.md$")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
AGENT_RE = ID_RE
MAX_CHECK_BYTES = 4096
MAX_PROMPT_CHARS = 8000
MAX_TIMEOUT_S = 3600.0
REQUIRED_FIELDS = ("id", "agent", "prompt", "success_check", "sim")
OPTIONAL_FIELDS = ("weight", "timeout_s")
SIM_REQUIRED = ("locate", "target", "edits", "test_command")
SIM_OPTIONAL = ("related", "anchor")


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """``(front matter mapping or None, body)`` of a Markdown file with optional ``---`` YAML.

    Raises :class:`ValueError` with a short reason on unterminated or non-mapping front matter.
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---\n", 3)
    if end == -1:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise ValueError("front matter starts with '---' but has no closing '---' line")
    raw = text[4:end + 1]
    body = text[end + 5:] if end + 5 <= len(text) else ""
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise ValueError(f"front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("front matter must be a YAML mapping")
    return data, body.lstrip("\n")


def _normalized_bytes(path: Path) -> bytes:
    """File bytes with CRLF folded to LF, so the suite hash does not depend on the checkout."""
    return path.read_bytes().replace(b"\r\n", b"\n")


def _fail(where: str, problem: str) -> UsageError:
    return UsageError(f"golden task {where}: {problem}")


def _check_text(where: str, field_name: str, value: Any, *, max_chars: int | None = None,
                allow_newlines: bool = True) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"'{field_name}' must be a non-empty string")
    if first_unsafe_char(value):
        raise _fail(where, f"'{field_name}' contains control, bidi or zero-width characters")
    if not allow_newlines and "\n" in value.strip():
        raise _fail(where, f"'{field_name}' must be one line")
    if max_chars is not None and len(value) > max_chars:
        raise _fail(where, f"'{field_name}' is longer than {max_chars} characters")
    return value


def _check_rel_path(where: str, field_name: str, value: Any) -> str:
    """A fixture-relative POSIX path that cannot escape the copy."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"sim.{field_name} must be a non-empty path")
    pure = PurePosixPath(value)
    if (value != value.strip() or "\\" in value or pure.is_absolute() or ".." in pure.parts
            or first_unsafe_char(value) or value.startswith("~")):
        raise _fail(where, f"sim.{field_name} path {value!r} must be relative to the fixture and stay inside it")
    return pure.as_posix()


def _fixture_text(fixture_dir: Path, rel: str, where: str, field_name: str, cache: dict[str, str]) -> str:
    from warden.bench.fixture import EXCLUDED_FROM_COPY

    if rel in EXCLUDED_FROM_COPY:
        raise _fail(where, f"sim.{field_name} names {rel}, which never reaches a run's copy")
    if rel not in cache:
        path = fixture_dir / rel
        if not path.is_file():
            raise _fail(where, f"sim.{field_name} names {rel}, which is not a file of the fixture")
        cache[rel] = path.read_text(encoding="utf-8")
    return cache[rel]


class EditMismatch(ValueError):
    """Edit ``index`` (from 1) of a list: its ``old`` text occurs ``count`` times in ``path``, not once."""

    def __init__(self, index: int, path: str, count: int) -> None:
        super().__init__(f"sim.edits[{index}] 'old' text occurs {count} times in {path}")
        self.index, self.path, self.count = index, path, count


def apply_edits(edits: Sequence[SimEdit], read: Callable[[int, str], str]) -> dict[str, str]:
    """``edits`` applied in order (as the sim applies them), each to the result of the previous
    ones on its file; ``read(index, path)`` gives a file's text the first time edit ``index``
    touches it. Returns the edited texts by path; pure but for ``read``."""
    texts: dict[str, str] = {}
    for index, edit in enumerate(edits, 1):
        text = texts[edit.path] if edit.path in texts else read(index, edit.path)
        count = text.count(edit.old)
        if count != 1:
            raise EditMismatch(index, edit.path, count)
        texts[edit.path] = text.replace(edit.old, edit.new, 1)
    return texts


def _parse_sim(where: str, raw: Any, fixture_dir: Path | None) -> SimPlan:
    if not isinstance(raw, dict):
        raise _fail(where, "'sim' must be a mapping (see warden/bench/tasks.py for its schema)")
    missing = [key for key in SIM_REQUIRED if key not in raw]
    if missing:
        raise _fail(where, f"sim block is missing required field(s): {', '.join(missing)}")
    unknown = sorted(set(raw) - set(SIM_REQUIRED) - set(SIM_OPTIONAL))
    if unknown:
        raise _fail(where, f"sim block has unknown field(s): {', '.join(map(str, unknown))}")
    locate = _check_text(where, "sim.locate", raw["locate"], max_chars=200, allow_newlines=False)
    target = _check_rel_path(where, "target", raw["target"])
    related_raw = raw.get("related", []) or []
    if not isinstance(related_raw, list):
        raise _fail(where, "sim.related must be a list of paths")
    related = tuple(_check_rel_path(where, "related", p) for p in related_raw)
    test_command = _check_text(where, "sim.test_command", raw["test_command"], max_chars=MAX_CHECK_BYTES,
                               allow_newlines=False)
    anchor = raw.get("anchor", False)
    if not isinstance(anchor, bool):
        raise _fail(where, "sim.anchor must be true or false")
    edits_raw = raw["edits"]
    if not isinstance(edits_raw, list) or not edits_raw:
        raise _fail(where, "sim.edits must be a non-empty list of {path, old, new}")
    edits: list[SimEdit] = []
    for index, edit in enumerate(edits_raw, 1):
        if not isinstance(edit, dict) or set(edit) != {"path", "old", "new"}:
            raise _fail(where, f"sim.edits[{index}] must have exactly the fields path, old, new")
        path = _check_rel_path(where, f"edits[{index}].path", edit["path"])
        old, new = edit["old"], edit["new"]
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise _fail(where, f"sim.edits[{index}] needs a non-empty 'old' string and a 'new' string")
        if old == new:
            raise _fail(where, f"sim.edits[{index}] changes nothing (old == new)")
        edits.append(SimEdit(path=path, old=old, new=new))
    if fixture_dir is not None:
        texts: dict[str, str] = {}
        searched = [_fixture_text(fixture_dir, target, where, "target", texts)]
        searched += [_fixture_text(fixture_dir, rel, where, "related", texts) for rel in related]
        # A searching agent must find something with it: the target, or the code under test.
        if not any(locate in text for text in searched):
            raise _fail(where, f"sim.locate text {locate!r} occurs in neither sim.target nor sim.related")
        try:
            apply_edits(edits, lambda index, path: _fixture_text(fixture_dir, path, where, f"edits[{index}].path",
                                                                 texts))
        except EditMismatch as exc:
            found = "not found" if exc.count == 0 else f"found {exc.count} times"
            raise _fail(where, f"sim.edits[{exc.index}] 'old' text is {found} in {exc.path}; "
                               "it must occur exactly once") from None
        if not any(edit.path == target for edit in edits):
            raise _fail(where, f"sim.target {target} is not edited by any of sim.edits")
    return SimPlan(locate=locate, target=target, related=related, edits=tuple(edits),
                   test_command=test_command, anchor=anchor)


def load_task(path: Path, agent: str, fixture_dir: Path | None = None) -> GoldenTask:
    """Parse and validate one ``golden-NN.md``. Every problem is a one-line :class:`UsageError`.

    With ``fixture_dir``, the ``sim:`` block is checked against the fixture: paths exist, and
    each reference edit's ``old`` text occurs exactly once (edits applied in order).
    """
    path = Path(path)
    where = f"{agent}/{path.name}"
    try:
        data, body = split_front_matter(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise _fail(where, "is not UTF-8 text") from None
    except OSError as exc:
        raise _fail(where, f"cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise _fail(where, str(exc)) from None
    if data is None:
        raise _fail(where, "has no YAML front matter (--- ... ---)")
    missing = [key for key in REQUIRED_FIELDS if key not in data or data[key] is None]
    if missing:
        raise _fail(where, f"missing required field(s): {', '.join(missing)}")
    task_id = data["id"]
    if not isinstance(task_id, str) or not ID_RE.match(task_id):
        raise _fail(where, f"id {str(task_id)[:80]!r} must match [a-z0-9][a-z0-9-]* (at most 64 characters)")
    if data["agent"] != agent:
        raise _fail(where, f"agent {str(data['agent'])[:80]!r} does not match its directory {agent!r}")
    prompt = _check_text(where, "prompt", data["prompt"], max_chars=MAX_PROMPT_CHARS)
    if prompt.lstrip().startswith("-"):
        raise _fail(where, "prompt must not start with '-' (it would be read as a command-line option)")
    check = data["success_check"]
    if isinstance(check, str) and len(check.encode("utf-8")) > MAX_CHECK_BYTES:
        raise _fail(where, f"success_check is longer than {MAX_CHECK_BYTES} bytes")
    check = _check_text(where, "success_check", check)
    weight = data.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 100:
        raise _fail(where, "weight must be a number in (0, 100]")
    timeout_s = data.get("timeout_s", 120.0)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise _fail(where, f"timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    sim = _parse_sim(where, data["sim"], fixture_dir)
    extra = {k: v for k, v in data.items() if k not in REQUIRED_FIELDS and k not in OPTIONAL_FIELDS}
    return GoldenTask(
        id=task_id, agent=agent, prompt=prompt.strip(), success_check=check.strip(),
        weight=float(weight), timeout_s=float(timeout_s), sim=sim, body=body, path=str(path),
        source_sha256=hashlib.sha256(_normalized_bytes(path)).hexdigest(), extra=extra,
    )


def list_agents(golden_dir: Path) -> list[str]:
    """Agents that have a suite: subdirectories of ``golden_dir`` holding an ``agent.md``."""
    golden_dir = Path(golden_dir)
    if not golden_dir.is_dir():
        raise UsageError(f"golden tasks directory not found: {golden_dir}")
    return sorted(p.name for p in golden_dir.iterdir() if p.is_dir() and (p / AGENT_FILE).is_file())


def compute_suite_hash(agent: str, agent_md_sha256: str, tasks: tuple[GoldenTask, ...]) -> str:
    """Stable hash over the suite's definitions: the agent, its agent.md, and every task file."""
    canonical = json.dumps(
        {"agent": agent, "agent_md": agent_md_sha256,
         "tasks": sorted([t.id, t.source_sha256] for t in tasks)},
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_suite(golden_dir: Path, agent: str, fixture_dir: Path | None = None) -> AgentSuite:
    """Load ``golden_dir/<agent>/``: ``agent.md`` and every ``golden-NN.md``, validated.

    Pass ``fixture_dir`` to also check each task's reference edits against the fixture (the
    bench always does). Tasks are returned ordered by file name.
    """
    if not isinstance(agent, str) or not AGENT_RE.match(agent):
        raise UsageError(f"agent name {str(agent)[:80]!r} must match [a-z0-9][a-z0-9-]*")
    agent_dir = Path(golden_dir) / agent
    agent_md = agent_dir / AGENT_FILE
    if not agent_md.is_file():
        known = ", ".join(list_agents(golden_dir)) if Path(golden_dir).is_dir() else ""
        hint = f" (known agents: {known})" if known else ""
        raise UsageError(f"unknown agent {agent!r}: {agent_md} not found{hint}")
    try:
        front, body = split_front_matter(agent_md.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"agent {agent}/{AGENT_FILE}: {exc}") from None
    model = (front or {}).get("model")
    if model is not None and (not isinstance(model, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}$", model)):
        raise UsageError(f"agent {agent}/{AGENT_FILE}: model must be a model name such as claude-sonnet-4-5")
    system_prompt = body.strip()
    if not system_prompt:
        raise UsageError(f"agent {agent}/{AGENT_FILE}: the system prompt (the body) is empty")
    if first_unsafe_char(system_prompt):
        raise UsageError(f"agent {agent}/{AGENT_FILE}: contains control, bidi or zero-width characters")
    files = sorted(p for p in agent_dir.iterdir() if p.is_file() and TASK_FILE_RE.match(p.name))
    if not files:
        raise UsageError(f"agent {agent} has no golden tasks (golden-NN.md) in {agent_dir}")
    tasks = tuple(load_task(p, agent, fixture_dir) for p in files)
    seen: dict[str, str] = {}
    for task in tasks:
        name = Path(task.path).name
        if task.id in seen:
            raise UsageError(f"golden task {agent}/{name}: duplicate id {task.id!r} (also in {seen[task.id]})")
        seen[task.id] = name
    suite_hash = compute_suite_hash(agent, hashlib.sha256(_normalized_bytes(agent_md)).hexdigest(), tasks)
    return AgentSuite(agent=agent, system_prompt=system_prompt, model=model, tasks=tasks, suite_hash=suite_hash)


def load_all_suites(golden_dir: Path, fixture_dir: Path | None = None) -> dict[str, AgentSuite]:
    """Every agent's suite; task ids must be unique across agents too (runs are keyed by id)."""
    suites = {agent: load_suite(golden_dir, agent, fixture_dir) for agent in list_agents(golden_dir)}
    owner: dict[str, str] = {}
    for agent, suite in suites.items():
        for task in suite.tasks:
            if task.id in owner:
                raise UsageError(f"golden task {agent}/{Path(task.path).name}: duplicate id {task.id!r} "
                                 f"(also used by agent {owner[task.id]})")
            owner[task.id] = agent
    return suites


def apply_reference_edits(task: GoldenTask, workdir: Path) -> None:
    """Apply the task's ``sim.edits`` to a run copy, in order, each exactly once.

    The sim applies the same edits through the harness's edit tool; this direct version is for
    tests and for checking that a task's success check passes with its reference fix.
    """
    if task.sim is None:
        raise UsageError(f"golden task {task.id} has no sim block")
    try:
        texts = apply_edits(task.sim.edits, lambda _, rel: (Path(workdir) / rel).read_text(encoding="utf-8"))
    except EditMismatch as exc:
        raise UsageError(f"golden task {task.id}: sim.edits[{exc.index}] 'old' text does not occur exactly once "
                         f"in {exc.path}") from None
    for rel, text in texts.items():  # written once all matched: a failing list changes no file
        (Path(workdir) / rel).write_text(text, encoding="utf-8")
