"The baseline job's telemetry flags: JSONL and TensorBoard files written and readable, levels respected."
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from esper.cli import main
from esper.nissa import check_payload, load_events


def test_baseline_writes_jsonl_and_tensorboard(tmp_path, capsys):
    rc = main(["baseline", "--epochs", "2", "--out", str(tmp_path/"out"), "--telemetry-dir", str(tmp_path/"tel"),
               "--no-progress"])
    assert rc == 0
    events = load_events(tmp_path/"tel")
    assert [e.event_type.value for e in events] == ["training_started", "epoch_completed", "epoch_completed",
                                                    "training_completed"]
    for e in events: check_payload(e)             # the baseline follows the payload conventions
    ep = events[1]
    assert (ep.epoch, ep.step) == (1, 1)
    assert {"train_loss", "train_accuracy", "val_loss", "val_accuracy"} <= set(ep.data)
    assert 0 <= ep.data["val_accuracy"] <= 100
    assert events[-1].data["final_val_accuracy"] == events[2].data["val_accuracy"]
    acc = EventAccumulator(str(tmp_path/"tel"/"tensorboard")); acc.Reload()
    assert {"epoch/train_loss", "epoch/val_accuracy"} <= set(acc.Tags()["scalars"])
    assert [s.step for s in acc.Scalars("epoch/val_accuracy")] == [1, 2]
    assert "telemetry in" in capsys.readouterr().out


def test_baseline_telemetry_level_minimal_and_bad_level(tmp_path, capsys):
    assert main(["baseline", "--epochs", "1", "--out", str(tmp_path/"out"), "--telemetry-dir", str(tmp_path/"tel"),
                 "--telemetry-level", "MINIMAL", "--no-progress"]) == 0
    assert [e.event_type.value for e in load_events(tmp_path/"tel")] == ["training_started", "training_completed"]
    with pytest.raises(SystemExit) as ex:
        main(["baseline", "--telemetry-level", "verbose"])
    assert ex.value.code == 2 and "--telemetry-level" in capsys.readouterr().err
