"""A run across a suite is one run whichever pool steps its envs: the in-process lockstep, worker processes and a
population give the same weights and history, with episodes of both problems of the `tiny` suite."""

import hashlib
import json

import pytest
import torch

from esper.simic.trainers.run_settings import RunSettings
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.problems import TINY


def fingerprint(agent, history) -> tuple[str, str]:
    h = hashlib.sha256()
    for k, v in sorted(agent.network.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16], hashlib.sha256(json.dumps(history, sort_keys=True, default=repr).encode()).hexdigest()


KEYWORDS = dict(suite="tiny", n_episodes=4, n_envs=2, seed=2, ppo_kwargs=dict(n_epochs=1, batch_size=4))


@pytest.fixture(scope="module")
def lockstep():
    torch.set_num_threads(1)
    return fingerprint(*train_ppo_vectorized(**KEYWORDS))


def test_the_run_plays_both_problems():
    spec = RunSettings.from_options(**KEYWORDS).spec
    assert sorted({spec.problem_for(2 + k).name for k in range(4)}) == sorted(TINY.names)


@pytest.mark.parametrize("kw", [dict(workers=2), dict(population=True)], ids=["workers", "population"])
def test_every_pool_gives_the_same_run(lockstep, kw):
    torch.set_num_threads(1)
    assert fingerprint(*train_ppo_vectorized(**KEYWORDS, **kw)) == lockstep
