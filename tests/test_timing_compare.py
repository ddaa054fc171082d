"""lab/probes/timing_compare.py: two headroom reports paired by problem and test seed, on made-up episodes."""
import json
import sys
from pathlib import Path

import pytest

PROBES = Path(__file__).resolve().parents[1] / "lab" / "probes"
sys.path.insert(0, str(PROBES))
import timing_compare as tc

from esper.tamiyo.plan_search import Play, PlayCache
from esper.tamiyo.problems import TINY

SEEDS = [4000, 4001]
LATE, EARLY = "plan:conv_small@block1/2", "plan:conv_small@block1/1"
SINGLE = "plan:global_mix@block1/1"


def report(oracle: str, epochs: str) -> dict:
    problems = [{"problem": p.name, "oracle_plan": oracle} for p in TINY.problems]
    return {"suite": "tiny", "version": 1, "test_seeds": SEEDS, "best_single_rule": SINGLE, "problems": problems,
            "command": f"python bench/suite_headroom.py --epochs {epochs}"}


def cache() -> PlayCache:
    c = PlayCache(None)
    made_up = {LATE: (62.0, 66.0), EARLY: (60.0, 61.0), SINGLE: (50.0, 50.0)}
    for p in TINY.problems:
        for controller, accs in made_up.items():
            for s, acc in zip(SEEDS, accs):
                c.add({"key": Play(p, controller, s).key, "problem": p.name, "controller": controller, "seed": s,
                       "test_accuracy": acc})
    return c


def test_the_oracles_and_single_rules_are_paired_by_problem_and_seed():
    c = tc.compare(report(LATE, "1 2"), report(EARLY, "1"), cache())
    o, s = c["summary"]["oracle"], c["summary"]["best single rule"]
    assert (o["timing"], o["epoch 1"], o["difference"], o["pairs"]) == (64.0, 60.5, 3.5, 4)
    assert o["ci95"] == pytest.approx(3.182 * 1.7320508 / 2, rel=1e-3)  # differences 2, 5, 2, 5
    assert (s["difference"], s["ci95"]) == (0.0, 0.0)
    assert "oracle: 64.00 with timing, 60.50 with epoch 1 alone; timing less epoch 1 +3.50" in tc.markdown(c)


def test_reports_that_differ_or_episodes_not_played_end_in_one_line(tmp_path, capsys):
    other = report(EARLY, "1") | {"test_seeds": [4000]}
    with pytest.raises(SystemExit, match="differ in suite or test seeds"):
        tc.compare(report(LATE, "1 2"), other, cache())
    with pytest.raises(SystemExit, match="is not in the cache"):
        tc.compare(report("plan:static", "1 2"), report(EARLY, "1"), cache())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "headroom.json").write_text(json.dumps(report(LATE, "1 2")))
    with pytest.raises(SystemExit):
        tc.main(["--timing", str(tmp_path / "a"), "--epoch1", str(tmp_path / "b"), "--out", str(tmp_path / "o")])
    assert "--epoch1: " in capsys.readouterr().err and not (tmp_path / "o").exists()
