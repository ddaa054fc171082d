"""bench/suite_headroom.py on the `tiny` suite: it writes the table, the JSON and the heatmap, a second run plays
nothing (the cache), an earlier --out is never replaced by accident, and bad flags end in one line."""
import json
from pathlib import Path

import pytest

from conftest import load_script


def _headroom():
    return load_script("bench/suite_headroom.py")


def test_the_tiny_suite_end_to_end(tmp_path, capsys):
    h = _headroom()
    args = ["--suite", "tiny", "--tune-seeds", "1000", "--test-seeds", "2000", "2001", "--cache",
            str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")]
    h.main(args)
    first = capsys.readouterr().out
    assert "| problem | oracle plan |" in first and "test accuracy" in first
    report = json.loads((tmp_path / "out" / "headroom.json").read_text())
    assert [p["problem"] for p in report["problems"]] == ["mnist1d-small", "digits-noisy"]
    assert report["episodes_played"] > 0
    assert (tmp_path / "out" / "headroom.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit):
        h.main(args)  # --out holds the first run's results
    assert "already holds an earlier run's results" in capsys.readouterr().err
    h.main(args + ["--overwrite"])
    again = json.loads((tmp_path / "out" / "headroom.json").read_text())
    assert again["episodes_played"] == 0 and again["margin"] == report["margin"]
    assert "reactive_rule" not in report and "tuned reactive rule" not in first


def test_the_tuned_reactive_rule_joins_the_rivals(tmp_path, capsys):
    "Issue 75: rules that read the run (`reactive:<k>/<x>`), one setting tuned on the tune seeds, are a rival."
    h = _headroom()
    h.main(["--suite", "tiny", "--tune-seeds", "1000", "--test-seeds", "2000", "2001", "--reactive", "--cache",
            str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")])
    table = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "headroom.json").read_text())
    assert report["reactive_rule"] in h.REACTIVE_GRID and "tuned reactive rule" in report["rival_means"]
    head = next(line for line in table.splitlines() if line.startswith("| problem |"))
    assert head == "| problem | oracle plan | oracle | best single rule | greedy | heuristic | tuned reactive rule | margin |"
    assert f"Tuned reactive rule: `{report['reactive_rule']}`" in table


def test_pruning_plays_fewer_episodes_and_says_how_many(tmp_path, capsys):
    "Issue 75: with planting epochs the search prunes by successive halving, and the report counts the episodes."
    h = _headroom()
    args = ["--suite", "tiny", "--problems", "digits-noisy", "--tune-seeds", "1000", "1001", "--test-seeds", "2000",
            "--epochs", "1", "2", "--cache", str(tmp_path / "plays.jsonl")]
    h.main(args + ["--prune", "0.25", "--out", str(tmp_path / "cut")])
    table = capsys.readouterr().out
    cut = json.loads((tmp_path / "cut" / "headroom.json").read_text())
    q = cut["pruning"]
    assert q["keep"] == 0.25 and q["episodes"] == cut["episodes_played"] < q["episodes_unpruned"]
    assert f"the search asked for {q['episodes']} episodes, {q['episodes_unpruned']} without pruning" in table
    assert [p["problem"] for p in cut["problems"]] == ["digits-noisy"] and cut["subset"] == "1 of its 2 problems"
    assert "Suite `tiny` v1 (1 of its 2 problems)" in table
    h.main(args + ["--out", str(tmp_path / "whole")])  # the pruned search's episodes are reused, the rest played
    whole = json.loads((tmp_path / "whole" / "headroom.json").read_text())
    assert "pruning" not in whole and "Pruned" not in capsys.readouterr().out
    # the tune plays pruning left out, and the test plays of plans the pruned search did not choose
    assert whole["episodes_played"] >= q["episodes_unpruned"] - q["episodes"] > 0


@pytest.mark.parametrize("flags, message", [
    (["--suite", "nope"], "unknown suite 'nope'"),
    (["--suite", "tiny", "--prune", "1"], "--prune 1: the fraction of plans kept at each tune seed must lie in (0, 1)"),
    (["--suite", "tiny", "--problems", "nope"], "--problems: suite tiny has no problem 'nope'"),
    (["--suite", "tiny", "--tune-seeds", "2000"], "must not share a seed"),
])
def test_bad_flags_end_in_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        _headroom().main(flags + ["--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.jsonl")])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c.jsonl").exists()


def test_a_cache_that_cannot_be_written_is_refused_before_any_episode(tmp_path, capsys):
    (tmp_path / "c.jsonl").mkdir()  # a folder where the cache file should be
    with pytest.raises(SystemExit):
        _headroom().main(["--suite", "tiny", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert "--cache" in err and "is a folder" in err and "Traceback" not in err


def test_a_data_folder_that_is_a_file_is_one_line_before_any_episode(tmp_path, capsys, monkeypatch):
    "At 4a970d9 `ESPER_DATA_DIR=afile suite_headroom.py ...` ended in a traceback (the CLI gives one line)."
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ESPER_DATA_DIR", str(tmp_path / "afile"))
    with pytest.raises(SystemExit):
        _headroom().main(["--suite", "tiny", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "ESPER_DATA_DIR" in err and "is a file, not a folder" in err, err
    assert not (tmp_path / "c.jsonl").exists()


def test_a_text_suite_reports_bits_per_character(tmp_path, capsys, monkeypatch):
    import random

    from esper.tasks import write_corpus

    rng = random.Random(0)
    words = "to be or not that is the question whether tis nobler in the mind to suffer".split()
    write_corpus({f"work{i}": " ".join(rng.choice(words) for _ in range(500)) + "\n" for i in range(6)}, tmp_path)
    monkeypatch.setenv("ESPER_DATA_DIR", str(tmp_path))  # the corpus the test wrote, never the download
    h = _headroom()
    h.main(["--suite", "text-tiny", "--tune-seeds", "0", "--test-seeds", "1000", "--cache",
            str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")])
    table = (tmp_path / "out" / "headroom.md").read_text()
    assert "test bits per character (task test splits; lower is better)" in table
    r = json.loads((tmp_path / "out" / "headroom.json").read_text())
    assert r["metric"] == "bits per character"
    for p in r["problems"]:
        assert 0 < p["in_metric"]["oracle"] <= min(p["in_metric"][k] for k in ("greedy", "heuristic")) + 0.5
        assert f"| {p['problem']} | " in table


def test_a_selector_fitted_on_the_plan_search_is_saved_and_plays(tmp_path, capsys):
    "Issue 75: --selector FILE fits the per-instance selector on the suite's plan search; selector:FILE plays it."
    from esper.tamiyo.controllers import make_controller
    from esper.tamiyo.episode import run_episode
    from esper.tamiyo.problems import TINY
    from esper.tamiyo.selector import Selector
    from esper.tamiyo.suite_report import germination_plan
    h, path = _headroom(), tmp_path / "selector.json"
    args = ["--suite", "tiny", "--tune-seeds", "1000", "--test-seeds", "2000", "--cache", str(tmp_path / "plays.jsonl"),
            "--selector", str(path)]
    h.main(args + ["--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "headroom.json").read_text())
    sel = Selector.load(path)
    assert sel.problems == list(TINY.names) and Path(report["selector"]).name == "selector.json"
    p = TINY["digits-noisy"]  # its own nearest problem: its best plan on the tune seed, played whole
    assert f"plan:{sel.choose(p, 1000)}" == max(report["tune_means"][p.name], key=report["tune_means"][p.name].get)
    r = run_episode(p.load_task(2000), make_controller(f"selector:{path}", 2000), seed=2000, problem=p)
    assert str(germination_plan(r.lifecycle_log)) == str(sel.choose(p, 1000))  # it plants what that plan says
    with pytest.raises(SystemExit):
        h.main(args + ["--out", str(tmp_path / "other")])  # the saved selector is never replaced by accident
    assert f"--selector {path} exists" in capsys.readouterr().err
