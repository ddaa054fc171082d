"""The Ray backend on a local Ray instance: the same training run as the process backend, and faults in one line."""
import pytest
import ray
import torch

from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.problems import GrowthProblem

TINY = GrowthProblem("mnist1d", max_epochs=3, max_batches=2)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


def _train(**kw):
    return train_ppo_vectorized(n_episodes=4, n_envs=2, problem=TINY, seed=5, **kw)


@pytest.mark.slow  # about a minute: starts a local Ray instance; `make test-slow` (and CI) runs it
def test_ray_backend_gives_the_process_backends_run(local_ray):
    torch.set_num_threads(1)
    agent_p, hist_p = _train(workers=2)
    agent_r, hist_r = _train(workers=2, backend="ray")
    assert hist_r == hist_p
    for a, b in zip(agent_p.network.state_dict().values(), agent_r.network.state_dict().values()):
        assert torch.equal(a, b)
    assert ray.is_initialized()   # the pool left the Ray instance it found running


def test_ray_backend_needs_a_known_backend_name():
    with pytest.raises(ValueError, match="backend must be 'process' or 'ray'"):
        _train(workers=2, backend="mpi")
