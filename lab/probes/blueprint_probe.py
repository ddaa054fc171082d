"""Would a new blueprint buy more accuracy per parameter? Candidate seeds under fixed rules on whole runs.

A candidate is tried without adding it to the action space: for the run it takes the place of the `attention`
blueprint in the 1-D registry, so a rule that names `attention` grows the candidate. Each rule plays 30-epoch
episodes on every batch with cosine learning rates and the 2,500-parameter budget (the learning benchmark's `full`
preset) on tuning task seeds, never on the benchmark's held-out seeds 2000-2004. One line of JSON per candidate and
rule.

    OMP_NUM_THREADS=1 python lab/probes/blueprint_probe.py --workers 2

The README and the "Why Tamiyo learns" chapter quote its two reference rules, `k3_k3` in both block orders, and the
widths of two k=3 convolutions grown in both blocks (`--runs` as given there; about half a minute a run of five
episodes on one core). With `none` as every candidate it searches the plans of today's action space: the chapter's
"Is the best rule the best plan?" plays them all (`--every-plan`) and the best one on each blend curve (`--blend`).
"""
import json
import statistics
import time

import torch
from torch import nn

from esper.cli import OneLineParser, positive_int, DistinctSeeds, seed_int
from esper.kasmina import blueprints as B
from esper.kasmina.model import MorphogeneticModel, _blueprint_cost
from esper.leyline import BLUEPRINTS, BlendAlgorithm
from esper.tamiyo.baselines import ScheduleTamiyo
from esper.tamiyo.episode import EpisodeConfig, run_episode
from esper.tamiyo.problems import GrowthProblem
from esper.tasks import get_task
from esper.cli.runs import stoppable_pool, stops_in_one_line


class TwoConvSeed(B.SeedModule):
    "conv(k) to `width` x C → BN → ReLU → zero-initialised conv(k2, dilation d) back to C."

    def __init__(self, channels: int, dims: int, k: int = 3, k2: int = 3, dilation: int = 1, width: float = 1.0):
        super().__init__(channels, dims)
        Conv, BN, _ = B._ops(dims)
        mid = round(width * channels)
        self.body = nn.Sequential(
            Conv(channels, mid, k, padding=k // 2, bias=False), BN(mid), nn.ReLU(),
            B._zero(Conv(mid, channels, k2, padding=dilation * (k2 // 2), dilation=dilation)))

    def forward(self, h):
        return self.body(h)


#: Candidate seeds by name: (first kernel, second kernel, dilation of the second, middle width in host widths C).
#: k3_k3_x1.75 is the `conv_mid` blueprint the "Why Tamiyo learns" chapter tried in the action space.
CANDIDATES = {"k3_k3": (3, 3, 1, 1.0), "k3_dilated": (3, 3, 2, 1.0), "k5_1x1": (5, 1, 1, 1.0), "k5_k5": (5, 5, 1, 1.0),
              "k3_k3_x1.25": (3, 3, 1, 1.25), "k3_k3_x1.5": (3, 3, 1, 1.5), "k3_k3_x1.75": (3, 3, 1, 1.75),
              "k3_k3_x1.875": (3, 3, 1, 1.875)}
#: Rules tried by default: `none` plays a rule over today's blueprints, for reference.
DEFAULT_RUNS = ("none:concurrent:conv_heavy+conv_small", "none:concurrent:conv_heavy+depthwise",
                "k3_k3:concurrent:conv_heavy+attention", "k3_k3:concurrent:attention+conv_heavy",
                "k3_dilated:concurrent:conv_heavy+attention", "k5_1x1:concurrent:conv_heavy+attention",
                "k5_k5:concurrent:attention+attention", "k3_k3_x1.75:concurrent:attention+attention")


#: The learning benchmark's `full` episodes: 30 epochs on every batch, cosine learning rates, 2,500 parameters.
FULL = GrowthProblem("mnist1d", max_epochs=30, param_budget=2500)  # trained with cosine rates (`probe`)


def install(candidate: str) -> None:
    "Let the 1-D `attention` blueprint build `candidate` in this process."
    k, k2, d, width = CANDIDATES[candidate]
    factory = lambda channels, dims: TwoConvSeed(channels, dims, k, k2, d, width)
    B.BLUEPRINT_REGISTRY["conv1d"]["attention"] = B.BlueprintSpec("attention", "conv1d", factory, 1, candidate)
    _blueprint_cost.cache_clear()  # the budget check's cached costs: a pool worker may have played another candidate


def probe(run: str, seeds: list[int], blend: str = "linear") -> dict:
    "Play one `candidate:rule` on every seed, every seed blending on the `blend` curve; a worker's job."
    torch.set_num_threads(1)
    candidate, rule = run.split(":", 1)
    if candidate != "none": install(candidate)
    config = EpisodeConfig(lr_schedule="cosine", blend_algorithm=blend)
    t0, results = time.perf_counter(), []
    for s in seeds:
        task = get_task("mnist1d", seed=s)
        results.append(run_episode(task, ScheduleTamiyo.from_name(rule), config, seed=s, problem=FULL))
    accs = [r.final_accuracy for r in results]
    return {"candidate": candidate, "rule": rule, "blend": blend, "mean_accuracy": round(statistics.fmean(accs), 2),
            "accuracies": accs, "params_in_all": results[0].host_params + results[0].params_added,
            "seconds": round(time.perf_counter() - t0, 1)}


def every_plan(budget: int = FULL.param_budget) -> list[str]:
    "Runs of every plan side by side over today's blueprints: each alone in block 1, then each ordered pair that fits."
    host = MorphogeneticModel(get_task("mnist1d").make_host())
    c1, c2 = (host.slot(s).channels for s in host.slot_ids)  # a rule plants its first seed in block 1, then block 2
    cost = lambda b, channels: _blueprint_cost(b, host.family, channels)
    pairs = [(a, b) for a in BLUEPRINTS for b in BLUEPRINTS
             if host.total_param_count() + cost(a, c1) + cost(b, c2) <= budget]
    return [f"none:concurrent:{a}" for a in BLUEPRINTS] + [f"none:concurrent:{a}+{b}" for a, b in pairs]


def main(argv: list[str]|None=None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="blueprint_probe.py")
    ap.add_argument("--runs", nargs="+", metavar="CANDIDATE:RULE",
                    help=f"candidate (one of {', '.join(CANDIDATES)}, or none) and a fixed rule's name, e.g. "
                         "k3_k3:concurrent:conv_heavy+attention (default: the chapter's reference runs)")
    ap.add_argument("--every-plan", action="store_true",
                    help="instead of --runs, every plan of today's blueprints side by side: each alone in block 1, "
                         "then each ordered pair within the budget (29 runs)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001, 1002, 1003, 1004],
                    help="task seeds (default: 1000-1004, never the held-out 2000-2004)")
    ap.add_argument("--blend", choices=[b.value for b in BlendAlgorithm], default="linear",
                    help="blend curve of every seed, as a factored policy's blend head would choose it (default: "
                         "linear, the rules' and the flat policy's)")
    ap.add_argument("--workers", type=positive_int, default=1, help="worker processes (default: 1)")
    args = ap.parse_args(argv)
    if args.every_plan and args.runs:
        ap.error("--every-plan and --runs: give one of them")
    args.runs = every_plan() if args.every_plan else args.runs or list(DEFAULT_RUNS)
    for run in args.runs:
        candidate, sep, rule = run.partition(":")
        if not sep or (candidate != "none" and candidate not in CANDIDATES):
            ap.error(f"--runs: {run!r} is not CANDIDATE:RULE with a candidate from {', '.join(CANDIDATES)} or none")
        try:
            ScheduleTamiyo.from_name(rule)
        except ValueError as e:
            ap.error(f"--runs: {e}")
    with stops_in_one_line("blueprint_probe.py"), stoppable_pool(args.workers) as pool:  # the rows printed stand
        for row in pool.map(probe, args.runs, [args.seeds] * len(args.runs), [args.blend] * len(args.runs)):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
