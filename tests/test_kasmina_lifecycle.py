"""Kasmina across notebooks: every transition through the model, zero-init germination, gradient isolation,
bounded incubation, alpha curves, side-effect-free counterfactuals."""
import pytest
import torch
from torch import nn

from esper.kasmina import MorphogeneticModel, blend_curve, build_blueprint
from esper.leyline import BLUEPRINTS, BlendAlgorithm, IllegalTransitionError, SeedStage
from esper.tasks import build_host, get_task
from esper.tamiyo import Episode, EpisodeConfig, TamiyoAction
from esper.leyline import LifecycleOp
from esper.tamiyo.problems import GrowthProblem


def mnist_model(**kw):
    torch.manual_seed(0)
    return MorphogeneticModel(build_host("mnist1d_impaired", 1, 10, (40,)), **kw)


def to_holding(model, slot, bp="conv_small"):
    st = model.germinate(slot, bp)
    assert model.advance(slot) and st.stage == SeedStage.TRAINING
    for e in range(model.epoch + 1, model.epoch + 1 + model.gates.min_training_epochs):
        model.step_epoch(e, 50.0); st.sync_telemetry(0.1, 1.0, False, False, e, 100)
    assert model.advance(slot) and st.stage == SeedStage.BLENDING
    for e in range(model.epoch + 1, model.epoch + 1 + model.slot(slot).blend_epochs):
        model.step_epoch(e, 50.0)
    assert model.advance(slot) and st.stage == SeedStage.HOLDING
    return st


def test_full_lifecycle_to_fossilized_and_illegal_moves():
    m = mnist_model(blend_epochs=2)
    with pytest.raises(IllegalTransitionError): m.advance("block1")       # nothing to advance
    st = to_holding(m, "block1")
    m.step_epoch(m.epoch + 1, 51.0)
    assert not m.fossilize("block1")                                      # no contribution measured yet
    st.metrics.contribution, st.metrics.contribution_epoch = 2.0, m.epoch
    assert m.fossilize("block1").passed and st.stage == SeedStage.FOSSILIZED
    with pytest.raises(IllegalTransitionError): m.advance("block1")
    with pytest.raises(ValueError, match="no live seed"): m.prune("block1")
    assert [s.name for _, s in st.history] == ["GERMINATED", "TRAINING", "BLENDING", "HOLDING", "FOSSILIZED"]


@pytest.mark.parametrize("stop", ["GERMINATED", "TRAINING", "BLENDING", "HOLDING"])
def test_prune_from_every_live_stage_then_embargo_reset(stop):
    m = mnist_model(blend_epochs=1, embargo_epochs=2)
    st = m.germinate("block2", "attention")
    path = ["TRAINING", "BLENDING", "HOLDING"]
    for target in path[: path.index(stop) + 1] if stop != "GERMINATED" else []:
        if target == "BLENDING":
            for e in range(1, 4): m.step_epoch(e, 50.0); st.sync_telemetry(0.1, 1.0, False, False, e, 10)
        if target == "HOLDING": m.step_epoch(m.epoch + 1, 50.0)
        assert m.advance("block2"), target
    assert st.stage.name == stop
    m.prune("block2", reason="test")
    assert m.slot("block2").stage == SeedStage.EMBARGOED and m.slot("block2").seed is None
    with pytest.raises(IllegalTransitionError): m.germinate("block2", "norm")
    m.step_epoch(m.epoch + 1, 50.0); assert m.slot("block2").stage == SeedStage.EMBARGOED
    m.step_epoch(m.epoch + 1, 50.0); assert m.slot("block2").stage == SeedStage.DORMANT
    assert [s.name for _, s in st.history][-4:] == ["PRUNED", "EMBARGOED", "RESETTING", "DORMANT"]
    m.germinate("block2", "norm")  # reusable


@pytest.mark.parametrize("preset,shape", [("mnist1d_impaired", (1, 40)), ("cifar10_cnn", (3, 32, 32))])
def test_germination_leaves_output_unchanged(preset, shape):
    torch.manual_seed(0)
    m = MorphogeneticModel(build_host(preset, shape[0], 10, shape[1:])).eval()
    x = torch.randn(4, *shape)
    with torch.no_grad(): ref = m(x)
    for i, slot in enumerate(m.slot_ids):
        m.germinate(slot, BLUEPRINTS[i % len(BLUEPRINTS)]); m.advance(slot)  # GERMINATED, then in the forward pass
        with torch.no_grad(): assert torch.equal(m(x), ref)


def test_no_host_gradient_through_seed_input_in_training():
    m = mnist_model()
    m.germinate("block2", "conv_heavy"); m.advance("block2")
    slot = m.slot("block2")
    nn.init.normal_(slot.seed.body[-1].weight)  # a seed that outputs something
    x = torch.randn(16, 1, 40)
    h_in = {}
    slot.register_forward_hook(lambda mod, inp, out: h_in.update(h=inp[0], y=out))
    m(x)
    seed_part = h_in["y"] - h_in["h"]            # = seed(h.detach())
    assert seed_part.abs().sum() > 0
    grads = torch.autograd.grad(seed_part.sum(), m.get_host_parameters(), allow_unused=True)
    assert all(g is None or g.abs().sum() == 0 for g in grads)
    # control: once blended with alpha > 0 the same path does carry gradient into the host
    for e in range(1, 4): m.step_epoch(e, 50.0); slot.state.sync_telemetry(0.1, 1.0, False, False, e, 10)
    assert m.advance("block2"); slot.update_alpha_for_step(2)
    m(x); seed_part = h_in["y"] - h_in["h"]
    grads = torch.autograd.grad(seed_part.sum(), m.get_host_parameters(), allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_seed_output_stays_bounded_through_training_and_blending():
    task = get_task("mnist1d")
    ep = Episode(task, EpisodeConfig(blend_epochs=2, counterfactual_stages=()), problem=GrowthProblem.of_task(task, max_epochs=8, max_batches=15))
    ep.reset(seed=0)
    xb = next(iter(task.val_loader))[0][:256]
    ep.step(TamiyoAction(LifecycleOp.GERMINATE, "block1", "conv_heavy"))
    slot, ratios, stages = ep.model.slot("block1"), [], []
    while not ep.done:
        st = slot.state
        action = TamiyoAction(LifecycleOp.ADVANCE, "block1") if st.stage in (SeedStage.TRAINING, SeedStage.BLENDING) else TamiyoAction.wait()
        ep.step(action)
        ep.model.eval()
        with torch.no_grad():
            h = ep.model.host.blocks[0](xb)
            ratios.append((slot.seed(h).norm() / h.norm()).item())
        stages.append(slot.stage.name)
    assert {"TRAINING", "BLENDING"} <= set(stages), stages
    assert max(ratios) < 5.0, ratios      # the straight-through trap reached ~9,600 here
    assert ratios[-1] > 1e-3, ratios       # and the seed did learn something


def test_alpha_curves_monotone_and_hit_ends():
    for alg in BlendAlgorithm:
        for total in (1, 3, 7):
            vals = [blend_curve(s / 10, total, alg) for s in range(0, 10 * total + 11)]
            assert vals[0] == 0.0 and abs(vals[-1] - 1.0) < 1e-12
            assert all(b >= a for a, b in zip(vals, vals[1:]))
            assert blend_curve(total, total, alg) == pytest.approx(1.0)


def test_counterfactual_leaves_state_unchanged():
    task = get_task("mnist1d")
    m = mnist_model()
    st = to_holding(m, "block1", "depthwise")
    nn.init.normal_(m.slot("block1").seed.body[-1].weight, std=0.3)
    loader = [next(iter(task.val_loader))]
    m.train()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    alphas = {s: m.slot(s).alpha for s in m.slot_ids}
    c = m.counterfactual("block1", loader)
    assert m.training
    assert {s: m.slot(s).alpha for s in m.slot_ids} == alphas
    assert all(torch.equal(sd[k], v) for k, v in m.state_dict().items())  # incl. BatchNorm running stats
    assert st.metrics.contribution == c and m.slot("block1")._forced_alpha is None
    with pytest.raises(ValueError, match="no active seed"): m.counterfactual("block2", loader)


def test_blueprint_param_counts_and_shapes():
    for dims, shape in ((1, (2, 8, 40)), (2, (2, 32, 8, 8))):
        for name in BLUEPRINTS:
            s = build_blueprint(name, shape[1], dims)
            assert s(torch.randn(shape)).shape == shape
            assert s.param_count == sum(p.numel() for p in s.parameters()) > 0


def test_a_budgeted_episode_does_not_depend_on_what_the_process_ran_before():
    "The blueprint costs behind a budget are cached per process; filling that cache must not move the seeded RNG."
    from esper.kasmina.model import _blueprint_cost
    from esper.tamiyo import run_episode
    from esper.tamiyo.baselines import ScheduleTamiyo
    problem = GrowthProblem("mnist1d", max_epochs=4, max_batches=2, param_budget=2500)

    def play():
        return run_episode(get_task("mnist1d", shuffle_seed=3), ScheduleTamiyo(("conv_heavy", "conv_small"),
                                                                                concurrent=True), seed=3, problem=problem)
    _blueprint_cost.cache_clear()  # as in a fresh worker process
    cold = play()
    warm = play()
    assert _blueprint_cost.cache_info().currsize > 0
    assert (cold.final_accuracy, cold.params_added) == (warm.final_accuracy, warm.params_added)
    curve = lambda r: [h["val_accuracy"] for h in r.history]
    assert curve(cold) == curve(warm)
