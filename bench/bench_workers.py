"""Host-training throughput of the vectorized PPO trainer with 1, 2, 4, ... worker processes, the same work each time.

Usage: .venv/bin/python bench/bench_workers.py [--workers 1 2 4 8 16] [--envs 16] [--batches 3]
                                               [--max-epochs 15] [--max-batches 30] [--out nbs/results/bench_workers]

Each run trains `--batches` PPO batches of `--envs` short-preset episodes (`train_ppo_vectorized(workers=k)`).
Samples/s counts host-training samples (episodes x epochs x batches x batch size) in the steady state: from the
end of the first PPO update to the end of the last, so the workers' start (about 2 s, once per training run) and
the first batch are left out; the whole run's wall time is printed too. Worker counts above the cores this
process may use are skipped. Every run must give the same training history (the pool is deterministic whatever
its size); the script stops with an error if one does not. Writes `scaling.json` to `--out`.
Run it with OMP_NUM_THREADS=1.
"""
import argparse
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

from esper.cli import earlier_results
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.leyline.cores import available_cores
from esper.tamiyo import GrowthProblem
from esper.tasks import get_task
from esper.leyline.files import relative_paths, write_json_atomic


def problem(a) -> GrowthProblem:
    "The episodes' problem: MNIST-1D for `--max-epochs` epochs of `--max-batches` batches."
    return GrowthProblem("mnist1d", max_epochs=a.max_epochs, max_batches=a.max_batches)


def run(workers: int, a) -> tuple[float, float, list]:
    "(steady-state seconds per batch, whole wall time, history) of one training run."
    stamps = []
    t0 = time.perf_counter()
    _, hist = train_ppo_vectorized(n_episodes=a.envs * a.batches, n_envs=a.envs, problem=problem(a), workers=workers,
                                   seed=0, on_update=lambda agent, rec: stamps.append(time.perf_counter()))
    wall = time.perf_counter() - t0
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1), wall, hist


def solo(a) -> float:
    "Seconds one process takes to train one batch of `--envs` episodes by itself (envs in-process, no workers)."
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    train_ppo_vectorized(n_episodes=a.envs, n_envs=a.envs, problem=problem(a), workers=0, seed=0)
    return time.perf_counter() - t0


def independent(w: int, a) -> float:
    "Samples/s of `w` independent training processes at once: what the machine gives this work without a learner."
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=w, mp_context=multiprocessing.get_context("spawn")) as ex:
        seconds = list(ex.map(solo, [a] * w))
    return w * a.envs * a.max_epochs * a.max_batches * get_task("mnist1d").config.batch_size / max(seconds)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--envs", type=int, default=16, help="episodes per PPO batch (default: 16)")
    p.add_argument("--batches", type=int, default=3, help="PPO batches per run, >= 2 (default: 3)")
    p.add_argument("--max-epochs", type=int, default=15)
    p.add_argument("--max-batches", type=int, default=30)
    p.add_argument("--machine", default=None, help="how to describe this machine in the output (default: cores and CPU)")
    p.add_argument("--independent", action="store_true",
                   help="also run k independent single-process trainings at once for each worker count k: the "
                        "machine's own scaling for this work, the ceiling for the pool")
    p.add_argument("--out", default="nbs/results/bench_workers")
    p.add_argument("--overwrite", action="store_true", help="replace the figures an earlier run left in --out")
    a = p.parse_args()
    if a.batches < 2: sys.exit(f"bench_workers: --batches must be >= 2 (got {a.batches}): the steady state needs two updates")
    for name in ("envs", "max_epochs", "max_batches"):
        if getattr(a, name) < 1: sys.exit(f"bench_workers: --{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    if any(w < 1 for w in a.workers): sys.exit(f"bench_workers: --workers must all be >= 1 (got {a.workers})")
    out = Path(a.out)
    if earlier_results(out, ("scaling.json",)) and not a.overwrite:  # measured figures: never replaced by accident
        sys.exit(f"bench_workers: --out {out} already holds an earlier run's figures (scaling.json); "
                 "pass --overwrite to replace them, or choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True); tempfile.TemporaryFile(dir=out).close()
    except OSError as e: sys.exit(f"bench_workers: cannot write to --out {out}: {e.strerror or e}")
    cores = available_cores()
    ws = sorted({w for w in a.workers if w <= cores})
    skipped = sorted(set(a.workers) - set(ws))
    if 1 not in ws: sys.exit("bench_workers: --workers must include 1 (the reference)")
    machine = a.machine or f"{cores} cores, {platform.processor() or platform.machine()}"
    bs = get_task("mnist1d").config.batch_size
    samples = a.envs * a.max_epochs * a.max_batches * bs
    print(f"{machine}; torch {torch.__version__}, {torch.get_num_threads()} thread(s) per process; "
          f"{a.batches} batches of {a.envs} episodes ({a.max_epochs} epochs x {a.max_batches} batches of {bs})"
          + (f"; skipped {skipped} (more than {cores} cores)" if skipped else ""), flush=True)
    print(f"{'workers':>7} {'s/batch':>8} {'samples/s':>10} {'speed-up':>8} {'wall s':>7}", flush=True)
    rows, ref_hist, ref = [], None, None
    for w in ws:
        per_batch, wall, hist = run(w, a)
        strip = lambda h: [{k: v for k, v in r.items() if k != "seconds"} for r in h]
        if ref_hist is None: ref_hist = strip(hist)
        elif strip(hist) != ref_hist: sys.exit(f"bench_workers: {w} workers gave a different training history than 1 worker")
        rate = samples / per_batch
        ref = ref or rate
        rows.append({"workers": w, "seconds_per_batch": per_batch, "samples_per_s": rate, "speedup": rate / ref, "wall_s": wall})
        print(f"{w:>7} {per_batch:>8.2f} {rate:>10,.0f} {rate / ref:>8.2f} {wall:>7.1f}", flush=True)
    if a.independent:
        print(f"{'independent processes':>21} {'samples/s':>10} {'speed-up':>8}", flush=True)
        for r in rows:   # ws is sorted, so 1 (the reference) comes first
            r["independent_samples_per_s"] = independent(r["workers"], a)
            print(f"{r['workers']:>21} {r['independent_samples_per_s']:>10,.0f} "
                  f"{r['independent_samples_per_s'] / rows[0]['independent_samples_per_s']:>8.2f}", flush=True)
    cmd = "OMP_NUM_THREADS=1 python bench/bench_workers.py " + shlex.join(sys.argv[1:])
    res = {"command": cmd.strip(), "machine": machine, "torch": torch.__version__, "envs": a.envs, "batches": a.batches,
           "max_epochs": a.max_epochs, "max_batches": a.max_batches, "batch_size": bs, "rows": rows,
           "same_history_for_every_worker_count": True}
    write_json_atomic(out / "scaling.json", relative_paths(res), indent=1)
    print(f"wrote {out / 'scaling.json'}")


if __name__ == "__main__":
    main()
