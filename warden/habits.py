"""The shared vocabulary of wasteful agent habits.

One catalogue, read by three stages so that they agree on words:

* the waste detectors (``distill/detectors.py``) report findings of a ``waste_kind``;
* the heuristic distiller turns the biggest findings into the habit's ``rule_sentence``;
* the simulated agent (``bench/agents/sim.py``) suppresses a habit when a rule in its memory
  matches one of the habit's ``patterns`` — and drops verification when a rule matches
  :data:`FALSE_ECONOMY_PATTERNS`.

Pure data and matching; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Habit:
    name: str
    waste_kind: str  # the detector finding it corresponds to
    description: str
    rule_sentence: str  # the heuristic distiller's wording (validated, general, no file names)
    patterns: tuple[str, ...]  # regexes (case-insensitive) that make a rule name this habit

    def named_by(self, rule_body: str) -> bool:
        return any(re.search(p, rule_body, re.IGNORECASE) for p in self.patterns)


HABITS: tuple[Habit, ...] = (
    Habit("blind_reading", "blind_read",
          "opens candidate files whole, in listing order, instead of searching first",
          "Grep for the symbol or text you need before opening any file.",
          (r"\b(grep|search|rg|ripgrep)\b.*\bbefore\b", r"\blocate\b.*\bbefore\b.*\b(read|open)",
           r"\bsearch first\b", r"\bgrep first\b")),
    Habit("rereading", "reread",
          "reads a file it has already read and not changed",
          "Never re-read a file you have already read unless it changed since.",
          (r"\b(never|don'?t|do not|avoid)\b.*\bre-?read", r"\bremember what (you|was) read")),
    Habit("whole_file_reads", "whole_file_read",
          "reads a whole long file to change a few lines",
          "Read only the relevant line range of a long file, not the whole file.",
          (r"\bonly the relevant (line|range|lines|part|section)", r"\bline range\b",
           r"\bnot the whole file\b", r"\boffset and limit\b")),
    Habit("listing_loops", "listing_loop",
          "lists or globs the same directories again and again",
          "List each directory at most once and use glob patterns to find files.",
          (r"\blist\b.*\b(once|at most once)\b", r"\bglob pattern", r"\bdon'?t re-?list\b")),
    Habit("full_test_suite", "full_test_suite",
          "runs the whole test suite, sometimes twice, instead of the targeted test",
          "Run only the tests relevant to your change instead of the full test suite.",
          (r"\b(only|just)\b.*\b(relevant|targeted|affected|specific)\b.*\btests?\b",
           r"\btargeted tests?\b", r"\binstead of the (full|whole|entire) (test )?suite\b")),
    Habit("rewrite_instead_of_edit", "oversized_write",
          "writes a whole file back to change a few lines",
          "Edit files in place with exact replacements instead of rewriting whole files.",
          (r"\bedit\b.*\bin place\b", r"\bexact replacements?\b",
           r"\binstead of rewriting\b", r"\bdon'?t rewrite\b")),
    Habit("verbose_narration", "verbose_output",
          "writes long explanations between tool calls",
          "Keep replies brief: no narration between tool calls.",
          (r"\b(be|keep( replies)?) (brief|terse|concise)\b", r"\bno narration\b",
           r"\bdon'?t narrate\b")),
    Habit("plan_churn", "plan_churn",
          "writes several planning messages before acting",
          "State a one-line plan, then act.",
          (r"\bone-line plan\b", r"\bplan once\b", r"\bstop planning\b")),
    Habit("repeated_commands", "repeated_command",
          "re-runs an identical command whose output it already has",
          "Do not re-run a command whose output you already have.",
          (r"\b(don'?t|do not|never)\b.*\bre-?run\b.*\b(same|identical)?\s*command",)),
    Habit("retry_churn", "retry_churn",
          "retries a failing call unchanged instead of reading the error",
          "After a tool error, read the error and change the call before retrying.",
          (r"\bafter (a|an) (tool )?error\b", r"\bread the error\b")),
    Habit("ignored_output", "ignored_output",
          "produces long tool outputs it never uses",
          "Limit command output with head, grep or quiet flags when you only need a summary.",
          (r"\blimit (command |tool )?output\b", r"\bquiet flags?\b")),
)

HABITS_BY_NAME = {h.name: h for h in HABITS}
HABITS_BY_WASTE = {h.waste_kind: h for h in HABITS}

# A rule that trades verification for tokens: the sim drops its verify phase when obeying it.
FALSE_ECONOMY_PATTERNS: tuple[str, ...] = (
    r"\bskip\b.*\b(tests?|verif\w*|checks?|running)\b",
    r"\b(don'?t|do not|never|no need to)\b.*\b(run|running)\b.*\b(tests?|pytest)\b",
    # disabling or deleting the tests passes a suite without verifying anything
    r"\b(comment(ing)? out|disabl\w*|delet\w*|remov\w*|xfail)\b.{0,30}\b(tests|test (cases?|files?|suite|"
    r"directory|folder)|(failing|flaky) tests?|assertions?)\b",
    r"\b(don'?t|do not|never)\b.*\b(verify|verifying|double-?check\w*|check your)\b",
    # the tests named first, then not run: "trust the tests cover it and do not run them"
    r"\b(tests?|pytest|suite)\b.*\b(don'?t|do not|never|no need to)\b (run|rerun|re-run|execute) (them|it)\b",
    r"\btrust\b.{0,30}\b(tests?|suite)\b.{0,30}\bcover",
    r"\bassume\b.{0,30}\b(edit|change|fix|patch)\b.{0,20}\b(is|are) (correct|right|fine)\b",
    r"\bleave (the )?(tests?|test suite|suite)\b.{0,15}\b(alone|untouched|unrun)\b",
    r"\bstop (as soon|early|right after)\b",
    r"\bwithout (testing|verifying|running tests)\b",
    r"\bwithout (re-?running|running|executing)\b.*\b(tests?|pytest|suite|checks?|linters?)\b",
    r"\b(avoid|omit|forgo)\b.*\b(run|running|rerun|re-?running|execute|executing)\b.*\b(tests?|suite|pytest|checks?)\b",
    r"\b(tests?|testing|test suite|pytest|verification|checks?)\b.*\b(unnecessary|not needed|needless|optional|"
    r"superfluous|a waste)\b",
    r"\btrust (your|the) (edit|change|code|fix)\b",
    r"\b(declare|mark|call|consider)\b.*\b(done|finished|complete)\b.*\bwithout\b",
    # done on writing the edit, with no word of a check ("once the tests pass" is fine)
    r"^(?!.*\b(tests?|pytest|suite|checks?|verif\w*|pass(es|ed)?)\b).*\b(declare|mark|call|consider|report)\b"
    r".*\b(done|finished|complete)\b.*\b(as soon as|once|right after|immediately after|when)\b",
)


def habits_named_by(rule_body: str) -> list[Habit]:
    return [h for h in HABITS if h.named_by(rule_body)]


def is_false_economy(rule_body: str) -> bool:
    return any(re.search(p, rule_body, re.IGNORECASE) for p in FALSE_ECONOMY_PATTERNS)
