"""Host-training samples per second of the PPO trainer: envs stepped one by one (lockstep) vs trained as a population.

Each measurement is one call of `train_ppo_vectorized` with K envs: K whole episodes (the `make run` episode setting
by default: 15 epochs x 30 batches of 64) and one PPO update, the full lifecycle included (the policy germinates,
advances, prunes as it likes). Samples are the training samples of every env's epochs; time is the whole call.
The two paths alternate, --repeats times each, after one tiny untimed call of each (the process's one-time costs),
and the best of each is kept (the machine may be busy).

    OMP_NUM_THREADS=1 python bench/bench_population.py                       # CPU: 8 envs
    python bench/bench_population.py --device cuda --envs 8 64 256          # a GPU box

Prints one row per K with the device name, and writes --out (JSON) when given; `--envs` with no K leaves the
trainer out. With --count-ops it first counts
the ATen operators each path dispatches, views left out (on a GPU about one kernel launch each, which is what tiny hosts are bound
by), so the work a GPU would see can be compared on any machine. With --group-sizes it first
measures what one stacked step costs against the env-by-env step, per group size (every env holding one incubating
`conv_heavy` seed, so all share one architecture): the figures behind `MIN_GROUP` in `esper.simic.envs.population`.
With --profile K it profiles one epoch of K such envs trained as one population (`torch.profiler`, the GPU's
kernels too on CUDA) and prints the operators that took the most time: where a stacked step's time goes, in a
few seconds, on a device whose time is short. For example, on a GPU box:

    python bench/bench_population.py --device cuda --profile 8 64 --envs --out /tmp/pop_profile.json
"""
import argparse
import platform
import sys
import time
from functools import partial

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from esper.cli import OneLineParser, nonneg_int, positive_int, seed_int
from esper.leyline.files import relative_paths, write_json_atomic
from esper.simic.trainers.vectorized import train_ppo_vectorized
from esper.tamiyo import GrowthProblem
from esper.tolaria import resolve_device


def device_name(device: torch.device) -> str:
    "The GPU's name, or the CPU's architecture and the torch threads in use."
    if device.type == "cuda": return torch.cuda.get_device_name(device)
    return f"CPU ({platform.machine()}, {torch.get_num_threads()} torch threads)"


def measure(k: int, population: bool, args: argparse.Namespace, device: str) -> dict:
    "One trainer call with `k` envs; its training samples per second."
    problem = GrowthProblem("mnist1d", max_epochs=args.max_epochs, max_batches=args.max_batches or None)
    if device.startswith("cuda"): torch.cuda.synchronize()
    t0 = time.perf_counter()
    _, history = train_ppo_vectorized(n_episodes=k, n_envs=k, problem=problem, device=device,
                                      population=population, seed=args.seed)
    if device.startswith("cuda"): torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    samples = k * args.max_epochs * args.batch_samples
    return {"envs": k, "population": population, "seconds": seconds, "samples_per_s": samples / seconds,
            "avg_accuracy": history[-1]["avg_accuracy"]}


def warm_up(device: str) -> None:
    """One tiny trainer call per path, untimed: the process's one-time costs (data, CUDA context, kernels) paid first.
    Three envs, so that they form a population group on any device (`MIN_GROUP`)."""
    for population in (False, True):
        train_ppo_vectorized(n_episodes=3, n_envs=3, problem=GrowthProblem("mnist1d", max_epochs=2, max_batches=1),
                             device=device, population=population, seed=0)


def incubating_envs(k: int, epochs: int, batches: int, device: str) -> list:
    """`k` started envs (episode seeds 100, 101, ...) of `epochs` epochs x `batches` batches, each with a `conv_heavy`
    seed germinated in block1: one architecture."""
    from esper.simic.envs.parallel_env_state import ParallelEnvState, task_with_shuffle
    from esper.tamiyo.episode import Episode

    def episode(i: int) -> Episode:
        task = task_with_shuffle("mnist1d", 100 + i)
        problem = GrowthProblem.of_task(task, max_epochs=epochs, max_batches=batches)
        return Episode(task, env_id=i, device=device, problem=problem)
    envs = [ParallelEnvState(i, 100 + i, episode(i), torch.device(device)) for i in range(k)]
    for e in envs:
        e.start()
        e.episode.model.germinate("block1", "conv_heavy")
    return envs


def group_cost(g: int, device: str, epochs: int = 2, batches: int = 30) -> dict:
    "Milliseconds per env and batch (validation included) for a group of `g` same-architecture envs, both paths."
    from esper.simic.envs.population import run_epoch_population
    from esper.simic.trainers.vectorized import run_epoch_lockstep
    best = {}
    for name, fn in (("lockstep", run_epoch_lockstep), ("population", run_epoch_population)) * 2:
        envs = incubating_envs(g, epochs + 2, batches, device)
        step = partial(fn, min_group=1) if name == "population" else fn  # stacked even as a group of one
        step(envs, [None] * g)  # warm-up epoch (the seed starts incubating)
        t0 = time.perf_counter()
        for _ in range(epochs): step(envs, [None] * g)
        if device.startswith("cuda"): torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1000 / (epochs * batches * g)
        best[name] = min(best.get(name, ms), ms)
    return {"group": g, **best, "stacked_over_plain": best["population"] / best["lockstep"]}


class OpCounter(TorchDispatchMode):
    "Counts the ATen operators dispatched in its block that compute (views left out): on a GPU, about one launch each."

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += not func.is_view
        return func(*args, **(kwargs or {}))


def op_counts(k: int, device: str) -> dict:
    "ATen ops per env and training batch, and per env at the end of an epoch, for `k` envs of one architecture."
    from esper.simic.envs.population import run_epoch_population
    from esper.simic.trainers.vectorized import run_epoch_lockstep
    out = {"envs": k}
    for name, fn in (("lockstep", run_epoch_lockstep), ("population", partial(run_epoch_population, min_group=1))):
        counts = {}
        for batches in (2, 6):
            envs = incubating_envs(k, 4, batches, device)
            fn(envs, [None] * k)  # the seed starts incubating
            with OpCounter() as c:
                fn(envs, [None] * k)
            counts[batches] = c.n / k
        per_batch = (counts[6] - counts[2]) / 4
        out[name] = {"per_env_batch": per_batch, "per_env_epoch_end": counts[2] - 2 * per_batch}
    return out


def profile_epoch(k: int, device: str, batches: int = 6, top: int = 15) -> dict:
    """The operators of one population epoch of `k` same-architecture envs (after a warm-up epoch), by self time on
    the device (CUDA) or on the CPU; with the epoch's wall milliseconds per env and batch, profiler included."""
    from torch.profiler import ProfilerActivity, profile
    from esper.simic.envs.population import run_epoch_population
    envs = incubating_envs(k, 4, batches, device)
    step = partial(run_epoch_population, min_group=1)
    step(envs, [None] * k)  # warm-up: the seed starts incubating, kernels are loaded
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda: torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        step(envs, [None] * k)
        if cuda: torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1000 / (batches * k)
    rows = []
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        dev = getattr(e, "self_cuda_time_total", 0) if dev is None else dev
        rows.append({"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1000,
                     "self_device_ms": dev / 1000})
    by = "self_device_ms" if cuda else "self_cpu_ms"
    rows.sort(key=lambda r: -r[by])
    return {"envs": k, "batches": batches, "ms_per_env_batch": ms, "sorted_by": by,
            "self_cpu_ms_total": sum(r["self_cpu_ms"] for r in rows),
            "self_device_ms_total": sum(r["self_device_ms"] for r in rows), "top": rows[:top]}


def main(argv: list[str]|None=None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="bench_population.py")
    ap.add_argument("--envs", type=positive_int, nargs="*", default=[8],
                    help="env counts K for the whole trainer; none: leave it out (default: 8)")
    ap.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: auto)")
    ap.add_argument("--max-epochs", type=positive_int, default=15, help="epochs per episode (default: 15)")
    ap.add_argument("--max-batches", type=nonneg_int, default=30, help="batches per epoch, 0 = all (default: 30)")
    ap.add_argument("--repeats", type=positive_int, default=2, help="measurements per path and K (default: 2)")
    ap.add_argument("--seed", type=seed_int, default=0, help="trainer seed (default: 0)")
    ap.add_argument("--group-sizes", type=positive_int, nargs="*", default=[],
                    help="first measure the stacked step against the plain one for these group sizes (default: none)")
    ap.add_argument("--count-ops", type=positive_int, nargs="*", default=[], metavar="K",
                    help="count the ATen ops (about one GPU kernel launch each) per env and batch, and per env at "
                         "the end of an epoch, for K envs of one architecture, both paths (default: none)")
    ap.add_argument("--profile", type=positive_int, nargs="*", default=[], metavar="K",
                    help="profile one population epoch of K same-architecture envs, per K (default: none)")
    ap.add_argument("--out", default=None, help="JSON file for the results (default: none)")
    args = ap.parse_args(argv)
    if args.max_epochs < 2: ap.error(f"--max-epochs must be >= 2 (got {args.max_epochs})")
    try:
        device = resolve_device(args.device)
    except (ValueError, RuntimeError) as e:
        ap.error(f"--device: {e}")
    from esper.tasks import get_task
    task = get_task("mnist1d")
    n_batches = -(-task.n_train // 64)  # batches of 64 in an epoch, the last one short
    capped = args.max_batches and args.max_batches < n_batches
    args.batch_samples = 64 * args.max_batches if capped else task.n_train  # training samples per epoch
    name = device_name(device)
    print(f"device: {name}; {args.max_epochs} epochs x {args.max_batches or 'all'} batches per episode", flush=True)
    ops = []
    if args.count_ops:
        print(f"{'envs':>5s} {'ops per env-batch: env by env':>30s} {'stacked':>8s} {'per env at epoch end: env by env':>33s}"
              f" {'stacked':>8s}")
    for k in args.count_ops:
        r = op_counts(k, str(device))
        print(f"{k:5d} {r['lockstep']['per_env_batch']:30.1f} {r['population']['per_env_batch']:8.1f} "
              f"{r['lockstep']['per_env_epoch_end']:33.1f} {r['population']['per_env_epoch_end']:8.1f}", flush=True)
        ops.append(r)
    groups = []
    if args.group_sizes:
        print(f"{'group':>5s} {'env by env ms':>14s} {'stacked ms':>11s} {'stacked / plain':>16s}  (per env and batch)")
    for g in args.group_sizes:
        r = group_cost(g, str(device))
        print(f"{g:5d} {r['lockstep']:14.2f} {r['population']:11.2f} {r['stacked_over_plain']:15.2f}x", flush=True)
        groups.append(r)
    profiles = []
    for k in args.profile:
        r = profile_epoch(k, str(device))
        total = r["self_device_ms_total"] if r["sorted_by"] == "self_device_ms" else r["self_cpu_ms_total"]
        print(f"profile, {k} envs as one population: {r['ms_per_env_batch']:.2f} ms per env and batch (profiled); "
              f"{r['self_cpu_ms_total']:.0f} ms on the CPU, {r['self_device_ms_total']:.0f} ms on the device",
              flush=True)
        for row in r["top"]:
            print(f"  {row['op'][:48]:<48s} {row['calls']:6d} calls {row[r['sorted_by']]:9.1f} ms "
                  f"{100 * row[r['sorted_by']] / max(total, 1e-9):5.1f}%", flush=True)
        profiles.append(r)
    if args.envs:
        print(f"{'envs':>5s} {'lockstep samples/s':>19s} {'population samples/s':>21s} {'ratio':>6s}", flush=True)
    rows = []
    if args.envs:
        warm_up(str(device))
    for k in args.envs:
        best = {False: None, True: None}
        for _ in range(args.repeats):
            for population in (False, True):
                r = measure(k, population, args, str(device))
                if best[population] is None or r["samples_per_s"] > best[population]["samples_per_s"]:
                    best[population] = r
        ratio = best[True]["samples_per_s"] / best[False]["samples_per_s"]
        print(f"{k:5d} {best[False]['samples_per_s']:19,.0f} {best[True]['samples_per_s']:21,.0f} {ratio:5.2f}x",
              flush=True)
        rows.append({"envs": k, "lockstep": best[False], "population": best[True], "ratio": ratio})
    if args.out:
        write_json_atomic(args.out, {"device": name, "torch": torch.__version__, "argv": relative_paths(sys.argv[1:] if argv is None else argv), "rows": rows, "groups": groups, "ops": ops, "profiles": profiles,
                                     "max_epochs": args.max_epochs, "max_batches": args.max_batches})


if __name__ == "__main__":
    main()
