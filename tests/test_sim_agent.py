"""The simulated agent: behaviour model, accounting, determinism, rules, false economies, errors.

Runs go through the real harness and the real anthropic SDK client over the in-process
transport, on a tiny temp project (tests/sim_support.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from warden.bench.agents import get_backend
from warden.bench.agents.harness import RetryPolicy
from warden.bench.agents.sim import (PERSONAS, RunDraws, cache_usage, content_from_read,
                                     parse_memory_rules, prompt_segments, resolve_behaviour)
from warden.bench.agents.sim_backend import SimBackend
from warden.bench.results import Outcome, RunCaps
from warden.config import load_settings
from warden.habits import HABITS_BY_NAME
from warden.ingest.pricing import DEFAULT_TABLE
from warden.select.memory import MemoryRule, render_memory

from sim_support import TWO_EDIT_TASK, make_project, system_prompt

GREP_RULE = HABITS_BY_NAME["blind_reading"].rule_sentence
SKIP_TESTS_RULE = "Skip running the tests once your edit is made."
NO_SLEEP = RetryPolicy(sleep=lambda _s: None)


def play(tmp_path: Path, seed: int, *rules: str, name: str = "", backend: SimBackend | None = None):
    workdir = make_project(tmp_path / f"run-{seed}-{name or len(rules)}")
    backend = backend or SimBackend(retry=NO_SLEEP)
    result = backend.run(TWO_EDIT_TASK, workdir, system_prompt(*rules), seed, RunCaps())
    return result, backend.last_transport


@pytest.fixture(scope="module")
def cached_play(tmp_path_factory: pytest.TempPathFactory):
    """Runs are deterministic: tests share them instead of replaying (keeps the file fast)."""
    cache: dict[tuple, tuple] = {}

    def get(seed: int, *rules: str):
        key = (seed, rules)
        if key not in cache:
            cache[key] = play(tmp_path_factory.mktemp("sim"), seed, *rules)
        return cache[key]

    return get


def weighted(result) -> float:
    return DEFAULT_TABLE.weighted_tokens(result.model, result.usage)


# ------------------------------------------------------------------ pure parts


def test_rules_are_read_from_the_generated_memory_only() -> None:
    rules = [MemoryRule(1, "Grep for the symbol or text you need before opening any file."),
             MemoryRule(2, "Run only the tests relevant to your change.", scope="editing money code")]
    checkpoints = "## Recovered checkpoints\n- never re-read files (a checkpoint bullet, not a rule)"
    system = "- agent.md bullet, not a rule\n\n" + render_memory("backend", rules, 3, [checkpoints])
    parsed = parse_memory_rules(system)
    assert [(r.body, r.scope) for r in parsed] == [
        ("Grep for the symbol or text you need before opening any file.", None),
        ("Run only the tests relevant to your change.", "editing money code")]
    assert parse_memory_rules("no memory here\n- a bullet") == []


def test_a_named_habit_is_suppressed_with_compliance_below_one() -> None:
    naive = PERSONAS["naive"]
    rule = parse_memory_rules(system_prompt(GREP_RULE))
    fired = suppressed = 0
    for seed in range(400):
        draws = RunDraws.draw(seed, "t")
        without = resolve_behaviour(naive, draws, [], "task")
        with_rule = resolve_behaviour(naive, draws, rule, "task")
        assert with_rule.active - {"blind_reading"} == without.active - {"blind_reading"}  # only it moves
        if without.has("blind_reading"):
            fired += 1
            suppressed += not with_rule.has("blind_reading")
    assert 0.8 < suppressed / fired < 0.96  # obeyed often, not always


def test_scoped_rule_applies_only_when_its_scope_matches_the_task() -> None:
    naive = PERSONAS["naive"]
    rule = parse_memory_rules(render_memory("a", [MemoryRule(1, GREP_RULE, scope="invoice export")]))
    draws = next(d for d in (RunDraws.draw(s, "t") for s in range(100))
                 if d.fire["blind_reading"] < 0.8 and d.comply["blind_reading"] < 0.88)
    assert resolve_behaviour(naive, draws, rule, "fix the invoice totals").has("blind_reading") is False
    assert resolve_behaviour(naive, draws, rule, "fix rounding in money").has("blind_reading") is True


def test_false_economy_rule_drops_verification_and_raises_slips() -> None:
    naive = PERSONAS["naive"]
    rule = parse_memory_rules(system_prompt(SKIP_TESTS_RULE))
    obeyed = [resolve_behaviour(naive, RunDraws.draw(s, "t"), rule, "task") for s in range(300)]
    assert 0.8 < sum(b.false_economy for b in obeyed) / 300 < 0.96
    slips = [b.slipped for b in obeyed if b.false_economy]
    assert 0.35 < sum(slips) / len(slips) < 0.65
    assert not any(resolve_behaviour(naive, RunDraws.draw(s, "t"), [], "task").false_economy for s in range(50))


def test_cache_accounting_reads_the_shared_prefix_and_writes_the_rest() -> None:
    first = {"system": "S" * 400, "tools": [{"name": "t"}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]}]}
    second = {**first, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A" * 80}]},
        {"role": "user", "content": [{"type": "text", "text": "B" * 40, "cache_control": {"type": "ephemeral"}}]}]}
    seg1, seg2 = prompt_segments(first), prompt_segments(second)
    u1 = cache_usage([], seg1)
    assert u1["cache_read_input_tokens"] == 0
    assert u1["input_tokens"] + u1["cache_creation_input_tokens"] == sum(t for _, t in seg1)
    u2 = cache_usage(seg1, seg2)  # the moved breakpoint does not break the prefix
    assert u2["cache_read_input_tokens"] == sum(t for _, t in seg1)
    assert u2["cache_read_input_tokens"] + u2["cache_creation_input_tokens"] + u2["input_tokens"] == sum(t for _, t in seg2)
    assert 0 < u2["input_tokens"] <= 4


def test_content_is_rebuilt_from_a_numbered_read() -> None:
    assert content_from_read("     1\tdef f():\n     2\t\n     3\t    return 1") == "def f():\n\n    return 1\n"


# ------------------------------------------------------------------ whole runs


def test_same_seed_gives_the_same_run_byte_for_byte(tmp_path: Path, cached_play) -> None:
    a, ta = cached_play(0)
    b, tb = play(tmp_path, 0, name="b")
    assert a.outcome == b.outcome == Outcome.COMPLETED
    assert [c.as_dict() | {"duration_s": 0} for c in a.calls] == [c.as_dict() | {"duration_s": 0} for c in b.calls]

    def wire(transport) -> str:  # pytest prints its wall time; that is the only varying text
        dump = json.dumps([(e.status, e.request, e.response) for e in transport.exchanges], sort_keys=True)
        return re.sub(r"in \d+\.\d+s", "in Xs", dump)

    assert wire(ta) == wire(tb)
    c, _ = cached_play(1)
    assert [x.as_dict()["output"] for x in c.calls] != [x.as_dict()["output"] for x in a.calls]


def test_usage_has_cache_reads_after_the_first_call_and_a_sim_label(cached_play) -> None:
    result, _ = cached_play(3)
    assert result.backend == "sim" and result.model == "sim-naive-1"
    assert result.calls[0].usage.cache_read == 0 and result.calls[0].usage.cache_write_5m > 0
    assert all(c.usage.cache_read > 0 for c in result.calls[1:])
    assert all(c.usage.output_tokens > 0 for c in result.calls)


def test_a_rule_naming_the_worst_habit_makes_runs_visibly_cheaper(cached_play) -> None:
    seeds = range(4)
    naive = [cached_play(s)[0] for s in seeds]
    ruled = [cached_play(s, GREP_RULE)[0] for s in seeds]
    assert all(r.completed for r in naive + ruled)
    assert sum(map(weighted, ruled)) < 0.85 * sum(map(weighted, naive)), (naive, ruled)


def test_an_unrelated_rule_changes_only_the_rent(cached_play) -> None:
    plain, tp = cached_play(2)
    ruled, tr = cached_play(2, "Prefer British spelling in user-facing documentation.")
    assert [e.response["content"] for e in tp.exchanges] == [e.response["content"] for e in tr.exchanges]
    assert weighted(ruled) > weighted(plain)  # the rent, paid in every call


def test_a_skip_tests_rule_makes_the_check_fail_on_some_seeds(cached_play) -> None:
    outcomes = [cached_play(s, SKIP_TESTS_RULE)[0].outcome for s in range(4)]
    assert Outcome.TASK_FAILED in outcomes
    assert Outcome.COMPLETED in outcomes


def test_overloaded_responses_end_the_run_as_infra_error(tmp_path: Path) -> None:
    backend = SimBackend(retry=NO_SLEEP, faults={i: 529 for i in range(10)})
    result, transport = play(tmp_path, 1, backend=backend)
    assert result.outcome == Outcome.INFRA_ERROR and not result.completed
    assert "529" in result.error and "overloaded" in result.error.lower()
    assert [e.status for e in transport.exchanges] == [529] * NO_SLEEP.max_attempts


def test_a_transient_overload_is_retried_without_changing_the_run(tmp_path: Path, cached_play) -> None:
    clean, tc = cached_play(1)
    flaky, tf = play(tmp_path, 1, name="flaky", backend=SimBackend(retry=NO_SLEEP, faults={2: 529, 5: 503}))
    assert flaky.outcome == clean.outcome == Outcome.COMPLETED
    assert [e.status for e in tf.exchanges].count(529) == 1
    assert [e.response for e in tf.exchanges if e.status == 200] == [e.response for e in tc.exchanges]


def test_fast_mode_skips_the_check_and_agrees_with_it(tmp_path: Path, cached_play) -> None:
    outcomes = set()
    # seed 2 slips under the rule, seed 3 does not; seed 0 without rules runs its tests
    for seed, rules in ((2, (SKIP_TESTS_RULE,)), (3, (SKIP_TESTS_RULE,)), (0, ())):
        real = cached_play(seed, *rules)[0]
        outcomes.add(real.outcome)
        fast = play(tmp_path, seed, *rules, name=f"fast{len(rules)}", backend=SimBackend(fast=True))[0]
        assert fast.completed == real.completed
        assert fast.usage == real.usage
    assert outcomes == {Outcome.COMPLETED, Outcome.TASK_FAILED}  # both branches were compared


def test_backend_factory_builds_the_sim(tmp_path: Path) -> None:
    backend = get_backend("sim", load_settings())
    assert backend.name == "sim" and backend.model == "sim-naive-1"
    assert get_backend("sim", load_settings(), model="sim-careful-1").model == "sim-careful-1"


def test_a_task_without_sim_block_is_an_infra_error(tmp_path: Path) -> None:
    import dataclasses

    task = dataclasses.replace(TWO_EDIT_TASK, sim=None)
    result = SimBackend().run(task, make_project(tmp_path / "p"), system_prompt(), 0, RunCaps())
    assert result.outcome == Outcome.INFRA_ERROR and "sim" in result.error


@pytest.mark.parametrize("status", [400, 401])
def test_non_retryable_errors_are_infra_errors_too(tmp_path: Path, status: int) -> None:
    result, transport = play(tmp_path, 0, backend=SimBackend(retry=NO_SLEEP, fail_every=status))
    assert result.outcome == Outcome.INFRA_ERROR and len(transport.exchanges) == 1


@pytest.mark.parametrize("cap", [1, 60])
def test_a_small_output_cap_is_a_budget_stop_not_an_infrastructure_error(tmp_path: Path, cap: int) -> None:
    """The sim answers within the request's max_tokens as the API does (stop_reason max_tokens),
    so an output cap ends the run as budget_exceeded — never as an unusable response."""
    result = SimBackend(retry=NO_SLEEP).run(TWO_EDIT_TASK, make_project(tmp_path / "p"), system_prompt(), 5,
                                            RunCaps(max_output_tokens=cap))
    assert result.outcome is Outcome.BUDGET_EXCEEDED, result.error
    assert sum(c.usage.output_tokens for c in result.calls) <= cap
