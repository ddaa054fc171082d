"""A controller is one entry of the registry in `esper.tamiyo.controllers`: a throwaway one, registered in-process, is
played by the library's comparison and by `esper-train compare --controllers NAME`, with no other file edited."""
import json

import pytest

from esper.cli import main
from esper.tamiyo.baselines import StaticTamiyo
from esper.tamiyo.comparison import ComparisonSettings, run_comparison
from esper.tamiyo.controllers import CONTROLLER_REGISTRY, controller_names, make_controller, register_controller
from esper.tamiyo.plan_search import Play, play
from esper.tamiyo.problems import TINY

SHORT = ["--seeds", "0", "--max-epochs", "2", "--max-batches", "2"]


class WaitCounter(StaticTamiyo):
    "Waits, like the static host, and counts the decisions it was asked for."

    def __init__(self):
        self.decisions = 0

    def decide(self, observation, model):
        self.decisions += 1
        return super().decide(observation, model)


@pytest.fixture
def throwaway():
    "Register `wait_counter` for one test, and leave the registry as it was."
    built = []

    @register_controller("wait_counter")
    def _wait_counter(seed, options, arg):
        built.append(WaitCounter())
        return built[-1]

    try:
        yield built
    finally:
        del CONTROLLER_REGISTRY["wait_counter"]


def test_one_vocabulary_for_every_caller():
    assert controller_names()[:10] == ("static", "random", "heuristic", "greedy", "fixed", "plan:<plan>",
                                       "reactive:<k>/<x>", "replant:<plan>~<fallback>", "selector:<file>", "ppo")
    assert str(make_controller("plan:conv_heavy@block1/1").plan) == "conv_heavy@block1/1"
    with pytest.raises(ValueError, match="unknown controller 'oracle'; choose from static, random"):
        make_controller("oracle")


def test_a_registered_controller_plays_in_the_comparison(throwaway):
    res = run_comparison("mnist1d", ("static", "wait_counter"), (0,),
                         ComparisonSettings(max_epochs=2, max_batches=2), progress=False)
    assert [r["controller"] for r in res["rows"]] == ["static", "wait_counter"]
    assert len(throwaway) == 1 and throwaway[0].decisions > 0  # built once for its one episode, and asked
    same = ("final_accuracy", "params_added")  # it waits, so it grows nothing: the static host's episode
    assert [res["episodes"]["wait_counter"][0][k] for k in same] == [res["episodes"]["static"][0][k] for k in same]


def test_a_registered_controller_plays_in_the_plan_search(throwaway):
    row = play(Play(TINY.problems[0], "wait_counter", 1000))
    assert row["controller"] == "wait_counter" and row["grown"] == ""


def test_a_registered_controller_is_a_choice_of_the_command_line(throwaway, tmp_path, capsys):
    assert main(["compare", "--controllers", "wait_counter", *SHORT, "--out", str(tmp_path / "cmp")]) == 0
    assert "| wait_counter |" in capsys.readouterr().out
    saved = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert [r["controller"] for r in saved["rows"]] == ["wait_counter"]
    with pytest.raises(SystemExit):
        main(["compare", "--controllers", "nobody", *SHORT, "--out", str(tmp_path / "no")])
    assert "unknown controller 'nobody'; choose from static" in capsys.readouterr().err
