"""Tests for vectorized PPO telemetry integration."""

import torch

class TestVectorizedTelemetry:
    """Test that vectorized training properly populates telemetry."""

    def test_telemetry_features_nonzero_with_active_seed(self):
        """When use_telemetry=True and seed is active, telemetry features should be populated."""
        from esper.leyline import SeedTelemetry

        # Telemetry features should not all be zero when there's an active seed
        # This is a structural test - the actual integration test would run training

        # SeedTelemetry with real values
        telemetry = SeedTelemetry(
            seed_id="test_seed",
            blueprint_id="conv",
            stage=2,  # TRAINING
            epochs_in_stage=5,
            alpha=0.5,
            accuracy=75.0,
            gradient_norm=1.5,
            gradient_health=0.85,
            has_vanishing=False,
            has_exploding=False,
        )

        features = telemetry.to_features()
        assert len(features) == 10
        # At least some features should be non-zero
        assert sum(abs(f) for f in features) > 0, "Telemetry features should not all be zero"
        assert features[5] == 75.0  # accuracy
        assert features[6] == 1.5   # gradient_norm
