"""Shared pytest configuration: `slow` tests run only with --runslow, `gpu` tests only where CUDA exists; `run_bench`
and `start_bench` run a script of `bench/` (or a probe of `lab/probes/`) the way a user would, and `load_script`
(`from conftest import load_script`) imports one to call its functions."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# One instruction set for every test's kernels, set before torch loads (subprocesses inherit it): the identity tests
# compare runs with fingerprints recorded with AVX2 kernels, and on a CPU with AVX-512 PyTorch and oneDNN otherwise
# pick kernels that round differently, so the same run ends with other bits. A machine without AVX2 keeps its own.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "bench"
PROBES_DIR = ROOT / "lab" / "probes"


def script_path(script: str) -> Path:
    "A benchmark of `bench/`, or else a probe of `lab/probes/`, by its file name."
    return BENCH_DIR / script if (BENCH_DIR / script).exists() else PROBES_DIR / script


def load_script(path: str | Path, name: str | None = None, register: bool = False):
    """The script at `path` (from the repository's root: `bench/...`, `lab/probes/...`, `.ci/...`) imported as module
    `name` (its file's stem unless given), its folder first on `sys.path` as when it runs; `register` also puts it in
    `sys.modules` first (its jobs are pickled by name for worker processes; dataclasses look their module up)."""
    path = ROOT / path
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


def _bench_command(script: str, *args: str) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, str(script_path(script)), *args], os.environ | {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def run_bench():
    "`run_bench(script, *args, cwd=, timeout=)`: `bench/<script>` in a fresh interpreter with one torch thread."
    def run(script: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        cmd, env = _bench_command(script, *args)
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return run


@pytest.fixture
def start_bench():
    "`start_bench(script, *args, cwd=)`: the same, started and left running (a `Popen` with pipes); killed at teardown."
    started = []

    def start(script: str, *args: str, cwd: Path) -> subprocess.Popen:
        cmd, env = _bench_command(script, *args)
        started.append(subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True))
        return started[-1]
    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
            p.communicate()


@pytest.fixture
def text_corpus(tmp_path, monkeypatch):
    "Six made-up works of about 300 words, written as the corpus cache and made the data folder (no download)."
    import random

    from esper.tasks import write_corpus

    rng = random.Random(0)
    words = "to be or not that is the question whether tis nobler in the mind to suffer".split()
    write_corpus({f"work{i}": " ".join(rng.choice(words) for _ in range(300)) + "\n" for i in range(6)}, tmp_path)
    monkeypatch.setenv("ESPER_DATA_DIR", str(tmp_path))
    return tmp_path
