"""Settings are checked when a problem is made, not when it breaks (issue 76, "impossible settings accepted"): each
impossible problem is one line naming the problem and the field, and making a problem leaves the global random
generator as it was. At 4a970d9 each of these was accepted; the generator then crashed, an episode spent 100 times
its budget, or a plan search trained first and failed later with a traceback that named no problem."""
import pytest
import torch

from esper.tamiyo.problems import GrowthProblem

IMPOSSIBLE = [
    (dict(settings={"max_translation": 0}), "max_translation must be an integer in [1, 48] (got 0)"),
    (dict(compute_budget=0.01), "compute_budget must be a number of host epochs >= 1"),
    (dict(param_budget=500), "param_budget 500 is below the 914 parameters of its host 'mnist1d_impaired'"),
    (dict(slots=("block1", "block3")), "unknown slot(s) block3; host 'mnist1d_impaired' has: block1, block2"),
    (dict(task="digits", param_budget=400), "param_budget 400 is below the 434 parameters of its host 'digits_impaired'"),
    (dict(task="cifar10", host="cifar_resnet_impaired", slots=("block1",)), "host 'cifar_resnet_impaired' has: stage1"),
]


@pytest.mark.parametrize("kwargs, says", IMPOSSIBLE, ids=[next(iter(k)) + "-" + str(i) for i, (k, _) in enumerate(IMPOSSIBLE)])
def test_an_impossible_problem_is_refused_when_it_is_made(kwargs, says):
    with pytest.raises(ValueError) as e:
        GrowthProblem("bad", **kwargs)
    assert str(e.value).startswith("problem 'bad': ") and says in str(e.value) and "\n" not in str(e.value)


def test_making_a_problem_leaves_the_random_generator_alone():
    torch.manual_seed(0)
    GrowthProblem("fine", param_budget=2000, slots=("block2",))
    after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(3))
