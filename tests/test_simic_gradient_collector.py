"""Tests for gradient collector performance and correctness (plus fallback and iterator checks)."""
import pytest
import torch
import torch.nn as nn

from esper.tolaria.gradients import (
    SeedGradientCollector,
    materialize_grad_stats,
)


def test_gradient_collector_vectorized():
    """Verify gradient collection uses vectorized operations."""
    # Create simple model with gradients
    model = nn.Sequential(
        nn.Linear(10, 20),
        nn.ReLU(),
        nn.Linear(20, 5),
    )

    # Forward/backward to create gradients
    x = torch.randn(4, 10)
    y = model(x).sum()
    y.backward()

    collector = SeedGradientCollector()
    async_stats = collector.collect_async(model.parameters())
    stats = materialize_grad_stats(async_stats)

    # Basic correctness checks
    assert 'gradient_norm' in stats
    assert 'gradient_health' in stats
    assert stats['gradient_norm'] > 0
    assert 0 <= stats['gradient_health'] <= 1


def test_gradient_collector_empty():
    """Verify handling of parameters without gradients."""
    model = nn.Linear(10, 5)  # No backward called

    collector = SeedGradientCollector()
    stats = collector.collect(model.parameters())

    assert stats['gradient_norm'] == 0.0
    assert stats['gradient_health'] == 1.0
    assert stats['has_vanishing'] is False
    assert stats['has_exploding'] is False


def test_gradient_collector_uses_foreach(monkeypatch):
    """The collector computes its per-tensor norms with one fused `torch._foreach_norm` call, and only when asked."""
    calls = []
    real = torch._foreach_norm

    def counting(tensors, *args, **kwargs):
        calls.append(len(tensors))
        return real(tensors, *args, **kwargs)

    monkeypatch.setattr(torch, "_foreach_norm", counting)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    m(torch.randn(5, 6)).pow(2).sum().backward()
    SeedGradientCollector(use_foreach=True).collect(list(m.parameters()))
    assert calls == [4]  # one call for the four gradients
    SeedGradientCollector(use_foreach=False).collect(list(m.parameters()))
    assert calls == [4]  # the fallback does not call it


def _model_with_grads():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    m(torch.randn(5, 6)).pow(2).sum().backward()
    return m


def test_foreach_and_fallback_agree_with_clip_grad_norm():
    m = _model_with_grads()
    ref = torch.nn.utils.get_total_norm([p.grad for p in m.parameters()]).item()
    fused = SeedGradientCollector(use_foreach=True).collect(list(m.parameters()))
    public = SeedGradientCollector(use_foreach=False).collect(list(m.parameters()))
    assert fused["gradient_norm"] == pytest.approx(ref, rel=1e-5)
    assert public["gradient_norm"] == pytest.approx(ref, rel=1e-5)


def test_fallback_when_foreach_missing(monkeypatch):
    m = _model_with_grads()
    ref = SeedGradientCollector().collect(list(m.parameters()))
    monkeypatch.delattr(torch, "_foreach_norm")
    assert SeedGradientCollector().collect(list(m.parameters()))["gradient_norm"] == pytest.approx(ref["gradient_norm"])


def test_async_returns_tensors_and_iterator_is_read_once():
    m = _model_with_grads()
    async_stats = SeedGradientCollector().collect_async(m.parameters())  # a generator
    params = list(m.parameters())
    squared = sum(p.grad.pow(2).sum() for p in params)
    assert torch.allclose(async_stats["_total_squared_norm"], squared)  # a tensor: nothing was read to the host
    c = SeedGradientCollector()
    assert c.collect(params) == c.collect(params)  # a list can be collected repeatedly


def test_health_fraction_and_flags():
    m = nn.Linear(3, 2)
    m.weight.grad = torch.full_like(m.weight, 500.0)
    m.bias.grad = torch.full_like(m.bias, 0.1)
    stats = SeedGradientCollector().collect(m.parameters())
    assert stats["has_exploding"] and not stats["has_vanishing"]
    assert stats["gradient_health"] == 0.5
