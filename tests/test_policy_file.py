"""A policy file (`save_policy`): the weights of a trained run alone, played by `compare` as the run's own checkpoint
is, saying what it trained on; no run resumes from it (issue 75, item 5: policies a user can load)."""

import pytest
import torch

from esper.cli.compare import _trained_with
from esper.simic import save_policy
from esper.simic.envs.env import load_ppo_controller
from esper.simic.trainers.checkpoint import load_training_checkpoint
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.problems import get_suite


def test_a_policy_plays_as_its_run_and_refuses_to_resume(tmp_path):
    torch.set_num_threads(1)
    run = tmp_path / "agent.pt"
    train_ppo_vectorized(suite=get_suite("tiny"), n_episodes=2, n_envs=2, seed=1, save_path=str(run))
    policy = tmp_path / "policy.pt"
    save_policy(run, policy)
    assert policy.stat().st_size < run.stat().st_size / 2
    said = _trained_with(str(policy))
    assert (said["suite"], said["suite_version"]) == ("tiny", get_suite("tiny").version)
    assert said == _trained_with(str(run))  # compare's notes read the same from both
    a, b = load_ppo_controller(str(run)), load_ppo_controller(str(policy))
    for (k, p), q in zip(a.agent.network.state_dict().items(), b.agent.network.state_dict().values()):
        assert torch.equal(p, q), k
    with pytest.raises(ValueError, match="is a policy file \\(save_policy\\): it plays, but holds no training state"):
        load_training_checkpoint(policy, b.agent)
    with pytest.raises(FileExistsError, match="exists: pass overwrite=True"):
        save_policy(run, policy)
