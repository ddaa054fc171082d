"""Does choosing *when* to plant raise the oracle and the best single plan? Two headroom reports, paired.

Reads two `bench/suite_headroom.py` reports of the same suite, problems and test seeds, one searched with several
planting epochs (--timing) and one with epoch 1 alone (--epoch1), and the episode cache both were played from.
For each problem and test seed it pairs the per-problem oracle of one with that of the other, and the best single
plan (as the problem's budget plays it) likewise; prints the per-problem table and the paired mean differences with
their 95% CIs over problems x seeds, and writes them to --out (JSON and markdown). Example, from the project root:

    .venv/bin/python lab/probes/timing_compare.py --timing nbs/results/suite_headroom/timing \\
        --epoch1 nbs/results/suite_headroom/timing/epoch1 --cache runs/plays.jsonl \\
        --out nbs/results/suite_headroom/timing/compare
"""
import json
import statistics
import sys
from pathlib import Path

from esper.cli import OneLineParser
from esper.leyline.files import json_text, relative_paths, write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import Play, PlayCache, as_played
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)

ROLES = ("oracle", "best single rule")


def scores(report: dict, cache: PlayCache) -> dict[str, dict[str, list[float]]]:
    "Per problem, the oracle's and the best single plan's test accuracy on each test seed, from the cache."
    suite = get_suite(report["suite"])
    out = {}
    for p in report["problems"]:
        problem = suite[p["problem"]]
        plays = {"oracle": p["oracle_plan"], "best single rule": as_played(problem, report["best_single_rule"])}
        out[p["problem"]] = {}
        for role, controller in plays.items():
            jobs = [Play(problem, controller, s) for s in report["test_seeds"]]
            missing = [j.key for j in jobs if j not in cache]
            if missing:
                raise SystemExit(f"timing_compare.py: error: {missing[0]} is not in the cache; play the report again")
            out[p["problem"]][role] = [cache.rows[j.key]["test_accuracy"] for j in jobs]
    return out


def compare(timing: dict, epoch1: dict, cache: PlayCache) -> dict:
    "The paired differences, timing less epoch 1, per problem and over problems x seeds."
    if (timing["suite"], timing["test_seeds"]) != (epoch1["suite"], epoch1["test_seeds"]):
        raise SystemExit("timing_compare.py: error: the two reports differ in suite or test seeds")
    if [p["problem"] for p in timing["problems"]] != [p["problem"] for p in epoch1["problems"]]:
        raise SystemExit("timing_compare.py: error: the two reports differ in problems")
    a, b = scores(timing, cache), scores(epoch1, cache)
    per_problem, pooled = [], {r: [] for r in ROLES}
    for p, pe in zip(timing["problems"], epoch1["problems"]):
        name = p["problem"]
        row = {"problem": name, "oracle_plan": p["oracle_plan"], "epoch1_oracle_plan": pe["oracle_plan"]}
        for r in ROLES:
            d = [x - y for x, y in zip(a[name][r], b[name][r])]
            pooled[r] += d
            row[r] = {"timing": statistics.fmean(a[name][r]), "epoch 1": statistics.fmean(b[name][r])}
        per_problem.append(row)
    summary = {}
    for r in ROLES:
        m, ci = mean_ci95(pooled[r])
        summary[r] = {"timing": statistics.fmean(x["timing"] for x in (q[r] for q in per_problem)),
                      "epoch 1": statistics.fmean(x["epoch 1"] for x in (q[r] for q in per_problem)),
                      "difference": m, "ci95": ci, "pairs": len(pooled[r])}
    return {"suite": timing["suite"], "version": timing["version"], "test_seeds": timing["test_seeds"],
            "timing_command": timing["command"], "epoch1_command": epoch1["command"],
            "best_single_rule": {"timing": timing["best_single_rule"], "epoch 1": epoch1["best_single_rule"]},
            "summary": summary, "problems": per_problem}


def markdown(c: dict) -> str:
    "The per-problem table and the two paired differences."
    lines = [f"Suite `{c['suite']}` v{c['version']}, test seeds {', '.join(map(str, c['test_seeds']))}: test accuracy %"
             " of plans chosen with planting epochs 1, 3, 5, 7 (timing) and with epoch 1 alone.", "",
             "| problem | oracle plan (timing) | oracle plan (epoch 1) | oracle, timing | oracle, epoch 1 | "
             "single, timing | single, epoch 1 |", "|---|---|---|---|---|---|---|"]
    for p in c["problems"]:
        o, s = p["oracle"], p["best single rule"]
        lines.append(f"| {p['problem']} | `{p['oracle_plan'].removeprefix('plan:')}` | "
                     f"`{p['epoch1_oracle_plan'].removeprefix('plan:')}` | {o['timing']:.1f} | {o['epoch 1']:.1f} | "
                     f"{s['timing']:.1f} | {s['epoch 1']:.1f} |")
    single = c["best_single_rule"]
    lines += ["", f"Best single rule: `{single['timing'].removeprefix('plan:')}` (timing), "
              f"`{single['epoch 1'].removeprefix('plan:')}` (epoch 1).", ""]
    for r, s in c["summary"].items():
        lines.append(f"- {r}: {s['timing']:.2f} with timing, {s['epoch 1']:.2f} with epoch 1 alone; timing less epoch 1 "
                     f"{s['difference']:+.2f} ± {s['ci95']:.2f} points (paired 95% CI over {s['pairs']} problem x seed "
                     "pairs).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="timing_compare.py")
    ap.add_argument("--timing", required=True, help="folder of the report searched with several planting epochs")
    ap.add_argument("--epoch1", required=True, help="folder of the report searched with epoch 1 alone")
    ap.add_argument("--cache", default="runs/plays.jsonl", help="the episode cache both were played from")
    ap.add_argument("--out", required=True, help="folder for compare.json and compare.md")
    a = ap.parse_args(argv)
    reports = []
    for flag, folder in (("--timing", a.timing), ("--epoch1", a.epoch1)):
        path = Path(folder) / "headroom.json"
        if not path.is_file():
            ap.error(f"{flag}: {path} is not a headroom report")
        reports.append(json.loads(path.read_text()))
    c = compare(*reports, PlayCache(a.cache))
    c["command"] = " ".join(["python lab/probes/timing_compare.py", *(argv if argv is not None else sys.argv[1:])])
    table = markdown(c)
    print(table)
    write_files_atomic(Path(a.out), {"compare.json": json_text(relative_paths(c)), "compare.md": table})


if __name__ == "__main__":
    main()
