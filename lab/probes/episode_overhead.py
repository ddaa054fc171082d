"""What an episode's machinery costs beside the network it trains: each plan's episode against bare SGD of the same
grown network.

`bench_episode.py` compares the PPO trainer with bare SGD of the *plain* host, so its ratio mixes two costs: the
seeds' own layers, which any grown network pays, and the episode's machinery (validation and counterfactuals,
gradient statistics, lifecycle, signals, operation counting, the rest). This script separates them. For each plan
(`--plans`, written as in the plan search: `conv_heavy@block1/1`, `static`, ...; blueprints of the suites' menu) it
times, alternated `--repeats` times on one core:

- the episode: `run_episode` with the plan's controller, what plan searches and benchmarks run;
- bare SGD of the grown network: the same model (`Episode.start`), each seed present from the first epoch the
  episode trained it, entering with its full output and gradient (alpha 1, no isolation), the same batches, one
  SGD optimizer, nothing else;
- bare SGD of the plain host (the seeds left out): `bench_episode.py`'s reference.

It prints per plan the median seconds of each and the ratios: episode / grown (the machinery), grown / plain (the
seeds' layers). With --out it also writes the figures as JSON (an existing file only with --overwrite). From the
project root:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/episode_overhead.py --plans static conv_heavy@block1/1 \\
        conv_small@block1/1+global_mix@block2/2 --repeats 5
"""
import argparse
import contextlib
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from esper.cli import OneLineParser, positive_int
from esper.leyline.files import json_text, relative_paths, write_text_atomic
from esper.leyline.lifecycle import TRAINABLE_SEED_STAGES
from esper.tamiyo import Episode, EpisodeConfig, GrowthProblem, run_episode
from esper.tamiyo.plans import Plan, PlanTamiyo
from esper.tamiyo.suites import MENU  # the suites' blueprint menu: the plans' blueprints
from esper.tasks import get_task
from esper.tolaria import make_sgd


def planted_epochs(history: list[dict]) -> dict[str, int]:
    "Per slot, the first epoch whose training the slot's seed took part in (from an episode's history)."
    out: dict[str, int] = {}
    for rec in history:  # a record's stages are those after its epoch's decision: live for the next epoch
        for slot, stage in rec["stages"].items():
            if slot not in out and stage in {s.name for s in TRAINABLE_SEED_STAGES}:
                out[slot] = rec["epoch"] + 1
    return out


def bare_sgd(
    task, cfg: EpisodeConfig, problem: GrowthProblem, plan: Plan, planted: dict[str, int], seed: int, grown: bool = True
) -> tuple[float, int]:
    """CPU seconds of plain SGD on the episode's model, each planned seed from its epoch on (none with grown=False),
    and the parameters it ended with."""
    ep = Episode(task, cfg, actions=MENU, problem=problem)
    ep.start(seed)  # the episode's model and initial weights, not trained
    model, lr = ep.model, cfg.host_lr
    bps = {g.slot: g.blueprint for g in plan.germinations}
    opt = make_sgd(model.parameters(), lr, cfg.momentum)
    model.train()
    with contextlib.ExitStack() as stack:
        t0 = time.process_time()
        for epoch in range(1, ep.problem.max_epochs + 1):
            for slot, at in planted.items():
                if grown and at == epoch:  # plant it, past the incubator, entering with its full output
                    model.germinate(slot, bps[slot])
                    model.advance(slot)
                    if model.slot(slot).stage not in TRAINABLE_SEED_STAGES:  # else the seed would sit unused
                        raise RuntimeError(f"the seed in {slot} did not leave GERMINATED")
                    stack.enter_context(model.slot(slot).force_alpha(1.0))
                    opt.add_param_group({"params": list(model.slot(slot).seed.parameters())})
            for i, (xb, yb) in enumerate(task.train_loader):
                if ep.problem.max_batches is not None and i >= ep.problem.max_batches:
                    break
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        return time.process_time() - t0, sum(p.numel() for p in model.parameters())


def epoch_samples(task, max_batches: int | None) -> int:
    "Training samples in one epoch of at most `max_batches` batches."
    return sum(len(yb) for i, (_, yb) in enumerate(task.train_loader) if max_batches is None or i < max_batches)


def measure(plans: list[str], repeats: int, max_epochs: int, max_batches: int, seed: int = 0) -> dict:
    "Per plan: CPU seconds of the episode, of bare SGD of the grown network and of the plain host, and the ratios."
    task = get_task("mnist1d")
    cfg = EpisodeConfig()
    problem = GrowthProblem.of_task(task, max_epochs=max_epochs, max_batches=max_batches, blueprints=MENU)
    samples = max_epochs * epoch_samples(task, max_batches)
    out = {}
    for text in plans:
        plan = Plan.parse(text)
        # a warm-up, and the epochs the seeds came in
        res = run_episode(task, PlanTamiyo(plan), cfg, seed=seed, actions=MENU, problem=problem)
        planted = planted_epochs(res.history)
        times, params = {"episode": [], "grown": [], "plain": []}, {}
        for _ in range(repeats):
            t0 = time.process_time()
            run_episode(task, PlanTamiyo(plan), cfg, seed=seed, actions=MENU, problem=problem)
            times["episode"].append(time.process_time() - t0)
            for k in ("grown", "plain"):
                sec, params[k] = bare_sgd(task, cfg, problem, plan, planted, seed, grown=k == "grown")
                times[k].append(sec)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[text] = {"grown": res.grown, "planted_epochs": planted, "params": params, "cpu_seconds": times,
                     "median": med,
                     "episode_samples_per_cpu_s": samples / med["episode"],
                     "episode_over_grown": med["episode"] / med["grown"],
                     "grown_over_plain": med["grown"] / med["plain"],
                     "episode_over_plain": med["episode"] / med["plain"]}
    return out


def report(results: dict) -> str:
    "The table: per plan, medians in CPU seconds and host-training samples per CPU-second, and the ratios."
    head = ("| plan | grown | episode s | grown bare s | plain bare s | episode / grown | grown / plain | "
            "episode samples/s |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for plan, r in results.items():
        m = r["median"]
        lines.append(f"| {plan} | {r['grown'] or '-'} | {m['episode']:.3f} | {m['grown']:.3f} | {m['plain']:.3f} | "
                     f"{r['episode_over_grown']:.2f}x | {r['grown_over_plain']:.2f}x | "
                     f"{r['episode_samples_per_cpu_s']:,.0f} |")
    return "\n".join(lines)


def plan_parser(description: str, repeats: int) -> OneLineParser:
    "The arguments of a script that times plans' episodes: --plans, --repeats, --max-epochs, --max-batches, --out."
    ap = OneLineParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plans", nargs="+", default=["static", "conv_heavy@block1/1",
                                                   "conv_small@block1/1+global_mix@block2/2"])
    ap.add_argument("--repeats", type=positive_int, default=repeats)
    ap.add_argument("--max-epochs", type=positive_int, default=10)
    ap.add_argument("--max-batches", type=positive_int, default=30)
    ap.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    return ap


def check_plan_args(ap: OneLineParser, args: argparse.Namespace) -> None:
    "One line and exit status 2 for a plan off the suites' menu, an existing --out without --overwrite, no folder."
    for text in args.plans:
        try:
            off = [b for b in Plan.parse(text).blueprints if b not in MENU]
        except ValueError as e:
            ap.error(f"--plans: {e}")
        if off:
            ap.error(f"--plans: {text}: {', '.join(off)} is not on the suites' menu ({', '.join(MENU)})")
    if args.out is not None and args.out.exists() and not args.overwrite:
        ap.error(f"--out: {args.out} already exists; pass --overwrite to replace it")
    if args.out is not None and not args.out.parent.is_dir():
        ap.error(f"--out: no folder {args.out.parent}")


def main(argv=None):
    ap = plan_parser(__doc__.split("\n")[0], repeats=5)
    args = ap.parse_args(argv)
    check_plan_args(ap, args)
    try:
        results = measure(args.plans, args.repeats, args.max_epochs, args.max_batches)
    except ValueError as e:  # a plan the host cannot play (a slot it does not have)
        ap.error(f"--plans: {e}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); mnist1d episodes of {args.max_epochs} "
          f"epochs x {args.max_batches} batches; medians of {args.repeats} alternated repeats, CPU seconds")
    print(report(results))
    if args.out is not None:
        meta = {"command": sys.argv if argv is None else argv, "machine": platform.processor() or platform.machine(),
                "torch": torch.__version__}
        write_text_atomic(args.out, json_text(relative_paths(meta) | {"results": results}))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
