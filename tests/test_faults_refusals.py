"""A refusal is one line and leaves nothing behind (issue 76): a fixed rule with more blueprints than the host has slots
is refused before any episode (at 4a970d9 it was accepted and recorded as given), and a refused command removes the
output folder it created (at 4a970d9 `compare --suite` left an empty one)."""
import pytest

from esper.cli import main


@pytest.mark.parametrize("where", [[], ["--suite", "tiny"]], ids=["one-problem", "suite"])
def test_a_fixed_rule_longer_than_the_slots_is_refused_and_leaves_no_folder(where, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", *where, "--controllers", "fixed", "--fixed-rule", "conv_small", "conv_small", "conv_small",
            "--seeds", "2000", "--out", str(out)]
    try:
        code = main(argv)  # refused while running: 1
    except SystemExit as e:  # refused while parsing: 2
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (1, 2) and len(err) == 1, err
    assert "3 blueprints, one per slot" in err[0] and "has 2 slots (block1, block2)" in err[0], err[0]
    assert not out.exists()


def test_a_run_that_wrote_something_keeps_its_folder(tmp_path):
    from esper.cli import guarded_outputs

    out = tmp_path / "kept"
    with pytest.raises(RuntimeError):
        with guarded_outputs({"--out": out}):
            (out / "partial.json").write_text("{}")
            raise RuntimeError("stopped")
    assert (out / "partial.json").exists()
    with pytest.raises(RuntimeError):
        with guarded_outputs({"--out": tmp_path / "empty"}):
            raise RuntimeError("refused")
    assert not (tmp_path / "empty").exists()


def test_planting_after_the_episode_is_refused_before_any_episode(run_bench, tmp_path):
    "At 4a970d9 `suite_headroom.py --epochs 99` played every plan as static and reported no headroom."
    r = run_bench("suite_headroom.py", "--suite", "tiny", "--epochs", "1", "99", "--out", str(tmp_path / "out"),
                  "--cache", str(tmp_path / "plays.jsonl"), cwd=tmp_path, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "--epochs 99: a seed planted at or after" in lines[0], r.stderr
    assert not (tmp_path / "plays.jsonl").exists()
    from esper.tamiyo.plan_search import PlayCache, search
    from esper.tamiyo.problems import TINY

    with pytest.raises(ValueError, match="planting epoch\\(s\\) 99 do not fall within problem"):
        search(TINY, PlayCache(None), epochs=(1, 99))


IDLE = [  # flags that changed nothing at 4a970d9 but were run with, or recorded in results.json as if they had
    (["--no-peer"], "--no-peer works with --suite only"),
    (["--train-suite", "tiny"], "--train-suite works with --suite only"),
    (["--curve-suite", "tiny"], "--curve-suite works with --suite only"),
    (["--tune-seeds", "1005"], "--tune-seeds works with --suite only"),
    (["--suite", "tiny", "--max-epochs", "7"], "--max-epochs has no effect with --suite"),
    (["--suite", "tiny", "--max-batches", "9"], "--max-batches has no effect with --suite"),
    (["--suite", "tiny", "--param-budget", "5000"], "--param-budget has no effect with --suite"),
    (["--suite", "tiny", "--preset", "full"], "--preset has no effect with --suite"),
    (["--suite", "tiny", "--lr-schedule", "cosine"], "--lr-schedule has no effect with --suite"),
    (["--suite", "tiny", "--schedules", "conv_small"], "--schedules has no effect with --suite"),
]


@pytest.mark.parametrize("argv, says", IDLE, ids=[" ".join(a) for a, _ in IDLE])
def test_bench_learning_refuses_a_flag_that_changes_nothing(argv, says, tmp_path, capsys):
    from test_faults import _bench_learning

    bl = _bench_learning()
    with pytest.raises(SystemExit) as e:
        bl.resolve_args(bl.build_parser(), [*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and says in err[0], err


TINY_BL = ["--preset", "short", "--episodes", "4", "--n-envs", "2", "--max-epochs", "3", "--max-batches", "2",
           "--train-seeds", "0", "--eval-seeds", "2000", "--curve-seeds", "1000", "--eval-every", "2", "--workers", "2",
           "--schedules", "conv_small"]


@pytest.fixture(scope="module")
def tiny_benchmark(tmp_path_factory):
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path_factory.mktemp("bl") / "out"
    bench = Path(__file__).resolve().parents[1] / "bench" / "bench_learning.py"
    subprocess.run([sys.executable, str(bench), *TINY_BL, "--out", str(out)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("change, says", [
    (["--episodes", "6"], "made with --episodes 4; this one gives 6"),
    (["--features", "run"], "made with --features (not given); this one gives run"),
    (["--rent-weight", "5"], "made with --rent-weight (not given); this one gives 5.0"),
], ids=["episodes", "features", "rent-weight"])
def test_a_resume_with_other_settings_is_refused_in_one_line(change, says, tiny_benchmark, run_bench, tmp_path):
    "At 4a970d9 each gave a ValueError traceback from a worker, --episodes reported as lr_anneal_episodes."
    r = run_bench("bench_learning.py", *TINY_BL, *change, "--out", str(tiny_benchmark), "--resume", cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert says in lines[0] and "give the same, or --overwrite" in lines[0], lines[0]


def test_training_on_a_held_out_suite_is_refused_unless_asked_for(tmp_path, capsys):
    "At 4a970d9 `ppo --suite heldout` and `bench_learning --train-suite heldout` trained on it without a word."
    from test_faults import _bench_learning

    import esper

    rc = main(["ppo", "--suite", "heldout", "--n-episodes", "2", "--save", str(tmp_path / "a.pt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--suite heldout is held out" in err[0] and not (tmp_path / "a.pt").exists()
    bl = _bench_learning()
    with pytest.raises(SystemExit):
        bl.resolve_args(bl.build_parser(), ["--suite", "heldout", "--train-suite", "small-test", "--out", str(tmp_path)])
    assert "--train-suite small-test is held out" in capsys.readouterr().err
    with pytest.raises(ValueError, match="suite 'heldout' is held out"):
        esper.PPO("heldout")
    assert esper.PPO("heldout", train_on_held_out=True, n_envs=4).options["suite"] == "heldout"  # asked for by name


def test_a_policy_is_compared_under_the_schedule_it_trained_with(tmp_path, capsys):
    "At 4a970d9 a policy trained under the cosine schedule was compared under the default constant one, silently."
    import json

    ck = tmp_path / "cosine.pt"
    assert main(["ppo", "--suite", "tiny", "--update-every", "2", "--n-episodes", "2", "--lr-schedule", "cosine",
                 "--no-progress", "--save", str(ck)]) == 0
    base = ["compare", "--suite", "tiny", "--controllers", "ppo", "--checkpoint", str(ck), "--seeds", "2000"]
    capsys.readouterr()
    assert main([*base, "--lr-schedule", "constant", "--out", str(tmp_path / "refused")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trained under the cosine schedule" in err[0] and not (tmp_path / "refused").exists()
    assert main([*base, "--out", str(tmp_path / "cmp")]) == 0
    assert "under the cosine learning-rate schedule the policy trained with" in capsys.readouterr().out
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text())["config"]["lr_schedule"] == "cosine"


def test_compare_says_when_a_policy_is_incomplete(tmp_path, capsys):
    "At 4a970d9 the checkpoint of a run stopped at 22 of 40 episodes was compared without a note."
    from esper.simic.trainers.vectorized import train_ppo_vectorized

    ck, updates = tmp_path / "stopped.pt", []

    def stop_after_two(agent, record):
        updates.append(record)
        if len(updates) == 2:
            raise KeyboardInterrupt  # as Ctrl-C would: the checkpoint holds the first update's 2 episodes

    with pytest.raises(KeyboardInterrupt):
        train_ppo_vectorized(suite="tiny", n_episodes=6, n_envs=2, seed=0, save_path=str(ck), on_update=stop_after_two,
                             ppo_kwargs=dict(n_epochs=1, batch_size=4))
    capsys.readouterr()
    assert main(["compare", "--suite", "tiny", "--controllers", "ppo", "--checkpoint", str(ck), "--seeds", "2000",
                 "--out", str(tmp_path / "cmp")]) == 0
    err = capsys.readouterr().err
    assert f"note: the policy in {ck} is incomplete: 2 of its run's 6 episodes" in err, err


def test_compare_says_what_the_policy_reads_and_where_it_trained(tmp_path, capsys):
    "At 4a970d9 compare said nothing of a policy's features or training suite, even when it played that very suite."
    ck = tmp_path / "run.pt"
    assert main(["ppo", "--suite", "tiny", "--update-every", "2", "--n-episodes", "2", "--features", "run",
                 "--no-progress", "--save", str(ck)]) == 0
    capsys.readouterr()
    assert main(["compare", "--suite", "tiny", "--controllers", "ppo", "--checkpoint", str(ck), "--seeds", "2000",
                 "--out", str(tmp_path / "cmp")]) == 0
    err = capsys.readouterr().err
    assert f"note: the policy in {ck} reads the run features; trained on suite tiny v1" in err, err
    assert "note: --suite tiny is the suite the policy trained on: these are its training problems" in err, err
