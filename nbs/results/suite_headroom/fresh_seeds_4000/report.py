"""The headroom report of `heldout` v5 on test seeds, with the plans chosen on the tune seeds 1000-1001 as
`plan_search.search` chooses them, from the episode cache where a problem's every plan is in it, and otherwise from
the tune means that v4's report recorded (`../v4/headroom.json`: the same deterministic episodes). It is
`bench/suite_headroom.py` without the tune pass that an empty cache would replay. From the project root:

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python nbs/results/suite_headroom/fresh_seeds_4000/report.py \
        4000,4001,4002,4003,4004 nbs/results/suite_headroom/fresh_seeds_4000
"""

import json, statistics, sys, time
from pathlib import Path

sys.path.insert(0, "bench")  # run from the project root
import suite_headroom as sh
from esper.leyline.files import figure_bytes, json_text, write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import RIVALS, Play, PlayCache, as_played, plan_controllers, run_plays
from esper.tamiyo.suites import HELDOUT

TUNE = (1000, 1001)


def tune_means(cache):
    v4 = json.load(open("nbs/results/suite_headroom/v4/headroom.json"))["tune_means"]
    out, source = {}, {}
    for p in HELDOUT.problems:
        plans = plan_controllers(p)
        rows = {c: [cache.rows.get(Play(p, c, s).key) for s in TUNE] for c in plans}
        if all(all(r is not None for r in v) for v in rows.values()):
            out[p.name] = {c: statistics.fmean(r["test_accuracy"] for r in v) for c, v in rows.items()}
            source[p.name] = "played"
        else:
            assert set(v4[p.name]) == set(plans), p.name
            out[p.name] = {c: v4[p.name][c] for c in plans}
            source[p.name] = "v4 report"
    return out, source


def choose(means):  # as plan_search.choose
    plans = {p.name: plan_controllers(p) for p in HELDOUT.problems}
    oracle = {p: max(plans[p], key=lambda c: (m[c], -plans[p].index(c))) for p, m in means.items()}
    single, best = None, None
    for i, c in enumerate(dict.fromkeys(c for p in HELDOUT.names for c in plans[p])):
        played = [as_played(p, c) for p in HELDOUT.problems]
        if None in played:
            continue
        score = (statistics.fmean(means[p.name][c2] for p, c2 in zip(HELDOUT.problems, played)), -i)
        if best is None or score > best:
            single, best = c, score
    return oracle, single


def main(test, out):
    t0 = time.perf_counter()
    cache = PlayCache("runs/plays.jsonl")
    means, source = tune_means(cache)
    oracle, single = choose(means)
    print("single:", single, "sources:", source, flush=True)
    jobs = [
        Play(p, c, s)
        for p in HELDOUT.problems
        for c in dict.fromkeys([oracle[p.name], as_played(p, single), "greedy", "heuristic"])
        for s in test
    ]
    played = []
    rows = run_plays(
        jobs,
        cache,
        2,
        on_row=lambda r: (
            played.append(r)
            or print(
                f"{r['problem']} {r['controller']} seed {r['seed']}: {r['test_accuracy']:.1f}% ({r['seconds']:.0f} s)",
                flush=True,
            )
        ),
    )
    acc = {(r["problem"], r["controller"], r["seed"]): r["test_accuracy"] for r in rows}
    per, diffs = [], {k: [] for k in RIVALS}
    for p in HELDOUT.problems:
        o = [acc[p.name, oracle[p.name], s] for s in test]
        riv = dict(
            zip(RIVALS, ([acc[p.name, c, s] for s in test] for c in (as_played(p, single), "greedy", "heuristic")))
        )
        for k, v in riv.items():
            diffs[k] += [a - b for a, b in zip(o, v)]
        per.append(
            {"problem": p.name, "oracle_plan": oracle[p.name], "oracle": statistics.fmean(o)}
            | {k: statistics.fmean(v) for k, v in riv.items()}
        )
    rm = {k: statistics.fmean(r[k] for r in per) for k in RIVALS}
    best = max(RIVALS, key=rm.get)
    for r in per:
        r["margin"] = r["oracle"] - r[best]
    m, ci = mean_ci95(diffs[best])
    r = {
        "suite": "heldout",
        "version": HELDOUT.version,
        "tune_seeds": list(TUNE),
        "test_seeds": list(test),
        "best_single_rule": single,
        "oracle_mean": statistics.fmean(x["oracle"] for x in per),
        "rival_means": rm,
        "best_rival": best,
        "margin": m,
        "margin_ci95": ci,
        "margins_over": {k: list(mean_ci95(v)) for k, v in diffs.items()},
        "problems_with_margin_2": sum(x["margin"] >= 2 for x in per),
        "problems": per,
        "tune_means": means,
        "tune_means_source": source,
        "seconds": round(time.perf_counter() - t0, 1),
        "episodes_played": len(played),
        "command": "python nbs/results/suite_headroom/fresh_seeds_4000/report.py " + " ".join(sys.argv[1:]),
    }
    table = sh.markdown(r)
    print(table, f"{len(played)} episodes played ({r['seconds']:.0f} s)")
    write_files_atomic(
        Path(out), {"headroom.json": json_text(r), "headroom.md": table, "headroom.png": figure_bytes(sh.heatmap(r))}
    )


if __name__ == "__main__":
    main(tuple(int(s) for s in sys.argv[1].split(",")), sys.argv[2])
