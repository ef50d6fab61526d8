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

from dataclasses import dataclass, field


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
