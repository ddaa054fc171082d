"""A list of seeds is a list of draws (issue 76, "repeated seeds count twice"): every tool with a seed list refuses
a seed given twice, in one line naming the flag, before any work. At 4a970d9 `suite_headroom.py --test-seeds 2000
2001 2000 2001` halved the margin's confidence interval by counting the same episodes twice."""
import pytest

from esper.cli import main

CASES = [  # (bench script, its flags)
    ("suite_headroom.py", ["--suite", "tiny", "--test-seeds", "2000", "2001", "2000", "2001"]),
    ("suite_headroom.py", ["--suite", "tiny", "--tune-seeds", "1000", "1000"]),
    ("suite_tune_probe.py", ["eval", "--seeds", "1000", "1000"]),
    ("first_decision.py", ["--seeds", "1000", "1000"]),
    ("bench_learning.py", ["--preset", "short", "--test-seeds", "2000", "2000"]),
    ("bench_learning.py", ["--preset", "short", "--run-seeds", "0", "1", "0"]),
    ("bench_heuristic.py", ["--seeds", "0", "0"]),
]


@pytest.mark.parametrize("script, flags", CASES, ids=[f"{s}:{f[-3]}" for s, f in CASES])
def test_a_repeated_seed_is_refused_in_one_line_by_every_tool(script, flags, run_bench, tmp_path):
    r = run_bench(script, *flags, "--out", str(tmp_path / "out"), cwd=tmp_path, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "is given twice; give each seed once" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_compare_refuses_a_repeated_seed(tmp_path, capsys):
    argv = ["compare", "--controllers", "static", "--seeds", "0", "1", "0", "--out", str(tmp_path / "cmp")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "--seeds: seed 0 is given twice" in err[0], err


def test_seeds_that_share_the_training_data_are_not_reported_as_held_out(run_bench, tmp_path):
    "At 4a970d9 `bench_learning.py --suite tiny ... --test-seeds 500` was accepted and reported as held out."
    r = run_bench("bench_learning.py", "--suite", "tiny", "--train-suite", "tiny", "--curve-suite", "tiny",
                  "--test-seeds", "500", "--run-seeds", "0", "--episodes", "4", "--out", str(tmp_path / "bl"),
                  cwd=tmp_path, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "[500]: task seeds below 1000 share the training data (data seed 42)" in lines[0], lines[0]
    assert not (tmp_path / "bl").exists()
