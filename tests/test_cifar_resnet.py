"""bench/cifar_resnet.py, the ResNet-on-CIFAR-10 benchmark a device session runs (issue 73): on CIFAR-10 files a test
writes in CIFAR-10's own format, each arm plays, the grown arm stays within the healthy ResNet's parameters, and the
results file holds the command, the budget and every episode; without data it is one line before any episode."""
import json
from unittest import mock

import pytest
from torchvision.datasets import CIFAR10

from conftest import load_script
from test_tasks import write_tiny_cifar


def _bench():
    return load_script("bench/cifar_resnet.py")


def test_the_three_arms_play_on_cifar10_files(tmp_path):
    lists = write_tiny_cifar(tmp_path)
    out = tmp_path / "results.json"
    with mock.patch.multiple(CIFAR10, **lists):
        assert _bench().main(["--seeds", "0", "--epochs", "2", "--max-batches", "2", "--batch-size", "8", "--device",
                              "cpu", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["budget"] == 78_042 and list(r["summary"]) == [
        "static impaired ResNet-8", "impaired ResNet-8 grown by the heuristic", "healthy ResNet-8"]
    assert r["summary"]["static impaired ResNet-8"]["params"] == 12_506
    assert r["summary"]["healthy ResNet-8"]["params"] == 78_042
    assert r["summary"]["impaired ResNet-8 grown by the heuristic"]["params"] <= 78_042
    assert all(len(eps) == 1 for eps in r["episodes"].values())


def test_without_cifar10_it_is_one_line_before_any_episode(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _bench().main(["--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "task 'cifar10'" in err[0] and "Download it once" in err[0], err
    assert not (tmp_path / "r.json").exists()
