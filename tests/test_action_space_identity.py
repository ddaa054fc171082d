"""The default blueprint menu changes nothing: a tiny episode and tiny PPO updates give the very bits they gave
before the action space was derived from a menu (issue 58).

`EXPECTED` was recorded on the code of commit f8c1901 (hand-written `FlatAction`) by running this file, as first
committed (d023a19, which uses only names f8c1901 has), as a script: `OMP_NUM_THREADS=1 python
tests/test_action_space_identity.py`. The digests cover every observation state, mask,
action, reward and the agent's weights after its update, so any change to the default action space, the one-hot
features, the masks, the offers or the decoding changes them. They are bit-exact float results of one CPU with one
thread and AVX2 kernels (`tests/conftest.py` pins those on a CPU with AVX-512, whose kernels round differently): on
another CPU architecture re-record them (at f8c1901, then check this branch gives the same).

Re-recorded once since, on purpose: when the honest splits (issue 56) carved MNIST-1D's validation split out of its
training split and episodes began to report test accuracy and count their compute, every run's data changed. The
values are those of the merge that brought the menu, the splits and the compute together (same CPU and command);
the test that naming the default menu changes nothing still compares within one commit.
"""
import hashlib
import random
from pathlib import Path

import pytest
import torch

from esper.leyline import BLUEPRINTS, ActionSpace
from esper.simic import PPOAgent
from esper.simic.envs.env import act, action_dim, obs_to_state, state_dim, step_reward
from esper.tamiyo import run_episode
from esper.tamiyo.baselines import RandomTamiyo
from esper.tamiyo.episode import Episode, EpisodeConfig
from esper.tasks import get_task

CFG = EpisodeConfig(max_epochs=5, max_batches=2)
PPO_CFG = EpisodeConfig(max_epochs=5, max_batches=2, param_budget=1914)  # conv_heavy (1064) never fits
#: The digests per CPU vendor. MKL's matrix products (the policy's) take a vendor's own code path whatever the AVX2
#: pin, so PPO's bits differ between vendors while the host-training episode's do not. The AMD EPYC values are the
#: ones described above; the Intel ones were recorded at 4a970d9 on an Intel Xeon with AVX-512 (AVX2 pinned), and the
#: growing-any-model change (issue 73) gave the same bits there.
RECORDED = {
    "AuthenticAMD": {
        "random_episode": "fc4d8cc37ab211f3830cac38",
        "ppo_flat": "a914494d72635c75f1801b38",
        "ppo_factored": "3a862002ac5fb17914877d68",
    },
    "GenuineIntel": {
        "random_episode": "fc4d8cc37ab211f3830cac38",
        "ppo_flat": "6f319d39f7ac1629ab1c22fd",
        "ppo_factored": "5fe77bf53e621a027e8abd18",
    },
}


def cpu_vendor() -> str:
    "The CPU vendor as /proc/cpuinfo names it ('AuthenticAMD', 'GenuineIntel'); AMD's where it cannot be read."
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "AuthenticAMD"
    return next((l.split(":", 1)[1].strip() for l in lines if l.startswith("vendor_id")), "AuthenticAMD")


EXPECTED = RECORDED.get(cpu_vendor(), RECORDED["AuthenticAMD"])


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, torch.Tensor):
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(p, dict):
            h.update(repr(sorted((k, _digest(v)) for k, v in p.items())).encode())
        else:
            h.update(repr(p).encode())
    return h.hexdigest()[:24]


def random_episode(**kw) -> str:
    "A tiny episode of random legal actions (germinations of random blueprints); digest of its history."
    res = run_episode(get_task("mnist1d"), RandomTamiyo(seed=3), CFG, seed=1, **kw)
    log = [{k: v for k, v in r.items() if k != "seed_id"} for r in res.lifecycle_log]  # seed ids count per process
    return _digest([r["val_accuracy"] for r in res.history], log, res.params_added, res.final_accuracy)


def ppo_episode(factored: bool, **kw) -> str:
    "One tiny episode of a tiny PPO agent (under a budget, offers every other epoch), then one update; digest of all it saw and learnt."
    torch.manual_seed(0)
    agent_kw = {k: v for k, v in kw.items() if k == "actions"}
    agent = PPOAgent(state_dim(2, **kw), action_dim(2, factored, **kw), hidden_dim=16, n_epochs=2, batch_size=4,
                     blueprint_entropy_coef=0.05, germinate_gae_lambda=0.5, **agent_kw)
    ep = Episode(get_task("mnist1d"), PPO_CFG, **kw)
    obs, parts = ep.reset(2), []
    while not ep.done:
        offer = random.Random(f"offer:{obs['epoch']}") if obs["epoch"] % 2 else None  # offers, and free choices
        d = act(agent, [obs], [0], offers=[offer])[0]
        obs, rec = ep.step(d.tamiyo_action)
        r = step_reward(ep)["total"]
        agent.store_transition(d.state, d.action, d.log_prob, d.value, r, done=ep.done, action_mask=d.mask)
        parts += [obs_to_state(obs), d.mask, d.action, str(d.tamiyo_action), r, rec["val_accuracy"]]
    metrics = agent.update()
    parts += [p.detach() for p in agent.network.parameters()]
    return _digest(*parts, sorted((k, v) for k, v in metrics.items() if isinstance(v, float)))


def digests(**kw) -> dict[str, str]:
    "The three digests, with `kw` (e.g. an explicit action space) passed to everything that takes it."
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            "random_episode": random_episode(**kw),
            "ppo_flat": ppo_episode(False, **kw),
            "ppo_factored": ppo_episode(True, **kw),
        }
    finally:
        torch.set_num_threads(n)


def test_the_default_menu_gives_the_bits_of_the_hand_written_action_space():
    assert digests() == EXPECTED


def test_naming_the_default_menu_gives_the_same_bits():
    assert digests(actions=ActionSpace(BLUEPRINTS)) == EXPECTED


OLD_CHECKPOINT = Path(__file__).parent / "fixtures" / "agent_f8c1901.pt"  # PPOAgent.save at f8c1901: no menu stored


def test_a_checkpoint_from_before_menus_loads_with_the_default_menu():
    assert "blueprints" not in torch.load(OLD_CHECKPOINT, weights_only=True)["config"]
    agent = PPOAgent.from_checkpoint(OLD_CHECKPOINT)
    assert agent.actions == ActionSpace(BLUEPRINTS) and agent.action_dim == 9 and agent.state_dim == state_dim(2)
    same = PPOAgent(state_dim(2), hidden_dim=4, n_epochs=1, batch_size=4)
    same.load(OLD_CHECKPOINT)
    assert all(torch.equal(a, b) for a, b in zip(same.network.parameters(), agent.network.parameters()))
    other = PPOAgent(state_dim(2), hidden_dim=4, actions=ActionSpace(("norm", "attention")))
    with pytest.raises(ValueError, match="trained on the blueprint menu \\('norm', 'conv_small'.*this run's menu is"):
        other.load(OLD_CHECKPOINT)


if __name__ == "__main__":
    print(digests())
