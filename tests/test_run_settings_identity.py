"""The run-settings refactor changed no run: tiny vectorized, worker and population runs give the weights and history
recorded at f8c1901 (before `RunSettings` and `EpisodeSpec`), and that commit's checkpoint config still compares equal.

The fingerprints were recorded on CPU with `torch.set_num_threads(1)` and AVX2 kernels (`tests/conftest.py` pins
those on a CPU that has more): a sha256 of the policy's state dict (names and
bytes, sorted by name) and of the history as JSON. They were re-recorded once, on purpose, when the honest splits
(issue 56) changed every run's training data and episodes began to count their compute; the in-process, worker and
population runs still give one and the same fingerprint."""

import hashlib
import json
from dataclasses import replace

import pytest
import torch

from esper.simic.envs.parallel_env_state import EpisodeSpec
from esper.simic.envs.rewards import RewardConfig
from esper.simic.trainers.run_settings import RunSettings
from esper.simic.trainers.checkpoint import check_resume_config
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.episode import EpisodeConfig
from esper.tamiyo.problems import GrowthProblem
from test_action_space_identity import cpu_vendor

#: (weights, history) fingerprints of the run below: recorded at f8c1901, re-recorded after the honest splits (on AMD
#: EPYC). The policy's matrix products take MKL's per-vendor code path whatever the AVX2 pin, so an Intel CPU gives
#: other bits: those were recorded at 4a970d9 on an Intel Xeon with AVX-512 (AVX2 pinned), and the change that grows
#: any model (issue 73) gave the same there. `cpu_vendor` is the action-space identity test's.
RECORDED = {"AuthenticAMD": ("4c67c50a2605c350", "7462f70a283611c8"), "GenuineIntel": ("798fc79e19ded31f", "a5d8c6c8abb296a3")}
WEIGHTS, HISTORY = RECORDED.get(cpu_vendor(), RECORDED["AuthenticAMD"])
OLD_KEYWORDS = dict(
    n_episodes=4, n_envs=2, max_epochs=3, seed=3, episode_config=EpisodeConfig(max_epochs=3, max_batches=2),
    rollback_penalty=0.2, reward_config=RewardConfig(rent_weight=0.1, failed_action_penalty=0.05),
    ppo_kwargs=dict(n_epochs=2, batch_size=4),
)
#: The trainer config a checkpoint of that run held at f8c1901 (`trainer.config`): a resumed run compares this.
MAIN_CHECKPOINT_CONFIG = {
    "task": "mnist1d", "episodes_per_update": 2, "parallel": True, "max_epochs": 3, "factored": False,
    "recurrent": False, "seed": 3, "n_slots": 2, "max_batches": 2, "rollback_penalty": 0.2,
    "episodes_per_task_seed": 1, "group_baseline": False, "lr": 0.0003, "clip_ratio": 0.2, "gamma": 0.99,
    "entropy_coef": 0.01, "entropy_coef_start": None, "entropy_coef_end": None, "entropy_anneal_episodes": 0,
    "lr_anneal_episodes": 0, "blueprint_offer_episodes": 0, "ppo_kwargs": {"n_epochs": 2, "batch_size": 4},
    "reward_config": {"accuracy_weight": 1.0, "contribution_weight": 0.5, "rent_weight": 0.1, "terminal_weight": 1.0,
                      "unkept_weight": 0.0, "failed_action_penalty": 0.05},
    "episode_config": {"max_epochs": 3, "host": None, "slots": None, "host_lr": 0.01, "seed_lr": 0.05, "momentum": 0.9,
                       "lr_schedule": "constant", "blend_epochs": 5, "blend_algorithm": "linear", "embargo_epochs": 3,
                       "gates": {"min_training_epochs": 3, "min_gradient_health": 0.5, "min_holding_epochs": 1,
                                 "min_contribution": 0.0},
                       "counterfactual_stages": ["TRAINING", "BLENDING", "HOLDING"], "governor": True,
                       "max_batches": 2, "param_budget": None},
}


def fingerprint(agent, history) -> tuple[str, str]:
    h = hashlib.sha256()
    for k, v in sorted(agent.network.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    hist = hashlib.sha256(json.dumps(history, sort_keys=True, default=repr).encode()).hexdigest()[:16]
    return h.hexdigest()[:16], hist


def settings(**kw) -> RunSettings:
    "The run of `OLD_KEYWORDS` built as one object, the way the CLI and the benchmark build it."
    spec = EpisodeSpec(
        GrowthProblem("mnist1d", max_epochs=3, max_batches=2),
        RewardConfig(rent_weight=0.1, failed_action_penalty=0.05, rollback_penalty=0.2),
    )
    base = RunSettings.from_options(ppo_kwargs=dict(n_epochs=2, batch_size=4)).agent
    return RunSettings(spec, base, n_episodes=4, episodes_per_update=2, seed=3, **kw)


@pytest.mark.parametrize("kw", [dict(), dict(workers=2), dict(population=True)], ids=["lockstep", "workers", "population"])
def test_same_weights_and_history_as_before(kw):
    torch.set_num_threads(1)
    assert fingerprint(*train_ppo_vectorized(settings(**kw))) == (WEIGHTS, HISTORY)


def test_flat_keywords_build_the_same_settings_and_run():
    torch.set_num_threads(1)
    assert RunSettings.from_options(**OLD_KEYWORDS) == settings()
    assert fingerprint(*train_ppo_vectorized(**OLD_KEYWORDS)) == (WEIGHTS, HISTORY)


def test_checkpoints_of_before_still_compare_equal():
    check_resume_config(MAIN_CHECKPOINT_CONFIG, settings().checkpoint_config(n_slots=2))
    other = replace(settings(), spec=replace(settings().spec, reward=RewardConfig(rollback_penalty=0.3)))
    with pytest.raises(ValueError, match="rollback_penalty: checkpoint 0.2, now 0.3"):
        check_resume_config(MAIN_CHECKPOINT_CONFIG, other.checkpoint_config(n_slots=2))
