"""The simulated coding agent behind the ``sim`` backend — a SIMULATION, never a model's result.

Everything the sim backend reports is measured on this behaviour model, not on a language
model. It exists so that warden runs, tests and calibrates offline, with a known truth. Any
figure produced with it is labelled with backend ``sim`` and a model name ``sim-<persona>-1``.

How it speaks
=============
:class:`SimAgent` answers Messages API requests: given ``system``, ``messages`` and ``tools`` it
returns the next assistant message (``text`` and/or ``tool_use`` blocks) with a ``usage``
object. ``sim_transport.py`` puts it behind an in-process HTTP endpoint, so the real
``anthropic`` SDK client and the real harness (``harness.py``) drive it: every tool call it makes
really runs in the run's throwaway copy (it really greps, really reads whole files, really runs
the full test suite, really rewrites files), and the tool results come back to it in the next
request, exactly as they would to a model.

One :class:`SimAgent` plays one run. It knows the task's ``sim:`` block (where the change lives,
the reference edits, the targeted test — see ``warden/bench/tasks.py``) and its seed; it learns
the rules under test only the way a model does: from the MEMORY.md inside ``system`` (the
bullet lines ``- …`` / ``- (when scope) …`` under warden's generated header).

Phases
======
orient → locate → read → edit → verify → (derail) → report:

* **orient** — lists the project root; habits add planning churn, repeated listings, a glob.
* **locate** — greps the task's ``locate`` text; with *blind reading* it instead opens the
  task's ``related`` files and further files in listing order, whole, before the target.
* **read** — reads the target: the range around the grep hit, or the whole file with
  *whole-file reads*; *re-reading* reads already-read, unchanged files again.
* **edit** — applies the reference edits with ``edit_file`` (exact replacement) or, with
  *rewrite instead of edit*, writes the whole file back (content rebuilt from what it read).
  A *slip* applies only the first ⌊n/2⌋ of n edits (none of a single edit).
* **verify** — runs the targeted test (``sim.test_command``), or the full suite with
  *full test suite*; on a slip it "sees" the failure, applies the remaining edits and runs the
  test again. *Repeated commands* re-runs the identical command.
* **report** — a final text message with no tool call (ends the run).

The run finishes by applying the reference edits through the real edit tool, so the real
success check decides completion.

Habits and the rule wording that reaches them
=============================================
The habit catalogue is shared with the detectors and the distiller: ``warden/habits.py``.
A rule reaches a habit when ``Habit.named_by(rule_body)`` matches (regexes listed there).
How likely each habit is per run is the persona's (:data:`PERSONAS`: the naive persona has the
big ones — blind reading, whole-file reads, full suite, narration — in 90–95% of runs):

==========================  =================================================================
habit                       what the sim does when it fires / rule wording that reaches it
==========================  =================================================================
blind_reading               opens the related + 1–2 listed files (whole, or their first 80
                            lines when whole-file reads are off) before the target /
                            "grep|search … before …", "search first", "grep first"
rereading                   re-reads 1–2 unchanged files / "never|don't|avoid … re-read"
whole_file_reads            reads the whole target (and whole blind reads) instead of a
                            range / "only the relevant lines|range", "line range"
listing_loops               re-lists directories 1–2 more rounds and globs / "list … once",
                            "glob pattern"
full_test_suite             runs ``python -m pytest -q`` (twice 40% of the time) instead of the
                            targeted test / "only … relevant|targeted … tests"
rewrite_instead_of_edit     ``write_file`` of the whole file / "edit … in place",
                            "exact replacement", "instead of rewriting"
verbose_narration           30–80 words of narration before each call and a long report /
                            "be brief|terse|concise", "no narration"
plan_churn                  2–3 planning turns before acting / "one-line plan", "plan once"
repeated_commands           re-runs the verification command unchanged / "don't … re-run …
                            command"
retry_churn                 after a wrong-path error retries the identical call 1–2 times /
                            "after a tool error", "read the error"
ignored_output              a report line per test (pytest ``-rA``) / "limit … output",
                            "quiet flag"
==========================  =================================================================

Size of each habit, as measured on the shipped fixture (naive persona; the saving of the
habit's own ``rule_sentence`` on backend-04, sql-02 and testing-03, 2 seeds each, rent
included): blind reading ~43%, narration ~22%, whole-file reads ~16%, re-reading ~13%, listing
loops ~6%, full test suite ~5%, repeated commands / ignored output / plan churn / retry churn
1–3%, rewriting ~0% (it fires in 15% of runs). "Skip running the tests…" saves ~14% and fails
2 of 6 checks. Re-measure with ``warden sim truth`` after changing the model.

A rule naming a habit suppresses it with probability ``persona.compliance`` (0.88 for the naive
persona): agents do not always obey. A scoped rule ``(when <scope>)`` counts only when a word
of its scope (4+ letters) occurs in the task's prompt or target path. A rule naming nothing the
agent does changes nothing except its rent (it is part of ``system``, so it is paid in every
call).

**False economy.** A rule matching ``habits.is_false_economy`` (skip tests, don't verify, stop
early, …) is obeyed with the same compliance; when obeyed the verify phase is dropped and the
agent rushes: its slip probability rises from ``slip`` (0.15, caught by verification) to
``slip_rushed`` (0.5, never caught) — a partial edit the real success check then fails.

Noise (how the seeded generator is used)
========================================
All random draws come from ``random.Random`` instances seeded with strings
``"warden-sim:<seed>:<task id>:<stream>"`` (string seeds hash with SHA-512, stable across
processes). The *behaviour* draws are made up front in a fixed order, independent of the rules
(common random numbers): per habit a firing uniform, a compliance uniform and an intensity
uniform; then derailment, slip, false-economy compliance and a wrong-path guess. So the same
seed with and without a rule differs only where the rule acts. Narration text comes from a
separate stream. Per run this draws which habits fire (persona probabilities) and how much
(extra files, repeat counts, words), giving the naive persona a run-to-run cost CV of roughly
20–30%. **Derailment**: with probability ``persona.derail`` (0.12) the agent wanders before
reporting — opens unrelated files whole, re-runs the full suite, re-lists — until the run has
cost 1.5–2× (drawn) what it had cost when it began wandering (at most 40 extra calls). Rules
do not prevent derailments. Anchor tasks (``sim.anchor: true``) take no derailment, fire the
habits the persona has more often than not, and draw intensities only from the middle fifth
of their range.

Accounting
==========
Usage emerges from the request bytes, counted with ``warden.tokens.estimate_tokens``. The
prompt is split into segments in API cache order — tool definitions, system, then each
message content block. The longest run of segments identical to the previous call's prompt in
this run is a cache read; the rest is a 5-minute cache write, except a small uncached tail
(≤ 4 tokens) of input. The first call writes the whole prompt. Output = tokens of the generated
text plus the tool-use name and JSON input.

Same seed + same rules + same fixture → the same requests and responses, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from warden.bench.tasks import SimEdit, SimPlan
from warden.habits import HABITS, is_false_economy
from warden.ingest.pricing import DEFAULT_TABLE, Usage
from warden.tokens import estimate_tokens

GENERATED_HEADER = "<!-- generated by warden"  # prefix of warden.select.memory.GENERATED_HEADER
UNCACHED_TAIL_TOKENS = 4
FULL_SUITE_COMMAND = "python -m pytest -q"
MAX_WANDER_STEPS = 40


# --------------------------------------------------------------------------------------------
# Personas
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Persona:
    """A simulated agent's dispositions. Probabilities are per run."""

    name: str
    habit_probability: dict[str, float]
    compliance: float = 0.88  # P(obey a rule that names a habit / a false economy)
    derail: float = 0.12  # P(the run wanders off), regardless of rules
    slip: float = 0.15  # P(first edit pass is partial) — verification catches it
    slip_rushed: float = 0.5  # the same when a false-economy rule removed verification
    wrong_path: float = 0.3  # P(guessing a path that does not exist once)
    version: int = 1

    @property
    def model(self) -> str:
        return f"sim-{self.name}-{self.version}"


PERSONAS: dict[str, Persona] = {
    # Most habits, often: lots of room for rules.
    # Its big habits are near-constant (as a real naive agent's are); how much they cost
    # varies per run, and the small ones come and go.
    "naive": Persona("naive", {
        "blind_reading": 0.95, "rereading": 0.8, "whole_file_reads": 0.95, "listing_loops": 0.75,
        "full_test_suite": 0.9, "rewrite_instead_of_edit": 0.15, "verbose_narration": 0.95,
        "plan_churn": 0.6, "repeated_commands": 0.3, "retry_churn": 0.5, "ignored_output": 0.5,
    }),
    # A disciplined agent: few habits, rarely — rules have little to save.
    "careful": Persona("careful", {
        "blind_reading": 0.1, "rereading": 0.1, "whole_file_reads": 0.2, "listing_loops": 0.05,
        "full_test_suite": 0.2, "rewrite_instead_of_edit": 0.05, "verbose_narration": 0.15,
        "plan_churn": 0.05, "repeated_commands": 0.05, "retry_churn": 0.1, "ignored_output": 0.1,
    }, compliance=0.95, derail=0.08, slip=0.08, slip_rushed=0.35, wrong_path=0.1),
}


def persona_named(name: str) -> Persona:
    try:
        return PERSONAS[name]
    except KeyError:
        raise ValueError(f"unknown sim persona {name!r} (known: {', '.join(sorted(PERSONAS))})") from None


# --------------------------------------------------------------------------------------------
# Rules from the system prompt
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RuleLine:
    body: str
    scope: str | None = None


_SCOPED = re.compile(r"^\(when ([^)]*)\)\s*(.*)$")


def parse_memory_rules(system: str) -> list[RuleLine]:
    """The rule bullets of the warden MEMORY.md embedded in ``system``.

    Bullets count only after the generated header and the "# Working rules" heading, up to the
    next heading or comment, so recovered-checkpoint sections never read as rules."""
    rules: list[RuleLine] = []
    seen_header = in_rules = False
    for raw in system.splitlines():
        line = raw.strip()
        if line.startswith(GENERATED_HEADER):
            seen_header, in_rules = True, False
            continue
        if not seen_header:
            continue
        if line.startswith("#"):
            in_rules = line.lower().startswith("# working rules")
            continue
        if in_rules and line.startswith("<!--"):
            in_rules = False
            continue
        if in_rules and line.startswith("- "):
            body = line[2:].strip()
            m = _SCOPED.match(body)
            rules.append(RuleLine(m.group(2).strip(), m.group(1).strip()) if m else RuleLine(body))
    return rules


def _scope_applies(scope: str | None, task_text: str) -> bool:
    if not scope:
        return True
    words = [w for w in re.findall(r"[a-z0-9_]+", scope.lower()) if len(w) >= 4]
    return any(w in task_text.lower() for w in words)


# --------------------------------------------------------------------------------------------
# Per-run draws (common random numbers)
# --------------------------------------------------------------------------------------------

def _rng(seed: int, task_id: str, stream: str) -> random.Random:
    return random.Random(f"warden-sim:{seed}:{task_id}:{stream}")


@dataclass(frozen=True)
class RunDraws:
    fire: dict[str, float]
    comply: dict[str, float]
    intensity: dict[str, float]
    derail: float
    derail_intensity: float
    slip: float
    false_economy_comply: float
    wrong_path: float

    @classmethod
    def draw(cls, seed: int, task_id: str) -> "RunDraws":
        rng = _rng(seed, task_id, "behaviour")
        fire, comply, intensity = {}, {}, {}
        for habit in HABITS:  # fixed order: the catalogue's
            fire[habit.name] = rng.random()
            comply[habit.name] = rng.random()
            intensity[habit.name] = rng.random()
        return cls(fire, comply, intensity, derail=rng.random(), derail_intensity=rng.random(),
                   slip=rng.random(), false_economy_comply=rng.random(), wrong_path=rng.random())


@dataclass(frozen=True)
class Behaviour:
    """What this run will do, resolved from persona, draws and rules."""

    active: frozenset[str]
    intensity: dict[str, float]
    suppressed: frozenset[str]  # habits that would have fired but a rule stopped them
    false_economy: bool  # verification dropped by an obeyed false-economy rule
    derailed: bool
    derail_intensity: float
    slipped: bool
    wrong_path: bool

    def has(self, habit: str) -> bool:
        return habit in self.active

    def count(self, habit: str, low: int, high: int) -> int:
        """An intensity drawn uniformly in [low, high]."""
        u = self.intensity.get(habit, 0.5)
        return low + min(int(u * (high - low + 1)), high - low)


def resolve_behaviour(persona: Persona, draws: RunDraws, rules: list[RuleLine], task_text: str,
                      anchor: bool = False) -> Behaviour:
    applicable = [r.body for r in rules if _scope_applies(r.scope, task_text)]
    active: set[str] = set()
    suppressed: set[str] = set()
    for habit in HABITS:
        p = persona.habit_probability.get(habit.name, 0.0)
        fires = (p >= 0.5) if anchor else draws.fire[habit.name] < p
        if not fires:
            continue
        named = any(habit.named_by(body) for body in applicable)
        if named and draws.comply[habit.name] < persona.compliance:
            suppressed.add(habit.name)
        else:
            active.add(habit.name)
    false_economy = (any(is_false_economy(body) for body in applicable)
                     and draws.false_economy_comply < persona.compliance)
    slip_p = persona.slip_rushed if false_economy else persona.slip
    # Anchor tasks: habits fire by the persona's majority, intensities stay near the median.
    intensity = {k: (0.4 + 0.2 * v if anchor else v) for k, v in draws.intensity.items()}
    return Behaviour(
        active=frozenset(active), intensity=intensity, suppressed=frozenset(suppressed),
        false_economy=false_economy,
        derailed=(not anchor) and draws.derail < persona.derail,
        derail_intensity=0.5 if anchor else draws.derail_intensity,
        slipped=draws.slip < slip_p, wrong_path=draws.wrong_path < persona.wrong_path)


# --------------------------------------------------------------------------------------------
# Narration (deterministic filler text from a phrase bank)
# --------------------------------------------------------------------------------------------

_NARRATION = (
    "Let me think about how {topic} fits into the rest of the project before changing anything.",
    "I want to be thorough here, so I'll look at {topic} carefully and consider the edge cases.",
    "This could interact with other modules, so it is worth understanding {topic} fully first.",
    "Looking at the structure, {topic} seems to be where the relevant logic is concentrated.",
    "Before I make a change I'll double check my understanding of {topic} and its callers.",
    "There are a few possible approaches; the simplest is to work directly on {topic}.",
    "I'll keep in mind that tests may depend on the current behaviour of {topic}.",
    "Once I have a clear picture of {topic} I can make a focused and safe modification.",
    "It's important not to break existing behaviour, so I'm tracing how {topic} is used.",
    "Next I'll continue with {topic}, then summarise what I found and decide the next step.",
)
_PLANS = (
    "Plan: 1) explore the repository layout, 2) find the code related to the task, 3) read it "
    "carefully, 4) make the change, 5) run the tests, 6) summarise.",
    "Revised plan: first map the modules, then identify every file that might be involved, read "
    "them, and only then decide where the fix belongs. After that, verify with the test suite.",
    "Let me refine the plan once more: I should also consider documentation and tests that could "
    "be affected, and check configuration files in case behaviour is driven from there.",
    "Final plan before acting: survey the directories, read the likely modules in order, make the "
    "minimal edit, and run all tests to be safe. Then write a detailed summary of the change.",
)


def _narrate(rng: random.Random, topic: str, words: int) -> str:
    out: list[str] = []
    count = 0
    while count < words:
        sentence = rng.choice(_NARRATION).format(topic=topic)
        out.append(sentence)
        count += len(sentence.split())
    return " ".join(out)


# --------------------------------------------------------------------------------------------
# The scripted agent
# --------------------------------------------------------------------------------------------

@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False


@dataclass
class Step:
    """One assistant message: optional text, then tool calls (none = final message)."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


_GREP_HIT = re.compile(r"^(?:\./)?([^:\n]+?):(\d+):", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^\s*(\d+)(?:\t|→|: |\| )(.*)$")


def content_from_read(text: str) -> str:
    """Rebuild file text from a whole-file read_file result (``cat -n`` style or plain)."""
    lines = [line for line in text.split("\n") if not line.startswith("… (")]  # "read on" hint
    numbered = [_NUMBERED_LINE.match(line) for line in lines if line.strip()]
    if numbered and all(numbered):
        body = [m.group(2) for m in (_NUMBERED_LINE.match(line) for line in lines) if m]
        return "\n".join(body) + "\n"
    return text


class SimAgent:
    """One simulated run. Stateful over the conversation; deterministic per seed.

    ``respond(request)`` is called once per API call; a retried request (same number of
    assistant turns as already answered) gets the memoised answer, so retries and injected
    errors never change the run."""

    def __init__(self, plan: SimPlan, *, task_id: str, prompt: str, seed: int,
                 persona: Persona | str = "naive") -> None:
        self.plan = plan
        self.task_id = task_id
        self.prompt = prompt
        self.seed = seed
        self.persona = persona_named(persona) if isinstance(persona, str) else persona
        self.model = self.persona.model
        self.behaviour: Behaviour | None = None
        self._text_rng = _rng(seed, task_id, "narration")
        self._script: Generator[Step, list[ToolOutcome], None] | None = None
        self._responses: list[dict[str, Any]] = []
        self._prev_segments: list[tuple[str, int]] = []
        self._applied: list[SimEdit] = []
        self.spent = 0.0  # cost-weighted tokens of the answers given so far (derailment's yardstick)

    # -- the Messages API face ---------------------------------------------------------------

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages") or []
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < len(self._responses):
            return self._responses[turn]
        if turn > len(self._responses):
            raise ValueError(f"conversation has {turn} assistant turns; the sim answered {len(self._responses)}")
        if self._script is None:
            system = _system_text(request.get("system"))
            rules = parse_memory_rules(system)
            task_text = f"{self.prompt}\n{self.plan.target}"
            self.behaviour = resolve_behaviour(self.persona, RunDraws.draw(self.seed, self.task_id),
                                               rules, task_text, anchor=self.plan.anchor)
            self._script = self._play()
            step = next(self._script)
        else:
            try:
                step = self._script.send(_tool_outcomes(messages[-1] if messages else {}))
            except StopIteration:
                step = Step(text="Done.")
        response = self._message(step, turn, request)
        self._responses.append(response)
        return response

    def _message(self, step: Step, turn: int, request: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        for i, (name, tool_input) in enumerate(step.calls):
            content.append({"type": "tool_use", "id": self._id("toolu_sim_", turn, i),
                            "name": name, "input": tool_input})
        if not content:
            content.append({"type": "text", "text": "Done."})
        segments = prompt_segments(request)
        usage = cache_usage(self._prev_segments, segments)
        self._prev_segments = segments
        usage["output_tokens"] = output_tokens(content)
        stop_reason = "tool_use" if step.calls else "end_turn"
        allowed = request.get("max_tokens")
        if isinstance(allowed, int) and 0 < allowed < usage["output_tokens"]:
            # as the API does: the reply stops at max_tokens, mid-text, before any tool call
            words = " ".join(str(b.get("text", "")) for b in content if b["type"] == "text").split()
            content = [{"type": "text", "text": " ".join(words[:max(1, allowed // 2)]) or "…"}]
            usage["output_tokens"], stop_reason = allowed, "max_tokens"
        self.spent += DEFAULT_TABLE.weighted_tokens(self.model, Usage(
            input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"],
            cache_write_5m=usage["cache_creation_input_tokens"], cache_read=usage["cache_read_input_tokens"]))
        return {"id": self._id("msg_sim_", turn, 0), "type": "message", "role": "assistant",
                "model": self.model, "content": content,
                "stop_reason": stop_reason, "stop_sequence": None,
                "usage": usage}

    def _id(self, prefix: str, turn: int, index: int) -> str:
        digest = hashlib.sha256(f"{self.seed}:{self.task_id}:{turn}:{index}".encode()).hexdigest()
        return prefix + digest[:24]

    # -- the behaviour script --------------------------------------------------------------

    def _say(self, topic: str, short: str = "") -> str:
        b = self.behaviour
        assert b is not None
        if b.has("verbose_narration"):
            return _narrate(self._text_rng, topic, b.count("verbose_narration", 30, 80))
        return short

    def _play(self) -> Generator[Step, list[ToolOutcome], None]:
        b = self.behaviour
        assert b is not None
        plan = self.plan
        listing: list[str] = []
        read_whole: set[str] = set()
        file_text: dict[str, str] = {}

        dirs: list[str] = []

        def remember(result_text: str, base: str | None = None) -> None:
            """Learn file paths from a glob (full paths) or a list_dir of ``base`` (names)."""
            for line in result_text.splitlines():
                name = line.strip()
                if not name or name.startswith(("(", "…")):
                    continue
                path = name if base in (None, ".") else f"{base.rstrip('/')}/{name}"
                if path.endswith("/"):
                    if path.rstrip("/") not in dirs:
                        dirs.append(path.rstrip("/"))
                elif path not in listing:
                    listing.append(path)

        # ---- orient
        first_text = self._say("the repository layout", "Plan: find the code, make the change, run the test.")
        if b.has("plan_churn"):
            first_text = _PLANS[0] + ("\n\n" + first_text if b.has("verbose_narration") else "")
        out = yield Step(first_text, [("list_dir", {"path": "."})])
        remember(out[0].text, ".")
        if b.has("plan_churn"):
            for k in range(b.count("plan_churn", 2, 3) - 1):
                d = (dirs or ["."])[k % max(1, len(dirs))]
                out = yield Step(_PLANS[1 + k % (len(_PLANS) - 1)], [("list_dir", {"path": d})])
                remember(out[0].text, d)
        if b.has("listing_loops"):
            for k in range(b.count("listing_loops", 1, 2)):
                for d in (["."] + dirs)[: 2 + k]:
                    out = yield Step(self._say(f"the {d} directory"), [("list_dir", {"path": d})])
                    remember(out[0].text, d)
            out = yield Step(self._say("the Python modules"), [("glob", {"pattern": "**/*.py"})])
            remember(out[0].text)

        # ---- a wrong guess, and retrying it unchanged
        if b.wrong_path:
            guess = "src/" + plan.target.split("/")[-1]
            retries = b.count("retry_churn", 1, 2) if b.has("retry_churn") else 0
            for _ in range(1 + retries):
                out = yield Step(self._say(guess), [("read_file", {"path": guess})])
                if not out[0].is_error:
                    break

        # ---- locate
        hit_line = 0
        if b.has("blind_reading"):
            if not any(p.endswith(".py") for p in listing):
                out = yield Step(self._say("the Python modules"), [("glob", {"pattern": "**/*.py"})])
                remember(out[0].text)
            extra = [p for p in listing if p.endswith(".py") and p != plan.target
                     and p not in plan.related and "test" not in p.split("/")[-1]]
            candidates = list(plan.related) + extra[: b.count("blind_reading", 1, 2)]
            for path in candidates:
                whole = b.has("whole_file_reads")
                args: dict[str, Any] = {"path": path} if whole else {"path": path, "offset": 1, "limit": 80}
                out = yield Step(self._say(path), [("read_file", args)])
                if whole and not out[0].is_error:
                    read_whole.add(path)
                    file_text[path] = out[0].text
        elif plan.locate:
            out = yield Step(self._say(f"where '{plan.locate}' is used", ""),
                             [("grep", {"pattern": re.escape(plan.locate), "path": "."})])
            for m in _GREP_HIT.finditer(out[0].text):
                if m.group(1).removeprefix("./") == plan.target:
                    hit_line = int(m.group(2))
                    break

        # ---- read the target
        if b.has("whole_file_reads") or not hit_line:  # no grep hit = no range to aim at
            out = yield Step(self._say(plan.target), [("read_file", {"path": plan.target})])
            if not out[0].is_error:
                read_whole.add(plan.target)
                file_text[plan.target] = out[0].text
        else:
            start = max(1, hit_line - 40)
            yield Step(self._say(plan.target), [("read_file", {"path": plan.target, "offset": start, "limit": 100})])

        # ---- re-reading
        if b.has("rereading"):
            again = [p for p in [plan.target, *plan.related] if p in read_whole] or [plan.target]
            for k in range(b.count("rereading", 1, 2)):
                path = again[k % len(again)]
                out = yield Step(self._say(f"{path} once more"), [("read_file", {"path": path})])
                if not out[0].is_error:
                    file_text[path] = out[0].text

        # ---- edit (a slip applies only the first half of the edits)
        edits = list(plan.edits)
        first_pass = edits[: len(edits) // 2] if b.slipped else edits
        yield from self._apply(first_pass, file_text)

        # ---- verify
        if not b.false_economy:
            command = self._verify_command()
            out = yield Step(self._say("the tests", "Running the tests."), [("run_command", {"command": command})])
            if b.slipped:
                yield from self._apply(edits[len(first_pass):], file_text)
                out = yield Step(self._say("the tests again", "Re-running the tests."),
                                 [("run_command", {"command": command})])
            if b.has("full_test_suite") and b.count("full_test_suite", 0, 4) >= 3:
                yield Step(self._say("the whole suite once more"), [("run_command", {"command": command})])
            if b.has("repeated_commands"):
                yield Step(self._say("the test output"), [("run_command", {"command": command})])

        # ---- derailment (rules do not prevent it): wander until the run has cost 1.5–2x what
        # it had cost when the wandering began — opening unrelated files whole, re-running the
        # suite, re-listing.
        if b.derailed:
            if not any(p.endswith(".py") for p in listing):
                out = yield Step(self._say("other modules"), [("glob", {"pattern": "**/*.py"})])
                remember(out[0].text)
            wander = [p for p in listing if p != plan.target and p not in plan.related] or [plan.target]
            start = int(b.derail_intensity * 997) % len(wander)
            wander = wander[start:] + wander[:start]
            goal = self.spent * (1.5 + 0.5 * b.derail_intensity)
            for k in range(MAX_WANDER_STEPS):
                if self.spent >= goal:
                    break
                if k % 5 == 4:
                    call = ("run_command", {"command": FULL_SUITE_COMMAND})
                elif k % 7 == 6:
                    call = ("list_dir", {"path": "."})
                else:
                    call = ("read_file", {"path": wander[k % len(wander)]})
                yield Step(self._say("whether this is involved", "Checking something else."), [call])

        # ---- report
        if b.has("verbose_narration"):
            report = ("Summary of the change:\n\n" + _narrate(self._text_rng, plan.target,
                                                               2 * b.count("verbose_narration", 30, 80)))
        else:
            report = f"Done: updated {plan.target}."
        yield Step(report)

    def _apply(self, edits: list[SimEdit], file_text: dict[str, str]) -> Generator[Step, list[ToolOutcome], None]:
        b = self.behaviour
        assert b is not None
        by_path: dict[str, list[SimEdit]] = {}
        for e in edits:
            by_path.setdefault(e.path, []).append(e)
        for path, path_edits in by_path.items():
            if b.has("rewrite_instead_of_edit"):
                if path not in file_text:
                    out = yield Step(self._say(path), [("read_file", {"path": path})])
                    if out[0].is_error:
                        continue
                    file_text[path] = out[0].text
                content = content_from_read(file_text[path])
                if all(e.old in content for e in path_edits):
                    for e in path_edits:
                        content = content.replace(e.old, e.new, 1)
                    yield Step(self._say(f"the new version of {path}"),
                               [("write_file", {"path": path, "content": content})])
                    file_text[path] = content
                    self._applied.extend(path_edits)
                    continue
            for e in path_edits:
                out = yield Step(self._say(f"the change in {path}"),
                                 [("edit_file", {"path": path, "old_string": e.old, "new_string": e.new})])
                if not out[0].is_error:
                    self._applied.append(e)
            file_text.pop(path, None)  # changed since read

    def _verify_command(self) -> str:
        b = self.behaviour
        assert b is not None
        command = self.plan.test_command or FULL_SUITE_COMMAND
        if b.has("full_test_suite"):
            command = FULL_SUITE_COMMAND
        if b.has("ignored_output") and "pytest" in command:
            # A line per test it never reads (-rA, not -v: no header naming the copy's path,
            # which would make identical runs differ by their temp directory).
            command += " -rA"
        return command

    @property
    def applied_all_edits(self) -> bool:
        """The sim's own belief that the reference fix is in place (fast mode's completion)."""
        return len(self._applied) >= len(self.plan.edits)


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return ""


def _tool_outcomes(message: dict[str, Any]) -> list[ToolOutcome]:
    content = message.get("content")
    outcomes: list[ToolOutcome] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                outcomes.append(ToolOutcome(_block_text(block.get("content")), bool(block.get("is_error"))))
    return outcomes or [ToolOutcome("", True)]


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return ""


# --------------------------------------------------------------------------------------------
# Accounting (pure)
# --------------------------------------------------------------------------------------------

def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _without_cache_control(value: Any) -> Any:
    # Breakpoint markers move between calls (the harness marks the last block); they are
    # not prompt content and must not break the cached prefix.
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def prompt_segments(request: dict[str, Any]) -> list[tuple[str, int]]:
    """The prompt in API cache order as (digest, tokens): tools, system, each content block."""
    request = _without_cache_control(request)
    parts: list[str] = []
    tools = request.get("tools")
    if tools:
        parts.append(_canonical(tools))
    system = request.get("system")
    if system:
        parts.append(system if isinstance(system, str) else _canonical(system))
    for message in request.get("messages") or []:
        content = message.get("content")
        role = message.get("role", "")
        if isinstance(content, str):
            parts.append(f"{role}:{content}")
        else:
            for block in content or []:
                parts.append(f"{role}:{_canonical(block)}")
    return [(hashlib.sha1(p.encode("utf-8", "surrogatepass")).hexdigest(), estimate_tokens(p)) for p in parts]


def cache_usage(previous: list[tuple[str, int]], current: list[tuple[str, int]]) -> dict[str, Any]:
    """Cache read = the longest common prefix with the previous call; the rest is written."""
    shared = 0
    for a, b in zip(previous, current):
        if a[0] != b[0]:
            break
        shared += 1
    read = sum(t for _, t in current[:shared])
    suffix = sum(t for _, t in current[shared:])
    uncached = min(suffix, UNCACHED_TAIL_TOKENS)
    write = suffix - uncached
    return {"input_tokens": uncached, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0}}


def output_tokens(content: list[dict[str, Any]]) -> int:
    total = 0
    for block in content:
        if block["type"] == "text":
            total += estimate_tokens(block["text"])
        elif block["type"] == "tool_use":
            total += estimate_tokens(block["name"] + _canonical(block["input"]))
    return max(total, 1)
