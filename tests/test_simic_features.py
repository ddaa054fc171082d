"""Tests for observation features and action masks (and action masks)."""
import pytest
import torch

from esper.leyline import FlatAction, HEAD_NAMES, SeedStage


def test_obs_to_features_tensor_output():
    """Feature extraction should optionally return tensor directly."""
    import torch
    from esper.tamiyo.features import obs_to_base_features, obs_to_base_features_tensor

    obs = {
        'epoch': 10,
        'global_step': 500,
        'train_loss': 1.5,
        'val_loss': 1.6,
        'loss_delta': -0.1,
        'train_accuracy': 45.0,
        'val_accuracy': 43.0,
        'accuracy_delta': 2.0,
        'plateau_epochs': 3,
        'best_val_accuracy': 45.0,
        'best_val_loss': 1.4,
        'loss_history_5': [2.0, 1.8, 1.6, 1.5, 1.5],
        'accuracy_history_5': [30.0, 35.0, 40.0, 43.0, 45.0],
        'has_active_seed': 1.0,
        'seed_stage': 3,
        'seed_epochs_in_stage': 5,
        'seed_alpha': 0.5,
        'seed_improvement': 0.02,
        'available_slots': 0,
        'seed_counterfactual': 0.01,
        'host_grad_norm': 1.2,
        'host_learning_phase': 0.4,
        'seed_blueprint_id': 2,
    }

    device = torch.device('cpu')
    result = obs_to_base_features_tensor(obs, device=device)

    # The same values as the list version, as one float32 tensor on the device asked for
    assert torch.equal(result, torch.tensor(obs_to_base_features(obs), dtype=torch.float32))
    assert result.device == device
    assert result.shape == (35,)  # Base feature dim
    assert result.dtype == torch.float32


def _obs(**kw):
    base = dict(epoch=3, global_step=30, train_loss=1.0, val_loss=1.1, loss_delta=-0.1, train_accuracy=50.0,
                val_accuracy=48.0, accuracy_delta=1.0, plateau_epochs=0, best_val_accuracy=48.0, best_val_loss=1.1,
                loss_history_5=[1.5, 1.2, 1.0], accuracy_history_5=[40.0, 45.0, 48.0], has_active_seed=0.0,
                seed_stage=0, seed_epochs_in_stage=0, seed_alpha=0.0, seed_improvement=0.0, available_slots=1)
    base.update(kw)
    return base


def test_list_and_tensor_agree_and_out_is_reused():
    from esper.tamiyo.features import obs_to_base_features, obs_to_base_features_tensor
    obs = _obs()
    buf = torch.full((35,), -1.0)
    out = obs_to_base_features_tensor(obs, out=buf)
    assert out is buf
    assert torch.allclose(out, torch.tensor(obs_to_base_features(obs)))
    with pytest.raises(ValueError, match="out must have shape"):
        obs_to_base_features_tensor(obs, out=torch.zeros(10))


def test_features_bounded_with_extreme_inputs():
    from esper.tamiyo.features import obs_to_base_features
    f = obs_to_base_features(_obs(train_loss=float("nan"), val_loss=1e9, loss_delta=-1e9, accuracy_delta=float("inf"),
                                  host_grad_norm=1e6, seed_blueprint_id=9))
    assert all(abs(x) <= 1.0 for i, x in enumerate(f) if i != 26)
    assert f[30:] == [0.0] * 5  # unknown blueprint id -> no one-hot


def test_action_mask_flat_by_stage():
    from esper.tamiyo.features import compute_action_mask
    m = compute_action_mask(_obs())  # no seed, a slot available: WAIT + germinate
    assert m[FlatAction.WAIT] and all(m[FlatAction.GERMINATE_NORM:FlatAction.GERMINATE_ATTENTION + 1])
    assert not m[FlatAction.ADVANCE] and not m[FlatAction.PRUNE] and not m[FlatAction.FOSSILIZE]
    m = compute_action_mask(_obs(has_active_seed=1.0, seed_stage=int(SeedStage.HOLDING)))
    assert m.tolist() == [True, False, False, False, False, False, False, True, True]
    m = compute_action_mask(_obs(available_slots=0))
    assert m.sum().item() == 1  # only WAIT


def test_action_mask_factored_heads():
    from esper.tamiyo.features import compute_action_mask
    m = compute_action_mask([SeedStage.TRAINING, SeedStage.FOSSILIZED], factored=True)
    assert tuple(m)[:4] == HEAD_NAMES
    assert m["slot"].tolist() == [True, False]
    assert m["op"].tolist() == [True, False, True, True, False]  # WAIT, ADVANCE, PRUNE
    assert m["op|slot"].tolist() == [[True, False, True, True, False], [True, False, False, False, False]]
    assert all(v.any(-1).all() for v in m.values())
