"""lab/probes/adapt_headroom.py: the bounds on what acting on the run is worth, on a made-up benchmark."""
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "lab" / "probes"
sys.path.insert(0, str(BENCH))
import adapt_headroom as ah

SEEDS = [7, 8]


def ep(controller, seed, test, val, **kw):
    return {"key": f"v9|{controller}|{seed}", "problem": "p", "controller": controller, "seed": seed,
            "test_accuracy": test, "val_accuracy": val, **kw}


def results():
    # plan A wins seed 7, plan B seed 8; validation points the right way on seed 7 and the wrong way on seed 8
    eps = [ep("plan:A", 7, 60.0, 59.0), ep("plan:A", 8, 50.0, 52.0), ep("plan:B", 7, 54.0, 55.0),
           ep("plan:B", 8, 58.0, 51.0), ep("plan:C", 7, 99.0, 99.0),  # C misses a test seed: not a candidate
           ep("ppo", 7, 56.0, 56.0, run_seed=0, plan="plan:A"), ep("ppo", 8, 57.0, 57.0, run_seed=0, plan="plan:B"),
           ep("open-loop", 7, 60.0, 59.0, run_seed=0, plan="plan:A"),
           ep("open-loop", 8, 50.0, 52.0, run_seed=0, plan="plan:A")]
    # the summary's PPO and open-loop means are the benchmark's (here those of the episodes above)
    return {"summary": {"test_seeds": SEEDS, "problems": [{"problem": "p", "ppo": 56.5, "open-loop": 55.0}]},
            "episodes": eps}


def test_bounds():
    h = ah.headroom(ah.candidate_plans(results()["episodes"], SEEDS)["p"], SEEDS)
    assert h == {"plans": 2, "best plan": 56.0, "per seed, by validation": 55.0, "per seed, by test": 59.0}
    text = ah.report(results())
    assert "| p | 2 | 56.0 | 55.0 | 59.0 | 56.5 | 55.0 | 2 |" in text, text
    assert "gains -1.00 points" in text and "itself +3.00" in text


def test_plays_add_plans_of_the_same_version_only():
    extra = [ep("plan:D", 7, 70.0, 70.0), ep("plan:D", 8, 70.0, 70.0),
             {**ep("plan:E", 7, 90.0, 90.0), "key": "other|plan:E|7"}, {**ep("plan:E", 8, 90.0, 90.0), "key": "o|E|8"}]
    assert "| p | 3 | 70.0 | 70.0 | 70.0 |" in ah.report(results(), extra)


def test_cli_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    for argv, says in (([str(tmp_path / "none.json")], "no file at"), ([str(bad)], "as JSON"),
                       ([str(tmp_path)], "no file at")):
        with pytest.raises(SystemExit) as e:
            ah.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and says in err and err.count("\n") == 1, err
    bad.write_text(json.dumps({"summary": {"test_seeds": [1], "problems": [{"problem": "q", "ppo": 1, "open-loop": 1}]},
                              "episodes": []}))
    with pytest.raises(SystemExit):
        ah.main([str(bad)])
    assert "no fixed plan played on every test seed" in capsys.readouterr().err
    bad.write_text(json.dumps({"summary": {"test_seeds": [1], "problems": [{"problem": "q"}]},
                              "episodes": [{"controller": "plan:A", "problem": "q", "seed": 1, "key": "v|plan:A|1",
                                            "test_accuracy": 5.0, "val_accuracy": 5.0}]}))
    with pytest.raises(SystemExit):
        ah.main([str(bad)])  # a summary without PPO's means
    err = capsys.readouterr().err
    assert "lack a field" in err and err.count("\n") == 1, err
