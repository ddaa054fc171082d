"""Cross-check with a reference agent: sb3-contrib's MaskablePPO trained on `GrowthEnv`, then evaluated greedily.

Usage: make bench-sb3   (installs the two packages below into .venv when missing, then runs this script), or
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_maskable_ppo.py [--preset short|full] [--episodes 160]
        [--seeds 0 1 2 3 4] [--eval-seeds 2000 2001 2002 2003 2004] [--out runs/bench_maskable_ppo.json]
Needs sb3-contrib==2.9.2 and stable-baselines3==2.9.2, which are not dependencies of the package.

Setup: 4 envs (DummyVecEnv + VecNormalize(norm_obs=True, norm_reward=False)); n_steps = steps per episode
(max_epochs - 1), so one rollout = one whole episode per env and one update = 4 episodes; batch_size = 4 * steps
(one minibatch), 10 epochs, net_arch [256, 256], ent_coef 0.01, gamma 0.99, sb3 defaults otherwise (lr 3e-4,
GAE lambda 0.95, clip 0.2). A run's last epoch is terminal (terminated=True): sb3 does not bootstrap there.
The flat masks are per head (an op is allowed if some slot allows it); a sampled (slot, op) pair that the slot
does not allow is executed as WAIT by the env and counted below as "illegal".
Evaluation: deterministic masked actions on held-out task seeds, with each run's VecNormalize statistics frozen;
the static host (WAIT every epoch) on the same seeds is printed for reference.
"""
import math
import statistics
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np
import torch

from esper.cli import DistinctSeeds, OneLineParser, seed_int
from esper.leyline.files import write_json_atomic
from esper.leyline.stats import mean_ci95
from esper.simic.envs.gym_env import GrowthEnv
from esper.simic.trainers.suite_peer import PEER_ENVS as N_ENVS, greedy  # the suite benchmark's peer, the same
from esper.simic.envs.parallel_env_state import task_with_shuffle
from esper.tamiyo.problems import GrowthProblem

PRESETS = {"short": dict(max_epochs=15, max_batches=30), "full": dict(max_epochs=30, max_batches=None)}
TRAIN_METRICS = ("explained_variance", "entropy_loss", "approx_kl", "clip_fraction", "value_loss",
                 "policy_gradient_loss")


def mean_ci(xs: list[float]) -> tuple[float, float]:
    "Mean and half-width of its 95% confidence interval (nan for fewer than 2 values)."
    m, half = mean_ci95(xs)
    return m, (half if len(xs) > 1 else float("nan"))


def problem_of(preset: str) -> GrowthProblem:
    "MNIST-1D for the preset's epochs and batches, each episode's data order seeded by its seed (as GrowthEnv's own)."
    return GrowthProblem("mnist1d", task_factory=partial(task_with_shuffle, "mnist1d"), **PRESETS[preset])


def make_training_log():
    "An sb3 callback that keeps one record per finished episode and per update (with sb3's train/ metrics)."
    from stable_baselines3.common.callbacks import BaseCallback

    class TrainingLog(BaseCallback):
        def __init__(self, label: str):
            super().__init__()
            self.label, self.episodes, self.updates = label, [], []
            self.returns, self.illegal, self.steps = np.zeros(N_ENVS), np.zeros(N_ENVS), np.zeros(N_ENVS)
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
            for i, info in enumerate(infos):
                self.returns[i] += rewards[i]; self.steps[i] += 1; self.illegal[i] += not info["action_legal"]
                if not dones[i]: continue
                self.episodes.append({"final_accuracy": info["final_accuracy"], "params_added": info["params_added"],
                                      "return": float(self.returns[i]),
                                      "illegal_fraction": float(self.illegal[i] / self.steps[i])})
                self.returns[i] = self.illegal[i] = self.steps[i] = 0
            return True

        def _metrics(self) -> dict[str, float]:
            values = self.model.logger.name_to_value
            return {k: float(values[f"train/{k}"]) for k in TRAIN_METRICS if f"train/{k}" in values}

        def _on_rollout_start(self) -> None:  # sb3's train/ values of the previous update are still in the logger
            if self.updates: self.updates[-1] |= self._metrics()

        def _on_rollout_end(self) -> None:
            last = self.episodes[-N_ENVS:]
            rec = {"update": len(self.updates) + 1, "episodes": len(self.episodes),
                   **{k: statistics.fmean(e[k] for e in last) for k in last[0]}}
            self.updates.append(rec)
            print(f"  {self.label} update {rec['update']:3d} episodes {rec['episodes']:4d} "
                  f"acc {rec['final_accuracy']:5.1f} params+ {rec['params_added']:7.0f} return {rec['return']:6.3f} "
                  f"illegal {rec['illegal_fraction']:.2f} ({time.perf_counter() - self.t0:.0f}s)", flush=True)

        def _on_training_end(self) -> None:
            if self.updates: self.updates[-1] |= self._metrics()

    return TrainingLog


def train(seed: int, cfg: GrowthProblem, episodes: int):
    "Train MaskablePPO for `episodes` episodes (rounded up to whole updates); returns (model, VecNormalize, log)."
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    steps = cfg.max_epochs - 1
    venv = VecNormalize(DummyVecEnv([lambda: GrowthEnv(suite=cfg)] * N_ENVS),
                        norm_obs=True, norm_reward=False, gamma=0.99)
    model = MaskablePPO("MlpPolicy", venv, n_steps=steps, batch_size=N_ENVS * steps, n_epochs=10, gamma=0.99,
                        ent_coef=0.01, policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu", verbose=0)
    log = make_training_log()(f"seed {seed}")
    model.learn(total_timesteps=episodes * steps, callback=log)
    return model, venv, log


def evaluate(policy, cfg: GrowthProblem, eval_seeds: list[int]) -> list[dict]:
    "One episode per eval seed; `policy(obs, mask) -> action` (None: the static host, WAIT every epoch)."
    env, rows = GrowthEnv(suite=cfg), []
    wait = np.zeros(len(env.action_space.nvec), dtype=np.int64)
    for s in eval_seeds:
        obs, info = env.reset(seed=s)
        ret, ops, illegal, done = 0.0, Counter(), 0, False
        while not done:
            action = wait if policy is None else policy(obs, env.action_masks())
            obs, r, term, trunc, info = env.step(action)
            ret += r; ops[info["op"]] += 1; illegal += not info["action_legal"]; done = term or trunc
        rows.append({"eval_seed": s, "final_accuracy": info["final_accuracy"], "params_added": info["params_added"],
                     "return": ret, "ops": dict(ops), "illegal_steps": illegal})
    return rows


def fmt(m: float, h: float, digits: int=1) -> str:
    return f"{m:.{digits}f}" if math.isnan(h) else f"{m:.{digits}f} ± {h:.{digits}f}"


def main():
    p = OneLineParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="short", help="episode length and batches per epoch")
    p.add_argument("--episodes", type=int, default=160,
                   help="training episodes per seed (rounded up to a multiple of 4)")
    p.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2, 3, 4], help="training seeds")
    p.add_argument("--eval-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[2000, 2001, 2002, 2003, 2004],
                   help="held-out task seeds")
    p.add_argument("--out", default="runs/bench_maskable_ppo.json", help="JSON with the config, curves and results")
    p.add_argument("--overwrite", action="store_true", help="replace the results of an earlier run in --out")
    args = p.parse_args()
    if Path(args.out).is_file() and not args.overwrite:  # hours of training: never replaced by accident
        p.error(f"--out {args.out} already holds an earlier run's results; pass --overwrite to replace them, "
                "or choose another --out")
    try:  # the results are written after training: make sure they can be, before any work starts
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=Path(args.out).parent): pass
    except OSError as e:
        p.error(f"--out {args.out}: cannot write there ({e.strerror or e})")
    torch.set_num_threads(1)
    cfg, t0 = problem_of(args.preset), time.perf_counter()
    print(f"MaskablePPO on GrowthEnv, preset {args.preset} {PRESETS[args.preset]}, {args.episodes} episodes per seed, "
          f"training seeds {args.seeds}, eval seeds {args.eval_seeds}", flush=True)

    static = evaluate(None, cfg, args.eval_seeds)
    runs = []
    for seed in args.seeds:
        model, venv, log = train(seed, cfg, args.episodes)
        rows = evaluate(greedy(model, venv), cfg, args.eval_seeds)
        run = {"seed": seed, "episodes": len(log.episodes), "updates": log.updates, "eval": rows,
               "final_accuracy": statistics.fmean(r["final_accuracy"] for r in rows),
               "params_added": statistics.fmean(r["params_added"] for r in rows)}
        runs.append(run)
        accs = " ".join(f"{r['eval_seed']}:{r['final_accuracy']:.1f}" for r in rows)
        params = " ".join(f"{r['params_added']}" for r in rows)
        ops = sum((Counter(r["ops"]) for r in rows), Counter())
        print(f"seed {seed}: test accuracy {accs} (mean {run['final_accuracy']:.1f}) | params added {params} "
              f"(mean {run['params_added']:.0f}) | eval ops {dict(ops)}", flush=True)

    acc, params = mean_ci([r["final_accuracy"] for r in runs]), mean_ci([r["params_added"] for r in runs])
    static_acc = mean_ci([r["final_accuracy"] for r in static])
    print(f"MaskablePPO: test accuracy {fmt(*acc)}%  params added {fmt(*params, digits=0)}  "
          f"(mean ± 95% CI over {len(runs)} training seeds, each the mean of {len(args.eval_seeds)} eval seeds)")
    print(f"static host: test accuracy {fmt(*static_acc)}%  params added 0  (mean ± 95% CI over the eval seeds)")
    out = {"config": {"preset": args.preset, **PRESETS[args.preset], "episodes": args.episodes, "seeds": args.seeds,
                      "eval_seeds": args.eval_seeds, "n_envs": N_ENVS, "n_steps": cfg.max_epochs - 1,
                      "batch_size": N_ENVS * (cfg.max_epochs - 1), "n_epochs": 10, "net_arch": [256, 256],
                      "ent_coef": 0.01, "gamma": 0.99, "sb3_contrib": _version("sb3_contrib")},
           "runs": runs, "static": static,
           "summary": {"final_accuracy": _ci_dict(acc), "params_added": _ci_dict(params),
                       "static_final_accuracy": _ci_dict(static_acc)},
           "seconds": time.perf_counter() - t0}
    write_json_atomic(Path(args.out), out)
    print(f"wrote {args.out} ({out['seconds']:.0f}s)")


def _ci_dict(mh: tuple[float, float]) -> dict:
    return {"mean": mh[0], "ci95": None if math.isnan(mh[1]) else mh[1]}


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


if __name__ == "__main__":
    main()
