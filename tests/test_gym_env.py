"""`GrowthEnv` across notebooks: made through the gymnasium registry, conformant, and adding nothing to the episode."""
import os
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import esper.simic.envs.gym_env  # noqa: F401  (registers esper/Growth-v0)
from esper.leyline import HEAD_NAMES, LifecycleOp
from esper.simic.envs.env import action_masks, decode_action, step_reward
from esper.tamiyo.episode import Episode
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem

PROBLEM = GrowthProblem("mnist1d", max_epochs=5, max_batches=3)
WAIT, GERMINATE, ADVANCE, PRUNE, FOSSILIZE = (int(o) for o in LifecycleOp)


def schedule_action(obs):
    "A fixed schedule as factored actions: germinate conv_small (blend 0) in the first dormant slot, then advance it."
    masks = action_masks(obs, factored=True)
    for slot in range(masks["op|slot"].shape[0]):
        if masks["op|slot"][slot, ADVANCE]: return [slot, 0, 0, ADVANCE]
    for slot in range(masks["op|slot"].shape[0]):
        if masks["op|slot"][slot, GERMINATE]: return [slot, 1, 0, GERMINATE]
    return [0, 0, 0, WAIT]


def test_registered_and_made_through_gymnasium():
    env = gymnasium.make("esper/Growth-v0", suite=PROBLEM)
    assert env.unwrapped.episode_spec.suite.problems == (PROBLEM,)  # the registered entry point, built with make's keywords
    assert env.unwrapped.spec.id == "esper/Growth-v0"
    assert env.action_space.nvec.tolist() == [2, 5, 3, 5]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")
        check_env(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
    assert info["action_mask"].shape == (int(env.action_space.nvec.sum()),)
    env.close()


def test_registration_is_idempotent():
    "Importing the module again neither raises nor re-registers (gymnasium would warn 'Overriding environment')."
    code = ("import importlib, warnings, esper.simic.envs.gym_env as m\n"
            "with warnings.catch_warnings():\n"
            "    warnings.simplefilter('error')\n"
            "    importlib.reload(m)\n"
            "import gymnasium; assert 'esper/Growth-v0' in gymnasium.registry")
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ | {"OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("seed", [0, 11])
def test_rewards_equal_step_reward_of_the_same_episode(seed):
    env = gymnasium.make("esper/Growth-v0", suite=PROBLEM)
    obs, _ = env.reset(seed=seed)
    actions, env_rewards, done = [], [], False
    while not done:
        a = schedule_action(env.unwrapped._obs)
        obs, r, term, trunc, info = env.step(np.array(a))
        actions.append(a); env_rewards.append(r); done = term or trunc
        assert info["action_legal"] and not trunc
    assert len(env_rewards) == env.unwrapped.episode_spec.max_epochs - 1
    assert GERMINATE in [a[3] for a in actions]
    final = info

    ep = Episode(get_task("mnist1d", shuffle_seed=seed), problem=PROBLEM)
    o = ep.reset(seed)
    direct = []
    for a in actions:
        o, _ = ep.step(decode_action(dict(zip(HEAD_NAMES, a)), o, factored=True))
        direct.append(step_reward(ep)["total"])
    assert ep.done
    assert env_rewards == pytest.approx(direct, abs=0)
    assert sum(env_rewards) == pytest.approx(sum(direct), abs=1e-12)
    res = ep.result()
    assert (final["final_accuracy"], final["params_added"]) == (res.final_accuracy, res.params_added)
    assert res.params_added > 0  # the schedule really grew the host
