"""lab/probes/host_compile.py: its training step is the trainer's own but for the compiled call, and bad flags are one
line each (the compiling itself is measured by running the script; it needs a C++ compiler and tens of seconds)."""
from unittest import mock

from esper.tamiyo import episode as episode_module
from esper.tamiyo.episode import run_episode
from esper.tamiyo.plans import PlanTamiyo
from esper.tamiyo.suites import MENU
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem

from conftest import load_script


def _host_compile():
    return load_script("lab/probes/host_compile.py")


def test_its_step_uncompiled_plays_the_same_episode_bit_for_bit():
    "With `forward_loss` itself in place of the compiled call, an episode is the trainer's: same history, same bits."
    hc, three = _host_compile(), GrowthProblem("mnist1d", max_epochs=3, max_batches=3, blueprints=MENU)
    # a freshly loaded task each time: a task's loader keeps its own shuffling stream from episode to episode
    play = lambda: run_episode(get_task("mnist1d"), PlanTamiyo("conv_small@block1/1"), seed=7, problem=three)
    calls = []

    def counted(*args):
        calls.append(1)
        return hc.forward_loss(*args)

    with mock.patch.object(episode_module, "train_step", hc.compiled_train_step(counted)):
        ours = play()
    theirs = play()
    assert len(calls) == 9  # every training step went through the stand-in
    assert ours.final_accuracy == theirs.final_accuracy and ours.grown == theirs.grown == "conv_small@block1 (TRAINING)"
    # all but the timings and the seed's serial number (a counter that runs on through the process)
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("seconds", "action_reason")} for r in h]
    assert strip(ours.history) == strip(theirs.history)


def test_bad_flags_are_one_line(tmp_path, run_bench):
    (tmp_path / "taken.json").write_text("{}")
    for args, words in ((["--plans", "nothing@block1/1"], "--plans"), (["--repeats", "0"], "--repeats"),
                        (["--out", str(tmp_path / "taken.json")], "--overwrite"),
                        (["--out", str(tmp_path / "no" / "x.json")], "no folder")):
        p = run_bench("host_compile.py", *args, cwd=tmp_path)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, (args, p.stderr)
