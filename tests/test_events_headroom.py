"""lab/probes/events_headroom.py on the `tiny-events` suite: after suite_headroom.py's report, the hindsight oracle is chosen
per kind of episode (shifts or not) on the tune seeds, played on the test seeds of its kind, and split out; a rerun
plays nothing."""
import json
from pathlib import Path

import pytest

from conftest import load_script


def _bench(name, where="bench"):
    return load_script(f"{where}/{name}.py")


def test_the_tiny_events_suite_end_to_end(tmp_path, capsys):
    cache, out = str(tmp_path / "plays.jsonl"), tmp_path / "out"
    # tiny-events: seed 1000 keeps its data, 1001 shifts at epoch 3; of the test seeds only 2000 shifts (at 3)
    _bench("suite_headroom").main(["--suite", "tiny-events", "--tune-seeds", "1000", "1001", "--test-seeds", "2000",
                                   "2001", "--reactive", "--cache", cache, "--out", str(out)])
    report = json.loads((out / "headroom.json").read_text())
    e = _bench("events_headroom", "lab/probes")
    args = ["--report", str(out / "headroom.json"), "--cache", cache, "--out", str(out)]
    e.main(args)
    table = capsys.readouterr().out
    r = json.loads((out / "events_headroom.json").read_text())
    (p,) = r["problems"]
    assert p["shift_epochs"] == {"2000": 3, "2001": None} and (r["shifted_test_episodes"], r["test_episodes"]) == (1, 2)
    tune = report["tune_means"][p["problem"]]
    assert set(p["hindsight_plans"].values()) <= set(tune)
    assert p["open_loop_plan"] == report["problems"][0]["oracle_plan"]
    assert p["open-loop oracle"]["all"] == pytest.approx(report["problems"][0]["oracle"])
    assert "| mnist1d-small-shuffles | 2000@3 |" in table and "hindsight oracle less the open-loop oracle" in table
    n = len(Path(cache).read_text().splitlines())
    with pytest.raises(SystemExit):
        e.main(args)  # --out holds the first run's results
    e.main(args + ["--overwrite"])
    assert len(Path(cache).read_text().splitlines()) == n  # every episode came from the cache
    again = json.loads((out / "events_headroom.json").read_text())
    assert again["margins_over_open_loop"] == r["margins_over_open_loop"]
