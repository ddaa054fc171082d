"""Nothing damaged is trusted: checkpoints (checksums, entries, finite numbers, trainer state), the MNIST-1D cache and
the learning benchmark's resume files are refused in one line naming the file; running out of memory is called that."""
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from esper.simic.agent.checkpoint import read_checkpoint
from esper.simic.agent.ppo import PPOAgent
from esper.simic.trainers.checkpoint import capture_rng, load_training_checkpoint, save_training_checkpoint

from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


def _agent() -> PPOAgent:
    torch.manual_seed(0)
    return PPOAgent(state_dim=4, action_dim=3, hidden_dim=16)


def _trainer() -> dict:
    return {"batches_done": 1, "history": [{"batch": 1, "episodes": 2}], "config": {"episodes_per_update": 2},
            "rng": capture_rng()}


def _flip_exponents(src: Path, dst: Path) -> None:
    "Add 10 to the exponent of the first float of every tensor record, as a disk or a copy might: CRCs unchanged."
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        for info in z.infolist():
            if "/data/" in info.filename and info.file_size >= 4:
                n, m = struct.unpack("<HH", data[info.header_offset + 26: info.header_offset + 30])
                at = info.header_offset + 30 + n + m + 3
                data[at] = (data[at] + 5) % 256
    dst.write_bytes(bytes(data))


def _one_line(f) -> str:
    with pytest.raises(ValueError) as e:
        f()
    assert "\n" not in str(e.value), str(e.value)
    return str(e.value)


def test_a_byte_changed_inside_the_checkpoint_fails_its_checksum(tmp_path):
    _agent().save(tmp_path / "a.pt")
    _flip_exponents(tmp_path / "a.pt", tmp_path / "flipped.pt")
    weight = torch.load(tmp_path / "flipped.pt", weights_only=True)["network_state_dict"]["shared.0.weight"]
    assert weight.abs().max() > 10  # what torch.load alone hands back: weights 1024 times too large
    for load in (lambda: PPOAgent.from_checkpoint(tmp_path / "flipped.pt"),
                 lambda: _agent().load(tmp_path / "flipped.pt"), lambda: read_checkpoint(tmp_path / "flipped.pt")):
        msg = _one_line(load)
        assert f"{tmp_path / 'flipped.pt'} is damaged: record " in msg and "fails its CRC-32 check" in msg, msg
    PPOAgent.from_checkpoint(tmp_path / "a.pt")  # the file as written loads


def test_non_finite_weights_optimizer_state_or_normalizer_stats_are_refused(tmp_path):
    a = _agent()
    a.save(tmp_path / "a.pt")
    ck = torch.load(tmp_path / "a.pt", weights_only=True)
    w = ck["network_state_dict"]["shared.0.weight"].clone()
    w[1, 2] = float("nan")
    torch.save(ck | {"network_state_dict": ck["network_state_dict"] | {"shared.0.weight": w}}, tmp_path / "nan.pt")
    msg = _one_line(lambda: PPOAgent.from_checkpoint(tmp_path / "nan.pt"))
    assert "nan.pt cannot be used: network_state_dict['shared.0.weight'] holds 1 non-finite value" in msg, msg
    groups = ck["optimizer_state_dict"]["param_groups"]
    torch.save(ck | {"optimizer_state_dict": {"state": {}, "param_groups": [groups[0] | {"lr": float("inf")}]}},
               tmp_path / "lr.pt")
    assert "optimizer_state_dict['param_groups'][0]['lr'] is inf" in _one_line(lambda: a.load(tmp_path / "lr.pt"))
    stats = {"mean": torch.tensor([0.0, float("inf"), 0, 0]), "var": torch.ones(4), "count": torch.tensor(3.0)}
    torch.save(ck | {"obs_normalizer": stats}, tmp_path / "obs.pt")
    assert "obs_normalizer['mean'] holds 1 non-finite" in _one_line(lambda: a.load(tmp_path / "obs.pt"))


def test_missing_or_mistyped_entries_are_one_line_not_a_key_error(tmp_path):
    a = _agent()
    a.save(tmp_path / "a.pt")
    ck = torch.load(tmp_path / "a.pt", weights_only=True)
    for key in ("config", "network_state_dict", "optimizer_state_dict", "train_steps", "obs_normalizer",
                "reward_normalizer"):
        torch.save({k: v for k, v in ck.items() if k != key}, tmp_path / "partial.pt")
        msg = _one_line(lambda: PPOAgent.from_checkpoint(tmp_path / "partial.pt"))
        assert msg.startswith(f"{tmp_path / 'partial.pt'} is not a complete PPOAgent checkpoint: it lacks {key};"), msg
    torch.save(ck | {"config": {k: v for k, v in ck["config"].items() if k != "hidden_dim"}}, tmp_path / "cfg.pt")
    assert "config lacks hidden_dim" in _one_line(lambda: a.load(tmp_path / "cfg.pt"))
    torch.save(ck | {"network_state_dict": [1, 2]}, tmp_path / "list.pt")
    assert "network_state_dict is a list, expected dict" in _one_line(lambda: a.load(tmp_path / "list.pt"))
    torch.save(ck | {"network_state_dict": {"shared.0.weight": torch.zeros(3)}}, tmp_path / "shape.pt")
    msg = _one_line(lambda: a.load(tmp_path / "shape.pt"))
    assert "shape.pt: its network weights do not fit the agent: Error(s) in loading state_dict" in msg, msg


def test_trainer_checkpoints_missing_what_a_resume_reads_are_refused(tmp_path):
    a = _agent()
    for key in ("config", "history", "batches_done", "rng"):
        save_training_checkpoint(tmp_path / "t.pt", a, {k: v for k, v in _trainer().items() if k != key})
        msg = _one_line(lambda: load_training_checkpoint(tmp_path / "t.pt", _agent()))
        assert f"{tmp_path / 't.pt'} holds unusable trainer state: it lacks {key};" in msg, msg
    save_training_checkpoint(tmp_path / "t.pt", a, _trainer() | {"batches_done": "1"})
    assert "batches_done is a str, expected int" in _one_line(lambda: read_checkpoint(tmp_path / "t.pt"))
    save_training_checkpoint(tmp_path / "t.pt", a, _trainer())
    assert load_training_checkpoint(tmp_path / "t.pt", _agent())["batches_done"] == 1


def _esper_train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    env.pop("ESPER_DEBUG", None)
    return subprocess.run([sys.executable, "-c", "import sys; from esper.cli import main; sys.exit(main())", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_cli_refuses_damaged_checkpoints_in_one_line_before_any_work(tmp_path):
    a = _agent()
    save_training_checkpoint(tmp_path / "run.pt", a, _trainer())
    _flip_exponents(tmp_path / "run.pt", tmp_path / "flipped.pt")
    tiny = ["--max-epochs", "2", "--max-batches", "1"]
    p = _esper_train("ppo", "--vectorized", "--n-envs", "2", "--n-episodes", "4", "--resume", "flipped.pt",
                     "--save", "flipped.pt", "--no-progress", *tiny, cwd=tmp_path)
    assert p.returncode == 1 and p.stdout == "", p.stdout + p.stderr  # refused before the first line of a run
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("esper-train ppo: error: --resume: flipped.pt is damaged: record ")
    ck = torch.load(tmp_path / "run.pt", weights_only=True)
    torch.save({k: v for k, v in ck.items() if k != "config"}, tmp_path / "noconfig.pt")
    p = _esper_train("compare", "--checkpoint", "noconfig.pt", "--controllers", "ppo", "--seeds", "1", *tiny,
                     cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("esper-train compare: error: noconfig.pt is not a complete PPOAgent checkpoint: "
                               "it lacks config"), p.stderr
    assert not list(tmp_path.rglob("comparison*"))  # refused before any controller ran


def _cache(tmp_path: Path) -> Path:
    (tmp_path / "mnist1d").mkdir()
    arrays = {"x": np.zeros((8, 40), np.float32), "y": np.arange(8), "x_test": np.zeros((4, 40), np.float32),
              "y_test": np.arange(4)}
    np.savez(tmp_path / "mnist1d" / "mnist1d_seed42.npz", **arrays)
    return tmp_path / "mnist1d" / "mnist1d_seed42.npz"


def test_a_byte_changed_inside_the_mnist1d_cache_is_refused(tmp_path):
    from esper.tasks import InvalidTaskData, load_mnist1d_arrays
    cache = _cache(tmp_path)
    data = bytearray(cache.read_bytes())
    with zipfile.ZipFile(cache) as z:
        info = z.getinfo("y_test.npy")
    n, m = struct.unpack("<HH", data[info.header_offset + 26: info.header_offset + 30])
    data[info.header_offset + 30 + n + m + info.file_size - 8] ^= 0x01  # label 3 becomes 2: a valid label
    cache.write_bytes(bytes(data))
    with pytest.raises(InvalidTaskData) as e:
        load_mnist1d_arrays(tmp_path)
    assert str(e.value) == (f"{cache}: unreadable (BadZipFile: Bad CRC-32 for file 'y_test.npy'); "
                            "delete it and it will be regenerated")


def test_out_of_memory_while_reading_the_cache_is_not_called_a_bad_cache(tmp_path, monkeypatch):
    from esper.tasks import load_mnist1d_arrays
    _cache(tmp_path)

    def no_memory(*args, **kwargs):
        raise MemoryError()
    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(MemoryError):
        load_mnist1d_arrays(tmp_path)


def test_main_turns_memory_error_into_one_line_naming_the_large_counts(monkeypatch, capsys):
    import esper.cli.ppo as ppo
    from esper.cli import main

    def run(args):
        raise MemoryError()
    monkeypatch.setattr(ppo, "run", run)
    monkeypatch.delenv("ESPER_DEBUG", raising=False)
    status = main(["ppo", "--vectorized", "--n-envs", "100000000", "--max-epochs", "3", "--seed", "999999999"])
    err = capsys.readouterr().err
    assert status == 1
    assert err == "esper-train ppo: error: out of memory (MemoryError); ask for less: --n-envs 100000000\n", err
    assert main(["ppo"]) == 1  # nothing raised: nothing to name
    assert capsys.readouterr().err == "esper-train ppo: error: out of memory (MemoryError); run a smaller job, or free memory first\n"


def _bench_learning():
    return load_script("bench/bench_learning.py", "bench_learning_faults")


@pytest.mark.parametrize("clock, said", [
    ('{"train_seconds": 12.5', "clock.json is unreadable (JSONDecodeError"),
    ('{"seconds": 12.5}', "clock.json has train_seconds None, expected a finite number >= 0"),
    ('{"train_seconds": NaN}', "clock.json has train_seconds nan, expected a finite number >= 0"),
])
def test_bench_learning_resume_refuses_a_damaged_clock_before_any_work(tmp_path, capsys, clock, said):
    bl = _bench_learning()
    (tmp_path / "seed0").mkdir()
    (tmp_path / "seed0" / "clock.json").write_text(clock)
    with pytest.raises(SystemExit) as e:
        bl.resolve_args(bl.build_parser(), ["--train-seeds", "0", "--out", str(tmp_path), "--resume"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"bench_learning.py: error: --resume: {tmp_path / 'seed0' / 'clock.json'}") and said in err


def test_bench_learning_resume_refuses_a_damaged_checkpoint_before_any_work(tmp_path, capsys):
    bl = _bench_learning()
    (tmp_path / "seed0").mkdir()
    save_training_checkpoint(tmp_path / "run.pt", _agent(), _trainer())
    _flip_exponents(tmp_path / "run.pt", tmp_path / "seed0" / "agent.pt")
    with pytest.raises(SystemExit) as e:
        bl.resolve_args(bl.build_parser(), ["--train-seeds", "0", "--out", str(tmp_path), "--resume"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert f"--resume: {tmp_path / 'seed0' / 'agent.pt'} is damaged: record " in err, err
    (tmp_path / "seed0" / "agent.pt").write_bytes((tmp_path / "run.pt").read_bytes())  # intact: accepted
    args = bl.resolve_args(bl.build_parser(), ["--train-seeds", "0", "--out", str(tmp_path), "--resume"])
    assert args.resume
