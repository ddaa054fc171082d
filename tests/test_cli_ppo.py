"""`esper-train ppo`: every documented flag, the annealing line, a short run that saves and resumes."""
import json

import pytest
import torch

from esper.cli import build_parser, main

SEED_FLAGS = ("--vectorized", "--n-envs", "--n-episodes", "--episodes", "--max-epochs", "--devices", "--entropy-coef",
              "--entropy-coef-start", "--entropy-coef-end", "--entropy-anneal-episodes", "--blueprint-entropy-coef", "--lr", "--lr-end",
              "--lr-anneal-episodes", "--blueprint-offer-episodes", "--prune-offer-episodes", "--critic-warmup-episodes", "--clip-ratio",
              "--gamma", "--save", "--resume", "--recurrent", "--factored", "--telemetry-dir", "--telemetry-level",
              "--seed", "--task", "--update-every", "--fast-update")


def test_help_lists_every_seed_flag(capsys):
    with pytest.raises(SystemExit) as e: main(["ppo", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    missing = [f for f in SEED_FLAGS if f not in out]
    assert not missing, missing


def test_ppo_is_a_subcommand():
    assert "ppo" in build_parser().format_help()


def test_annealing_line_and_a_short_vectorized_run(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "2",
               "--entropy-coef-start", "0.2", "--entropy-coef-end", "0.01", "--entropy-anneal-episodes", "4",
               "--blueprint-entropy-coef", "0.1", "--devices", "cpu", "--save", str(save), "--telemetry-dir", str(tmp_path / "tel")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "Entropy annealing: 0.2 -> 0.01 over 4 episodes; blueprint choice 0.1 -> 0" in out.out.splitlines()[0]
    assert torch.load(save, weights_only=True)["config"]["blueprint_entropy_coef"] == 0.1
    assert "batch 1:" in out.out and "explained_var" in out.out and "entropy_coef 0.2000" in out.out
    hist = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert len(hist) == 1 and hist[0]["entropy_coef"] == 0.2
    assert (tmp_path / "tel" / "events.jsonl").stat().st_size > 0
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "4", "--max-epochs", "2", "--max-batches", "2",
               "--entropy-coef-start", "0.2", "--entropy-coef-end", "0.01", "--entropy-anneal-episodes", "4",
               "--blueprint-entropy-coef", "0.1", "--save", str(save), "--resume", str(save), "--no-progress"])
    assert rc == 0
    hist = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert [h["batch"] for h in hist] == [1, 2] and hist[1]["entropy_coef"] == pytest.approx(0.105)  # step 1 of 2


def test_fixed_coefficient_line_single_env(capsys):
    rc = main(["ppo", "--n-episodes", "1", "--update-every", "1", "--max-epochs", "2", "--max-batches", "1",
               "--entropy-coef", "0.05", "--no-progress"])
    assert rc == 0
    assert capsys.readouterr().out.splitlines()[0] == "Entropy coef: 0.05 (fixed)"


def test_bad_values_are_one_line_errors(capsys, tmp_path):
    with pytest.raises(SystemExit) as e: main(["ppo", "--n-envs", "0"])
    assert e.value.code == 2 and "--n-envs" in capsys.readouterr().err
    with pytest.raises(SystemExit): main(["ppo", "--gamma", "1.5"])
    assert "gamma" in capsys.readouterr().err
    rc = main(["ppo", "--max-epochs", "1", "--n-episodes", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--max-epochs must be >= 2" in err and len(err.strip().splitlines()) == 1  # before any work
    rc = main(["ppo", "--resume", str(tmp_path / "nope.pt"), "--n-episodes", "1", "--max-epochs", "2", "--no-progress",
               "--save", str(tmp_path / "nope.pt")])
    assert rc == 1
    capsys.readouterr()
    rc = main(["ppo", "--resume", str(tmp_path / "nope.pt"), "--n-episodes", "1", "--max-epochs", "2"])  # issue 76
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "without --save nothing keeps what it adds" in err[0], err


def test_lr_schedule_is_part_of_the_run(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    tiny = ["ppo", "--vectorized", "--n-envs", "2", "--max-epochs", "2", "--max-batches", "1", "--no-progress",
            "--save", str(save)]
    assert main([*tiny, "--n-episodes", "2", "--lr-schedule", "cosine"]) == 0
    ck = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert len(ck) == 1
    capsys.readouterr()
    rc = main([*tiny, "--n-episodes", "4", "--resume", str(save)])  # constant rates now: not the same run
    err = capsys.readouterr().err
    assert rc == 1 and "lr_schedule" in err and "'cosine'" in err
    with pytest.raises(SystemExit) as e: main(["ppo", "--lr-schedule", "step"])
    assert e.value.code == 2 and "--lr-schedule" in capsys.readouterr().err


def test_lr_ramp_reaches_the_updates_and_needs_both_flags(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "6", "--max-epochs", "2", "--max-batches", "1",
               "--lr", "0.001", "--lr-end", "0", "--lr-anneal-episodes", "4", "--no-progress", "--save", str(save)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "Learning rate: 0.001 -> 0.0 over 4 episodes" in out.out.splitlines()
    hist = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert [h["lr"] for h in hist] == [0.001, 0.0005, 0.0]  # 4 episodes // 2 envs: a ramp of 2 updates
    for half in (["--lr-end", "0"], ["--lr-anneal-episodes", "4"]):
        assert main(["ppo", "--n-episodes", "1", "--max-epochs", "2", *half]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--lr-end and --lr-anneal-episodes go together" in err[0], err
    assert main(["ppo", "--n-episodes", "1", "--max-epochs", "2", "--max-batches", "1", "--no-progress",
                 "--lr-end", "2", "--lr-anneal-episodes", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lr_end must be in [0, 1]" in err[0], err


def test_population_flag_trains_the_batch_as_one_population_and_refuses_what_it_cannot_do(capsys):
    base = ["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "1",
            "--no-progress"]
    assert main(base + ["--population", "on"]) == 0
    assert "stepping 2 environments in this process as one population" in capsys.readouterr().out
    assert main(base + ["--population", "auto"]) == 0  # CPU: auto is off, the default workers step the envs
    assert "as one population" not in capsys.readouterr().out
    assert main(["ppo", "--population", "on", "--n-episodes", "1", "--max-epochs", "2"]) == 2
    assert capsys.readouterr().err.strip().startswith("esper-train ppo: error: --population needs --vectorized")
    assert main(base + ["--population", "on", "--workers", "1"]) == 2  # refused before any work
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "without workers" in err[0], err
    assert main(base + ["--device", "cuda:7" if not __import__("torch").cuda.is_available() else "nonsense"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("esper-train ppo: error: --device/--devices:"), err


def test_param_budget_binds_ppo_and_compare(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "1",
                 "--param-budget", "2500", "--no-progress", "--workers", "0", "--save", str(save)]) == 0
    saved = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert all(r["avg_params_added"] <= 2500 - 914 for r in saved)
    out = tmp_path / "cmp"
    assert main(["compare", "--controllers", "fixed", "--fixed-rule", "conv_heavy", "conv_heavy", "--fixed-concurrent",
                 "--param-budget", "2500", "--max-epochs", "3", "--max-batches", "1", "--seeds", "0",
                 "--out", str(out)]) == 0
    res = json.loads((out / "comparison.json").read_text())
    assert res["config"]["param_budget"] == 2500
    assert res["rows"][0]["params_total"] == 914 + 1064  # the second conv_heavy would pass the budget: refused
    # the policy plays too, on the device `auto` picks (the checkpoint's storage was once read as tagged "auto")
    assert main(["compare", "--controllers", "ppo", "--checkpoint", str(save), "--device", "auto", "--max-epochs", "2",
                 "--max-batches", "1", "--seeds", "0", "--out", str(tmp_path / "cmp_ppo")]) == 0
    assert json.loads((tmp_path / "cmp_ppo" / "comparison.json").read_text())["rows"][0]["controller"] == "ppo"
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["compare", "--param-budget", "0", "--out", str(out)])
    assert e.value.code == 2 and "--param-budget" in capsys.readouterr().err


def test_fast_update_flag_reaches_the_agent(tmp_path, monkeypatch):
    """--fast-update: the saved config says so and the optimizer is fused; without a compiler, one warning."""
    import torch

    def no_compiler(fn, **kw):
        def fail(*a, **k):
            raise RuntimeError("no C++ compiler found")
        return fail
    monkeypatch.setattr(torch, "compile", no_compiler)
    save = tmp_path / "agent.pt"
    with pytest.warns(RuntimeWarning, match=r"torch.compile failed \(RuntimeError: no C\+\+ compiler found\)"):
        rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches",
                   "2", "--workers", "0", "--fast-update", "--save", str(save), "--no-progress"])
    assert rc == 0
    ck = torch.load(save, weights_only=True)
    assert ck["config"]["fast_update"] is True
    assert ck["optimizer_state_dict"]["param_groups"][0]["fused"] is True


def test_episodes_that_share_a_task_seed(tmp_path, capsys):
    """--episodes-per-task-seed and --group-baseline reach the trainer (its saved run config), and a group size
    that does not divide the envs of an update is a one-line error."""
    import torch
    save = tmp_path / "agent.pt"
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "2",
               "--workers", "0", "--episodes-per-task-seed", "2", "--group-baseline", "--save", str(save),
               "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    run = torch.load(save, weights_only=True)["trainer"]["config"]
    assert (run["episodes_per_task_seed"], run["group_baseline"]) == (2, True)
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "2", "--max-epochs", "2", "--max-batches", "2",
               "--workers", "0", "--episodes-per-task-seed", "3", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--episodes-per-task-seed 3 must divide" in err and len(err.strip().splitlines()) == 1


def test_critic_warmup_trains_the_critic_alone_first_and_counts_in_updates(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    rc = main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "6", "--max-epochs", "2", "--max-batches", "1",
               "--critic-warmup-episodes", "4", "--no-progress", "--save", str(save)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "Critic warm-up: the first 4 episodes train the critic alone" in out.out.splitlines()
    hist = json.loads((tmp_path / "agent.pt.history.json").read_text())
    assert [h["critic_only"] for h in hist] == [True, True, False]  # 4 episodes // 2 envs: two updates
    assert main(["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "6", "--max-epochs", "2",
                 "--critic-warmup-episodes", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--critic-warmup-episodes 3 must be a multiple of the episodes per update (2" in err[0]


@pytest.mark.parametrize("flag,plan_line", [
    ("blueprint-offer", "Blueprint offers: the first 2 episodes germinate with one blueprint on offer, drawn at random"),
    ("prune-offer", "Prune offers: in the first 2 episodes half the decisions that could prune offer WAIT or PRUNE"),
])
def test_offers_reach_the_run_and_are_checked_against_its_length(tmp_path, capsys, flag, plan_line):
    save = tmp_path / "agent.pt"
    tiny = ["ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "4", "--max-epochs", "2", "--max-batches", "1",
            "--no-progress", "--workers", "0"]
    rc = main([*tiny, f"--{flag}-episodes", "2", "--save", str(save)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert plan_line in out.out
    config = torch.load(save, weights_only=True)["trainer"]["config"]
    other = "prune-offer" if flag == "blueprint-offer" else "blueprint-offer"
    assert config[f"{flag.replace('-', '_')}_episodes"] == 2 and config[f"{other.replace('-', '_')}_episodes"] == 0
    assert main([*tiny, f"--{flag}-episodes", "5"]) == 2  # refused before any work
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"esper-train ppo: error: --{flag}-episodes 5 must be at most --n-episodes 4"]


def test_gae_lambdas_and_reward_weights_reach_the_run(tmp_path, capsys):
    from esper.simic.envs.rewards import RewardConfig
    save = tmp_path / "agent.pt"
    tiny = ["ppo", "--vectorized", "--n-envs", "2", "--max-epochs", "2", "--max-batches", "1", "--no-progress",
            "--save", str(save)]
    whole_run = ["--gae-lambda", "0.8", "--germinate-gae-lambda", "1", "--contribution-weight", "0.1",
                 "--rent-weight", "0"]
    rc = main([*tiny, "--n-episodes", "2", *whole_run])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "Reward weights: contribution_weight 0.1, rent_weight 0.0" in out.out.splitlines()
    config = torch.load(save, weights_only=True)["trainer"]["config"]
    ppo = config["ppo_kwargs"]  # the PPO settings a resumed run compares, where they differ from TrainingConfig's
    assert (ppo["gae_lambda"], ppo["germinate_gae_lambda"]) == (0.8, 1.0)
    reward = config["reward_config"]
    assert (reward["contribution_weight"], reward["rent_weight"]) == (0.1, 0.0)
    assert reward["unkept_weight"] == RewardConfig().unkept_weight  # a weight not given keeps RewardConfig's
    rc = main([*tiny, "--n-episodes", "4", "--resume", str(save), "--gae-lambda", "0.8", "--germinate-gae-lambda", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "reward_config" in err  # another reward is another run: not resumed
    for flag, bad in (("--gae-lambda", "1.5"), ("--germinate-gae-lambda", "-0.1"), ("--rent-weight", "-1")):
        with pytest.raises(SystemExit) as e: main(["ppo", flag, bad])
        assert e.value.code == 2 and flag in capsys.readouterr().err


def test_reward_flags_state_the_rewards_own_defaults(capsys):
    from esper.simic.envs.rewards import RewardConfig
    with pytest.raises(SystemExit): main(["ppo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in ("contribution_weight", "rent_weight", "unkept_weight"):
        assert f"(default: RewardConfig's, {getattr(RewardConfig(), name):g})" in out, name
