"""Static-host baselines on MNIST-1D: test accuracy and the last validation accuracy (mean ± std over seeds) and s/epoch.

Usage: .venv/bin/python bench/bench_baseline.py [--epochs 30] [--seeds 0 1 2] [--hosts mnist1d_impaired mnist1d_baseline]
"""
import statistics as st

import torch

from esper.cli import DistinctSeeds, OneLineParser, seed_int
from esper.tolaria.baseline import BaselineRun, run_baseline


def main():
    ap = OneLineParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2])
    ap.add_argument("--hosts", nargs="+", default=["mnist1d_impaired", "mnist1d_baseline"])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"MNIST-1D, {a.epochs} epochs, SGD lr 0.05 momentum 0.9, batch 64, seeds {a.seeds}, {a.threads} thread(s)")
    print("| host | params | test acc (%) | last validation acc (%) | s/epoch |")
    print("|---|---|---|---|---|")
    for h in a.hosts:
        rs = [run_baseline(BaselineRun("mnist1d", epochs=a.epochs, seed=s, host=h), progress=False) for s in a.seeds]
        fin = [r["final_accuracy"] for r in rs]; best = [r["final_val_accuracy"] for r in rs]
        spe = [r["seconds_per_epoch"] for r in rs]
        sd = lambda xs: st.stdev(xs) if len(xs) > 1 else 0.0
        print(f"| {h} | {rs[0]['n_params']} | {st.mean(fin):.1f} ± {sd(fin):.1f} | {st.mean(best):.1f} ± {sd(best):.1f} "
              f"| {st.mean(spe):.3f} |")


if __name__ == "__main__":
    main()
