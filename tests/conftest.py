"""Shared pytest configuration: `slow` tests run only with --runslow, `gpu` tests only where CUDA exists; `run_bench`
runs a script of `bench/` the way a user would."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds; skipped unless --runslow")
    config.addinivalue_line("markers", "gpu: needs CUDA; skipped where it is not available")


def pytest_collection_modifyitems(config, items):
    skip_slow = pytest.mark.skip(reason="slow: pass --runslow to run")
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)


@pytest.fixture
def run_bench():
    "`run_bench(script, *args, cwd=, timeout=)`: `bench/<script>` in a fresh interpreter with one torch thread."
    def run(script: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        env = os.environ | {"OMP_NUM_THREADS": "1"}
        return subprocess.run([sys.executable, str(BENCH_DIR / script), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    return run
