"""Adding a blueprint is one class and one registry entry (issue 58): a throwaway blueprint registered in-process is
germinated in an episode, in the gym environment, and by a PPO agent whose blueprint menu includes it, and learnt
from in a PPO update; removing it leaves the registry as it was. Nothing else is edited: the flat actions, the
one-hot features, the head sizes, the masks, the offers and the checks all follow the menu.

Adding a layout is one `register_layout` entry plus its blueprints (issue 73): a throwaway 3-D conv layout is
registered in-process, a model with a `Conv3d` block grows a seed of it through `esper.kasmina.grow`, and removing
both leaves the registries as they were. Every registered blueprint, in every layout, starts function-preserving."""
import contextlib
import random

import numpy as np
import pytest
import torch
from torch import nn

from esper.kasmina import (
    BLUEPRINT_REGISTRY,
    LAYOUTS,
    Layout,
    SeedModule,
    grow,
    register_blueprint,
    register_layout,
    registered_blueprints,
)
from esper.kasmina.model import _blueprint_cost
from esper.leyline import BLUEPRINTS, HEAD_NAMES, ActionSpace, LifecycleOp
from esper.simic import PPOAgent
from esper.simic.envs.env import act, action_dim, obs_to_state, state_dim, step_reward
from esper.simic.envs.gym_env import GrowthEnv
from esper.tamiyo import TamiyoAction, run_episode
from esper.tamiyo.baselines import ScheduleTamiyo
from esper.tamiyo.episode import Episode
from esper.tamiyo.heuristic import HeuristicConfig, HeuristicTamiyo
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem

def _problem(menu):
    "Four epochs of two batches on MNIST-1D, planting from `menu` (an ActionSpace)."
    return GrowthProblem("mnist1d", max_epochs=4, max_batches=2, blueprints=menu.blueprints)


class WideSeed(SeedModule):
    "1×1 conv to twice the channels → ReLU → zero-initialised 1×1 conv back (a throwaway blueprint)."

    blueprint = "wide_test"

    def __init__(self, channels: int, dims: int):
        super().__init__(channels, dims)
        Conv = nn.Conv1d if dims == 1 else nn.Conv2d
        self.up, self.down = Conv(channels, 2 * channels, 1), Conv(2 * channels, channels, 1)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    def forward(self, h):
        return self.down(torch.relu(self.up(h)))


@contextlib.contextmanager
def registered(cls: type[SeedModule]):
    "Register `cls` for its layouts for the length of the block (the one registry line), then remove it."
    register_blueprint(cls)
    try:
        yield cls.blueprint
    finally:
        for family in cls.layouts:
            BLUEPRINT_REGISTRY[family].pop(cls.blueprint, None)
        _blueprint_cost.cache_clear()  # parameter counts are cached by name


@pytest.fixture
def wide():
    with registered(WideSeed) as name:
        yield name


def test_registering_then_removing_leaves_the_registry_as_before():
    before = {family: dict(specs) for family, specs in BLUEPRINT_REGISTRY.items()}
    names = registered_blueprints()
    assert names[: len(BLUEPRINTS)] == BLUEPRINTS
    with registered(WideSeed) as name:
        assert set(registered_blueprints()) == {*names, name} and registered_blueprints()[:5] == BLUEPRINTS
        assert all(BLUEPRINT_REGISTRY[f][name].build(8).param_count > 0 for f in WideSeed.layouts)
    assert {family: dict(specs) for family, specs in BLUEPRINT_REGISTRY.items()} == before
    assert name not in registered_blueprints()
    with pytest.raises(ValueError, match="wide_test are not registered; registered: norm"):
        ScheduleTamiyo((name,))


def test_an_episode_grows_the_new_blueprint(wide):
    menu = ActionSpace(("norm", wide))
    res = run_episode(get_task("mnist1d"), ScheduleTamiyo((wide,)), seed=0, problem=_problem(menu))
    grown = [r for r in res.lifecycle_log if r["to"] == "GERMINATED"]
    assert [r["blueprint"] for r in grown] == [wide] and res.params_added == grown[0]["params"] > 0
    assert HeuristicTamiyo().preferences(_model(menu)) == ("norm", wide)  # known ones in its order, then new ones
    assert HeuristicTamiyo(HeuristicConfig(blueprints=(wide,))).preferences(_model(menu)) == (wide,)
    ep = Episode(get_task("mnist1d"), problem=_problem(menu))
    ep.reset(0)
    obs, _ = ep.step(TamiyoAction(LifecycleOp.GERMINATE, "block1", wide))
    x = obs_to_state(obs)
    assert x.shape == (state_dim(2, menu),) == (30 + 2 + 20,)
    assert obs["seed_blueprint_id"] == 2 and x[30:32].tolist() == [0.0, 1.0]  # its one-hot: second on the menu


def _model(menu):
    ep = Episode(get_task("mnist1d"), problem=_problem(menu))
    ep.start(0)
    return ep.model


def test_the_gym_env_germinates_it_through_the_blueprint_head(wide):
    menu = ActionSpace((wide,))
    env = GrowthEnv(suite=_problem(menu))
    assert env.action_space.nvec.tolist() == [2, 1, 3, len(LifecycleOp)]
    env.reset(seed=0)
    heads = {"slot": 0, "blueprint": 0, "blend": 0, "op": int(LifecycleOp.GERMINATE)}
    state, _, _, _, info = env.step(np.array([heads[h] for h in HEAD_NAMES]))
    assert info["action_success"] and env.episode.model.slot("block1").state.blueprint_id == wide
    assert state.shape == (state_dim(2, menu),)


def test_a_ppo_agent_on_a_menu_with_it_germinates_it_and_updates(wide, tmp_path):
    menu = ActionSpace((wide, "norm"))
    torch.manual_seed(0)
    agent = PPOAgent(state_dim(2, menu), action_dim(2, False, menu), actions=menu, hidden_dim=16, n_epochs=2,
                     batch_size=4, blueprint_entropy_coef=0.05, germinate_gae_lambda=0.5)
    assert agent.action_dim == 6
    ep = Episode(get_task("mnist1d"), problem=_problem(menu))
    obs, chosen = ep.reset(1), []
    while not ep.done:
        offer = random.Random(obs["epoch"]) if obs["epoch"] % 2 else None
        d = act(agent, [obs], [0], offers=[offer])[0]
        chosen.append(d.tamiyo_action)
        obs, _ = ep.step(d.tamiyo_action)
        agent.store_transition(d.state, d.action, d.log_prob, d.value, step_reward(ep)["total"], done=ep.done,
                               action_mask=d.mask)
    assert (LifecycleOp.GERMINATE, wide) in [(a.op, a.blueprint) for a in chosen], chosen
    before = [p.detach().clone() for p in agent.network.parameters()]
    metrics = agent.update()
    assert metrics and all(np.isfinite(v) for v in metrics.values() if isinstance(v, float))
    assert any(not torch.equal(b, p) for b, p in zip(before, agent.network.parameters()))
    agent.save(tmp_path / "wide.pt")
    assert PPOAgent.from_checkpoint(tmp_path / "wide.pt").actions == menu
    with pytest.raises(ValueError, match="trained on the blueprint menu \\('wide_test', 'norm'\\)"):
        PPOAgent(state_dim(2), hidden_dim=16).load(tmp_path / "wide.pt")


def _random_input(layout: str, channels: int) -> torch.Tensor:
    "A batch of 3 of `layout` with `channels` channels and sizes of 5 (6 for the second spatial one)."
    l = LAYOUTS[layout]
    shape = [3] + [5 + i for i in range(l.dims)]
    shape.insert(l.channel_dim % l.rank, channels)
    return torch.randn(shape)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_registered_blueprint_starts_function_preserving(layout):
    for name, spec in BLUEPRINT_REGISTRY[layout].items():
        torch.manual_seed(0)
        x = _random_input(layout, 16)
        seed = spec.build(16, LAYOUTS[layout].size(x.shape) if spec.needs_size else None)
        for mode in (True, False):  # training (batch statistics) and eval (running statistics)
            out = seed.train(mode)(x)
            assert out.shape == x.shape and bool(out.eq(0).all()), (layout, name, mode)


class Conv3dSeed(SeedModule):
    "conv(k=3) -> ReLU -> zero-initialised 1x1x1 conv, on volumes (a throwaway blueprint of a throwaway layout)."

    blueprint = "volume_conv"
    layouts = ("volume",)

    def __init__(self, channels: int, dims: int):
        super().__init__(channels, dims)
        self.body = nn.Sequential(nn.Conv3d(channels, channels, 3, padding=1), nn.ReLU(), nn.Conv3d(channels, channels, 1))
        nn.init.zeros_(self.body[-1].weight)
        nn.init.zeros_(self.body[-1].bias)

    def forward(self, h):
        return self.body(h)


def test_a_new_layout_is_one_entry_plus_its_blueprints():
    before = {family: dict(specs) for family, specs in BLUEPRINT_REGISTRY.items()}
    register_layout(Layout("volume", 5, 1, (nn.Conv3d,), "3-D conv feature maps (N, C, D, H, W)"))
    try:
        register_blueprint(Conv3dSeed)
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 5 * 6, 2))
        x = torch.randn(2, 1, 4, 5, 6)
        before_out = net(x).detach()
        model = grow(net, ["1"], x)
        assert model.points["1"].layout == "volume" and model.blueprints == ("volume_conv",)
        assert model.slot_sizes["1"] == (4, 5, 6) and model.slot("1").channels == 4
        model.germinate("1", "volume_conv")
        assert torch.equal(net(x), before_out)
        model.advance("1")
        opt = torch.optim.SGD(model.get_seed_parameters("1"), lr=0.5)
        for _ in range(2):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
        assert not torch.equal(net(x), before_out)
        model.release()
    finally:
        LAYOUTS.pop("volume", None)
        BLUEPRINT_REGISTRY.pop("volume", None)
        _blueprint_cost.cache_clear()
    assert {family: dict(specs) for family, specs in BLUEPRINT_REGISTRY.items()} == before
