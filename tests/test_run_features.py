"""The run feature sets: "signals" is today's state, "run" tells runs apart by their budgets, "run-slots" also by
their slots' shapes, "run-data" also by how alike neighbouring input values are,
and a policy trained on "run" (flag, config, checkpoint) plays back with the features it was trained on."""
import json
import math

import pytest
import torch

from esper.cli import main
from esper.simic.agent.checkpoint import agent_from_checkpoint
from esper.simic.envs.env import obs_to_state, state_dim
from esper.tamiyo.episode import Episode
from esper.tamiyo.features import RUN_FEATURE_NAMES, obs_to_base_features
from esper.tasks import get_task
from esper.tamiyo.problems import GrowthProblem

ROOM = RUN_FEATURE_NAMES.index("param_room")


def first_obs(param_budget, **settings):
    "The first observation of a two-epoch mnist1d run with this parameter budget, no seed germinated."
    problem = GrowthProblem("mnist1d", max_epochs=2, max_batches=1, param_budget=param_budget)
    ep = Episode(get_task("mnist1d", shuffle_seed=0, settings=settings), problem=problem)
    return ep.reset(seed=0)


def test_signals_is_todays_state():
    obs = first_obs(None)
    today = obs_to_base_features(obs, obs["max_epochs"]) + [x for s in obs["slots"].values() for x in s["telemetry"]]
    state = obs_to_state(obs)
    assert state.tolist() == torch.tensor(today, dtype=torch.float32).tolist()
    assert torch.equal(obs_to_state(obs, "signals"), state)
    assert state_dim(2) == 55 == state_dim(2, features="signals")


def test_run_features_tell_budgets_apart():
    free, tight = first_obs(None), first_obs(914 + 1400)  # the mnist1d host holds 914 parameters
    assert torch.equal(obs_to_state(free), obs_to_state(tight))  # the signals cannot tell them apart
    a, b = obs_to_state(free, "run"), obs_to_state(tight, "run")
    assert a.shape == b.shape == (state_dim(2, features="run"),) == (66,)  # 11 values
    block_a, block_b = a[35:46].tolist(), b[35:46].tolist()
    assert (block_a[0], block_a[ROOM]) == (0.0, 0.0)  # no budget
    assert block_b[0] == 1.0 and block_b[ROOM] == pytest.approx(1400 / (1400 + 914))
    assert [i for i in range(11) if block_a[i] != block_b[i]] == [0, ROOM]
    assert all(0.0 <= v <= 1.0 for v in block_a + block_b)


def test_slot_shapes_tell_hosts_apart():
    "run-slots: each slot's shape closes the run block: present, log channels, depth; zeros for a slot the host lacks."
    both = first_obs(None)
    problem = GrowthProblem("mnist1d", max_epochs=2, max_batches=1, slots=("block2",))
    lone = Episode(get_task("mnist1d", shuffle_seed=0), problem=problem).reset(seed=0)
    layout = ("block1", "block2")
    a, b = obs_to_state(both, "run-slots", layout), obs_to_state(lone, "run-slots", layout)
    assert a.shape == b.shape == (state_dim(2, features="run-slots"),) == (72,)  # 11 values, then 3 per slot
    assert torch.equal(a[:46], obs_to_state(both, "run", layout)[:46])  # "run": the same block without the shapes
    shapes_a, shapes_b = a[46:52].tolist(), b[46:52].tolist()
    assert shapes_a[0] == shapes_a[3] == 1.0 and (shapes_a[2], shapes_a[5]) == (0.5, 1.0)  # two blocks, in order
    assert shapes_b[:3] == [0.0, 0.0, 0.0] and shapes_b[3:] == shapes_a[3:]  # block1 absent, block2 as in `both`
    widths = get_task("mnist1d").make_host().block_channels
    assert [shapes_a[1], shapes_a[4]] == pytest.approx([math.log10(1 + c) / math.log10(1025) for c in widths])
    assert b[52:62].tolist() == [0.0] * 10  # block1's telemetry: zeros
    assert torch.equal(obs_to_state(both, "run-slots"), a)  # the host's own layout: the same state


def test_data_block_tells_ordered_from_permuted_inputs():
    "run-data: the same budgets and host, inputs in their own order or permuted: only the data block differs."
    ordered, permuted = first_obs(None), first_obs(None, shuffle_seq=True)
    a, b = obs_to_state(ordered, "run-data"), obs_to_state(permuted, "run-data")
    assert a.shape == b.shape == (state_dim(2, features="run-data"),) == (68,)  # 11 values, then 2
    assert torch.equal(a[:46], obs_to_state(ordered, "run")[:46])  # the base features and the run block, then
    assert torch.equal(a[35:46], b[35:46])  # the run block cannot tell them apart: same budgets, host and sizes
    assert a[46] > 0.5 and abs(b[46]) < 0.2, (a[46], b[46])  # input_locality
    assert a[47] == b[47] == pytest.approx(math.log10(41) / 5)  # 40 values per input


def test_a_run_policy_trains_saves_and_plays_back(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(["ppo", "--suite", "tiny", "--features", "run", "--vectorized", "--n-envs", "2", "--n-episodes", "2",
                 "--workers", "0", "--no-progress", "--save", str(save)]) == 0
    ck = torch.load(save, weights_only=True)["config"]
    assert ck["features"] == "run" and ck["state_dim"] == 30 + 2 + 11 + 10 * 2  # a menu of two blueprints
    assert agent_from_checkpoint(save).config.features == "run"
    out = tmp_path / "cmp"
    assert main(["compare", "--controllers", "ppo", "--checkpoint", str(save), "--suite", "tiny", "--seeds", "0",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err  # issue 76: the policy's own training data is not compared on without a word
    assert "note: --seeds 0 are below 1000: they share the data the policy trained on" in err, err
    overall = json.loads((out / "comparison.json").read_text())["rows"]["overall"]
    assert [(r["controller"], r["episodes"]) for r in overall] == [("ppo", 2)]  # one episode per problem


def test_old_checkpoints_read_signals(tmp_path):
    save = tmp_path / "agent.pt"
    assert main(["ppo", "--n-episodes", "1", "--update-every", "1", "--max-epochs", "2", "--max-batches", "1",
                 "--no-progress", "--save", str(save)]) == 0
    ck = torch.load(save, weights_only=True)
    assert ck["config"].pop("features") == "signals"
    torch.save(ck, save)  # as written before feature sets
    assert agent_from_checkpoint(save).config.features == "signals"


def test_unknown_feature_set_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["ppo", "--features", "everything"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--features" in err and "'signals', 'run'" in err


@pytest.mark.parametrize("where,features", [(["--workers", "1"], "run"), (["--population", "on"], "run"),
                                            (["--workers", "1"], "run-data")])
def test_workers_and_population_read_the_run_features_too(tmp_path, where, features):
    "Worker processes and the population path build the same states: the same policy as the in-process run."
    flags = ["ppo", "--suite", "tiny", "--features", features, "--vectorized", "--n-envs", "2", "--n-episodes", "2",
             "--no-progress"]
    assert main([*flags, "--workers", "0", "--save", str(tmp_path / "a.pt")]) == 0
    assert main([*flags, *where, "--save", str(tmp_path / "b.pt")]) == 0
    a, b = (torch.load(tmp_path / p, weights_only=True) for p in ("a.pt", "b.pt"))
    assert b["config"]["features"] == features
    assert all(torch.equal(a["network_state_dict"][k], v) for k, v in b["network_state_dict"].items())
