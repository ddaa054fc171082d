"""What PPO is paid for two close plans: fixed rules' returns term by term, and how they differ task seed by task seed.

Each rule plays runs of one of the learning benchmark's presets (`--preset`: `full`, the default, plays whole runs,
30 epochs on every batch, cosine learning rates, the 2,500-parameter budget; `short` plays the `make run` episodes)
on tuning task seeds, and every epoch is paid as the PPO trainer pays it (`step_reward` under the preset's reward
weights: the full preset has no rent, the short one RewardConfig's). The JSON line of each rule gives, per task seed, its
final accuracy and the undiscounted sum of each reward term. Then, for the first rule against each other rule,
the paired difference per term: its mean over the task seeds (what a policy could learn) and its standard
deviation (the noise that learning must see through).

PPO sees a run's rewards discounted from its first decision (gamma 0.99 per epoch), and every term is linear in its
weight, so each task seed also carries its discounted terms at unit weight (`discounted`). From them
`--contribution-weights` prices the same plays under other weights of the contribution payment, without playing them
again: one JSON line per weight with the paired difference of the discounted return, first rule minus each other
rule, its mean, standard deviation and their ratio (how many standard deviations of noise one plan's lead is).

With `--critics`, trained policies' critics watch the plays: at every decision each critic's value of the state
(what it expects the rest of the run to pay, discounted) is stored beside the reward of that epoch. Then, for the first
rule against each other rule, at the first move where the two plays differ, the paired difference of the advantage
that GAE (lambda `--judge-lambda`, the full preset's 0.8) gives that move with each critic's values, and of the
discounted return the runs actually paid from it: an advantage that has learned what the differing move is worth
shows the same mean difference as the returns. `--from FILE` judges the plays of an earlier output again, without
playing them.

    OMP_NUM_THREADS=1 python lab/probes/reward_terms.py --workers 2
    OMP_NUM_THREADS=1 python lab/probes/reward_terms.py --workers 2 --critics RUN/seed0/agent.pt RUN/seed1/agent.pt
    OMP_NUM_THREADS=1 python lab/probes/reward_terms.py --workers 2 --preset short \
        --rules concurrent:conv_heavy+conv_heavy concurrent:conv_heavy+depthwise

The "Why Tamiyo learns" chapter quotes the default run (about 2 minutes on two cores).
"""
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' own code
import bench_learning as bl  # (the presets' episode and reward settings)

from esper.cli import OneLineParser, positive_int, DistinctSeeds, seed_int
from esper.leyline import DEFAULT_GAMMA
from esper.simic.envs.env import act, load_ppo_controller, step_reward
from esper.simic.envs.rewards import RewardConfig
from esper.tamiyo.baselines import ScheduleTamiyo
from esper.tamiyo import Episode, EpisodeConfig, GrowthProblem
from esper.tasks import get_task
from esper.cli.runs import stoppable_pool, stops_in_one_line

DEFAULT_RULES = ("concurrent:conv_heavy+conv_small", "concurrent:conv_heavy+depthwise")
TERMS = ("accuracy", "contribution", "rent", "terminal", "total")
#: The discounted parts at unit weight: the terminal term's accuracy and its unkept charge apart.
PARTS = ("accuracy", "contribution", "rent", "terminal", "unkept")
#: A preset's episode: the problem's length, batches and budget, and how it trains (its lr schedule).
EPISODE_KEYS = ("max_epochs", "max_batches", "lr_schedule", "param_budget")


def preset_settings(preset: str) -> tuple[dict, float]:
    "The episode settings a learning-benchmark preset plays (`EPISODE_KEYS`) and the rent weight it pays."
    settings = bl.PRESETS[preset]
    rent = RewardConfig().rent_weight if settings["rent_weight"] is None else settings["rent_weight"]
    return {k: settings[k] for k in EPISODE_KEYS}, rent


FULL_EPISODE = preset_settings("full")[0]
UNIT = RewardConfig(accuracy_weight=1.0, contribution_weight=1.0, rent_weight=1.0, terminal_weight=1.0,
                    unkept_weight=1.0)


def play(rule: str, seeds: list[int], rent_weight: float, critics: tuple[str, ...] = (),
         contribution_weight: float = RewardConfig().contribution_weight, episode: dict | None = None) -> dict:
    "Play `rule` on every seed, summing each reward term over the run (and the critics' values); a worker's job."
    torch.set_num_threads(1)
    agents = [load_ppo_controller(path).agent for path in critics]
    problem_settings = dict(episode or FULL_EPISODE)  # the lr schedule is how it trains, the rest the problem
    config = EpisodeConfig(lr_schedule=problem_settings.pop("lr_schedule"))
    reward = RewardConfig(rent_weight=rent_weight, contribution_weight=contribution_weight)
    t0, per_seed = time.perf_counter(), []
    for s in seeds:
        controller = ScheduleTamiyo.from_name(rule)
        controller.reset()
        task = get_task("mnist1d", seed=s)
        ep = Episode(task, config, problem=GrowthProblem.of_task(task, **problem_settings))
        obs, sums, parts, discount = ep.reset(s), dict.fromkeys(TERMS, 0.0), dict.fromkeys(PARTS, 0.0), 1.0
        moves, values, rewards = [], [], []
        while not ep.done:
            if agents:
                values.append([round(act(a, [obs], [0], True, update_normalizer=False)[0].value, 5) for a in agents])
            action = controller.decide(obs, ep.model)
            moves.append(f"{action.op.name}/{action.blueprint or ''}@{action.slot}")
            obs, _ = ep.step(action)
            terms = step_reward(ep, reward)
            rewards.append(round(terms["total"], 6))
            for k in TERMS: sums[k] += terms[k]
            unit = step_reward(ep, UNIT)
            accuracy = ep.history[-1]["val_accuracy"] / 100.0 if ep.done else 0.0
            unit |= {"terminal": accuracy, "unkept": accuracy - unit["terminal"]}  # the charge, as a positive amount
            for k in PARTS: parts[k] += discount * unit[k]
            discount *= DEFAULT_GAMMA
        result = ep.result()  # final_accuracy: the test split; the rewards saw validation (final_val_accuracy)
        per_seed.append({"seed": s, "final_accuracy": result.final_accuracy,
                         "final_val_accuracy": result.final_val_accuracy,
                         **{k: round(v, 5) for k, v in sums.items()},
                         "discounted": {k: round(v, 6) for k, v in parts.items()}}
                        | ({"moves": moves, "values": values, "rewards": rewards} if agents else {}))
    return {"rule": rule, "reward": {"contribution_weight": reward.contribution_weight, "rent_weight": rent_weight},
            "per_seed": per_seed, "seconds": round(time.perf_counter() - t0, 1)}


def lambda_return(rewards: list[float], values: list[float], t: int, gamma: float, lam: float) -> float:
    "The lambda-return of step t of one finished play: GAE's advantage of that step plus the critic's value of it."
    g = 0.0
    for k in reversed(range(t, len(rewards))):
        last = k + 1 == len(rewards)  # the run ends after this step: nothing to bootstrap from
        if last:
            g = rewards[k]
        else:  # lambda 1 needs no values
            g = rewards[k] + gamma * (((1 - lam) * values[k + 1] if lam < 1 else 0.0) + lam * g)
    return g


def critics_judge(a: dict, b: dict, critics: list[str], gamma: float = DEFAULT_GAMMA, lam: float = 0.8) -> dict:
    """Per critic, a - b for the first move where the plays differ: the advantage GAE(`lam`) gives it with that
    critic's values, against the return the runs actually paid from it (lambda 1). Both plays reach that move in one
    state, so the critic's value of it cancels and the difference of advantages is that of the lambda-returns."""
    diffs = {c: [] for c in critics}
    returns, steps = [], []
    for x, y in zip(a["per_seed"], b["per_seed"]):
        t = next(i for i, (m, n) in enumerate(zip(x["moves"], y["moves"])) if m != n)
        returns.append(100 * (lambda_return(x["rewards"], [], t, gamma, 1.0)
                              - lambda_return(y["rewards"], [], t, gamma, 1.0)))  # in hundredths, as elsewhere here
        steps.append(t)
        for i, c in enumerate(critics):
            values = lambda row: [v[i] for v in row["values"]]
            diffs[c].append(100 * (lambda_return(x["rewards"], values(x), t, gamma, lam)
                                   - lambda_return(y["rewards"], values(y), t, gamma, lam)))
    stats = lambda d: {"mean": round(statistics.fmean(d), 3), "std": round(statistics.stdev(d), 3),
                       "per_seed": [round(v, 3) for v in d]}
    return {"differing_step": steps, "gae_lambda": lam, "return": stats(returns),
            "advantages": {c: stats(d) for c, d in diffs.items()}}


def paired(a: dict, b: dict) -> dict:
    "Per term, the difference a - b task seed by task seed: its mean and standard deviation."
    out = {}
    for k in ("final_accuracy", *TERMS):
        diff = [x[k] - y[k] for x, y in zip(a["per_seed"], b["per_seed"])]
        out[k] = {"mean": round(statistics.fmean(diff), 4), "std": round(statistics.stdev(diff), 4)}
    return out


def discounted_return(seed_row: dict, contribution_weight: float, base: RewardConfig = RewardConfig(rent_weight=0.0)
                      ) -> float:
    "The return PPO sees from a run's first decision, in hundredths, under `base` with another contribution weight."
    d, w = seed_row["discounted"], base
    return 100 * (w.accuracy_weight * d["accuracy"] + contribution_weight * d["contribution"]
                  + w.rent_weight * d["rent"] + w.terminal_weight * d["terminal"] - w.unkept_weight * d["unkept"])


def ranking(rows: list[dict], contribution_weight: float, base: RewardConfig = RewardConfig(rent_weight=0.0)) -> dict:
    "First rule minus each other rule, task seed by task seed: the discounted return's mean, std and their ratio."
    out = {}
    for other in rows[1:]:
        diff = [discounted_return(a, contribution_weight, base) - discounted_return(b, contribution_weight, base)
                for a, b in zip(rows[0]["per_seed"], other["per_seed"])]
        mean, std = statistics.fmean(diff), statistics.stdev(diff)
        ratio = round(mean / std, 2) if std else None
        out[other["rule"]] = {"mean": round(mean, 3), "std": round(std, 3), "ratio": ratio}
    return out


def main(argv: list[str]|None=None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="reward_terms.py")
    ap.add_argument("--rules", nargs="+", default=list(DEFAULT_RULES), metavar="RULE",
                    help=f"fixed rules' names, two or more (default: {' '.join(DEFAULT_RULES)})")
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001, 1002, 1003, 1004],
                    help="task seeds, two or more (default: 1000-1004, never the held-out 2000-2004)")
    ap.add_argument("--preset", choices=tuple(bl.PRESETS), default="full",
                    help="whose episodes the rules play and whose rent they pay (default: full)")
    ap.add_argument("--rent-weight", type=float, default=None,
                    help=f"the rent's weight (default: the preset's: full 0, short RewardConfig's "
                         f"{RewardConfig().rent_weight:g})")
    ap.add_argument("--contribution-weight", type=float, default=RewardConfig().contribution_weight,
                    help="the payment's weight in the reward the plays are paid, and the critics judged, by "
                         f"(default: RewardConfig's, {RewardConfig().contribution_weight:g}; the full preset's is 0.1)")
    ap.add_argument("--contribution-weights", type=float, nargs="+", default=[], metavar="W",
                    help="also price the plays under these weights of the contribution payment, discounted as PPO "
                         "sees them (default: none)")
    ap.add_argument("--critics", nargs="+", default=[], metavar="AGENT",
                    help="trained policies (agent.pt) whose critics value every state of the plays (default: none)")
    ap.add_argument("--judge-lambda", type=float, default=0.8,
                    help="GAE lambda of the critics' advantages in the judgement (default: 0.8, the full preset's)")
    ap.add_argument("--from", dest="replay", default=None, metavar="FILE",
                    help="judge and price the plays of an earlier output (its rule lines) instead of playing")
    ap.add_argument("--workers", type=positive_int, default=1,
                    help="worker processes, one rule and task seed per job (default: 1)")
    args = ap.parse_args(argv)
    if len(args.rules) < 2: ap.error("--rules needs two rules or more: the first is compared with each other")
    if len(set(args.seeds)) < 2: ap.error("--seeds needs two task seeds or more: the paired differences vary over them")
    episode, preset_rent = preset_settings(args.preset)
    if args.rent_weight is None:
        args.rent_weight = preset_rent
    if not args.rent_weight >= 0: ap.error(f"--rent-weight must be >= 0 (got {args.rent_weight})")
    if not args.contribution_weight >= 0:
        ap.error(f"--contribution-weight must be >= 0 (got {args.contribution_weight})")
    bad = [w for w in args.contribution_weights if not w >= 0]
    if bad: ap.error(f"--contribution-weights must be >= 0 (got {bad[0]})")
    for rule in args.rules:
        try:
            ScheduleTamiyo.from_name(rule)
        except ValueError as e:
            ap.error(f"--rules: {e}")
    if not 0 <= args.judge_lambda <= 1: ap.error(f"--judge-lambda must be in [0, 1] (got {args.judge_lambda})")
    if args.replay is not None:
        try:
            rows = [r for r in map(json.loads, open(args.replay).read().splitlines()) if "per_seed" in r]
        except (OSError, ValueError) as e:
            ap.error(f"--from: cannot read {args.replay}: {e}")
        if len(rows) < 2: ap.error(f"--from: {args.replay} holds {len(rows)} rule lines; two or more are needed")
        first = rows[0]["per_seed"][0].get("values") or [[]]  # an output of plays without critics has no values
        critics = rows[0].get("critics") or [f"critic {k}" for k in range(len(first[0]))]
        report(rows, args, critics)
        return
    for path in args.critics:
        try:
            load_ppo_controller(path)
        except (OSError, ValueError, RuntimeError) as e:  # missing, truncated or foreign: one line, no traceback
            ap.error(f"--critics: cannot load {path}: {e}")
    jobs = [(rule, seed) for rule in args.rules for seed in args.seeds]
    with stops_in_one_line("reward_terms.py"), stoppable_pool(args.workers) as pool:
        done = list(pool.map(play, [r for r, _ in jobs], [[s] for _, s in jobs], [args.rent_weight] * len(jobs),
                             [tuple(args.critics)] * len(jobs), [args.contribution_weight] * len(jobs),
                             [episode] * len(jobs)))
    rows = []
    for i, rule in enumerate(args.rules):  # one row per rule, its task seeds in order
        parts = done[i * len(args.seeds):(i + 1) * len(args.seeds)]
        rows.append(parts[0] | {"per_seed": [p["per_seed"][0] for p in parts],
                                "seconds": round(sum(p["seconds"] for p in parts), 1)}
                    | ({"critics": list(args.critics)} if args.critics else {}))
    report(rows, args, args.critics)


def report(rows: list[dict], args, critics: list[str]) -> None:
    "Print the rule lines, their paired differences, the pricing under other payments and the critics' judgement."
    for row in rows:
        print(json.dumps(row), flush=True)
    for other in rows[1:]:
        print(json.dumps({"paired": f"{rows[0]['rule']} - {other['rule']}", **paired(rows[0], other)}), flush=True)
    base = RewardConfig(rent_weight=args.rent_weight)  # the priced weights replace the payment's
    for w in args.contribution_weights:
        print(json.dumps({"contribution_weight": w, "discounted_return": ranking(rows, w, base)}), flush=True)
    for other in rows[1:] if critics else ():
        print(json.dumps({"critics_judge": f"{rows[0]['rule']} - {other['rule']}",
                          **critics_judge(rows[0], other, critics, lam=args.judge_lambda)}), flush=True)


if __name__ == "__main__":
    main()
