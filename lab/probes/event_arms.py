"""What the event probes (`mixed_failures.py`, `long_shifts.py`) share: choosing the best name, the arms' means and
paired differences split by the episodes' kind, and the tables they print; with `reactive_rules.py`, how a report is
printed and written."""
import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

from esper.cli import DistinctSeeds, add_overwrite_argument, seed_int
from esper.leyline.files import json_text, relative_paths, write_files_atomic
from esper.leyline.stats import mean_ci95


def best(scores: dict[str, float]) -> str:
    "The best-scoring name; ties go to the first."
    names = list(scores)
    return max(names, key=lambda c: (scores[c], -names.index(c)))


def parse_seeds_and_files(
    ap: argparse.ArgumentParser,  # the probe's parser, its own flags added
    argv: list[str] | None,  # the command line (None: sys.argv)
    problems: list,  # the problems, each with its `event`
    files: tuple[str, ...],  # what --out will hold
    tune: tuple[list[int], str],  # --tune-seeds' default and help
    test: tuple[list[int], str],  # --test-seeds' default and help
    happens: tuple[str, str],  # the event and its absence, for messages: ("the data shifts", "it does not")
) -> argparse.Namespace:
    """The flags every event probe takes (--tune-seeds, --test-seeds, --cache, --out, --overwrite), checked: the two
    sets of seeds apart, and each holding seeds on which the event happens and seeds on which it does not."""
    ap.add_argument("--tune-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=tune[0], help=tune[1])
    ap.add_argument("--test-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=test[0], help=test[1])
    ap.add_argument("--cache", default="runs/plays.jsonl", help="episodes already played (default: runs/plays.jsonl)")
    ap.add_argument("--out", required=True, help=f"folder for {', '.join(files)}")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    if set(a.tune_seeds) & set(a.test_seeds):
        ap.error("--tune-seeds and --test-seeds must not share a seed: nothing may be chosen on a reporting seed")
    for seeds, flag in ((a.tune_seeds, "--tune-seeds"), (a.test_seeds, "--test-seeds")):
        if {p.event.draw(s) is None for s in seeds for p in problems} != {True, False}:
            ap.error(f"{flag}: give seeds on which {happens[0]} and seeds on which {happens[1]} (the draw reads only "
                     "the seed)")
    return a


def split_means(
    ep: dict[str, dict[tuple[str, int], float]],  # arm -> (problem, test seed) -> test accuracy
    groups: dict[str, list],  # group name -> its problems
    seeds: list[int],  # the test seeds
    event: dict[tuple[str, int], bool],  # (problem, seed) -> whether the episode's event happens
    where: tuple[str, str, str],  # names for all episodes, those without the event, those with it
) -> tuple[dict, dict]:
    "The (problem, seed) keys of each group and kind of episode, and each arm's mean over them."
    keys = {g: {w: [(p.name, s) for p in ps for s in seeds if w == where[0] or event[(p.name, s)] == (w == where[2])]
                for w in where} for g, ps in groups.items()}
    means = {arm: {g: {w: statistics.fmean(ep[arm][k] for k in ks) for w, ks in kw.items()}
                   for g, kw in keys.items()} for arm in ep}
    return keys, means


def paired_differences(ep: dict, keys: dict, comparisons: list[tuple[str, str]]) -> dict:
    "For each (arm, arm) pair, its mean paired difference and 95% CI half-width per group and kind of episode."
    return {f"{x} less {y}": {g: {w: list(mean_ci95([ep[x][k] - ep[y][k] for k in ks])) for w, ks in kw.items()}
                              for g, kw in keys.items()} for x, y in comparisons}


def tables(r: dict, where: tuple[str, ...]) -> list[str]:
    "The arms' table and the paired differences' table, below a probe's first line."
    fmt = lambda v: f"{v[0]:+.2f} ± {v[1]:.2f}"  # noqa: E731
    arms, cols = list(r["means"]), [(g, w) for g in r["groups"] for w in where]
    head = " | ".join(f"{g} ({w})" for g, w in cols) + " |"
    lines = ["", "| arm | " + head, "|---|" + "---|" * len(cols)]
    lines += [f"| {a} | " + " | ".join(f"{r['means'][a][g][w]:.1f}" for g, w in cols) + " |" for a in arms]
    lines += ["", "| paired difference (95% CI) | " + head, "|---|" + "---|" * len(cols)]
    lines += [f"| {k} | " + " | ".join(fmt(v[g][w]) for g, w in cols) + " |" for k, v in r["paired"].items()]
    return lines


def per_problem_and_command(r: dict, where_else: str) -> list[str]:
    """A probe's last lines: every arm per problem (`where_else`: what else `results.json` holds), the oracles on the
    tune episodes that chose them, and the command with its commit."""
    arms, c = list(r["means"]), r["config"]
    lines = ["", f"Per problem, all test episodes ({where_else}):", "",
             "| problem | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    lines += [f"| {p} | " + " | ".join(f"{v[a]:.1f}" for a in arms) + " |" for p, v in r["per_problem"].items()]
    lines += ["", "The oracles on the tune episodes that chose them (in sample; hindsight less open loop): " +
              ", ".join(f"{p} {v['hindsight oracle'] - v['open-loop oracle']:+.1f}"
                        for p, v in r["oracles_on_tune"].items()) + "."]
    lines += ["", f"Command: `{r['command']}` at {c['git_commit']}" +
              (" (with uncommitted changes)." if c.get("git_dirty") else ".")]
    return lines


def write_report(r: dict, markdown: Callable[[dict], str], out: str, cache: str) -> None:
    """The report's paths made relative, its table printed with how much was played, and `results.json` and
    `results.md` written in `out` together."""
    r = relative_paths(r)
    table = markdown(r)
    print(table + f"\n{r['episodes_played']} episodes played ({r['seconds']:.0f} s); the rest came from {cache}")
    write_files_atomic(Path(out), {"results.json": json_text(r), "results.md": table})
