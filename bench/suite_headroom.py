"""Is there anything for a learned controller to win? Every rule on every problem of a suite, and the oracle's margin.

For each problem: every plan of its menu (each blueprint alone in each slot, each pair across the first two slots,
within the parameter budget) on the tune seeds; the best one per problem (the oracle) and the best one over the
suite (the best single rule) are then scored on the test seeds with the greedy rule and the heuristic. Prints and
writes the per-problem table, the oracle's margin over the best of the three with its paired 95% CI, and a heatmap
of problems x plans. Accuracies are on each task's test split. Episodes are cached (--cache): a rerun plays only
what is missing. With --epochs 1 3 5 7 each germination is tried at each of those planting epochs; --prune keeps
that affordable by successive halving over the tune seeds; --problems plays a named subset of the suite. With
--selector FILE it also fits the per-instance selector (esper.tamiyo.selector) on the suite's plan search and saves
it: the `selector:FILE` controller then plays, on any problem, the best plan that fits whole of its nearest problem
here (`make run` compares one fitted on small-train).

    OMP_NUM_THREADS=1 python bench/suite_headroom.py --suite heldout --workers 2 --out runs/headroom
"""
import os
import statistics
import sys
import time
from pathlib import Path

from esper.cli import (OneLineParser, add_overwrite_argument, check_data_dir, earlier_results, positive_int,
                       DistinctSeeds, seed_int)
from esper.leyline.files import OutputError, check_output_dir, check_output_file, figure_bytes, json_text, \
    relative_paths, write_files_atomic
from esper.tamiyo.plan_search import REACTIVE_GRID, TEST_SEEDS, TUNE_SEEDS, PlayCache, search
from esper.tamiyo.problems import SUITES, Suite, get_suite
from esper.tamiyo.selector import Selector
from esper.tasks.registry import TaskDataError
from esper.cli.runs import stops_in_one_line
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)

FILES = ("headroom.json", "headroom.md", "headroom.png")


def markdown_in_metric(r: dict) -> str:
    "The per-problem table of a suite measured otherwise than by accuracy (text: bits per character, lower is better)."
    metric = r["metric"]
    lines = [
        f"Suite `{r['suite']}` v{r['version']}: test {metric} (task test splits; lower is better), mean over test "
        f"seeds {', '.join(map(str, r['test_seeds']))}; plans chosen on tune seeds "
        f"{', '.join(map(str, r['tune_seeds']))} by the score controllers read (higher as {metric} falls).",
        "",
        "| problem | oracle plan | oracle | best single rule | greedy | heuristic | oracle less best rival |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in r["problems"]:
        m = p["in_metric"]
        lines.append(f"| {p['problem']} | `{p['oracle_plan'].removeprefix('plan:')}` | {m['oracle']:.3f} | "
                     f"{m['best single rule']:.3f} | {m['greedy']:.3f} | {m['heuristic']:.3f} | "
                     f"{m['oracle'] - min(m[k] for k in ('best single rule', 'greedy', 'heuristic')):+.3f} |")
    lines += ["", f"Best single rule: `{r['best_single_rule'].removeprefix('plan:')}`. In the score's points, the "
              f"oracle's margin over the best rival ({r['best_rival']}) is {r['margin']:+.2f} ± {r['margin_ci95']:.2f} "
              "(paired 95% CI over problems x seeds)."]
    return "\n".join(lines) + "\n"


def markdown(r: dict) -> str:
    "The per-problem table and the summary lines."
    if "metric" in r:
        return markdown_in_metric(r)
    rivals = [k for k in ("best single rule", "greedy", "heuristic", "tuned reactive rule") if k in r["rival_means"]]
    subset = f" ({r['subset']})" if "subset" in r else ""
    lines = [
        f"Suite `{r['suite']}` v{r['version']}{subset}: test accuracy % (task test splits), mean over test seeds "
        f"{', '.join(map(str, r['test_seeds']))}; plans chosen on tune seeds {', '.join(map(str, r['tune_seeds']))}.",
        "",
        "| problem | oracle plan | oracle | " + " | ".join(rivals) + " | margin |",
        "|---|---|---|" + "---|" * len(rivals) + "---|",
    ]
    for p in r["problems"]:
        lines.append(f"| {p['problem']} | `{p['oracle_plan'].removeprefix('plan:')}` | {p['oracle']:.1f} | "
                     + "".join(f"{p[k]:.1f} | " for k in rivals) + f"{p['margin']:+.1f} |")
    means = r["rival_means"]
    tuned = (f" Tuned reactive rule: `{r['reactive_rule']}` (chosen on the tune seeds among "
             f"{len(REACTIVE_GRID)} settings)." if "reactive_rule" in r else "")
    lines += [
        f"| **mean** | | **{r['oracle_mean']:.1f}** | " + "".join(f"{means[k]:.1f} | " for k in rivals)
        + f"**{r['margin']:+.1f}** |",
        "",
        f"Best single rule: `{r['best_single_rule'].removeprefix('plan:')}`.{tuned} The oracle's margin over the best "
        f"rival "
        f"({r['best_rival']}): {r['margin']:+.2f} ± {r['margin_ci95']:.2f} points (paired 95% CI over problems x "
        f"seeds); at least 2 points on {r['problems_with_margin_2']} of {len(r['problems'])} problems.",
    ]
    if "pruning" in r:
        q = r["pruning"]
        lines += ["", f"Pruned by successive halving over the tune seeds (each passes on the best {q['keep']:g} of "
                  f"each problem's plans and of the single rules, at least {q['least']}): the search asked for "
                  f"{q['episodes']} episodes, {q['episodes_unpruned']} without pruning."]
    return "\n".join(lines) + "\n"


def heatmap(r: dict):
    "Problems x plans: tune-seed mean test accuracy, each problem's best plan boxed."
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    problems = [p["problem"] for p in r["problems"]]
    means = r["tune_means"]
    plans = list(dict.fromkeys(c for p in problems for c in means[p]))
    if len(plans) > 40:  # the oracles, the single rule, and the best plans overall
        overall = {c: statistics.fmean(means[p].get(c, 0.0) for p in problems) for c in plans}
        keep = {p["oracle_plan"] for p in r["problems"]} | {r["best_single_rule"]}
        keep |= set(sorted(plans, key=overall.get, reverse=True)[:15])
        plans = [c for c in plans if c in keep]
    grid = [[means[p].get(c, float("nan")) for c in plans] for p in problems]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(plans) + 3), max(3, 0.35 * len(problems) + 2)))
    im = ax.imshow(grid, aspect="auto", cmap="viridis")
    for i, p in enumerate(r["problems"]):
        if p["oracle_plan"] in plans:
            ax.add_patch(Rectangle((plans.index(p["oracle_plan"]) - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2))
    ax.set_xticks(range(len(plans)), [c.removeprefix("plan:") for c in plans], rotation=90, fontsize=7)
    ax.set_yticks(range(len(problems)), problems, fontsize=8)
    fig.colorbar(im, ax=ax, label="test score (tune seeds)" if "metric" in r else "test accuracy % (tune seeds)")
    ax.set_title(f"{r['suite']}: every plan on every problem (red: each problem's best)")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="suite_headroom.py")
    ap.add_argument("--suite", default="heldout", help=f"a suite: {', '.join(SUITES)} (default: heldout)")
    ap.add_argument("--workers", type=positive_int, default=1, help="worker processes (default: 1)")
    ap.add_argument("--tune-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=list(TUNE_SEEDS),
                    help=f"seeds that choose plans (default: {' '.join(map(str, TUNE_SEEDS))})")
    ap.add_argument("--test-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=list(TEST_SEEDS),
                    help=f"seeds that report (default: {' '.join(map(str, TEST_SEEDS))})")
    ap.add_argument("--epochs", type=positive_int, nargs="+", default=[1],
                    help="planting epochs each germination of the plan search tries (default: 1)")
    ap.add_argument("--prune", type=float, default=None, metavar="FRACTION",
                    help="successive halving over the tune seeds: the fraction of each problem's plans (and of the "
                         "single rules) that each tune seed passes on to the next, in (0, 1) (default: no pruning)")
    ap.add_argument("--problems", nargs="+", default=None, metavar="NAME",
                    help="play only these problems of the suite (default: all of them)")
    ap.add_argument("--reactive", action="store_true",
                    help=f"also tune the reactive rule on the tune seeds ({len(REACTIVE_GRID)} settings of "
                         "reactive:<k>/<x>) and report the best beside the other rivals")
    ap.add_argument("--cache", default="runs/plays.jsonl",
                    help="episodes already played, shared by every suite (default: runs/plays.jsonl)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(FILES)}")
    ap.add_argument("--selector", default=None, metavar="FILE",
                    help="also fit the per-instance selector on this plan search and save it to FILE, a JSON file "
                         "the selector:FILE controller plays (default: none)")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    try:
        suite = get_suite(a.suite)
    except ValueError as e:
        ap.error(f"--suite: {e}")
    if a.problems is not None:
        unknown = [n for n in a.problems if n not in suite.names]
        if unknown:
            ap.error(f"--problems: suite {a.suite} has no problem {unknown[0]!r}; its problems: {', '.join(suite.names)}")
        whole = len(suite)
        suite = Suite(suite.name, suite.version, tuple(p for p in suite.problems if p.name in a.problems),
                      suite.description, suite.held_out)
    if a.prune is not None and not 0 < a.prune < 1:
        ap.error(f"--prune {a.prune:g}: the fraction of plans kept at each tune seed must lie in (0, 1)")
    late = sorted({e for p in suite.problems for e in a.epochs if e >= p.max_epochs})
    if late:
        ap.error(f"--epochs {' '.join(map(str, late))}: a seed planted at or after an episode's last epoch never grows "
                 f"(the shortest problem of {a.suite} has {min(p.max_epochs for p in suite.problems)} epochs)")
    if set(a.tune_seeds) & set(a.test_seeds):
        ap.error("--tune-seeds and --test-seeds must not share a seed: nothing may be chosen on a reporting seed")
    if a.selector is not None and Path(a.selector).exists() and not a.overwrite:
        ap.error(f"--selector {a.selector} exists: pass --overwrite to replace it, or choose another file")
    found = earlier_results(a.out, FILES)
    if found and not a.overwrite:
        ap.error(f"--out {a.out} already holds an earlier run's results ({', '.join(found)}); pass --overwrite to "
                 "replace them (the episode cache is kept either way), or choose another --out")
    try:  # both are checked before the first episode, not after the last
        check_output_dir(a.out, "--out")
        check_output_file(a.cache, "--cache")
        if a.selector is not None:
            check_output_file(a.selector, "--selector")
        check_data_dir(os.environ.get("ESPER_DATA_DIR"), "ESPER_DATA_DIR")
        cache = PlayCache(a.cache)
    except (OutputError, PermissionError) as e:
        ap.error(str(e))
    t0, played = time.perf_counter(), []
    said = lambda row: (f"{row['test_metric']:.3f} {row['metric']}" if "metric" in row else f"{row['test_accuracy']:.1f}%")
    on_row = lambda row: played.append(row) or print(f"{row['problem']} {row['controller']} seed {row['seed']}: "
                                                     f"{said(row)} ({row['seconds']:.0f} s)", flush=True)
    with stops_in_one_line("suite_headroom.py", f"the episodes played so far are kept in {a.cache}"):
        try:
            r = search(suite, cache, a.workers, tuple(a.epochs), tuple(a.tune_seeds), tuple(a.test_seeds),
                       on_row=on_row, reactive=REACTIVE_GRID if a.reactive else (), prune=a.prune)
        except TaskDataError as e:  # data that cannot be read or fetched: one line, the episodes played are kept
            ap.exit(1, f"suite_headroom.py: error: {e}; the episodes played so far are kept in {a.cache}\n")
    if a.problems is not None:
        r["subset"] = f"{len(suite)} of its {whole} problems"
    if a.selector is not None:  # the features: a first epoch of each problem, on the first tune seed
        selector = Selector("whole").fit(r, suite.problems, tuple(a.tune_seeds), a.tune_seeds[0])
        selector.save(a.selector)
        r["selector"] = a.selector
        print(f"wrote the selector fitted on {len(suite)} problems' plan search to {a.selector}")
    r["seconds"] = round(time.perf_counter() - t0, 1)
    r["episodes_played"] = len(played)
    r["command"] = " ".join(["python bench/suite_headroom.py", *(argv if argv is not None else sys.argv[1:])])
    table = markdown(r)
    print(table + f"\n{len(played)} episodes played ({r['seconds']:.0f} s); the rest came from {a.cache}")
    write_files_atomic(Path(a.out), {"headroom.json": json_text(relative_paths(r)), "headroom.md": table,
                                     "headroom.png": figure_bytes(heatmap(r))})


if __name__ == "__main__":
    main()
