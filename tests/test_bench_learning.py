"""bench/bench_learning.py end to end on tiny settings: every controller, CIs, per-seed rows, curves and both plots."""
import json
import re
import signal
import sys
import time
import types
from pathlib import Path

import pytest

from esper.kasmina import blueprints as B
from esper.leyline import BLUEPRINTS
from esper.simic.envs.env import load_ppo_controller
from esper.tamiyo.problems import GrowthProblem

from conftest import ROOT, load_script, script_path

TINY = ["--preset", "short", "--episodes", "4", "--n-envs", "2", "--max-epochs", "3", "--max-batches", "2",
        "--train-seeds", "0", "1", "--eval-seeds", "2000", "2001", "--curve-seeds", "1000", "--eval-every", "2",
        "--workers", "2", "--schedules", "conv_small", "concurrent:conv_small,depthwise"]


def test_tiny_benchmark_writes_every_result(tmp_path, run_bench):
    out = tmp_path / "bl"
    p = run_bench("bench_learning.py", *TINY, "--lr", "0.002", "--gae-lambda", "0.9", "--lr-end", "0.001",
                  "--lr-anneal-episodes", "4", "--out", str(out), cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["overrides"]["lr"] == 0.002 and "lr=0.002, gae_lambda=0.9" in res["table"]  # a tuning run
    parts = [json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()]
    assert parts == res["config"]["parts"] and [p["ended"] for p in parts] == ["complete"]
    assert res["config"]["wall_seconds_all_parts"] == parts[0]["wall_seconds"] > 0
    agent = load_ppo_controller(str(out / "seed0" / "agent.pt")).agent  # says so, and trains with them
    assert (agent.config.lr, agent.config.gae_lambda) == (0.002, 0.9)
    assert (agent.config.lr_end, agent.config.lr_anneal_steps) == (0.001, 2)  # 4 episodes of 2 envs: 2 updates
    assert [r["lr"] for r in res["ppo_seeds"][0]["curve"]] == [0.002, 0.0015]  # the rate of the update just done
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
        grown = [e["grown"] for e in res["episodes"] if e["train_seed"] == s["train_seed"]]
        held = [part for g in grown if g for part in g.split(" + ")]  # "blueprint@slot + ..." or "" (nothing held)
        seed_held = re.compile(r"(\w+)@block\d+( \([A-Z]+\))?")  # a live seed's stage after it
        assert all((m := seed_held.fullmatch(part)) and m[1] in BLUEPRINTS for part in held), grown
        most = max(map(grown.count, grown))  # what the policy grew in most of its 2 evaluation episodes
        assert s["grown"] in {f"{g or 'nothing'} ({most}/2)" for g in grown if grown.count(g) == most}, grown
        assert f"| {s['grown']} |" in res["table"]
    assert {"git_commit", "git_dirty", "torch", "device"} <= set(res["config"])  # git ones are None outside a checkout
    assert {t["pass"] for t in res["targets"]} <= {True, False} and len(res["targets"]) == 6
    for f in ("learning_curves.png", "lifecycle.png", "table.md"):
        assert (out / f).stat().st_size > 0
    assert "| controller | test acc % (mean ± 95% CI) | params in all | params added |" in p.stdout
    assert not list(out.glob(".*.tmp"))  # every write went through a renamed temporary file
    episodes_done = [line for line in p.stdout.splitlines() if " on eval seed " in line]
    assert "(PPO seed " in episodes_done[0], episodes_done  # a trained policy's episodes go before the baselines'


def test_refuses_eval_seeds_that_training_uses(tmp_path, run_bench):
    p = run_bench("bench_learning.py", *TINY, "--eval-seeds", "3", "2000", "--out", str(tmp_path / "bl"),
                  cwd=tmp_path, timeout=120)
    assert p.returncode == 2
    assert "--eval-seeds [3] are task seeds that training episodes use" in p.stderr
    assert not (tmp_path / "bl").exists()


def test_refuses_a_gae_lambda_outside_the_unit_interval_in_one_line(tmp_path, run_bench):
    p = run_bench("bench_learning.py", *TINY, "--gae-lambda", "1.5", "--out", str(tmp_path / "bl"), cwd=tmp_path,
                  timeout=120)
    line = "bench_learning.py: error: --gae-lambda must be in [0, 1] (got 1.5)"
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "bl").exists()
    p = run_bench("bench_learning.py", *TINY, "--germinate-gae-lambda", "-0.1", "--out", str(tmp_path / "bl"),
                  cwd=tmp_path, timeout=120)
    line = "bench_learning.py: error: --germinate-gae-lambda must be in [0, 1] (got -0.1)"
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "bl").exists()


def _pool_workers(pid: int) -> list[int]:
    "Running child processes of `pid` but multiprocessing's resource tracker (which stops by itself), from /proc."
    kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return [k for k in kids if _runs(k) and b"resource_tracker" not in Path(f"/proc/{k}/cmdline").read_bytes()]


def _runs(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc (Linux)")
def test_sigterm_stops_every_worker_in_one_line_and_keeps_the_checkpoint(tmp_path, start_bench):
    out = tmp_path / "bl"
    args = [*TINY, "--episodes", "400", "--out", str(out)]  # the later --episodes wins: a run that outlasts the test
    p = start_bench("bench_learning.py", *args, cwd=tmp_path)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing
    while not (out / "seed0" / "agent.pt").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.2)
    workers = _pool_workers(p.pid)
    assert len(workers) == 2, workers
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    line = f"bench_learning.py: terminated; the training checkpoints in {out} are kept: run the same command with "
    assert err.strip().splitlines() == [line + "--resume to continue"]
    assert not [w for w in workers if _runs(w)]  # none orphaned: they were stopped before the parent returned
    parts = [json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()]
    assert [p["ended"] for p in parts] == ["stopped"] and parts[0]["argv"][-2:] == ["--out", "bl"]  # where it ran
    load_ppo_controller(str(out / "seed0" / "agent.pt"))  # the last checkpoint is a whole one


def _bench_module(name: str):
    return load_script(script_path(f"{name}.py").relative_to(ROOT))


def test_the_rule_target_shows_the_decimals_that_decide_it():
    from esper.tamiyo.learning_report import check_targets
    row = lambda name, acc: {"controller": name, "final_accuracy": acc, "params_in_all": 2258}
    seed = {"train_seed": 0, "final_accuracy": 90.0, "min_head_entropy": {"action": 0.1},
            "explained_variance_last_quarter": 0.9, "germinates_every_episode": True}
    rule = lambda acc: next(t for t in check_targets("full", {
        "heuristic": row("heuristic", 87.6), "concurrent:conv_heavy+conv_small": row("concurrent:conv_heavy+conv_small",
        90.42), "ppo": row("ppo", acc)}, [seed]) if "best fixed rule" in t["target"])
    close = rule(90.416)  # 24 of 25 episodes equal to the rule's, one 0.1 below: 90.4 against 90.4 would read as a pass
    assert not close["pass"] and close["value"].startswith("90.416 (") and "conv_small 90.420)" in close["target"]
    same, above = rule(90.42), rule(91.0)
    assert same["pass"] and same["value"].startswith("90.4 (") and "conv_small 90.4)" in same["target"]  # as usual
    assert above["pass"] and above["value"].startswith("91.0 (") and "conv_small 90.4)" in above["target"], above


def test_the_rule_target_pairs_each_policy_with_the_rule_on_the_same_seeds():
    from esper.tamiyo.learning_report import _paired
    rule = {"controller": "concurrent:conv_heavy+conv_small", "final_accuracy": 90.07}
    seeds = [{"final_accuracy": a} for a in (89.98, 90.07, 90.07, 90.07, 90.07)]
    assert _paired(seeds, rule) == " (policy - rule, paired: -0.09, +0.00, +0.00, +0.00, +0.00; -0.02 ± 0.05)"
    assert _paired(seeds[:1], rule) == " (policy - rule, paired: -0.09)"  # one policy: no interval


def test_a_collapsed_head_fails_only_a_policy_that_ends_below_the_best_rule():
    from esper.tamiyo.learning_report import check_targets
    row = lambda name, acc: {"controller": name, "final_accuracy": acc, "params_in_all": 2000}
    summary = {"static": row("static", 40), "heuristic": row("heuristic", 70),
               "concurrent:conv_heavy+conv_small": row("concurrent:conv_heavy+conv_small", 80), "ppo": row("ppo", 79)}
    seed = lambda k, acc, entropy: {"train_seed": k, "final_accuracy": acc, "min_head_entropy": {"action": entropy},
                                    "explained_variance_last_quarter": 0.7, "germinates_every_episode": True}
    target = lambda seeds: next(t for t in check_targets("short", summary, seeds) if "entropy" in t["target"])
    ok = target([seed(0, 80, 0.001), seed(1, 78, 0.2)])  # collapsed at the rule's level; below it, still exploring
    assert ok["pass"] and ok["value"] == "min head entropy 0.001", ok
    bad = target([seed(0, 80, 0.2), seed(1, 78, 0.005)])
    assert not bad["pass"] and bad["value"] == "min head entropy 0.005 (collapsed and below the rule: seeds [1])", bad


def test_replay_prints_each_controllers_moves(tmp_path, run_bench):
    p = run_bench("replay_actions.py", "--preset", "short", "--seeds", "2000", "--rules",
                  "concurrent:conv_heavy+conv_small", cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip()
    assert line.startswith("task seed 2000  concurrent:conv_heavy+conv_small: "), line
    assert "1:GERMINATE/conv_heavy@block1 2:GERMINATE/conv_small@block2" in line and "FOSSILIZE@block2" in line


def test_replay_refuses_an_unknown_rule_in_one_line(tmp_path, run_bench):
    p = run_bench("replay_actions.py", "--rules", "conv_huge", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--rules:" in p.stderr


def test_replay_refuses_an_unreadable_checkpoint_in_one_line(tmp_path, run_bench):
    (tmp_path / "bad.pt").write_text("not a checkpoint")
    p = run_bench("replay_actions.py", "--checkpoints", str(tmp_path / "bad.pt"), cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--checkpoints: cannot load" in p.stderr


def test_the_full_preset_sets_its_ppo_settings_without_calling_them_a_change(tmp_path):
    bl = _bench_module("bench_learning")
    resolve = lambda *argv: bl.resolve_args(bl.build_parser(), [*argv, "--out", str(tmp_path / "bl")])
    full, short = resolve("--preset", "full"), resolve("--preset", "short")
    ent = {"entropy_coef_start": 0.05, "blueprint_entropy_coef": 0.0}
    hot = ent | {"entropy_coef_start": 0.3}  # the full preset's bonus starts six times higher
    assert full.ppo_settings == {"gae_lambda": 0.8, "germinate_gae_lambda": 1.0, "lr_end": 0.0,
                                 "lr_anneal_episodes": 320} | hot
    assert full.overrides == {}
    assert short.ppo_settings == full.ppo_settings and short.overrides == {}  # both learn with the whole-run settings
    assert resolve("--preset", "full", "--gae-lambda", "0.8").overrides == {}  # the preset's own value
    assert resolve("--preset", "full", "--gae-lambda", "0.95").overrides == {"gae_lambda": 0.95}
    assert resolve("--preset", "full", "--germinate-gae-lambda", "1").overrides == {}  # the preset's own value
    germ = resolve("--preset", "short", "--germinate-gae-lambda", "0.9")
    assert germ.overrides == {"germinate_gae_lambda": 0.9} and germ.ppo_settings["germinate_gae_lambda"] == 0.9
    assert resolve("--preset", "short", "--lr", "0.001").overrides == {"lr": 0.001}
    same = resolve("--preset", "full", "--lr-end", "0", "--lr-anneal-episodes", "320")
    assert same.overrides == {} and same.ppo_settings == full.ppo_settings
    longer = resolve("--preset", "full", "--episodes", "640")  # the preset's ramp spans the run, however long
    assert longer.overrides == {"episodes": 640} and longer.ppo_settings["lr_anneal_episodes"] == 640
    fixed = resolve("--preset", "full", "--lr-anneal-episodes", "0")
    assert fixed.overrides == {"lr_anneal_episodes": 0}
    assert fixed.ppo_settings == {"gae_lambda": 0.8, "germinate_gae_lambda": 1.0} | hot
    ramp = resolve("--preset", "short", "--lr-end", "0.0001")
    assert ramp.overrides == {"lr_end": 0.0001}  # a ramp's end alone: the ramp spans the run
    assert ramp.ppo_settings == full.ppo_settings | {"lr_end": 0.0001}
    assert resolve("--preset", "full", "--entropy-coef-start", "0.3").overrides == {}
    assert resolve("--preset", "short", "--entropy-coef-start", "0.05").overrides == {"entropy_coef_start": 0.05}
    cool = resolve("--preset", "full", "--entropy-coef-start", "0.05")
    assert cool.overrides == {"entropy_coef_start": 0.05} and cool.ppo_settings["entropy_coef_start"] == 0.05
    wide = resolve("--preset", "full", "--blueprint-entropy-coef", "0.1")
    assert wide.overrides == {"blueprint_entropy_coef": 0.1} and wide.ppo_settings["blueprint_entropy_coef"] == 0.1
    assert resolve("--preset", "full", "--critic-warmup-episodes", "0").ppo_settings == full.ppo_settings
    warm = resolve("--preset", "full", "--critic-warmup-episodes", "64")
    assert warm.overrides == {"critic_warmup_episodes": 64} and warm.ppo_settings["critic_warmup_steps"] == 8
    assert full.blueprint_offer_episodes == 0 and short.blueprint_offer_episodes == 0
    offer = resolve("--preset", "full", "--blueprint-offer-episodes", "96")
    assert offer.overrides == {"blueprint_offer_episodes": 96} and offer.ppo_settings == full.ppo_settings
    assert full.prune_offer_episodes == 0 and short.prune_offer_episodes == 0
    prune = resolve("--preset", "full", "--prune-offer-episodes", "96", "--blueprint-offer-episodes", "96")
    assert prune.overrides == {"blueprint_offer_episodes": 96, "prune_offer_episodes": 96}
    assert bl.make_setup(prune)["prune_offer_episodes"] == 96 and bl.make_setup(full)["prune_offer_episodes"] == 0


@pytest.mark.parametrize("flags, line", [
    (["--preset", "short", "--lr-anneal-episodes", "0", "--lr-end", "0.001"], "--lr-end 0.001 needs a ramp"),
    (["--preset", "full", "--lr-end", "0", "--lr-anneal-episodes", "0"], "--lr-end 0.0 needs a ramp"),
    (["--preset", "full", "--lr-end", "1.5"], "--lr-end must be in [0, 1] (got 1.5)"),
    (["--preset", "full", "--entropy-coef-start", "nan"], "--entropy-coef-start must be >= 0 (got nan)"),
    (["--preset", "full", "--blueprint-entropy-coef", "-1"], "--blueprint-entropy-coef must be >= 0 (got -1.0)"),
    (["--preset", "full", "--critic-warmup-episodes", "60"], "--critic-warmup-episodes 60 must be a multiple of"),
    (["--preset", "full", "--blueprint-offer-episodes", "321"], "--blueprint-offer-episodes 321 must be at most"),
    (["--preset", "full", "--prune-offer-episodes", "321"], "--prune-offer-episodes 321 must be at most"),
])
def test_refuses_bad_ppo_settings_in_one_line(tmp_path, capsys, flags, line):
    bl = _bench_module("bench_learning")
    with pytest.raises(SystemExit) as e:
        bl.resolve_args(bl.build_parser(), [*flags, "--out", str(tmp_path / "bl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("bench_learning.py: error: ") and line in err[0], err


def test_reward_weights_are_the_presets_unless_a_flag_sets_one(tmp_path):
    bl = _bench_module("bench_learning")
    resolve = lambda *argv: bl.resolve_args(bl.build_parser(), [*argv, "--out", str(tmp_path / "bl")])
    from esper.simic.envs.rewards import RewardConfig
    from esper.simic.trainers.learning_jobs import reward_config
    weights = lambda args: reward_config({"rent_weight": args.rent_weight,
                                             "contribution_weight": args.contribution_weight,
                                             "unkept_weight": args.unkept_weight})
    assert weights(resolve("--preset", "short")) == RewardConfig()  # RewardConfig's defaults
    full = weights(resolve("--preset", "full"))
    assert (full.rent_weight, full.contribution_weight) == (0.0, 0.1)  # a fifth of RewardConfig's payment
    set_both = weights(resolve("--preset", "short", "--contribution-weight", "0", "--rent-weight", "0.1"))
    assert (set_both.rent_weight, set_both.contribution_weight) == (0.1, 0.0)
    kept = weights(resolve("--preset", "full", "--contribution-weight", "0", "--unkept-weight", "1"))
    assert (kept.rent_weight, kept.contribution_weight, kept.unkept_weight) == (0.0, 0.0, 1.0)
    assert full.unkept_weight == 0.0  # RewardConfig's default: no charge unless a flag sets one
    for bad in (("--contribution-weight", "-0.5"), ("--unkept-weight", "-1")):
        with pytest.raises(SystemExit):
            resolve("--preset", "full", *bad)


def test_each_preset_has_its_held_out_seeds_unless_a_flag_names_them(tmp_path):
    bl = _bench_module("bench_learning")
    resolve = lambda *argv: bl.resolve_args(bl.build_parser(), [*argv, "--out", str(tmp_path / "bl")])
    assert resolve("--preset", "short").eval_seeds == [2000, 2001, 2002, 2003, 2004]
    full = resolve("--preset", "full")
    assert full.eval_seeds == [2000, 2001, 2002, 2003, 2004, *range(3000, 3010)] and full.overrides == {}
    assert resolve("--preset", "full", "--eval-seeds", "2000", "2001").eval_seeds == [2000, 2001]


def test_episodes_that_share_task_seeds_are_checked_and_held_out(tmp_path, capsys):
    from esper.simic.trainers.learning_jobs import training_task_seeds
    bl = _bench_module("bench_learning")
    resolve = lambda *argv: bl.resolve_args(bl.build_parser(), [*argv, "--out", str(tmp_path / "bl")])
    shared = resolve("--preset", "full", "--episodes-per-task-seed", "4", "--group-baseline")
    assert (shared.episodes_per_task_seed, shared.group_baseline) == (4, True)
    assert shared.overrides == {"episodes_per_task_seed": 4, "group_baseline": True}  # the table says it
    assert resolve("--preset", "full").overrides == {}
    assert training_task_seeds([2], 8, 4) == {2, 3} and training_task_seeds([2], 3) == {2, 3, 4}
    for argv, says in ((["--episodes-per-task-seed", "3"], "must divide --n-envs 8"),
                       (["--group-baseline"], "needs --episodes-per-task-seed >= 2"),
                       (["--episodes", "16", "--train-seeds", "0", "--episodes-per-task-seed", "2", "--eval-seeds",
                         "7", "8"], "--eval-seeds [7] are task seeds that training episodes use")):
        with pytest.raises(SystemExit):
            resolve("--preset", "full", *argv)
        assert says in capsys.readouterr().err


def test_resuming_a_finished_seed_adds_no_training_time(tmp_path):
    from esper.simic.trainers.learning_jobs import CurveProbe
    clock = tmp_path / "clock.json"
    clock.write_text(json.dumps({"train_seconds": 797.0}))
    probe = CurveProbe({"eval_every": 16, "episodes": 320, "curve_seeds": []}, clock)
    time.sleep(0.05)  # time passes in this process, but no update ran
    assert probe.elapsed() == 797.0
    probe(None, {"episodes": 8})  # an update (no curve episode due yet): its time now counts, and the clock keeps it
    assert probe.elapsed() > 797.0 and json.loads(clock.read_text())["train_seconds"] > 797.0


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc (Linux)")
def test_sigterm_stops_the_blueprint_probe_and_its_workers(tmp_path, start_bench):
    "The probes share bench_learning's pool: a SIGTERM ends them in one line and leaves no worker running."
    p = start_bench("blueprint_probe.py", "--runs", "none:schedule:conv_heavy", "none:schedule:conv_small",
                    "--workers", "2", cwd=tmp_path)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing
    while len(workers := _pool_workers(p.pid)) < 2:
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    assert err.strip().splitlines() == ["blueprint_probe.py: terminated"]
    assert not [w for w in workers if _runs(w)]


def test_a_stop_is_one_line_even_when_an_exit_hook_fails(tmp_path):
    "After the one line, nothing more: an exit hook that fails (as concurrent.futures' did after a stop) prints nothing."
    import subprocess
    script = tmp_path / "stopped.py"
    script.write_text(
        "import sys, threading, time\n"
        "from esper.cli.runs import stops_in_one_line\n"
        "def broken():\n"
        "    raise OSError(9, 'Bad file descriptor')\n"
        "threading._register_atexit(broken)\n"
        "with stops_in_one_line('stopped.py', 'kept'):\n"
        "    print('started', flush=True)\n"
        "    time.sleep(120)\n"
    )
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "started\n"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip().splitlines() == ["stopped.py: terminated; kept"]


def test_a_delayed_rule_is_the_rule_at_zero_and_moves_k_epochs_after_the_gate_opens():
    from esper.leyline import LifecycleOp
    from esper.tamiyo.baselines import ScheduleTamiyo
    from esper.tamiyo.episode import run_episode
    from esper.tasks import get_task
    tp = _bench_module("timing_probe")
    plan = ("conv_heavy", "conv_small")

    def moves(controller):
        "Every non-WAIT decision as (epoch, op, slot), and the final accuracy."
        log, decide = [], controller.decide
        def logged(obs, model):
            action = decide(obs, model)
            if action.op != LifecycleOp.WAIT: log.append((obs["epoch"], action.op.name, action.slot))
            return action
        controller.decide = logged
        problem = GrowthProblem("mnist1d", max_epochs=12, max_batches=4)
        result = run_episode(get_task("mnist1d", shuffle_seed=0), controller, seed=0, problem=problem)
        return log, result.final_accuracy

    rule = moves(ScheduleTamiyo(plan, concurrent=True))
    assert moves(tp.DelayedSchedule(plan, 0)) == rule
    late, _ = moves(tp.DelayedSchedule(plan, 2))
    first_advance = lambda log: next(epoch for epoch, op, _ in log if op == "ADVANCE")
    assert first_advance(late) == first_advance(rule[0]) + 2
    assert [op for _, op, _ in late if op == "GERMINATE"] == ["GERMINATE"] * 2  # planted as the rule plants
    with pytest.raises(ValueError, match="delay must be >= 0"):
        tp.DelayedSchedule(plan, -1)


def test_replay_probs_lists_a_policys_unsure_decisions_likeliest_first(tmp_path, run_bench):
    import re
    from esper.simic import PPOAgent
    from esper.simic.envs.env import action_dim, state_dim
    PPOAgent(state_dim(2), action_dim(2, False)).save(tmp_path / "fresh.pt")  # untrained: unsure everywhere
    p = run_bench("replay_actions.py", "--preset", "short", "--seeds", "2000", "--checkpoints",
                  str(tmp_path / "fresh.pt"), "--probs", cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    timeline, unsure = p.stdout.strip().splitlines()
    assert timeline.startswith(f"task seed 2000  {tmp_path / 'fresh.pt'}: ")
    entry = r"(\d+):([A-Za-z_/@\d]+) ([\d.]+)/([A-Za-z_/@\d]+) ([\d.]+)"
    assert re.fullmatch(rf"    unsure: {entry}( {entry})*", unsure), unsure
    pairs = re.findall(entry, unsure)
    named = [m[k] for m in pairs for k in (1, 3)]
    assert all(("@" in n) == (n != "WAIT") for n in named), named  # every action but WAIT names its slot
    assert [int(m[0]) for m in pairs] == sorted(int(m[0]) for m in pairs)  # in epoch order
    assert all(float(m[2]) >= float(m[4]) and float(m[2]) < 0.95 for m in pairs)  # likeliest first, none sure


def test_reward_terms_pairs_two_rules_term_by_term_on_the_same_task_seeds():
    rt = _bench_module("reward_terms")
    row = lambda *accs: {"per_seed": [{"final_accuracy": a, **dict.fromkeys(rt.TERMS, a / 100)} for a in accs]}
    diff = rt.paired(row(90.0, 91.0, 92.0), row(89.0, 91.0, 90.0))  # differences 1, 0, 2 points
    close = lambda a, b: abs(a - b) < 1e-9
    assert close(diff["final_accuracy"]["mean"], 1.0) and close(diff["final_accuracy"]["std"], 1.0)
    assert close(diff["total"]["mean"], 0.01) and close(diff["contribution"]["std"], 0.01)


def test_reward_terms_prices_other_contribution_weights_from_the_discounted_parts():
    rt = _bench_module("reward_terms")
    parts = lambda acc, contrib, final: {"accuracy": acc, "contribution": contrib, "rent": 0.0, "terminal": final,
                                         "unkept": 0.0}
    seed = lambda *p: {"discounted": parts(*p)}
    # the first plan ends higher on every seed; the second is paid far more for the contributions it fossilizes
    first = {"rule": "a", "per_seed": [seed(0.40, 0.5, 0.90), seed(0.41, 0.5, 0.91), seed(0.40, 0.5, 0.92)]}
    second = {"rule": "b", "per_seed": [seed(0.39, 0.7, 0.89), seed(0.41, 0.7, 0.90), seed(0.38, 0.7, 0.90)]}
    close = lambda a, b: abs(a - b) < 1e-9
    assert close(rt.discounted_return(first["per_seed"][0], 0.5), 100 * (0.40 + 0.25 + 0.90))
    without = rt.ranking([first, second], 0.0)["b"]  # accuracy and terminal alone: differences 2, 1, 4 hundredths
    near = lambda a, b: abs(a - b) < 1e-3  # the ranking rounds to thousandths
    assert near(without["mean"], 7 / 3) and without["ratio"] > 0
    paid = rt.ranking([first, second], 0.5)["b"]  # the payment's 10 hundredths more for b reverse the ranking
    assert near(paid["mean"], 7 / 3 - 10) and paid["ratio"] < 0
    assert near(paid["std"], without["std"])  # a payment that is the same on every seed adds no noise


def test_reward_terms_discounts_each_play_as_ppo_sees_it(monkeypatch):
    rt = _bench_module("reward_terms")
    monkeypatch.setattr(rt, "FULL_EPISODE", {**rt.FULL_EPISODE, "max_epochs": 4, "max_batches": 2})
    rule = "concurrent:conv_heavy+conv_small"
    seed = rt.play(rule, [1000], 0.0)["per_seed"][0]  # three paid steps: epochs 2, 3 and 4
    d = seed["discounted"]
    assert abs(d["terminal"] - seed["final_val_accuracy"] / 100 * rt.DEFAULT_GAMMA ** 2) < 1e-6  # the last step's discount
    assert d["unkept"] >= 0 and d["rent"] <= 0  # a charge and a rent, kept as the amounts the weights multiply
    monkeypatch.setattr(rt, "DEFAULT_GAMMA", 1.0)  # undiscounted, the unit parts rebuild the paid sums exactly
    flat = rt.play(rule, [1000], 0.0)["per_seed"][0]
    assert abs(rt.discounted_return(flat, 0.5) - 100 * flat["total"]) < 1e-3  # 0.5: the payment the play was paid


def test_reward_terms_plays_each_presets_episodes_and_rent():
    rt = _bench_module("reward_terms")
    full, full_rent = rt.preset_settings("full")
    short, short_rent = rt.preset_settings("short")
    assert full == {"max_epochs": 30, "max_batches": None, "lr_schedule": "cosine", "param_budget": 2500}
    assert full_rent == 0.0 and full == rt.FULL_EPISODE  # the default play is the full preset's
    assert short == {"max_epochs": 15, "max_batches": 30, "lr_schedule": "constant", "param_budget": None}
    assert short_rent == rt.RewardConfig().rent_weight > 0  # the short preset pays RewardConfig's rent
    tiny = {**short, "max_epochs": 3, "max_batches": 2}
    played = rt.play("concurrent:conv_heavy+conv_heavy", [1000], short_rent, episode=tiny)
    assert played["per_seed"][0]["rent"] < 0 and played["reward"]["rent_weight"] == short_rent


def test_reward_terms_lets_critics_judge_the_first_move_where_two_plays_differ():
    rt = _bench_module("reward_terms")
    row = lambda moves, values, rewards: {"moves": moves, "values": [[v] for v in values], "rewards": rewards}
    # both plays wait, then a germinates conv_small and b depthwise (step 1); the last step's reward ends each run
    a = {"per_seed": [row(["W", "G/conv_small", "W"], [0.5, 0.6, 0.70], [0.0, 0.1, 1.0])] * 2}
    b = {"per_seed": [row(["W", "G/depthwise", "W"], [0.5, 0.6, 0.65], [0.0, 0.1, 0.9])] * 2}
    close = lambda x, y: abs(x - y) < 1e-9
    judged = rt.critics_judge(a, b, ["c"], gamma=0.5, lam=0.8)
    assert judged["differing_step"] == [1, 1]
    assert close(judged["return"]["mean"], 100 * 0.5 * (1.0 - 0.9))  # the runs' own returns from step 1
    # GAE(0.8): 0.1 + 0.5 * (0.2 * V(s2) + 0.8 * r2) for each, so 0.5 * (0.2 * 0.05 + 0.8 * 0.1) apart
    assert close(judged["advantages"]["c"]["mean"], 100 * 0.5 * (0.2 * 0.05 + 0.8 * 0.1))
    one_step = rt.critics_judge(a, b, ["c"], gamma=0.5, lam=0.0)  # the critic's value of the next state alone
    assert close(one_step["advantages"]["c"]["mean"], 100 * 0.5 * 0.05)
    assert close(rt.lambda_return([0.1, 1.0], [], 0, 0.5, 1.0), 0.6)  # lambda 1 reads no values


def test_reward_terms_stores_each_critics_value_of_every_state_played(tmp_path, monkeypatch):
    from esper.simic.envs.env import state_dim
    from esper.simic.agent.ppo import PPOAgent
    rt = _bench_module("reward_terms")
    monkeypatch.setattr(rt, "FULL_EPISODE", {**rt.FULL_EPISODE, "max_epochs": 3, "max_batches": 2})
    path = tmp_path / "agent.pt"
    PPOAgent(state_dim=state_dim(2), hidden_dim=8).save(path)
    seed = rt.play("concurrent:conv_heavy+conv_small", [1000], 0.0, (str(path), str(path)))["per_seed"][0]
    assert len(seed["values"]) == len(seed["moves"]) == len(seed["rewards"]) == 2  # decisions at epochs 1 and 2
    assert all(len(v) == 2 and v[0] == v[1] for v in seed["values"])  # one value per critic, the same critic twice
    assert seed["moves"][0].startswith("GERMINATE/conv_heavy")
    assert abs(sum(seed["rewards"]) - seed["total"]) < 1e-4
    light = rt.play("concurrent:conv_heavy+conv_small", [1000], 0.0, (), contribution_weight=0.1)
    assert light["reward"]["contribution_weight"] == 0.1
    assert abs(light["per_seed"][0]["contribution"] - seed["contribution"] / 5) < 1e-4  # the same play, paid a fifth


def test_reward_terms_refuses_a_single_rule_in_one_line(tmp_path, run_bench):
    p = run_bench("reward_terms.py", "--rules", "concurrent:conv_heavy+conv_small", cwd=tmp_path, timeout=120)
    line = "reward_terms.py: error: --rules needs two rules or more: the first is compared with each other"
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [line]


def test_the_blueprint_probe_prices_each_candidate_it_installs():
    from esper.kasmina.model import _blueprint_cost
    bp = _bench_module("blueprint_probe")
    original = B.BLUEPRINT_REGISTRY["conv1d"]["attention"]
    try:
        bp.install("k3_k3")
        small = _blueprint_cost("attention", "conv1d", 8)
        bp.install("k5_k5")  # in the same process, as a pool worker plays one candidate after another
        assert (small, _blueprint_cost("attention", "conv1d", 8)) == (408, 664)
        bp.install("k3_k3_x1.5")  # a middle 1.5 host widths wide: 12 channels at 8
        assert _blueprint_cost("attention", "conv1d", 8) == 8 * 12 * 3 + 24 + 12 * 8 * 3 + 8
    finally:
        B.BLUEPRINT_REGISTRY["conv1d"]["attention"] = original
        _blueprint_cost.cache_clear()


def test_the_blueprint_probe_blends_every_seed_on_the_curve_it_is_given(monkeypatch):
    bp = _bench_module("blueprint_probe")
    seen = []

    def fake_episode(task, controller, config, seed, problem):
        assert (config.lr_schedule, problem.max_epochs, problem.param_budget) == ("cosine", 30, 2500)  # the full runs
        seen.append(config.blend_algorithm)
        return types.SimpleNamespace(final_accuracy=90.0, host_params=914, params_added=1064)

    monkeypatch.setattr(bp, "run_episode", fake_episode)
    row = bp.probe("none:concurrent:conv_heavy", [1000, 1001], "sigmoid")
    assert seen == ["sigmoid", "sigmoid"] and row["blend"] == "sigmoid"
    assert bp.probe("none:concurrent:conv_heavy", [1000])["blend"] == seen[-1] == "linear"  # the rules' own curve


def test_every_plan_is_each_blueprint_alone_then_each_ordered_pair_within_the_budget(run_bench, tmp_path):
    plans = _bench_module("blueprint_probe").every_plan()
    assert plans[:5] == [f"none:concurrent:{b}" for b in BLUEPRINTS]
    # 25 ordered pairs less conv_heavy twice: 914 + 2 x 1,064 parameters pass the budget of 2,500
    assert len(plans) == len(set(plans)) == 29 and "none:concurrent:conv_heavy+conv_heavy" not in plans
    assert {"none:concurrent:conv_heavy+conv_small", "none:concurrent:conv_small+conv_heavy"} <= set(plans)
    p = run_bench("blueprint_probe.py", "--every-plan", "--runs", "none:concurrent:norm", cwd=tmp_path, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip() == "blueprint_probe.py: error: --every-plan and --runs: give one of them"
