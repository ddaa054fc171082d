"""The growth literature's levers on planted blocks: what each saves of its from-scratch twin's compute.

`bench/bench_growth_lm.py` grows the `gpt_tiny` host on Shakespeare and judges every rival by the compute it spends
to reach the final validation bits of its own final topology trained from scratch (its twin). This probe holds the
plan fixed, a transformer block planted in each slot of `--slot` after `--epoch` epochs (one slot by default;
`--slot embed block1` grows the one-block host into three blocks), and changes only how the blocks start and learn:

- `zero-init`: the `transformer_block` seed, output projections at zero (function-preserving at planting);
- `zero-init, Nx seed lr`: the same seed with `--seed-lr-factor` times the host's AdamW learning rate;
- `G_stack copy`: the opt-in `stacked_block` seed, a copy of the trained block before its slot (G_stack); only where
  every slot of `--slot` has a block before it.

All of them end with the same topology, so they share one twin per problem: the host with a `transformer_block` in
each of those slots, trained from its first step with the whole budget (`bench_growth_lm.twin_job`). The static host
is run beside them for reference. Episodes, twins and savings are the benchmark's own (`episode_job`, `twin_job`,
`saving`); every figure is on held-out problems (seeds >= 1000, each its own split of works).

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/gpt_levers.py --out nbs/results/growth_lm/levers/levers.json

The corpus must be in the data folder (`esper.tasks.fetch_shakespeare()`, or bench_growth_lm.py --download).
"""
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmark's own code
import bench_growth_lm as bench

from esper.cli import (DistinctSeeds, OneLineParser, add_overwrite_argument, earlier_results,
                       positive_int, seed_int)
from esper.cli.runs import cpu_model, git_state, stops_in_one_line
from esper.leyline.files import (OutputError, check_output_file, relative_paths, write_json_atomic,
                                 write_text_atomic)
from esper.leyline.stats import mean_ci95
from esper.tamiyo.twins import final_topology
from esper.tasks import TaskDataError, get_task


def levers(factor: float, copy: bool = True) -> dict[str, tuple[str, float]]:
    "Each lever: (the blueprint planted, its seed learning rate as a multiple of the host's); `copy`: with G_stack's."
    out = {"zero-init": ("transformer_block", 1.0), f"zero-init, {factor:g}x seed lr": ("transformer_block", factor)}
    return out | ({"G_stack copy": ("stacked_block", 1.0)} if copy else {})


def jobs(a: dict[str, Any], seeds: list[int], slots: list[str], epoch: int, factor: float, copy: bool) -> list[tuple]:
    "The static host, each lever's episode (a block in every slot of `slots`) and the shared twin, on every problem."
    out = []
    twin = " + ".join(f"transformer_block@{s}" for s in slots)
    for s in seeds:
        out.append((bench.episode_job, ("static", s, a)))
        for lever, (bp, f) in levers(factor, copy).items():
            out.append((lever_job, (lever, s, a, "plan:" + "+".join(f"{bp}@{slot}/{epoch}" for slot in slots), f)))
        out.append((bench.twin_job, (twin, s, a)))
    return out


def lever_job(lever: str, seed: int, a: dict[str, Any], plan: str, factor: float) -> dict[str, Any]:
    "One lever's episode on one problem (the benchmark's `episode_job` at the lever's seed learning rate)."
    r = bench.episode_job(plan, seed, a | {"seed_lr": factor * a["lr"]})
    return r | {"rival": lever, "plan": plan, "seed_lr": factor * a["lr"]}


def summarise(rows: list[dict], seeds: list[int], factor: float, copy: bool = True) -> dict[str, Any]:
    "Per lever: per problem its saving against the shared twin, test and final validation bits; means with 95% CIs."
    eps = {(r["rival"], r["seed"]): r for r in rows if r["kind"] == "episode"}
    twins = {r["seed"]: r for r in rows if r["kind"] == "twin"}
    out = {}
    for lever in ["static", *levers(factor, copy)]:
        per_seed = []
        for s in seeds:
            e, t = eps[(lever, s)], twins[s]
            sv = {"saving": None} if lever == "static" or not e["grown"] else bench.saving(e, t)  # "": nothing planted
            per_seed.append({"seed": s, "grown": e["grown"], "test_bits": e["test_bits"], "val_bits": e["curve"][-1][1],
                             "twin_test_bits": t["test_bits"], "twin_val_bits": t["curve"][-1][1], **sv})
        reached = [p["saving"] for p in per_seed if p["saving"] is not None]
        out[lever] = {"test_bits": mean_ci95([p["test_bits"] for p in per_seed]),
                      "val_bits": mean_ci95([p["val_bits"] for p in per_seed]),
                      "reached": f"{len(reached)}/{len(per_seed)}" if lever != "static" else "n/a",
                      "saving": mean_ci95(reached) if reached and len(reached) == len(per_seed) else None,
                      "per_seed": per_seed}
    return out


def table(summary: dict[str, Any], seeds: list[int], plan: str) -> str:
    "One row per lever: the saving on each problem, then test and validation bits (mean ± 95% CI)."
    pct = lambda v: "never" if v is None else f"{100 * v:+.0f}%"  # noqa: E731
    head = (f"Blocks planted by `{plan}` on `gpt_tiny`; saving = compute less than the shared from-scratch twin "
            "needs to reach the twin's final validation bits (never: the lever's run did not reach them). Bits per "
            "character, mean ± 95% CI over the held-out problems.\n\n"
            f"| lever | saving ({', '.join(f'seed {s}' for s in seeds)}) | mean saving | test bits | "
            "final validation bits |\n|---|---|---|---|---|\n")
    lines = []
    for lever, s in summary.items():
        per = "n/a" if lever == "static" else ", ".join(pct(p["saving"]) for p in s["per_seed"])
        mean = "n/a" if s["saving"] is None else f"{100 * s['saving'][0]:+.0f}% ± {100 * s['saving'][1]:.0f}"
        lines.append(f"| {lever} | {per} | {mean} | {s['test_bits'][0]:.3f} ± {s['test_bits'][1]:.3f} | "
                     f"{s['val_bits'][0]:.3f} ± {s['val_bits'][1]:.3f} |")
    twin = mean_ci95([p["twin_test_bits"] for p in summary["static"]["per_seed"]])
    return head + "\n".join(lines) + f"\n\nThe twin's test bits: {twin[0]:.3f} ± {twin[1]:.3f}."


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="gpt_levers.py", description=__doc__.splitlines()[0])
    a = ap.add_argument
    a("--eval-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001, 1002],
      help="held-out problems: seeds >= 1000 (default: 1000 1001 1002)")
    a("--budget", type=positive_int, default=40, help="training compute, in epochs of the bare host (default: 40)")
    a("--epoch", type=positive_int, default=13, help="the block is planted at the decision after this epoch (13)")
    a("--slot", nargs="+", default=["block1"], help="the slots a block is planted in, one each (default: block1, "
      "after the host's block; `embed block1`: three blocks in all)")
    a("--seed-lr-factor", type=float, default=3.0, help="the seed learning rate of the second lever (default: 3)")
    a("--context", type=positive_int, default=64, help="characters an input reads (default: 64)")
    a("--train-chars", type=positive_int, default=131072, help="training characters an epoch reads (default: 131072)")
    a("--eval-chars", type=positive_int, default=32768, help="validation and test characters scored (default: 32768)")
    a("--lr", type=float, default=3e-3, help="AdamW learning rate of host, twin and seeds (default: 0.003)")
    a("--host", default="gpt_tiny", help="the host preset to grow (default: gpt_tiny)")
    a("--workers", type=positive_int, default=1, help="worker processes, one torch thread each (default: 1)")
    a("--data-dir", default=None, help="the data folder (default: $ESPER_DATA_DIR or ~/.cache/esper)")
    a("--out", required=True, help="the results file (JSON); a table (.md) goes beside it")
    add_overwrite_argument(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if bad := [s for s in args.eval_seeds if s < 1000]:
        ap.error(f"--eval-seeds must be held-out seeds, >= 1000 (got {bad[0]})")
    if not 0 < args.lr < 1 or not 0 < args.seed_lr_factor * args.lr < 1:
        ap.error(f"--lr and --lr x --seed-lr-factor must be in (0, 1) (got {args.lr} and {args.seed_lr_factor})")
    if args.epoch >= args.budget:
        ap.error(f"--epoch must be below --budget, {args.budget} (got {args.epoch})")
    out = Path(args.out)
    if (earlier_results(out) or out.with_suffix(".md").exists()) and not args.overwrite:
        ap.error(f"--out {out} holds an earlier run's results; pass --overwrite to replace them")
    try:
        check_output_file(out, "--out")
    except OutputError as e:
        ap.error(str(e))
    a = {"context": args.context, "train_chars": args.train_chars, "eval_chars": args.eval_chars,
         "data_dir": args.data_dir, "host": args.host, "budget": args.budget, "lr": args.lr, "seed_lr": args.lr,
         "menu": (*bench.BLUEPRINTS, "stacked_block")}
    try:  # the corpus, the settings and the slot are checked before any training
        for s in args.eval_seeds:
            task = get_task("shakespeare", seed=s, data_dir=args.data_dir, host=args.host,
                            settings={k: a[k] for k in ("context", "train_chars", "eval_chars")})
        slots = final_topology(task, "", 0).model.slot_ids
    except (TaskDataError, ValueError) as e:
        ap.error(str(e))
    if bad := [s for s in args.slot if s not in slots]:
        ap.error(f"--slot: no slot {bad[0]!r} in {args.host} (its slots: {', '.join(slots)})")
    if len(set(args.slot)) != len(args.slot):
        ap.error(f"--slot: each slot once (got {' '.join(args.slot)})")
    chosen = sorted(args.slot, key=slots.index)
    copy = slots[0] not in chosen  # G_stack copies the block before a slot: the first slot has none
    t0 = time.perf_counter()
    with stops_in_one_line("gpt_levers.py"):
        rows = bench.run_all(jobs(a, args.eval_seeds, chosen, args.epoch, args.seed_lr_factor, copy), args.workers)
    summary = summarise(rows, args.eval_seeds, args.seed_lr_factor, copy)
    text = table(summary, args.eval_seeds, "+".join(f"{s}/{args.epoch}" for s in chosen))
    if not copy:
        text += f"\n\nNo G_stack copy: slot {slots[0]} has no block before it."
    result = {
        "command": "python lab/probes/gpt_levers.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {"cpu": cpu_model() or platform.machine(), "workers": args.workers, "torch": torch.__version__},
        **git_state(Path(__file__).resolve().parents[2]),
        "settings": a | {"eval_seeds": args.eval_seeds, "slot": chosen if len(chosen) > 1 else chosen[0],
                         "epoch": args.epoch, "seed_lr_factor": args.seed_lr_factor, "data_dir": None},
        "seconds": round(time.perf_counter() - t0), "summary": summary, "runs": rows,
    }
    write_json_atomic(out, relative_paths(result))
    write_text_atomic(out.with_suffix(".md"), text + "\n")
    print(text)
    print(f"{result['seconds']} s; written: {out}, {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
