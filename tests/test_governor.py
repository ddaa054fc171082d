"""Tolaria governor and epoch runner: exact rollback after an injected NaN and an injected loss spike,
seed optimizers that survive stage changes."""
import math

import pytest
import torch

from esper.kasmina import MorphogeneticModel
from esper.leyline import SeedStage, TelemetryEventType
from esper.tasks import get_task
from esper.tolaria import EpochRunner, TolariaGovernor, GovernorError
from esper.tamiyo.problems import GrowthProblem


class ListHub:
    def __init__(self): self.events = []
    def emit(self, e): self.events.append(e)


@pytest.fixture(scope="module")
def task(): return get_task("mnist1d")


def setup(task):
    torch.manual_seed(0)
    m = MorphogeneticModel(task.make_host(), blend_epochs=1)
    hub = ListHub()
    runner = EpochRunner(m, seed_lr=0.05)
    gov = TolariaGovernor(m, runner=runner, hub=hub, min_history=2)
    return m, runner, gov, hub


def train_healthy(m, runner, gov, task, epochs):
    for e in range(m.epoch + 1, m.epoch + epochs + 1):
        tr = runner.train_epoch(task.train_loader, max_batches=8)
        assert gov.end_epoch(tr["loss"], e).healthy
        m.step_epoch(e, runner.validate(task.val_loader)["accuracy"])
        for st in m.seed_states().values():
            if st.stage != SeedStage.EMBARGOED: st.sync_telemetry(0.1, 1.0, False, False, e, 50)


def fossilize_one(m, runner, gov, task):
    st = m.germinate("block1", "conv_small"); m.advance("block1")
    train_healthy(m, runner, gov, task, 3)
    assert m.advance("block1")                      # BLENDING (1 epoch)
    train_healthy(m, runner, gov, task, 1)
    assert m.advance("block1")                      # HOLDING
    train_healthy(m, runner, gov, task, 1)
    st.metrics.contribution, st.metrics.contribution_epoch = 1.0, m.epoch
    assert m.fossilize("block1")
    return st


def snapshot_tensors(m):
    return {k: v.clone() for k, v in m.host.state_dict().items()}, {k: v.clone() for k, v in m.slot("block1").seed.state_dict().items()}


def check_rollback(m, gov, hub, good_host, good_seed, live_seed_id):
    assert all(torch.equal(good_host[k], v) for k, v in m.host.state_dict().items())
    assert all(torch.equal(good_seed[k], v) for k, v in m.slot("block1").seed.state_dict().items())
    assert m.slot("block2").stage == SeedStage.EMBARGOED         # the experimental seed is gone
    ev = [e for e in hub.events if e.event_type == TelemetryEventType.GOVERNOR_ROLLBACK][-1]
    assert ev.data["pruned_seeds"] == [live_seed_id] and ev.severity == "warning"
    assert any(e.event_type == TelemetryEventType.GOVERNOR_PANIC for e in hub.events)


def test_rollback_after_injected_nan(task):
    m, runner, gov, hub = setup(task)
    fossilize_one(m, runner, gov, task)
    live = m.germinate("block2", "norm"); m.advance("block2")
    train_healthy(m, runner, gov, task, 1)
    good_host, good_seed = snapshot_tensors(m)
    with torch.no_grad(): m.host.blocks[0][0].weight[0, 0, 0] = float("nan")
    tr = runner.train_epoch(task.train_loader, max_batches=3)
    assert math.isnan(tr["loss"])
    v = gov.end_epoch(tr["loss"], m.epoch + 1)
    assert v.panic and "non-finite" in v.reason
    gov.rollback(v.reason)
    check_rollback(m, gov, hub, good_host, good_seed, live.seed_id)
    assert all(len(o.state) == 0 for o in (runner.host_optimizer, *runner.seed_optimizers.values()))
    tr = runner.train_epoch(task.train_loader, max_batches=3)      # training goes on, finite again
    assert math.isfinite(tr["loss"])


def test_rollback_after_injected_loss_spike(task):
    m, runner, gov, hub = setup(task)
    fossilize_one(m, runner, gov, task)
    live = m.germinate("block2", "conv_heavy"); m.advance("block2")
    train_healthy(m, runner, gov, task, 2)
    good_host, good_seed = snapshot_tensors(m)
    with torch.no_grad(): m.host.head[-1].weight.mul_(1e4)         # finite but exploding logits
    tr = runner.train_epoch(task.train_loader, max_batches=3)
    assert math.isfinite(tr["loss"])
    v = gov.end_epoch(tr["loss"], m.epoch + 1)
    assert v.panic and "blow-up" in v.reason, v
    gov.rollback(v.reason)
    check_rollback(m, gov, hub, good_host, good_seed, live.seed_id)


def test_rollback_needs_a_snapshot_and_noise_is_not_a_spike(task):
    m, _, gov, _ = setup(task)
    with pytest.raises(GovernorError): gov.rollback()
    for l in (1.0, 0.98, 0.97, 0.99, 0.96): assert gov.end_epoch(l).healthy
    assert gov.check(1.05).healthy and gov.check(float("inf")).panic


def test_seed_optimizer_state_survives_training_to_blending(task):
    m, runner, gov, _ = setup(task)
    st = m.germinate("block1", "conv_small"); m.advance("block1")
    train_healthy(m, runner, gov, task, 3)
    opt = runner.seed_optimizers[st.seed_id]
    p = m.get_seed_parameters("block1")[0]
    buf = opt.state[p]["momentum_buffer"].clone()
    assert buf.abs().sum() > 0
    assert m.advance("block1") and st.stage == SeedStage.BLENDING
    assert runner.optimizers()[1] is opt and torch.equal(opt.state[p]["momentum_buffer"], buf)
    runner.train_epoch(task.train_loader, max_batches=1)
    assert runner.seed_optimizers[st.seed_id] is opt
    # one SGD step with the old buffer: new_buf = momentum * buf + grad
    assert torch.allclose(opt.state[p]["momentum_buffer"], 0.9 * buf + p.grad, atol=1e-6)


def test_first_epoch_blowup_is_rolled_back_counted_and_charged(task):
    """Host lr 1e3 blows the loss up in epoch 1: before any loss history exists the governor must panic, roll back to
    the initial weights, count it, and the next decided epoch's rollback must be charged; the episode still ends."""
    from esper.simic.envs.env import step_reward
    from esper.tamiyo.episode import Episode, EpisodeConfig
    from esper.tamiyo.signals import TamiyoAction
    cfg, three = EpisodeConfig(host_lr=1e3), GrowthProblem("mnist1d", max_epochs=3, max_batches=3)
    fresh = Episode(task, cfg, problem=three)
    fresh.start(0)
    initial = {k: v.clone() for k, v in fresh.model.host.state_dict().items()}
    ep = Episode(task, cfg, problem=three)
    ep.reset(0)
    first = ep.history[0]
    assert first["rollback"] is not None and first["rollback"]["snapshot_epoch"] == 0
    assert ep.governor.rollbacks == 1
    assert math.isfinite(first["train_loss"]) and first["train_loss"] < 10
    assert all(torch.equal(initial[k], v) for k, v in ep.model.host.state_dict().items())
    ep.step(TamiyoAction.wait())                                   # the first decided epoch blows up too
    assert ep.history[1]["rollback"] is not None
    assert step_reward(ep, rollback_penalty=0.25)["rollback"] == -0.25
    while not ep.done: ep.step(TamiyoAction.wait())               # no retry loop: max_epochs ends it
    res = ep.result()
    assert (res.epochs, res.rollbacks) == (3, 3)
    assert all(torch.isfinite(p).all() for p in ep.model.parameters())


def test_absolute_bound_judges_only_while_history_is_short(task):
    from esper.tolaria.governor import blowup_bound
    m, _, _, _ = setup(task)
    gov = TolariaGovernor(m, min_history=2, max_loss=blowup_bound(task.n_classes))
    v = gov.check(1e14)
    assert v.panic and "blow-up" in v.reason and v.threshold == pytest.approx(10 * math.log(10))
    assert gov.check(2.5).healthy and gov.check(float("nan")).panic
    for l in (20.0, 20.5): assert gov.end_epoch(l).healthy       # below the bound: history builds up
    v = gov.check(30.0)                                            # above the bound but not a statistical outlier
    assert v.healthy and v.threshold == pytest.approx(3 * 20.25)
