"""Growing any PyTorch model (issue 73): the public `grow` call puts slots at named submodules of a torchvision
ResNet-18 (unchanged torchvision code), a causal transformer written here and a plain MLP, on CPU, in seconds. Each
is taken through the lifecycle: planting leaves the output as it was, incubating seeds learn through the model's own
forward pass, blending, the counterfactual (a full pass with one slot's alpha forced to 0), fossilizing and pruning.
The models' own `forward` and `state_dict` keys are untouched, and the refusals of bad input are one line each."""
import copy
import pickle

import pytest
import torch
from torch import nn

from esper.kasmina import GateConfig, grow
from esper.leyline import SeedStage
from esper.tolaria import EpochRunner

torchvision = pytest.importorskip("torchvision")


def _loader(x: torch.Tensor, y: torch.Tensor, batch: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(x[i : i + batch], y[i : i + batch]) for i in range(0, len(x), batch)]


def _to_training(model, slot: str) -> None:
    "GERMINATED -> TRAINING, with the gradient telemetry the blending gate reads."
    assert model.advance(slot)
    model.slot(slot).state.sync_telemetry(0.1, 1.0, False, False, 1, 10)


@pytest.fixture
def resnet():
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


def test_a_torchvision_resnet18_grows_through_its_lifecycle(resnet):
    keys = list(resnet.state_dict())
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    model = grow(resnet, ["layer2", "layer3.1"], x[:2], blend_epochs=1, gates=GateConfig(min_training_epochs=1))
    assert [(p.name, p.layout, p.channels, p.size) for p in model.points.values()] == [
        ("layer2", "conv2d", 128, (4, 4)),
        ("layer3.1", "conv2d", 256, (2, 2)),
    ]
    assert model.blueprints[:2] == ("norm", "conv_small") and list(resnet.state_dict()) == keys
    resnet.eval()
    with torch.no_grad():
        before = resnet(x)
    model.germinate("layer2", "conv_small")
    model.germinate("layer3.1", "attention")
    with torch.no_grad():
        assert torch.equal(resnet(x), before)  # planting changes nothing, called as the user calls it
    resnet.train()
    for s in model.slot_ids:
        _to_training(model, s)
    runner = EpochRunner(model, seed_lr=0.05)
    seeds_before = [p.detach().clone() for p in model.get_seed_parameters()]
    runner.train_epoch(_loader(x, y))
    assert any(not torch.equal(a, b) for a, b in zip(seeds_before, model.get_seed_parameters()))
    model.step_epoch(1, 10.0)
    assert model.advance("layer2")  # TRAINING -> BLENDING
    model.step_epoch(2, 12.0)  # alpha ramps to 1 over one epoch
    assert model.advance("layer2") and model.slot("layer2").stage == SeedStage.HOLDING
    val = _loader(x, y)
    metrics, without = runner.validate_with_counterfactuals(val, ["layer2"])
    with model.slot("layer2").force_alpha(0.0):
        assert without["layer2"] == runner.validate(val)["accuracy"]  # a full pass with the slot switched off
    assert metrics["accuracy"] == runner.validate(val)["accuracy"]
    model.counterfactual("layer2", val)
    model.prune("layer3.1")
    assert model.slot("layer3.1").stage == SeedStage.EMBARGOED and list(resnet.state_dict()) == keys


def test_a_copy_of_a_grown_model_has_its_own_slots(resnet):
    x = torch.randn(2, 3, 32, 32)
    model = grow(resnet, ["layer1"], x)
    model.germinate("layer1", "conv_small")
    model.advance("layer1")  # TRAINING: the seed's output joins the forward pass
    twin = copy.deepcopy(model)
    twin2 = pickle.loads(pickle.dumps(model))
    with torch.no_grad():
        for p in twin.get_seed_parameters():
            p.normal_()
    model.eval(), twin.eval(), twin2.eval()
    with torch.no_grad():
        assert torch.equal(model(x), twin2(x))
        assert not torch.equal(model(x), twin(x))  # the copy's hook calls the copy's seed
    host = model.release()
    with pytest.raises(ValueError, match="'layer1' did not run|already holds"):
        grow(twin.host, ["layer1"], x)  # the copy's host still carries its own slot
    assert host is model.host and grow(host, ["layer1"], x).host is host  # released: it takes a slot again


class CausalLM(nn.Module):
    "A character-level GPT in miniature: embedding, pre-norm blocks under a causal mask, a linear head."

    def __init__(self, vocab: int = 12, width: int = 32, depth: int = 2, context: int = 8):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, width), nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(depth)
        )
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        t = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.embed(tokens) + self.pos[:t]
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)
        return self.head(h)


def test_a_causal_transformer_grows_token_seeds_that_never_look_ahead():
    torch.manual_seed(0)
    lm = CausalLM()
    tokens = torch.randint(0, 12, (4, 8))
    model = grow(lm, ["blocks.0", "blocks.1"], tokens, layouts="causal_tokens")
    assert [(p.layout, p.channels, p.size) for p in model.points.values()] == [("causal_tokens", 32, (8,))] * 2
    with pytest.raises(ValueError, match="not on this run's menu"):
        model.germinate("blocks.0", "conv_small")
    lm.eval()
    before = lm(tokens).detach()
    model.germinate("blocks.0", "transformer_block")
    model.germinate("blocks.1", "low_rank")
    assert torch.equal(lm(tokens), before)
    for s in model.slot_ids:
        model.advance(s)  # TRAINING: the seeds' outputs join the forward pass
    with torch.no_grad():  # seeds that have learnt something
        for p in model.get_seed_parameters():
            p.normal_(0, 0.2)
    later = tokens.clone()
    later[:, 5:] = (later[:, 5:] + 1) % 12
    assert torch.allclose(lm(tokens)[:, :5], lm(later)[:, :5], atol=1e-6)  # positions 0-4 never see 5-7
    assert not torch.allclose(lm(tokens), before)


def test_the_token_layout_is_inferred_and_a_plain_attention_seed_does_look_ahead():
    torch.manual_seed(0)
    lm = CausalLM()
    tokens = torch.randint(0, 12, (4, 8))
    model = grow(lm, ["blocks.1"], tokens)
    assert model.points["blocks.1"].layout == "tokens"
    model.germinate("blocks.1", "attention_block")
    model.advance("blocks.1")
    with torch.no_grad():
        for p in model.get_seed_parameters():
            p.normal_(0, 0.2)
    later = tokens.clone()
    later[:, 5:] = (later[:, 5:] + 1) % 12
    lm.eval()
    assert not torch.allclose(lm(tokens)[:, :5], lm(later)[:, :5], atol=1e-6)  # why a GPT names causal_tokens


def test_an_mlp_grows_on_feature_vectors():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(32, 6)
    model = grow(net, ["1", "3"], x, param_budget=3000)  # the host has 435
    assert [p.layout for p in model.points.values()] == ["features"] * 2 and model.blueprints == ("mlp", "low_rank")
    assert model.affordable("1") == [True, True]
    model.germinate("1", "mlp")  # 32 + 16*64 + 64 + 64*16 + 16 = 2,160: too much for a second one, not for low_rank (128)
    assert model.affordable("3") == [False, True]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(slots=["layer9"]), "slots: 'layer9' is not a submodule of ResNet"),
        (dict(slots=["fc"], example=torch.randn(2, 3, 32, 32), layouts="tokens"), "of rank 3"),
        (dict(slots=["layer2"], example=torch.randn(2, 5, 32, 32)), "example: the model's forward pass failed"),
        (dict(slots=["layer2"], blueprints=("mlp",)), "mlp are not registered for the conv2d family"),
        (dict(slots=["layer2"], param_budget=1000), "param_budget 1000 is below the host's own"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_trains(resnet, kwargs, message):
    kwargs = {"example": torch.randn(2, 3, 32, 32)} | kwargs
    with pytest.raises(ValueError, match=message) as e:
        grow(resnet, **kwargs)
    assert "\n" not in str(e.value)


def test_a_policy_trained_from_python_plays_in_the_users_loop():
    import esper
    from esper.tamiyo.problems import TINY

    torch.manual_seed(0)
    ppo = esper.PPO("tiny", n_envs=2, episodes_per_task_seed=2, n_epochs=1, batch_size=4)
    policy = ppo.learn(4)
    problem = TINY.problems[0]
    task = problem.load_task(1000)
    menu = ppo.agent.actions.blueprints
    host = task.make_host(problem.host)
    model = esper.MorphogeneticModel(host, problem.slots, param_budget=problem.param_budget, blueprints=menu)
    opt = torch.optim.SGD(host.parameters(), lr=0.01, momentum=0.9)
    loop = esper.GrowthLoop(model, opt, policy, task.val_loader, max_epochs=3)
    for _ in range(3):
        for i, (x, y) in enumerate(task.train_loader):
            if i == 4:
                break
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        loop.on_epoch_end({"val_accuracy": 20.0, "val_loss": 2.0, "train_samples": task.n_train})
    assert [h["epoch"] for h in loop.history] == [1, 2, 3] and len(policy.decisions) == 2  # none after the last
    other = esper.MorphogeneticModel(task.make_host(problem.host), problem.slots, blueprints=("norm",))
    with pytest.raises(ValueError, match="the policy was trained on the menu"):
        esper.GrowthLoop(other, torch.optim.SGD(other.host.parameters(), lr=0.01), policy, task.val_loader, 3)
