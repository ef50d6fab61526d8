"""Ground truth on the sim: true expected cost/saving of a rule set, and the CLI around it."""

from __future__ import annotations

import json

import pytest

from warden.bench.agents.sim_truth import LABEL, true_expected_cost
from warden.bench.fixture import write_manifest
from warden.bench.tasks import AgentSuite
from warden.cli.app import main
from warden.habits import HABITS_BY_NAME

from sim_support import AGENT_MD, TWO_EDIT_TASK, make_project


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    fixture = make_project(tmp_path_factory.mktemp("fixture") / "shop-repo")
    write_manifest(fixture)
    return fixture, AgentSuite("backend", AGENT_MD, None, (TWO_EDIT_TASK,), "suite-hash")


def test_truth_of_a_rule_naming_the_worst_habit_is_a_saving(shop) -> None:
    fixture, suite = shop
    truth = true_expected_cost(suite, [HABITS_BY_NAME["blind_reading"].rule_sentence], 2, fixture_dir=fixture)
    assert truth["label"] == LABEL and truth["backend"] == "sim" and truth["model"] == "sim-naive-1"
    entry = truth["tasks"][TWO_EDIT_TASK.id]
    assert entry["saving"] > 0 and entry["saving_share"] > 0.05
    assert entry["with"]["mean_weighted_tokens"] < entry["without"]["mean_weighted_tokens"]
    assert truth["suite"]["saving"] == pytest.approx(entry["saving"])
    assert truth["suite"]["completion_with"] == truth["suite"]["completion_without"] == 1.0
    json.dumps(truth)  # JSON-able


def test_truth_of_a_false_economy_shows_lost_completions(shop) -> None:
    fixture, suite = shop
    truth = true_expected_cost(suite, ["Skip running the tests once your edit is made."], [2, 3],
                               fixture_dir=fixture)
    assert truth["suite"]["completion_with"] < truth["suite"]["completion_without"] == 1.0


def test_truth_refuses_empty_seeds(shop) -> None:
    fixture, suite = shop
    with pytest.raises(ValueError):
        true_expected_cost(suite, [], [], fixture_dir=fixture)


def test_cli_refuses_a_bad_rule_and_an_unknown_agent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "truth", "--agent", "backend", "--rules", "short"]) == 2
    assert "rule body" in capsys.readouterr().err
    rule = ["--rules", "Grep for the symbol or text you need before opening any file."]
    assert main(["sim", "truth", "--agent", "no-such-agent", "--seeds", "1", *rule]) == 2
    assert "unknown agent" in capsys.readouterr().err
    assert main(["sim", "truth", "--agent", "backend", "--seeds", "1"]) == 2  # nothing to measure
    assert "--rules BODY" in capsys.readouterr().err
