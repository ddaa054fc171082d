"""lab/probes/selector.py on the `tiny` suite at toy size: it fits the selector on the plan search, plays its plans,
compares them paired with a suite benchmark's episodes and writes both files; a second run plays nothing (the cache),
an earlier --out is never replaced by accident, and bad flags end in one line."""
import json
from pathlib import Path

import pytest

from conftest import load_script

TEST_SEEDS = [2000, 2001]


def _probe():
    return load_script("lab/probes/selector.py", "selector_probe")


def _bench(tmp_path: Path) -> Path:
    "A suite benchmark's results on `tiny`, made up: every arm the probe compares with, on the test seeds."
    from esper.tamiyo.problems import get_suite

    tiny = get_suite("tiny")
    plans = {"mnist1d-small": "plan:conv_small@block1/1", "digits-noisy": "plan:global_mix@block1/1"}
    episodes = [{"problem": p, "seed": s, "controller": c, "test_accuracy": acc, "run_seed": run}
                for p in tiny.names for s in TEST_SEEDS
                for c, acc, run in [("ppo", 50.0, 0), ("ppo", 52.0, 1), ("open-loop", 49.0, 0), ("greedy", 45.0, None),
                                    ("plan:static", 30.0, None), (plans[p], 55.0, None)]]
    summary = {"suite": "tiny", "version": tiny.version, "test_seeds": TEST_SEEDS, "rule": "greedy",
               "problems": [{"problem": p, "best_rule_plan": "plan:static", "oracle_plan": plans[p]}
                            for p in tiny.names]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"config": {"episodes": 10}, "summary": summary, "episodes": episodes}))
    return path


def test_the_tiny_suite_end_to_end(tmp_path, capsys):
    probe = _probe()
    args = ["--train-suite", "tiny", "--suite", "tiny", "--bench", str(_bench(tmp_path)), "--tune-seeds", "1000",
            "--cache", str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")]
    probe.main(args)
    first = capsys.readouterr().out
    assert "| problem | nearest train problem |" in first and "PPO less selector" in first
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [p["problem"] for p in r["problems"]] == ["mnist1d-small", "digits-noisy"]
    assert [p["nearest"] for p in r["problems"]] == ["mnist1d-small", "digits-noisy"]  # each its own neighbour
    assert r["cost"]["plan_search_episodes"] == 17 and r["config"]["test_seeds"] == TEST_SEEDS
    for v in ("cut", "whole"):
        assert r["paired"][v]["ppo less selector"]["n"] == 4
        assert r["paired"][v]["ppo less selector"]["mean"] == pytest.approx(51.0 - r["means"][v])
    assert r["means"]["ppo"] == 51.0 and r["means"]["oracle"] == 55.0
    assert "Command: `python lab/probes/selector.py --train-suite tiny" in (tmp_path / "out" / "results.md").read_text()
    assert not r["config"]["bench"].startswith("/") and f" {tmp_path}" not in r["command"]  # relative paths only
    with pytest.raises(SystemExit):
        probe.main(args)  # --out holds the first run's results
    assert "already holds an earlier run's results" in capsys.readouterr().err
    probe.main(args + ["--overwrite"])
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    assert again["episodes_played"] == 0 and again["means"] == r["means"]


@pytest.mark.parametrize("flags, message", [
    (["--suite", "nope"], "unknown suite 'nope'"),
    (["--suite", "tiny", "--tune-seeds", "2000"], "must not share a seed"),
    (["--suite", "heldout"], "is on suite 'tiny' v1, not 'heldout'"),
    (["--suite", "tiny", "--bench", "missing.json"], "not a suite benchmark's results"),
])
def test_bad_flags_end_in_one_line(tmp_path, capsys, flags, message):
    bench = ["--bench", str(_bench(tmp_path))] if "--bench" not in flags else []
    with pytest.raises(SystemExit):
        _probe().main(["--train-suite", "tiny", *bench, *flags, "--out", str(tmp_path / "o"),
                       "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.jsonl").exists()
