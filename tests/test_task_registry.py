"""The task registry end to end: a family registered in-process (random signals) loads through `get_task` with its
three splits and its settings checked, and an episode plays on it and reports the test split."""
import pytest
import torch

from esper.tamiyo import StaticTamiyo, run_episode
from esper.tasks import TASK_FAMILIES, TASK_NAMES, Setting, Splits, TaskFamily, get_task, register_task, split_sizes
from esper.tamiyo.problems import GrowthProblem


def load_signs(cfg, settings):
    "Random signals of length 16 whose label is the sign of their mean; the last 40 rows are the test split."
    g = torch.Generator().manual_seed(cfg.data_seed)
    x = torch.randn(settings["rows"] + 40, 1, 16, generator=g) + settings["shift"]
    y = (x.mean((1, 2)) > settings["shift"]).long()
    n_train, _ = split_sizes(settings["rows"], cfg.val_fraction)
    rows = settings["rows"]
    return Splits((x[:n_train], y[:n_train]), (x[n_train:rows], y[n_train:rows]), (x[rows:], y[rows:]), 2)


SIGNS = TaskFamily("signs", load_signs, input_dims=1, default_host="mnist1d_impaired",
                   settings={"rows": Setting(200, "training and validation rows", 50, 2000),
                             "shift": Setting(0.0, "added to every value", -1.0, 1.0)},
                   description="random signals labelled by the sign of their mean")


@pytest.fixture
def signs():
    register_task(SIGNS)
    yield SIGNS
    del TASK_FAMILIES["signs"]


def test_a_registered_family_loads_through_get_task(signs):
    assert "signs" in TASK_NAMES
    t = get_task("signs", seed=1000)
    assert (t.n_train, t.n_val, t.n_test, t.input_shape, t.n_classes) == (160, 40, 40, (1, 16), 2)
    assert t.default_host == "mnist1d_impaired" and t.settings == {"rows": 200, "shift": 0.0}
    assert t.config.data_seed == 1000  # a held-out seed: data of its own
    assert get_task("signs", settings={"shift": 1}).settings["shift"] == 1.0


@pytest.mark.parametrize("settings, line", [
    ({"rows": 10}, "task 'signs': rows must be an integer in [50, 2000] (got 10)"),
    ({"shift": "up"}, "task 'signs': shift must be a number in [-1.0, 1.0] (got 'up')"),
    ({"width": 3}, "task 'signs' has no setting 'width' (its settings: rows, shift)"),
])
def test_bad_settings_are_one_line_naming_the_field_and_the_allowed_values(signs, settings, line):
    with pytest.raises(ValueError) as err:
        get_task("signs", settings=settings)
    assert str(err.value) == line


def test_an_episode_on_a_registered_family_reports_the_test_split(signs):
    task = get_task("signs", seed=3)
    r = run_episode(task, StaticTamiyo(), seed=3, problem=GrowthProblem.of_task(task, max_epochs=2))
    assert r.epochs == 2 and r.final_val_accuracy == r.history[-1]["val_accuracy"]
    assert 0 <= r.final_accuracy <= 100 and r.final_accuracy * task.n_test / 100 == pytest.approx(
        round(r.final_accuracy * task.n_test / 100))  # a count of the 40 test rows
