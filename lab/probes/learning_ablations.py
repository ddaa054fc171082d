"""Why PPO-Tamiyo learns: one change at a time, each trained on several run seeds and judged greedily on tuning seeds.

Each variant takes today's trainer (flat actions, 8 environments per update, the `make run` episode settings) and
changes one thing, so its effect can be read off against `flat`:

- `flat`      today's trainer with flat actions;
- `factored`  factored heads (slot, blueprint, blend, op) instead of 9 flat actions (the default since this study);
- `bootstrap` the old treatment of the run's last epoch: stored as truncated and bootstrapped from the critic;
- `nogate`    the mask knows only stages: an ADVANCE or FOSSILIZE its gate would refuse stays legal (a silent no-op);
- `noprob`    no probation: a seed may be pruned from its first epoch;
- `rent02`    the parameter rent at 0.02 instead of 0.05 per host-size of seed parameters;
- `rent0`     no parameter rent: accuracy alone.

Policies are evaluated on the *tuning* task seeds 1000-1002, never on the held-out seeds of `bench_learning.py`.
Every run writes `<out>/<preset>_<variant>_<seed>.json` (its evaluation and its per-update history); `--collect`
turns such a folder into the compact `summary.json` the "Why Tamiyo learns" chapter reads.

    OMP_NUM_THREADS=1 python lab/probes/learning_ablations.py --out runs/ablations --workers 16
    python lab/probes/learning_ablations.py --collect runs/ablations --summary nbs/tutorials/results/learning_ablations.json

On 2 cores one variant x seed takes about 6 minutes; the chapter's data came from 16 workers on a 16-core machine.
"""
import json
import os
import statistics
import time
from pathlib import Path

from esper.cli.runs import stoppable_pool, stops_in_one_line
from esper.cli import DistinctSeeds, OneLineParser, seed_int
from esper.leyline.files import write_json_atomic

VARIANTS = ("flat", "factored", "bootstrap", "nogate", "noprob", "rent02", "rent0")
#: The rent weight of each rent variant (the others use `RewardConfig()`).
RENT = {"rent02": 0.02, "rent0": 0.0}
TUNING_SEEDS = (1000, 1001, 1002)
#: Per-update history keys kept in the summary (the chapter plots them).
SERIES = ("episodes", "avg_accuracy", "value_mean", "return_mean", "explained_variance", "advantage_std",
          "approx_kl", "entropy", "action_counts", "reward/accuracy", "reward/contribution", "reward/rent",
          "reward/terminal")


def _patch(variant: str) -> None:
    "Apply the one change a variant makes (inside the worker process)."
    import esper.simic.envs.env as envmod
    import esper.simic.trainers.vectorized as vec
    from esper.tamiyo.features import compute_action_mask
    if variant in ("noprob", "nogate"):
        def masks(obs, factored):
            gates = None
            if variant == "noprob":
                gates = [bool(s.get("gate_open", True)) for s in obs["slots"].values()]
            return compute_action_mask(envmod.slot_stages(obs), factored=factored, gates_open=gates)
        envmod.action_masks = masks
    if variant == "bootstrap":
        from esper.simic.agent.ppo_update import Truncation

        def record(self, envs):
            agent, last = self.agent, envs[0].episode.done
            boot = None
            if last:
                final = envmod.normalize_states(agent, [e.obs for e in envs], update=False)
                boot = [agent.get_value(final[i], env_id=e.env_id) for i, e in enumerate(envs)]
            for i, e in enumerate(envs):
                terms = e.reward_terms()  # the env's own step reward, paid with its spec's weights
                e.add_reward(terms)
                d = e.pending
                agent.store_transition(d.state, d.action, d.log_prob, d.value, terms["total"], done=False,
                                       action_mask=d.mask, truncated=Truncation(value=boot[i]) if last else None,
                                       env_id=e.env_id)
                e.pending = None
        vec.PPORollout.record = record


def run_one(variant: str, seed: int, episodes: int, out: str, env_workers: int=0) -> dict:
    "Train one variant with one run seed, evaluate it greedily on the tuning seeds, write its JSON."
    import torch
    torch.set_num_threads(1)
    _patch(variant)
    from esper.simic.envs.env import PPOController
    from esper.simic.envs.rewards import RewardConfig
    from esper.simic.trainers.vectorized import train_ppo_vectorized
    from esper.tamiyo import GrowthProblem, run_episode
    from esper.tasks import get_task
    problem = GrowthProblem("mnist1d", max_epochs=15, max_batches=30)
    t0 = time.perf_counter()
    agent, hist = train_ppo_vectorized(n_episodes=episodes, n_envs=8, problem=problem, seed=seed,
                                       factored=variant == "factored", entropy_coef_start=0.05,
                                       entropy_coef_end=0.01, entropy_anneal_episodes=episodes * 3 // 4,
                                       reward_config=RewardConfig(rent_weight=RENT[variant]) if variant in RENT else None,
                                       workers=env_workers)
    train_s = time.perf_counter() - t0
    rows = []
    for s in TUNING_SEEDS:
        r = run_episode(get_task("mnist1d", seed=s), PPOController(agent), seed=s, problem=problem)
        rows.append({"seed": s, "acc": r.final_accuracy, "params": r.params_added, "germ": r.seeds_germinated,
                     "foss": r.seeds_fossilized, "pruned": r.seeds_pruned})
    res = {"variant": variant, "seed": seed, "preset": "short", "train_s": train_s, "eval": rows,
           "acc": statistics.fmean(r["acc"] for r in rows)}
    write_json_atomic(Path(out, f"short_{variant}_{seed}.json"), {"res": res, "hist": hist}, indent=None)
    return res


def collect(folder: str, summary: str) -> None:
    "Compact every run JSON of `folder` into one summary file."
    runs = []
    for p in sorted(Path(folder).glob("short_*_*.json")):
        d = json.loads(p.read_text())
        series = {k: [h.get(k) for h in d["hist"]] for k in SERIES}
        runs.append({"variant": d["res"]["variant"], "seed": d["res"]["seed"], "eval": d["res"]["eval"],
                     "acc": d["res"]["acc"], "series": series})
    Path(summary).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(summary), {"tuning_seeds": list(TUNING_SEEDS), "runs": runs}, indent=0)
    for v in VARIANTS:
        accs = [r["acc"] for r in runs if r["variant"] == v]
        if accs: print(f"{v:10s} " + " ".join(f"{a:5.1f}" for a in accs) + f"  mean {statistics.fmean(accs):.1f}")


def main() -> None:
    ap = OneLineParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2], help="PPO run seeds")
    ap.add_argument("--episodes", type=int, default=160,
                    help="training episodes per run; entropy anneals 0.05 -> 0.01 over the first 3/4 (default: 160)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="processes (one run each)")
    ap.add_argument("--env-workers", type=int, default=0, help="environment worker processes per run (default: 0)")
    ap.add_argument("--out", default="runs/ablations", help="folder for the per-run JSON files")
    ap.add_argument("--collect", default=None, metavar="FOLDER", help="only compact FOLDER into --summary")
    ap.add_argument("--summary", default="runs/ablations/summary.json", help="where --collect writes")
    a = ap.parse_args()
    if a.collect is not None:
        collect(a.collect, a.summary)
        return
    Path(a.out).mkdir(parents=True, exist_ok=True)
    jobs = [(v, s) for v in a.variants for s in a.seeds]
    kept = f"the finished runs are in {a.out}"
    with stops_in_one_line("learning_ablations.py", kept), stoppable_pool(max(1, min(a.workers, len(jobs)))) as ex:
        futures = [ex.submit(run_one, v, s, a.episodes, a.out, a.env_workers) for v, s in jobs]
        for f in futures:
            r = f.result()
            print(f"{r['variant']:10s} seed {r['seed']}: {r['acc']:.1f}% on tuning seeds ({r['train_s']:.0f} s)",
                  flush=True)
    collect(a.out, a.summary)


if __name__ == "__main__":
    main()
