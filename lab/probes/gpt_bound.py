"""Why no lever saves 30%: each grown run's saving split into what its cheap early epochs allow and what it loses
per character read.

A grown run and its from-scratch twin read the same characters epoch by epoch; the grown run's epochs before the
block is planted cost less (the bare host's compute, 0.55 of the twin's for `gpt_tiny` and one transformer block).
Let the twin first reach its final validation bits after `n` epochs of data, at compute `C_t`, and the grown run
after `m` epochs, at compute `C_g(m)`. Then the benchmark's saving, `1 - C_g(m) / C_t`, is

- the **ceiling** `1 - C_g(n) / C_t`: the saving of a grown run that, epoch for epoch, learns as much as the twin
  (it reaches the twin's bits after the same `n` epochs of data, and pays only for its cheaper early epochs);
- less the **data penalty**, `(C_g(m) - C_g(n)) / C_t`: what the `m - n` extra epochs it needs cost.

The ceiling is arithmetic, set by the planting epoch `p` and the compute ratio `r` of host to twin:
`(p / n) (1 - r)` when every epoch costs as the host or as the twin. A 30% saving needs the ceiling above 30%
first. This probe reads the growth levers' result files (`lab/probes/gpt_levers.py`) and prints both parts for
every lever and problem; it trains nothing.

    .venv/bin/python lab/probes/gpt_bound.py --out nbs/results/growth_lm/bound/bound.json \\
        nbs/results/growth_lm/levers/levers.json nbs/results/growth_lm/long/*.json
"""
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

from esper.cli import OneLineParser, add_overwrite_argument, earlier_results
from esper.cli.runs import git_state
from esper.leyline.files import OutputError, check_output_file, relative_paths, write_json_atomic, write_text_atomic
from esper.tamiyo.twins import flops_to_reach

TARGET = 0.30  # the saving


def at_epoch(curve: list, epochs: float) -> float:
    "The compute a curve (one (compute, bits) point per epoch) has spent after `epochs` epochs, interpolated."
    points = [(0.0, 0.0)] + [(i + 1.0, c) for i, (c, _) in enumerate(curve)]
    for (e0, c0), (e1, c1) in itertools.pairwise(points):
        if e0 <= epochs <= e1:
            return c0 + (c1 - c0) * (epochs - e0)
    raise ValueError(f"the curve has {len(curve)} epochs, not {epochs:g}")


def by_epoch(curve: list) -> list[tuple[float, float]]:
    "A curve's bits against the epochs of data read (one point per epoch)."
    return [(i + 1.0, v) for i, (_, v) in enumerate(curve)]


def split(episode: dict, twin: dict) -> dict[str, Any]:
    "One grown run against its twin: epochs and compute to the twin's final bits, the ceiling and the data penalty."
    target = twin["curve"][-1][1]
    n, twin_compute = flops_to_reach(by_epoch(twin["curve"]), target), flops_to_reach(twin["curve"], target)
    m = flops_to_reach(by_epoch(episode["curve"]), target)
    spent = [0.0] + [c for c, _ in episode["curve"]]
    host_epochs = sum(1 for c0, c1 in itertools.pairwise(spent) if c1 - c0 < 1.0 + 1e-9)  # before the block computes
    ceiling = 1.0 - at_epoch(episode["curve"], n) / twin_compute if n <= len(episode["curve"]) else None
    row = {"seed": episode["seed"], "target_bits": target, "twin_epochs": n, "twin_compute": twin_compute,
           "host_epochs": host_epochs, "ceiling": ceiling, "grown_epochs": m, "saving": None, "penalty": None,
           "bits_behind_at_twin_epochs": None}
    if n <= len(episode["curve"]):  # the grown run's bits after (at least) the epochs the twin needed, less the target
        i = min(len(episode["curve"]), math.ceil(n)) - 1
        row["bits_behind_at_twin_epochs"] = episode["curve"][i][1] - target
    if m is not None:
        row["saving"] = 1.0 - at_epoch(episode["curve"], m) / twin_compute
        row["penalty"] = ceiling - row["saving"] if ceiling is not None else None
    return row


def analyse(result: dict) -> dict[str, Any]:
    "Every lever of one gpt_levers.py result file, problem by problem."
    twins = {r["seed"]: r for r in result["runs"] if r["kind"] == "twin"}
    eps = [r for r in result["runs"] if r["kind"] == "episode" and r["rival"] != "static" and r["grown"]]
    unit = next(iter(twins.values()))
    ratio = unit["curve"][0][0]  # the twin's first epoch, in epochs of the bare host: 1 / r
    out = {"settings": {k: result["settings"][k] for k in ("budget", "epoch", "train_chars", "slot")},
           "git_commit": result.get("git_commit"), "twin_epoch_cost": ratio, "host_to_twin": 1.0 / ratio, "levers": {}}
    for e in eps:
        out["levers"].setdefault(e["rival"], []).append(split(e, twins[e["seed"]]))
    return out


def fmt(v: float | None) -> str:
    "A saving in whole percent (never: None)."
    return "never" if v is None else f"{100 * v:+.0f}%"


def table(files: dict[str, dict]) -> str:
    "One row per file and lever; per problem, in its seeds' order: the ceiling, the saving, the extra epochs of data."
    lines = [("Per problem: the ceiling (what the run would save reaching the twin's final validation bits after as "
              "many epochs of data as the twin), the saving measured, and the epochs of data it needed beyond the "
              "twin's (never: it did not reach them).\n"),
             ("| file | r | seeds | planted after (host epochs) | twin epochs to its bits | lever | ceiling | saving | "
              "extra epochs |"), "|---|---|---|---|---|---|---|---|---|"]
    for name, a in files.items():
        for lever, rows in a["levers"].items():
            cells = [", ".join(str(r["seed"]) for r in rows), ", ".join(str(r["host_epochs"]) for r in rows),
                     ", ".join(format(r["twin_epochs"], ".1f") for r in rows), lever,
                     ", ".join(fmt(r["ceiling"]) for r in rows), ", ".join(fmt(r["saving"]) for r in rows),
                     ", ".join("never" if r["grown_epochs"] is None else f"{r['grown_epochs'] - r['twin_epochs']:+.1f}"
                               for r in rows)]
            lines.append(f"| `{name}` | {a['host_to_twin']:.3f} | " + " | ".join(cells) + " |")
    rs = sorted({round(a["host_to_twin"], 3) for a in files.values()}, reverse=True)
    lines.append("\nr: the bare host's compute per epoch over the twin's. With no data penalty, saving "
                 f"{100 * TARGET:.0f}% needs the blocks planted after "
                 + ", ".join(f"{TARGET / (1 - r):.0%} (r = {r:.3f})" for r in rs)
                 + " of the twin's epochs to its bits.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="gpt_bound.py", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="result files of lab/probes/gpt_levers.py")
    ap.add_argument("--out", required=True, help="the results file (JSON); a table (.md) goes beside it")
    add_overwrite_argument(ap)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if (earlier_results(out) or out.with_suffix(".md").exists()) and not args.overwrite:
        ap.error(f"--out {out} holds an earlier run's results; pass --overwrite to replace them")
    try:
        check_output_file(out, "--out")
        results = {f: json.loads(Path(f).read_text()) for f in args.files}
    except (OutputError, OSError, ValueError) as e:
        ap.error(str(e))
    if bad := [f for f, r in results.items() if not isinstance(r, dict) or "runs" not in r]:
        ap.error(f"{bad[0]}: not a result file of lab/probes/gpt_levers.py (no 'runs')")
    files = {Path(f).name: analyse(r) for f, r in results.items()}
    text = table(files)
    write_json_atomic(out, relative_paths({"command": "python lab/probes/gpt_bound.py " + " ".join(
        sys.argv[1:] if argv is None else argv), **git_state(Path(__file__).resolve().parents[2]), "files": files}))
    write_text_atomic(out.with_suffix(".md"), text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
