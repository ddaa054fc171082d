"""A per-instance selector against the suite benchmark's policies: does a policy that reads the run beat it?

Plays the train suite's plan search (every plan on the tune seeds; cached in --cache, so a rerun plays only what is
missing), fits `esper.tamiyo.selector.Selector` on it in both variants (`cut`: the nearest train problem's best plan
cut to the budget; `whole`: its best plan that the target plays whole), plays each variant's plan for every problem
of the held-out suite on the benchmark's test seeds, and compares it, paired by problem x test seed, with the
benchmark's episodes in --bench: PPO (mean over run seeds), its open-loop replay (the same), the greedy rule, the best
single rule and the oracle. Writes results.json and results.md to --out. From the project root:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/selector.py --workers 2 --out nbs/results/selector
"""
import contextlib
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from esper.cli import DistinctSeeds, OneLineParser, add_overwrite_argument, earlier_results, positive_int, seed_int
from esper.cli.runs import git_state, stoppable_pool, stops_in_one_line
from esper.leyline.files import OutputError, check_output_dir, check_output_file, json_text, relative_paths, \
    write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import TUNE_SEEDS, Play, PlayCache, fresh_model, plan_controllers, run_plays
from esper.tamiyo.problems import SUITES, get_suite
from esper.tamiyo.selector import FEATURE_NAMES, VARIANTS, Selector, problem_features
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)

FILES = ("results.json", "results.md")
#: The benchmark's arms the selector is compared with, as the table names them.
ARMS = ("ppo", "open-loop", "greedy", "best rule", "oracle")


def bench_arms(bench: dict, suite, seeds: list[int]) -> dict[str, dict[tuple[str, int], float]]:
    "Per arm, per (problem, test seed): the benchmark's test accuracy (PPO and its replay: the mean over run seeds)."
    plans = {p["problem"]: p for p in bench["summary"]["problems"]}
    named = {"greedy": lambda p: "greedy", "best rule": lambda p: plans[p]["best_rule_plan"],
             "oracle": lambda p: plans[p]["oracle_plan"]}
    out = {}
    for arm in ARMS:
        vals = {}
        for p in suite.names:
            want = named[arm](p) if arm in named else arm
            for s in seeds:
                got = [e["test_accuracy"] for e in bench["episodes"]
                       if e["problem"] == p and e["seed"] == s and e["controller"] == want]
                if not got:
                    raise ValueError(f"--bench holds no {arm} episode on {p} at seed {s}")
                vals[(p, s)] = statistics.fmean(got)
        out[arm] = vals
    return out


def paired(a: dict, b: dict) -> dict:
    "a less b over the pairs both hold: mean, 95% CI half-width, pairs."
    d = [a[k] - b[k] for k in a]
    m, ci = mean_ci95(d)
    return {"mean": m, "ci95": ci, "n": len(d)}


def replay_check(bench: dict, rows: list[dict]) -> dict:
    "Episodes the benchmark also played (the same plan, problem and seed): how many, and how far apart."
    theirs = {(e["problem"], e["controller"], e["seed"]): e["test_accuracy"] for e in bench["episodes"]
              if e["controller"].startswith("plan:")}
    gaps = [abs(r["test_accuracy"] - theirs[k]) for r in rows
            if (k := (r["problem"], r["controller"], r["seed"])) in theirs]
    return {"shared": len(gaps), "identical": sum(g == 0 for g in gaps), "max_gap": max(gaps, default=0.0)}


def open_outputs(ap, out: str, cache: str, overwrite: bool, files: tuple[str, ...] = FILES) -> PlayCache:
    """Before any episode: refuse (one line through `ap`) an --out that holds an earlier run's results without
    --overwrite, or an --out or --cache that cannot be written; the episode cache, opened."""
    found = earlier_results(out, files)
    if found and not overwrite:
        ap.error(f"--out {out} already holds an earlier run's results ({', '.join(found)}); pass --overwrite to "
                 "replace them (the episode cache is kept either way), or choose another --out")
    try:
        check_output_dir(out, "--out")
        check_output_file(cache, "--cache")
        return PlayCache(cache)
    except (OutputError, PermissionError) as e:
        ap.error(str(e))


def row_printer() -> tuple[list[dict], Callable[[dict], None]]:
    "The episodes played in this run (a list `run_plays` fills through the callback) and the callback, which says each."
    played: list[dict] = []
    said = lambda row: f"{row['problem']} {row['controller']} seed {row['seed']}: {row['test_accuracy']:.1f}%"
    return played, lambda row: played.append(row) or print(f"{said(row)} ({row['seconds']:.0f} s)", flush=True)


def markdown(r: dict) -> str:
    "The per-problem table and the paired comparisons."
    c = r["config"]
    lines = [
        f"Per-instance selector (`esper.tamiyo.selector`) fitted on suite `{c['train_suite']}`'s plan search (every "
        f"plan on tune seeds {', '.join(map(str, c['tune_seeds']))}: {r['cost']['plan_search_episodes']} episodes, and "
        f"one first epoch per train problem for its features), played on suite `{c['suite']}` v{c['suite_version']} "
        f"at test seeds {', '.join(map(str, c['test_seeds']))}; test accuracy %. PPO and open-loop: the means over "
        f"the run seeds of `{c['bench']}`.",
        "",
        "| problem | nearest train problem | plan (cut) | cut | plan (whole) | whole | PPO | open-loop | greedy | "
        "best rule | oracle |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in r["problems"]:
        v = p["variants"]
        lines.append(f"| {p['problem']} | {p['nearest']} ({p['distance']:.2f}) | `{v['cut']['plan']}` | "
                     f"{v['cut']['mean']:.1f} | `{v['whole']['plan']}` | {v['whole']['mean']:.1f} | " +
                     " | ".join(f"{p[a]:.1f}" for a in ARMS) + " |")
    m = r["means"]
    lines.append("| **mean** | | | " + f"**{m['cut']:.1f}** | | **{m['whole']:.1f}** | " +
                 " | ".join(f"{m[a]:.1f}" for a in ARMS) + " |")
    lines += ["", f"Paired over {c['pairs']} problem x test-seed pairs (mean ± 95% CI half-width, points):", "",
              "| variant | mean | PPO less selector | selector less open-loop | selector less greedy | "
              "selector less best rule | oracle less selector |", "|---|---|---|---|---|---|---|"]
    for v in r["variants"]:
        cell = lambda k, d=r["paired"][v]: f"{d[k]['mean']:+.2f} ± {d[k]['ci95']:.2f}"
        lines.append(f"| {v} | {m[v]:.1f} | {cell('ppo less selector')} | {cell('selector less open-loop')} | "
                     f"{cell('selector less greedy')} | {cell('selector less best rule')} | "
                     f"{cell('oracle less selector')} |")
    rc = r["replay_check"]
    lines += ["", f"The benchmark's best rule on this suite: {r['bench_rule']}. Features (standardized over the train "
              f"problems; those equal on all of them are not read): {', '.join(r['features_read'])}. "
              f"Replays of episodes the benchmark also played: {rc['identical']} of {rc['shared']} identical "
              f"(largest gap {rc['max_gap']:.2f} points).", "",
              f"Command: `{r['command']}` at {c['git_commit']}"
              + (" (with uncommitted changes)." if c.get("git_dirty") else ".")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="selector.py")
    ap.add_argument("--train-suite", default="train", help="the suite the selector learns from (default: train)")
    ap.add_argument("--suite", default="heldout", help="the suite it is judged on (default: heldout)")
    ap.add_argument("--bench", default="nbs/results/bench_suite/results.json",
                    help="a suite benchmark's results.json on --suite (default: nbs/results/bench_suite/results.json)")
    ap.add_argument("--tune-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=list(TUNE_SEEDS),
                    help=f"seeds of the plan search (default: {' '.join(map(str, TUNE_SEEDS))})")
    ap.add_argument("--test-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=None,
                    help="seeds that report (default: the benchmark's test seeds)")
    ap.add_argument("--cache", default="runs/plays.jsonl", help="episodes already played (default: runs/plays.jsonl)")
    ap.add_argument("--workers", type=positive_int, default=1, help="worker processes (default: 1)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(FILES)}")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    try:
        train, suite = get_suite(a.train_suite), get_suite(a.suite)
    except ValueError as e:
        ap.error(f"{e} (suites: {', '.join(SUITES)})")
    try:
        bench = json.loads(Path(a.bench).read_text())
        summary = bench["summary"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--bench {a.bench}: not a suite benchmark's results ({type(e).__name__}: {e})")
    if (summary.get("suite"), summary.get("version")) != (suite.name, suite.version):
        ap.error(f"--bench {a.bench} is on suite {summary.get('suite')!r} v{summary.get('version')}, not "
                 f"{suite.name!r} v{suite.version}")
    test = a.test_seeds or list(summary["test_seeds"])
    if set(a.tune_seeds) & set(test):
        ap.error("--tune-seeds and the test seeds must not share a seed: nothing may be chosen on a reporting seed")
    cache = open_outputs(ap, a.out, a.cache, a.overwrite)
    t0, (played, on_row) = time.perf_counter(), row_printer()
    with stops_in_one_line("selector.py", f"the episodes played so far are kept in {a.cache}"):
        with stoppable_pool(a.workers) if a.workers > 1 else contextlib.nullcontext() as pool:
            tuning = [Play(p, c, s) for p in train.problems for c in plan_controllers(p) for s in a.tune_seeds]
            rows = run_plays(tuning, cache, on_row=on_row, pool=pool)
            cut = Selector("cut").fit(rows, train.problems, a.tune_seeds, a.tune_seeds[0])
            selectors = {"cut": cut, "whole": copy.copy(cut)}
            selectors["whole"].variant = "whole"
            feats = {p.name: problem_features(p, a.tune_seeds[0]) for p in suite.problems}
            chosen = {v: {p.name: f"plan:{s.plan_for(feats[p.name], fresh_model(p))}" for p in suite.problems}
                      for v, s in selectors.items()}
            jobs = [Play(p, chosen[v][p.name], s) for v in VARIANTS for p in suite.problems for s in test]
            test_rows = run_plays(jobs, cache, on_row=on_row, pool=pool)
    try:
        arms = bench_arms(bench, suite, test)
    except ValueError as e:
        ap.exit(1, f"selector.py: error: {e}\n")
    got = {(r["problem"], r["controller"], r["seed"]): r["test_accuracy"] for r in test_rows}
    mine = {v: {(p, s): got[(p, chosen[v][p], s)] for p in suite.names for s in test} for v in VARIANTS}
    problems = []
    for p in suite.names:
        near, dist = cut.nearest(feats[p])
        row = {"problem": p, "nearest": near, "distance": dist, "variants": {
            v: {"plan": chosen[v][p].removeprefix("plan:"), "mean": statistics.fmean(mine[v][(p, s)] for s in test)}
            for v in VARIANTS}}
        problems.append(row | {a_: statistics.fmean(arms[a_][(p, s)] for s in test) for a_ in ARMS})
    means = {k: statistics.fmean(v.values()) for k, v in (mine | arms).items()}
    r = {
        "command": " ".join(["python lab/probes/selector.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"train_suite": train.name, "train_version": train.version, "suite": suite.name,
                   "suite_version": suite.version, "bench": a.bench, "tune_seeds": a.tune_seeds, "test_seeds": test,
                   "feature_seed": a.tune_seeds[0], "pairs": len(suite.names) * len(test), **git_state(Path.cwd())},
        "cost": {"plan_search_episodes": len(tuning), "feature_epochs": len(train.problems),
                 "ppo_training_episodes": bench.get("config", {}).get("episodes")},
        "features_read": [n for n, s in zip(FEATURE_NAMES, cut.scale) if s > 1e-12],
        "variants": list(VARIANTS),
        "means": means,
        "bench_rule": summary.get("rule"),
        "paired": {v: {"ppo less selector": paired(arms["ppo"], mine[v]),
                       "selector less open-loop": paired(mine[v], arms["open-loop"]),
                       "selector less greedy": paired(mine[v], arms["greedy"]),
                       "selector less best rule": paired(mine[v], arms["best rule"]),
                       "oracle less selector": paired(arms["oracle"], mine[v])} for v in VARIANTS},
        "problems": problems,
        "replay_check": replay_check(bench, test_rows),
        "selector": cut.to_dict() | {"variant": list(VARIANTS)},
        "seconds": round(time.perf_counter() - t0, 1),
        "episodes_played": len(played),
        "episodes": test_rows,
    }
    table = markdown(r)
    print(table + f"\n{len(played)} episodes played ({r['seconds']:.0f} s); the rest came from {a.cache}")
    write_files_atomic(Path(a.out), {"results.json": json_text(relative_paths(r)), "results.md": table})


if __name__ == "__main__":
    main()
