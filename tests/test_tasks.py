"""Tasks: the real CIFAR-10 loading path on a tiny CIFAR-format folder written here, and loud failures."""
import hashlib
import pickle
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from torchvision.datasets import CIFAR10

from esper.tasks import TaskDataError, get_task


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def write_tiny_cifar(root: Path, n_train_per_batch: int = 8, n_test: int = 10) -> dict:
    """Write a CIFAR-10 folder in the original python-pickle format; return the file list with MD5s."""
    folder = root / "cifar10" / CIFAR10.base_folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def batch(name, n):
        entry = {"data": rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8), "labels": list(rng.integers(0, 10, n))}
        (folder / name).write_bytes(pickle.dumps(entry))
        return [name, _md5(folder / name)]

    train_list = [batch(f"data_batch_{i}", n_train_per_batch) for i in range(1, 6)]
    test_list = [batch("test_batch", n_test)]
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": names}))
    meta = {"filename": "batches.meta", "key": "label_names", "md5": _md5(folder / "batches.meta")}
    return dict(train_list=train_list, test_list=test_list, meta=meta)


@pytest.fixture
def tiny_cifar(tmp_path):
    lists = write_tiny_cifar(tmp_path)
    with mock.patch.multiple(CIFAR10, **lists):
        yield tmp_path


def test_cifar10_loads_through_torchvision(tiny_cifar):
    task = get_task("cifar10", data_dir=tiny_cifar, batch_size=4)
    assert (task.n_train, task.n_val, task.input_shape, task.n_classes) == (40, 10, (3, 32, 32), 10)
    xb, yb = next(iter(task.train_loader))
    assert xb.shape == (4, 3, 32, 32) and xb.dtype == torch.float32 and yb.dtype == torch.int64
    xv, _ = next(iter(task.val_loader))
    assert abs(xv.mean().item()) < 1.0  # normalised, not raw 0..255
    host = task.make_host()
    assert host(xb).shape == (4, 10)
    assert host.block_names == ("block1", "block2", "block3")


def test_cifar10_corrupt_file_is_a_clear_error(tiny_cifar):
    (tiny_cifar / "cifar10" / CIFAR10.base_folder / "data_batch_3").write_bytes(b"truncated")
    with pytest.raises(TaskDataError, match="task 'cifar10'.*download=True"):
        get_task("cifar10", data_dir=tiny_cifar)


def test_cifar10_missing_folder_says_how_to_download(tmp_path):
    with pytest.raises(TaskDataError, match="Download it once on a machine with internet"):
        get_task("cifar10", data_dir=tmp_path / "nothing-here")


def test_mnist1d_is_deterministic_for_a_data_seed(tmp_path):
    a = get_task("mnist1d", data_dir=tmp_path / "a", data_seed=7)
    b = get_task("mnist1d", data_dir=tmp_path / "b", data_seed=7)
    c = get_task("mnist1d", data_dir=tmp_path / "c", data_seed=8)
    xa, xb, xc = (t.train_loader.dataset.tensors[0] for t in (a, b, c))
    assert torch.equal(xa, xb) and not torch.equal(xa, xc)


def test_mnist1d_generation_leaves_global_rng_alone(tmp_path):
    np.random.seed(123); expected = np.random.rand()
    np.random.seed(123)
    get_task("mnist1d", data_dir=tmp_path)
    assert np.random.rand() == expected


def test_unknown_task_names_the_choices():
    with pytest.raises(ValueError, match="unknown task 'mnist2d'; choose one of: mnist1d, cifar10"):
        get_task("mnist2d")
