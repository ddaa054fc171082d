"""bench/bench_population.py on tiny settings: both tables, the JSON, and a bad flag refused in one line."""
import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_population.py"


def run_bench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_tiny_run_prints_both_tables_and_writes_the_json(tmp_path):
    out = tmp_path / "pop.json"
    p = run_bench("--envs", "3", "--max-epochs", "2", "--max-batches", "1", "--repeats", "1", "--group-sizes", "1",
                  "3", "--device", "cpu", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("device: CPU")
    res = json.loads(out.read_text())
    assert [g["group"] for g in res["groups"]] == [1, 3]
    assert all(g["lockstep"] > 0 and g["population"] > 0 for g in res["groups"])
    row = res["rows"][0]
    assert row["envs"] == 3 and row["ratio"] == row["population"]["samples_per_s"] / row["lockstep"]["samples_per_s"]
    assert res["argv"][:2] == ["--envs", "3"]


def test_a_bad_device_is_one_line(tmp_path):
    p = run_bench("--device", "tpu", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--device" in p.stderr
