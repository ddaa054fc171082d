"""Do the blueprints' strengths differ? Each blueprint alone, and a few pairs, on variants that need different things.

Fixed plans (`a+b`: `a` planted in block 1 and `b` in block 2 at the first chance, each advanced and fossilized as
soon as its gates allow) on the registered `mnist1d` family with ordered and shuffled positions (its `shuffle_seq`
setting: one fixed permutation of the 40 positions) at parameter budgets of 2,500 and 1,600, and on the `digits`
family (scikit-learn's 8x8 digits, the impaired host's 2-D twin) at budgets of 3,000 and 1,500. 12 epochs on every
batch, cosine rates, one torch thread per worker, tuning task seeds (never the held-out 2000-2004); each family's own
train, validation and test splits, the test split scored. Prints a table of mean final test accuracy per plan and
variant (parameters in all in brackets) and writes it with every row to --out (about 20 minutes with two workers on
two busy cores). The committed `nbs/results/blueprint_strengths/strengths.json` predates the three-way splits: the
probe then built its own tasks and scored the validation split, so a run now gives other figures:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/blueprint_strengths.py --workers 2 --out nbs/results/blueprint_strengths/strengths.json

The blueprints added in `esper.kasmina.blueprints` after Leyline's five (`global_mix`, `dilated`, `widen`,
`self_attention`) are not yet in the action space, so a plan that names one plays it under the name of one of the
five that the plan does not use (its registry entry is swapped inside the worker, as `lab/probes/blueprint_probe.py` does);
the accuracy and the parameters are those of the real blueprint.
"""
import copy
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from esper.cli import OneLineParser, positive_int, DistinctSeeds, seed_int
from esper.kasmina import blueprints as B
from esper.kasmina.model import _blueprint_cost
from esper.leyline import BLUEPRINTS
from esper.leyline.files import write_json_atomic
from esper.tamiyo.baselines import ScheduleTamiyo, StaticTamiyo
from esper.tamiyo import EpisodeConfig, GrowthProblem, run_episode
from esper.tasks import Task, get_task
from esper.cli.runs import stoppable_pool, stops_in_one_line
PLANS = ("static", "conv_heavy", "conv_small", "attention", "global_mix", "dilated", "widen", "self_attention",
         "conv_heavy+conv_small", "conv_heavy+global_mix", "global_mix+conv_small", "dilated+conv_small")
#: Variant -> (task family, the family's settings, parameter budget). The digits host has 434 parameters.
VARIANTS = {
    "ordered_b2500": ("mnist1d", {}, 2500),
    "shuffled_b2500": ("mnist1d", {"shuffle_seq": True}, 2500),
    "ordered_b1600": ("mnist1d", {}, 1600),
    "digits8x8_b3000": ("digits", {}, 3000),
    "digits8x8_b1500": ("digits", {}, 1500),
}
_ORIGINAL = copy.deepcopy(B.BLUEPRINT_REGISTRY)


def variant_task(variant: str, seed: int) -> Task:
    "The registered task family of `variant` on task seed `seed`: its own train, validation and test splits."
    family, generator, _ = VARIANTS[variant]
    return get_task(family, seed=seed, settings=dict(generator))


def install(plan: str) -> tuple[str, dict[str, str]]:
    "Restore the registry and play each new blueprint of `plan` under an unused Leyline name: the rule, the aliases."
    for fam, specs in _ORIGINAL.items():
        B.BLUEPRINT_REGISTRY[fam] = dict(specs)
    names = plan.split("+")
    free = [b for b in BLUEPRINTS if b not in names]
    alias = {}
    for n in dict.fromkeys(names):
        if n not in BLUEPRINTS:
            alias[n] = free.pop()
            for fam in B.BLUEPRINT_REGISTRY:
                if n in _ORIGINAL.get(fam, {}):  # the conv layouts: the token and feature ones lack these seeds
                    B.BLUEPRINT_REGISTRY[fam][alias[n]] = dataclasses.replace(_ORIGINAL[fam][n], name=alias[n])
    _blueprint_cost.cache_clear()  # costs cached by name: a worker may have played another plan
    return "concurrent:" + "+".join(alias.get(n, n) for n in names), alias


def play(job: tuple) -> dict:
    "One episode of `plan` on `variant`; a worker's job."
    variant, plan, seed, epochs, batches = job
    torch.set_num_threads(1)
    budget = VARIANTS[variant][2]
    task = variant_task(variant, seed)
    alias = {}
    if plan == "static":
        controller = StaticTamiyo()
    else:
        rule, alias = install(plan)
        controller = ScheduleTamiyo.from_name(rule)
    problem = GrowthProblem.of_task(task, max_epochs=epochs, max_batches=batches, param_budget=budget)
    t0 = time.perf_counter()
    r = run_episode(task, controller, EpisodeConfig(lr_schedule="cosine"), seed=seed, problem=problem)
    grown = r.grown
    for name, proxy in alias.items():
        grown = grown.replace(f"{proxy}@", f"{name}@")
    return {"variant": variant, "plan": plan, "seed": seed, "accuracy": r.final_accuracy,
            "params": r.host_params + r.params_added, "grown": grown, "seconds": round(time.perf_counter() - t0, 1)}


def _winner(plans: dict, plays: dict, names: list[str]) -> tuple[str, str | None, float]:
    "The best of `names`, the best that played otherwise (a pair whose second seed did not fit plays as one), the lead."
    ranked = sorted(names, key=lambda p: -plans[p]["accuracy"])
    runner = next((p for p in ranked[1:] if plays[p] != plays[ranked[0]]), None)
    lead = 0.0 if runner is None else plans[ranked[0]]["accuracy"] - plans[runner]["accuracy"]
    return ranked[0], runner, round(lead, 2)


def summarise(rows: list[dict]) -> dict:
    "Per variant: each plan's mean accuracy and parameters; the best plan and the best single blueprint, with leads."
    out = {}
    for v in dict.fromkeys(r["variant"] for r in rows):
        plans, plays = {}, {}
        for p in dict.fromkeys(r["plan"] for r in rows if r["variant"] == v):
            mine = sorted((r for r in rows if r["variant"] == v and r["plan"] == p), key=lambda r: r["seed"])
            plans[p] = {"accuracy": round(statistics.fmean(r["accuracy"] for r in mine), 2),
                        "params": max(r["params"] for r in mine)}
            plays[p] = [(r["seed"], r["accuracy"], r["params"]) for r in mine]
        best, runner, lead = _winner(plans, plays, list(plans))
        singles = [p for p in plans if p != "static" and "+" not in p]
        single, single_runner, single_lead = _winner(plans, plays, singles) if singles else (None, None, 0.0)
        out[v] = {"plans": plans, "best": best, "runner_up": runner, "lead": lead, "best_single": single,
                  "single_runner_up": single_runner, "single_lead": single_lead}
    return out


def table(summary: dict) -> str:
    "A markdown table: one row per plan, one column per variant (accuracy %, parameters in all); the best in bold."
    variants = list(summary)
    plans = list(dict.fromkeys(p for v in variants for p in summary[v]["plans"]))
    lines = ["| plan | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for p in plans:
        cells = []
        for v in variants:
            c = summary[v]["plans"].get(p)
            text = "" if c is None else f"{c['accuracy']:.1f} ({c['params']:,})"
            cells.append(f"**{text}**" if c is not None and summary[v]["best"] == p else text)
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="blueprint_strengths.py")
    ap.add_argument("--out", required=True, help="JSON file for the rows, the summary and the table")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    ap.add_argument("--workers", type=positive_int, default=2, help="worker processes (default: 2)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001], help="task seeds (default: 1000 1001)")
    ap.add_argument("--epochs", type=positive_int, default=12, help="epochs per episode, every batch (default: 12)")
    ap.add_argument("--batches", type=positive_int, default=None, help="batches per epoch (default: every batch)")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), help="variants to play")
    ap.add_argument("--plans", nargs="+", choices=list(PLANS), default=list(PLANS), help="plans to play")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists() and not a.overwrite:
        ap.error(f"--out {out} exists: pass --overwrite to replace it")
    jobs = [(v, p, s, a.epochs, a.batches) for v in a.variants for p in a.plans for s in a.seeds]
    t0, rows = time.perf_counter(), []
    with stops_in_one_line("blueprint_strengths.py"), stoppable_pool(a.workers) as pool:
        try:
            for row in pool.map(play, jobs):
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        except (ValueError, RuntimeError, TypeError, OSError) as e:  # a worker's fault: one line, nothing written
            ap.exit(1, f"blueprint_strengths.py: error: an episode failed ({type(e).__name__}: {e}); nothing written\n")
    summary = summarise(rows)
    text = table(summary)
    print(text)
    for v, s in summary.items():
        print(f"{v}: best plan {s['best']}, {s['lead']:.1f} points ahead of {s['runner_up']}; best single blueprint "
              f"{s['best_single']}, {s['single_lead']:.1f} ahead of {s['single_runner_up']}")
    command = " ".join(["lab/probes/blueprint_strengths.py", *(sys.argv[1:] if argv is None else argv)])
    write_json_atomic(out, {"command": command, "epochs": a.epochs, "batches": a.batches, "seeds": a.seeds,
                            "variants": {v: VARIANTS[v] for v in a.variants}, "rows": rows, "summary": summary,
                            "table": text, "seconds": round(time.perf_counter() - t0, 1)})


if __name__ == "__main__":
    main()
