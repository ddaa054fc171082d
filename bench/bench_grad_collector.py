"""Seed gradient collector vs a per-parameter `.norm()` loop.

Usage: .venv/bin/python bench/bench_grad_collector.py [--repeats 200]
Prints the time per collection (median of repeats) for a few parameter layouts and the ratio loop/collector.
The "loop" baseline is what the collector replaced: one `.norm()` per gradient, stack, then the same health
statistics, read back with one sync.
"""
import argparse
import statistics
import time

import torch
from torch import nn

from esper.tolaria.gradients import SeedGradientCollector


def loop_collect(params, vanishing=1e-7, exploding=100.0):
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([g.norm(2) for g in grads])
    total = (norms * norms).sum().sqrt()
    ok = ((norms >= vanishing) & (norms <= exploding)).sum()
    vals = torch.stack([total, ok.float(), (norms < vanishing).any().float(), (norms > exploding).any().float()]).tolist()
    return {"gradient_norm": vals[0], "gradient_health": vals[1] / len(grads)}


def timeit(fn, repeats):
    for _ in range(10): fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def make(layout, device):
    if layout == "conv seed (8 tensors)":
        m = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                          nn.BatchNorm2d(32))
        x = torch.randn(8, 32, 8, 8)
    elif layout == "MLP 20 layers (40 tensors)":
        m = nn.Sequential(*[nn.Linear(64, 64) for _ in range(20)]); x = torch.randn(16, 64)
    else:  # many small tensors
        m = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16)) for _ in range(50)]); x = torch.randn(8, 16)
    m.to(device); m(x.to(device)).square().mean().backward()
    return list(m.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, device {args.device}, median of {args.repeats}")
    print(f"{'layout':32s} {'loop us':>9s} {'fused us':>9s} {'public us':>9s} {'loop/fused':>10s}")
    for layout in ("conv seed (8 tensors)", "MLP 20 layers (40 tensors)", "LN-MLP 50 blocks (200 tensors)"):
        params = make(layout, args.device)
        fused, public = SeedGradientCollector(use_foreach=True), SeedGradientCollector(use_foreach=False)
        ref = loop_collect(params)["gradient_norm"]
        assert abs(fused.collect(params)["gradient_norm"] - ref) < 1e-4 * max(1.0, ref)
        t_loop = timeit(lambda: loop_collect(params), args.repeats)
        t_fused = timeit(lambda: fused.collect(params), args.repeats)
        t_pub = timeit(lambda: public.collect(params), args.repeats)
        print(f"{layout:32s} {t_loop * 1e6:9.1f} {t_fused * 1e6:9.1f} {t_pub * 1e6:9.1f} {t_loop / t_fused:10.2f}x")
    params = make("LN-MLP 50 blocks (200 tensors)", args.device)
    t_async = timeit(lambda: fused.collect_async(params), args.repeats)
    print(f"collect_async alone (no host sync), 200 tensors: {t_async * 1e6:.1f} us")


if __name__ == "__main__":
    main()
