"""End-to-end tests of the Simic trainers: vectorized PPO, single-env PPO, heuristic, resume (issue 6)."""
import json
import math

import pytest
import torch

from esper.leyline import HEAD_NAMES, TelemetryEventType
from esper.nissa import TelemetryHub, check_payload
from esper.simic import PPOAgent, RunningMeanStd
from esper.simic.envs import lockstep as L
from esper.simic.trainers import vectorized as V, training as T
from esper.simic.envs.env import obs_to_state, state_dim, action_dim
from esper.simic.envs.parallel_env_state import EpisodeSpec, make_env_states
from esper.simic.envs.lockstep import PPORollout, run_lockstep
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.simic.trainers.training import train_ppo, train_heuristic
from esper.tamiyo.problems import GrowthProblem
from esper.tolaria import GovernorVerdict

fast = lambda epochs: GrowthProblem("mnist1d", max_epochs=epochs, max_batches=3)  # three batches an epoch
PPO = {"n_epochs": 2, "batch_size": 8}


class ListBackend:
    name, level = "list", None
    def __init__(self): self.events = []
    def emit(self, e): check_payload(e); self.events.append(e)
    def close(self): pass


def _hub():
    return TelemetryHub("normal", [ListBackend()], validate=True)


def test_end_to_end_vectorized_2envs_2batches_3epochs():
    hub = _hub()
    agent, hist = train_ppo_vectorized(n_episodes=4, n_envs=2, problem=fast(3), hub=hub, ppo_kwargs=PPO)
    assert [h["batch"] for h in hist] == [1, 2] and agent.train_steps == 2
    assert all(len(h["env_accuracies"]) == 2 for h in hist)
    assert all(h["n_samples"] == 4 for h in hist)               # 2 envs x 2 decisions
    ev = hub.backends[0].events
    ppo = [e for e in ev if e.event_type is TelemetryEventType.PPO_UPDATE]
    assert [e.step for e in ppo] == [0, 1]
    for e in ppo:                                             # measured and logged from the first update
        assert "explained_variance" in e.data and all(f"head_entropy/{k}" in e.data for k in ("action",))
    eps = [e for e in ev if e.event_type is TelemetryEventType.EPISODE_COMPLETED and "episode_return" in e.data]
    assert sorted(e.data["episode"] for e in eps) == [0, 1, 2, 3]
    epochs = [e for e in ev if e.event_type is TelemetryEventType.EPOCH_COMPLETED]
    assert len(epochs) == 4 * 3 and max(e.step for e in epochs) == 2 * 3   # step = batch_idx * max_epochs + epoch


def test_factored_run_logs_every_head_entropy():
    agent, hist = train_ppo_vectorized(n_episodes=2, n_envs=2, problem=fast(3), factored=True, ppo_kwargs=PPO)
    assert all(math.isfinite(hist[0][f"head_entropy/{k}"]) for k in HEAD_NAMES)


def _dump(h): return json.dumps(h, sort_keys=True)


def test_resume_equals_uninterrupted(tmp_path):
    kw = dict(n_envs=2, problem=fast(3), seed=7, factored=True, ppo_kwargs=PPO,
              entropy_coef_start=0.2, entropy_coef_end=0.0, entropy_anneal_episodes=6)
    a_full, h_full = train_ppo_vectorized(n_episodes=6, save_path=tmp_path / "full.pt", **kw)
    train_ppo_vectorized(n_episodes=2, save_path=tmp_path / "part.pt", **kw)          # "interrupted" after batch 1
    a_res, h_res = train_ppo_vectorized(n_episodes=6, resume=tmp_path / "part.pt", save_path=tmp_path / "part.pt", **kw)
    assert len(h_res) == 3 and _dump(h_res) == _dump(h_full)
    assert a_res.train_steps == a_full.train_steps == 3
    for p, q in zip(a_full.network.parameters(), a_res.network.parameters()): assert torch.equal(p, q)
    assert torch.equal(a_full.obs_normalizer.mean, a_res.obs_normalizer.mean)
    assert a_res.obs_normalizer.device == a_res.device                             # normaliser on the policy device
    with pytest.raises(ValueError, match="seed: checkpoint 7, now 8"):
        train_ppo_vectorized(n_episodes=6, resume=tmp_path / "part.pt", **(kw | {"seed": 8}))


def _rollout_run(factored=False, n=2, max_epochs=4, spy=None):
    torch.manual_seed(0)
    nsl = 2
    agent = PPOAgent(state_dim(nsl), action_dim(nsl, factored), n_epochs=1)
    agent.obs_normalizer = RunningMeanStd((agent.state_dim,), device=agent.device)
    envs = make_env_states(EpisodeSpec(GrowthProblem("mnist1d", max_epochs=max_epochs, max_batches=3)), list(range(n)))
    ro = (spy or PPORollout)(agent)
    run_lockstep(envs, ro.decide, ro.record)
    return agent, envs, ro


class Spy(PPORollout):
    "Records, at decision time, the normalised state and every decision."
    def __init__(self, agent):
        super().__init__(agent); self.expected, self.decisions = {}, []
    def decide(self, envs):
        out = super().decide(envs)
        for e in envs:
            self.expected.setdefault(e.env_id, []).append(self.agent.obs_normalizer.normalize(obs_to_state(e.obs)))
            self.decisions.append(e.pending)
        return out


def test_stored_states_are_normalised_states():
    agent, envs, spy = _rollout_run(spy=Spy)
    for e in envs:
        stored = agent.buffer.envs[e.env_id].states
        assert len(stored) == 3
        for s, x in zip(stored, spy.expected[e.env_id]): assert torch.allclose(s, x)
        raw = obs_to_state(e.obs)
        assert not torch.allclose(stored[-1], raw)                 # not the raw features


def test_last_epoch_is_terminal_not_bootstrapped():
    """The run's own last epoch ends the episode: stored as done, never bootstrapped from the critic."""
    agent, envs, _ = _rollout_run()
    for e in envs:
        b = agent.buffer.envs[e.env_id]
        assert b.dones == [False, False, True] and b.truncated == [False, False, False]
        assert b.bootstrap_values == [0.0, 0.0, 0.0]


def test_returns_are_discounted_sums_of_remaining_rewards():
    """With lambda = 1, every GAE return is exactly the discounted sum of the rewards left in the episode,
    whatever the critic says: no return can exceed what the reward pays."""
    agent, envs, _ = _rollout_run(max_epochs=6)
    for e in envs:
        b = agent.buffer.envs[e.env_id]
        _, ret = b.advantages(last_value=123.0, gamma=agent.gamma, gae_lambda=1.0)
        expected = [sum(agent.gamma ** k * r for k, r in enumerate(b.rewards[t:])) for t in range(len(b))]
        assert torch.allclose(ret, torch.tensor(expected), atol=1e-5)
        assert ret[-1].item() == pytest.approx(b.rewards[-1])


@pytest.mark.parametrize("factored", [False, True])
def test_masks_respected(factored):
    agent, envs, spy = _rollout_run(factored=factored, n=3, max_epochs=8, spy=Spy)
    assert len(spy.decisions) == 3 * 7
    for d in spy.decisions:
        if factored:
            for k in HEAD_NAMES: assert d.mask[k][d.action[k]], (k, d.action, d.mask)
            assert d.mask["op|slot"][d.action["slot"], d.action["op"]], (d.action, d.mask)  # legal for that slot
        else:
            assert d.mask[d.action], (d.action, d.mask)
            assert d.mask.sum() < len(d.mask)                      # masks actually mask something


def test_rollback_is_penalised_and_the_run_goes_on(monkeypatch):
    calls = {"n": 0}
    orig = L.run_epoch_lockstep
    def patched(envs, actions):
        for e in envs:
            g = e.episode.governor
            if g is not None and e.episode.epoch == 1 and not getattr(g, "_patched", False):
                g._patched = True
                g.end_epoch = lambda loss, epoch=None: GovernorVerdict(False, "forced for the test", loss)
        orig(envs, actions)
        for e in envs:
            g = e.episode.governor
            if "end_epoch" in vars(g): del g.end_epoch; calls["n"] += 1
    monkeypatch.setattr(L, "run_epoch_lockstep", patched)
    agent, envs, _ = _rollout_run(n=1, max_epochs=4)
    h = envs[0].episode.history
    assert h[1]["rollback"] is not None and len(h) == 4             # rolled back at epoch 2, episode finished
    assert envs[0].reward_sums["rollback"] == pytest.approx(-0.1)
    assert calls["n"] == 1


def test_trainers_share_the_runner(monkeypatch):
    n = {"calls": 0}
    orig = V.run_lockstep
    def counting(*a, **k):
        n["calls"] += 1; return orig(*a, **k)
    monkeypatch.setattr(V, "run_lockstep", counting); monkeypatch.setattr(T, "run_lockstep", counting)
    train_ppo_vectorized(n_episodes=2, n_envs=2, problem=fast(2), ppo_kwargs=PPO)
    assert n["calls"] == 1
    train_ppo(n_episodes=2, update_every=2, problem=fast(2), ppo_kwargs=PPO)
    assert n["calls"] == 3                                        # one per episode, run one after another
    train_heuristic(EpisodeSpec(GrowthProblem("mnist1d", max_epochs=2, max_batches=3)), n_episodes=2)
    assert n["calls"] == 5


def test_single_env_annealing_divides_by_update_every():
    _, hist = train_ppo(n_episodes=6, update_every=3, problem=fast(2), ppo_kwargs=PPO,
                        entropy_coef_start=0.4, entropy_coef_end=0.0, entropy_anneal_episodes=6)
    assert [h["entropy_coef"] for h in hist] == [0.4, 0.2]        # 6 episodes // 3 = 2 updates


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="n_envs"): train_ppo_vectorized(n_envs=0)
    with pytest.raises(ValueError, match="max_epochs must be >= 2"): train_ppo_vectorized(n_episodes=1, max_epochs=1)
    with pytest.raises(ValueError, match="entropy_anneal_episodes"):
        train_ppo_vectorized(n_episodes=1, problem=fast(2), entropy_anneal_episodes=-1)


@pytest.mark.parametrize("where", ["folder fsync", "checkpoint event"])
def test_a_stop_right_after_a_checkpoint_lands_reports_that_checkpoint(where, tmp_path, monkeypatch):
    "A signal between the checkpoint's rename and the trainer's bookkeeping: the file on disk is whole and named."
    import esper.leyline.files as files

    def stop(*args, **kwargs): raise KeyboardInterrupt
    if where == "folder fsync":  # inside the atomic write, after its rename: the save itself never returns
        monkeypatch.setattr(files, "_fsync_folder", stop)
    else:                        # after the save returned, while the checkpoint event is emitted
        monkeypatch.setattr(V, "emit_checkpoint", stop)
    save = tmp_path / "agent.pt"
    with pytest.raises(V.TrainingInterrupted) as info:
        train_ppo_vectorized(n_episodes=4, n_envs=2, problem=fast(2), ppo_kwargs=PPO,
                             save_path=save)
    assert (info.value.batches_saved, info.value.checkpoint) == (1, str(save))
    assert info.value.episodes_saved == 2
