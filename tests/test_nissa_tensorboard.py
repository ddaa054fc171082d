"Nissa TensorBoard backend: event files readable by tensorboard's EventAccumulator with the expected tags."
import io

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from esper.leyline import HEAD_NAMES, TelemetryEvent
from esper.nissa import TensorBoardBackend, make_hub


def _read(log_dir):
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0}); acc.Reload()
    return acc


def test_tensorboard_tags_and_steps(tmp_path):
    with make_hub(tmp_path, level="normal", console=True, stream=io.StringIO()) as hub:
        hub.emit(TelemetryEvent("training_started", {"task": "mnist1d", "mode": "ppo"}))
        for step in (1, 2, 3):
            hub.emit(TelemetryEvent("epoch_completed", {"train_loss": 2.0 / step, "train_accuracy": 20.0 * step,
                                                        "val_loss": 2.1 / step, "val_accuracy": 19.0 * step,
                                                        "seed_counts": {"TRAINING": 1, "BLENDING": step - 1}},
                                    epoch=step, step=step))
        ppo = {"policy_loss": -0.01, "value_loss": 0.4, "entropy": 1.3, "entropy_coef": 0.05, "approx_kl": 0.01,
               "clipfrac": 0.1, "explained_variance": 0.2, "value_mean": 0.1, "value_std": 0.3, "return_mean": 0.2,
               "return_std": 0.5, **{f"head_entropy/{h}": torch.tensor(0.5) for h in HEAD_NAMES}}
        hub.emit(TelemetryEvent("ppo_update", ppo, step=3))
        hub.emit(TelemetryEvent("seed_germinated", {"blueprint": "norm"}, epoch=1, step=1, env_id=0, slot_id="block1"))
        hub.emit(TelemetryEvent("seed_pruned", {"reason": "x"}, epoch=2, step=2, env_id=0, slot_id="block1"))
        hub.emit(TelemetryEvent("batch_completed", {"loss": 1.0}, step=1))   # DEBUG: dropped at NORMAL
    acc = _read(tmp_path/"tensorboard")
    tags = set(acc.Tags()["scalars"])
    expected = {f"epoch/{k}" for k in ("train_loss", "train_accuracy", "val_loss", "val_accuracy")}
    expected |= {f"ppo/{k}" for k in ppo} | {"seeds/TRAINING", "seeds/BLENDING", "lifecycle/germinated", "lifecycle/pruned"}
    assert tags == expected
    assert [(s.step, s.value) for s in acc.Scalars("epoch/val_accuracy")] == [(1, 19.0), (2, 38.0), (3, 57.0)]
    assert [(s.step, s.value) for s in acc.Scalars("seeds/BLENDING")] == [(1, 0.0), (2, 1.0), (3, 2.0)]
    assert [s.step for s in acc.Scalars("ppo/entropy_coef")] == [3]
    assert acc.Scalars("ppo/head_entropy/op")[0].value == pytest.approx(0.5)
    assert "run/config/text_summary" in acc.Tags()["tensors"]


def test_vectorized_envs_get_their_own_tags_and_fallback_steps(tmp_path):
    tb = TensorBoardBackend(tmp_path)
    for env in (0, 1):
        for epoch in (1, 2): tb.emit(TelemetryEvent("epoch_completed", {"val_accuracy": 10.0 * env + epoch}, epoch=epoch, env_id=env))
    tb.emit(TelemetryEvent("episode_completed", {"episode_return": 1.5}))
    tb.emit(TelemetryEvent("episode_completed", {"episode_return": 2.5}))
    tb.close()
    acc = _read(tmp_path)
    assert set(acc.Tags()["scalars"]) == {"epoch/val_accuracy/env0", "epoch/val_accuracy/env1", "episode/episode_return"}
    assert [(s.step, s.value) for s in acc.Scalars("epoch/val_accuracy/env1")] == [(1, 11.0), (2, 12.0)]
    assert [s.step for s in acc.Scalars("episode/episode_return")] == [1, 2]   # counted when no step/epoch
