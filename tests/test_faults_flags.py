"""Every flag `esper-train` accepts is meant: a value out of range for the whole run, or a flag that does nothing in
the combination given, is one line naming the flag, before any work; and the advice of an error works as written.

The refusals run `esper.cli.main` in this process with tiny settings, so that a flag that slipped through would
finish (or fail) in seconds rather than train for an hour.
"""
import re

import pytest

from esper.cli import SEED_MAX, build_parser, main
from esper.cli.ppo_checks import check_ppo_args

from conftest import load_script

# tiny settings first: a case's own flags come after them and win
TINY = {
    "ppo": ["ppo", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "1", "--no-progress"],
    "baseline": ["baseline", "--epochs", "1", "--no-progress"],
    "heuristic": ["heuristic", "--episodes", "1", "--max-epochs", "2", "--no-progress"],
    "compare": ["compare", "--controllers", "static", "--seeds", "0", "--max-epochs", "2", "--max-batches", "1"],
}

REFUSED = [  # (subcommand, its flags, the flag the line must name, words it must say)
    # seeds, and the seeds a run derives from them, fit NumPy's 32-bit range
    ("ppo", ["--seed", str(2**32)], "--seed", f"[0, {SEED_MAX}]"),
    ("ppo", ["--seed", str(SEED_MAX - 50), "--n-episodes", "100"], "--seed", f"at most {SEED_MAX - 99}"),
    ("ppo", ["--seed", str(SEED_MAX - 40), "--n-episodes", "100", "--update-every", "4",
             "--episodes-per-task-seed", "2"], "--seed", f"at most {SEED_MAX - 49}"),
    ("heuristic", ["--seed", str(SEED_MAX), "--episodes", "2"], "--seed", f"at most {SEED_MAX - 1}"),
    ("baseline", ["--seed", str(2**32)], "--seed", f"[0, {SEED_MAX}]"),
    ("compare", ["--seeds", "0", str(2**32)], "--seeds", f"[0, {SEED_MAX}]"),
    # counts no machine holds
    ("ppo", ["--vectorized", "--n-envs", "100000"], "--n-envs", "at most 1024"),
    ("ppo", ["--vectorized", "--workers", "100000"], "--workers", "at most"),
    # flags of no effect in the combination given
    ("ppo", ["--ray-address", "auto"], "--ray-address", "--backend ray"),
    ("ppo", ["--vectorized", "--ray-address", "auto"], "--ray-address", "--backend ray"),
    ("ppo", ["--vectorized", "--backend", "ray", "--workers", "0"], "--backend ray", "--workers N"),
    ("ppo", ["--backend", "ray"], "--backend", "--vectorized"),
    ("ppo", ["--n-envs", "8"], "--n-envs", "--vectorized"),
    ("ppo", ["--devices", "cpu"], "--devices", "--vectorized"),
    ("ppo", ["--population", "off"], "--population", "--vectorized"),
    ("ppo", ["--vectorized", "--n-envs", "2", "--update-every", "3"], "--update-every", "--vectorized"),
    ("ppo", ["--vectorized", "--n-envs", "2", "--population", "on", "--workers", "2"], "--population on", "--workers 2"),
    ("ppo", ["--checkpoint-every", "3"], "--checkpoint-every", "--save"),
    ("ppo", ["--telemetry-level", "debug"], "--telemetry-level", "--telemetry-dir"),
    ("ppo", ["--entropy-coef-start", "0.3"], "--entropy-coef-start", "--entropy-anneal-episodes"),
    ("ppo", ["--entropy-coef", "0.1", "--entropy-coef-start", "0.3", "--entropy-anneal-episodes", "4"],
     "--entropy-coef", "--entropy-coef-start"),
    # values the trainer refused only once it ran, in its own words
    ("ppo", ["--max-epochs", "1"], "--max-epochs", ">= 2"),
    ("ppo", ["--blueprint-offer-episodes", "200"], "--blueprint-offer-episodes", "--n-episodes 2"),
    ("ppo", ["--update-every", "3", "--episodes-per-task-seed", "2"], "--episodes-per-task-seed", "--update-every"),
    ("ppo", ["--group-baseline"], "--group-baseline", "--episodes-per-task-seed >= 2"),
    ("baseline", ["--download"], "--download", "--task cifar10"),
    ("heuristic", ["--download"], "--download", "--task cifar10"),
    ("baseline", ["--telemetry-level", "debug"], "--telemetry-level", "--telemetry-dir"),
    ("heuristic", ["--telemetry-level", "minimal"], "--telemetry-level", "--telemetry-dir"),
    ("compare", ["--fixed-rule", "conv_small"], "--fixed-rule", "add fixed to --controllers"),
    ("compare", ["--fixed-concurrent"], "--fixed-concurrent", "add fixed to --controllers"),
    ("compare", ["--controllers", "static", "fixed", "--fixed-rule", "nope"], "--fixed-rule", "invalid choice"),
    ("compare", ["--seeds", "1", "1"], "--seeds", "seed 1 is given twice"),
    ("compare", ["--controllers", "fixed", "--blueprints", "norm"], "--fixed-rule", "not on the --blueprints menu"),
    ("compare", ["--blueprints", "norm", "norm", "--fixed-rule", "norm"], "--blueprints", "repeats norm"),
    ("compare", ["--blueprints", "resnet"], "--blueprints", "invalid choice"),
    ("compare", ["--controllers", "static", "static"], "--controllers", "repeats static"),
    ("compare", ["--checkpoint", "agent.pt"], "--checkpoint", "add ppo"),
    ("compare", ["--controllers", "ppo"], "--controllers ppo", "--checkpoint PATH"),
]


@pytest.mark.parametrize("job, flags, flag, says", REFUSED, ids=[" ".join([c[0], *c[1]]) for c in REFUSED])
def test_a_flag_out_of_range_or_of_no_effect_is_one_line_before_any_work(job, flags, flag, says, tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a run would write by default lands here, and must not
    outputs = [] if job == "ppo" else ["--out", str(tmp_path / "out")]  # ppo writes nothing without --save
    try:
        rc = main(TINY[job] + outputs + flags)
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"esper-train {job}: error: "), err
    assert flag in lines[0] and says in lines[0], lines[0]
    assert out == "" and list(tmp_path.iterdir()) == [], (out, list(tmp_path.iterdir()))


SUITE_REFUSED = [  # (flags beside `heuristic --suite tiny`, the flag the line must name, words it must say)
    (["--task", "digits"], "--task", "drop --task"),
    (["--host", "mnist1d_impaired"], "--host", "drop --host"),
    (["--slots", "block1"], "--slots", "drop --slots"),
    (["--max-epochs", "4"], "--max-epochs", "drop --max-epochs"),
    (["--suite", "nope"], "--suite", "unknown suite 'nope'; choose one of: tiny"),
    (["--download"], "--download", "suite tiny's problems (digits, mnist1d) all ship offline"),
]


@pytest.mark.parametrize("flags, flag, says", SUITE_REFUSED, ids=[" ".join(c[0]) for c in SUITE_REFUSED])
def test_heuristic_suite_refuses_one_problems_flags_in_one_line_before_any_work(flags, flag, says, tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(["heuristic", "--suite", "tiny", "--no-progress", "--out", str(tmp_path / "out"), *flags])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("esper-train heuristic: error: "), err
    assert flag in lines[0] and says in lines[0], lines[0]
    assert out == "" and list(tmp_path.iterdir()) == [], (out, list(tmp_path.iterdir()))


def _ppo(*argv: str):
    return build_parser().parse_args(["ppo", *argv])


@pytest.mark.parametrize("argv", [
    [],
    ["--seed", str(SEED_MAX - 99), "--n-episodes", "100"],  # the last episode plays the largest seed
    ["--seed", str(SEED_MAX - 49), "--n-episodes", "100", "--update-every", "4", "--episodes-per-task-seed", "2"],
    ["--vectorized", "--n-envs", "8", "--workers", "2", "--backend", "ray", "--ray-address", "auto",
     "--devices", "cpu", "cpu"],
    ["--vectorized", "--population", "on", "--workers", "0"],
    ["--save", "a.pt", "--checkpoint-every", "3", "--telemetry-dir", "t", "--telemetry-level", "debug"],
    ["--entropy-coef-start", "0.3", "--entropy-coef-end", "0.01", "--entropy-anneal-episodes", "40"],
    ["--update-every", "4", "--episodes-per-task-seed", "2", "--group-baseline"],
])
def test_flags_that_do_something_are_kept(argv):
    assert check_ppo_args(_ppo(*argv)) is None


def test_combinations_that_do_something_still_parse_up_to_the_largest_seed(capsys):
    p = build_parser()
    with pytest.raises(SystemExit):  # one seed past the last
        p.parse_args(["heuristic", "--seed", str(SEED_MAX), "--episodes", "2"])
    capsys.readouterr()
    p.parse_args(["baseline", "--task", "cifar10", "--download", "--seed", str(SEED_MAX)])
    p.parse_args(["heuristic", "--seed", str(SEED_MAX - 1), "--episodes", "2", "--telemetry-dir", "t",
                  "--telemetry-level", "debug"])
    p.parse_args(["compare", "--controllers", "fixed", "--fixed-rule", "conv_small", "norm", "--fixed-concurrent",
                  "--seeds", "0", str(SEED_MAX)])
    p.parse_args(["compare", "--checkpoint", "agent.pt"])  # the default controllers then include ppo
    p.parse_args(["compare", "--blueprints", "depthwise", "norm", "--fixed-rule", "norm"])
    p.parse_args(["compare", "--controllers", "static", "ppo", "--checkpoint", "agent.pt"])
    p.parse_args(["heuristic", "--suite", "heldout", "--episodes", "5", "--seed", "3000", "--host-lr", "0.02",
                  "--blend-epochs", "3", "--telemetry-dir", "t", "--telemetry-level", "debug", "--device", "cpu"])


def _flags_of(job: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[job]
    return {s for a in sub._actions for s in a.option_strings}


@pytest.mark.parametrize("job, argv", [
    ("baseline", ["--epochs", "1", "--no-progress"]),
    ("heuristic", ["--max-epochs", "2", "--no-progress"]),
    ("ppo", ["--n-episodes", "1", "--max-epochs", "2", "--update-every", "1", "--max-batches", "1", "--no-progress"]),
    ("compare", ["--controllers", "static", "--seeds", "0", "--max-epochs", "2", "--max-batches", "1"]),
])
def test_missing_cifar10_advice_works_as_written_for_every_job(job, argv, tmp_path, capsys, monkeypatch):
    data = tmp_path / "no data"
    monkeypatch.setenv("ESPER_DATA_DIR", str(data))
    outputs = [] if job == "ppo" else ["--out", str(tmp_path / "out")]
    assert main([job, "--task", "cifar10", *argv, *outputs]) == 1
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "no intact dataset" in line, line
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line))
    assert named <= _flags_of(job), f"esper-train {job} has no {sorted(named - _flags_of(job))}: {line}"
    command = re.search(r'python -c "([^"]+)"', line)  # the one command it gives, run with the download stubbed
    assert command, line
    calls = []
    import esper.tasks
    monkeypatch.setattr(esper.tasks, "get_task", lambda *a, **k: calls.append((a, k)))
    exec(command.group(1), {})
    assert calls == [(("cifar10",), {"data_dir": str(data), "download": True})]


def _bench_learning():
    return load_script("bench/bench_learning.py", "bench_learning_flags")


@pytest.mark.parametrize("flags, line", [
    (["--train-seeds", str(SEED_MAX - 1), "--episodes", "4"], f"--train-seeds {SEED_MAX - 1} with --episodes 4 uses "),
    (["--eval-seeds", str(2**32)], "argument --eval-seeds/--test-seeds: must be in"),
    (["--curve-seeds", str(2**32)], "argument --curve-seeds: must be in"),
])
def test_bench_learning_seeds_fit_for_the_whole_run(flags, line, tmp_path, capsys):
    bl = _bench_learning()
    with pytest.raises(SystemExit) as e:
        bl.resolve_args(bl.build_parser(), [*flags, "--out", str(tmp_path / "bl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and line in err[0], err
    assert not (tmp_path / "bl").exists()  # refused before the output folder is made
