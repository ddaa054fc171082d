"""lab/probes/first_decision.py: a policy's first germination, problem by problem; bad input ends in one line."""
import json
import sys
from pathlib import Path

import pytest

from esper.cli import main

BENCH = Path(__file__).resolve().parents[1] / "lab" / "probes"
sys.path.insert(0, str(BENCH))
import first_decision as fd


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    "A flat and a factored policy trained for two episodes on the tiny suite."
    d = tmp_path_factory.mktemp("fd")
    flags = ["ppo", "--suite", "tiny", "--features", "run", "--vectorized", "--n-envs", "2", "--n-episodes", "2",
             "--workers", "0", "--no-progress"]
    assert main([*flags, "--save", str(d / "flat.pt")]) == 0
    assert main([*flags, "--factored", "--save", str(d / "factored.pt")]) == 0
    return d


def test_first_choice_reads_the_first_legal_germination(checkpoints):
    "The probabilities are the actor's over its legal actions at a decision where germinating was legal."
    from esper.leyline import ActionSpace
    from esper.simic.envs.env import load_ppo_controller
    from esper.tamiyo.suite_report import play_policy
    from esper.tamiyo.problems import get_suite

    ctl, suite = load_ppo_controller(str(checkpoints / "flat.pt")), get_suite("tiny")
    play_policy(ctl, suite, suite.problems[0], 0)
    c = fd.first_choice(ctl, ActionSpace(suite.blueprints))
    assert c is not None and c["decision"] == 0  # a fresh host: germinating is legal at once
    assert sum(c["probs"].values()) == pytest.approx(1.0)
    assert set(c["probs"]) == {"WAIT", *suite.blueprints, "ADVANCE", "FOSSILIZE", "PRUNE"}
    assert c["probs"]["PRUNE"] == 0.0  # nothing to prune: masked


def test_a_factored_checkpoint_is_one_line(checkpoints, tmp_path, capsys):
    out = tmp_path / "fd.json"
    code = fd.main(["--suite", "tune", "--trained-on", "tiny", "--seeds", "0", "--out", str(out),
                    "--policies", f"f={checkpoints / 'factored.pt'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "flat feed-forward policies only" in err[0], err
    assert not out.exists()


def test_bad_arguments_are_refused_before_any_episode(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        fd.main(["--suite", "heldout", "--out", str(tmp_path / "x.json"), "--policies", "a=nowhere.pt"])
    assert e.value.code == 2 and "--suite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        fd.main(["--out", str(tmp_path / "x.json"), "--policies", "a=nowhere.pt"])
    assert e.value.code == 2 and "existing checkpoint" in capsys.readouterr().err
    (tmp_path / "old.json").write_text(json.dumps({}))
    with pytest.raises(SystemExit) as e:
        fd.main(["--out", str(tmp_path / "old.json"), "--policies", f"a={tmp_path / 'old.json'}"])
    assert e.value.code == 2 and "--overwrite" in capsys.readouterr().err


def test_probe_suite_is_a_few_of_trains_problems(capsys, tmp_path):
    "A probe's suite keeps train's problems as they are, in the order given; a name train lacks is one line."
    from esper.tamiyo.problems import get_suite

    name = fd.probe_suite(["mnist1d-shuffled-p2500", "mnist1d-p2500"])
    assert fd.probe_suite(["mnist1d-shuffled-p2500", "mnist1d-p2500"]) == name  # registering again is a no-op
    train, probe = get_suite("train"), get_suite(name)
    test_names = ("mnist1d-shuffled-p2500", "mnist1d-p2500")
    assert probe.names == test_names and all(probe[n] is train[n] for n in test_names)
    assert probe.version == train.version and probe.blueprints == train.blueprints
    for bad in (["mnist1d-p9999"], ["mnist1d-p2500", "mnist1d-p2500"], []):
        with pytest.raises(ValueError, match="--problems"):
            fd.probe_suite(bad)
    with pytest.raises(SystemExit) as e:
        fd.main(["--problems", "nowhere", "--out", str(tmp_path / "x.json"), "--policies", "a=nowhere.pt"])
    assert e.value.code == 2 and "nowhere" in capsys.readouterr().err
