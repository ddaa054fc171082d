"Nissa hub: fan-out, failing backends isolated, level filtering, escalation and decay."
import logging
import threading

import pytest

from esper.leyline import TelemetryEvent, TelemetryEventType
from esper.nissa import check_payload, TelemetryBackend, TelemetryConfig, TelemetryHub, TelemetryLevel, EVENT_LEVELS


class Sink(TelemetryBackend):
    def __init__(self, name="sink"):
        self.name, self.events, self.closed, self.flushed = name, [], 0, 0
    def emit(self, event): self.events.append(event)
    def flush(self): self.flushed += 1
    def close(self): self.closed += 1


class Broken(TelemetryBackend):
    name = "broken"
    def __init__(self, fail_on=0): self.calls, self.fail_on = 0, fail_on
    def emit(self, event):
        self.calls += 1
        if self.calls > self.fail_on: raise RuntimeError("backend exploded")


def ev(t="epoch_completed", **kw): return TelemetryEvent(t, **kw)


def test_fan_out_order_and_close():
    sinks = [Sink(f"s{i}") for i in range(3)]
    with TelemetryHub("debug", sinks) as hub:
        for i in range(10): hub.emit(ev(epoch=i))
        hub.flush()
    for s in sinks:
        assert [e.epoch for e in s.events] == list(range(10))
        assert s.closed == 1 and s.flushed == 1
    hub.close()                                   # idempotent
    assert all(s.closed == 1 for s in sinks)
    with pytest.raises(RuntimeError, match="closed"): hub.emit(ev())


@pytest.mark.parametrize("position", [0, 1, 2])
def test_failing_backend_isolated_and_logged_once(position, caplog):
    good1, good2, bad = Sink("g1"), Sink("g2"), Broken(fail_on=2)
    backends = [good1, good2]; backends.insert(position, bad)
    hub = TelemetryHub("normal", backends)
    with caplog.at_level(logging.ERROR, logger="esper.nissa"):
        for i in range(20): hub.emit(ev(epoch=i))
    assert len(good1.events) == len(good2.events) == 20
    assert bad.calls == 3                        # two successes, one failure, then detached
    errors = [r for r in caplog.records if r.name == "esper.nissa" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "broken" in errors[0].getMessage()
    assert errors[0].exc_info is not None        # traceback kept
    assert hub.failed_backends == {"broken": "RuntimeError('backend exploded')"}
    assert [b.name for b in hub.backends] == ["g1", "g2"]
    hub.close()


def test_failing_close_does_not_stop_other_closes(caplog):
    class BadClose(Sink):
        def close(self): raise OSError("cannot close")
    a, b = BadClose("a"), Sink("b")
    hub = TelemetryHub("normal", [a, b])
    with caplog.at_level(logging.ERROR, logger="esper.nissa"): hub.close()
    assert b.closed == 1 and "a" in hub.failed_backends


@pytest.mark.parametrize("level", list(TelemetryLevel))
def test_level_filtering_matches_event_levels(level):
    sink = Sink(); hub = TelemetryHub(level.name.lower(), [sink])
    for t in TelemetryEventType: hub.emit(TelemetryEvent(t))
    got = {e.event_type for e in sink.events}
    assert got == {t for t in TelemetryEventType if EVENT_LEVELS[t] <= level and level > TelemetryLevel.OFF}
    assert hub.n_emitted + hub.n_dropped == len(TelemetryEventType)


def test_level_of_key_events():
    assert EVENT_LEVELS[TelemetryEventType.BATCH_COMPLETED] == TelemetryLevel.DEBUG
    for t in ("ppo_update", "anomaly_detected", "governor_rollback", "training_started"):
        assert EVENT_LEVELS[TelemetryEventType(t)] == TelemetryLevel.MINIMAL
    for t in ("epoch_completed", "seed_germinated", "seed_stage_changed", "seed_fossilized", "seed_pruned"):
        assert EVENT_LEVELS[TelemetryEventType(t)] == TelemetryLevel.NORMAL


def test_backend_level_cap_and_severity():
    quiet, full = Sink("quiet"), Sink("full")
    hub = TelemetryHub("debug"); hub.add_backend(quiet, level="minimal"); hub.add_backend(full)
    hub.emit(ev("batch_completed")); hub.emit(ev("epoch_completed")); hub.emit(ev("ppo_update"))
    hub.emit(ev("batch_completed", severity="error"))       # errors reach even a MINIMAL backend
    assert [e.event_type.value for e in quiet.events] == ["ppo_update", "batch_completed"]
    assert len(full.events) == 4


def test_should_collect_case_insensitive_and_needs_backend():
    cfg = TelemetryConfig("Normal")
    assert cfg.should_collect("minimal") and cfg.should_collect("NORMAL") and not cfg.should_collect("debug")
    hub = TelemetryHub(cfg)
    assert not hub.should_collect("minimal")      # nobody listening: nothing to collect
    hub.add_backend(Sink())
    assert hub.should_collect("minimal") and not hub.should_collect("Debug")
    with pytest.raises(ValueError, match="off, minimal, normal, debug"): cfg.should_collect("verbose")


def test_escalation_and_decay_via_anomaly():
    sink = Sink()
    hub = TelemetryHub(TelemetryConfig("minimal", escalation_epochs=3), [sink])
    seen = []
    for epoch in range(1, 9):
        if epoch == 2: hub.emit(ev("anomaly_detected", data={"anomaly": "value_collapse"}, severity="warning"))
        seen.append(hub.should_collect("debug"))
        hub.emit(ev("batch_completed", epoch=epoch))
        hub.on_epoch_end()
    assert seen == [False, True, True, True, False, False, False, False]
    assert [e.epoch for e in sink.events if e.event_type is TelemetryEventType.BATCH_COMPLETED] == [2, 3, 4]
    assert hub.config.effective_level == TelemetryLevel.MINIMAL


def test_escalation_can_be_disabled_and_validated():
    hub = TelemetryHub("normal", [Sink()], escalate_on_anomaly=False)
    hub.emit(ev("anomaly_detected"))
    assert not hub.should_collect("debug")
    with pytest.raises(ValueError, match="k_epochs"): hub.config.escalate_for(-1)
    with pytest.raises(ValueError, match="telemetry level"): TelemetryHub("loud")


def test_emit_rejects_non_events():
    with pytest.raises(TypeError, match="TelemetryEvent"): TelemetryHub().emit("epoch_completed")


def test_concurrent_emit_from_threads():
    sink = Sink(); hub = TelemetryHub("normal", [sink])
    def work(k):
        for i in range(500): hub.emit(ev(epoch=i, env_id=k))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert len(sink.events) == 2000 and hub.n_emitted == 2000
    for k in range(4): assert [e.epoch for e in sink.events if e.env_id == k] == list(range(500))


def test_validating_hub_enforces_payload_conventions():
    hub = TelemetryHub("debug", [Sink()], validate=True)
    hub.emit(TelemetryEvent("seed_germinated", {"blueprint": "norm"}, env_id=0, slot_id="block1"))
    with pytest.raises(ValueError, match="seed_germinated event lacks slot_id"):
        hub.emit(TelemetryEvent("seed_germinated", {"blueprint": "norm"}, env_id=0))
    with pytest.raises(ValueError, match="lacks from, to"): check_payload(TelemetryEvent("seed_stage_changed", env_id=0, slot_id="b"))
