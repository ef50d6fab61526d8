"""The offline distiller: biggest findings → at most two rule sentences, zero model cost.

One rule per waste kind, worded as the habit's ``rule_sentence`` in :mod:`warden.habits` — the
wording the agent (and the sim backend) understands, and general by construction: it never names
a file, a symbol or the task. Pure.

Learning from the negative dataset: a waste kind whose habit is already named by an *evicted*
rule of the agent has been measured not to pay; the heuristic passes over it to the next-biggest
kind instead of proposing it again. Kinds covered by a live rule (candidate, active, probation,
protected) are proposed as usual and refused by admission as duplicates — so re-distilling the
same session proposes nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass

from warden.distill.detectors import Finding
from warden.habits import HABITS_BY_WASTE

MAX_RULES = 2


@dataclass(frozen=True)
class Proposal:
    body: str
    waste_kind: str | None  # None when a model proposed it without naming a kind
    saving_tokens: float  # the findings' estimated saving this rule targets (0 if unknown)


def propose(findings: list[Finding], evicted_bodies: list[str] | tuple[str, ...] = (),
            max_rules: int = MAX_RULES) -> list[Proposal]:
    """The rule sentences for the biggest waste kinds, biggest first."""
    by_kind: dict[str, float] = {}
    for finding in findings:
        if finding.saving_tokens > 0 and finding.waste_kind in HABITS_BY_WASTE:
            by_kind[finding.waste_kind] = by_kind.get(finding.waste_kind, 0.0) + finding.saving_tokens
    proposals: list[Proposal] = []
    for kind, saving in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        habit = HABITS_BY_WASTE[kind]
        if any(habit.named_by(body) for body in evicted_bodies):
            continue
        proposals.append(Proposal(habit.rule_sentence, kind, saving))
        if len(proposals) >= max_rules:
            break
    return proposals
