"""The plan cache is not fragile (issue 76, "the plan cache is fragile"): a torn last line does not swallow the next
row, a line that is not a row is skipped with a one-line note naming the file and the line, a cache that cannot be
written is refused before an episode is played and lost, and a row is returned under the caller's problem name. Each
of these failed at 4a970d9 (a lost episode, KeyError/TypeError tracebacks, a PermissionError after the episode,
"seed 2000 was not played")."""
import json
from dataclasses import replace

import pytest

from esper.tamiyo.plan_search import Play, PlayCache, play, run_plays
from esper.tamiyo.problems import TINY

JOB = Play(TINY.problems[0], "static", 1000)


@pytest.fixture(scope="module")
def row():
    return play(JOB)


def test_a_torn_last_line_does_not_swallow_the_next_row(row, tmp_path):
    path = tmp_path / "plays.jsonl"
    path.write_text(json.dumps(row)[:50])  # a killed run's half line
    PlayCache(path).add(row)
    assert list(PlayCache(path).rows) == [JOB.key]


@pytest.mark.parametrize("line", [[1, 2], {"problem": "x"}, "row-without-key", None], ids=["list", "no-key", "str", "null"])
def test_a_line_that_is_not_a_row_is_skipped_with_a_note(line, row, tmp_path, capsys):
    path = tmp_path / "plays.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(row) + "\n")
    assert list(PlayCache(path).rows) == [JOB.key]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path} line 1 skipped" in err[0], err


def test_a_row_without_its_test_accuracy_is_played_again(row, tmp_path, capsys):
    path = tmp_path / "plays.jsonl"
    path.write_text(json.dumps({k: v for k, v in row.items() if k != "test_accuracy"}) + "\n")
    cache = PlayCache(path)
    assert JOB not in cache and "no valid test_accuracy" in capsys.readouterr().err
    assert run_plays([JOB], cache)[0]["test_accuracy"] == row["test_accuracy"]


def test_an_unwritable_cache_is_refused_before_any_episode(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(PermissionError, match="cache: .* cannot be written"):
        PlayCache(tmp_path / "afile" / "plays.jsonl")


def test_a_row_comes_back_under_the_callers_problem_name(row, tmp_path):
    cache = PlayCache(tmp_path / "plays.jsonl")
    cache.add(row)
    renamed = Play(replace(JOB.problem, name="the same problem, renamed"), "static", 1000)
    assert run_plays([renamed], cache)[0]["problem"] == "the same problem, renamed"
