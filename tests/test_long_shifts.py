"""lab/probes/long_shifts.py on two tiny problems whose data shifts: the arms are chosen on the tune seeds and played
on the test seeds, each episode by its own kind; the `switch` rule holds its seeds prunable and swaps them for the
fallback once validation accuracy drops; a rerun plays nothing (the cache); an earlier --out is never replaced by
accident; bad seeds end in one line."""
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import load_script

ARGS = ["--tune-seeds", "1000", "1002", "--test-seeds", "2000", "2001"]  # 1002 and 2000 shift, 1000 and 2001 do not


def _probe(monkeypatch):
    "The probe, its problems, plans and rules made tiny: one problem loses its order, one gains noise."
    module = load_script("lab/probes/long_shifts.py", "long_shifts_probe")  # it imports selector.py beside it
    from esper.tamiyo.events import DataShift
    from esper.tamiyo.problems import TINY

    small = replace(TINY["mnist1d-small"], max_epochs=4)
    shifts = lambda name, **s: replace(small, name=name, event=DataShift(tuple(s.items()), 2, 3, 0.5))
    monkeypatch.setattr(module, "PROBLEMS", {"loses its order": (shifts("small-to-shuffled", shuffle_seq=True),),
                                             "gains noise": (shifts("small-to-noisy", corr_noise_scale=1.0),)})
    monkeypatch.setattr(module, "PLANS", ("conv_small@block1/1", "global_mix@block1/1"))
    monkeypatch.setattr(module, "SWITCH_PLANS", ("conv_small@block1/1",))
    monkeypatch.setattr(module, "DROPS", (1,))
    monkeypatch.setattr(module, "CONTRIBUTIONS", (50,))
    monkeypatch.setattr(module, "REACTIVE", ("reactive:1/0",))
    return module


def test_two_tiny_problems_end_to_end(tmp_path, capsys, monkeypatch):
    probe = _probe(monkeypatch)
    args = ARGS + ["--cache", str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")]
    probe.main(args)
    assert "Rules with one setting" in capsys.readouterr().out
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    rules = ["cswitch:conv_small@block1/1~global_mix/50", "reactive:1/0", "switch:conv_small@block1/1~global_mix/1"]
    assert sorted(r["tune_means"]) == sorted(probe.rules()) == rules
    assert r["chosen"] == {k: next(x for x in rules if x.startswith(k + ":")) for k in probe.KINDS}
    c = r["choice"]["small-to-shuffled"]
    assert c["open-loop oracle"][0] == c["open-loop oracle"][1] and c["hindsight oracle"][0].startswith("plan:")
    ep, m = r["episodes"], r["means"]
    for p, per in r["per_problem"].items():
        assert per == {a: (ep[a][f"{p}|2000"] + ep[a][f"{p}|2001"]) / 2 for a in per}
    assert m["hindsight oracle"]["all problems"]["shifts"] == pytest.approx(
        (ep["hindsight oracle"]["small-to-shuffled|2000"] + ep["hindsight oracle"]["small-to-noisy|2000"]) / 2)
    assert m["open-loop oracle"]["gains noise"]["keeps"] == ep["open-loop oracle"]["small-to-noisy|2001"]
    d = r["paired"]["hindsight oracle less open-loop oracle"]["all problems"]["all"][0]
    everywhere = {a: m[a]["all problems"]["all"] for a in ("hindsight oracle", "open-loop oracle")}
    assert d == pytest.approx(everywhere["hindsight oracle"] - everywhere["open-loop oracle"])
    assert r["config"]["shift_at"]["small-to-shuffled|2001"] is None
    assert c["open-loop plan, swapped at the shift"] == [f"knows:{c['open-loop oracle'][0].removeprefix('plan:')}"
                                                         "~global_mix"] * 2
    assert r["config"]["shift_at"]["small-to-shuffled|2000"] in (2, 3)
    text = json.dumps(r)
    assert f'"{tmp_path}' not in text and f" {tmp_path}" not in text  # relative paths
    with pytest.raises(SystemExit):
        probe.main(args)  # --out holds the first run's results
    assert "already holds an earlier run's results" in capsys.readouterr().err
    probe.main(args + ["--overwrite"])
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    assert again["episodes_played"] == 0 and again["means"] == r["means"]


def _model(stages: dict, gate: bool = True):
    "A stand-in model: the seeds' stages and blueprints, gates open or shut, every blueprint fits."
    seeds = {s: SimpleNamespace(stage=st, blueprint_id=b) for s, (st, b) in stages.items()}
    from esper.leyline import SeedStage

    return SimpleNamespace(
        slot_ids=["block1", "block2"], param_budget=None, seed_states=lambda: dict(seeds),
        slot=lambda s: SimpleNamespace(stage=seeds[s].stage if s in seeds else SeedStage.DORMANT),
        gate_open=lambda s: gate, fits=lambda s, b: True,
    )


def test_switch_holds_then_swaps(monkeypatch):
    "No fossilizing while the data holds; a drop prunes every seed not of the fallback, which then grows in its slot."
    probe = _probe(monkeypatch)
    from esper.leyline import LifecycleOp, SeedStage

    rule = probe.SwitchTamiyo("conv_small@block1/1+global_mix@block2/1", "global_mix", 5)
    both = {"block1": (SeedStage.HOLDING, "conv_small"), "block2": (SeedStage.BLENDING, "global_mix")}
    calm = {"epoch": 6, "val_accuracy": 60.0, "best_val_accuracy": 62.0}
    rule.inner.pending = []  # both seeds planted
    act = rule.decide(calm, _model(both))
    assert (act.op, act.slot) == (LifecycleOp.ADVANCE, "block2")  # block1's open gate is held, block2 still advances
    act = rule.decide(calm, _model({"block1": (SeedStage.HOLDING, "conv_small")}))
    assert act.op == LifecycleOp.WAIT  # held in HOLDING, prunable
    drop = {"epoch": 7, "val_accuracy": 50.0, "best_val_accuracy": 62.0}
    act = rule.decide(drop, _model(both))
    assert (act.op, act.slot) == (LifecycleOp.PRUNE, "block1") and rule.switched
    act = rule.decide(drop, _model({"block1": (SeedStage.PRUNED, "conv_small"), "block2": both["block2"]}))
    assert act.op != LifecycleOp.PRUNE  # the fallback's seed stays; the pruned slot waits out its embargo
    act = rule.decide(calm, _model({"block2": both["block2"]}))
    assert (act.op, act.slot, act.blueprint) == (LifecycleOp.GERMINATE, "block1", "global_mix")
    from esper.tamiyo.controllers import CONTROLLER_REGISTRY

    assert "switch" in CONTROLLER_REGISTRY and "cswitch" in CONTROLLER_REGISTRY
    assert rule.name == "switch:conv_small@block1/1+global_mix@block2/1~global_mix/5"


def test_knows_swaps_at_the_shift(monkeypatch):
    "Told the episode's shift epoch (drawn from the seed), it fires from that epoch on, and never where none comes."
    _probe(monkeypatch)
    from esper.tamiyo.controllers import make_controller

    at, never = (make_controller("knows:conv_small@block1/1~global_mix", seed) for seed in (2000, 2001))
    assert at.name == "knows:conv_small@block1/1~global_mix" and at.at in (2, 3) and never.at is None
    assert [at.fires({"epoch": e}, None) for e in range(1, 5)] == [e >= at.at for e in range(1, 5)]
    assert not any(never.fires({"epoch": e}, None) for e in range(1, 5))


def test_cswitch_fires_on_a_held_seed_that_contributes_little(monkeypatch):
    "A held seed of another blueprint contributing less than x points fires the swap; the fallback's own seeds do not."
    probe = _probe(monkeypatch)
    from esper.leyline import LifecycleOp, SeedStage

    rule = probe.ContributionSwitchTamiyo("conv_small@block1/1+global_mix@block2/1", "global_mix", 10)
    rule.inner.pending = []
    seeds = lambda c1, c2: {"block1": SimpleNamespace(stage=SeedStage.HOLDING, blueprint_id="conv_small",
                                                      metrics=SimpleNamespace(contribution=c1)),
                            "block2": SimpleNamespace(stage=SeedStage.HOLDING, blueprint_id="global_mix",
                                                      metrics=SimpleNamespace(contribution=c2))}
    obs = {"epoch": 8, "val_accuracy": 60.0, "best_val_accuracy": 70.0}  # a drop does not fire this kind
    model = _model({"block1": (SeedStage.HOLDING, "conv_small"), "block2": (SeedStage.HOLDING, "global_mix")})
    for c1, c2, fired in ((30.0, 2.0, False), (None, 2.0, False), (9.5, 30.0, True)):
        model.seed_states = lambda c1=c1, c2=c2: seeds(c1, c2)
        assert rule.fires(obs, model) == fired
    act = rule.decide(obs, model)
    assert (act.op, act.slot) == (LifecycleOp.PRUNE, "block1") and rule.switched
    assert rule.name == "cswitch:conv_small@block1/1+global_mix@block2/1~global_mix/10"


@pytest.mark.parametrize("flags, message", [
    (["--tune-seeds", "1000", "1006", "--test-seeds", "2000", "2001"], "--tune-seeds: give seeds on which"),
    (["--tune-seeds", "1000", "1002", "--test-seeds", "2001"], "--test-seeds: give seeds on which"),
    (["--tune-seeds", "1000", "1002", "--test-seeds", "1002", "2000"], "must not share a seed"),
])
def test_bad_seeds_end_in_one_line(tmp_path, capsys, monkeypatch, flags, message):
    with pytest.raises(SystemExit):
        _probe(monkeypatch).main(flags + ["--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.jsonl").exists()
