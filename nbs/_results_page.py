"""What the results pages share: reading a benchmark's JSON under `nbs/results/` and writing its tables as Markdown.

Imported by the hidden cells of `results.ipynb` and `results_earlier.ipynb` (run from `nbs/`, as nbdev_test and the
docs build run them); the leading underscore keeps it off the site.
"""

import json
import shlex
from pathlib import Path

from IPython.display import Markdown

R = Path("results")


def load(path):
    return json.loads((R / path).read_text())


def out_placeholder(argv):
    "An argument list with the output folder written OUT (it was a scratch folder of the machine that ran it)."
    return ["OUT" if i and argv[i - 1] == "--out" else a for i, a in enumerate(argv)]


def duration(seconds):
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def wall_time(c, folder):
    "A results.json's wall time: every part when it lists them; else its last invocation, said as such on a resume."
    if "parts" in c:
        return f"{duration(c['wall_seconds_all_parts'])} of wall time in {len(c['parts'])} invocation(s)"
    if "--resume" in c["argv"]:
        earlier = (
            "its README gives the earlier ones" if (R / folder / "README.md").exists() else "earlier ones not recorded"
        )
        return f"{duration(c['wall_seconds'])} of wall time in its last invocation, a --resume ({earlier})"
    return f"{duration(c['wall_seconds'])} of wall time"


def learning(folder):
    "The learning benchmark's tables from its results.json, after its commit, machine, wall time and command."
    d = load(f"{folder}/results.json")
    c = d["config"]
    machine = f"{c['cpu_count']}-core {c.get('cpu_model') or 'machine (CPU model not recorded)'}"
    cmd = "OMP_NUM_THREADS=1 python bench/bench_learning.py " + shlex.join(out_placeholder(c["argv"]))
    head = (
        f"`nbs/results/{folder}/`: commit {c['git_commit']}{' (uncommitted changes)' if c['git_dirty'] else ''}, "
        f"{machine}, started {c['started'][:10]}, " + wall_time(c, folder) + f"\n\n    {cmd}\n\n"
    )
    if "summary" in d and "problems" in d["summary"]:
        return Markdown(head + suite_tables(d))
    return Markdown(head + split_wide(d["table"]))


def bold_best(values, fmt="{:.1f}"):
    "The values as shown, the highest in bold (each one that ties it as shown)."
    shown = [fmt.format(v) for v in values]
    top = max(float(s) for s in shown)
    return [f"**{s}**" if float(s) == top else s for s in shown]


def split_wide(md, most=8):
    "Markdown tables of more than `most` columns split in two, each keeping the first column, so none scrolls."
    out, block = [], []

    def flush():
        if not block:
            return
        rows = [r.strip().strip("|").split("|") for r in block]
        n = len(rows[0])
        if n <= most:
            out.extend(block)
        else:
            half = 1 + (n - 1 + 1) // 2
            for cols in (range(0, half), [0, *range(half, n)]):
                out.extend("|" + "|".join(r[c] for c in cols) + "|" for r in rows)
                out.append("")
        block.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


ARMS = {"best rule": "best single rule", "maskable_ppo": "Maskable PPO"}


def suite_tables(d):
    "The suite benchmark's table in three that fit the page: the rivals, PPO's run seeds, the plans; then the pairs."
    s, hr = d["summary"], d["headroom"]
    rule = hr["best_single_rule"].removeprefix("plan:")
    seeds = ", ".join(map(str, s["test_seeds"]))
    runs = [str(r) for r in s["run_seeds"]]
    rivals = [a for a in s["arms"] if a != "open-loop"]
    names = ["PPO"] + [ARMS.get(a, a) for a in rivals]
    t1 = ["| problem | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for p in s["problems"] + [{"problem": "**mean**", "ppo": s["means"]["ppo"], **s["means"]}]:
        t1.append(f"| {p['problem']} | " + " | ".join(bold_best([p["ppo"]] + [p[a] for a in rivals])) + " |")
    t2 = [
        "| problem | PPO | " + " | ".join(f"run {r}" for r in runs) + " | open-loop |",
        "|---" * (len(runs) + 3) + "|",
    ]
    for p in s["problems"]:
        t2.append(
            f"| {p['problem']} | "
            + " | ".join(bold_best([p["ppo"]] + [p["ppo_per_run"][r] for r in runs] + [p["open-loop"]]))
            + " |"
        )
    t2.append(
        "| **mean** | "
        + " | ".join(bold_best([s["means"]["ppo"]] + [s["ppo_per_run"][r] for r in runs] + [s["means"]["open-loop"]]))
        + " |"
    )
    t3 = ["| problem | oracle's plan | best single rule as played |", "|---|---|---|"]
    for p in s["problems"]:
        t3.append(
            f"| {p['problem']} | `{p['oracle_plan'].removeprefix('plan:')}` "
            f"| `{p['best_rule_plan'].removeprefix('plan:')}` |"
        )
    t4 = ["| PPO less | mean (paired) | 95% CI | pairs |", "|---|---|---|---|"]
    for a, v in s["ppo_less"].items():
        t4.append(f"| {ARMS.get(a, a)} | {v['mean']:+.2f} | ± {v['ci95']:.2f} | {v['n']} |")
    t5 = ["| target | value | result |", "|---|---|---|"]
    for t in d["targets"]:
        t5.append(
            f"| {t['target'].replace('best rule', 'best single rule')} | {t['value']} "
            f"| {'PASS' if t['pass'] else 'FAIL'} |"
        )
    return "\n".join(
        [
            f"Test accuracy % on test seeds {seeds}, PPO the mean over its run seeds. The best single rule is "
            f"`{rule}`, the plan with the best mean on this run's tune seeds:",
            "",
            *t1,
            "",
            "PPO's run seeds one by one, beside their open-loop replay (each policy's most frequent plan on a "
            "problem's "
            "tune seeds, played blind):",
            "",
            *t2,
            "",
            "The plans: each problem's best on the tune seeds (the oracle's), and the best single rule as each problem "
            "plays it (the static host where the plan does not fit the budget):",
            "",
            *t3,
            "",
            "Paired over problems x test seeds:",
            "",
            *t4,
            "",
            "Targets (measured, not asserted):",
            "",
            *t5,
        ]
    )


def headroom(folder):
    "The suite headroom table from its headroom.json."
    d = load(f"{folder}/headroom.json")
    rows = [
        "| problem | best plan (chosen on tune seeds) | its test acc % | best single rule | greedy | heuristic "
        "| margin |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in d["problems"]:
        accs = bold_best([p["oracle"], p["best single rule"], p["greedy"], p["heuristic"]])
        rows.append(
            f"| {p['problem']} | `{p['oracle_plan'].removeprefix('plan:')}` | "
            + " | ".join(accs)
            + f" | {p['margin']:+.1f} |"
        )
    m = d["rival_means"]
    accs = bold_best([d["oracle_mean"], m["best single rule"], m["greedy"], m["heuristic"]])
    rows.append("| **mean** | | " + " | ".join(accs) + f" | {d['margin']:+.1f} |")
    head = (
        f"Suite `{d['suite']}` v{d['version']}: test accuracy % (task test splits), mean over test seeds "
        f"{', '.join(map(str, d['test_seeds']))}; plans chosen on tune seeds "
        f"{', '.join(map(str, d['tune_seeds']))}.\n\n"
        f"    OMP_NUM_THREADS=1 .venv/bin/{d['command']}\n\n"
    )
    tail = (
        f"\n\nBest single rule: `{d['best_single_rule'].removeprefix('plan:')}`. The best plan's margin over the best "
        f"rival ({d['best_rival']}): {d['margin']:+.2f} ± {d['margin_ci95']:.2f} points (paired 95% CI over problems "
        f"x seeds); at least 2 points on {d['problems_with_margin_2']} of {len(d['problems'])} problems."
    )
    return Markdown(head + "\n".join(rows) + tail)


def workers(path):
    "A bench_workers.py scaling table: seconds per PPO batch and host samples per second by worker count."
    d = load(path)
    ind = any("independent_samples_per_s" in r for r in d["rows"])
    rows = [
        "| workers | s per PPO batch | host samples/s | speed-up |"
        + (" as many independent processes, samples/s |" if ind else "")
    ]
    rows.append("|---|---|---|---|" + ("---|" if ind else ""))
    for r in d["rows"]:
        extra = f" {r['independent_samples_per_s']:,.0f} |" if ind else ""
        rows.append(
            f"| {r['workers']} | {r['seconds_per_batch']:.2f} | {r['samples_per_s']:,.0f} "
            f"| {r['speedup']:.2f}x |{extra}"
        )
    return Markdown(
        f"`nbs/results/{path}`: {d['machine']}, torch {d['torch']}\n\n    {d['command']}\n\n" + "\n".join(rows)
    )
