"""Non-finite values from an environment are a clear error naming the environment and the epoch; a skipped PPO step
is visible in the telemetry."""
import copy
import math
from functools import partial

import pytest
import torch

from esper.leyline import BASE_FEATURE_DIM, TelemetryEventType
from esper.nissa import TelemetryHub
from esper.simic.envs import env as E, parallel_env_state as P
from esper.simic.trainers.emitters import emit_anomalies, emit_ppo_update
from esper.simic.envs.env import act, action_dim, state_dim
from esper.simic.envs.parallel_env_state import EpisodeSpec, make_env_states, task_with_shuffle
from esper.simic.agent.ppo import PPOAgent
from esper.simic.envs.lockstep import PPORollout
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.problems import GrowthProblem
from esper.tamiyo.signals import TamiyoAction

TINY = GrowthProblem("mnist1d", max_epochs=3, max_batches=2)
PPO = {"n_epochs": 2, "batch_size": 8}


def _env_after_two_epochs(env_id=3, seed=9):
    env = make_env_states(EpisodeSpec(GrowthProblem("mnist1d", max_epochs=3, max_batches=2, task_factory=partial(task_with_shuffle, "mnist1d"))), [seed],
                          env_ids=[env_id])[0]
    with env.rng():
        env.obs = env.episode.reset(env.seed)
    with env.rng():
        env.obs, _ = env.episode.step(TamiyoAction.wait("test"))
    return env


def test_non_finite_reward_names_env_seed_and_epoch():
    env = _env_after_two_epochs()
    assert all(math.isfinite(v) for v in env.reward_terms().values())
    env.episode.history[-1]["val_accuracy"] = float("nan")  # a corrupt accuracy reaches the reward
    with pytest.raises(ValueError, match=r"environment 3 \(seed 9\) returned a non-finite reward \(nan\) at epoch 2: "
                                         r"terms \{'accuracy': nan"):
        env.reward_terms()


def test_rollout_stores_nothing_for_a_non_finite_reward():
    """`PPORollout.record` raises before the transition reaches the agent's buffer."""
    env = _env_after_two_epochs(env_id=0)
    n = len(env.obs["slots"])
    agent = PPOAgent(state_dim=state_dim(n), action_dim=action_dim(n, False), hidden_dim=16)
    env.pending = act(agent, [env.obs], [0])[0]
    env.episode.history[-1]["val_accuracy"] = float("inf")
    with pytest.raises(ValueError, match="environment 0 .* non-finite reward"):
        PPORollout(agent).record([env])
    assert len(agent.buffer) == 0 and env.episode_return == 0.0


def test_non_finite_reward_stops_a_vectorized_run(monkeypatch):
    real = P.step_reward
    def nan_for_env_1(episode, *a):
        terms = real(episode, *a)
        return terms | {"total": float("nan")} if episode.env_id == 1 else terms
    monkeypatch.setattr(P, "step_reward", nan_for_env_1)
    with pytest.raises(ValueError, match=r"environment 1 \(seed \d+\) returned a non-finite reward \(nan\) at epoch 2"):
        train_ppo_vectorized(n_episodes=2, n_envs=2, problem=TINY, ppo_kwargs=PPO, seed=5)


def test_non_finite_observation_names_env_epoch_and_features():
    env = _env_after_two_epochs()
    n = len(env.obs["slots"])
    agent = PPOAgent(state_dim=state_dim(n), action_dim=action_dim(n, True), hidden_dim=16)
    bad = copy.deepcopy(env.obs)
    slot = list(bad["slots"])[0]
    bad["slots"][slot]["telemetry"][5] = float("inf")
    j = BASE_FEATURE_DIM + 5
    with pytest.raises(ValueError, match=rf"environment 7 returned a non-finite observation at epoch 2: state features "
                                         rf"\[{j}\] \({slot} telemetry 5\) are \[inf\]"):
        act(agent, [env.obs, bad], [2, 7])
    act(agent, [env.obs], [2])  # the same observation without the Inf is fine


def test_non_finite_observation_stops_a_vectorized_run(monkeypatch):
    real, calls = E.obs_to_state, {"n": 0}
    def nan_on_fourth_call(obs, *args):  # the feature set and the slot layout, as the real one takes them
        calls["n"] += 1
        x = real(obs, *args)
        if calls["n"] == 4:  # env 1's observation at the second decision
            x[0] = float("nan")
        return x
    monkeypatch.setattr(E, "obs_to_state", nan_on_fourth_call)
    with pytest.raises(ValueError, match=r"environment 1 returned a non-finite observation at epoch 2: state features "
                                         r"\[0\] \(base feature 0\) are \[nan\]"):
        train_ppo_vectorized(n_episodes=2, n_envs=2, problem=TINY, ppo_kwargs=PPO, seed=5)



class _ListBackend:
    name, level = "list", None
    def __init__(self):
        self.events = []
    def emit(self, e):
        self.events.append(e)
    def close(self):
        pass


def test_skipped_steps_reach_the_telemetry():
    """A skipped optimiser step is in the PPO_UPDATE payload and is its own ANOMALY_DETECTED event."""
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16)
    for t in range(8):
        agent.store_transition(torch.randn(4), t % 3, math.log(1 / 3), 0.0, float("nan") if t == 3 else 1.0, t == 7)
    metrics = agent.update()
    backend = _ListBackend()
    hub = TelemetryHub("normal", [backend], validate=True)
    emit_ppo_update(hub, metrics, 4)
    emit_anomalies(hub, metrics, 4)
    update = [e for e in backend.events if e.event_type is TelemetryEventType.PPO_UPDATE]
    anomalies = [e.data["anomaly"] for e in backend.events if e.event_type is TelemetryEventType.ANOMALY_DETECTED]
    assert update[0].data["skipped_steps"] == 1 and update[0].data["nonfinite_advantages"] == 4
    assert "skipped_steps" in anomalies
