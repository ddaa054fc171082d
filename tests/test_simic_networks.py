"""Tests for Simic policy networks (shapes and initialisation)."""

import torch
import torch.nn as nn

from esper.leyline import HEAD_NAMES, factored_head_sizes


def test_the_heads_read_the_layer_normalised_lstm_output():
    """Actor and critic read the LSTM's output through `lstm_ln`: a LayerNorm over the LSTM's width, and what it
    returns is what the heads see (replace its output and both heads' outputs follow)."""
    from esper.simic.agent.networks import RecurrentActorCritic
    torch.manual_seed(0)
    net = RecurrentActorCritic(state_dim=6, action_dim=3, hidden_dim=16, lstm_hidden_dim=8)
    y = net.lstm_ln(torch.randn(3, 8) * 5 + 2)  # normalises each row of the LSTM's 8 outputs
    assert torch.allclose(y.mean(-1), torch.zeros(3), atol=1e-5)
    assert torch.allclose(y.var(-1, unbiased=False), torch.ones(3), atol=1e-3)
    x = torch.randn(2, 5, 6)
    logits, values, _ = net(x)
    features = torch.randn(2, 5, 8)
    handle = net.lstm_ln.register_forward_hook(lambda m, i, o: features)
    try:
        swapped_logits, swapped_values, _ = net(x)
    finally:
        handle.remove()
    assert torch.allclose(swapped_values, net.critic(features).squeeze(-1))
    assert all(torch.allclose(swapped_logits[k], v) for k, v in net.actor(features).items())
    assert not torch.allclose(swapped_values, values)


def test_orthogonal_init_gains():
    from esper.simic.agent.networks import ActorCritic
    torch.manual_seed(0)
    net = ActorCritic(state_dim=8, action_dim=5, hidden_dim=64)
    w = net.shared[0].weight  # [64, 8]: orthogonal columns scaled by sqrt(2)
    assert torch.allclose(w.T @ w, 2.0 * torch.eye(8), atol=1e-4)
    head = net.actor.heads["action"].weight
    assert head.abs().max() < 0.05  # policy output gain 0.01: near-uniform initial policy
    assert all(torch.count_nonzero(m.bias) == 0 for m in net.modules() if isinstance(m, nn.Linear))


def test_factored_network_heads_and_groups():
    from esper.simic.agent.networks import FactoredActorCritic
    net = FactoredActorCritic(state_dim=12, head_sizes=factored_head_sizes(2), hidden_dim=32)
    logits, values = net(torch.randn(3, 12))
    assert tuple(logits) == HEAD_NAMES
    assert [logits[k].shape[-1] for k in HEAD_NAMES] == [2, 5, 3, 5]
    groups = net.parameter_groups()
    assert set(groups) == {"actor", "shared", "critic"}
    ids = [id(p) for g in groups.values() for p in g]
    assert len(ids) == len(set(ids)) == len(list(net.parameters()))


def test_recurrent_parameter_groups_cover_lstm():
    from esper.simic.agent.networks import RecurrentActorCritic
    net = RecurrentActorCritic(state_dim=4, action_dim=factored_head_sizes(1), hidden_dim=8, lstm_hidden_dim=8)
    shared = {id(p) for p in net.parameter_groups()["shared"]}
    assert all(id(p) in shared for p in net.lstm.parameters())
    assert all(id(p) in shared for p in net.lstm_ln.parameters())
