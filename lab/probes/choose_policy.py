"""Choose among a run's own policies on validation task seeds, then see how the choice does on the held-out seeds.

Reads a learning-benchmark output trained with `--keep-policies` (its results.json and seed<k>/policies/). For each
training seed, every kept policy plays one greedy episode on each --validation-seeds task seed with the run's own
episode settings, and the policy with the best mean accuracy there is chosen (the latest of equals, so a run whose
last policy is among its best keeps it). The chosen policy then plays the run's evaluation seeds. The validation
seeds must be none of the task seeds the run trained, drew its learning curve or evaluated on. Prints each training
seed's last and chosen policy, each paired against the run's best fixed rule on the evaluation seeds, and writes
choose_policy.json into the run's folder:
    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/choose_policy.py --run runs/bench_learning/full \\
        --validation-seeds 1005 1006 1007 --workers 2
"""
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

from esper.cli import OneLineParser, positive_int, DistinctSeeds, seed_int
from esper.leyline.files import write_json_atomic
from esper.simic.envs.env import load_ppo_controller
from esper.simic.trainers.learning_jobs import play, training_task_seeds
from esper.cli.runs import stoppable_pool, stops_in_one_line
from esper.tamiyo.learning_report import best_rule_name

EPISODE_KEYS = ("max_epochs", "max_batches", "lr_schedule", "param_budget")  # what play() needs of a run's config


class UnreadablePolicy(Exception):
    "A kept policy that cannot be loaded (missing, truncated or foreign); its message is the script's one line."


def play_job(policy: str, task_seed: int, setup: dict[str, Any]) -> dict[str, Any]:
    "One kept policy, greedy, on one task seed."
    torch.set_num_threads(1)
    try:
        controller = load_ppo_controller(policy)
    except (OSError, ValueError, RuntimeError) as e:
        raise UnreadablePolicy(f"cannot load kept policy {policy}: {e}") from None
    row = play(controller, task_seed, setup)
    # the choice sees validation only: the test split stays for the evaluation seeds' report
    return {"policy": policy, "seed": task_seed, "accuracy": row["final_val_accuracy"],
            "params_added": row["params_added"]}


def choose(scores: dict[str, float]) -> str:
    "The policy with the best mean validation accuracy; the latest of equals (names sort in episode order)."
    top = max(scores.values())
    return max(p for p, s in scores.items() if s >= top - 1e-9)


def by_seed(rows: list[dict[str, Any]], accuracy: str = "accuracy") -> dict[int, float]:
    return {r.get("seed", r.get("eval_seed")): r[accuracy] for r in rows}


def gap(policy: dict[int, float], rule: dict[int, float]) -> float:
    "Mean accuracy less the rule's, paired task seed by task seed."
    return statistics.fmean(policy[s] - rule[s] for s in policy)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="choose_policy.py")
    ap.add_argument("--run", required=True, help="a bench_learning.py output folder trained with --keep-policies")
    ap.add_argument("--validation-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1005, 1006, 1007],
                    help="task seeds the choice is made on (default: 1005 1006 1007)")
    ap.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                    help="worker processes, one torch thread each (default: os.cpu_count())")
    args = ap.parse_args(argv)
    run = Path(args.run)
    try:
        results = json.loads((run / "results.json").read_text())
        config, seeds = results["config"], [s["train_seed"] for s in results["ppo_seeds"]]
    except (OSError, ValueError, KeyError) as e:  # missing, cut short or foreign: one line
        ap.error(f"--run: cannot read a finished benchmark's results.json in {run}: {e!r}")
    setup = {k: config[k] for k in EPISODE_KEYS}
    eval_seeds = sorted({e["eval_seed"] for e in results["episodes"]})
    used = training_task_seeds(seeds, config["episodes"], config.get("episodes_per_task_seed") or 1)
    clash = sorted(set(args.validation_seeds) & (used | set(config["curve_seeds"]) | set(eval_seeds)))
    if clash:
        ap.error(f"--validation-seeds {clash} are task seeds the run trained, drew its curve or evaluated on")
    kept = {k: sorted(str(p) for p in (run / f"seed{k}" / "policies").glob("episode*.pt")) for k in seeds}
    if missing := [k for k, p in kept.items() if not p]:
        ap.error(f"--run: no kept policies for training seeds {missing}; train with --keep-policies")
    try:
        with stops_in_one_line("choose_policy.py"), stoppable_pool(args.workers) as pool:
            played = lambda pairs: [j.result() for j in [pool.submit(play_job, p, s, setup) for p, s in pairs]]
            validation = played([(p, s) for ps in kept.values() for p in ps for s in args.validation_seeds])
            scores = {p: statistics.fmean(r["accuracy"] for r in validation if r["policy"] == p)
                      for ps in kept.values() for p in ps}
            chosen = {k: choose({p: scores[p] for p in ps}) for k, ps in kept.items()}
            held_out = played([(chosen[k], s) for k in seeds for s in eval_seeds])
    except UnreadablePolicy as e:  # the pool has stopped its workers; nothing was written
        ap.error(f"--run: {e}")
    rule_name = best_rule_name(results["summary"])
    rule = by_seed([e for e in results["episodes"] if e["controller"] == rule_name], "final_accuracy")
    print(f"best rule {rule_name}: {statistics.fmean(rule.values()):.2f}% on evaluation seeds {eval_seeds}; "
          f"choice on validation seeds {args.validation_seeds}")
    report = []
    for k in seeds:
        last = by_seed([e for e in results["episodes"] if e["controller"] == "ppo" and e["train_seed"] == k],
                       "final_accuracy")
        mine = [r for r in held_out if r["policy"] == chosen[k]]
        row = {"train_seed": k, "chosen": Path(chosen[k]).name, "chosen_validation": scores[chosen[k]],
               "last_validation": scores[kept[k][-1]], "last_gap": gap(last, rule),
               "chosen_gap": gap(by_seed(mine), rule),
               "chosen_accuracy": statistics.fmean(r["accuracy"] for r in mine),
               "chosen_params_added": statistics.fmean(r["params_added"] for r in mine)}
        report.append(row)
        print(f"run seed {k}: last policy {row['last_gap']:+.2f} to the rule "
              f"(validation {row['last_validation']:.2f}%); chosen {row['chosen']} {row['chosen_gap']:+.2f} "
              f"(validation {row['chosen_validation']:.2f}%, {row['chosen_params_added']:,.0f} params added)")
    for key in ("last_gap", "chosen_gap"):
        print(f"mean {key.replace('_', ' ')}: {statistics.fmean(r[key] for r in report):+.3f}")
    here = lambda p: str(Path(p).relative_to(run))  # policies named within the run's folder: seed<k>/policies/...
    write_json_atomic(run / "choose_policy.json", {
        "validation_seeds": args.validation_seeds, "eval_seeds": eval_seeds, "rule": rule_name, "per_seed": report,
        "scores": {here(p): s for p, s in scores.items()},
        "validation": [r | {"policy": here(r["policy"])} for r in validation],
        "held_out": [r | {"policy": here(r["policy"])} for r in held_out]})
    print(f"wrote {run / 'choose_policy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
