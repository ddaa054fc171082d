"""What is acting at the first chance worth? A fixed rule that waits k epochs after each gate opens.

`DelayedSchedule` plants its seeds as the concurrent rule does (`ScheduleTamiyo`, side by side at the first
chances), then makes each advance and fossilization k epochs after the slot's gate first opened in that stage;
k = 0 is the rule itself. A PPO policy that is unsure at a gate acts a few epochs late: this measures what that
costs. Whole runs (the learning benchmark's `full` preset: 30 epochs on every batch, cosine learning rates, a
2,500-parameter budget) on tuning task seeds, never the benchmark's held-out 2000-2004. One JSON line per delay.

    OMP_NUM_THREADS=1 python lab/probes/timing_probe.py --delays 0 1 2 4 --workers 2

The "Why Tamiyo learns" chapter quotes the default run (2-core CPU, about 3 minutes).
"""
import json
import statistics
import time
from typing import Any

import torch

from esper.cli import OneLineParser, nonneg_int, positive_int, DistinctSeeds, seed_int
from esper.leyline import LifecycleOp, SeedStage
from esper.tamiyo.baselines import ScheduleTamiyo
from esper.tamiyo.episode import EpisodeConfig, run_episode
from esper.tamiyo.problems import GrowthProblem
from esper.tamiyo.signals import TamiyoAction
from esper.tasks import get_task
from esper.cli.runs import stoppable_pool, stops_in_one_line

FULL = GrowthProblem("mnist1d", max_epochs=30, param_budget=2500)  # trained with cosine rates (`probe`)
_MOVE = {SeedStage.GERMINATED: LifecycleOp.ADVANCE, SeedStage.TRAINING: LifecycleOp.ADVANCE,
         SeedStage.BLENDING: LifecycleOp.ADVANCE, SeedStage.HOLDING: LifecycleOp.FOSSILIZE}


class DelayedSchedule(ScheduleTamiyo):
    "`ScheduleTamiyo` side by side, but each gated move waits `delay` epochs after its gate first opened."

    def __init__(self, blueprints: tuple[str, ...], delay: int):
        if delay < 0: raise ValueError(f"delay must be >= 0 (got {delay})")
        super().__init__(blueprints, concurrent=True)
        self.delay, self.name = delay, f"{self.name} +{delay}"

    def reset(self) -> None:
        super().reset()
        self.opened: dict[tuple[str, SeedStage], int] = {}  # (slot, stage) -> epoch its gate was first seen open

    def decide(self, observation: dict[str, Any], model: Any) -> TamiyoAction:
        if self.germinated < len(self.blueprints):
            return super().decide(observation, model)
        for slot in model.slot_ids:
            stage = model.slot(slot).stage
            if stage not in _MOVE or not model.gate_open(slot): continue
            first = self.opened.setdefault((slot, stage), observation["epoch"])
            if observation["epoch"] - first >= self.delay:
                return TamiyoAction(_MOVE[stage], slot, reason=f"gate open {observation['epoch'] - first} epochs")
        return TamiyoAction.wait("schedule")


def probe(blueprints: tuple[str, ...], delay: int, seeds: list[int], problem: GrowthProblem) -> dict:
    "Play the delayed rule on every seed; a worker's job."
    torch.set_num_threads(1)
    t0, accs = time.perf_counter(), []
    for s in seeds:
        config = EpisodeConfig(lr_schedule="cosine")
        accs.append(run_episode(get_task("mnist1d", seed=s), DelayedSchedule(blueprints, delay), config,
                                seed=s, problem=problem).final_accuracy)
    return {"rule": "concurrent:" + "+".join(blueprints), "delay": delay, "seeds": seeds,
            "mean_accuracy": round(statistics.fmean(accs), 2), "accuracies": accs,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str]|None=None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="timing_probe.py")
    ap.add_argument("--delays", type=nonneg_int, nargs="+", default=[0, 1, 2, 4],
                    help="epochs each gated move waits after its gate opens (default: 0 1 2 4)")
    ap.add_argument("--rule", default="conv_heavy+conv_small",
                    help="blueprints planted side by side, joined by + (default: conv_heavy+conv_small)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001, 1002, 1003, 1004],
                    help="task seeds (default: 1000-1004, never the held-out 2000-2004)")
    ap.add_argument("--max-epochs", type=positive_int, default=FULL.max_epochs,
                    help=f"epochs per run, >= 2 (default: {FULL.max_epochs})")
    ap.add_argument("--max-batches", type=nonneg_int, default=0, help="batches per epoch, 0 = every batch (default)")
    ap.add_argument("--workers", type=positive_int, default=1, help="worker processes (default: 1)")
    args = ap.parse_args(argv)
    try:
        blueprints = tuple(args.rule.split("+"))
        ScheduleTamiyo(blueprints)
    except ValueError as e:
        ap.error(f"--rule: {e}")
    if args.max_epochs < 2: ap.error(f"--max-epochs must be >= 2 (got {args.max_epochs})")
    problem = GrowthProblem("mnist1d", max_epochs=args.max_epochs, max_batches=args.max_batches or None,
                            param_budget=FULL.param_budget)
    with stops_in_one_line("timing_probe.py"), stoppable_pool(args.workers) as pool:  # the lines printed stand
        jobs = [pool.submit(probe, blueprints, d, args.seeds, problem) for d in args.delays]
        for job in jobs:
            print(json.dumps(job.result()), flush=True)


if __name__ == "__main__":
    main()
