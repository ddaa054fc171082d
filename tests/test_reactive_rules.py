"""lab/probes/reactive_rules.py on two tiny problems with failing seeds: the rules are tuned on one problem and
judged on the other, paired with a duds split's arms; a rerun plays nothing (the cache), an earlier --out is never
replaced by accident, and bad flags end in one line."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import load_script

TEST_SEEDS = [2000, 2001]


def _probe():
    return load_script("lab/probes/reactive_rules.py", "reactive_rules_probe")  # it imports selector.py beside it


def _suites(monkeypatch) -> tuple[str, str]:
    "Two one-problem suites of `tiny`'s problems whose `global_mix` seeds fail in half the episodes (this test's only)."
    from esper.tamiyo.events import SeedFailure
    from esper.tamiyo.problems import SUITES, TINY, Suite

    fail = SeedFailure(("global_mix",), 0.5)
    for name, p in (("tiny-duds-tune", "mnist1d-small"), ("tiny-duds-test", "digits-noisy")):
        monkeypatch.setitem(SUITES, name, Suite(name, 1, (replace(TINY[p], name=f"{p}-duds", event=fail),), "tests"))
    return "tiny-duds-tune", "tiny-duds-test"


def _split(tmp_path: Path, ppo: float) -> Path:
    "A duds split's episodes, made up: every arm the probe pairs with, on the test seeds."
    arms = {"ppo": ppo, "open-loop": 49.0, "selector": 51.0, "oracle": 52.0, "best rule": 50.0, "greedy": 45.0,
            "tuned replant": 55.0, "hindsight oracle": 56.0}
    path = tmp_path / f"split{ppo:g}.json"
    path.write_text(json.dumps({"episodes": {a: {f"digits-noisy-duds|{s}": v for s in TEST_SEEDS}
                                             for a, v in arms.items()}}))
    return path


def test_two_tiny_problems_end_to_end(tmp_path, capsys, monkeypatch):
    tune, test = _suites(monkeypatch)
    probe = _probe()
    args = ["--tune-suites", tune, "--suite", test, "--tune-seeds", "1000", "1001", "--test-seeds", "2000", "2001",
            "--plans", "global_mix@block1/1", "--split", f"a={_split(tmp_path, 50.0)}", f"b={_split(tmp_path, 60.0)}",
            "--cache", str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")]
    probe.main(args)
    assert "The target asks PPO for" in capsys.readouterr().out
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    assert r["rules"]["replant rule"] == ["replant:global_mix@block1/1~conv_small"]  # the one fallback that never fails
    assert r["cost"] == {"tune_episodes": 2 * (1 + len(probe.REACTIVE_GRID)), "test_episodes": 4}
    assert set(r["chosen"]) == {"replant rule", "reactive rule"}
    assert r["chosen"]["reactive rule"] == max(r["tune_means"]["reactive rule"], key=r["tune_means"]["reactive rule"].get)
    rule = r["means"]["replant rule"]["all"]
    assert r["paired"]["ppo (b) less replant rule"]["all"][0] == pytest.approx(60.0 - rule)
    assert r["paired"]["hindsight oracle less replant rule"]["all"][0] == pytest.approx(56.0 - rule)
    assert r["means"]["ppo (a)"]["all"] == 50.0 and r["means"]["selector"]["all"] == 51.0
    assert r["per_problem"]["digits-noisy-duds"] == {k: v["all"] for k, v in r["means"].items()}  # one problem
    t = r["target"]
    assert t["asks"] == pytest.approx(t["best_rival_mean"] + 3) and t["hindsight"] == 56.0
    assert t["best_rival_mean"] == max(r["means"][k]["all"] for k in ("replant rule", "reactive rule", "greedy",
                                                                       "best rule"))
    from esper.tamiyo.problems import get_suite
    failing = [s for s in TEST_SEEDS if get_suite(test).problems[0].event.draw(s) is not None]
    assert r["paired"]["ppo (a) less replant rule"]["fails"][0] == pytest.approx(
        50.0 - sum(r["episodes"]["replant rule"][f"digits-noisy-duds|{s}"] for s in failing) / len(failing))
    text = json.dumps(r)
    assert f" {tmp_path}" not in text and f"={tmp_path}" not in text and f'"{tmp_path}' not in text  # relative paths
    with pytest.raises(SystemExit):
        probe.main(args)  # --out holds the first run's results
    assert "already holds an earlier run's results" in capsys.readouterr().err
    probe.main(args + ["--overwrite"])
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    assert again["episodes_played"] == 0 and again["means"] == r["means"]


@pytest.mark.parametrize("flags, message", [
    (["--suite", "nope"], "unknown suite 'nope'"),
    (["--test-seeds", "1000"], "must not share a seed"),
    (["--tune-suites", "tiny-duds-test"], "share a problem with --suite"),
    (["--split", "a=missing.json"], "not a duds split's split.json"),
    (["--test-seeds", "2005"], "no ppo episode on digits-noisy-duds at test seed 2005"),
    (["--split", "nameless.json"], "--split takes distinct NAME=SPLIT_JSON"),
    (["--plans", "conv_heavy@block1/1"], "no plan and fallback every problem can play"),
])
def test_bad_flags_end_in_one_line(tmp_path, capsys, monkeypatch, flags, message):
    tune, test = _suites(monkeypatch)
    args = {"--tune-suites": [tune], "--suite": [test], "--tune-seeds": ["1000"], "--test-seeds": ["2000", "2001"],
            "--split": [f"a={_split(tmp_path, 50.0)}"], "--plans": ["global_mix@block1/1"]}
    args |= {flags[0]: flags[1:]}
    with pytest.raises(SystemExit):
        _probe().main([x for k, v in args.items() for x in (k, *v)] + ["--out", str(tmp_path / "o"),
                                                                        "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.jsonl").exists()
