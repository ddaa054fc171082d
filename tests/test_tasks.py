"""Tasks: the real CIFAR-10 loading path on a tiny CIFAR-format folder written here, MNIST-1D caches checked on load,
and loud one-line failures."""
import hashlib
import os
import pickle
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from torchvision.datasets import CIFAR10

import esper.tasks.mnist1d as mnist1d
from esper.tasks import InvalidTaskData, TaskDataError, get_task


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
    assert (task.n_train, task.n_val, task.n_test, task.input_shape, task.n_classes) == (32, 8, 10, (3, 32, 32), 10)
    xb, yb = next(iter(task.train_loader))
    assert xb.shape == (4, 3, 32, 32) and xb.dtype == torch.float32 and yb.dtype == torch.int64
    xv, _ = next(iter(task.val_loader))
    assert abs(xv.mean().item()) < 1.0  # normalised, not raw 0..255
    xt, yt = next(iter(task.test_loader))
    assert xt.shape == (10, 3, 32, 32) and yt.dtype == torch.int64
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
    with pytest.raises(ValueError, match="unknown task 'mnist2d'; choose one of: mnist1d, digits, cifar10"):
        get_task("mnist2d")


def write_cache(data_dir: Path, **changes) -> Path:
    """Write a small valid MNIST-1D cache under `data_dir`, with `changes` (None deletes a key); return its path."""
    rng = np.random.default_rng(0)
    arrays = {"x": rng.normal(size=(20, 40)).astype(np.float32), "y": np.arange(20) % 10,
              "x_test": rng.normal(size=(10, 40)).astype(np.float32), "y_test": np.arange(10)}
    arrays |= changes
    path = data_dir / "mnist1d" / "mnist1d_seed42.npz"
    path.parent.mkdir(parents=True)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def _with_nan(shape, row, col):
    x = np.zeros(shape, np.float32)
    x[row, col] = np.nan
    return x


BAD_CACHES = {
    "length 17": (dict(x=np.zeros((20, 17), np.float32)), r"npz: x has signals of length 17, expected 40"),
    "NaN input": (dict(x=_with_nan((20, 40), 12, 3)), r"x holds 1 non-finite value \(first at row 12\)"),
    "inf test input": (dict(x_test=np.full((10, 40), np.inf, np.float32)), r"x_test holds 400 non-finite values"),
    "label 57": (dict(y=np.r_[np.arange(7), 57, np.arange(12) % 10]), r"y has label 57 at row 7, expected 0\.\.9"),
    "negative label": (dict(y_test=-np.ones(10, int)), r"y_test has 10 labels outside 0\.\.9 \(first: -1 at row 0\)"),
    "missing key": (dict(y_test=None), r"npz: missing y_test \(found: x, y, x_test\)"),
    "float labels": (dict(y=np.arange(20) % 10 * 1.0), r"y has dtype float64, expected integer labels"),
    "string inputs": (dict(x=np.full((20, 40), "a")), r"x has dtype <U1, expected floating-point signals"),
    "3-D inputs": (dict(x=np.zeros((20, 1, 40), np.float32)), r"x has shape \(20, 1, 40\), expected \(rows, 40\)"),
    "mismatched lengths": (dict(y=np.arange(17) % 10), r"x has 20 rows but y has 17"),
    "empty split": (dict(x_test=np.zeros((0, 40), np.float32),
                    y_test=np.zeros(0, int)), r"x_test and y_test are empty"),
}


@pytest.mark.parametrize("case", list(BAD_CACHES))
def test_bad_mnist1d_cache_is_one_line_naming_file_and_problem(tmp_path, case):
    changes, problem = BAD_CACHES[case]
    path = write_cache(tmp_path, **changes)
    with pytest.raises(ValueError, match=problem) as err:
        get_task("mnist1d", data_dir=tmp_path)
    msg = str(err.value)
    assert isinstance(err.value, TaskDataError)  # what callers caught before, still caught
    assert msg.startswith(f"{path}: ") and msg.endswith("delete it and it will be regenerated") and "\n" not in msg


def test_corrupt_mnist1d_cache_is_not_an_npz_archive(tmp_path):
    path = write_cache(tmp_path)
    path.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match=f"^{path}: not an .npz archive; delete it and it will be regenerated$"):
        get_task("mnist1d", data_dir=tmp_path)


def test_valid_hand_made_cache_loads_as_float32_and_int64(tmp_path):
    write_cache(tmp_path, x=np.zeros((20, 40)), y=(np.arange(20) % 10).astype(np.uint8))
    task = get_task("mnist1d", data_dir=tmp_path, batch_size=4)
    xb, yb = next(iter(task.train_loader))
    assert (task.n_train, task.n_val, task.n_test, xb.dtype, yb.dtype) == (16, 4, 10, torch.float32, torch.int64)


@pytest.mark.parametrize("below", ["afile", "afile/sub"])
def test_data_dir_below_a_file_is_one_line(tmp_path, below):
    (tmp_path / "afile").write_text("")
    folder = tmp_path / below / "mnist1d"
    with pytest.raises(ValueError, match=f"^cannot create the data folder {folder}: Not a directory "
                                         f"\\({tmp_path / 'afile'} is a file, not a folder\\); set ESPER_DATA_DIR"):
        get_task("mnist1d", data_dir=tmp_path / below)


def test_cache_write_failure_is_one_line(tmp_path):
    path = tmp_path / "mnist1d" / "mnist1d_seed42.npz"
    failure = PermissionError(13, "Permission denied", str(path))
    with mock.patch.object(mnist1d, "_load_or_generate_mnist1d", side_effect=failure):
        with pytest.raises(ValueError, match=f"^cannot write the cache file {path}: Permission denied; set ESPER"):
            get_task("mnist1d", data_dir=tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_data_folder_is_one_line(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    (tmp_path / "ro2" / "mnist1d").mkdir(parents=True)
    (tmp_path / "ro2" / "mnist1d").chmod(0o555)
    try:
        with pytest.raises(ValueError, match=f"cannot create the data folder {tmp_path}/ro/mnist1d: Permission denied"):
            get_task("mnist1d", data_dir=tmp_path / "ro")
        with pytest.raises(ValueError, match=f"cannot write the cache file {tmp_path}/ro2/mnist1d/.*: Permission"):
            get_task("mnist1d", data_dir=tmp_path / "ro2")
    finally:
        (tmp_path / "ro").chmod(0o755)
        (tmp_path / "ro2" / "mnist1d").chmod(0o755)


def test_read_only_folder_with_a_valid_cache_still_loads(tmp_path):
    path = write_cache(tmp_path)
    for p, mode in ((path, 0o444), (path.parent, 0o555), (tmp_path, 0o555)):
        p.chmod(mode)
    try:
        assert get_task("mnist1d", data_dir=tmp_path).n_train == 16
        assert sorted(p.name for p in path.parent.iterdir()) == ["mnist1d_seed42.npz"]
    finally:
        for p in (tmp_path, path.parent):
            p.chmod(0o755)


def test_cifar10_data_dir_below_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(InvalidTaskData, match=r"^task 'cifar10': cannot create or read .*: Not a directory \(.* is a"):
        get_task("cifar10", data_dir=tmp_path / "afile" / "sub", download=True)


def test_mnist1d_splits_are_honest(tmp_path):
    write_cache(tmp_path)
    task = get_task("mnist1d", data_dir=tmp_path, val_fraction=0.25)
    x = lambda loader: loader.dataset.tensors[0][:, 0]
    a = np.load(tmp_path / "mnist1d" / "mnist1d_seed42.npz")
    assert torch.equal(x(task.train_loader), torch.from_numpy(a["x"][:15]))  # validation: the end of training
    assert torch.equal(x(task.val_loader), torch.from_numpy(a["x"][15:]))
    assert torch.equal(x(task.test_loader), torch.from_numpy(a["x_test"]))  # the published test split


def test_heldout_seeds_draw_their_own_mnist1d_data(tmp_path):
    with mock.patch.object(mnist1d, "_generate_mnist1d", wraps=mnist1d._generate_mnist1d) as gen:
        train = [get_task("mnist1d", data_dir=tmp_path, seed=s) for s in (0, 1)]
        held = get_task("mnist1d", data_dir=tmp_path, seed=1000)
    assert [c.args[0] for c in gen.call_args_list] == [42, 1000]  # the training seeds share one dataset
    xs = [t.test_loader.dataset.tensors[0] for t in (*train, held)]
    assert torch.equal(xs[0], xs[1]) and not torch.equal(xs[0], xs[2])
    assert sorted(p.name for p in (tmp_path / "mnist1d").iterdir()) == ["mnist1d_seed1000.npz", "mnist1d_seed42.npz"]


def test_mnist1d_settings_get_their_own_cache(tmp_path):
    write_cache(tmp_path)
    default = dict(np.load(tmp_path / "mnist1d" / "mnist1d_seed42.npz"))
    with mock.patch.object(mnist1d, "_generate_mnist1d", side_effect=lambda seed, settings: default) as gen:
        get_task("mnist1d", data_dir=tmp_path, settings={"shuffle_seq": True})
    assert gen.call_args.args[1]["shuffle_seq"] is True
    names = sorted(p.name for p in (tmp_path / "mnist1d").iterdir())
    assert len(names) == 2 and "mnist1d_seed42.npz" in names and all(n.endswith("_seed42.npz") for n in names)


def test_digits_loads_offline_with_a_fixed_test_split():
    a, b = get_task("digits", seed=0), get_task("digits", seed=2000)
    assert (a.n_train, a.n_val, a.n_test, a.input_shape, a.n_classes) == (1078, 269, 450, (1, 8, 8), 10)
    assert torch.equal(a.test_loader.dataset.tensors[0], b.test_loader.dataset.tensors[0])
    assert not torch.equal(a.train_loader.dataset.tensors[1], b.train_loader.dataset.tensors[1])
    with pytest.raises(ValueError, match=r"^task 'digits': noise_std must be a number in \[0.0, 2.0\] \(got -1\)$"):
        get_task("digits", settings={"noise_std": -1})


def test_cifar10_subsets_grow_the_impaired_resnet_in_an_episode(tiny_cifar):
    from esper.tamiyo import run_episode
    from esper.tamiyo.plans import PlanTamiyo
    from esper.tamiyo.problems import GrowthProblem

    settings = {"train_rows": 20, "test_rows": 6, "augment": False}
    task = get_task("cifar10", data_dir=tiny_cifar, batch_size=4, settings=settings, host="cifar_resnet_impaired")
    assert (task.n_train, task.n_val, task.n_test) == (16, 4, 6)
    assert task.make_host().block_names == ("stage1", "stage2", "stage3")
    res = run_episode(task, PlanTamiyo("conv_small@stage2/1"), seed=0, problem=GrowthProblem.of_task(task, max_epochs=2, max_batches=2))
    assert res.grown.startswith("conv_small@stage2") and res.params_added == 32 * 32 * 9 + 2 * 32 + 32 * 32 + 32
    problem = GrowthProblem("cifar-resnet-p20k", "cifar10", settings, "cifar_resnet_impaired", param_budget=20_000)
    assert problem.load_task(0, data_dir=tiny_cifar).n_test == 6
    with pytest.raises(ValueError, match="train_rows must be an integer in \\[0, 50000\\]"):
        GrowthProblem("too-many", "cifar10", {"train_rows": 60_000})
