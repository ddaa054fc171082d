"""What caps the worker pool: lockstep waiting and the learner's serial work, measured in one process.

Usage: OMP_NUM_THREADS=1 .venv/bin/python lab/probes/bench_lockstep.py [--envs 16] [--max-epochs 15] [--max-batches 30]

Trains two batches of `--envs` short-preset episodes in this process (`train_ppo_vectorized(workers=0)`) and times
each env's share of every epoch (begin, training batches, end). With one env per worker, every epoch of a pool
lasts as long as its slowest env, so `mean episode / sum over epochs of the slowest env` is the most N workers
can gain from lockstep alone; the script prints that ceiling for 1, 2, 4, ... workers (env i in worker i mod N,
as `EnvPool` places them). It also prints the learner's serial time per batch: the PPO update and the decisions.
"""
import argparse
import collections
import time

import numpy as np
import torch

import esper.simic.trainers.vectorized as V
from esper.tamiyo import Episode, GrowthProblem

SPENT = collections.defaultdict(float)   # seconds per Episode object
LEARNER = collections.defaultdict(list)  # seconds per call of the learner's steps


def timed(owner, name: str, sink) -> None:
    "Wrap `owner.name` so that each call's duration goes to `sink(self_or_none, seconds)`."
    orig = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = orig(*args, **kwargs)
        sink(args, time.perf_counter() - t0)
        return out
    setattr(owner, name, wrapper)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--max-epochs", type=int, default=15)
    p.add_argument("--max-batches", type=int, default=30)
    a = p.parse_args()
    if a.envs < 1 or a.max_epochs < 2 or a.max_batches < 1:
        raise SystemExit("bench_lockstep: --envs and --max-batches must be >= 1, --max-epochs >= 2")
    torch.set_num_threads(1)
    for name in ("begin_epoch", "train_batch", "end_epoch"):
        timed(Episode, name, lambda args, s: SPENT.__setitem__(id(args[0]), SPENT[id(args[0])] + s))
    per_epoch = []   # one row per epoch of the last batch: seconds per env
    orig_epoch = V.run_epoch_lockstep
    def epoch(envs, actions):
        before = [SPENT[id(e.episode)] for e in envs]
        orig_epoch(envs, actions)
        per_epoch.append([SPENT[id(e.episode)] - b for e, b in zip(envs, before)])
    V.run_epoch_lockstep = epoch
    timed(V, "run_ppo_update", lambda args, s: LEARNER["update"].append(s))
    timed(V.PPORollout, "decide", lambda args, s: LEARNER["decide"].append(s))
    problem = GrowthProblem("mnist1d", max_epochs=a.max_epochs, max_batches=a.max_batches)
    V.train_ppo_vectorized(n_episodes=2 * a.envs, n_envs=a.envs, problem=problem, workers=0, seed=0)
    m = np.array(per_epoch[-a.max_epochs:]).T          # env x epoch, the second batch
    episode = m.sum(1)
    print(f"{a.envs} envs, {a.max_epochs} epochs x {a.max_batches} batches, second batch of a run (seed 0)")
    print(f"episode seconds per env: min {episode.min():.2f}, mean {episode.mean():.2f}, max {episode.max():.2f}")
    print(f"sum over epochs of the slowest env: {m.max(0).sum():.2f} s")
    w = 1
    while w <= a.envs:
        by_worker = np.array([m[i::w].sum(0) for i in range(w)])   # worker x epoch
        print(f"{w:>3} workers: lockstep ceiling x{m.sum() / by_worker.max(0).sum():.2f} (ideal x{w})")
        w *= 2
    decide = sum(LEARNER["decide"]) / len(LEARNER["update"])
    print(f"learner per batch: PPO update {np.mean(LEARNER['update']):.3f} s, decisions {decide:.3f} s")


if __name__ == "__main__":
    main()
