"""Lifecycle timelines of a suite policy beside the oracle's plan, on problems that need different plans.

Plays one trained policy (greedy) and each problem's oracle plan (from the suite benchmark's results.json) on the
given problems and test seed, with telemetry on, and writes per problem and controller the episode's events
(events.jsonl, read by `esper.nissa.reading.load_events` and drawn by `plot_lifecycle_timeline`) and a summary.json
of their test accuracies and plans. The chapter "Does Tamiyo adapt?" reads them. Usage, from the project root,
after `make bench-suite`:
    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/adapt_timelines.py --bench runs/bench_suite --run-seed 0 \\
        --problems mnist1d-p3000 digits-c25 --seed 4000 --out nbs/results/bench_suite/timelines
"""
import json
import sys
from pathlib import Path

import torch

from esper.cli import OneLineParser, earlier_results, seed_int
from esper.leyline import ActionSpace
from esper.leyline.files import json_text, write_files_atomic
from esper.nissa.backends import make_hub
from esper.nissa.reading import clear_telemetry
from esper.simic.envs.env import load_ppo_controller
from esper.tamiyo.suite_report import germination_plan
from esper.tamiyo.episode import run_episode
from esper.tamiyo.controllers import make_controller
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)
from esper.cli.runs import stops_in_one_line


def build_parser() -> OneLineParser:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="adapt_timelines.py")
    a = ap.add_argument
    a("--bench", default="runs/bench_suite",
      help="the suite benchmark's folder: results.json and seed<k>/agent.pt (default: runs/bench_suite)")
    a("--run-seed", type=seed_int, default=0, help="whose policy plays (default: 0)")
    a("--problems", nargs="+", required=True, help="problems of the judged suite to play")
    a("--seed", type=seed_int, default=4000, help="the episode's test seed (default: 4000)")
    a("--out", required=True, help="output folder")
    a("--overwrite", action="store_true", help="replace an earlier run's files in --out (default: refuse)")
    return ap


def play(controller, problem, suite_menu: tuple[str, ...], seed: int, folder: Path) -> dict:
    "One episode with telemetry written to `folder`/events.jsonl (an earlier run's is cleared); its accuracy and plan."
    clear_telemetry(folder)  # the JSONL backend appends: a replaced run must not add its events to the old ones
    hub = make_hub(folder, level="normal", console=False, tensorboard=False)
    try:
        r = run_episode(problem.load_task(seed), controller, seed=seed, hub=hub, actions=ActionSpace(suite_menu),
                        problem=problem)
    finally:
        hub.close()
    return {"test_accuracy": r.final_accuracy, "plan": f"plan:{germination_plan(r.lifecycle_log)}",
            "params": r.host_params + r.params_added, "compute": round(r.compute, 4), "epochs": r.epochs}


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    bench, out = Path(args.bench), Path(args.out)
    results_path, checkpoint = bench / "results.json", bench / f"seed{args.run_seed}" / "agent.pt"
    for p in (results_path, checkpoint):
        if not p.exists():
            ap.error(f"{p} does not exist: run `make bench-suite` first (or give --bench)")
    results = json.loads(results_path.read_text())
    config = results["config"]
    suite, train = get_suite(config["suite"]["name"]), get_suite(config["train_suite"])
    oracle = {r["problem"]: r["oracle_plan"] for r in results["summary"]["problems"]}
    unknown = [p for p in args.problems if p not in suite.names]
    if unknown:
        ap.error(f"--problems: {', '.join(unknown)} not in suite {suite.name}; its problems: {', '.join(suite.names)}")
    if not args.overwrite and (found := earlier_results(out, ("summary.json", *args.problems))):
        ap.error(f"{out} holds an earlier run ({', '.join(map(str, found))}); pass --overwrite to replace it")
    summary = {"bench": str(bench), "run_seed": args.run_seed, "seed": args.seed, "commit": config.get("git_commit"),
               "problems": {}}
    with stops_in_one_line("adapt_timelines.py"):
        for name in args.problems:
            p = suite[name]
            ppo = play(load_ppo_controller(str(checkpoint)), p, train.blueprints, args.seed, out / name / "ppo")
            best = play(make_controller(oracle[name], args.seed), p, p.blueprints, args.seed, out / name / "oracle")
            summary["problems"][name] = {"ppo": ppo, "oracle": best | {"plan": oracle[name]}}
            print(f"{name}: PPO {ppo['test_accuracy']:.1f}% with {ppo['plan']}; "
                  f"oracle {best['test_accuracy']:.1f}% with {oracle[name]}", flush=True)
    try:
        write_files_atomic(out, {"summary.json": json_text(summary)})
    except OSError as e:
        print(f"adapt_timelines.py: error: {e} (the lines above were not saved)", file=sys.stderr)
        return 1
    print(f"wrote {out}/summary.json and <problem>/<ppo|oracle>/events.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
