"""What one bench run produces (DESIGN.md §3 "Run result"), and the backend protocol.

Every backend (sim, anthropic, claude-code) turns (task, copy, memory, seed, caps) into a
:class:`RunResult`; the scheduler stores it as a ``BenchRun`` row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

from warden.ingest.pricing import Usage


class Outcome(str, Enum):
    COMPLETED = "completed"  # the success check passed
    TASK_FAILED = "task_failed"  # the agent finished (or hit its turn cap) and the check failed
    INFRA_ERROR = "infra_error"  # API error, timeout, quota, crash of the backend: not the agent
    BUDGET_EXCEEDED = "budget_exceeded"  # token / output / wall-time cap reached


@dataclass(frozen=True)
class RunCaps:
    max_turns: int = 40
    max_output_tokens: int = 16_000
    max_total_tokens: int = 2_000_000
    max_wall_s: float = 300.0


@dataclass
class CallUsage:
    """Usage of one API call of a run."""

    model: str
    usage: Usage
    duration_s: float = 0.0

    def as_dict(self) -> dict:
        u = self.usage
        return {"model": self.model, "input": u.input_tokens, "output": u.output_tokens,
                "cache_write_5m": u.cache_write_5m, "cache_write_1h": u.cache_write_1h,
                "cache_read": u.cache_read, "duration_s": round(self.duration_s, 4)}


@dataclass
class RunResult:
    task_id: str
    backend: str
    model: str
    seed: int
    outcome: Outcome
    completed: bool
    turns: int
    duration_s: float
    calls: list[CallUsage] = field(default_factory=list)
    error: str = ""

    @property
    def usage(self) -> Usage:
        total = Usage()
        for c in self.calls:
            total = total + c.usage
        return total


class AgentBackend(Protocol):
    """Runs one golden task in a prepared throwaway copy and reports what it cost."""

    name: str

    def run(self, task: "GoldenTask", workdir: Path, system_prompt: str, seed: int,  # noqa: F821
            caps: RunCaps) -> RunResult: ...
