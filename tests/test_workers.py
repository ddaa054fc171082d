"""Worker processes: same results at any worker count, and every fault ends in one clear error with no worker left behind."""
import multiprocessing as mp
import os
import signal
import time
from dataclasses import replace
from functools import partial

import pytest
import torch

from esper.simic.envs.env import action_dim, state_dim
from esper.simic.envs.parallel_env_state import EpisodeSpec, task_with_shuffle
from esper.simic.agent.ppo import PPOAgent
from esper.simic.trainers.checkpoint import load_training_checkpoint
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.simic.envs.workers import ProcessEnvPool, WorkerError
from esper.tamiyo.problems import GrowthProblem
from esper.tamiyo.signals import TamiyoAction

TINY = GrowthProblem("mnist1d", max_epochs=3, max_batches=2)
FACTORY = partial(task_with_shuffle, "mnist1d")
_spec = lambda factory: EpisodeSpec(GrowthProblem("mnist1d", max_epochs=3, max_batches=2, task_factory=factory))


def _task_failing_on(bad_seed: int, seed: int):
    "A task factory that raises for one episode seed (module-level, so it pickles)."
    if seed == bad_seed: raise RuntimeError(f"no data for seed {seed}")
    return task_with_shuffle("mnist1d", seed)


def _wait(envs): return [TamiyoAction.wait("test") for _ in envs]


def _no_workers_left(pool: ProcessEnvPool) -> bool:
    for p in pool.procs: p.join(timeout=10)
    return not any(p.is_alive() for p in pool.procs)


def _train(workers, **kw):
    return train_ppo_vectorized(n_episodes=4, n_envs=2, problem=TINY, workers=workers, seed=5, **kw)


def test_same_agent_and_history_for_any_worker_count():
    torch.set_num_threads(1)
    runs = {w: _train(w) for w in (0, 1, 2)}
    ref_agent, ref_hist = runs[0]
    for w in (1, 2):
        agent, hist = runs[w]
        assert hist == ref_hist, f"{w} workers: history differs from the in-process run"
        for (n, a), b in zip(ref_agent.network.state_dict().items(), agent.network.state_dict().values()):
            assert torch.equal(a, b), f"{w} workers: parameter {n} differs"


def test_a_worker_that_raises_names_itself_and_its_cause():
    pool = ProcessEnvPool(2, spec=_spec(partial(_task_failing_on, 22)))
    with pytest.raises(WorkerError, match=r"env worker 1 \(envs \[1\]\) failed: RuntimeError: no data for seed 22") as ei:
        pool.run_lockstep([21, 22], _wait)
    assert "Traceback" in ei.value.worker_traceback and "\n" not in str(ei.value)
    assert _no_workers_left(pool)
    with pytest.raises(RuntimeError, match="closed"): pool.run_lockstep([1], _wait)


def test_a_killed_worker_is_reported_not_waited_for():
    pool = ProcessEnvPool(2, spec=_spec(FACTORY))
    def decide(envs):
        pool.procs[0].kill(); pool.procs[0].join(timeout=10)
        return _wait(envs)
    t0 = time.perf_counter()
    with pytest.raises(WorkerError, match=r"env worker 0 \(envs \[0\]\) failed: killed by SIGKILL"):
        pool.run_lockstep([1, 2], decide)
    assert time.perf_counter() - t0 < 60
    assert _no_workers_left(pool)


@pytest.fixture
def ctrl_c_raises():
    "Ctrl-C raises KeyboardInterrupt here, as in a terminal, even where the suite runs with SIGINT ignored (a background job)."
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_every_worker_and_keeps_the_last_checkpoint(tmp_path, ctrl_c_raises):
    path = tmp_path / "agent.pt"
    def ctrl_c_in_second_batch(agent, rec):
        if rec["batch"] < 2: return
        workers = [p for p in mp.active_children() if p.name.startswith("esper-env-worker")]
        assert len(workers) == 2
        for p in workers: os.kill(p.pid, signal.SIGINT)   # a terminal's Ctrl-C reaches the whole process group
        time.sleep(0.5)
        assert all(p.is_alive() for p in workers)        # workers leave Ctrl-C to the learner
        os.kill(os.getpid(), signal.SIGINT)              # the learner gets it too
        time.sleep(1)
    with pytest.raises(KeyboardInterrupt):
        train_ppo_vectorized(n_episodes=6, n_envs=2, problem=TINY, workers=2, seed=5,
                             save_path=str(path), on_update=ctrl_c_in_second_batch)
    left = [p for p in mp.active_children() if p.name.startswith("esper-env-worker")]
    assert left == [], f"workers left running: {left}"
    agent = PPOAgent(state_dim(2), action_dim(2, False))
    assert load_training_checkpoint(str(path), agent)["batches_done"] == 1   # the last whole batch


def test_unpicklable_factory_is_refused_before_any_process_starts():
    with pytest.raises(ValueError, match="must pickle"):
        train_ppo_vectorized(n_episodes=2, n_envs=2, workers=2,
                             problem=replace(TINY, task_factory=lambda s: task_with_shuffle("mnist1d", s)))


def test_bad_worker_counts_name_the_field():
    with pytest.raises(ValueError, match="workers must be an integer >= 0"): _train(-1)
    with pytest.raises(ValueError, match="n_workers"): ProcessEnvPool(0, spec=_spec(FACTORY))
