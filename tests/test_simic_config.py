"""Tests for TrainingConfig (every field's range, the dict round trip, one source for the agent)."""
import pytest

from esper.simic.agent.config import TrainingConfig


def test_anomaly_thresholds_in_config():
    """TrainingConfig carries the anomaly detector's thresholds, and a detector built from it applies them."""
    from esper.simic.agent.anomaly_detector import AnomalyDetector

    config = TrainingConfig()

    # Default explained_variance should be 0.1 (existing behavior)
    assert config.anomaly_min_explained_variance == 0.1

    # Should be able to override (0.3 = more sensitive to value collapse)
    sensitive_config = TrainingConfig(anomaly_max_ratio_threshold=2.0, anomaly_min_ratio_threshold=0.5,
                                      anomaly_min_explained_variance=0.3)
    assert sensitive_config.anomaly_min_explained_variance == 0.3

    # ratios 3.0 and 0.4, explained variance 0.2: anomalies under the sensitive thresholds, none under the defaults
    sensitive = AnomalyDetector(**sensitive_config.to_anomaly_kwargs())
    assert sensitive.check_all(3.0, 0.4, 0.2).anomaly_types == ["ratio_explosion", "ratio_collapse", "value_collapse"]
    assert not AnomalyDetector(**config.to_anomaly_kwargs()).check_all(3.0, 0.4, 0.2).has_anomaly


class TestHyperparameterValidation:
    """Test that invalid hyperparameters raise clear errors."""

    def test_gamma_must_be_in_range(self):
        """Gamma must be in (0, 1]."""
        with pytest.raises(ValueError, match="gamma"):
            TrainingConfig(gamma=1.5)
        with pytest.raises(ValueError, match="gamma"):
            TrainingConfig(gamma=0.0)
        with pytest.raises(ValueError, match="gamma"):
            TrainingConfig(gamma=-0.1)
        # Valid edge case
        TrainingConfig(gamma=1.0)  # Should not raise
        TrainingConfig(gamma=0.001)  # Should not raise

    def test_clip_ratio_must_be_positive(self):
        """Clip ratio must be > 0."""
        with pytest.raises(ValueError, match="clip_ratio"):
            TrainingConfig(clip_ratio=0.0)
        with pytest.raises(ValueError, match="clip_ratio"):
            TrainingConfig(clip_ratio=-0.1)

    def test_lr_must_be_positive(self):
        """Learning rate must be > 0."""
        with pytest.raises(ValueError, match="lr"):
            TrainingConfig(lr=0.0)
        with pytest.raises(ValueError, match="lr"):
            TrainingConfig(lr=-1e-4)

    def test_entropy_coef_must_be_non_negative(self):
        """Entropy coefficient must be >= 0."""
        with pytest.raises(ValueError, match="entropy_coef"):
            TrainingConfig(entropy_coef=-0.1)
        # Zero is valid (no entropy bonus)
        TrainingConfig(entropy_coef=0.0)  # Should not raise


@pytest.mark.parametrize("field,value,message", [
    ("gae_lambda", 1.2, r"gae_lambda must be in \[0, 1\]"),
    ("value_coef", -1.0, r"value_coef must be in \[0, inf\)"),
    ("max_grad_norm", 0.0, r"max_grad_norm must be in \(0, inf\)"),
    ("target_kl", -0.01, r"target_kl must be in \(0, inf\)"),
    ("weight_decay", -1e-3, r"weight_decay must be in \[0, inf\)"),
    ("entropy_coef_min", -0.01, r"entropy_coef_min"),
    ("entropy_coef_start", -0.5, r"entropy_coef_start"),
    ("entropy_anneal_steps", -1, r"entropy_anneal_steps must be an integer in \[0, inf\)"),
    ("n_epochs", 0, r"n_epochs must be an integer in \[1, inf\)"),
    ("batch_size", 3.5, r"batch_size"),
    ("hidden_dim", 0, r"hidden_dim"),
    ("lstm_hidden_dim", -4, r"lstm_hidden_dim"),
    ("anomaly_max_ratio_threshold", 0.5, r"anomaly_max_ratio_threshold must be in \(1, inf\)"),
    ("anomaly_min_ratio_threshold", 1.5, r"anomaly_min_ratio_threshold must be in \(0, 1\)"),
    ("anomaly_min_explained_variance", 2.0, r"anomaly_min_explained_variance must be in \[-1, 1\]"),
    ("recurrent", "yes", r"recurrent must be True or False"),
    ("lr", float("nan"), r"lr must be in \(0, 1\]"),
])
def test_every_range_is_checked_and_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**{field: value})


def test_error_message_reports_the_bad_value():
    with pytest.raises(ValueError, match=r"\(got 1.5\)"):
        TrainingConfig(gamma=1.5)


def test_slots_and_kwargs_round_trip():
    from esper.simic.agent.anomaly_detector import AnomalyDetector
    from esper.simic.agent.ppo import PPOAgent
    cfg = TrainingConfig(entropy_coef_start=0.2, entropy_coef_end=0.01, entropy_anneal_steps=50, weight_decay=0.01,
                         hidden_dim=32, anomaly_max_ratio_threshold=3.0)
    with pytest.raises(AttributeError):  # slots: a misspelt field is refused, never silently added
        cfg.entropy_coef_strat = 0.5
    agent = PPOAgent(state_dim=5, action_dim=3, device="cpu", **cfg.to_ppo_kwargs(),
                     anomaly_detector=AnomalyDetector(**cfg.to_anomaly_kwargs()))
    assert agent.get_entropy_coef() == 0.2
    assert agent.anomaly_detector.max_ratio_threshold == 3.0
    assert {g["name"]: g["weight_decay"] for g in agent.optimizer.param_groups}["critic"] == 0.01


def test_agent_constructor_validates_too():
    from esper.simic.agent.ppo import PPOAgent
    with pytest.raises(ValueError, match="clip_ratio"):
        PPOAgent(state_dim=4, action_dim=2, clip_ratio=0.0)
    with pytest.raises(ValueError, match="HEAD_NAMES"):
        PPOAgent(state_dim=4, action_dim={"slot": 2, "op": 5})


def test_agent_keeps_one_config_and_reads_its_hyperparameters_from_it():
    from esper.leyline import N_FLAT_ACTIONS
    from esper.simic.agent.ppo import PPOAgent
    cfg = TrainingConfig(lr=1e-3, gamma=0.9, n_epochs=3, hidden_dim=16, anomaly_min_explained_variance=0.3)
    agent = PPOAgent(state_dim=4, action_dim=3, config=cfg)
    assert agent.config == cfg and agent.config is not cfg
    assert (agent.lr, agent.gamma, agent.n_epochs, agent.hidden_dim) == (1e-3, 0.9, 3, 16)
    assert agent.anomaly_detector.min_explained_variance == 0.3
    assert agent.optimizer.param_groups[0]["lr"] == 1e-3
    # the keyword form builds the same config; agreeing keywords next to a config are accepted
    assert PPOAgent(state_dim=4, action_dim=3, lr=1e-3, gamma=0.9, n_epochs=3, hidden_dim=16,
                    anomaly_min_explained_variance=0.3).config == cfg
    assert PPOAgent(state_dim=4, action_dim=3, config=cfg, gamma=0.9).config == cfg
    with pytest.raises(ValueError, match=r"config\.gamma=0\.9 and gamma=0\.95"):
        PPOAgent(state_dim=4, action_dim=3, config=cfg, gamma=0.95)
    with pytest.raises(TypeError, match="gama"):
        PPOAgent(state_dim=4, action_dim=3, gama=0.9)
    # attributes write through to a validated copy of the config; the network's fields are fixed
    agent.target_kl = None
    assert agent.config.target_kl is None and cfg.target_kl == TrainingConfig().target_kl
    with pytest.raises(ValueError, match="clip_ratio"):
        agent.clip_ratio = 0.0
    with pytest.raises(ValueError, match="hidden_dim is fixed"):
        agent.hidden_dim = 32
    assert PPOAgent(state_dim=4).action_dim == N_FLAT_ACTIONS


def test_config_round_trips_through_a_plain_dict():
    cfg = TrainingConfig(entropy_coef_start=0.2, entropy_anneal_steps=5, target_kl=None)
    assert TrainingConfig.from_dict(cfg.to_dict()) == cfg
    assert TrainingConfig.from_dict({"lr": 1e-3}) == TrainingConfig(lr=1e-3)  # missing fields: defaults
    with pytest.raises(ValueError, match="lr must be in"):
        TrainingConfig.from_dict({"lr": 5.0})
    with pytest.raises(ValueError, match="not TrainingConfig fields: bogus"):
        TrainingConfig.from_dict({"bogus": 1})


def test_trainers_take_one_config_or_keywords_but_not_both_disagreeing():
    from esper.simic.trainers.run_settings import RunSettings
    build = lambda **kw: RunSettings.from_options("train_ppo", **kw)
    cfg = TrainingConfig(lr=1e-3, n_epochs=2)
    built = build(lr=1e-3, ppo_kwargs={"n_epochs": 2, "reward_normalizer": "rn"})
    assert built.agent == cfg and built.agent_kwargs == {"reward_normalizer": "rn"}
    assert build(config=cfg, lr=1e-3).agent == cfg
    with pytest.raises(ValueError, match=r"config\.n_epochs=2 and n_epochs=4"):
        build(config=cfg, ppo_kwargs={"n_epochs": 4})
    with pytest.raises(ValueError, match="lr=0.001 and ppo_kwargs lr=0.01"):
        build(lr=1e-3, ppo_kwargs={"lr": 1e-2})


def test_the_run_fields_of_older_configs_are_dropped():
    "`n_envs`, `n_episodes` and `max_epochs` moved to `RunSettings`: an agent checkpoint that holds them still loads."
    assert TrainingConfig.from_dict({"lr": 1e-3, "n_envs": 2, "n_episodes": 4, "max_epochs": 3}) == TrainingConfig(lr=1e-3)
    with pytest.raises(TypeError):
        TrainingConfig(n_envs=2)
