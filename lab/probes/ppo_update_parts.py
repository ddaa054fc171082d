"""Two parts of a PPO minibatch step, timed apart: the Adam step, and forward + loss + backward, eager vs compiled.

Usage: OMP_NUM_THREADS=1 .venv/bin/python lab/probes/ppo_update_parts.py [--iters 1000] [--no-compile]
The network is `bench_ppo_update.py`'s (state 35, 9 actions, width 64, minibatch 64, one thread). It prints
- the Adam step on the agent's flat parameter buffer, single-tensor (what the CPU path uses) and fused;
- one minibatch's forward, heads, PPO loss and backward (the agent's own `minibatch_forward`, run by the
  `CompiledStep` that `fast_update` uses), eager and under `torch.compile` (inductor: it needs a C++ compiler), with
  the seconds the first compiled call takes. Best of 5 rounds of `--iters` calls each.
"""
import argparse
import time
import warnings

import torch

from esper.simic import PPOAgent
from esper.simic.agent.compiled_step import CompiledStep, minibatch_forward


def per_call_us(fn, iters: int) -> float:
    "Best of 5 rounds of `iters` calls, in microseconds per call (after a warm-up round)."
    for _ in range(max(iters // 10, 1)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best * 1e6


def adam_steps(n: int, iters: int) -> dict[str, float]:
    "Adam on one flat buffer of `n` parameters: the single-tensor kernel and the fused one."
    out = {}
    for name, kw in (("single-tensor", {"foreach": False}), ("fused", {"fused": True})):
        p = torch.nn.Parameter(torch.randn(n))
        p.grad = torch.randn(n)
        opt = torch.optim.Adam([p], lr=3e-4, eps=1e-5, **kw)
        out[name] = per_call_us(opt.step, iters)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=1000, help="calls per timed round (default: 1000)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (no C++ compiler, or in a hurry)")
    args = ap.parse_args(argv)
    if args.iters < 1:
        ap.error(f"--iters must be >= 1 (got {args.iters})")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=35, action_dim=9, hidden_dim=64, batch_size=64, device="cpu")
    n = sum(p.numel() for p in agent.network.parameters())
    for name, us in adam_steps(n, args.iters).items():
        print(f"Adam step, {name:13s}: {us:7.1f} us ({n:,} parameters)")

    head, b = next(iter(agent.head_sizes)), 64
    mb = {"states": torch.randn(b, 35), "actions": {head: torch.randint(0, 9, (b,))}, "masks": None,
          "log_probs": torch.randn(b), "values": torch.randn(b), "neg_advantages": torch.randn(b),
          "returns": torch.randn(b)}
    coefs = {head: torch.tensor(0.01)}  # a 0-d tensor, as the agent passes it to the compiled step
    run = lambda step: (lambda: step(agent.network, mb, coefs))
    eager = CompiledStep(minibatch_forward, compile=False)
    print(f"forward + loss + backward, eager   : {per_call_us(run(eager), args.iters):7.1f} us (minibatch {b})")
    if args.no_compile:
        return 0
    with warnings.catch_warnings():  # the fallback's warning: the line below says it
        warnings.simplefilter("ignore", RuntimeWarning)
        compiled = CompiledStep(minibatch_forward)
        compiled(agent.network, mb, coefs)  # compiles, or falls back
    if not compiled.compiled:  # no C++ compiler, an unsupported platform: say so in one line
        print(f"forward + loss + backward, compiled: unavailable ({compiled.failure})")
        return 0
    print(f"forward + loss + backward, compiled: {per_call_us(run(compiled), args.iters):7.1f} us "
          f"(first call, compiling: {compiled.compile_seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
