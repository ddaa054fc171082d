"Nissa JSONL: strict JSON, round trip, and a process killed mid-run leaves every completed line valid."
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from esper.leyline import SeedStage, TelemetryEvent
from esper.nissa import JSONLBackend, load_events, make_hub

WRITER = textwrap.dedent("""
    import sys
    from esper.leyline import TelemetryEvent
    from esper.nissa import make_hub
    hub = make_hub(sys.argv[1], level="debug", console=False, tensorboard=False)
    i = 0
    while True:  # runs until killed
        big = [float(j) for j in range(3000)] if i % 7 == 3 else []   # some ~50 KB lines
        hub.emit(TelemetryEvent("batch_completed", {"i": i, "loss": 1.0 / (i + 1), "big": big}, step=i))
        i += 1
""")


def test_sigkill_mid_run_loses_only_a_partial_last_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env)
    f = tmp_path/"events.jsonl"
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if f.exists() and f.stat().st_size > 400_000: break
            time.sleep(0.02)
        else:
            pytest.fail("the writer process produced too little output")
    finally:
        proc.send_signal(signal.SIGKILL); proc.wait()
    assert proc.returncode == -signal.SIGKILL
    raw = f.read_bytes()
    *complete, tail = raw.split(b"\n")
    assert len(complete) > 20
    ids = [json.loads(line)["data"]["i"] for line in complete]   # every completed line is valid JSON
    assert ids == list(range(len(ids)))                           # nothing lost in the middle
    if tail:                                                       # a partial line is not valid JSON
        with pytest.raises(ValueError): json.loads(tail)
    events = load_events(tmp_path)
    assert [e.data["i"] for e in events] == ids


def test_partial_last_line_is_skipped_but_middle_corruption_is_an_error(tmp_path, caplog):
    f = tmp_path/"events.jsonl"
    jb = JSONLBackend(f)
    for i in range(5): jb.emit(TelemetryEvent("epoch_completed", {"val_accuracy": 10.0 * i}, epoch=i + 1))
    jb.close()
    full = f.read_bytes()
    for cut in range(1, 40):                       # any truncation of the last line
        f.write_bytes(full[:-cut])
        got = load_events(f)
        assert [e.epoch for e in got] == ([1, 2, 3, 4, 5] if cut == 1 else [1, 2, 3, 4])
    lines = full.split(b"\n")
    lines[2] = lines[2][:-5]
    f.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError, match=r"events.jsonl:3"): load_events(f)


def test_round_trip_of_tensors_numpy_enums_and_nonfinite(tmp_path):
    data = {"t": torch.tensor(2.5), "v": torch.tensor([1, 2]), "n": np.float64(0.5), "i": np.int32(3),
            "stage": SeedStage.BLENDING, "nan": float("nan"), "inf": math.inf, "neg": -math.inf,
            "head_entropy/op": torch.tensor(0.25), "nested": {"a": [np.float32(1.0)]}, "flag": True, "none": None}
    ev = TelemetryEvent("ppo_update", data, step=7, epoch=3, env_id=1, slot_id="block2", seed_id="s9", severity="warning")
    with make_hub(tmp_path, level="debug", console=False, tensorboard=False) as hub:
        hub.emit(ev)
    line = (tmp_path/"events.jsonl").read_text().strip()
    json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    (back,) = load_events(tmp_path)
    assert (back.step, back.epoch, back.env_id, back.slot_id, back.seed_id, back.severity) == (7, 3, 1, "block2", "s9", "warning")
    assert back.timestamp == ev.timestamp
    d = back.data
    assert (d["t"], d["v"], d["n"], d["i"], d["stage"]) == (2.5, [1, 2], 0.5, 3, "BLENDING")
    assert math.isnan(d["nan"]) and d["inf"] == math.inf and d["neg"] == -math.inf
    assert d["head_entropy/op"] == 0.25 and d["nested"] == {"a": [1.0]} and d["flag"] is True and d["none"] is None


def test_append_mode_and_readable_while_open(tmp_path):
    f = tmp_path/"sub"/"events.jsonl"
    a = JSONLBackend(f); a.emit(TelemetryEvent("training_started")); a.close()
    b = JSONLBackend(f); b.emit(TelemetryEvent("training_completed"))
    assert [e.event_type.value for e in load_events(f)] == ["training_started", "training_completed"]
    b.close()


def test_unserialisable_value_is_a_clear_error(tmp_path):
    jb = JSONLBackend(tmp_path/"e.jsonl")
    with pytest.raises(TypeError, match="not serialisable"): jb.emit(TelemetryEvent("epoch_completed", {"x": object()}))
    jb.close()
