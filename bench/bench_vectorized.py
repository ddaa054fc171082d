"""Host-training throughput of the vectorized PPO trainer (1, 4, 8 envs) against the same work done sequentially.

Usage: .venv/bin/python bench/bench_vectorized.py [--max-epochs 3] [--max-batches 20] [--envs 1 4 8] [--profile]

"Same work": n_envs episodes of max_epochs epochs, one PPO update, via `train_ppo_vectorized(n_envs=k)` (lockstep,
inverted control flow) and via `train_ppo(update_every=k)` (the same episodes one after another). Samples/s counts
host-training samples only (episodes x epochs x batches x batch size); the wall time includes validation, the
counterfactual passes, the policy and the PPO update, so the profile shows where the rest goes.
"""
import argparse
import cProfile
import io
import pstats
import time

import torch

from esper.simic.trainers.training import train_ppo
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo.episode import EpisodeConfig
from esper.tasks import get_task


def run(k: int, vectorized: bool, max_epochs: int, max_batches: int, device: str) -> tuple[float, int]:
    cfg = EpisodeConfig(max_batches=max_batches)
    bs = get_task("mnist1d").config.batch_size
    t0 = time.perf_counter()
    if vectorized: train_ppo_vectorized(n_episodes=k, n_envs=k, max_epochs=max_epochs, episode_config=cfg, device=device)
    else: train_ppo(n_episodes=k, update_every=k, max_epochs=max_epochs, episode_config=cfg, device=device)
    return time.perf_counter() - t0, k * max_epochs * max_batches * bs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--max-batches", type=int, default=20)
    p.add_argument("--envs", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--profile", action="store_true", help="cProfile the vectorized run with the most envs")
    a = p.parse_args()
    print(f"device {a.device}, torch threads {torch.get_num_threads()}, {a.max_epochs} epochs x {a.max_batches} batches per episode")
    run(1, True, 2, 2, a.device)  # warm-up (dataset cache, allocator)
    print(f"{'envs':>4} {'vectorized s':>12} {'samples/s':>10} {'sequential s':>12} {'samples/s':>10} {'ratio':>6}")
    for k in a.envs:
        tv, n = run(k, True, a.max_epochs, a.max_batches, a.device)
        ts, _ = run(k, False, a.max_epochs, a.max_batches, a.device)
        print(f"{k:>4} {tv:>12.2f} {n / tv:>10.0f} {ts:>12.2f} {n / ts:>10.0f} {ts / tv:>6.2f}", flush=True)
    if a.profile:
        pr = cProfile.Profile(); pr.enable()
        run(max(a.envs), True, a.max_epochs, a.max_batches, a.device)
        pr.disable(); s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25); print(s.getvalue())


if __name__ == "__main__":
    main()
