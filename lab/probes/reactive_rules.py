"""Reactive rules tuned on other problems, on a duds suite: how much room do they leave a policy that reads the run?

The issue's reactive rivals are rules with one setting for every problem, tuned on problems other than those they
are judged on. Two families, each tuned on the tune seeds of the --tune-suites' problems (by the mean over problems
of each problem's mean) and the best of each played on --suite's test seeds:
- `replant:<plan>~<fallback>`: play a plan (cut to each problem's budget); a seed that moves no weight in its first
  epoch in TRAINING is pruned and the fallback planted in its slot where the budget pays for it (every plan of
  --plans with, as the fallback, every blueprint of the menu that does not fail and that fits on some problem);
- `reactive:<k>/<x>` (`REACTIVE_GRID`): plant after k epochs without progress, prune a seed below x points.
Then paired, per problem x test seed, with the arms of one or more duds splits (`lab/probes/duds_split.py`'s
split.json: PPO, its blind replay, the per-instance selector, the open-loop oracle, the per-problem tuned replant,
the hindsight oracle), on all, sound and failing episodes, and the target's arithmetic: what "PPO beats the best of
the reactive rules, the greedy rule and the best single plan by 3 points" asks against what the hindsight oracle
scores. Writes results.json and results.md to --out. From the project root:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/reactive_rules.py --workers 2 --out nbs/results/duds_rules
"""
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

from event_arms import write_report  # lab/probes/event_arms.py: shared with the other event probes
from selector import open_outputs, row_printer  # lab/probes/selector.py: --out and --cache checked, rows said

from esper.cli import DistinctSeeds, OneLineParser, add_overwrite_argument, positive_int, seed_int
from esper.cli.runs import git_state, stoppable_pool, stops_in_one_line
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import REACTIVE_GRID, Play, as_played, fresh_model, run_plays
from esper.tamiyo.plans import Germination, Plan, fits
from esper.tamiyo.problems import SUITES, get_suite
import esper.tamiyo.suites  # noqa: F401  (registers the duds suites)

FILES = ("results.json", "results.md")
#: The plans a replanting rule may play: `global_mix` (the blueprint that fails) in block 1, alone or with a second.
PLANS = ("global_mix@block1/1", "global_mix@block1/3", "global_mix@block1/1+global_mix@block2/1",
         "global_mix@block1/1+global_mix@block2/3", "global_mix@block1/1+conv_small@block2/1",
         "global_mix@block1/1+dilated@block2/1")
TEST_SEEDS = tuple(range(2000, 2010))
SPLITS = ("mask=nbs/results/duds_ppo_mask/split.json", "offer=nbs/results/duds_ppo_prune/split.json")
#: The split's arms paired with the rules, as split.json names them.
ARMS = ("ppo", "open-loop", "selector", "oracle", "best rule", "greedy", "tuned replant", "hindsight oracle")
KINDS = ("all", "sound", "fails")


def replant_rules(problems, plans: tuple[str, ...]) -> list[str]:
    """Every `replant:<plan>~<fallback>` each problem can play: the fallbacks are the menus' blueprints that never
    fail and that some problem's budget pays for, alone, in each slot where the plan plants one that may fail (where
    the budget does not, the rule prunes the dud and plants nothing)."""
    bad = {b for p in problems if p.event is not None for b in getattr(p.event, "blueprints", ())}
    fallbacks = [b for b in dict.fromkeys(b for p in problems for b in p.blueprints) if b not in bad]

    def pays(p, plan: str, b: str) -> bool:
        if b not in p.blueprints:
            return False
        model = fresh_model(p)
        slots = {g.slot for g in Plan.parse(plan).germinations if g.blueprint in bad}
        return all(model.fits(s, b) and fits(model, [Germination(1, s, b)]) for s in slots)
    playable = [plan for plan in plans if all(as_played(p, f"plan:{plan}") is not None for p in problems)]
    return [f"replant:{plan}~{b}" for plan in playable for b in fallbacks if any(pays(p, plan, b) for p in problems)]


def as_rule(problem, rule: str) -> str:
    "The controller a rule plays on a problem: a replanting rule's plan cut to the budget, any other rule as it is."
    if not rule.startswith("replant:"):
        return rule
    plan, fallback = rule.removeprefix("replant:").split("~")
    return f"replant:{as_played(problem, f'plan:{plan}').removeprefix('plan:')}~{fallback}"


def tune_scores(rows: list[dict], problems, rules: list[str], seeds) -> dict[str, float]:
    "Each rule's mean over problems of its mean over the tune seeds."
    acc = {(r["problem"], r["controller"], r["seed"]): r["test_accuracy"] for r in rows}
    return {r: statistics.fmean(statistics.fmean(acc[(p.name, as_rule(p, r), s)] for s in seeds) for p in problems)
            for r in rules}


def read_split(path: str) -> dict:
    "A duds split's arms: per arm, per (problem, test seed), the test accuracy."
    d = json.loads(Path(path).read_text())
    return {a: {tuple(k.rsplit("|", 1)): v for k, v in e.items()} for a, e in d["episodes"].items()}


def paired(a: dict, b: dict, keys: dict[str, list]) -> dict:
    "a less b on all, sound and failing pairs: [mean, 95% CI half-width] each."
    return {w: list(mean_ci95([a[k] - b[k] for k in ks])) for w, ks in keys.items()}


def markdown(r: dict) -> str:
    c, m = r["config"], r["means"]
    fmt = lambda v: f"{v[0]:+.2f} ± {v[1]:.2f}"
    lines = [f"Reactive rules with one setting for every problem, tuned on suites {', '.join(c['tune_suites'])} at tune "
             f"seeds {', '.join(map(str, c['tune_seeds']))} ({r['cost']['tune_episodes']} episodes), played on suite "
             f"`{c['suite']}` v{c['suite_version']} at test seeds {c['test_seeds'][0]}-{c['test_seeds'][-1]}; test "
             "accuracy %, all / sound / failing episodes. Chosen: " +
             ", ".join(f"`{v}` ({r['tune_means'][k][v]:.1f} on tune)" for k, v in r["chosen"].items()) + ".", "",
             "| arm | all | sound | failing |", "|---|---|---|---|"]
    lines += [f"| {a} | " + " | ".join(f"{v[w]:.1f}" for w in KINDS) + " |" for a, v in m.items()]
    lines += ["", "| paired difference (95% CI) | all | sound | failing |", "|---|---|---|---|"]
    lines += [f"| {k} | " + " | ".join(fmt(v[w]) for w in KINDS) + " |" for k, v in r["paired"].items()]
    cols = list(m)
    lines += ["", "Per problem, all test episodes:", "", "| problem | " + " | ".join(cols) + " |",
              "|---|" + "---|" * len(cols)]
    lines += [f"| {p} | " + " | ".join(f"{v[a]:.1f}" for a in cols) + " |" for p, v in r["per_problem"].items()]
    t = r["target"]
    lines += ["", f"The target asks PPO for {t['asks']:.1f}: the best of the reactive rules, the greedy rule and the "
              f"best single plan ({t['best_rival']}, {t['best_rival_mean']:.1f}) + 3. The hindsight oracle, which "
              f"knows from epoch 0 whether an episode's seeds fail, scores {t['hindsight']:.1f}: the target lies "
              f"{abs(t['asks'] - t['hindsight']):.1f} points {'above' if t['asks'] > t['hindsight'] else 'below'} "
              "it.", "",
              f"Command: `{r['command']}` at {c['git_commit']}" + (" (with uncommitted changes)." if c.get("git_dirty")
                                                                   else ".")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="reactive_rules.py")
    ap.add_argument("--tune-suites", nargs="+", default=["duds-train", "duds-tune"],
                    help="the suites whose problems tune the rules (default: duds-train duds-tune)")
    ap.add_argument("--suite", default="duds-heldout", help="the suite they are judged on (default: duds-heldout)")
    ap.add_argument("--tune-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1004, 1005, 1006, 1007],
                    help="seeds that choose (default: 1004-1007: two sound, two failing)")
    ap.add_argument("--test-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=list(TEST_SEEDS),
                    help="seeds that report (default: 2000-2009, the duds benchmarks')")
    ap.add_argument("--split", nargs="+", default=list(SPLITS), metavar="NAME=SPLIT_JSON",
                    help="duds_split.py's split.json of PPO benchmarks on --suite and the test seeds, each named")
    ap.add_argument("--plans", nargs="+", default=list(PLANS), help="the plans a replanting rule may play")
    ap.add_argument("--cache", default="runs/plays.jsonl", help="episodes already played (default: runs/plays.jsonl)")
    ap.add_argument("--workers", type=positive_int, default=1, help="worker processes (default: 1)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(FILES)}")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    try:
        tune_problems = [p for s in a.tune_suites for p in get_suite(s).problems]
        suite = get_suite(a.suite)
    except ValueError as e:
        ap.error(f"{e} (suites: {', '.join(SUITES)})")
    if set(a.tune_seeds) & set(a.test_seeds):
        ap.error("--tune-seeds and --test-seeds must not share a seed: nothing may be chosen on a reporting seed")
    if {p.name for p in tune_problems} & set(suite.names):
        ap.error(f"--tune-suites share a problem with --suite {suite.name}: the rules are tuned on other problems")
    splits = {}
    for item in a.split:
        name, eq, path = item.partition("=")
        if not eq or not name or name in splits:
            ap.error(f"--split takes distinct NAME=SPLIT_JSON (got {item!r})")
        try:
            splits[name] = read_split(path)
            missing = [(arm, p, s) for arm in ("ppo", "open-loop") for p in suite.names for s in a.test_seeds
                       if (p, str(s)) not in splits[name][arm]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            ap.error(f"--split {item}: not a duds split's split.json ({type(e).__name__}: {e})")
        if missing:
            arm, p, s = missing[0]
            ap.error(f"--split {item}: no {arm} episode on {p} at test seed {s}")
    rules = {"replant rule": replant_rules([*tune_problems, *suite.problems], tuple(a.plans)),
             "reactive rule": list(REACTIVE_GRID)}
    if not rules["replant rule"]:
        ap.error("--plans: no plan and fallback every problem can play")
    cache = open_outputs(ap, a.out, a.cache, a.overwrite, FILES)
    t0, (played, on_row) = time.perf_counter(), row_printer()
    with stops_in_one_line("reactive_rules.py", f"the episodes played so far are kept in {a.cache}"):
        with stoppable_pool(a.workers) if a.workers > 1 else contextlib.nullcontext() as pool:
            every = [r for family in rules.values() for r in family]
            tuning = [Play(p, as_rule(p, r), s) for p in tune_problems for r in every for s in a.tune_seeds]
            tune_rows = run_plays(tuning, cache, on_row=on_row, pool=pool)
            means = {k: tune_scores(tune_rows, tune_problems, v, a.tune_seeds) for k, v in rules.items()}
            chosen = {k: max(v, key=lambda r, v=v: (means[k][r], -v.index(r))) for k, v in rules.items()}
            jobs = [Play(p, as_rule(p, r), s) for r in chosen.values() for p in suite.problems for s in a.test_seeds]
            test_rows = run_plays(jobs, cache, on_row=on_row, pool=pool)
    got = {(r["problem"], r["controller"], r["seed"]): r["test_accuracy"] for r in test_rows}
    pairs = [(p.name, str(s)) for p in suite.problems for s in a.test_seeds]
    fails = {(p.name, str(s)): p.event is not None and p.event.draw(s) is not None
             for p in suite.problems for s in a.test_seeds}
    keys = {"all": pairs, "sound": [k for k in pairs if not fails[k]], "fails": [k for k in pairs if fails[k]]}
    mine = {k: {(p.name, str(s)): got[(p.name, as_rule(p, r), s)] for p in suite.problems for s in a.test_seeds}
            for k, r in chosen.items()}
    first = next(iter(splits.values()))
    arms = dict(mine)  # the rivals are the same plans in every split (its test seeds, its tune seeds): the first's
    for n, sp in splits.items():
        arms |= {f"ppo ({n})": sp["ppo"], f"open-loop ({n})": sp["open-loop"]}
    arms |= {a_: first[a_] for a_ in ARMS if a_ not in ("ppo", "open-loop") and a_ in first}
    mean = {k: {w: statistics.fmean(v[x] for x in ks) for w, ks in keys.items()} for k, v in arms.items()}
    pr = {f"ppo ({n}) less {k}": paired(sp["ppo"], mine[k], keys) for n, sp in splits.items() for k in mine}
    pr |= {f"{k} less {b}": paired(mine[k], first[b], keys) for k in mine for b in ("oracle", "selector", "best rule")
           if b in first}
    pr |= {f"{b} less replant rule": paired(first[b], mine["replant rule"], keys)
           for b in ("tuned replant", "hindsight oracle") if b in first}
    per_problem = {p.name: {k: statistics.fmean(v[(p.name, str(s))] for s in a.test_seeds) for k, v in arms.items()}
                   for p in suite.problems}
    rivals = {k: mean[k]["all"] for k in (*mine, "greedy", "best rule") if k in mean}
    best = max(rivals, key=rivals.get)
    r = {
        "command": " ".join(["python lab/probes/reactive_rules.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"tune_suites": a.tune_suites, "suite": suite.name, "suite_version": suite.version,
                   "tune_seeds": a.tune_seeds, "test_seeds": a.test_seeds, "splits": a.split, "plans": a.plans,
                   **git_state(Path.cwd())},
        "cost": {"tune_episodes": len(tuning), "test_episodes": len(jobs)},
        "rules": rules, "tune_means": means, "chosen": chosen, "means": mean, "paired": pr, "per_problem": per_problem,
        "target": {"best_rival": best, "best_rival_mean": rivals[best], "asks": rivals[best] + 3,
                   "hindsight": mean.get("hindsight oracle", {}).get("all", float("nan"))},
        "seconds": round(time.perf_counter() - t0, 1), "episodes_played": len(played),
        "episodes": {k: {f"{p}|{s}": v for (p, s), v in d.items()} for k, d in mine.items()},
    }
    write_report(r, markdown, a.out, a.cache)


if __name__ == "__main__":
    main()
