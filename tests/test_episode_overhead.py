"""lab/probes/episode_overhead.py: the grown network is the episode's, and bad arguments end in one line."""
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "lab" / "probes"
sys.path.insert(0, str(BENCH))
import episode_overhead as eo


def test_planted_epochs_reads_the_stages_after_each_decision():
    history = [{"epoch": 1, "stages": {"block1": "TRAINING", "block2": "DORMANT"}},
               {"epoch": 2, "stages": {"block1": "BLENDING", "block2": "GERMINATED"}},
               {"epoch": 3, "stages": {"block1": "HOLDING", "block2": "TRAINING"}}]
    assert eo.planted_epochs(history) == {"block1": 2, "block2": 4}


def test_the_bare_network_grows_the_plans_seeds(tmp_path):
    out = tmp_path / "o.json"
    eo.main(["--plans", "static", "conv_small@block1/1", "--repeats", "1", "--max-epochs", "3", "--max-batches", "2",
             "--out", str(out)])
    r = json.loads(out.read_text())["results"]
    # planted after epoch 1 (GERMINATED: not yet in the forward), advanced after epoch 2: trained from epoch 3
    assert r["conv_small@block1/1"]["planted_epochs"] == {"block1": 3}
    assert r["static"]["planted_epochs"] == {} and r["static"]["median"]["grown"] > 0
    grown, plain = r["conv_small@block1/1"]["params"].values()
    assert grown > plain == r["static"]["params"]["grown"] == r["static"]["params"]["plain"]
    for plan in r.values():
        assert len(plan["cpu_seconds"]["episode"]) == 1 and plan["episode_over_grown"] > 0


@pytest.mark.parametrize("argv, says", [(["--plans", "conv_heavy@block1"], "--plans"),
                                        (["--plans", "norm@block1/1"], "not on the suites"),
                                        (["--plans", "conv_heavy@block9/1", "--max-epochs", "2", "--max-batches", "1"],
                                         "no slot 'block9'"),
                                        (["--out", "exists.json"], "already exists"),
                                        (["--out", "nowhere/x.json"], "no folder")])
def test_bad_arguments_are_one_line(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        eo.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and err.count("\n") == 1, err
    assert (tmp_path / "exists.json").read_text() == "{}"
