"""The RL environment layer: state vector, masks, decoding, reward, PPOController."""
import pytest
import torch

from esper.leyline import BASE_FEATURE_DIM, LifecycleOp, FlatAction, N_FLAT_ACTIONS
from esper.simic import PPOAgent, RunningMeanStd
from esper.simic.envs.env import (state_dim, action_dim, obs_to_state, action_masks, decode_action, step_reward,
                             PPOController, load_ppo_controller)
from esper.simic.envs.contributions import fossilized_contribution
from esper.tamiyo import TamiyoAction, run_episode
from esper.tamiyo.episode import Episode
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem

PROBLEM = GrowthProblem("mnist1d", max_epochs=4, max_batches=3)


@pytest.fixture(scope="module")
def episode():
    ep = Episode(get_task("mnist1d"), problem=PROBLEM)
    ep.reset(0)
    ep.step(TamiyoAction(LifecycleOp.GERMINATE, "block2", "norm"))
    return ep


def test_state_has_base_and_per_slot_telemetry(episode):
    obs = episode.observation()
    x = obs_to_state(obs)
    assert x.shape == (state_dim(2),) == (BASE_FEATURE_DIM + 20,)
    tel = x[BASE_FEATURE_DIM + 10:]
    assert tel.tolist() == pytest.approx(episode.model.slot("block2").state.telemetry.to_features())
    assert tel[6] > 0 and x[BASE_FEATURE_DIM:BASE_FEATURE_DIM + 10].abs().sum() == 0  # live seed measured, empty slot zero


def test_flat_mask_targets_the_focus_seed_and_germinates_beside_it(episode):
    obs = episode.observation()
    m = action_masks(obs, factored=False)
    assert m.shape == (N_FLAT_ACTIONS,)
    # the focus seed (block2) trains its first epoch: on probation, gate shut, so it can only wait;
    # block1 is dormant, so a second seed may be germinated there meanwhile
    assert not m[FlatAction.ADVANCE] and not m[FlatAction.PRUNE] and not m[FlatAction.FOSSILIZE]
    assert m[FlatAction.WAIT] and m[FlatAction.GERMINATE_NORM:FlatAction.ADVANCE].all()
    assert decode_action(int(FlatAction.PRUNE), obs, False) == TamiyoAction(LifecycleOp.PRUNE, "block2", reason="policy")
    g = decode_action(int(FlatAction.GERMINATE_NORM), obs, False)
    assert (g.op, g.slot, g.blueprint) == (LifecycleOp.GERMINATE, "block1", "norm")


def test_the_oldest_live_seed_is_the_focus():
    ep = Episode(get_task("mnist1d"), problem=PROBLEM)
    ep.reset(0)
    ep.step(TamiyoAction(LifecycleOp.GERMINATE, "block2", "norm"))
    obs, _ = ep.step(TamiyoAction(LifecycleOp.GERMINATE, "block1", "norm"))
    assert obs["focus_slot"] == "block2" and obs["available_slots"] == 0
    assert not action_masks(obs, factored=False)[FlatAction.GERMINATE_NORM:FlatAction.ADVANCE].any()


def test_reward_terms_sum_and_fossilization_credit(episode):
    r = step_reward(episode)
    assert r["total"] == pytest.approx(sum(v for k, v in r.items() if k != "total"))
    assert r["contribution"] == 0.0 and r["rent"] < 0      # the germination of this step is charged now
    class M:
        def slot(self, s):
            class X: pass
            x = X(); x.state = X(); x.state.metrics = X(); x.state.metrics.contribution = 4.0; return x
    assert fossilized_contribution({"block2": "HOLDING"}, {"block2": "FOSSILIZED"}, M()) == 4.0


def test_ppo_controller_runs_a_checkpoint_through_run_episode(tmp_path):
    torch.manual_seed(0)
    ag = PPOAgent(state_dim(2), action_dim(2, False), n_epochs=1)
    ag.obs_normalizer = RunningMeanStd((ag.state_dim,), device=ag.device)
    ag.obs_normalizer.update(torch.randn(16, ag.state_dim))
    ag.save(tmp_path / "a.pt")
    ctl = load_ppo_controller(tmp_path / "a.pt")
    assert torch.equal(ctl.agent.obs_normalizer.mean, ag.obs_normalizer.mean)
    before = ctl.agent.obs_normalizer.count.clone()
    res = run_episode(get_task("mnist1d"), ctl, seed=1, problem=PROBLEM)
    assert res.epochs == 4 and len(ctl.decisions) == 3
    assert torch.equal(ctl.agent.obs_normalizer.count, before)          # evaluation does not move the statistics
    for d in ctl.decisions: assert d.mask[d.action]


def test_wrong_host_is_a_clear_error(episode):
    with pytest.raises(ValueError, match="state_dim"): PPOController(PPOAgent(state_dim=45)).decide(episode.observation())
