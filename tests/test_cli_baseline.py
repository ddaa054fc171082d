"""The esper-train console script as a user runs it: real process, real exit codes."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ESPER_TRAIN = Path(sys.executable).parent / "esper-train"


def run(*args, **kw):
    return subprocess.run([str(ESPER_TRAIN), *args], capture_output=True, text=True, timeout=300, **kw)


def test_baseline_writes_summary_and_curve(tmp_path):
    r = run("baseline", "--task", "mnist1d", "--epochs", "2", "--seed", "1", "--out", str(tmp_path), "--no-progress")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["epochs"] == 2 and s["n_params"] == 914 and len(s["history"]) == 2
    assert 0 <= s["final_accuracy"] <= 100 and s["seconds_per_epoch"] > 0
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000
    assert "test accuracy" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["baseline", "--epochs", "-1"], "--epochs: must be >= 1 (got -1)"),
    (["baseline", "--task", "imagenet"], "invalid choice: 'imagenet'"),
    (["baseline", "--lr", "0"], "--lr: must be a finite number > 0"),
    (["baseline", "--device", "cuda:7", "--epochs", "1"], None),
])
def test_bad_arguments_fail_with_one_line(args, needle, tmp_path):
    r = run(*args, "--out", str(tmp_path))
    if needle is None:  # only an error where CUDA is missing
        import torch
        if torch.cuda.is_available(): pytest.skip("CUDA present")
        needle = "CUDA is not available"
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
