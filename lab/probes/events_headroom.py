"""What reacting to a run event could win: an events suite's headroom, on episodes that shift and on all of them.

Reads the report `suite_headroom.py` wrote for an events suite (each problem's open-loop oracle, the best plan on the
tune seeds; the tuned reactive rule; every searched plan's tune mean) and its episode cache, and adds a hindsight
oracle that knows whether an episode's data will shift: per problem, the best searched plan on the tune episodes that
shift and the best on those that do not, each played on the test episodes of its kind. Prints and writes, per problem
and over the suite, the test accuracy of the open-loop oracle, the tuned reactive rule and the hindsight oracle, on
every test episode and on those that shift, with the margins over the open-loop oracle (paired 95% CIs over
problems x seeds). Episodes already in the cache are not played again.

    OMP_NUM_THREADS=1 python lab/probes/events_headroom.py --report nbs/results/events/headroom.json \
        --cache runs/events_plays.jsonl --out nbs/results/events
"""
import json
import statistics
import sys
from pathlib import Path

from esper.cli import OneLineParser, add_overwrite_argument, earlier_results
from esper.leyline.files import check_output_dir, json_text, relative_paths, write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import PlayCache, Play, run_plays
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers the events suites)

FILES = ("events_headroom.json", "events_headroom.md")
KINDS = ("open-loop oracle", "tuned reactive rule", "hindsight oracle")


def hindsight_plans(problem, tune_means: dict, rows: list[dict], tune: list[int]) -> dict[bool, str]:
    "Per kind of episode (shifts or not), the searched plan with the best mean on the tune episodes of that kind."
    plans, out = list(tune_means), {}
    for shifts in (False, True):
        seeds = [s for s in tune if (problem.event.draw(s) is not None) == shifts]
        if not seeds:
            raise ValueError(f"{problem.name}: no tune seed {'shifts' if shifts else 'keeps its data'}; add one")
        acc = {(r["controller"], r["seed"]): r["test_accuracy"] for r in rows if r["problem"] == problem.name}
        score = {c: statistics.fmean(acc[c, s] for s in seeds) for c in plans}
        out[shifts] = max(plans, key=lambda c: (score[c], -plans.index(c)))
    return out


def analyse(report: dict, cache: PlayCache, workers: int = 1) -> dict:
    "Per problem and over the suite: the three controllers on every test episode and on the shifted ones."
    suite, tune, test = get_suite(report["suite"]), report["tune_seeds"], report["test_seeds"]
    rows = list(cache.rows.values())
    out, diffs = [], {k: {"all": [], "shifted": []} for k in KINDS[1:]}
    for pr in report["problems"]:
        p = suite[pr["problem"]]
        hind = hindsight_plans(p, report["tune_means"][p.name], rows, tune)
        shift_at = {s: p.event.draw(s) for s in test}
        jobs = {"open-loop oracle": [Play(p, pr["oracle_plan"], s) for s in test],
                "tuned reactive rule": [Play(p, report["reactive_rule"], s) for s in test],
                "hindsight oracle": [Play(p, hind[shift_at[s] is not None], s) for s in test]}
        acc = {k: [r["test_accuracy"] for r in run_plays(js, cache, workers)] for k, js in jobs.items()}
        shifted = [i for i, s in enumerate(test) if shift_at[s] is not None]
        row = {"problem": p.name, "hindsight_plans": {"keeps": hind[False], "shifts": hind[True]},
               "open_loop_plan": pr["oracle_plan"], "shift_epochs": {str(s): shift_at[s] for s in test}}
        for k in KINDS:
            row[k] = {"all": statistics.fmean(acc[k]),
                      "shifted": statistics.fmean(acc[k][i] for i in shifted) if shifted else None}
        for k in KINDS[1:]:
            d = [a - b for a, b in zip(acc[k], acc["open-loop oracle"])]
            diffs[k]["all"] += d
            diffs[k]["shifted"] += [d[i] for i in shifted]
        out.append(row)
    margins = {k: {w: (list(mean_ci95(v)) if v else None) for w, v in d.items()} for k, d in diffs.items()}
    return {"suite": suite.name, "version": suite.version, "tune_seeds": tune, "test_seeds": test,
            "reactive_rule": report["reactive_rule"], "problems": out, "margins_over_open_loop": margins,
            "shifted_test_episodes": len(diffs["hindsight oracle"]["shifted"]),
            "test_episodes": len(diffs["hindsight oracle"]["all"])}


def markdown(r: dict) -> str:
    "The per-problem table and the margins."
    cell = lambda v: "-" if v is None else f"{v:.1f}"
    lines = [f"Suite `{r['suite']}` v{r['version']}: test accuracy %, mean over test seeds "
             f"{', '.join(map(str, r['test_seeds']))} (all / the episodes whose data shifts); plans chosen on tune "
             f"seeds {', '.join(map(str, r['tune_seeds']))}. Tuned reactive rule: `{r['reactive_rule']}`.", "",
             "| problem | shifts at | " + " | ".join(KINDS) + " | hindsight plans (keeps / shifts) |",
             "|---|---|" + "---|" * len(KINDS) + "---|"]
    for p in r["problems"]:
        at = ", ".join(f"{s}@{e}" if isinstance(e, int) else str(s)  # a shift's epoch; a failure's seed alone
                       for s, e in p["shift_epochs"].items() if e is not None) or "none"
        lines.append(f"| {p['problem']} | {at} | " + "".join(f"{cell(p[k]['all'])} / {cell(p[k]['shifted'])} | "
                                                        for k in KINDS)
                     + f"`{p['hindsight_plans']['keeps'].removeprefix('plan:')}` / "
                       f"`{p['hindsight_plans']['shifts'].removeprefix('plan:')}` |")
    lines.append("")
    for k, m in r["margins_over_open_loop"].items():
        parts = [f"{w} {v[0]:+.2f} ± {v[1]:.2f}" for w, v in m.items() if v is not None]
        lines.append(f"- {k} less the open-loop oracle: " + "; ".join(parts) + " (paired 95% CI, problems x seeds)")
    lines.append(f"- {r['shifted_test_episodes']} of {r['test_episodes']} test episodes shift.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="events_headroom.py")
    ap.add_argument("--report", required=True, help="headroom.json that suite_headroom.py wrote for an events suite")
    ap.add_argument("--cache", default="runs/plays.jsonl", help="the episode cache (default: runs/plays.jsonl)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(FILES)}")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    report = json.loads(Path(a.report).read_text())
    if "reactive_rule" not in report:
        ap.error("--report: no tuned reactive rule in it; run suite_headroom.py with --reactive")
    found = earlier_results(a.out, FILES)
    if found and not a.overwrite:
        ap.error(f"--out {a.out} already holds {', '.join(found)}; pass --overwrite to replace them")
    check_output_dir(a.out, "--out")
    r = analyse(report, PlayCache(a.cache), a.workers)
    r["command"] = " ".join(["python lab/probes/events_headroom.py", *(argv if argv is not None else sys.argv[1:])])
    table = markdown(r)
    print(table)
    write_files_atomic(Path(a.out), {"events_headroom.json": json_text(relative_paths(r)),
                                     "events_headroom.md": table})


if __name__ == "__main__":
    main()
