"""What acting on the run could be worth on a suite benchmark's problems, bounded from its own episodes.

A policy that reads the run can beat its open-loop replay only where the right plan differs from one task seed of a
problem to the next. This script bounds that from the fixed plans the benchmark already played on every test seed
(the rules, the oracle's plans, each policy's open-loop plan): per problem it compares

- the best single plan on the problem, chosen in hindsight on its test-seed mean (what no open-loop controller beats),
- a per-seed choice by each plan's final *validation* accuracy: a controller that foresaw how every candidate plan
  would end on this very run and took the best (a bound no real controller reaches),
- the same per-seed choice by test accuracy (hindsight on the score itself: noise included),

and, for reference, PPO, its open-loop replay, and the most distinct plans one PPO policy played across the test
seeds of one problem. Reads a `bench_learning.py --suite` results.json, and with --plays the benchmark's cache of
played episodes (its plays.jsonl: more candidate plans, those of the same suite version only); writes nothing. From
the project root:

    .venv/bin/python lab/probes/adapt_headroom.py nbs/results/bench_suite/results.json --plays runs/bench_suite/plays.jsonl
"""
import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from esper.cli import OneLineParser


def candidate_plans(episodes: list[dict], seeds: list[int]) -> dict[str, dict[str, dict[int, tuple[float, float]]]]:
    "Per problem, every fixed plan played on all `seeds`: {plan: {seed: (test, validation)}}."
    plays: dict[str, dict[str, dict[int, tuple[float, float]]]] = defaultdict(lambda: defaultdict(dict))
    for e in episodes:
        c = e["controller"]
        plan = c if c.startswith("plan:") else e.get("plan") if c == "open-loop" else None
        if plan is None or e["seed"] not in seeds or e.get("val_accuracy") is None:
            continue
        plays[e["problem"]][plan][e["seed"]] = (e["test_accuracy"], e["val_accuracy"])
    return {p: {k: v for k, v in by.items() if set(v) >= set(seeds)} for p, by in plays.items()}


def headroom(plans: dict[str, dict[int, tuple[float, float]]], seeds: list[int]) -> dict[str, float]:
    "For one problem's candidate plans: the best plan's mean, and the per-seed choices by validation and by test."
    if not plans:
        raise ValueError("a problem has no fixed plan played on every test seed")
    mean = {k: statistics.fmean(v[s][0] for s in seeds) for k, v in plans.items()}
    by_val = [max(plans.values(), key=lambda v: v[s][1])[s][0] for s in seeds]
    by_test = [max(v[s][0] for v in plans.values()) for s in seeds]
    return {"plans": len(plans), "best plan": max(mean.values()), "per seed, by validation": statistics.fmean(by_val),
            "per seed, by test": statistics.fmean(by_test)}


def report(results: dict, plays: list[dict] = ()) -> str:
    "The markdown table: per held-out problem, the bounds beside PPO and its open-loop replay."
    seeds = list(results["summary"]["test_seeds"])
    eps = results["episodes"]
    versions = {e["key"].split("|")[0] for e in eps if e["controller"].startswith("plan:")}
    cands = candidate_plans([*eps, *(e for e in plays if e.get("key", "").split("|")[0] in versions)], seeds)
    distinct = defaultdict(set)  # the plans one policy played on one problem's test seeds
    for e in eps:
        if e["seed"] in seeds and e["controller"] == "ppo":
            distinct[(e["problem"], e["run_seed"])].add(e.get("plan"))
    cols = ["plans", "best plan", "per seed, by validation", "per seed, by test"]
    out = ["| problem | " + " | ".join(cols) + " | PPO | open-loop | PPO's plans per run seed |",
           "|---|" + "---|" * (len(cols) + 3)]
    rows = []
    for p in results["summary"]["problems"]:
        name = p["problem"]
        h = headroom(cands.get(name, {}), seeds)
        n = sorted(len(v) for (q, _), v in distinct.items() if q == name)
        rows.append((h, p["ppo"], p["open-loop"]))  # the benchmark's own means over run seeds
        out.append(f"| {name} | {h['plans']} | " + " | ".join(f"{h[c]:.1f}" for c in cols[1:])
                   + f" | {rows[-1][1]:.1f} | {rows[-1][2]:.1f} | {max(n) if n else 'n/a'} |")
    mean = {c: statistics.fmean(r[0][c] for r in rows) for c in cols[1:]}
    out.append("| **mean** | | " + " | ".join(f"{mean[c]:.1f}" for c in cols[1:])
               + f" | {statistics.fmean(r[1] for r in rows):.1f} | {statistics.fmean(r[2] for r in rows):.1f} | |")
    gain = mean["per seed, by validation"] - mean["best plan"]
    by_test = mean["per seed, by test"] - mean["best plan"]
    out += ["", (f"Choosing per test seed by foreseen validation accuracy gains {gain:+.2f} points over the best plan "
                 f"per problem (test seeds {', '.join(map(str, seeds))}); by test accuracy itself {by_test:+.2f}.")]
    return "\n".join(out)


def main(argv=None):
    ap = OneLineParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a bench_learning.py --suite results.json")
    ap.add_argument("--plays", type=Path, help="that benchmark's plays.jsonl, for more candidate plans")
    args = ap.parse_args(argv)
    for name, path in (("results", args.results), ("--plays", args.plays)):
        if path is not None and not path.is_file():
            ap.error(f"{name}: no file at {path}")
    try:
        data = json.loads(args.results.read_text())
        plays = [json.loads(line) for line in args.plays.read_text().splitlines() if line.strip()] if args.plays else []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        ap.error(f"cannot read {args.results}{' or ' + str(args.plays) if args.plays else ''} as JSON ({e})")
    if not isinstance(data, dict) or "summary" not in data or "episodes" not in data:
        ap.error(f"results: {args.results} is not a suite benchmark's results.json (no summary or episodes)")
    try:
        print(report(data, plays))
    except ValueError as e:
        ap.error(str(e))
    except (KeyError, TypeError) as e:
        ap.error(f"{args.results} or its plays lack a field the report needs ({e!r})")


if __name__ == "__main__":
    main()
