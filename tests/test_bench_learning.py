"""bench/bench_learning.py end to end on tiny settings: every controller, CIs, per-seed rows, curves and both plots."""
import json

TINY = ["--preset", "short", "--episodes", "4", "--n-envs", "2", "--max-epochs", "3", "--max-batches", "2",
        "--train-seeds", "0", "1", "--eval-seeds", "2000", "2001", "--curve-seeds", "1000", "--eval-every", "2",
        "--workers", "2", "--schedules", "conv_small", "concurrent:conv_small,depthwise"]


def test_tiny_benchmark_writes_every_result(tmp_path, run_bench):
    out = tmp_path / "bl"
    p = run_bench("bench_learning.py", *TINY, "--out", str(out), cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((out / "results.json").read_text())
    names = ["static", "random", "heuristic", "schedule:conv_small", "concurrent:conv_small+depthwise", "ppo"]
    assert list(res["summary"]) == names
    for name in names:
        row = res["summary"][name]
        assert {"final_accuracy", "final_accuracy_ci95", "ci_over", "ci_n", "params_in_all", "params_added"} <= set(row)
        assert row["final_accuracy_ci95"] is not None and row["ci_n"] == 2, row
        assert row["params_in_all"] >= row["params_added"]
    assert res["summary"]["ppo"]["ci_over"] == "training seeds" and res["summary"]["ppo"]["episodes"] == 4
    assert len(res["episodes"]) == 2 * 2 + 5 * 2  # PPO: train seeds x eval seeds; baselines: controllers x eval seeds
    seeds = res["ppo_seeds"]
    assert [s["train_seed"] for s in seeds] == [0, 1]
    for s in seeds:
        assert {"final_accuracy", "params_in_all", "germinated", "fossilized", "pruned",
                "explained_variance_last_quarter", "min_head_entropy", "train_seconds"} <= set(s)
        assert [c["episodes"] for c in s["curve"]] == [2, 4]  # every --eval-every episodes, the last update included
        assert all(0 <= c["eval_accuracy"] <= 100 for c in s["curve"])
        assert (out / f"seed{s['train_seed']}" / "agent.pt").exists()
    assert {"git_commit", "git_dirty", "torch", "device"} <= set(res["config"])  # git ones are None outside a checkout
    assert {t["pass"] for t in res["targets"]} <= {True, False} and len(res["targets"]) == 5
    for f in ("learning_curves.png", "lifecycle.png", "table.md"):
        assert (out / f).stat().st_size > 0
    assert "| controller | final acc % (mean ± 95% CI) | params in all | params added |" in p.stdout
    assert not list(out.glob(".*.tmp"))  # every write went through a renamed temporary file


def test_refuses_eval_seeds_that_training_uses(tmp_path, run_bench):
    p = run_bench("bench_learning.py", *TINY, "--eval-seeds", "3", "2000", "--out", str(tmp_path / "bl"),
                  cwd=tmp_path, timeout=120)
    assert p.returncode == 2
    assert "--eval-seeds [3] are task seeds that training episodes use" in p.stderr
    assert not (tmp_path / "bl").exists()
