"""Tests for the Simic PPO agent: entropy annealing, non-finite guards, masking, factored heads, recurrent
sequences, GAE, truncation, KL early stop, checkpoints and host-sync discipline."""
import math
import sys
import warnings
from pathlib import Path

import pytest
import torch

import esper
from esper.leyline import HEAD_NAMES, factored_head_sizes

ESPER_DIR = Path(esper.__file__).parent.resolve()  # the package's own files, not the checkout or its venv


# ----------------------------------------------------------------------------- entropy annealing
class TestEntropyAnnealing:
    """Test entropy coefficient annealing schedule."""

    def test_no_annealing_when_disabled(self):
        """entropy_anneal_steps=0 should use fixed entropy_coef."""
        from esper.simic.agent.ppo import PPOAgent

        agent = PPOAgent(
            state_dim=27,
            action_dim=7,
            entropy_coef=0.05,
            entropy_anneal_steps=0,
            device='cpu'
        )
        assert agent.get_entropy_coef() == 0.05
        agent.train_steps = 100
        assert agent.get_entropy_coef() == 0.05  # Still fixed

    @pytest.mark.parametrize("step, end, expected", [
        (0, 0.01, 0.2),     # step 0: the start value
        (50, 0.0, 0.1),     # midpoint: halfway between start and end
        (100, 0.01, 0.01),  # at anneal_steps: the end value
        (200, 0.01, 0.01),  # beyond the schedule: stays at the end value
    ])
    def test_annealing_schedule(self, step, end, expected):
        """A linear anneal from entropy_coef_start to entropy_coef_end over entropy_anneal_steps, then flat."""
        from esper.simic.agent.ppo import PPOAgent

        agent = PPOAgent(state_dim=27, action_dim=7, entropy_coef_start=0.2, entropy_coef_end=end,
                         entropy_anneal_steps=100, device="cpu")
        agent.train_steps = step
        assert agent.get_entropy_coef() == pytest.approx(expected, abs=1e-6)

    def test_annealed_entropy_used_in_update(self):
        """PPO update should use annealed entropy coefficient."""
        from esper.simic.agent.ppo import PPOAgent
        import torch

        # Create agent with annealing
        agent = PPOAgent(
            state_dim=27,
            action_dim=7,
            entropy_coef_start=0.5,
            entropy_coef_end=0.01,
            entropy_anneal_steps=10,
            device='cpu'
        )

        # Add some dummy transitions
        for _ in range(5):
            state = torch.randn(27)
            agent.store_transition(state, action=0, log_prob=-1.0, value=0.5, reward=1.0, done=False)

        # At step 0, entropy_coef should be 0.5
        assert agent.train_steps == 0
        assert agent.get_entropy_coef() == 0.5

        # Perform update
        agent.update(last_value=0.0)

        # After update, train_steps incremented
        assert agent.train_steps == 1
        # Entropy coef should have changed
        expected_coef = 0.5 + (1/10) * (0.01 - 0.5)  # 0.451
        assert abs(agent.get_entropy_coef() - expected_coef) < 1e-6


def test_entropy_coefficient_actually_weights_the_loss():
    """Same data, same seed: the entropy_loss term scales with the annealed coefficient."""
    from esper.simic.agent.ppo import PPOAgent
    losses = []
    for coef in (0.0, 0.5):
        torch.manual_seed(0)
        agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, entropy_coef=coef, n_epochs=1, device="cpu")
        for t in range(8):
            agent.store_transition(torch.randn(4), t % 3, math.log(1 / 3), 0.0, 1.0, t == 7)
        losses.append(agent.update()["entropy_loss"])
    assert losses[0] == 0.0 and losses[1] < -0.4  # -0.5 * H, H close to log 3


def _blueprint_bonus_update(coef, recurrent=False):
    """One update on fixed data with no head bonus: (change of the mean blueprint-choice entropy, its metrics)."""
    from esper.simic.agent.networks import FLAT_HEAD, blueprint_choice_entropy
    from esper.simic.agent.ppo import PPOAgent

    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, hidden_dim=16, entropy_coef=0.0, blueprint_entropy_coef=coef, n_epochs=8,
                     batch_size=16, target_kl=None, recurrent=recurrent, lr=3e-2, device="cpu")
    with torch.no_grad():
        agent.network.actor.heads[FLAT_HEAD].bias[1:6] = torch.tensor([2.0, 0.0, -1.0, 0.0, 0.0])  # one favoured
    states = torch.randn(32, 4)
    store = agent.store_recurrent_transition if recurrent else agent.store_transition
    for t, s in enumerate(states):
        store(s, 1 + t % 5, -1.5, 0.0, 1.0, t % 8 == 7)

    def entropy():
        with torch.no_grad():
            logits = agent.network(states[:, None])[0] if recurrent else agent.network(states)[0]
            return float(blueprint_choice_entropy(logits).mean())

    before = entropy()
    metrics = agent.update()
    return entropy() - before, metrics


def test_blueprint_choice_bonus_widens_the_choice():
    """Same data and seed: `blueprint_entropy_coef` > 0 makes the choice among blueprints wider than without it."""
    assert _blueprint_bonus_update(0.5)[0] > _blueprint_bonus_update(0.0)[0] + 0.1


def test_blueprint_choice_bonus_reaches_the_recurrent_loss():
    """The recurrent update rewards the blueprint choice too: its entropy term is -coef x the choice's entropy."""
    assert _blueprint_bonus_update(0.0, recurrent=True)[1]["entropy_loss"] == 0.0
    assert _blueprint_bonus_update(0.5, recurrent=True)[1]["entropy_loss"] < -0.5 * 0.9  # choice entropy ~1.1 nats


# ----------------------------------------------------------------------------- non-finite values and numerics
def _store_bad(agent, bad, n=2, env_id=0):
    """Store `n` steps of one env, the first one carrying a NaN reward, an Inf feature or a NaN old log-prob."""
    for t in range(n):
        state = torch.randn(agent.state_dim)
        reward, log_prob = 1.0, -0.5
        if t == 0 and bad == "nan_reward":
            reward = float("nan")
        if t == 0 and bad == "inf_state":
            state[2] = float("inf")
        if t == 0 and bad == "nan_log_prob":
            log_prob = float("nan")
        agent.store_transition(state, t % 2, log_prob, 0.5, reward, t == n - 1, env_id=env_id)


def _snapshot(agent):
    return [p.detach().clone() for p in agent.network.parameters()]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("bad", ["nan_reward", "inf_state", "nan_log_prob"])
def test_fused_nan_inf_detection(bad):
    """A NaN/Inf fed into the rollout is detected by the fused check, and the step it poisons is skipped."""
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=10, action_dim=4, device="cpu")
    _store_bad(agent, bad)
    before = _snapshot(agent)
    metrics = agent.update(last_value=0.0)
    assert _same(before, agent.network.parameters())  # weights untouched, not NaN
    assert metrics["skipped_steps"] == 1 and metrics["n_epochs_run"] == 1  # one minibatch, skipped; update stopped
    assert "skipped_steps" in metrics["anomalies"]
    if bad != "inf_state":  # an Inf input can leave loss and ratio finite; only the gradient is NaN
        assert metrics["ratio_has_numerical_issue"] is True and "numerical_instability" in metrics["anomalies"]
    assert agent.optimizer.state_dict()["state"] == {}  # Adam never stepped
    # the non-finite gradients were dropped (zeroed in place where the gradients live in a flat buffer)
    assert all(p.grad is None or bool((p.grad == 0).all()) for p in agent.network.parameters())
    # one fused flag, not separate nan/inf flags (those only come with debug telemetry)
    assert "ratio_has_nan" not in metrics and "ratio_has_inf" not in metrics


class _Telemetry:
    def __init__(self, levels): self.levels = levels
    def should_collect(self, level): return level in self.levels


@pytest.mark.parametrize("levels,expect_breakdown", [((), False), (("debug",), True)])
def test_numerical_issue_flag_and_debug_breakdown(levels, expect_breakdown):
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=2, hidden_dim=8, device="cpu", telemetry_config=_Telemetry(levels))
    agent.store_transition(torch.randn(4), 0, float("nan"), 0.0, 1.0, False)
    agent.store_transition(torch.randn(4), 1, -0.5, 0.0, 1.0, True)
    m = agent.update()
    assert m["ratio_has_numerical_issue"] is True
    assert "numerical_instability" in m["anomalies"]
    assert m["n_epochs_run"] == 1  # stopped after the first epoch instead of training on NaN
    assert ("ratio_has_nan" in m) == expect_breakdown
    if expect_breakdown:
        assert m["ratio_has_nan"] is True


def test_ppo_agent_weight_decay_critic_only():
    """PPOAgent weight decay should apply only to critic, not actor or shared, and be decoupled (AdamW's)."""
    import torch
    from esper.simic.agent.ppo import PPOAgent

    def zero_gradient_step(agent):
        "One optimizer step with every gradient zero, so only weight decay can move a weight: name -> (before, after)."
        groups = agent.optimizer.param_groups
        before = {g["name"]: [p.detach().clone() for p in g["params"]] for g in groups}
        for g in groups:
            for p in g["params"]:
                p.grad = torch.zeros_like(p)
        agent.optimizer.step()
        return {g["name"]: list(zip(before[g["name"]], g["params"])) for g in groups}

    # Without weight decay nothing moves
    agent_no_wd = PPOAgent(state_dim=10, action_dim=4, device="cpu")
    assert all(torch.equal(b, p) for pairs in zero_gradient_step(agent_no_wd).values() for b, p in pairs)

    # With weight decay the critic's weights shrink by lr * weight_decay (decoupled: an L2 term in the gradient
    # would move them by about lr instead); the actor's and the shared encoder's stay as they were
    agent_with_wd = PPOAgent(
        state_dim=10, action_dim=4, device="cpu", weight_decay=0.01
    )
    moved = zero_gradient_step(agent_with_wd)
    assert all(torch.equal(b, p) for name in ("actor", "shared") for b, p in moved[name])
    shrink = 1 - agent_with_wd.lr * 0.01
    assert all(torch.allclose(p, b * shrink, rtol=1e-6, atol=0) for b, p in moved["critic"])
    assert not all(torch.equal(b, p) for b, p in moved["critic"])

    # Verify param groups exist
    param_groups = agent_with_wd.optimizer.param_groups
    assert len(param_groups) >= 3, "Should have separate param groups for actor/shared/critic"

    # Find each group's weight decay
    actor_wd = None
    shared_wd = None
    critic_wd = None
    for group in param_groups:
        name = group.get('name', '')
        if 'actor' in name:
            actor_wd = group['weight_decay']
        elif 'shared' in name:
            shared_wd = group['weight_decay']
        elif 'critic' in name:
            critic_wd = group['weight_decay']

    # Actor should NOT have weight decay (biases toward determinism)
    assert actor_wd == 0.0, f"Actor weight_decay should be 0, got {actor_wd}"
    # Shared should NOT have weight decay (feeds into actor)
    assert shared_wd == 0.0, f"Shared weight_decay should be 0, got {shared_wd}"
    # Critic SHOULD have weight decay
    assert critic_wd > 0.0, f"Critic weight_decay should be >0, got {critic_wd}"


def test_optimizer_on_cpu_steps_one_flat_tensor_per_group_with_adam_eps():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=2, device="cpu")
    g = agent.optimizer.param_groups[0]
    assert g["foreach"] is False and not g.get("fused") and g["eps"] == 1e-5
    assert all(len(group["params"]) == 1 for group in agent.optimizer.param_groups)  # nothing for foreach to batch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_optimizer_is_fused_on_cuda():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=2, device="cuda")
    assert agent.optimizer.param_groups[0]["fused"] is True


def test_adaptive_entropy_floor_log_scaling():
    """Entropy floor should use log-ratio scaling (information-theoretic)."""
    import math
    import torch
    from esper.simic.agent.ppo import PPOAgent

    agent = PPOAgent(
        state_dim=10, action_dim=7, device="cpu",
        entropy_coef=0.05, entropy_coef_min=0.01,
        adaptive_entropy_floor=True,
    )

    # With all 7 actions valid, floor is base floor
    mask_all = torch.ones(7)
    floor_all = agent.get_entropy_floor(mask_all)
    assert floor_all == 0.01  # Base floor

    # With only 2 actions valid, floor should use log-ratio scaling:
    # scale = log(7) / log(2) = 1.95 / 0.69 = 2.8
    # floor = 0.01 * 2.8 = 0.028
    mask_few = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    floor_few = agent.get_entropy_floor(mask_few)

    expected_scale = math.log(7) / math.log(2)  # ~2.8
    expected_floor = 0.01 * min(expected_scale, 3.0)  # Capped at 3x

    assert abs(floor_few - expected_floor) < 0.001, \
        f"Expected {expected_floor:.4f}, got {floor_few:.4f}"


def test_adaptive_floor_is_wired_into_annealed_coef():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=7, device="cpu", entropy_coef_start=0.2, entropy_coef_end=0.0,
                     entropy_anneal_steps=10, entropy_coef_min=0.01, adaptive_entropy_floor=True)
    agent.train_steps = 10
    few = torch.tensor([1, 1, 0, 0, 0, 0, 0])
    assert agent.get_entropy_coef() == 0.01
    assert agent.get_entropy_coef(few) == pytest.approx(0.01 * math.log(7) / math.log(2))


def test_comprehensive_value_function_metrics():
    """PPO update should return comprehensive value function diagnostics."""
    import torch
    from esper.simic.agent.ppo import PPOAgent

    agent = PPOAgent(state_dim=10, action_dim=4, device="cpu")

    # Add transitions
    for i in range(10):
        state = torch.randn(10)
        action_mask = torch.ones(4)
        reward = 1.0 if i > 5 else -0.5
        done = i == 9
        agent.store_transition(state, i % 4, -0.5, 0.5, reward, done, action_mask)

    metrics = agent.update(last_value=0.0)

    # Core value function diagnostics
    assert 'value_pred_mean' in metrics
    assert 'value_pred_std' in metrics
    assert 'return_mean' in metrics
    assert 'return_std' in metrics

    # Additional diagnostics (DRL Expert recommendations)
    assert 'value_mse_before' in metrics  # Critic error before update
    assert 'return_min' in metrics
    assert 'return_max' in metrics
    assert 'advantage_mean_prenorm' in metrics  # Critical for PPO stability
    assert 'advantage_std_prenorm' in metrics


def test_recurrent_ppo_epochs_safety_cap():
    """Recurrent PPO should warn early (>2) and cap n_epochs to prevent policy drift."""
    import torch
    from esper.simic.agent.ppo import PPOAgent

    agent = PPOAgent(
        state_dim=10, action_dim=4, device="cpu",
        recurrent=True, lstm_hidden_dim=32,
    )

    # Add some transitions to each env
    for env_id in range(2):
        for i in range(5):
            state = torch.randn(10)
            action_mask = torch.ones(4)
            agent.store_recurrent_transition(
                state, 0, -0.5, 0.5, 1.0, i == 4, action_mask, env_id
            )

    # n_epochs > 2 should warn (early warning)
    with pytest.warns(RuntimeWarning, match="n_epochs.*elevated"):
        agent.update_recurrent(n_epochs=3)

    # n_epochs > 4 should be capped (hard limit)
    with pytest.warns(RuntimeWarning, match="n_epochs.*capped"):
        agent.update_recurrent(n_epochs=10)


# ----------------------------------------------------------------------------- factored heads, recurrence, GAE
def test_per_head_entropy_logged_for_factored_policy():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=6, action_dim=factored_head_sizes(3), hidden_dim=16, device="cpu")
    for t in range(12):
        s = torch.randn(6)
        a, lp, v = agent.get_action(s)
        agent.store_transition(s, a, lp, v, 1.0, t == 11)
    m = agent.update()
    assert tuple(m["head_entropies"]) == HEAD_NAMES
    sizes = factored_head_sizes(3)
    for k in HEAD_NAMES:  # a near-uniform initial policy: each head's entropy is close to log(n)
        assert 0 < m["head_entropies"][k] <= math.log(sizes[k]) + 1e-4
    assert m["entropy"] == pytest.approx(sum(m["head_entropies"].values()), rel=1e-5)


# ----------------------------------------------------------------------------- masking
def test_masked_action_never_sampled():
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=5, hidden_dim=16, device="cpu")
    mask = torch.tensor([False, True, False, True, False])
    seen = {agent.get_action(torch.randn(4), mask)[0] for _ in range(200)}
    assert seen <= {1, 3} and seen == {1, 3}
    actions, log_probs, values = agent.get_action_batch(torch.randn(500, 4), mask.expand(500, 5))
    assert set(actions.unique().tolist()) <= {1, 3}
    assert actions.shape == log_probs.shape == values.shape == (500,)
    assert agent.get_action(torch.randn(4), mask, deterministic=True)[0] in (1, 3)


def test_all_masked_row_is_an_error():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=8, device="cpu")
    with pytest.raises(ValueError, match="no valid action"):
        agent.get_action(torch.randn(4), torch.zeros(3))


def test_masked_logits_get_no_gradient_in_update():
    """An action masked in every stored step: its output row in the policy head never moves (zero gradient)."""
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=4, hidden_dim=16, device="cpu", n_epochs=2, batch_size=8, target_kl=None)
    mask = torch.tensor([True, True, True, False])
    head = agent.network.actor.heads["action"]
    before_w, before_b = head.weight[3].clone(), head.bias[3].clone()
    for t in range(32):
        s = torch.randn(4)
        a, lp, v = agent.get_action(s, mask)
        agent.store_transition(s, a, lp, v, float(a == 0), t % 8 == 7, mask)
    agent.update()
    assert torch.equal(head.weight[3], before_w) and torch.equal(head.bias[3], before_b)
    assert not torch.equal(head.weight[0], agent.network.actor.heads["action"].weight[0] * 0 + before_w)


def test_factored_joint_log_prob_is_sum_of_heads():
    from esper.simic.agent.networks import evaluate_heads
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(1)
    sizes = factored_head_sizes(2)
    agent = PPOAgent(state_dim=5, action_dim=sizes, hidden_dim=16, device="cpu")
    masks = {"slot": torch.tensor([True, False]), "blueprint": torch.ones(5), "blend": torch.ones(3),
             "op": torch.tensor([1, 1, 0, 0, 0])}
    s = torch.randn(5)
    action, log_prob, _ = agent.get_action(s, masks)
    assert set(action) == set(HEAD_NAMES) and action["slot"] == 0 and action["op"] in (0, 1)
    with torch.no_grad():
        logits, _ = agent.network(s[None])
    total = 0.0
    for k in HEAD_NAMES:
        lp_k, _ = evaluate_heads({k: logits[k]}, {k: torch.tensor([action[k]])}, {k: masks[k].bool()[None]})
        total += lp_k.item()
    assert log_prob == pytest.approx(total, abs=1e-5)


def test_factored_agent_rejects_flat_inputs():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=5, action_dim=factored_head_sizes(1), hidden_dim=8, device="cpu")
    with pytest.raises(ValueError, match="dict"):
        agent.store_transition(torch.randn(5), 0, -1.0, 0.0, 0.0, False)


# ----------------------------------------------------------------------------- GAE and truncation
def test_gae_hand_computed():
    from esper.simic.agent.buffer import compute_gae
    adv, ret = compute_gae([1.0, 0.0, 1.0], [0.5, 1.0, 0.5], [False, True, False], last_value=2.0,
                           gamma=0.9, gae_lambda=0.8)
    # t=2: 1 + .9*2 - .5 = 2.3 ; t=1 (terminal): 0 - 1 = -1 ; t=0: (1 + .9*1 - .5) + .72*(-1) = 0.68
    assert torch.allclose(adv, torch.tensor([0.68, -1.0, 2.3]), atol=1e-6)
    assert torch.allclose(ret, adv + torch.tensor([0.5, 1.0, 0.5]))


def test_truncation_bootstraps_from_critic():
    from esper.simic.agent.ppo import PPOAgent
    from esper.simic.agent.ppo_update import Truncation
    agent = PPOAgent(state_dim=3, action_dim=2, hidden_dim=8, gamma=0.9, gae_lambda=1.0, device="cpu")
    agent.store_transition(torch.zeros(3), 0, -0.7, 0.0, 1.0, done=False)
    agent.store_transition(torch.zeros(3), 0, -0.7, 0.0, 1.0, done=False, truncated=Truncation(value=10.0))
    adv, _ = agent.buffer.advantages(0.0, agent.gamma, agent.gae_lambda)
    assert torch.allclose(adv, torch.tensor([1 + 0.9 * (1 + 0.9 * 10.0), 1 + 0.9 * 10.0]))
    terminal = PPOAgent(state_dim=3, action_dim=2, hidden_dim=8, gamma=0.9, gae_lambda=1.0, device="cpu")
    terminal.store_transition(torch.zeros(3), 0, -0.7, 0.0, 1.0, done=True)
    adv, _ = terminal.buffer.advantages(123.0, 0.9, 1.0)  # last_value ignored after a real end
    assert adv.tolist() == [1.0]


def test_truncation_needs_a_value_and_final_state_uses_critic():
    from esper.simic.agent.ppo import PPOAgent
    from esper.simic.agent.ppo_update import Truncation
    agent = PPOAgent(state_dim=3, action_dim=2, hidden_dim=8, device="cpu")
    with pytest.raises(ValueError, match="value= .* or final_state="):
        Truncation()
    with pytest.raises(TypeError, match=r"Truncation\(value=\.\.\.\)"):  # the old flag alone is refused
        agent.store_transition(torch.zeros(3), 0, -0.7, 0.0, 1.0, done=False, truncated=True)
    assert len(agent.buffer) == 0
    final = torch.ones(3)
    agent.store_transition(torch.zeros(3), 0, -0.7, 0.0, 1.0, done=False, truncated=Truncation(final_state=final))
    assert agent.buffer.envs[0].bootstrap_values[0] == pytest.approx(agent.get_value(final))


def test_parallel_envs_get_their_own_gae():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=2, action_dim=2, hidden_dim=8, gamma=0.5, gae_lambda=1.0, device="cpu")
    for t in range(3):
        for env_id, r in ((0, 1.0), (1, 0.0)):
            agent.store_transition(torch.zeros(2), 0, -0.7, 0.0, r, False, env_id=env_id)
    adv, _ = agent.buffer.advantages({0: 0.0, 1: 0.0}, 0.5, 1.0)
    assert adv[:3].tolist() == [1.75, 1.5, 1.0] and adv[3:].tolist() == [0.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- the update itself
def _fill(agent, n=64, state_dim=4, reward_action=0):
    for t in range(n):
        s = torch.randn(state_dim)
        a, lp, v = agent.get_action(s)
        agent.store_transition(s, a, lp, v, float(a == reward_action), t % 16 == 15)


def test_metrics_are_floats_and_complete():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=2, batch_size=16)
    _fill(agent)
    m = agent.update()
    for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "clip_fraction", "explained_variance",
              "total_loss", "ratio_max", "ratio_min"):
        assert isinstance(m[k], float), k
    assert set(m["gradient_stats"]) == {"grad_norm", "max_grad", "min_grad"}
    assert 0.0 <= m["clipfrac"] <= 1.0 and m["approx_kl"] >= -1e-6
    assert m["n_samples"] == 64 and m["train_steps"] == 1 and len(agent.buffer) == 0


def test_kl_early_stop():
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=10, lr=1e-2, target_kl=1e-9,
                     batch_size=16)  # the first minibatch has KL 0; later ones in epoch 1 do not
    _fill(agent)
    m = agent.update()
    assert m["n_epochs_run"] == 1 and m["early_stopped"] is True
    agent.target_kl = None
    _fill(agent)
    m = agent.update()
    assert m["n_epochs_run"] == 10 and m["early_stopped"] is False


def test_value_clipping_option_runs_and_differs():
    from esper.simic.agent.ppo import PPOAgent
    out = []
    for clip_value in (False, True):
        torch.manual_seed(0)
        agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", clip_value=clip_value, n_epochs=4,
                         target_kl=None)
        for t in range(32):
            agent.store_transition(torch.randn(4), t % 3, math.log(1 / 3), 0.0, 10.0, t == 31)
        out.append(agent.update()["value_loss"])
    assert out[0] != out[1]


def test_no_host_sync_per_minibatch(monkeypatch):
    """.item()/.tolist() calls do not grow with the number of minibatches (they happen per epoch and at the end).

    The CPU (foreach) optimiser reads its step-skip flag with bool() each minibatch; on CPU that flag is host memory.
    The fused optimiser used on CUDA never reads it: see test_fused_optimizer_skips_on_device_without_host_reads."""
    from esper.simic.agent.ppo import PPOAgent
    counts = []
    for batch_size in (64, 4):
        torch.manual_seed(0)
        agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=2, batch_size=batch_size,
                         target_kl=None)
        _fill(agent)
        calls = {"n": 0}
        orig_item, orig_tolist = torch.Tensor.item, torch.Tensor.tolist
        def from_esper():  # count syncs made by Esper's own files, not torch's (wherever the venv lives)
            return Path(sys._getframe(2).f_code.co_filename).resolve().is_relative_to(ESPER_DIR)
        def item(self, *a): calls["n"] += from_esper(); return orig_item(self, *a)
        def tolist(self, *a): calls["n"] += from_esper(); return orig_tolist(self, *a)
        monkeypatch.setattr(torch.Tensor, "item", item)
        monkeypatch.setattr(torch.Tensor, "tolist", tolist)
        agent.update()
        monkeypatch.undo()
        counts.append(calls["n"])
    assert counts[0] == counts[1] > 0


def test_skipped_step_keeps_adam_state_and_step_count():
    """After healthy updates, a skipped step leaves the weights and every Adam tensor (step count too) as they were."""
    import copy
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=2, batch_size=16)
    _fill(agent)
    agent.update()
    state = copy.deepcopy(agent.optimizer.state_dict()["state"])
    before = _snapshot(agent)
    _store_bad(agent, "nan_reward", n=16)
    m = agent.update()
    assert _same(before, agent.network.parameters())
    after = agent.optimizer.state_dict()["state"]
    assert all(torch.equal(state[i][k], after[i][k]) for i in state for k in state[i])
    assert m["skipped_steps"] == 1 and m["nonfinite_advantages"] == 1


def test_fused_optimizer_skips_on_device_without_host_reads(monkeypatch):
    """With a fused optimizer the skip goes through `found_inf`: no .item()/.tolist()/bool() per minibatch."""
    from esper.simic.agent.ppo import PPOAgent
    counts = []
    for batch_size in (64, 4):
        torch.manual_seed(0)
        agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=1, batch_size=batch_size)
        agent.optimizer = torch.optim.Adam(agent.network.parameters(), lr=3e-4, eps=1e-5, fused=True)
        _fill(agent, n=32)
        agent.update()
        _store_bad(agent, "nan_reward", n=32)
        before = _snapshot(agent)
        steps = [s["step"].clone() for s in agent.optimizer.state.values()]
        calls = {"n": 0}
        orig = {name: getattr(torch.Tensor, name) for name in ("item", "tolist", "__bool__")}
        def from_esper():
            return Path(sys._getframe(2).f_code.co_filename).resolve().is_relative_to(ESPER_DIR)
        def counting(name):
            def f(self, *a):
                calls["n"] += from_esper()
                return orig[name](self, *a)
            return f
        for name in orig:
            monkeypatch.setattr(torch.Tensor, name, counting(name))
        m = agent.update()
        monkeypatch.undo()
        counts.append(calls["n"])
        assert all(p.isfinite().all() for p in agent.network.parameters())
        assert m["skipped_steps"] == 1 if batch_size == 64 else m["skipped_steps"] >= 1
        if batch_size == 64:  # the only step was skipped: nothing moved
            assert _same(before, agent.network.parameters())
            assert all(torch.equal(a, s["step"]) for a, s in zip(steps, agent.optimizer.state.values()))
            # the skip flag does not outlive the update: a later plain step, with finite gradients, moves the weights
            for p in agent.network.parameters():
                p.grad = torch.ones_like(p)
            agent.optimizer.step()
            assert not _same(before, agent.network.parameters())
    assert counts[0] == counts[1] > 0


def test_clean_minibatches_still_learn_next_to_a_bad_one():
    """An Inf state costs only the minibatch it lands in; the other minibatches step and the weights stay finite."""
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=2, batch_size=8)
    for t in range(32):
        agent.store_transition(torch.randn(4), t % 3, math.log(1 / 3), 0.0, 1.0, t == 31, env_id=0)
    _store_bad(agent, "inf_state", n=8, env_id=1)
    before = _snapshot(agent)
    m = agent.update()
    assert all(p.isfinite().all() for p in agent.network.parameters())
    assert not _same(before, agent.network.parameters())
    assert m["skipped_steps"] == 1 and m["n_epochs_run"] == 1 and m["early_stopped"] is True


def test_recurrent_update_skips_non_finite_steps():
    """The recurrent update shares the optimiser step, so it skips and counts the same way."""
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, lstm_hidden_dim=8, device="cpu", recurrent=True)
    for t in range(8):
        s = torch.randn(4)
        a, lp, v = agent.get_action(s)
        agent.store_recurrent_transition(s, a, lp, v, float("nan") if t == 7 else 1.0, t == 7)
    before = _snapshot(agent)
    m = agent.update()
    assert _same(before, agent.network.parameters())
    assert m["skipped_steps"] == 1 and "skipped_steps" in m["anomalies"]


def test_healthy_update_skips_nothing():
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", n_epochs=2, batch_size=16)
    _fill(agent)
    m = agent.update()
    assert m["skipped_steps"] == 0 and m["nonfinite_advantages"] == 0 and "skipped_steps" not in m["anomalies"]


def test_skipped_step_is_logged(caplog):
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=4, hidden_dim=16, device="cpu")
    _store_bad(agent, "nan_reward", n=4)
    with caplog.at_level("WARNING", logger="esper.simic.agent.ppo_update"):
        agent.update()
    assert "skipped 1 of 1 optimizer steps on a non-finite loss or gradient" in caplog.text
    assert "1 samples have a non-finite advantage or return" in caplog.text


def test_state_mismatch_warns():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=3, action_dim=2, hidden_dim=8, device="cpu")
    s = torch.randn(3)
    a, lp, v = agent.get_action(s)
    with pytest.warns(RuntimeWarning, match="different state"):
        agent.store_transition(s * 2, a, lp, v, 0.0, False)
    a, lp, v = agent.get_action(s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.store_transition(s.clone(), a, lp, v, 0.0, False)


def test_policy_improves_on_a_bandit():
    """Reward only for action 2: a few updates raise its probability well above chance."""
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=4, hidden_dim=32, lr=3e-3, device="cpu", batch_size=32, n_epochs=4)
    for _ in range(6):
        _fill(agent, n=64, reward_action=2)
        agent.update()
    acts, _, _ = agent.get_action_batch(torch.randn(400, 4))
    assert (acts == 2).float().mean() > 0.45  # chance is 0.25


# ----------------------------------------------------------------------------- recurrent
def test_recurrent_replay_matches_acting_log_probs_across_resets():
    from esper.simic.agent.networks import evaluate_heads
    from esper.simic.agent.ppo import PPOAgent
    from esper.simic.agent.recurrent import _sequence_batch
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=5, action_dim=factored_head_sizes(2), hidden_dim=16, lstm_hidden_dim=8,
                     recurrent=True, device="cpu")
    for env_id in (0, 1, 2):
        agent.get_action(torch.randn(5), env_id=env_id)  # the rollout starts mid-episode
    for t in range(9):
        for env_id in (0, 1, 2):
            s = torch.randn(5)
            a, lp, v = agent.get_action(s, env_id=env_id)
            agent.store_recurrent_transition(s, a, lp, v, 0.5, done=(t in (2, 6) and env_id != 1), env_id=env_id)
    assert len(agent.buffer.episodes()) == 7
    b = agent.buffer.tensors(agent.head_sizes, "cpu")
    idx, valid, hidden = _sequence_batch(agent, b)
    with torch.no_grad():
        logits, _, _ = agent.network(b["states"][idx], hidden)
    lp, _ = evaluate_heads({k: l[valid] for k, l in logits.items()}, {k: a[idx][valid] for k, a in b["actions"].items()})
    assert torch.allclose(lp, b["log_probs"][idx][valid], atol=1e-5)
    m = agent.update_recurrent(last_values={0: 0.0, 1: 0.3, 2: 0.0})
    assert m["n_samples"] == 27 and tuple(m["head_entropies"]) == HEAD_NAMES


def test_recurrent_hidden_resets_at_episode_end():
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=3, action_dim=2, hidden_dim=8, lstm_hidden_dim=8, recurrent=True, device="cpu")
    s = torch.randn(3)
    v_fresh = agent.get_value(s)
    a, lp, v = agent.get_action(s)
    assert agent.get_value(s) != pytest.approx(v_fresh, abs=1e-7)  # the hidden state moved
    agent.store_transition(s, a, lp, v, 1.0, done=True)
    assert agent.get_value(s) == pytest.approx(v_fresh, abs=1e-7)  # reset after the episode ended


# ----------------------------------------------------------------------------- checkpoints
def _agent_with_history(tmp_path):
    from esper.simic.agent.normalizers import RewardNormalizer, RunningMeanStd
    from esper.simic.agent.ppo import PPOAgent
    torch.manual_seed(0)
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu", entropy_coef_start=0.3,
                     entropy_coef_end=0.02, entropy_anneal_steps=7, adaptive_entropy_floor=True, weight_decay=1e-3,
                     obs_normalizer=RunningMeanStd((4,)), reward_normalizer=RewardNormalizer(clip=5.0))
    for _ in range(2):
        for t in range(16):
            s = torch.randn(4)
            agent.obs_normalizer.update(s)
            a, lp, v = agent.get_action(s)
            agent.store_transition(s, a, lp, v, agent.reward_normalizer.update_and_normalize(float(a)), t == 15)
        agent.update()
    return agent


def test_checkpoint_round_trip_equality(tmp_path):
    from esper.simic.agent.ppo import PPOAgent
    agent = _agent_with_history(tmp_path)
    path = tmp_path / "ck" / "agent.pt"
    agent.save(path)
    assert torch.load(path, weights_only=True)["train_steps"] == 2  # plain data only
    other = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, device="cpu")  # different hyperparameters
    other.load(path)
    assert other.train_steps == 2
    for k in ("entropy_coef_start", "entropy_coef_end", "entropy_anneal_steps", "adaptive_entropy_floor",
              "weight_decay", "gamma", "clip_ratio"):
        assert getattr(other, k) == getattr(agent, k), k
    for (k, p), q in zip(agent.network.state_dict().items(), other.network.state_dict().values()):
        assert torch.equal(p, q), k
    sa, sb = agent.optimizer.state_dict(), other.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i, st in sa["state"].items():
        for k, v in st.items():
            assert torch.equal(v, sb["state"][i][k])
    for k, v in agent.obs_normalizer.state_dict().items():
        assert torch.equal(v, other.obs_normalizer.state_dict()[k])
    assert other.reward_normalizer.state_dict() == agent.reward_normalizer.state_dict()
    # training continues identically
    torch.manual_seed(5); _fill(agent); ma = agent.update()
    torch.manual_seed(5); _fill(other); mb = other.update()
    assert ma["policy_loss"] == mb["policy_loss"] and ma["value_loss"] == mb["value_loss"]


def test_checkpoint_recurrent_factored_from_checkpoint(tmp_path):
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=5, action_dim=factored_head_sizes(2), hidden_dim=16, lstm_hidden_dim=8, recurrent=True)
    agent.save(tmp_path / "r.pt")
    other = PPOAgent.from_checkpoint(tmp_path / "r.pt")
    assert other.recurrent and other.factored and other.head_sizes == agent.head_sizes
    s = torch.randn(5)
    assert other.get_action(s, deterministic=True)[0] == agent.get_action(s, deterministic=True)[0]


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    import esper.simic.agent.checkpoint as ck
    agent = _agent_with_history(tmp_path)
    path = tmp_path / "agent.pt"
    agent.save(path)
    good = path.read_bytes()
    def broken_save(obj, f):
        f.write(b"partial"); raise OSError("disk full")
    monkeypatch.setattr(ck.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        agent.save(path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["agent.pt"]


def test_checkpoint_truncated_or_foreign_file_errors(tmp_path):
    from esper.simic.agent.ppo import PPOAgent
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16)
    agent.save(tmp_path / "a.pt")
    data = (tmp_path / "a.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="not a readable PPOAgent checkpoint"):
        agent.load(tmp_path / "cut.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(ValueError, match="not a readable PPOAgent checkpoint"):
        agent.load(tmp_path / "text.pt")
    torch.save(agent.network.state_dict(), tmp_path / "weights.pt")
    with pytest.raises(ValueError, match="not a PPOAgent checkpoint"):
        agent.load(tmp_path / "weights.pt")
    with pytest.raises(ValueError, match="action_dim"):
        PPOAgent(state_dim=4, action_dim=5, hidden_dim=16).load(tmp_path / "a.pt")


def test_checkpoint_stores_the_config_as_a_plain_dict_and_reads_older_layouts(tmp_path):
    from esper.simic.agent.checkpoint import ARCH_FIELDS, HPARAM_FIELDS
    from esper.simic.agent.config import TrainingConfig
    from esper.simic.agent.ppo import PPOAgent
    from esper.leyline import BLUEPRINTS
    agent = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16, gamma=0.97, target_kl=None, entropy_anneal_steps=3,
                     anomaly_max_ratio_threshold=4.0)
    agent.save(tmp_path / "a.pt")
    ck = torch.load(tmp_path / "a.pt", weights_only=True)
    assert ck["config"] == {"state_dim": 4, "action_dim": 3, "blueprints": list(BLUEPRINTS), **agent.config.to_dict()}
    restored = PPOAgent.from_checkpoint(tmp_path / "a.pt")
    assert restored.config == agent.config and restored.anomaly_detector.max_ratio_threshold == 4.0
    # a checkpoint written before the whole config was stored: architecture and PPO fields only
    ck["config"] = {k: ck["config"][k] for k in (*ARCH_FIELDS, *HPARAM_FIELDS)}
    torch.save(ck, tmp_path / "old.pt")
    old = PPOAgent(state_dim=4, action_dim=3, hidden_dim=16)
    old.load(tmp_path / "old.pt")
    assert (old.gamma, old.target_kl, old.entropy_anneal_steps) == (0.97, None, 3)
    assert old.config.anomaly_max_ratio_threshold == TrainingConfig().anomaly_max_ratio_threshold
    assert PPOAgent.from_checkpoint(tmp_path / "old.pt").config == old.config
    ck["config"]["gamma"] = 1.5  # a stored value is validated like any other
    torch.save(ck, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="gamma must be in"):
        old.load(tmp_path / "bad.pt")


def test_a_checkpoint_with_per_tensor_optimizer_state_resumes_exactly(tmp_path):
    """Checkpoints written before the flat parameter buffers hold one Adam entry per tensor: they resume bit for bit."""
    import numpy as np
    from esper.simic.agent.checkpoint import agent_from_checkpoint
    from esper.simic.agent.flat_params import match_optimizer_state
    from esper.simic.agent.ppo import PPOAgent

    def rollout(agent, seed):
        g = torch.Generator().manual_seed(seed)
        states = torch.randn(64, 6, generator=g)
        actions, log_probs, values = agent.get_action_batch(states)
        rewards = torch.randn(64, generator=g)
        for t in range(64):
            agent.store_transition(states[t], int(actions[t]), float(log_probs[t]), float(values[t]), float(rewards[t]),
                                   t % 8 == 7)

    torch.manual_seed(0)
    np.random.seed(0)
    agent = PPOAgent(state_dim=6, action_dim=3, hidden_dim=16, n_epochs=2, batch_size=16)
    rollout(agent, 1)
    agent.update()
    agent.save(tmp_path / "flat.pt")
    ck = torch.load(tmp_path / "flat.pt", weights_only=True)
    per_tensor = torch.optim.Adam(agent.network.parameters(), lr=agent.lr, eps=1e-5)  # the layout of older files
    ck["optimizer_state_dict"] = match_optimizer_state(ck["optimizer_state_dict"], per_tensor)
    assert len(ck["optimizer_state_dict"]["state"]) == len(list(agent.network.parameters())) > 1
    torch.save(ck, tmp_path / "per_tensor.pt")
    finals = []
    for name in ("flat.pt", "per_tensor.pt"):
        torch.manual_seed(5)
        resumed = agent_from_checkpoint(tmp_path / name)
        rollout(resumed, 2)
        resumed.update()
        finals.append([p.detach().clone() for p in resumed.network.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*finals))


def test_the_update_parts_benchmark_times_adam_and_the_minibatch_step(tmp_path, run_bench):
    "lab/probes/ppo_update_parts.py on tiny settings (no compile): one line per Adam kernel and one for the eager step."
    p = run_bench("ppo_update_parts.py", "--iters", "2", "--no-compile", cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split(":")[0].strip() for line in lines] == ["Adam step, single-tensor", "Adam step, fused",
                                                              "forward + loss + backward, eager"]
    assert all(float(line.split(":")[1].split()[0]) > 0 for line in lines)
    p = run_bench("ppo_update_parts.py", "--iters", "0", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith("--iters must be >= 1 (got 0)")


# ----------------------------------------------------------------------------- fast_update
def _twin_updates(n_updates=2, **kw):
    """A default agent and a `fast_update` one, built, filled and updated from the same random state.

    Factored heads with masks and a rollout of 60 steps in minibatches of 16 (the last one shorter), as Tamiyo's are."""
    from esper.simic.agent.ppo import PPOAgent
    sizes = factored_head_sizes(2)
    masks = {k: torch.ones(s, dtype=torch.bool) for k, s in sizes.items()}
    agents, metrics = [], []
    for fast in (False, True):
        torch.manual_seed(0)
        agent = PPOAgent(state_dim=6, action_dim=sizes, hidden_dim=32, n_epochs=3, batch_size=16, target_kl=None,
                         entropy_coef_start=0.05, entropy_coef_end=0.01, entropy_anneal_steps=4, fast_update=fast, **kw)
        ms = []
        for _ in range(n_updates):
            for t in range(60):
                s = torch.randn(6)
                a, lp, v = agent.get_action(s, masks)
                agent.store_transition(s, a, lp, v, float(a["op"] == 1), t % 20 == 19, action_mask=masks)
            ms.append(agent.update())
        agents.append(agent)
        metrics.append(ms)
    return agents, metrics


def _assert_close_weights(a, b, atol=1e-4):
    for (name, p), q in zip(a.network.named_parameters(), b.network.parameters()):
        assert torch.allclose(p, q, atol=atol), (name, (p - q).abs().max().item())


def test_fast_update_without_a_compiler_warns_once_and_matches_the_default_update(monkeypatch):
    """Where torch.compile fails, fast_update warns once (one line), runs eagerly, and differs only by rounding."""
    def no_compiler(fn, **kw):
        def fail(*a, **k):
            raise RuntimeError("CppCompileError: no C++ compiler found\nmore lines")
        return fail
    monkeypatch.setattr(torch, "compile", no_compiler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (default, fast), (m_default, m_fast) = _twin_updates()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert messages == ["torch.compile failed (RuntimeError: CppCompileError: no C++ compiler found); the step runs "
                        "eagerly from now on"]
    assert fast.optimizer.param_groups[0]["fused"] is True and not default.optimizer.param_groups[0].get("fused")
    assert all("compile_seconds" not in m for m in m_default + m_fast)
    _assert_close_weights(default, fast)
    assert any(not torch.equal(p, q) for p, q in zip(default.network.parameters(), fast.network.parameters())), \
        "fused Adam and the one-norm clip round differently: equal weights mean fast_update changed nothing"


@pytest.mark.slow
def test_fast_update_compiles_the_minibatch_step_and_agrees_with_the_default_update():
    """The real torch.compile (or, on a machine without a C++ compiler, its one-line fallback)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (default, fast), (m_default, m_fast) = _twin_updates(n_updates=3)
    step = fast._minibatch_step()
    fallbacks = [w for w in caught if "torch.compile failed" in str(w.message)]
    if step.compiled:
        assert not fallbacks and m_fast[0]["compile_seconds"] > 0
        assert all("compile_seconds" not in m for m in m_fast[1:])  # compiled once, reported once
    else:
        assert len(fallbacks) == 1 and step.failure
    _assert_close_weights(default, fast)
    for a, b in zip(m_default, m_fast):
        assert math.isclose(a["policy_loss"], b["policy_loss"], rel_tol=1e-3, abs_tol=1e-5)
        assert math.isclose(a["value_loss"], b["value_loss"], rel_tol=1e-3, abs_tol=1e-5)
