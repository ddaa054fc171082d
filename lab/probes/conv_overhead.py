"""What one tiny convolution costs on a CPU core, and what a matrix product instead of it would save and change.

The hosts and seeds of the growth problems run convolutions of 1 to 32 channels on 10 to 40 samples in batches of
64. This script times, per call on one thread, each such convolution's forward and forward+backward as PyTorch runs
it (oneDNN on x86) against the same computation written as matrix products (a kernel-1 convolution is one; a wider
one is the sum of one per tap), and says whether the outputs and gradients are bit for bit the same. Then it times
the impaired MNIST-1D host's bare SGD step with its kernel-1 convolutions done either way. Figures are medians over
`--repeats` timings of `--calls` calls each, in microseconds of CPU time.

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/conv_overhead.py [--calls 300] [--repeats 5] \
        [--out FILE.json [--overwrite]]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from esper.leyline.files import write_json_atomic
from esper.tasks import get_task

#: (in channels, out channels, kernel size, length, dilation): the convolutions of the MNIST-1D problems' hosts and
#: seeds at their injection points (block 1: 40 samples, block 2: 20 after the pool).
SHAPES = [(1, 8, 1, 40, 1), (8, 8, 1, 20, 1), (8, 8, 3, 20, 1), (8, 8, 5, 20, 1), (8, 8, 3, 20, 2), (32, 32, 3, 20, 1)]


def conv_as_matmul(x: torch.Tensor, w: torch.Tensor, dilation: int = 1) -> torch.Tensor:
    "A 'same'-padded, unbiased 1-D convolution as one matrix product per tap, summed."
    k, length = w.shape[-1], x.shape[-1]
    pad = dilation * (k // 2)
    xp = F.pad(x, (pad, pad)) if pad else x
    out = None
    for j in range(k):
        y = torch.matmul(w[:, :, j], xp[:, :, j * dilation : j * dilation + length])
        out = y if out is None else out + y
    return out


def cpu_us(fn, calls: int, repeats: int) -> float:
    "Median CPU microseconds per call of `fn`, over `repeats` timings of `calls` calls (after 20 warm-up calls)."
    for _ in range(20):
        fn()
    times = []
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(calls):
            fn()
        times.append((time.process_time() - t) / calls * 1e6)
    return statistics.median(times)


def shape_row(c_in, c_out, k, length, dilation, calls, repeats) -> dict:
    "Timings and bit-equality of one convolution shape, PyTorch's against the matrix products."
    torch.manual_seed(0)
    x = torch.randn(64, c_in, length, requires_grad=True)
    w = torch.randn(c_out, c_in, k, requires_grad=True)
    ways = {"pytorch": lambda: F.conv1d(x, w, padding=dilation * (k // 2), dilation=dilation),
            "matmul": lambda: conv_as_matmul(x, w, dilation)}
    grads = {}
    for name, f in ways.items():
        x.grad = w.grad = None
        out = f()
        out.square().sum().backward()
        grads[name] = (out.detach(), x.grad.clone(), w.grad.clone())
    row = {"shape": [c_in, c_out, k, length, dilation],
           "same_bits": all(torch.equal(a, b) for a, b in zip(grads["pytorch"], grads["matmul"]))}
    for name, f in ways.items():
        row[f"{name}_forward_us"] = cpu_us(lambda: f().detach(), calls, repeats)
        row[f"{name}_step_us"] = cpu_us(lambda: f().sum().backward(), calls, repeats)
    return row


class MatmulConv1d(nn.Conv1d):
    "A kernel-1 `Conv1d` whose forward is one matrix product (the same weights, other rounding)."

    def forward(self, x):
        y = torch.matmul(self.weight[:, :, 0], x)
        return y if self.bias is None else y + self.bias[:, None]


def host_step_us(matmul: bool, calls: int, repeats: int) -> float:
    "CPU microseconds per bare SGD step of the impaired MNIST-1D host on one training batch."
    torch.manual_seed(0)
    task = get_task("mnist1d")
    host = task.make_host(None)
    if matmul:
        for block in host.blocks:
            old = block[0]
            new = MatmulConv1d(old.in_channels, old.out_channels, 1, bias=old.bias is not None)
            new.load_state_dict(old.state_dict())
            block[0] = new
    opt = torch.optim.SGD(host.parameters(), lr=0.01, momentum=0.9, foreach=True)
    xb, yb = next(iter(task.train_loader))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(host(xb), yb).backward()
        opt.step()

    return cpu_us(step, calls, repeats)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier --out file")
    a = ap.parse_args(argv)
    if a.calls < 1 or a.repeats < 1:
        sys.exit("conv_overhead.py: --calls and --repeats must be >= 1")
    if a.out and Path(a.out).exists() and not a.overwrite:
        sys.exit(f"conv_overhead.py: --out {a.out} holds an earlier run's figures; pass --overwrite to replace them")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, 1 thread; "
          "CPU microseconds per call, batch 64")
    print("| in | out | k | length | dilation | PyTorch forward | matmul forward | PyTorch fwd+bwd | matmul fwd+bwd "
          "| same bits |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for shape in SHAPES:
        r = shape_row(*shape, a.calls, a.repeats)
        rows.append(r)
        times = [r[k] for k in ("pytorch_forward_us", "matmul_forward_us", "pytorch_step_us", "matmul_step_us")]
        print("| " + " | ".join(map(str, r["shape"])) + "".join(f" | {t:.0f}" for t in times)
              + f" | {'yes' if r['same_bits'] else 'no'} |")
    host = {"pytorch_us": host_step_us(False, a.calls, a.repeats), "matmul_us": host_step_us(True, a.calls, a.repeats)}
    print(f"impaired MNIST-1D host, one bare SGD step: {host['pytorch_us']:.0f} us with PyTorch's convolutions, "
          f"{host['matmul_us']:.0f} us with its kernel-1 convolutions as matrix products "
          f"({host['pytorch_us'] / host['matmul_us']:.2f}x)")
    if a.out:
        figures = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(), "shapes": rows,
                   "host_step": host}
        write_json_atomic(Path(a.out), figures, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
