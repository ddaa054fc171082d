"""Tuning probes for a policy trained across a suite, judged on the `tune` problems only (never on `heldout`).

`train`: one run seed's policy trained as the suite benchmark trains it (bench_learning.py's train_job, so the same
settings and its learning curve on --curve-suite), with any of the benchmark's training flags changed; its flags and
curve go to --out/probe.json. `eval`: the given checkpoints played greedily, and the rules (the held-out suite's best
single rule, greedy, the heuristic), on every --judge problem x --seeds, with the blueprints each policy planted;
written to --out as JSON (`policies` and `rules`), never over an earlier file without --overwrite. Examples, from the
project root:
    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/suite_tune_probe.py train --run-seed 5 --out runs/probe_long \\
        -- --episodes 960 --entropy-anneal-episodes 720
    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/suite_tune_probe.py eval --out runs/probes.json \\
        --policies run0=runs/bench_suite/seed0/agent.pt long=runs/probe_long/seed5/agent.pt
With --problems NAME..., a few of train's problems take the place of the suites: `train` trains and draws its curve on
them, `eval` plays them (a probe of whether a policy can tell those problems apart at all).
"""
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' own code
import bench_learning as bl  # noqa: E402
from esper.cli.runs import stoppable_pool
from esper.cli import OneLineParser, DistinctSeeds, seed_int
from esper.leyline.files import json_text, write_files_atomic
from esper.simic.envs.env import load_ppo_controller
from esper.simic.trainers.learning_jobs import train_job
from esper.tamiyo.suite_report import play_policy
from esper.tamiyo.plan_search import Play, PlayCache, as_played, run_plays
from esper.tamiyo.plans import Plan
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)
from esper.cli.runs import stops_in_one_line
from first_decision import probe_suite

#: The reference rule on the tune problems unless --rule names another: the held-out suite's best single rule in the
#: first benchmark's headroom report. Its choice depends on the machine's kernels: on an AVX-512 machine the suite
#: benchmark chose `plan:global_mix@block1/1` (nbs/results/bench_suite_320/).
RULE = "plan:conv_small@block1/1+global_mix@block2/1"


def train(run_seed: int, out: str, flags: list[str]) -> dict:
    "Train one run seed's policy with the benchmark's settings and `flags`; its history's learning curve."
    args = bl.resolve_args(bl.build_parser(), ["--suite", "heldout", "--features", "run", "--eval-every", "64",
                                                "--run-seeds", str(run_seed), "--out", out, "--workers", "1",
                                                "--test-seeds", "4000", *flags])
    t = train_job(run_seed, bl.make_setup(args) | {"suite": "heldout"})
    return {"run_seed": run_seed, "flags": flags, "train_seconds": t["train_seconds"],
            "curve": [(r["episodes"], r["eval_accuracy"]) for r in t["history"] if r.get("eval_accuracy") is not None]}


def _policy_job(job: tuple[str, str, str, str, list[int], list[str] | None]) -> tuple[str, list[dict]]:
    name, checkpoint, judged, trained_on, seeds, problems = job
    torch.set_num_threads(1)
    if problems:  # a spawned worker registers the probe's suite of a few problems again
        probe_suite(problems)
    judge, acts, ctl = get_suite(judged), get_suite(trained_on), load_ppo_controller(checkpoint)
    return name, [play_policy(ctl, acts, p, s) for p in judge.problems for s in seeds]


def blueprints(plan: str) -> str:
    "The blueprints a plan germinated, in the order planted, joined by +."
    return "+".join(g.split("@")[0] for g in plan.removeprefix("plan:").split("+") if g)


def evaluate(policies: dict[str, str], judged: str, seeds: list[int], workers: int, cache: str,
             rule: str = RULE, problems: list[str] | None = None) -> dict:
    "Each policy's and each rule's mean test accuracy per problem, and the blueprints each policy planted."
    if problems:
        judged = probe_suite(problems)
    judge, out = get_suite(judged), {"seeds": list(seeds), "best_rule": rule, "policies": {}, "rules": {}}
    jobs = [(n, c, judged, "train", seeds, problems) for n, c in policies.items()]
    with stoppable_pool(workers) as pool:
        played = dict(pool.map(_policy_job, jobs))
    rules = {"best rule": lambda p: as_played(p, rule), "greedy": lambda p: "greedy",
             "heuristic": lambda p: "heuristic"}
    jobs = {(name, p.name, s): Play(p, pick(p), s)
            for name, pick in rules.items() for p in judge.problems for s in seeds}
    rows = {r["key"]: r for r in run_plays(list(jobs.values()), PlayCache(cache), workers)}
    for name in rules:
        played[name] = [rows[j.key] for (n, _, _), j in jobs.items() if n == name]
    for name, rs in played.items():
        per = {p: statistics.fmean(r["test_accuracy"] for r in rs if r["problem"] == p) for p in judge.names}
        row = {"mean": statistics.fmean(per.values()), "per_problem": per}
        if name in policies:
            row["planted"] = {p: dict(Counter(blueprints(r["plan"]) for r in rs if r["problem"] == p))
                              for p in judge.names}
        out["policies" if name in policies else "rules"][name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="suite_tune_probe.py")
    ap.add_argument("what", choices=("train", "eval"))
    ap.add_argument("--out", required=True, help="train: the run's folder; eval: the JSON file to write")
    ap.add_argument("--run-seed", type=seed_int, default=5, help="train: the run seed (default: 5)")
    ap.add_argument("--policies", nargs="+", default=[], metavar="NAME=CHECKPOINT", help="eval: the policies")
    ap.add_argument("--problems", nargs="+", default=None, metavar="NAME",
                    help="train on, draw the curve on and eval on these problems of train (default: the suites)")
    ap.add_argument("--judge", default="tune", help="eval: the suite played (default: tune)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001, 1002, 1003, 1004],
                    help="eval: the task seeds (default: the tune seeds 1000-1004)")
    ap.add_argument("--workers", type=int, default=2, help="eval: worker processes (default: 2)")
    ap.add_argument("--overwrite", action="store_true", help="eval: replace an earlier --out file (default: refuse)")
    ap.add_argument("--rule", default=RULE, metavar="PLAN",
                    help=f"eval: the single rule played as the best rule (default: {RULE})")
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = argv[argv.index("--") + 1 :] if "--" in argv else []  # train: the benchmark's training flags, after --
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.judge == "heldout":
        ap.error("--judge heldout: probes tune on the tune problems; the held-out ones are for the benchmark's report")
    if args.problems:
        try:
            suite = probe_suite(args.problems)
        except ValueError as e:
            ap.error(str(e))
        flags = ["--train-suite", suite, "--curve-suite", suite, *flags]
    if args.what == "train":  # bench_learning's own checks refuse an earlier run's folder without --resume/--overwrite
        with stops_in_one_line("suite_tune_probe.py", f"the checkpoint in {args.out} is kept: add --resume after --"):
            probe = train(args.run_seed, args.out, flags)
        write_files_atomic(args.out, {"probe.json": json_text(probe)})
        print(json.dumps(probe))
        return 0
    try:
        Plan.parse(args.rule.removeprefix("plan:"))
    except ValueError as e:
        ap.error(f"--rule {args.rule!r} is not a plan: {e}")
    rule = args.rule if args.rule.startswith("plan:") else f"plan:{args.rule}"
    bad = [p for p in args.policies if "=" not in p or not Path(p.split("=", 1)[1]).exists()]
    if bad or not args.policies:
        ap.error(f"--policies: give NAME=CHECKPOINT with an existing checkpoint (got {bad or 'none'})")
    if Path(args.out).exists() and not args.overwrite:
        ap.error(f"--out {args.out} holds an earlier evaluation; pass --overwrite to replace it")
    with stops_in_one_line("suite_tune_probe.py", "the episodes played are kept in the cache beside --out"):
        result = evaluate(dict(p.split("=", 1) for p in args.policies), args.judge, args.seeds, args.workers,
                          str(Path(args.out).with_suffix(".plays.jsonl")), rule, args.problems)
    write_files_atomic(Path(args.out).parent, {Path(args.out).name: json_text(result)})
    for name, r in {**result["policies"], **result["rules"]}.items():
        print(f"{name}: {r['mean']:.1f}" + (f"; planted {r['planted']}" if "planted" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
