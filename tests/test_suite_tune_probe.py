"""lab/probes/suite_tune_probe.py: bad arguments end in one line before any training or episode."""
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "lab" / "probes"
sys.path.insert(0, str(BENCH))
import suite_tune_probe as stp


@pytest.mark.parametrize(
    "argv, says",
    [
        (["eval", "--judge", "heldout", "--out", "x.json", "--policies", "a=b.pt"], "held-out"),
        (["train", "--problems", "mnist1d-p9999", "--out", "run"], "mnist1d-p9999"),
        (
            ["eval", "--problems", "mnist1d-p2500", "--out", "x.json", "--policies", "a=nowhere.pt"],
            "existing checkpoint",
        ),
        (["eval", "--rule", "conv_small@block1", "--out", "x.json", "--policies", "a=b.pt"], "not a plan"),
    ],
)
def test_bad_arguments_are_one_line(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        stp.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err, err
    assert not any(tmp_path.iterdir())  # nothing written
