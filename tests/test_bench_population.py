"""bench/bench_population.py on tiny settings: both tables, the JSON, and a bad flag refused in one line."""
import json


def test_tiny_run_prints_both_tables_and_writes_the_json(tmp_path, run_bench):
    out = tmp_path / "pop.json"
    p = run_bench("bench_population.py", "--envs", "3", "--max-epochs", "2", "--max-batches", "1", "--repeats", "1",
                  "--group-sizes", "1", "3", "--device", "cpu", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("device: CPU")
    res = json.loads(out.read_text())
    assert [g["group"] for g in res["groups"]] == [1, 3]
    assert all(g["lockstep"] > 0 and g["population"] > 0 for g in res["groups"])
    row = res["rows"][0]
    assert row["envs"] == 3 and row["ratio"] == row["population"]["samples_per_s"] / row["lockstep"]["samples_per_s"]
    assert res["argv"][:2] == ["--envs", "3"]


def test_a_profile_alone_lists_the_costliest_operators_of_a_population_epoch(tmp_path, run_bench):
    out = tmp_path / "prof.json"
    p = run_bench("bench_population.py", "--profile", "2", "--envs", "--device", "cpu", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "profile, 2 envs as one population" in p.stdout and "lockstep samples/s" not in p.stdout  # no trainer
    res = json.loads(out.read_text())
    (prof,) = res["profiles"]
    assert prof["envs"] == 2 and prof["sorted_by"] == "self_cpu_ms" and prof["ms_per_env_batch"] > 0
    top = [r["self_cpu_ms"] for r in prof["top"]]
    assert top == sorted(top, reverse=True) and 0 < len(top) <= 15 and res["rows"] == []
    assert any("convolution" in r["op"] for r in prof["top"])


def test_a_bad_device_is_one_line(tmp_path, run_bench):
    p = run_bench("bench_population.py", "--device", "tpu", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--device" in p.stderr
