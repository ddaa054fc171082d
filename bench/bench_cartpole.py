"""Environment-agnostic check: Esper's PPOAgent on CartPole-v1 vs a reference PPO (Stable-Baselines3) with the
same step budget and hyperparameters.

Usage: .venv/bin/python bench/bench_cartpole.py [--steps 100000] [--seeds 0 1] [--out /tmp/cartpole.json]
SB3 is optional (skipped with a message when not importable); install it outside the project venv, e.g.
    .venv/bin/pip install --target /tmp/sb3 --no-deps stable-baselines3 && PYTHONPATH=/tmp/sb3 ...
Hyperparameters (RL-Zoo's CartPole-v1 PPO, with constant instead of linearly decaying lr/clip on both sides):
8 envs x 32 steps per rollout, minibatch 256, 20 epochs, gamma 0.98, GAE lambda 0.8, clip 0.2, lr 1e-3,
no entropy bonus, value coef 0.5, grad clip 0.5, tanh MLPs of width 64. Time-limit truncations (500 steps)
bootstrap from the critic on both sides.
"""
import time

import numpy as np
import torch

from esper.cli import DistinctSeeds, OneLineParser, seed_int
from esper.leyline.files import write_json_atomic

HP = dict(n_envs=8, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8, clip=0.2, lr=1e-3)


def episodes_to_curve(per_env_lengths, per_env_returns, n_envs):
    "Merge per-env episode lists into (global_step, return) pairs, global step = env step x n_envs."
    pts = []
    for lens, rets in zip(per_env_lengths, per_env_returns):
        for end, ret in zip(np.cumsum(lens), rets):
            pts.append((int(end) * n_envs, float(ret)))
    return sorted(pts)


def train_esper(total_steps=100_000, seed=0, hp=HP, verbose=False):
    "Train `PPOAgent` on CartPole-v1; returns ([(step, episode_return)], agent)."
    import gymnasium as gym
    from esper.simic import PPOAgent, Truncation
    torch.manual_seed(seed); np.random.seed(seed)
    n = hp["n_envs"]
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = PPOAgent(state_dim=4, action_dim=2, hidden_dim=64, lr=hp["lr"], gamma=hp["gamma"],
                     gae_lambda=hp["gae_lambda"], clip_ratio=hp["clip"], entropy_coef=0.0, n_epochs=hp["n_epochs"],
                     batch_size=hp["batch_size"], target_kl=None, device="cpu")
    obs, _ = envs.reset(seed=seed)
    ep_ret, ep_len = np.zeros(n), np.zeros(n, dtype=int)
    lens, rets = [[] for _ in range(n)], [[] for _ in range(n)]
    for update in range(total_steps // (n * hp["n_steps"])):
        for _ in range(hp["n_steps"]):
            states = torch.as_tensor(obs, dtype=torch.float32)
            actions, log_probs, values = agent.get_action_batch(states)
            obs, reward, term, trunc, info = envs.step(actions.numpy())
            ep_ret += reward; ep_len += 1
            for i in range(n):
                ended = bool(term[i] or trunc[i])
                cut = Truncation(final_state=info["final_obs"][i]) if trunc[i] and not term[i] else None
                agent.store_transition(states[i], int(actions[i]), float(log_probs[i]), float(values[i]), float(reward[i]),
                                       done=bool(term[i]), truncated=cut, env_id=i)
                if ended:
                    lens[i].append(ep_len[i]); rets[i].append(ep_ret[i]); ep_ret[i] = 0; ep_len[i] = 0
        with torch.inference_mode():
            _, last_values = agent.network(torch.as_tensor(obs, dtype=torch.float32))
        m = agent.update(last_value={i: float(v) for i, v in enumerate(last_values)})
        if verbose and update % 50 == 0:
            recent = [r for rs in rets for r in rs[-5:]]
            print(f"  esper update {update}: mean recent return {np.mean(recent) if recent else 0:.1f}, "
                  f"EV {m['explained_variance']:.2f}, approx_kl {m['approx_kl']:.4f}, clipfrac {m['clipfrac']:.3f}")
    envs.close()
    return episodes_to_curve(lens, rets, n), agent


def train_sb3(total_steps=100_000, seed=0, hp=HP):
    "Train SB3 PPO with the same settings; returns [(step, episode_return)] or None when SB3 is missing."
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.env_util import make_vec_env
    except ImportError as e:
        print(f"Stable-Baselines3 not importable ({e}); skipping the reference run.")
        return None
    env = make_vec_env("CartPole-v1", n_envs=hp["n_envs"], seed=seed)
    model = PPO("MlpPolicy", env, n_steps=hp["n_steps"], batch_size=hp["batch_size"], n_epochs=hp["n_epochs"],
                gamma=hp["gamma"], gae_lambda=hp["gae_lambda"], clip_range=hp["clip"], learning_rate=hp["lr"],
                ent_coef=0.0, policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])), device="cpu", seed=seed,
                verbose=0)
    model.learn(total_timesteps=total_steps)
    return episodes_to_curve([e.get_episode_lengths() for e in env.envs], [e.get_episode_rewards() for e in env.envs],
                             hp["n_envs"])


def summarize(curve, total_steps):
    "Mean return of the last 20 episodes, and the first step where a 20-episode mean reaches 475."
    rets = [r for _, r in curve]
    first = next((curve[i][0] for i in range(19, len(rets)) if np.mean(rets[i - 19:i + 1]) >= 475), None)
    return {"final_mean_return_20": float(np.mean(rets[-20:])), "steps_to_475": first, "episodes": len(rets)}


def main():
    ap = OneLineParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1])
    ap.add_argument("--out", default="/tmp/cartpole_curves.json")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {"hyperparameters": HP, "steps": args.steps, "esper": {}, "sb3": {}}
    for seed in args.seeds:
        t0 = time.perf_counter(); curve, _ = train_esper(args.steps, seed, verbose=args.verbose)
        results["esper"][seed] = {"curve": curve, **summarize(curve, args.steps), "seconds": time.perf_counter() - t0}
        print(f"esper seed {seed}: {({k: v for k, v in results['esper'][seed].items() if k != 'curve'})}")
        t0 = time.perf_counter(); curve = train_sb3(args.steps, seed)
        if curve is not None:
            results["sb3"][seed] = {"curve": curve, **summarize(curve, args.steps), "seconds": time.perf_counter() - t0}
            print(f"sb3   seed {seed}: {({k: v for k, v in results['sb3'][seed].items() if k != 'curve'})}")
    for name in ("esper", "sb3"):
        if results[name]:
            f = [r["final_mean_return_20"] for r in results[name].values()]
            print(f"{name}: final mean return (last 20 episodes) over seeds: {np.mean(f):.1f} (per seed {f})")
    write_json_atomic(args.out, results, indent=None)
    print(f"curves written to {args.out}")


if __name__ == "__main__":
    main()
