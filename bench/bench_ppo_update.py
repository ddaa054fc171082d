"""One PPO update on a 2,048-step buffer: Esper's PPOAgent vs Stable-Baselines3's PPO.

Usage: .venv/bin/python bench/bench_ppo_update.py [--repeats 3] [--state-dim 35] [--actions 9] [--fast-update]
                                                  [--device cpu]
SB3 is optional and must NOT be installed into the project venv; install it elsewhere, e.g.
    .venv/bin/pip install --target /tmp/sb3 --no-deps stable-baselines3
    PYTHONPATH=/tmp/sb3 .venv/bin/python bench/bench_ppo_update.py
Both sides: 2,048 transitions, minibatch 64, 10 epochs (no KL early stop), Adam lr 3e-4, tanh MLPs of width 64,
one CPU thread (`--device cuda`: both on the GPU, timed to the end of its work). Esper's network shares a 2-layer
encoder (actor/critic heads of width 32); SB3 uses separate 2-layer actor and critic MLPs (its default) — parameter
counts are printed. `--fast-update` times Esper with
`fast_update=True` (compiled minibatch step, fused Adam, one-norm clip); the first update, which compiles, is the
untimed warm-up, and its seconds are printed apart.
"""
import argparse
import statistics
import time

import numpy as np
import torch

from esper.simic import PPOAgent


def sync(device: str) -> None:
    "Wait for the GPU's queued work, so that a host clock times it."
    if torch.device(device).type == "cuda": torch.cuda.synchronize(device)


def esper_update_seconds(args) -> tuple[float, int]:
    agent = PPOAgent(state_dim=args.state_dim, action_dim=args.actions, hidden_dim=64, n_epochs=10, batch_size=64,
                     target_kl=None, device=args.device, fast_update=args.fast_update)
    ts, warmup = [], None
    for r in range(args.repeats + 1):
        states = torch.randn(2048, args.state_dim)
        actions, log_probs, values = agent.get_action_batch(states)
        for t in range(2048):
            agent.store_transition(states[t], int(actions[t]), float(log_probs[t]), float(values[t]),
                                   float(np.random.randn()), t % 25 == 24)
        sync(args.device); t0 = time.perf_counter(); m = agent.update(last_value=0.0)
        sync(args.device); dt = time.perf_counter() - t0
        if r: ts.append(dt)  # first update is warm-up
        else: warmup = (dt, m.get("compile_seconds"))
    if args.fast_update:
        step = agent._minibatch_step()
        how = (f"compiled; its first minibatch step took {warmup[1]:.1f} s" if step.compiled
               else f"not compiled: {step.failure}")
        print(f"fast_update warm-up   : {warmup[0]:8.1f} s for the first update ({how})")
    return statistics.median(ts), sum(p.numel() for p in agent.network.parameters())


def sb3_update_seconds(args):
    try:
        import gymnasium as gym
        from stable_baselines3 import PPO
    except ImportError as e:
        print(f"Stable-Baselines3 not importable ({e}); skipping the reference. See this file's docstring.")
        return None

    class RandomEnv(gym.Env):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (args.state_dim,), np.float32)
        action_space = gym.spaces.Discrete(args.actions)
        def reset(self, *, seed=None, options=None):
            self.t = 0; return np.random.randn(args.state_dim).astype(np.float32), {}
        def step(self, a):
            self.t += 1
            return np.random.randn(args.state_dim).astype(np.float32), float(np.random.randn()), self.t % 25 == 0, False, {}

    model = PPO("MlpPolicy", RandomEnv(), n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])), device=args.device, verbose=0, seed=0)
    _, callback = model._setup_learn(2048 * (args.repeats + 1), None)
    ts = []
    for r in range(args.repeats + 1):
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=2048)
        sync(args.device); t0 = time.perf_counter(); model.train()
        sync(args.device); dt = time.perf_counter() - t0
        if r: ts.append(dt)
    return statistics.median(ts), sum(p.numel() for p in model.policy.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--state-dim", type=int, default=35)
    ap.add_argument("--actions", type=int, default=9)
    ap.add_argument("--fast-update", action="store_true",
                    help="Esper with fast_update=True: torch.compile'd minibatch step (needs a C++ compiler), "
                         "fused Adam")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N, for both sides (default: cpu)")
    args = ap.parse_args()
    try:
        torch.empty(0, device=args.device)
    except (RuntimeError, ValueError) as e:
        ap.error(f"--device {args.device!r} is not usable here: {str(e).splitlines()[0]}")
    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)
    t_esper, n_esper = esper_update_seconds(args)
    mode = ", fast_update" if args.fast_update else ""
    name = torch.cuda.get_device_name(args.device) if torch.device(args.device).type == "cuda" else "CPU"
    print(f"device                : {name}")
    print(f"esper PPOAgent.update : {t_esper * 1e3:8.1f} ms per update ({n_esper} parameters, "
          f"320 minibatch steps{mode})")
    sb3 = sb3_update_seconds(args)
    if sb3 is not None:
        t_sb3, n_sb3 = sb3
        print(f"SB3 PPO.train         : {t_sb3 * 1e3:8.1f} ms per update ({n_sb3} parameters, 320 minibatch steps)")
        print(f"ratio SB3 / esper     : {t_sb3 / t_esper:8.2f}x")


if __name__ == "__main__":
    main()
