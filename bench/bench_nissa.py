"""Hub overhead per event, for each Nissa backend and for none.

Usage: .venv/bin/python bench/bench_nissa.py [--n 20000]
Prints events/s and microseconds per `hub.emit` for a typical EPOCH_COMPLETED event (5 scalars and
seed counts) and a PPO_UPDATE event (17 scalars incl. per-head entropies).
"""
import argparse
import os
import tempfile
import time

from esper.leyline import HEAD_NAMES, TelemetryEvent
from esper.nissa import ConsoleBackend, JSONLBackend, TelemetryHub, TensorBoardBackend


def epoch_event(i):
    return TelemetryEvent("epoch_completed", {"train_loss": 0.5 + 1e-6 * i, "train_accuracy": 71.25, "val_loss": 0.61,
                                              "val_accuracy": 69.5, "seconds": 0.8,
                                              "seed_counts": {"TRAINING": 1, "BLENDING": 1}},
                          epoch=i % 25 + 1, step=i, env_id=i % 4)


def ppo_event(i):
    d = {"policy_loss": -0.012, "value_loss": 0.43, "entropy": 1.21, "entropy_coef": 0.05, "approx_kl": 0.004,
         "clipfrac": 0.11, "explained_variance": 0.31, "value_mean": 0.2, "value_std": 0.4, "return_mean": 0.25,
         "return_std": 0.5, "advantage_mean": 0.0, "advantage_std": 1.0}
    d.update({f"head_entropy/{h}": 0.7 for h in HEAD_NAMES})
    return TelemetryEvent("ppo_update", d, step=i)


def bench(make_backends, make_event, n, level="normal"):
    "Events/s of `hub.emit` (events built beforehand; close() time included in the total)."
    events = [make_event(i) for i in range(n)]
    hub = TelemetryHub(level, make_backends())
    t0 = time.perf_counter()
    for ev in events: hub.emit(ev)
    hub.close()
    dt = time.perf_counter() - t0
    return n / dt, 1e6 * dt / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="events per measurement")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d, open(os.devnull, "w") as devnull:
        k = iter(range(1000))
        cases = [
            ("no backend", lambda: [], "normal"),
            ("filtered by level (OFF)", lambda: [JSONLBackend(f"{d}/off{next(k)}.jsonl")], "off"),
            ("console (to /dev/null)", lambda: [ConsoleBackend(devnull)], "normal"),
            ("jsonl", lambda: [JSONLBackend(f"{d}/e{next(k)}.jsonl")], "normal"),
            ("tensorboard", lambda: [TensorBoardBackend(f"{d}/tb{next(k)}")], "normal"),
            ("console+jsonl+tensorboard", lambda: [ConsoleBackend(devnull), JSONLBackend(f"{d}/a{next(k)}.jsonl"),
                                                   TensorBoardBackend(f"{d}/tba{next(k)}")], "normal"),
        ]
        print(f"Nissa hub overhead, {args.n} events per case (CPU, {os.cpu_count()} cores)")
        print(f"{'backends':<28} {'epoch events/s':>15} {'us/event':>9} {'ppo events/s':>14} {'us/event':>9}")
        for name, make, level in cases:
            e_rate, e_us = bench(make, epoch_event, args.n, level)
            p_rate, p_us = bench(make, ppo_event, args.n, level)
            print(f"{name:<28} {e_rate:>15,.0f} {e_us:>9.2f} {p_rate:>14,.0f} {p_us:>9.2f}")


if __name__ == "__main__":
    main()
