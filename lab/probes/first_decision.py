"""What a suite policy weighs at its first chance to germinate, problem by problem: does it read the problem?

For each policy (a flat PPO checkpoint) and each problem of --suite x --seeds, one greedy episode is played; at the
first decision where a germination is legal the policy's probabilities over its legal actions and its critic's value
are kept. The critic's value says whether the features tell the problems apart; the probabilities say whether the
actor acts on it. Written to --out as JSON (per policy and problem: the mean probability of each action over the
seeds, the mean value, the epoch of that decision and the plans played), never over an earlier file without
--overwrite. Only the train and tune suites, or with --problems a few of train's: the held-out problems are for the
benchmark's report. From the project root:

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/first_decision.py --suite train --seeds 1000 1001 \\
        --policies run0=runs/bench_suite/seed0/agent.pt --out runs/first_decision.json
"""
import statistics
import sys
from collections import Counter
from pathlib import Path

import torch
from esper.cli.runs import stops_in_one_line

import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)
from esper.cli import OneLineParser, DistinctSeeds, seed_int
from esper.leyline import ActionSpace
from esper.leyline.files import json_text, write_files_atomic
from esper.simic.agent.networks import apply_mask
from esper.simic.envs.env import load_ppo_controller
from esper.tamiyo.suite_report import play_policy
from esper.tamiyo.problems import Suite, get_suite, register_suite


def probe_suite(
    names: list[str],  # problems of the `base` suite, in the order wanted
    base: str = "train",  # the suite they come from
) -> str:
    "The name of a suite of a few of `base`'s problems, registered (again: a no-op) for probes that train or play them."
    src = get_suite(base)
    missing = [n for n in names if n not in src.names]
    if missing or len(set(names)) != len(names) or not names:
        raise ValueError(f"--problems: give distinct problems of {base} (got {missing or names}); its problems: "
                         f"{', '.join(src.names)}")
    name = f"{base}[{','.join(names)}]"
    register_suite(Suite(name, src.version, tuple(src[n] for n in names), f"{len(names)} of {base}'s problems"))
    return name


def first_choice(controller, actions: ActionSpace) -> dict | None:
    "The policy's probabilities and value at the first decision of its last episode where it could germinate."
    agent = controller.agent
    for epoch, d in enumerate(controller.decisions):
        if not bool(d.mask[list(actions.germinations)].any()):
            continue
        with torch.inference_mode():
            logits, value = agent.network(d.state.reshape(1, -1))
            probs = torch.softmax(apply_mask(logits["action"], d.mask.reshape(1, -1)), -1)[0]
        names = [n.removeprefix("GERMINATE_").lower() if n.startswith("GERMINATE_") else n for n in actions.names]
        return {"decision": epoch, "value": float(value), "probs": dict(zip(names, probs.tolist()))}
    return None


def probe(checkpoint: str, suite: str, trained_on: str, seeds: list[int]) -> dict:
    "Per problem of `suite`: the mean first-choice probabilities and value over `seeds`, and the plans played."
    ctl, acts = load_ppo_controller(checkpoint), get_suite(trained_on)
    if ctl.agent.factored or ctl.agent.recurrent:
        raise ValueError(f"{checkpoint}: first_decision reads flat feed-forward policies only")
    space, out = ActionSpace(acts.blueprints), {}
    for p in get_suite(suite).problems:
        seen, plans = [], Counter()
        for s in seeds:
            plans[play_policy(ctl, acts, p, s)["plan"].removeprefix("plan:")] += 1
            if (c := first_choice(ctl, space)) is not None:
                seen.append(c)
        out[p.name] = {
            "episodes_that_could_germinate": len(seen),
            "decision": statistics.fmean(c["decision"] for c in seen) if seen else None,
            "value": statistics.fmean(c["value"] for c in seen) if seen else None,
            "probs": {a: statistics.fmean(c["probs"][a] for c in seen) for a in seen[0]["probs"]} if seen else {},
            "plans": dict(plans),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="first_decision.py")
    ap.add_argument("--policies", nargs="+", required=True, metavar="NAME=CHECKPOINT", help="flat PPO checkpoints")
    ap.add_argument("--suite", default="tune", choices=("train", "tune"), help="the problems played (default: tune)")
    ap.add_argument("--problems", nargs="+", default=None, metavar="NAME",
                    help="play these problems of train instead of --suite (default: off)")
    ap.add_argument("--trained-on", default="train", help="the suite the policies trained on (default: train)")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001], help="task seeds (default: 1000 1001)")
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier --out file (default: refuse)")
    args = ap.parse_args(argv)
    if args.problems:
        try:
            args.suite = probe_suite(args.problems)
        except ValueError as e:
            ap.error(str(e))
    bad = [p for p in args.policies if "=" not in p or not Path(p.split("=", 1)[1]).exists()]
    if bad:
        ap.error(f"--policies: give NAME=CHECKPOINT with an existing checkpoint (got {bad})")
    if Path(args.out).exists() and not args.overwrite:
        ap.error(f"--out {args.out} holds an earlier probe; pass --overwrite to replace it")
    torch.set_num_threads(1)
    result = {"suite": args.suite, "seeds": args.seeds, "policies": {}}
    with stops_in_one_line("first_decision.py", "nothing was written"):
        for spec in args.policies:
            name, checkpoint = spec.split("=", 1)
            try:
                result["policies"][name] = probe(checkpoint, args.suite, args.trained_on, args.seeds)
            except (ValueError, KeyError, OSError, RuntimeError) as e:  # a checkpoint this probe cannot read
                print(f"first_decision.py: {name}: {e}; nothing was written", file=sys.stderr)
                return 1
            for prob, r in result["policies"][name].items():
                top = sorted(r["probs"].items(), key=lambda kv: -kv[1])[:3]
                print(f"{name} {prob:26s} value {r['value'] or 0:5.2f}  " + "  ".join(f"{a} {q:.2f}" for a, q in top))
    write_files_atomic(Path(args.out).parent, {Path(args.out).name: json_text(result)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
