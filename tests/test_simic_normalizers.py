"""Tests for normalizer state_dict methods (saved and restored with the agent)."""

import pytest
import torch
from esper.simic.agent.normalizers import RunningMeanStd, RewardNormalizer


class TestRunningMeanStdStateDict:
    """Test state_dict/load_state_dict for RunningMeanStd."""

    def test_state_dict_roundtrip(self):
        """State can be saved and restored."""
        rms = RunningMeanStd(shape=(10,), device="cpu")
        # Update with some data
        rms.update(torch.randn(32, 10))
        rms.update(torch.randn(32, 10))

        # Save state
        state = rms.state_dict()

        # Create new instance and load
        rms2 = RunningMeanStd(shape=(10,), device="cpu")
        rms2.load_state_dict(state)

        # Verify identical
        assert torch.allclose(rms.mean, rms2.mean)
        assert torch.allclose(rms.var, rms2.var)
        assert torch.allclose(rms.count, rms2.count)

    def test_state_dict_keys(self):
        """state_dict has expected keys."""
        rms = RunningMeanStd(shape=(5,), device="cpu")
        state = rms.state_dict()
        assert set(state.keys()) == {"mean", "var", "count", "n_nonfinite"}

    def test_loads_a_state_dict_saved_before_n_nonfinite(self):
        """A checkpoint written before the non-finite count existed still loads (count 0)."""
        rms = RunningMeanStd(shape=(3,), device="cpu")
        rms.update(torch.randn(8, 3))
        rms.n_nonfinite = 5
        old = {k: v for k, v in rms.state_dict().items() if k != "n_nonfinite"}
        rms2 = RunningMeanStd(shape=(3,), device="cpu")
        rms2.load_state_dict(old)
        assert rms2.n_nonfinite == 0 and torch.equal(rms2.mean, rms.mean)
        rms2.load_state_dict(rms.state_dict())
        assert rms2.n_nonfinite == 5
        with pytest.raises(ValueError, match="keys"):
            rms2.load_state_dict({**old, "extra": torch.zeros(())})


class TestRewardNormalizerStateDict:
    """Test state_dict/load_state_dict for RewardNormalizer."""

    def test_state_dict_roundtrip(self):
        """State can be saved and restored."""
        rn = RewardNormalizer(clip=10.0)
        # Update with some data
        for _ in range(100):
            rn.update_and_normalize(torch.randn(1).item())

        # Save state
        state = rn.state_dict()

        # Create new instance and load
        rn2 = RewardNormalizer(clip=10.0)
        rn2.load_state_dict(state)

        # Verify identical
        assert rn.mean == rn2.mean
        assert rn.m2 == rn2.m2
        assert rn.count == rn2.count

    def test_state_dict_keys(self):
        """state_dict has expected keys."""
        rn = RewardNormalizer()
        state = rn.state_dict()
        assert set(state.keys()) == {"mean", "m2", "count", "n_nonfinite"}

    def test_loads_a_state_dict_saved_before_n_nonfinite(self):
        rn = RewardNormalizer()
        rn.load_state_dict({"mean": 1.0, "m2": 8.0, "count": 3})
        assert rn.n_nonfinite == 0 and rn.std == 2.0
        rn.n_nonfinite = 2
        rn2 = RewardNormalizer()
        rn2.load_state_dict(rn.state_dict())
        assert rn2.n_nonfinite == 2


def test_running_mean_std_matches_batch_statistics():
    torch.manual_seed(0)
    data = torch.randn(64, 3) * 4 + 2
    rms = RunningMeanStd((3,), epsilon=0.0)
    for chunk in data.split(10):
        rms.update(chunk)
    assert torch.allclose(rms.mean, data.mean(0), atol=1e-4)
    assert torch.allclose(rms.var, data.var(0, correction=0), atol=1e-3)


def test_update_runs_in_inference_mode_and_normalize_is_usable_in_autograd():
    rms = RunningMeanStd((2,))
    rms.update(torch.randn(8, 2))
    x = torch.randn(4, 2, requires_grad=True)
    rms.normalize(x).sum().backward()  # statistics are constants for autograd
    assert x.grad is not None


def test_load_state_dict_rejects_wrong_shape():
    with pytest.raises(ValueError, match="shape"):
        RunningMeanStd((3,)).load_state_dict(RunningMeanStd((2,)).state_dict())


def test_running_mean_std_ignores_non_finite_rows():
    """Rows with a NaN or Inf are left out and counted; the statistics are those of the finite rows."""
    torch.manual_seed(0)
    good = torch.randn(6, 3)
    batch = torch.cat([good[:3], torch.tensor([[float("nan"), 0.0, 0.0], [0.0, float("-inf"), 1.0]]), good[3:]])
    rms, ref = RunningMeanStd((3,)), RunningMeanStd((3,))
    rms.update(batch)
    ref.update(good)
    assert torch.isfinite(rms.mean).all() and torch.isfinite(rms.var).all()
    assert torch.equal(rms.mean, ref.mean) and torch.equal(rms.var, ref.var) and torch.equal(rms.count, ref.count)
    assert rms.n_nonfinite == 2


def test_running_mean_std_all_non_finite_batch_changes_nothing():
    rms = RunningMeanStd((2,))
    rms.update(torch.randn(4, 2))
    before = rms.state_dict()
    rms.update(torch.tensor([float("nan"), float("inf")]))  # a single observation
    assert all(torch.equal(before[k], rms.state_dict()[k]) for k in ("mean", "var", "count"))
    assert rms.n_nonfinite == 1


def test_reward_normalizer_ignores_non_finite_rewards():
    """A NaN reward no longer becomes +clip and poisons the running mean: left out, counted, returned as NaN."""
    import math
    rn = RewardNormalizer(clip=5.0)
    for r in (1.0, 3.0, 5.0):
        rn.update_and_normalize(r)
    out = rn.update_and_normalize(float("nan"))
    assert math.isnan(out)
    assert rn.update_and_normalize(float("-inf")) == float("-inf")
    assert (rn.count, rn.n_nonfinite, rn.mean, rn.std) == (3, 2, 3.0, 2.0)
    assert rn.normalize_only(4.0) == 4.0 / (2.0 + 1e-8)
