"Nissa plots work on JSONL written by the hub, including a partial last line."
import io

import matplotlib
matplotlib.use("Agg")
import pytest

from esper.leyline import TelemetryEvent
from esper.nissa import load_events, make_hub, plot_lifecycle_timeline, plot_training_curves, lifecycle_spans


def _run(tmp_path):
    with make_hub(tmp_path, level="normal", tensorboard=False, stream=io.StringIO()) as hub:
        step = 0
        for episode in range(2):
            for epoch in range(1, 6):
                step += 1
                for env in (0, 1):
                    hub.emit(TelemetryEvent("epoch_completed", {"train_loss": 1.0 / epoch, "val_accuracy": 10.0 * epoch + env},
                                            epoch=epoch, step=step, env_id=env))
                if epoch == 2:
                    hub.emit(TelemetryEvent("seed_germinated", {"blueprint": "norm"}, epoch=epoch, step=step, env_id=0, slot_id="block1"))
                if epoch == 4:
                    hub.emit(TelemetryEvent("seed_pruned", {"reason": "r"}, epoch=epoch, step=step, env_id=0, slot_id="block1"))
            hub.emit(TelemetryEvent("ppo_update", {"policy_loss": 0.1, "value_loss": 0.2, "entropy": 1.0, "entropy_coef": 0.01,
                                                   "explained_variance": 0.3, "head_entropy/op": 0.9}, step=step))
    with open(tmp_path/"events.jsonl", "ab") as f: f.write(b'{"event_type": "epo')
    return load_events(tmp_path)


def test_plots_from_hub_jsonl(tmp_path):
    events = _run(tmp_path)
    fig = plot_training_curves(events)
    assert len(fig.axes) >= 6
    assert fig.axes[1].lines[0].get_xydata().shape == (10, 2)     # val accuracy: one point per step, envs averaged
    fig2 = plot_lifecycle_timeline(events, x="step")
    assert [t.get_text() for t in fig2.axes[0].get_yticklabels()] == ["env 0 / block1"]
    spans, markers = lifecycle_spans(events, x="step")
    assert spans[(0, "block1")] == [(2, 4, "GERMINATED"), (4, 7, "PRUNED"), (7, 9, "GERMINATED"), (9, 10, "PRUNED")]
    assert [k for _, _, k in markers] == ["germinated", "pruned"] * 2


def test_plots_refuse_empty_runs():
    with pytest.raises(ValueError, match="no EPOCH_COMPLETED"): plot_training_curves([TelemetryEvent("training_started")])
    with pytest.raises(ValueError, match="x must be"): plot_training_curves([TelemetryEvent("epoch_completed", epoch=1)], x="time")
