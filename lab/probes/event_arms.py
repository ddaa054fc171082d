"""What the event probes (`mixed_failures.py`, `long_shifts.py`) share: choosing the best name, the arms' means and
paired differences split by the episodes' kind, and the tables they print."""
import statistics

from esper.leyline.stats import mean_ci95


def best(scores: dict[str, float]) -> str:
    "The best-scoring name; ties go to the first."
    names = list(scores)
    return max(names, key=lambda c: (scores[c], -names.index(c)))


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
