"""The suite benchmark's policy beside its ablations and the per-instance selector, paired by problem x test seed.

Issue 75 asks whether the policy earns its features: the same benchmark run again with the policy reading less
(`--features run`: without the data block; `--features signals`: the training signals only) is an ablation. This
probe reads the benchmark's results.json (`--bench`) and each ablation's (`--ablation NAME=FILE`), refuses runs that
differ in anything but the features (suite and version, train suite, test seeds, episodes) and the run seeds (an
ablation may train some of the benchmark's), and prints per policy its mean, its run seeds, and paired differences
(mean ± 95% CI over the problem x test seed cells, each policy taken as the mean of its run seeds): the full policy
less each ablation (both on the ablation's run seeds), and each policy less the selector,
its own plans replayed blind (open-loop), the greedy rule and the best single rule. The selector is
`lab/probes/selector.py`'s (`--selector`, its results.json), or else the one a run played (the benchmark plays it
since the selector landed). It plays nothing. From the project root:

    .venv/bin/python lab/probes/suite_ablations.py --bench nbs/results/bench_suite/results.json \\
        --ablation run=nbs/results/bench_suite_ablations/run/results.json \\
        --selector nbs/results/selector/results.json --out nbs/results/bench_suite_ablations
"""
import json
import statistics
import sys
import types
from pathlib import Path
from typing import Any

from selector import bench_arms, paired  # lab/probes/selector.py: how a benchmark's arms are read and paired

from esper.cli import OneLineParser, add_overwrite_argument, earlier_results
from esper.cli.runs import git_state
from esper.leyline.files import OutputError, check_output_dir, json_text, relative_paths, write_files_atomic

FILES = ("results.json", "results.md")
#: What every compared run must share (config keys): only the features may differ, and an ablation's run seeds may
#: be some of the benchmark's.
SAME = ("suite", "train_suite", "test_seeds", "episodes", "tune_seeds")
RIVALS = ("selector", "open-loop", "greedy", "best rule")


def features_of(r: dict) -> str:
    "What the run's policy read (its --features)."
    argv = r["config"].get("argv") or []
    return argv[argv.index("--features") + 1] if "--features" in argv else "run-data"


def arms(r: dict) -> dict[str, dict[tuple[str, int], float]]:
    "A run's arms per (problem, test seed), as selector.py reads a benchmark (PPO and its replay: over run seeds)."
    problems = types.SimpleNamespace(names=[p["problem"] for p in r["summary"]["problems"]])
    return bench_arms(r, problems, r["config"]["test_seeds"])


def on_run_seeds(r: dict, seeds: list[int]) -> dict:
    "The run with only the policies of the given run seeds (and every rule's episode)."
    return r | {"episodes": [e for e in r["episodes"] if e.get("run_seed") is None or e["run_seed"] in seeds]}


def plan_cells(r: dict, plans: dict[str, str], test: list[int]) -> dict[tuple[str, int], float]:
    "Per (problem, test seed): the test accuracy of each problem's named plan (the selector's), every cell present."
    got = {(e["problem"], e["seed"]): e["test_accuracy"] for e in r["episodes"]
           if e["seed"] in test and plans.get(e["problem"]) == e["controller"]}
    if missing := [(p, s) for p in plans for s in test if (p, s) not in got]:
        raise ValueError(f"no episode of the selector's plan on {missing[0][0]} at seed {missing[0][1]}")
    return got


def per_run(r: dict) -> dict[int, float]:
    "Each run seed's policy: its mean test accuracy over the problems x test seeds."
    test = set(r["config"]["test_seeds"])
    by: dict[int, list[float]] = {}
    for e in r["episodes"]:
        if e["controller"] == "ppo" and e["seed"] in test:
            by.setdefault(e["run_seed"], []).append(e["test_accuracy"])
    return {k: statistics.fmean(v) for k, v in sorted(by.items())}


def selector_cells(runs: dict[str, dict], selector: dict | None, test: list[int]) -> tuple[dict, str]:
    "The selector's cells: lab/probes/selector.py's results (`whole`) where given, or else a run's that played it."
    if selector is not None:
        plans = {p["problem"]: p["variants"]["whole"]["plan"] for p in selector["problems"]}
        plans = {p: v if v.startswith("plan:") else f"plan:{v}" for p, v in plans.items()}
        return plan_cells(selector, plans, test), "lab/probes/selector.py's `whole` variant"
    for name, r in runs.items():
        plans = {p["problem"]: p["selector_plan"] for p in r["summary"]["problems"] if "selector_plan" in p}
        if plans:
            return plan_cells(r, plans, test), f"played in the `{name}` run"
    raise ValueError("no run played the selector: give --selector (lab/probes/selector.py's results.json)")


def compare(runs: dict[str, dict], selector: dict | None) -> dict[str, Any]:
    "Every policy's mean and run seeds; the full policy less each ablation; each policy less the rivals."
    sel, sel_from = selector_cells(runs, selector, runs["full"]["config"]["test_seeds"])
    played = {name: arms(r) for name, r in runs.items()}
    full = played["full"]
    rivals = {"selector": sel, "greedy": full["greedy"], "best rule": full["best rule"]}
    out = {"selector_from": sel_from, "policies": {}, "full_less": {}}
    for name, r in runs.items():
        ppo = played[name]["ppo"]
        less = {k: paired(ppo, v) for k, v in rivals.items()} | {"open-loop": paired(ppo, played[name]["open-loop"])}
        out["policies"][name] = {"features": features_of(r), "mean": statistics.fmean(ppo.values()),
                                 "run_seeds": per_run(r), "less": less, "git_commit": r["config"].get("git_commit")}
        if name != "full":  # the full policy on the ablation's run seeds: the same seeds, only the features differ
            seeds = r["config"]["run_seeds"]
            same = full if seeds == runs["full"]["config"]["run_seeds"] else arms(on_run_seeds(runs["full"], seeds))
            out["full_less"][name] = paired(same["ppo"], ppo) | {"run_seeds": seeds}
    out["rivals"] = {k: statistics.fmean(v.values()) for k, v in rivals.items()}
    return out


def markdown(c: dict, suite: str) -> str:
    "The side-by-side table and the paired differences."
    pm = lambda d: f"{d['mean']:+.2f} ± {d['ci95']:.2f}"
    lines = [(f"Suite {suite}, test accuracy %; each policy the mean of its run seeds; paired over problem x test "
              f"seed cells (mean ± 95% CI). Selector: {c['selector_from']}.\n"),
             "| policy | reads | mean | run seeds | less selector | less open-loop | less greedy | less best rule |",
             "|---|---|---|---|---|---|---|---|"]
    for name, p in c["policies"].items():
        runs = ", ".join(f"{v:.1f}" for v in p["run_seeds"].values())
        lines.append(f"| {name} | `{p['features']}` | {p['mean']:.1f} | {runs} | "
                     + " | ".join(pm(p["less"][k]) for k in RIVALS) + " |")
    lines.append("\nRivals: " + ", ".join(f"{k} {v:.1f}" for k, v in c["rivals"].items()) + ".")
    for name, d in c["full_less"].items():
        lines.append(f"\nThe full policy less the `{name}` ablation: {pm(d)} ({d['n']} pairs; both on run seeds "
                     f"{', '.join(map(str, d['run_seeds']))}).")
    return "\n".join(lines)


def parse_ablation(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--ablation takes NAME=FILE (got {text!r})")
    return name, path


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="suite_ablations.py", description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="the benchmark's results.json (the full policy)")
    ap.add_argument("--ablation", action="append", required=True, metavar="NAME=FILE",
                    help="an ablation's results.json under a name (repeatable)")
    ap.add_argument("--selector", default=None, help="lab/probes/selector.py's results.json, if no run played it")
    ap.add_argument("--out", required=True, help="folder for results.json and results.md")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    if earlier_results(a.out, FILES) and not a.overwrite:
        ap.error(f"--out {a.out} holds an earlier run's results; pass --overwrite to replace them")
    try:
        check_output_dir(a.out, "--out")
        paths = {"full": a.bench} | dict(parse_ablation(t) for t in a.ablation)
        if len(paths) != len(a.ablation) + 1:
            raise ValueError("--ablation names must be distinct and not 'full'")
        runs = {n: json.loads(Path(p).read_text()) for n, p in paths.items()}
        selector = json.loads(Path(a.selector).read_text()) if a.selector else None
        for n, r in runs.items():
            if not isinstance(r, dict) or "episodes" not in r or "summary" not in r:
                raise ValueError(f"{paths[n]}: not a suite benchmark's results.json")
            if diff := [k for k in SAME if r["config"].get(k) != runs["full"]["config"].get(k)]:
                raise ValueError(f"{paths[n]} differs from --bench in {', '.join(diff)}: not an ablation of it")
            if extra := sorted(set(r["config"]["run_seeds"]) - set(runs["full"]["config"]["run_seeds"])):
                raise ValueError(f"{paths[n]} trained run seed {extra[0]}, which --bench did not: not an "
                                 "ablation of it")
        c = compare(runs, selector)
    except (OutputError, OSError, ValueError, KeyError) as e:
        ap.error(str(e))
    suite = runs["full"]["config"]["suite"]
    text = markdown(c, f"{suite['name']} v{suite['version']}")
    result = {"command": "python lab/probes/suite_ablations.py " + " ".join(sys.argv[1:] if argv is None else argv),
              **git_state(Path(__file__).resolve().parents[2]), "files": paths, **c}
    write_files_atomic(a.out, {"results.json": json_text(relative_paths(result)), "results.md": text + "\n"})
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
