"""lab/probes/gpt_bound.py: a grown run's saving split into its ceiling and its data penalty, on made-up curves."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "probes"))
import gpt_bound as gb

# The twin costs 2 host epochs an epoch and first reaches its final 2.0 bits after 5 epochs (compute 10); the grown
# run is the bare host for 2 epochs (cost 1 each), then costs as the twin, and reaches 2.0 bits after 7 epochs.
TWIN = {"kind": "twin", "grown": "transformer_block@block1", "seed": 1000,
        "curve": [[2.0 * (i + 1), b] for i, b in enumerate([4.0, 3.0, 2.5, 2.2, 2.0])]}
GROWN = {"kind": "episode", "rival": "zero-init", "seed": 1000, "grown": "transformer_block@block1 (FOSSILIZED)",
         "curve": [[c, b] for c, b in zip([1, 2, 4, 6, 8, 10, 12], [4.2, 3.5, 3.0, 2.6, 2.3, 2.1, 2.0])]}


def result(*runs):
    return {"settings": {"budget": 10, "epoch": 2, "train_chars": 4096, "slot": "block1"}, "git_commit": "abc",
            "runs": [TWIN, *runs]}


def test_the_split():
    r = gb.split(GROWN, TWIN)
    assert (r["twin_epochs"], r["twin_compute"], r["host_epochs"], r["grown_epochs"]) == (5.0, 10.0, 2, 7.0)
    assert r["ceiling"] == pytest.approx(0.2)  # (p / n)(1 - r) = (2 / 5)(1 - 0.5): compute 8 at epoch 5, not 10
    assert r["saving"] == pytest.approx(-0.2)  # compute 12 where the twin spent 10
    assert r["penalty"] == pytest.approx(0.4)  # the two extra epochs, at 2 each, over 10
    assert r["bits_behind_at_twin_epochs"] == pytest.approx(0.3)
    never = gb.split(GROWN | {"curve": GROWN["curve"][:6]}, TWIN)  # stopped at 2.1 bits
    assert never["saving"] is None and never["penalty"] is None and never["ceiling"] == pytest.approx(0.2)


def test_the_probe_writes_its_table_and_refuses_in_one_line(tmp_path, capsys):
    src = tmp_path / "levers.json"
    src.write_text(json.dumps(result(GROWN, GROWN | {"rival": "static", "grown": ""})))
    out = tmp_path / "bound" / "bound.json"
    assert gb.main([str(src), "--out", str(out)]) == 0
    saved = json.loads(out.read_text())["files"]["levers.json"]
    assert list(saved["levers"]) == ["zero-init"] and saved["host_to_twin"] == pytest.approx(0.5)
    row = "| `levers.json` | 0.500 | 1000 | 2 | 5.0 | zero-init | +20% | -20% | +2.0 |"
    assert row in out.with_suffix(".md").read_text()
    assert "planted after 60% (r = 0.500) of the twin's epochs" in capsys.readouterr().out  # 0.3 / (1 - 0.5)
    for args, says in (([str(src), "--out", str(out)], "holds an earlier run's results"),
                       ([str(tmp_path / "none.json"), "--out", str(tmp_path / "o.json")], "none.json"),
                       ([str(out), "--out", str(tmp_path / "o.json")], "not a result file of lab/probes/gpt_levers")):
        with pytest.raises(SystemExit) as e:
            gb.main(args)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and says in err[0], err
