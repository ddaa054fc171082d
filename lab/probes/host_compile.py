"""Does `torch.compile` of the host's training step pay on a CPU? Episodes played eagerly and compiled, side by side.

The trainer's time is mostly the network's own forward and backward calls (`bench_episode.py`), and on these small
hosts each call costs far more than its arithmetic. `torch.compile` turns a forward pass, its loss and (through
AOTAutograd) its backward pass into generated C++ kernels, so it is the obvious thing to try. This script measures,
on one core:

- **the bare step**: forward, loss and backward of the plain host, eager against compiled, CPU seconds per step
  (medians of `--repeats` alternated runs of `--max-batches` steps), and how far the weights drift apart after one
  epoch from the same start (compiled kernels round differently);
- **whole episodes**, for each plan (`--plans`, written as in the plan search): `run_episode` as plan searches play
  it, with every training step's forward pass and loss compiled (validation stays eager) against the same episode
  eager: the first compiled episode of the plan (it pays the compiling), then steady episodes (medians of
  `--repeats`, alternated with eager ones), the graphs compiled along the way and the two episodes' test accuracies.

A growing network changes shape whenever a seed is planted or moves stage, and each new shape is compiled anew; a
process that plays many plans meets many shapes. The script plays the plans in one process in the order given, so
later plans reuse what earlier ones compiled (as a plan-search worker would), and prints per plan the graphs it
added. It compiles into a fresh cache of its own (a temporary folder, removed at the end; `TORCHINDUCTOR_CACHE_DIR`
chooses another), so the compile times are cold ones and no kernel compiled under other settings is reused: a shared
cache filled under `ATEN_CPU_CAPABILITY=avx2` (as the tests set it) crashed a later run without it in Inductor's
generated code. It needs a C++ compiler (Inductor generates C++ on a CPU); without one it says so in one line. From
the project root:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/host_compile.py --plans static conv_heavy@block1/1 \\
        conv_small@block1/1+global_mix@block2/2 --repeats 3 --out nbs/results/bench_episode/host_compile.json
"""
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from unittest import mock

import torch
from episode_overhead import check_plan_args, plan_parser  # lab/probes/ is on sys.path: this script's own folder
from torch import nn

from esper.leyline.files import json_text, relative_paths, write_text_atomic
from esper.tamiyo import episode as episode_module
from esper.tamiyo import Episode, EpisodeConfig, GrowthProblem, run_episode
from esper.tamiyo.plans import Plan, PlanTamiyo
from esper.tamiyo.suites import MENU  # the suites' blueprint menu: the plans' blueprints
from esper.tasks import get_task
from esper.tolaria import make_sgd
from esper.tolaria.trainer import clear_grads, step_optimizers


def forward_loss(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor, criterion) -> tuple[torch.Tensor, torch.Tensor]:
    "A training step's forward pass and loss: what is compiled."
    out = model(xb)
    return out, criterion(out, yb)


def compiled_train_step(compiled):
    "`train_step` with its forward pass and loss in `compiled` (a compiled `forward_loss`); everything else as it is."

    def train_step(model, xb, yb, optimizers, device="cpu", criterion=None, on_backward=None, batch_idx=0):
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        clear_grads(optimizers)
        out, loss = compiled(model, xb, yb, criterion or nn.functional.cross_entropy)
        loss.backward()
        if on_backward is not None:
            on_backward(batch_idx)
        step_optimizers(optimizers)
        return loss.detach() * len(yb), (out.detach().argmax(1) == yb).sum()

    return train_step


def graphs() -> int:
    "Graphs Dynamo has compiled in this process so far."
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def bare_steps(
    task, cfg: EpisodeConfig, problem: GrowthProblem, batches: list, step, epochs: int = 1, seed: int = 0
) -> tuple[float, nn.Module]:
    """CPU seconds of `epochs` passes over `batches` of forward, loss and backward of the plain host (`step`), SGD
    between, from the episode's initial weights; the model."""
    ep = Episode(task, cfg, actions=MENU, problem=problem)
    ep.start(seed)
    model = ep.model
    opt = make_sgd(model.parameters(), cfg.host_lr, cfg.momentum)
    model.train()
    t0 = time.process_time()
    for _ in range(epochs):
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            step(model, xb, yb, nn.functional.cross_entropy)[1].backward()
            opt.step()
    return time.process_time() - t0, model


def measure_bare(task, cfg: EpisodeConfig, problem: GrowthProblem, compiled, repeats: int) -> dict:
    "The plain host's bare step, eager against compiled: compile seconds, CPU seconds per step, weights' drift."
    n = problem.max_batches  # the episodes' batches per epoch
    batches = [b for i, b in enumerate(task.train_loader) if i < n]  # one epoch's, in one order
    t0 = time.perf_counter()
    _, m_compiled = bare_steps(task, cfg, problem, batches, compiled)  # compiles
    first = time.perf_counter() - t0
    _, m_eager = bare_steps(task, cfg, problem, batches, forward_loss)
    drift = max((a - b).abs().max().item() for a, b in zip(m_eager.parameters(), m_compiled.parameters()))
    times = {"eager": [], "compiled": []}
    for _ in range(repeats):
        for k, f in (("eager", forward_loss), ("compiled", compiled)):
            times[k].append(bare_steps(task, cfg, problem, batches, f, epochs=3)[0] / (3 * n))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"first_epoch_wall_seconds": first, "cpu_seconds_per_step": times, "median": med,
            "eager_over_compiled": med["eager"] / med["compiled"], "max_weight_difference_after_one_epoch": drift}


def measure_episodes(
    cfg: EpisodeConfig, problem: GrowthProblem, compiled, plans: list[str], repeats: int, seed: int = 0
) -> dict:
    "Per plan: its first compiled episode, steady eager and compiled episodes (CPU seconds), graphs, accuracies."
    patched = mock.patch.object(episode_module, "train_step", compiled_train_step(compiled))
    out = {}
    for text in plans:
        plan = Plan.parse(text)

        def play(compile: bool, plan=plan):  # CPU and wall seconds, result; a fresh task: the same batches each time
            task = get_task("mnist1d")
            with patched if compile else contextlib.nullcontext():
                t0, w0 = time.process_time(), time.perf_counter()
                res = run_episode(task, PlanTamiyo(plan), cfg, seed=seed, actions=MENU, problem=problem)
                return time.process_time() - t0, time.perf_counter() - w0, res

        g0 = graphs()
        first_cpu, first_wall, first = play(True)  # Inductor may compile in worker processes: the wall time counts
        added = graphs() - g0
        *_, eager_res = play(False)  # a warm-up, and the eager result
        times = {"eager": [], "compiled": []}
        for _ in range(repeats):
            for k, v in times.items():
                v.append(play(k == "compiled")[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        out[text] = {"grown": eager_res.grown, "graphs_added": added, "first_compiled_cpu_seconds": first_cpu,
                     "first_compiled_wall_seconds": first_wall,
                     "cpu_seconds": times, "median": med, "eager_over_compiled": med["eager"] / med["compiled"],
                     "test_accuracy": {"eager": eager_res.final_accuracy, "compiled": first.final_accuracy}}
    return out


def report(bare: dict, episodes: dict) -> str:
    "The two tables."
    m = bare["median"]
    lines = [("| bare step of the plain host | eager us | compiled us | eager / compiled | first epoch, s (wall) | "
              "weights apart after one epoch |"), "|---|---|---|---|---|---|",
             (f"| forward, loss, backward | {m['eager'] * 1e6:.0f} | {m['compiled'] * 1e6:.0f} | "
              f"{bare['eager_over_compiled']:.2f}x | {bare['first_epoch_wall_seconds']:.1f} | "
              f"{bare['max_weight_difference_after_one_epoch']:.1e} |"), "",
             ("| plan | graphs added | first compiled episode s (wall) | eager s | compiled s | eager / compiled | "
              "test accuracy eager | compiled |"), "|---|---|---|---|---|---|---|---|"]
    for plan, r in episodes.items():
        m, acc = r["median"], r["test_accuracy"]
        lines.append(f"| {plan} | {r['graphs_added']} | {r['first_compiled_wall_seconds']:.2f} | {m['eager']:.3f} | "
                     f"{m['compiled']:.3f} | {r['eager_over_compiled']:.2f}x | {acc['eager']:.2f} | "
                     f"{acc['compiled']:.2f} |")
    return "\n".join(lines)


def measure_and_report(ap, args, argv, cache: str) -> None:
    "Both measurements, the tables, and --out; `cache` says which Inductor cache was used."
    torch.set_num_threads(1)
    task = get_task("mnist1d")
    cfg = EpisodeConfig()
    problem = GrowthProblem("mnist1d", max_epochs=args.max_epochs, max_batches=args.max_batches, blueprints=MENU)
    compiled = torch.compile(forward_loss)
    try:
        bare = measure_bare(task, cfg, problem, compiled, args.repeats)
        episodes = measure_episodes(cfg, problem, compiled, args.plans, args.repeats)
    except ValueError as e:  # a plan the host cannot play (a slot it does not have)
        ap.error(f"--plans: {e}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); mnist1d episodes of {args.max_epochs} "
          f"epochs x {args.max_batches} batches; medians of {args.repeats} alternated repeats, CPU seconds")
    print(report(bare, episodes))
    if args.out is not None:
        meta = {"command": sys.argv if argv is None else argv, "machine": platform.processor() or platform.machine(),
                "torch": torch.__version__, "inductor_cache": cache,
                "recompile_limit": torch._dynamo.config.recompile_limit}
        write_text_atomic(args.out, json_text(relative_paths(meta) | {"bare": bare, "episodes": episodes}))
        print(f"wrote {args.out}")


def main(argv=None):
    ap = plan_parser(__doc__.split("\n")[0], repeats=3)
    args = ap.parse_args(argv)
    check_plan_args(ap, args)
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        ap.error("torch.compile needs a C++ compiler on a CPU (c++, g++ or clang++), and none is on PATH")
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return measure_and_report(ap, args, argv, os.environ["TORCHINDUCTOR_CACHE_DIR"])
    with tempfile.TemporaryDirectory(prefix="host_compile_inductor_") as fresh:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = fresh  # read when Inductor first compiles
        return measure_and_report(ap, args, argv, "fresh")

if __name__ == "__main__":
    main()
