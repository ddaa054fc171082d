"""Leyline's public surface, as other subsystems import it."""
import pytest

from esper.leyline import (HEAD_NAMES, LIVE_STAGES, IllegalTransitionError, SeedStage, SeedTelemetry, TelemetryEvent,
                           TelemetryEventType, check_transition)


def test_public_imports():
    assert HEAD_NAMES == ("slot", "blueprint", "blend", "op")
    assert TelemetryEvent(TelemetryEventType.EPOCH_COMPLETED).event_type.value == "epoch_completed"


def test_a_full_life_and_a_reuse():
    path = [SeedStage.DORMANT, SeedStage.GERMINATED, SeedStage.TRAINING, SeedStage.PRUNED, SeedStage.EMBARGOED,
            SeedStage.RESETTING, SeedStage.DORMANT, SeedStage.GERMINATED, SeedStage.TRAINING, SeedStage.BLENDING,
            SeedStage.HOLDING, SeedStage.FOSSILIZED]
    for a, b in zip(path, path[1:]):
        assert check_transition(a, b) == b


@pytest.mark.parametrize("stage", sorted(LIVE_STAGES))
def test_every_live_stage_can_be_pruned_but_not_skip_ahead(stage):
    check_transition(stage, SeedStage.PRUNED)
    with pytest.raises(IllegalTransitionError):
        check_transition(stage, SeedStage.FOSSILIZED if stage != SeedStage.HOLDING else SeedStage.DORMANT)


def test_seed_telemetry_slots_and_features():
    t = SeedTelemetry(seed_id="s", stage=3, alpha=0.4, accuracy=60.0, gradient_norm=0.2, epoch=5, max_epochs=20)
    f = t.to_features()
    assert len(f) == 10 and f[2] == 0.4 and f[5] == 60.0 and f[6] == 0.2 and f[9] == 0.25
    with pytest.raises(AttributeError):
        t.not_a_field = 1  # slots=True: no per-instance __dict__
