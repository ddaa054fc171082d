"""Every public Esper function and method that the seed plans' own tests call, called exactly as they call it.

The plans (`../shared/seeds/000`-`002`; `003` and `004` hold no tests, but the fix `004` proposes calls
`store_transition`) were written against an older Esper: their import paths are not today's (`esper.simic.ppo`,
`esper.simic.features`, `esper.simic.gradient_collector`, `esper.simic.control.normalization`,
`esper.simic.training`), but their names and call shapes are the public API.
Each test below names the plan test it follows and repeats its calls with the same positional order and keywords,
imported from where the names live now, with one cheap check that the call did what the plan expects. The plans'
behaviour is tested in full elsewhere (`test_simic_ppo.py`, `test_simic_config.py`, `test_simic_networks.py`,
`test_simic_normalizers.py`, `test_simic_gradient_collector.py`, `test_simic_features.py`, `test_leyline.py`);
this file guards the shapes, so that a change of signature that breaks a plan's call fails here by name.
"""
import math

import pytest
import torch
import torch.nn as nn
import fastcore.test as ft  # as a module: pytest would collect `test_eq` & co. as tests

from esper.leyline import SeedTelemetry
from esper.simic import PPOAgent, RecurrentActorCritic, RewardNormalizer, RunningMeanStd, TrainingConfig, Truncation
from esper.tamiyo.features import obs_to_base_features_tensor
from esper.tolaria import SeedGradientCollector, materialize_grad_stats


# ----------------------------------------------------------------------------- plan 000: entropy annealing
def test_000_fixed_and_annealed_entropy_coef():
    "test_no_annealing_when_disabled, test_annealing_at_start/midpoint/end, test_annealing_clamps_beyond_schedule."
    agent = PPOAgent(state_dim=27, action_dim=7, entropy_coef=0.05, entropy_anneal_steps=0, device='cpu')
    ft.test_eq(agent.get_entropy_coef(), 0.05)
    agent.train_steps = 100
    ft.test_eq(agent.get_entropy_coef(), 0.05)
    agent = PPOAgent(
        state_dim=27, action_dim=7, entropy_coef_start=0.2, entropy_coef_end=0.01, entropy_anneal_steps=100,
        device='cpu',
    )
    for step, coef in ((0, 0.2), (100, 0.01), (200, 0.01)):
        agent.train_steps = step
        ft.test_eq(agent.get_entropy_coef(), coef)
    agent = PPOAgent(
        state_dim=27, action_dim=7, entropy_coef_start=0.2, entropy_coef_end=0.0, entropy_anneal_steps=100,
        device='cpu',
    )
    agent.train_steps = 50
    ft.test_close(agent.get_entropy_coef(), 0.1, eps=1e-6)


def test_000_store_transition_by_keyword_and_update_last_value():
    "test_annealed_entropy_used_in_update: `store_transition` by keyword, `update(last_value=0.0)`."
    agent = PPOAgent(
        state_dim=27, action_dim=7, entropy_coef_start=0.5, entropy_coef_end=0.01, entropy_anneal_steps=10,
        device='cpu',
    )
    for _ in range(5):
        state = torch.randn(27)
        agent.store_transition(state, action=0, log_prob=-1.0, value=0.5, reward=1.0, done=False)
    metrics = agent.update(last_value=0.0)
    assert isinstance(metrics, dict)
    ft.test_eq(agent.train_steps, 1)
    ft.test_close(agent.get_entropy_coef(), 0.5 + (1 / 10) * (0.01 - 0.5), eps=1e-6)


def test_000_seed_telemetry_by_keyword_and_its_features():
    "test_telemetry_features_nonzero_with_active_seed: `SeedTelemetry(...)` by keyword, `.to_features()`."
    telemetry = SeedTelemetry(
        seed_id="test_seed", blueprint_id="conv", stage=2, epochs_in_stage=5, alpha=0.5, accuracy=75.0,
        gradient_norm=1.5, gradient_health=0.85, has_vanishing=False, has_exploding=False,
    )
    features = telemetry.to_features()
    ft.test_eq(len(features), 10)
    ft.test_eq((features[5], features[6]), (75.0, 1.5))


# ----------------------------------------------------------------------------- plan 001: PPO hardening
def test_001_store_transition_positional_with_mask():
    "test_fused_nan_inf_detection, test_comprehensive_value_function_metrics: the mask is the 7th positional."
    agent = PPOAgent(state_dim=10, action_dim=4, device="cpu")
    state, action_mask = torch.randn(10), torch.ones(4)
    agent.store_transition(state, 0, -0.5, 0.5, 1.0, False, action_mask)
    agent.store_transition(state, 1, -0.3, 0.6, 0.5, True, action_mask)
    ft.test_eq(len(agent.buffer), 2)
    metrics = agent.update(last_value=0.0)
    assert 'ratio_has_nan' not in metrics and 'ratio_has_inf' not in metrics
    for i in range(10):
        agent.store_transition(torch.randn(10), i % 4, -0.5, 0.5, 1.0 if i > 5 else -0.5, i == 9, action_mask)
    metrics = agent.update(last_value=0.0)
    for key in ('value_pred_mean', 'value_pred_std', 'return_mean', 'return_std', 'value_mse_before', 'return_min',
                'return_max', 'advantage_mean_prenorm', 'advantage_std_prenorm'):
        assert key in metrics, key


def test_001_anomaly_thresholds_are_config_fields():
    "test_anomaly_thresholds_in_config: `TrainingConfig()` and `TrainingConfig(anomaly_min_explained_variance=0.3)`."
    config = TrainingConfig()
    for name in ('anomaly_max_ratio_threshold', 'anomaly_min_ratio_threshold', 'anomaly_min_explained_variance'):
        assert hasattr(config, name), name
    ft.test_eq(config.anomaly_min_explained_variance, 0.1)
    ft.test_eq(TrainingConfig(anomaly_min_explained_variance=0.3).anomaly_min_explained_variance, 0.3)


def test_001_gradient_collector():
    "test_gradient_collector_vectorized and _empty: `collect_async` then `materialize_grad_stats`, and `collect`."
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    model(torch.randn(4, 10)).sum().backward()
    collector = SeedGradientCollector()
    stats = materialize_grad_stats(collector.collect_async(model.parameters()))
    assert stats['gradient_norm'] > 0 and 0 <= stats['gradient_health'] <= 1
    stats = SeedGradientCollector().collect(nn.Linear(10, 5).parameters())  # no backward: no gradients
    ft.test_eq((stats['gradient_norm'], stats['gradient_health']), (0.0, 1.0))
    assert stats['has_vanishing'] is False and stats['has_exploding'] is False


def test_001_base_features_as_a_tensor():
    "test_obs_to_features_tensor_output: `obs_to_base_features_tensor(obs, device=device)`, 35 features."
    obs = {
        'epoch': 10, 'global_step': 500, 'train_loss': 1.5, 'val_loss': 1.6, 'loss_delta': -0.1,
        'train_accuracy': 45.0, 'val_accuracy': 43.0, 'accuracy_delta': 2.0, 'plateau_epochs': 3,
        'best_val_accuracy': 45.0, 'best_val_loss': 1.4, 'loss_history_5': [2.0, 1.8, 1.6, 1.5, 1.5],
        'accuracy_history_5': [30.0, 35.0, 40.0, 43.0, 45.0], 'has_active_seed': 1.0, 'seed_stage': 3,
        'seed_epochs_in_stage': 5, 'seed_alpha': 0.5, 'seed_improvement': 0.02, 'available_slots': 0,
        'seed_counterfactual': 0.01, 'host_grad_norm': 1.2, 'host_learning_phase': 0.4, 'seed_blueprint_id': 2,
    }
    device = torch.device('cpu')
    result = obs_to_base_features_tensor(obs, device=device)
    ft.test_eq((result.shape, result.dtype, result.device), ((35,), torch.float32, device))


def test_001_critic_only_weight_decay():
    "test_ppo_agent_weight_decay_critic_only: `PPOAgent(..., weight_decay=0.01)`, groups named actor/shared/critic."
    ft.test_eq(type(PPOAgent(state_dim=10, action_dim=4, device="cpu").optimizer), torch.optim.Adam)
    agent_with_wd = PPOAgent(state_dim=10, action_dim=4, device="cpu", weight_decay=0.01)
    assert isinstance(agent_with_wd.optimizer, torch.optim.AdamW)
    decay = {g.get('name', ''): g['weight_decay'] for g in agent_with_wd.optimizer.param_groups}
    ft.test_eq((decay['actor'], decay['shared'], decay['critic'] > 0), (0.0, 0.0, True))


def test_001_adaptive_entropy_floor():
    "test_adaptive_entropy_floor_log_scaling: `get_entropy_floor(mask)` for all and for two valid actions."
    agent = PPOAgent(
        state_dim=10, action_dim=7, device="cpu", entropy_coef=0.05, entropy_coef_min=0.01,
        adaptive_entropy_floor=True,
    )
    ft.test_eq(agent.get_entropy_floor(torch.ones(7)), 0.01)
    floor_few = agent.get_entropy_floor(torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    ft.test_close(floor_few, 0.01 * min(math.log(7) / math.log(2), 3.0), eps=0.001)


def test_001_recurrent_network_layernorm():
    "test_recurrent_actor_critic_has_layernorm: `RecurrentActorCritic(state_dim=10, action_dim=4)`."
    network = RecurrentActorCritic(state_dim=10, action_dim=4)
    assert isinstance(network.lstm_ln, nn.LayerNorm)
    ft.test_eq(network.lstm_ln.normalized_shape[0], network.lstm_hidden_dim)


def test_001_store_recurrent_transition_env_id_is_eighth():
    "test_recurrent_ppo_epochs_safety_cap: `env_id` is the 8th positional; `update_recurrent(n_epochs=...)` warns."
    agent = PPOAgent(state_dim=10, action_dim=4, device="cpu", recurrent=True, lstm_hidden_dim=32)
    for env_id in range(2):
        for i in range(5):
            state = torch.randn(10)
            action_mask = torch.ones(4)
            agent.store_recurrent_transition(state, 0, -0.5, 0.5, 1.0, i == 4, action_mask, env_id)
    ft.test_eq({k: len(b) for k, b in agent.buffer.envs.items()}, {0: 5, 1: 5})  # each env its own sequence
    with pytest.warns(RuntimeWarning, match="n_epochs.*elevated"):
        agent.update_recurrent(n_epochs=3)
    with pytest.warns(RuntimeWarning, match="n_epochs.*capped"):
        agent.update_recurrent(n_epochs=10)


def test_001_truncation_is_keyword_only_in_both_store_functions():
    "A ninth positional argument is refused, so `env_id` can never land in `truncated` again."
    for recurrent in (False, True):
        agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=8, device="cpu", recurrent=recurrent)
        store = agent.store_recurrent_transition if recurrent else agent.store_transition
        ft.test_fail(lambda: store(torch.randn(4), 0, -1.0, 0.0, 1.0, False, None, 0, True), exc=TypeError)
        store(torch.randn(4), 0, -1.0, 0.0, 1.0, False, None, 0, truncated=Truncation(value=0.0))


# ----------------------------------------------------------------------------- plan 002: validation, normalisers
def test_002_hyperparameter_validation():
    "TestHyperparameterValidation: `TrainingConfig(gamma=...)`, `clip_ratio`, `lr`, `entropy_coef` by keyword."
    for kwargs, name in (({'gamma': 1.5}, 'gamma'), ({'gamma': 0.0}, 'gamma'), ({'gamma': -0.1}, 'gamma'),
                         ({'clip_ratio': 0.0}, 'clip_ratio'), ({'clip_ratio': -0.1}, 'clip_ratio'),
                         ({'lr': 0.0}, 'lr'), ({'lr': -1e-4}, 'lr'), ({'entropy_coef': -0.1}, 'entropy_coef')):
        ft.test_fail(lambda: TrainingConfig(**kwargs), contains=name)
    TrainingConfig(gamma=1.0)
    TrainingConfig(gamma=0.001)
    TrainingConfig(entropy_coef=0.0)


def test_002_running_mean_std_state_dict():
    "TestRunningMeanStdStateDict: `RunningMeanStd(shape=(10,), device=\"cpu\")`, `update`, `(load_)state_dict`."
    rms = RunningMeanStd(shape=(10,), device="cpu")
    rms.update(torch.randn(32, 10))
    rms.update(torch.randn(32, 10))
    rms2 = RunningMeanStd(shape=(10,), device="cpu")
    rms2.load_state_dict(rms.state_dict())
    assert torch.allclose(rms.mean, rms2.mean) and torch.allclose(rms.var, rms2.var)
    assert torch.allclose(rms.count, rms2.count)
    # the plan's keys, and since then `n_nonfinite` (the rows left out as NaN/Inf); a state without it still loads
    assert {"mean", "var", "count"} <= set(RunningMeanStd(shape=(5,), device="cpu").state_dict().keys())
    rms2.load_state_dict({k: rms.state_dict()[k] for k in ("mean", "var", "count")})


def test_002_reward_normalizer_state_dict():
    "TestRewardNormalizerStateDict: `RewardNormalizer(clip=10.0)`, `update_and_normalize(float)`, `state_dict`."
    rn = RewardNormalizer(clip=10.0)
    for _ in range(100):
        rn.update_and_normalize(torch.randn(1).item())
    rn2 = RewardNormalizer(clip=10.0)
    rn2.load_state_dict(rn.state_dict())
    ft.test_eq((rn.mean, rn.m2, rn.count), (rn2.mean, rn2.m2, rn2.count))
    assert {"mean", "m2", "count"} <= set(RewardNormalizer().state_dict().keys())  # and `n_nonfinite`, as above
    rn2.load_state_dict({k: rn.state_dict()[k] for k in ("mean", "m2", "count")})


# ----------------------------------------------------------------------------- plan 004: the training loop's review
def test_004_store_transition_six_positional():
    "Its fix for state normalisation: `store_transition(state, action_idx, log_prob, value, reward, done)`."
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=8, device="cpu")
    state = torch.randn(4)
    action_idx, log_prob, value = agent.get_action(state)
    agent.store_transition(state, action_idx, log_prob, value, 1.0, True)
    b = agent.buffer.envs[0]
    ft.test_eq((len(b), b.rewards, b.dones, b.truncated), (1, [1.0], [True], [False]))
