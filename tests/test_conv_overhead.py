"""lab/probes/conv_overhead.py as a user runs it: a row per convolution shape with its timings and whether the matrix
products give the same bits, the host's step both ways, its JSON, and an earlier --out refused in one line."""
import json


def test_a_row_per_shape_the_host_step_and_no_result_replaced(run_bench, tmp_path):
    out = tmp_path / "conv.json"
    r = run_bench("conv_overhead.py", "--calls", "2", "--repeats", "1", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    figures = json.loads(out.read_text())
    assert len(rows) == len(figures["shapes"]) == 6
    assert all(row.rstrip(" |").endswith(("yes", "no")) for row in rows)
    assert figures["host_step"]["pytorch_us"] > 0 and figures["host_step"]["matmul_us"] > 0
    assert "one bare SGD step" in r.stdout
    again = run_bench("conv_overhead.py", "--calls", "2", "--repeats", "1", "--out", str(out), cwd=tmp_path)
    assert again.returncode != 0 and again.stderr.strip().splitlines() == [
        f"conv_overhead.py: --out {out} holds an earlier run's figures; pass --overwrite to replace them"]
    assert json.loads(out.read_text()) == figures
