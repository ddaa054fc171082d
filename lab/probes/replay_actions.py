"""When does each controller act? Replays trained policies and fixed rules on task seeds and prints their timelines.

Each controller plays one episode per task seed, exactly as the learning benchmark evaluates it, and every decision
other than WAIT is printed as `epoch:OP[/blueprint]@slot`, followed by the final accuracy. With --probs, a policy's
line is followed by its unsure decisions (no legal action above 0.95 probability) as `epoch:OP@slot p/OP@slot p`,
its two likeliest actions with the slot each would act on: a greedy policy takes the first. For example, the
policies of a `--preset full` benchmark run against its best rule:
    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/replay_actions.py --preset full --seeds 2000 2004 \\
        --checkpoints runs/bench_learning/full/seed1/agent.pt --rules concurrent:conv_heavy+conv_small
"""
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' own code
import bench_learning as bl  # (the benchmark's presets, episode settings and controllers)

from esper.cli import OneLineParser, DistinctSeeds, seed_int
from esper.simic.envs.env import PPOController, decode_action, load_ppo_controller
from esper.simic.trainers.learning_jobs import TASK, episode_setup, make_baseline
from esper.tamiyo.episode import run_episode
from esper.tasks import get_task


UNSURE = 0.95  # a decision whose likeliest legal action has less probability than this is printed by --probs


def _move(action: Any) -> str:
    "A `TamiyoAction` as `OP[/blueprint]@slot` (WAIT names no slot)."
    what = f"/{action.blueprint}" if action.op.name == "GERMINATE" and action.blueprint else ""
    return action.op.name + what + ("" if action.op.name == "WAIT" else f"@{action.slot}")


class Timeline:
    "Wraps a controller and records its decisions other than WAIT (and, for a flat policy, its unsure ones)."

    def __init__(self, controller: Any):
        self.controller, self.moves, self.unsure = controller, [], []

    def reset(self) -> None:
        self.moves.clear()
        self.unsure.clear()
        self.controller.reset()

    def decide(self, observation: dict[str, Any], model: Any) -> Any:
        action = self.controller.decide(observation, model)
        if action.op.name != "WAIT":
            self.moves.append(f"{observation['epoch']}:{_move(action)}")
        if isinstance(self.controller, PPOController) and not self.controller.agent.factored:
            d = self.controller.decisions[-1]
            with torch.no_grad():
                logits, _ = self.controller.agent.network(d.state.reshape(1, -1))
            logits = logits["action"] if isinstance(logits, dict) else logits  # a flat policy's one head
            probs = torch.softmax(logits.reshape(-1).masked_fill(~d.mask, float("-inf")), -1)
            top = probs.topk(2)
            if float(top.values[0]) < UNSURE:
                likeliest = [(decode_action(int(i), observation, factored=False), float(p))
                             for p, i in zip(top.values, top.indices)]
                self.unsure.append(f"{observation['epoch']}:" + "/".join(f"{_move(a)} {p:.2f}" for a, p in likeliest))
        return action


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="replay_actions.py")
    ap.add_argument("--preset", choices=sorted(bl.PRESETS), default="full", help="episode settings (default: full)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[2000], help="task seeds to play (default: 2000)")
    ap.add_argument("--checkpoints", nargs="*", default=[], help="trained policies (agent.pt of a benchmark run)")
    ap.add_argument("--rules", nargs="*", default=[], help="fixed rules by name, e.g. concurrent:conv_heavy+conv_small")
    ap.add_argument("--probs", action="store_true",
                    help=f"after each flat policy's line, its decisions with no action above {UNSURE} probability, "
                         "each of its two likeliest actions with the slot it acts on")
    args = ap.parse_args(argv)
    if not args.checkpoints and not args.rules:
        ap.error("name at least one of --checkpoints and --rules")
    for name in args.rules:
        try:
            make_baseline(name, args.seeds[0])
        except ValueError as e:
            ap.error(f"--rules: {e}")
    policies = []
    for path in args.checkpoints:  # loaded once; a greedy policy plays every seed the same way
        try:
            policies.append((path, load_ppo_controller(path)))
        except (OSError, ValueError, RuntimeError) as e:  # missing, truncated or foreign: one line, no traceback
            ap.error(f"--checkpoints: cannot load {path}: {e}")
    torch.set_num_threads(1)
    setup = bl.PRESETS[args.preset]
    for seed in args.seeds:
        for name, controller in [(name, make_baseline(name, seed)) for name in args.rules] + policies:
            timeline = Timeline(controller)
            problem, config = episode_setup(setup)
            result = run_episode(get_task(TASK, seed=seed), timeline, config, seed=seed, problem=problem)
            print(f"task seed {seed}  {name}: {result.final_accuracy:.1f}%  {' '.join(timeline.moves)}", flush=True)
            if args.probs and timeline.unsure:
                print(f"    unsure: {' '.join(timeline.unsure)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
