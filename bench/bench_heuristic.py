"""Static host vs heuristic Tamiyo on MNIST-1D (impaired host): test accuracy over seeds, parameters added, s/epoch.

    .venv/bin/python bench/bench_heuristic.py --seeds 0 1 2 --max-epochs 30 --out bench/results/heuristic.json

The static host runs through the very same episode runner with a controller that always waits,
so both arms share host, optimizer, learning rate, data order and seed.
"""
import statistics
from pathlib import Path

import torch

from esper.cli import DistinctSeeds, OneLineParser, seed_int
from esper.tasks import get_task
from esper.tamiyo import GrowthProblem, HeuristicTamiyo, run_episode
from esper.tamiyo.baselines import StaticTamiyo as Static
from esper.leyline.files import write_json_atomic


def main():
    ap = OneLineParser(description=__doc__)
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2])
    ap.add_argument("--max-epochs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rows = {"static": [], "heuristic": []}
    for seed in a.seeds:
        for arm, ctl in (("static", Static()), ("heuristic", HeuristicTamiyo())):
            task = get_task("mnist1d", seed=seed)  # same data and order for both arms
            r = run_episode(task, ctl, seed=seed, problem=GrowthProblem.of_task(task, max_epochs=a.max_epochs))
            d = r.to_dict() | {"seed": seed, "timeline": [(x["epoch"], x["slot_id"], x["blueprint"], x["to"]) for x in r.lifecycle_log]}
            rows[arm].append(d)
            print(f"{arm:9s} seed {seed}: test {r.final_accuracy:5.1f}%  validation {r.final_val_accuracy:5.1f}%  "
                  f"+{r.params_added} params  germ/foss/pruned {r.seeds_germinated}/{r.seeds_fossilized}/{r.seeds_pruned}  "
                  f"{r.seconds_per_epoch:.3f} s/epoch", flush=True)
    summary = {}
    for arm, rs in rows.items():
        f = [r["final_accuracy"] for r in rs]
        summary[arm] = {"final_mean": statistics.fmean(f), "final_std": statistics.pstdev(f),
                        "params_added_mean": statistics.fmean(r["params_added"] for r in rs),
                        "s_per_epoch_mean": statistics.fmean(r["seconds_per_epoch"] for r in rs)}
        s = summary[arm]
        print(f"{arm:9s}: {s['final_mean']:.1f} ± {s['final_std']:.1f}%  +{s['params_added_mean']:.0f} params  {s['s_per_epoch_mean']:.3f} s/epoch")
    if a.out:
        out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out, {"summary": summary, "runs": rows})


if __name__ == "__main__":
    main()
