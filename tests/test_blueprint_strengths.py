"""lab/probes/blueprint_strengths.py: it plays a new blueprint at its own cost under a free Leyline name, leaves the registry
as it found it for the next plan, summarises rows per variant, and never replaces an earlier --out by accident."""

from esper.kasmina import blueprints as B
from esper.kasmina.model import MorphogeneticModel, _blueprint_cost
from esper.tasks.hosts import build_host

from conftest import load_script


def _strengths():
    return load_script("lab/probes/blueprint_strengths.py")


def test_a_new_blueprint_is_played_under_a_name_the_plan_does_not_use_at_its_own_cost():
    bs = _strengths()
    original = {fam: dict(specs) for fam, specs in B.BLUEPRINT_REGISTRY.items()}
    try:
        rule, alias = bs.install("global_mix+conv_small")
        assert (rule, alias) == ("concurrent:attention+conv_small", {"global_mix": "attention"})
        model = MorphogeneticModel(build_host("mnist1d_impaired", 1, 10, (40,)))
        model.germinate("block1", "attention")
        assert model.seed_param_count() == 508  # global_mix's cost after block 1, not attention's 76
        assert bs.install("conv_heavy+conv_small") == ("concurrent:conv_heavy+conv_small", {})
        assert B.BLUEPRINT_REGISTRY == original  # the next plan in the same worker sees the real registry
    finally:
        B.BLUEPRINT_REGISTRY.update(original)
        _blueprint_cost.cache_clear()


def test_the_summary_names_each_variants_winners_and_leads_over_a_different_play():
    bs = _strengths()
    row = lambda v, p, s, acc, n=1000: {"variant": v, "plan": p, "seed": s, "accuracy": acc, "params": n}
    rows = [row("a", "x", 0, 60.0), row("a", "x", 1, 62.0), row("a", "y", 0, 50.0), row("a", "y", 1, 50.0),
            row("a", "x+z", 0, 60.0), row("a", "x+z", 1, 62.0),  # z did not fit: the same play as x alone
            row("a", "y+z", 0, 70.0, 1500), row("a", "y+z", 1, 72.0, 1500),
            row("b", "x", 0, 40.0), row("b", "y", 0, 45.5)]
    s = bs.summarise(rows)
    a, b = s["a"], s["b"]
    assert (a["best"], a["runner_up"], a["lead"]) == ("y+z", "x", 10.0)
    assert (a["best_single"], a["single_runner_up"], a["single_lead"]) == ("x", "y", 11.0)
    assert (b["best"], b["lead"], b["best_single"]) == ("y", 5.5, "y")
    assert bs.table(s).splitlines()[2] == "| x | 61.0 (1,000) | 40.0 (1,000) |"
    assert bs.table(s).splitlines()[5] == "| y+z | **71.0 (1,500)** |  |"
    rows = [row("c", "x", 0, 60.0), row("c", "x+z", 0, 60.0)]
    assert bs.summarise(rows)["c"]["runner_up"] is None  # nothing played otherwise: no lead to claim


def test_an_existing_out_is_refused_without_overwrite(tmp_path, run_bench):
    out = tmp_path / "strengths.json"
    out.write_text("{}")
    p = run_bench("blueprint_strengths.py", "--out", str(out), cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith("exists: pass --overwrite to replace it")
    assert out.read_text() == "{}"


def test_an_episode_plays_on_the_registered_family_with_its_splits():
    "The probe's tasks are the registry's (train, validation and test splits): a short episode plants and scores."
    bs = _strengths()
    task = bs.variant_task("shuffled_b2500", 1000)
    assert (task.name, task.settings["shuffle_seq"], task.n_test > 0) == ("mnist1d", True, True)
    original = {fam: dict(specs) for fam, specs in B.BLUEPRINT_REGISTRY.items()}
    try:  # a plan installs its registry in the worker: put this process's back for the tests after this one
        row = bs.play(("digits8x8_b1500", "global_mix", 1000, 2, 2))
    finally:
        B.BLUEPRINT_REGISTRY.clear()
        B.BLUEPRINT_REGISTRY.update(original)
        _blueprint_cost.cache_clear()
    assert (row["variant"], row["plan"], row["seed"]) == ("digits8x8_b1500", "global_mix", 1000)
    assert row["params"] > 434 and "global_mix@" in row["grown"]  # planted under its own name, at its own cost
    assert 0.0 <= row["accuracy"] <= 100.0
