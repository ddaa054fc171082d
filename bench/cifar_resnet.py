"""A ResNet grown on CIFAR-10: the impaired CIFAR ResNet-8 (1x1 residual blocks), left static and grown by the
heuristic within the healthy ResNet-8's parameter count, against the healthy ResNet-8; test accuracy over seeds.

    .venv/bin/python bench/cifar_resnet.py --seeds 0 1 2 --epochs 30 --device auto --out nbs/results/cifar_resnet/results.json

Every arm trains through the same episode runner (SGD, the same data order and seed, a cosine learning rate), so
they differ only in the host and in whether a controller grows it. CIFAR-10's files must be in the data folder
(`ESPER_DATA_DIR`, by default ~/.cache/esper; `esper.get_task("cifar10", download=True)` fetches them once where
there is internet). At full size this is a GPU job (about 30 epochs x 50,000 images per arm and seed); on a CPU,
`--train-rows 5000 --test-rows 2000 --epochs 10` takes minutes per episode.
"""
import time

import torch

from esper.cli import DistinctSeeds, OneLineParser, add_overwrite_argument, earlier_results, positive_int, seed_int
from esper.leyline.files import OutputError, check_output_file, relative_paths, write_json_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo import EpisodeConfig, GrowthProblem, HeuristicTamiyo, StaticTamiyo, run_episode
from esper.tasks import TaskDataError, build_host, count_parameters, get_task

IMPAIRED, HEALTHY = "cifar_resnet_impaired", "cifar_resnet"


def arms(budget: int) -> dict[str, tuple[str, object, int | None]]:
    "Arm name -> (host preset, controller factory, parameter budget)."
    return {
        "static impaired ResNet-8": (IMPAIRED, StaticTamiyo, None),
        "impaired ResNet-8 grown by the heuristic": (IMPAIRED, HeuristicTamiyo, budget),
        "healthy ResNet-8": (HEALTHY, StaticTamiyo, None),
    }


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="cifar_resnet.py", description=__doc__.splitlines()[0])
    a = ap.add_argument
    a("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2], help="seeds (default: 0 1 2)")
    a("--epochs", type=positive_int, default=30, help="epochs per episode (default: 30)")
    a("--train-rows", type=int, default=0, help="CIFAR-10 training images used, validation carved from them (0: all)")
    a("--test-rows", type=int, default=0, help="test images scored (0: all 10,000)")
    a("--batch-size", type=positive_int, default=128, help="training batch size (default: 128)")
    a("--max-batches", type=positive_int, default=None, help="cap batches per epoch (quick runs)")
    a("--device", default="auto", help="where the episodes train: auto (CUDA when present), cpu or cuda")
    a("--data-dir", default=None, help="the data folder (default: $ESPER_DATA_DIR or ~/.cache/esper)")
    a("--out", required=True, help="the results file (JSON)")
    add_overwrite_argument(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if earlier_results(a.out) and not a.overwrite:
        ap.error(f"--out {a.out} holds an earlier run's results; pass --overwrite to replace them")
    try:
        check_output_file(a.out, "--out")
    except OutputError as e:
        ap.error(str(e))
    settings = {"train_rows": a.train_rows, "test_rows": a.test_rows}
    try:  # the data is checked before the first episode, not after hours of them
        probe = get_task("cifar10", seed=a.seeds[0], settings=settings, data_dir=a.data_dir, batch_size=a.batch_size)
    except (TaskDataError, ValueError) as e:
        ap.error(str(e))
    budget = count_parameters(build_host(HEALTHY, 3, 10, probe.input_shape[1:]))
    rows: dict[str, list[dict]] = {name: [] for name in arms(budget)}
    t0 = time.perf_counter()
    for seed in a.seeds:
        for name, (host, controller, limit) in arms(budget).items():
            task = get_task("cifar10", seed=seed, settings=settings, data_dir=a.data_dir, batch_size=a.batch_size,
                            host=host)  # each arm its own task: the same data and order for all
            problem = GrowthProblem.of_task(task, max_epochs=a.epochs, max_batches=a.max_batches, param_budget=limit)
            cfg = EpisodeConfig(lr_schedule="cosine", host_lr=0.05)
            r = run_episode(task, controller(), cfg, seed=seed, device=a.device, problem=problem)
            rows[name].append({"seed": seed, "test_accuracy": r.final_accuracy, "params": r.host_params + r.params_added,
                               "grown": r.grown, "seconds": round(r.seconds, 1)})
            print(f"{name}, seed {seed}: {r.final_accuracy:.1f}% test accuracy, "
                  f"{r.host_params + r.params_added:,} parameters, grown: {r.grown or 'nothing'}", flush=True)
    summary = {}
    for name, rs in rows.items():
        mean, ci = mean_ci95([r["test_accuracy"] for r in rs])
        summary[name] = {"test_accuracy": round(mean, 2), "ci95": round(ci, 2),
                         "params": round(sum(r["params"] for r in rs) / len(rs))}
    result = {"command": "python bench/cifar_resnet.py " + " ".join(argv if argv is not None else []),
              "device": str(a.device), "torch": torch.__version__, "budget": budget, "seconds": round(time.perf_counter() - t0, 1),
              "summary": summary, "episodes": rows}
    write_json_atomic(a.out, relative_paths(result))
    for name, s in summary.items():
        print(f"{name}: {s['test_accuracy']:.1f} ± {s['ci95']:.1f}% with {s['params']:,} parameters")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
