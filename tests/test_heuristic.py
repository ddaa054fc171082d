"""Tamiyo: signal tracker, heuristic decisions, and the episode runner (telemetry synced every epoch)."""
import pytest

from esper.leyline import LifecycleOp, SeedStage
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem
from esper.tamiyo import (Episode, EpisodeConfig, HeuristicConfig, HeuristicTamiyo, SignalTracker, TamiyoAction)


def test_signal_tracker_deltas_plateau_best():
    tr = SignalTracker(plateau_threshold=1.0)
    seq = [(2.0, 30.0), (1.8, 40.0), (1.7, 40.5), (1.75, 39.0), (1.6, 45.0)]
    out = [tr.update(e, l, a, l, a) for e, (l, a) in enumerate(seq, 1)]
    assert [s.plateau_epochs for s in out] == [0, 0, 1, 2, 0]
    assert out[3].accuracy_delta == pytest.approx(-1.5) and out[1].loss_delta == pytest.approx(-0.2)
    assert out[-1].best_val_accuracy == 45.0 and out[-1].best_val_loss == 1.6
    assert out[-1].to_obs()["accuracy_history_5"] == [a for _, a in seq]
    with pytest.raises(ValueError, match="plateau_threshold"): SignalTracker(plateau_threshold=-1)


def test_heuristic_config_validation():
    with pytest.raises(ValueError, match="blueprints"): HeuristicConfig(blueprints=("resnet",))
    with pytest.raises(ValueError): HeuristicConfig(blend="quadratic")


def test_short_heuristic_episode_syncs_telemetry_every_epoch():
    task = get_task("mnist1d")
    tam = HeuristicTamiyo(HeuristicConfig(min_epoch_to_germinate=1, plateau_epochs=0))
    cfg = EpisodeConfig(blend_epochs=1, counterfactual_stages=("BLENDING", "HOLDING"))
    ep = Episode(task, cfg, problem=GrowthProblem.of_task(task, max_epochs=6, max_batches=10))
    tam.reset(); obs = ep.reset(seed=0)
    synced = []
    while not ep.done:
        obs, info = ep.step(tam.decide(obs, ep.model))
        for slot, st in ep.model.seed_states().items():
            if st.stage not in (SeedStage.EMBARGOED,):
                assert st.telemetry.epoch == ep.epoch, (slot, st.telemetry.epoch, ep.epoch)
                synced.append(st.telemetry.gradient_norm)
    assert synced and max(synced) > 0
    res = ep.result()
    assert res.seeds_germinated >= 1 and tam.decisions[0].op == LifecycleOp.GERMINATE
    ops = [d.op for d in tam.decisions]
    assert LifecycleOp.ADVANCE in ops, ops


def test_heuristic_avoids_recently_pruned_blueprint():
    from esper.kasmina import MorphogeneticModel
    from esper.tasks import build_host
    m = MorphogeneticModel(build_host("mnist1d_impaired", 1, 10, (40,)))
    tam = HeuristicTamiyo(HeuristicConfig(blueprints=("conv_heavy", "depthwise"), blueprint_cooldown=5))
    m.germinate("block1", "conv_heavy"); m.prune("block1")
    assert tam.choose_blueprint(m, 0) == "depthwise"
    m.germinate("block2", "depthwise"); m.step_epoch(2, 40.0); m.prune("block2")
    assert tam.choose_blueprint(m, 2) == "conv_heavy"      # both recent: the one pruned longest ago
    assert tam.choose_blueprint(m, 6) == "conv_heavy"      # cooldown over for conv_heavy


def test_episode_rejects_bad_config_and_step_before_reset():
    with pytest.raises(ValueError, match="max_epochs"): GrowthProblem("bad", max_epochs=0)
    with pytest.raises(ValueError, match="counterfactual_stages"): EpisodeConfig(counterfactual_stages=("ALIVE",))
    with pytest.raises(RuntimeError, match="reset"): Episode(get_task("mnist1d")).step(TamiyoAction.wait())


def test_heuristic_on_a_suite_plays_every_problem_on_every_seed_within_its_menu_and_budgets():
    import json

    from esper.nissa.reading import plot_lifecycle_timeline
    from esper.tamiyo.heuristic_run import HeuristicRun, heuristic_files, run_heuristic
    from esper.tamiyo.problems import GrowthProblem, Suite

    suite = Suite("budgets", 1, (
        # conv_heavy (1,064 parameters in block 1) does not fit beside the host's 914: the heuristic's first choice
        GrowthProblem("tight", blueprints=("conv_heavy", "global_mix"), param_budget=1500, max_epochs=6,
                      max_batches=3),
        GrowthProblem("short", "digits", blueprints=("conv_small",), compute_budget=3.5, max_epochs=6, max_batches=3),
    ))
    lifecycle = []
    s = run_heuristic(HeuristicRun(suite=suite, episodes=2, seed=7, device="cpu"), progress=False, lifecycle=lifecycle)
    assert [(r["problem"], r["seed"]) for r in s["results"]] == [("tight", 7), ("tight", 8), ("short", 7), ("short", 8)]
    for r in s["results"]:
        p = suite[r["problem"]]
        assert {e["blueprint"] for e in r["lifecycle"]} <= set(p.blueprints)
        assert p.param_budget is None or r["host_params"] + r["params_added"] <= p.param_budget
    assert any(r["seeds_germinated"] for r in s["results"] if r["problem"] == "tight")  # the budget check is not idle
    assert all(r["epochs"] < 6 for r in s["results"] if r["problem"] == "short")  # the compute budget ended them
    files = heuristic_files(s, lifecycle, plot_lifecycle_timeline)
    assert sorted(files) == ["summary.json", "timeline.png"] and files["timeline.png"][:4] == b"\x89PNG"
    saved = json.loads(files["summary.json"])
    assert saved["suite"]["name"] == "budgets" and list(saved["per_problem"]) == ["tight", "short"]
    assert saved["accuracy"].startswith("final_accuracy: % correct on the task's test split")
    assert "test accuracy (% correct on each problem's test split" in saved["table"]
    assert [line.split(" |")[0] for line in saved["table"].splitlines()[4:]] == ["| tight", "| short",
                                                                                 "| all 2 problems"]
    with pytest.raises(ValueError, match="leave task, host at the default"):
        run_heuristic(HeuristicRun(suite=suite, task="digits", host="digits_impaired"))


def test_heuristic_suite_command_prints_the_test_accuracy_table(tmp_path, capsys):
    import json

    from esper.cli import main
    from esper.tamiyo.problems import TINY

    assert main(["heuristic", "--suite", "tiny", "--seed", "1000", "--no-progress", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "suite tiny v1, seed 1000: test accuracy (% correct on each problem's test split" in out
    assert all(f"| {name} | 1 | " in out for name in TINY.names) and "| all 2 problems | 2 | " in out
    assert json.loads((tmp_path / "summary.json").read_text())["seeds"] == [1000]
