"""Where one PPO training episode's time goes, and how fast episodes run.

Usage: .venv/bin/python bench/bench_episode.py [--envs 4] [--max-epochs 15] [--max-batches 30] [--repeats 5]
                                               [--out bench/results/episode] [--no-plot]

It trains `--envs` episodes in lockstep with one PPO update (`train_ppo_vectorized`, in this process, the
short preset by default) `--repeats` times and prints the median and best seconds per episode and
host-training samples/s (episodes x epochs x batches x batch size, over the whole wall time), and beside them
the bare-SGD figure of the same host: the same number of steps on the same training batches with the same
optimizer (`make_sgd`, the episode's host rate and momentum), one plain host per episode, no seeds, no
validation, no policy (`--repeats` runs, alternated with the trainer's). Then one more
run under cProfile splits the time into host forward, backward, optimizer steps, gradient statistics, data
feeding, validation passes (with the counterfactuals they measure), telemetry, policy (features and forward), PPO
update, episode setup, per-epoch operation counting and the rest; wall and CPU seconds (`time.process_time`) are both
kept: the CPU figures are steadier on a shared machine. `profile.json` and `profile.png` go to `--out`.
Run it with OMP_NUM_THREADS=1 (the hosts are tiny; more threads only contend).
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from esper.cli import earlier_results
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo import EpisodeConfig, GrowthProblem
from esper.tasks import get_task
from esper.tolaria.trainer import make_sgd
from esper.leyline.files import write_json_atomic

# category -> (file suffix, function name(s)[, caller file suffix, caller function(s)]), or a list of them: cumulative
# time of those functions (none calls another), optionally only what they spent when called from the given callers.
# Where the optimizers are stepped in one call (`step_optimizers`, `clear_grads`) that call is counted; the
# optimizer's own step only when `train_step` calls it, as it did before those functions existed.
PARTS = {
    "host forward": ("torch/nn/modules/module.py", "_wrapped_call_impl", "esper/tolaria/trainer.py", "train_step"),
    "backward": ("torch/_tensor.py", "backward"),
    "optimizer steps": [("torch/optim/optimizer.py", "wrapper", "esper/tolaria/trainer.py", "train_step"),
                        ("esper/tolaria/trainer.py", "step_optimizers")],
    "zero_grad": [("torch/optim/optimizer.py", "zero_grad"),  # (also when clear_grads calls it: not for plain SGDs)
                  ("esper/tolaria/trainer.py", "clear_grads")],
    "gradient statistics": ("esper/tamiyo/episode_parts.py", "__call__"),
    # every validation pass: each epoch's (which also measures the counterfactuals, in branches), the test split's
    "validation and counterfactuals": ("esper/kasmina/evaluation.py", ("validate", "validate_with_counterfactuals")),
    "telemetry": ("esper/nissa/hub.py", "emit"),
    "policy (features, forward)": ("esper/simic/envs/env.py", "act"),
    "PPO update": ("esper/simic/trainers/update_metrics.py", "run_ppo_update"),
    "episode setup": ("esper/tamiyo/episode.py", "start"),
    # per epoch, through `Episode.sample_flops`'s `SampleFlops`; once per episode is in "episode setup"
    "operation counting": ("esper/tolaria/compute.py", "train_flops_per_sample", "esper/tamiyo/episode_books.py",
                           "__call__"),
}


def _find(stats: dict, suffix: str, name: str | tuple[str, ...]):
    names = (name,) if isinstance(name, str) else name
    return [k for k in stats if k[0].replace(os.sep, "/").endswith(suffix) and k[2] in names]


def breakdown(prof: cProfile.Profile, total: float) -> dict[str, float]:
    "Seconds per category from a profile; 'data feeding' is the time spent producing batches, 'other' the rest."
    st = pstats.Stats(prof).stats  # (file, line, func) -> (cc, nc, tt, ct, callers)
    out = {}
    for part, specs in PARTS.items():
        out[part] = 0.0
        for spec in specs if isinstance(specs, list) else [specs]:
            keys = _find(st, spec[0], spec[1])
            if len(spec) == 2: out[part] += sum(st[k][3] for k in keys)
            else:
                names = spec[3] if isinstance(spec[3], tuple) else (spec[3],)
                callers = [c for name in names for c in _find(st, spec[2], name)]
                out[part] += sum(st[k][4].get(c, (0, 0, 0, 0))[3] for k in keys for c in callers)
    # data feeding: producing batches (TensorBatches.__iter__ or DataLoader.__next__); the few validation batches
    # are counted here and in "validation and counterfactuals" alike
    feed = _find(st, "esper/tasks/registry.py", "__iter__") + _find(st, "torch/utils/data/dataloader.py", "__next__")
    out["data feeding"] = sum(st[k][3] for k in feed)
    out["other"] = max(0.0, total - sum(out.values()))
    return out


CPU: list[float] = []  # process CPU seconds of each timed call, in order: steadier than wall time on a shared machine


def run(envs: int, max_epochs: int, max_batches: int) -> float:
    t0, c0 = time.perf_counter(), time.process_time()
    problem = GrowthProblem("mnist1d", max_epochs=max_epochs, max_batches=max_batches)
    train_ppo_vectorized(n_episodes=envs, n_envs=envs, problem=problem)
    CPU.append(time.process_time() - c0)
    return time.perf_counter() - t0


def run_bare(envs: int, max_epochs: int, max_batches: int) -> float:
    "Seconds for the host-training steps alone: `envs` plain hosts, each `max_epochs` x `max_batches` SGD steps."
    task, cfg = get_task("mnist1d"), EpisodeConfig()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(envs):
        host = task.make_host(None)
        opt = make_sgd(host.parameters(), cfg.host_lr, cfg.momentum)
        host.train()
        for _ in range(max_epochs):
            for i, (xb, yb) in enumerate(task.train_loader):
                if i >= max_batches: break
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(host(xb), yb).backward()
                opt.step()
    CPU.append(time.process_time() - c0)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--max-epochs", type=int, default=15)
    p.add_argument("--max-batches", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="bench/results/episode")
    p.add_argument("--overwrite", action="store_true", help="replace the figures an earlier run left in --out")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    for name in ("envs", "max_epochs", "max_batches", "repeats"):
        if getattr(a, name) < 1: sys.exit(f"bench_episode: --{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    out = Path(a.out)
    found = earlier_results(out, ("profile.json", "profile.png"))
    if found and not a.overwrite:  # measured figures are never replaced by accident
        sys.exit(f"bench_episode: --out {out} already holds an earlier run's figures ({', '.join(found)}); "
                 "pass --overwrite to replace them, or choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True); tempfile.TemporaryFile(dir=out).close()
    except OSError as e: sys.exit(f"bench_episode: cannot write to --out {out}: {e.strerror or e}")
    bs = get_task("mnist1d").config.batch_size
    samples = a.envs * a.max_epochs * a.max_batches * bs
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {a.envs} episodes of {a.max_epochs} epochs x "
          f"{a.max_batches} batches of {bs}, one PPO update, {a.repeats} repeats", flush=True)
    run(1, 2, 2); run_bare(1, 1, 2)  # warm-up: data cache, first optimizer's one-off imports
    times, bare = [], []
    CPU.clear()
    for _ in range(a.repeats):  # alternated, so that a change in the machine's load reaches both alike
        times.append(run(a.envs, a.max_epochs, a.max_batches))
        bare.append(run_bare(a.envs, a.max_epochs, a.max_batches))
    med, best, bare_med = statistics.median(times), min(times), statistics.median(bare)
    ratio = statistics.median(t / b for t, b in zip(times, bare))
    print(f"seconds per episode: median {med / a.envs:.3f}, best {best / a.envs:.3f}; "
          f"host-training samples/s: median {samples / med:,.0f}, best {samples / best:,.0f}", flush=True)
    cpu, bare_cpu = CPU[0::2], CPU[1::2]
    cpu_ratio = statistics.median(t / b for t, b in zip(cpu, bare_cpu))
    print(f"bare SGD of the same host: {samples / bare_med:,.0f} samples/s; the trainer takes {ratio:.2f}x "
          "its time (median of the pairs)", flush=True)
    print(f"in CPU seconds: trainer {samples / statistics.median(cpu):,.0f} samples/s, bare SGD "
          f"{samples / statistics.median(bare_cpu):,.0f}, ratio {cpu_ratio:.2f}x", flush=True)
    prof = cProfile.Profile(); t0 = time.perf_counter(); prof.enable()
    run(a.envs, a.max_epochs, a.max_batches)
    prof.disable(); total = time.perf_counter() - t0
    parts = breakdown(prof, total)
    print(f"profiled run (cProfile adds overhead): {total:.2f} s")
    for k, v in sorted(parts.items(), key=lambda kv: -kv[1]): print(f"  {k:<28} {v:7.2f} s  {100 * v / total:5.1f}%")
    res = {"torch": torch.__version__, "threads": torch.get_num_threads(), "envs": a.envs, "max_epochs": a.max_epochs,
           "max_batches": a.max_batches, "batch_size": bs, "seconds": times, "seconds_per_episode_median": med / a.envs,
           "samples_per_s_median": samples / med, "bare_seconds": bare,
           "bare_samples_per_s_median": samples / bare_med, "trainer_over_bare_median": ratio,
           "cpu_seconds": cpu, "bare_cpu_seconds": bare_cpu, "cpu_samples_per_s_median": samples / statistics.median(cpu),
           "bare_cpu_samples_per_s_median": samples / statistics.median(bare_cpu), "cpu_trainer_over_bare_median": cpu_ratio,
           "load_average": os.getloadavg(), "profiled_seconds": total, "breakdown_seconds": parts}
    write_json_atomic(out / "profile.json", res, indent=1)
    if not a.no_plot:
        import matplotlib; matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        items = sorted(parts.items(), key=lambda kv: kv[1])
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        ax.barh([k for k, _ in items], [100 * v / total for _, v in items], color="tab:blue")
        ax.set(xlabel="% of the profiled run", title=f"one batch of {a.envs} episodes: where the time goes")
        plt.tight_layout(); fig.savefig(out / "profile.png", dpi=110)
    print(f"wrote {out / 'profile.json'}" + ("" if a.no_plot else f" and {out / 'profile.png'}"))


if __name__ == "__main__":
    main()
