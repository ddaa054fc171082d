"""Can a controller that reads a seed's first epoch take the headroom seed failures leave? A probe on a duds suite.

Reads the report `suite_headroom.py` wrote for a suite with seed failures, the split `events_headroom.py` wrote
beside it (each problem's hindsight plans) and the episode cache. Per problem, the replanting controllers
`replant:<plan>~<fallback>` (the plan best on the tune episodes whose seeds are sound; as the fallback, each
blueprint of the menu that does not fail and that the budget pays for in the failing seed's slot) are played on the
tune seeds; the best one per problem is played on the test seeds beside the open-loop oracle and the hindsight
oracle. Prints and writes the per-problem table and the
margins over the open-loop oracle (paired 95% CIs over problems x seeds), on every test episode and on those whose
seeds fail.

    OMP_NUM_THREADS=1 python lab/probes/duds_replant.py --report nbs/results/duds/headroom.json \\
        --split nbs/results/duds/events_headroom.json --cache runs/duds_plays.jsonl --out nbs/results/duds
"""
import json
import statistics
import sys
from pathlib import Path

from esper.cli import OneLineParser, add_overwrite_argument, earlier_results
from esper.leyline.files import check_output_dir, json_text, relative_paths, write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import PlayCache, Play, fresh_model, run_plays
from esper.tamiyo.plans import Germination, Plan, fits
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers the duds suites)

FILES = ("replant.json", "replant.md")
KINDS = ("open-loop oracle", "hindsight oracle", "tuned replant")


def candidates(problem, calm_plan: str) -> list[str]:
    "The replanting controllers of a problem: its calm-episode plan, each sound blueprint of the menu as fallback."
    plan, model = Plan.parse(calm_plan.removeprefix("plan:")), fresh_model(problem)
    bad = set(problem.event.blueprints)
    slots = [g.slot for g in plan.germinations if g.blueprint in bad]
    if not slots:
        return []
    pays = lambda b: all(model.fits(s, b) and fits(model, [Germination(1, s, b)]) for s in slots)  # alone, at least
    return [f"replant:{plan}~{b}" for b in problem.blueprints if b not in bad and pays(b)]


def analyse(report: dict, split: dict, cache: PlayCache, workers: int = 1) -> dict:
    "Per problem and over the suite: the open-loop and hindsight oracles and the tuned replanting controller."
    suite, tune, test = get_suite(report["suite"]), report["tune_seeds"], report["test_seeds"]
    hind = {p["problem"]: p for p in split["problems"]}
    out, diffs = [], {k: {"all": [], "fails": []} for k in KINDS[1:]}
    for pr in report["problems"]:
        p, h = suite[pr["problem"]], hind[pr["problem"]]
        cands = candidates(p, h["hindsight_plans"]["keeps"]) or [pr["oracle_plan"]]
        rows = run_plays([Play(p, c, s) for c in cands for s in tune], cache, workers)
        score = {c: statistics.fmean(r["test_accuracy"] for r in rows if r["controller"] == c) for c in cands}
        best = max(cands, key=lambda c: (score[c], -cands.index(c)))
        fails = {s: p.event.draw(s) is not None for s in test}
        plans = {"open-loop oracle": {s: pr["oracle_plan"] for s in test},
                 "hindsight oracle": {s: h["hindsight_plans"]["shifts" if fails[s] else "keeps"] for s in test},
                 "tuned replant": {s: best for s in test}}
        acc = {k: [r["test_accuracy"] for r in run_plays([Play(p, c[s], s) for s in test], cache, workers)]
               for k, c in plans.items()}
        bad = [i for i, s in enumerate(test) if fails[s]]
        row = {"problem": p.name, "replant": best, "replant_tune_means": score, "failing_seeds": [test[i] for i in bad]}
        for k in KINDS:
            row[k] = {"all": statistics.fmean(acc[k]),
                      "fails": statistics.fmean(acc[k][i] for i in bad) if bad else None}
        for k in KINDS[1:]:
            d = [a - b for a, b in zip(acc[k], acc["open-loop oracle"])]
            diffs[k]["all"] += d
            diffs[k]["fails"] += [d[i] for i in bad]
        out.append(row)
    margins = {k: {w: (list(mean_ci95(v)) if v else None) for w, v in d.items()} for k, d in diffs.items()}
    means = {k: statistics.fmean(r[k]["all"] for r in out) for k in KINDS}
    return {"suite": suite.name, "version": suite.version, "tune_seeds": tune, "test_seeds": test, "problems": out,
            "means": means, "margins_over_open_loop": margins,
            "failing_test_episodes": len(diffs["tuned replant"]["fails"]),
            "test_episodes": len(diffs["tuned replant"]["all"])}


def markdown(r: dict) -> str:
    "The per-problem table and the margins."
    cell = lambda v: "-" if v is None else f"{v:.1f}"
    lines = [f"Suite `{r['suite']}` v{r['version']}: test accuracy %, mean over test seeds "
             f"{', '.join(map(str, r['test_seeds']))} (all / the episodes whose seeds fail); chosen on tune seeds "
             f"{', '.join(map(str, r['tune_seeds']))}.", "",
             "| problem | " + " | ".join(KINDS) + " | replant controller chosen |",
             "|---|" + "---|" * len(KINDS) + "---|"]
    for p in r["problems"]:
        lines.append(f"| {p['problem']} | " + "".join(f"{cell(p[k]['all'])} / {cell(p[k]['fails'])} | " for k in KINDS)
                     + f"`{p['replant']}` |")
    lines.append("| **mean** | " + "".join(f"**{r['means'][k]:.1f}** | " for k in KINDS) + " |")
    lines.append("")
    for k, m in r["margins_over_open_loop"].items():
        parts = [f"{w} {v[0]:+.2f} ± {v[1]:.2f}" for w, v in m.items() if v is not None]
        lines.append(f"- {k} less the open-loop oracle: " + "; ".join(parts) + " (paired 95% CI, problems x seeds)")
    lines.append(f"- {r['failing_test_episodes']} of {r['test_episodes']} test episodes have failing seeds.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="duds_replant.py")
    ap.add_argument("--report", required=True, help="headroom.json that suite_headroom.py wrote for a duds suite")
    ap.add_argument("--split", required=True, help="events_headroom.json that events_headroom.py wrote for it")
    ap.add_argument("--cache", default="runs/plays.jsonl", help="the episode cache (default: runs/plays.jsonl)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(FILES)}")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    report, split = (json.loads(Path(f).read_text()) for f in (a.report, a.split))
    found = earlier_results(a.out, FILES)
    if found and not a.overwrite:
        ap.error(f"--out {a.out} already holds {', '.join(found)}; pass --overwrite to replace them")
    check_output_dir(a.out, "--out")
    r = analyse(report, split, PlayCache(a.cache), a.workers)
    r["command"] = " ".join(["python lab/probes/duds_replant.py", *(argv if argv is not None else sys.argv[1:])])
    table = markdown(r)
    print(table)
    write_files_atomic(Path(a.out), {"replant.json": json_text(relative_paths(r)), "replant.md": table})


if __name__ == "__main__":
    main()
