"""lab/probes/mixed_failures.py on two tiny problems on which different blueprints fail: the arms are chosen on the
tune seeds and played on the test seeds, each episode by its own kind; the `anyslot` variant replants at once in
another slot; a rerun plays nothing (the cache); an earlier --out is never replaced by accident; bad seeds end in one
line."""
import json
from dataclasses import replace

import pytest

from conftest import load_script

ARGS = ["--tune-seeds", "1004", "1006", "--test-seeds", "2000", "2001"]  # 1006 and 2001 fail, 1004 and 2000 do not


def _probe(monkeypatch):
    "The probe, its problems and rules made tiny: `global_mix` fails on one problem, `conv_small` on the other."
    module = load_script("lab/probes/mixed_failures.py", "mixed_failures_probe")  # it imports selector.py beside it
    from esper.tamiyo.events import SeedFailure
    from esper.tamiyo.problems import TINY

    fails = lambda name, b: replace(TINY[name], name=f"{name}-{b}", event=SeedFailure((b,), 0.5))
    monkeypatch.setattr(module, "PROBLEMS", {"global_mix fails": (fails("digits-noisy", "global_mix"),),
                                             "local blueprints fail": (fails("mnist1d-small", "conv_small"),)})
    monkeypatch.setattr(module, "RULE_PLANS", ("global_mix@block1/1", "conv_small@block1/1"))
    monkeypatch.setattr(module, "FALLBACKS", ("conv_small,global_mix",))
    return module


def test_two_tiny_problems_end_to_end(tmp_path, capsys, monkeypatch):
    probe = _probe(monkeypatch)
    args = ARGS + ["--cache", str(tmp_path / "plays.jsonl"), "--out", str(tmp_path / "out")]
    probe.main(args)
    assert "Rules with one setting" in capsys.readouterr().out
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sorted(r["tune_means"]) == sorted(probe.rules()) and len(r["tune_means"]) == 4
    for kind in probe.KINDS:  # each kind's one setting is its best mean over both problems on the tune seeds
        mine = {k: v for k, v in r["tune_means"].items() if k.startswith(kind + ":")}
        assert r["chosen"][kind] == max(mine, key=mine.get)
    c = r["choice"]["digits-noisy-global_mix"]
    assert c["open-loop oracle"][0] == c["open-loop oracle"][1] and c["hindsight oracle"][0].startswith("plan:")
    ep = r["episodes"]
    for arm, per in r["per_problem"].items():
        assert per == {a: (ep[a][f"{arm}|2000"] + ep[a][f"{arm}|2001"]) / 2 for a in per}
    m, fmt = r["means"], lambda a, p, s: ep[a][f"{p}|{s}"]
    assert m["hindsight oracle"]["all problems"]["fails"] == pytest.approx(
        (fmt("hindsight oracle", "digits-noisy-global_mix", 2001) + fmt("hindsight oracle", "mnist1d-small-conv_small",
                                                                        2001)) / 2)
    assert m["open-loop oracle"]["global_mix fails"]["sound"] == fmt("open-loop oracle", "digits-noisy-global_mix",
                                                                     2000)
    d = r["paired"]["hindsight oracle less open-loop oracle"]["all problems"]["all"][0]
    everywhere = {a: m[a]["all problems"]["all"] for a in ("hindsight oracle", "open-loop oracle")}
    assert d == pytest.approx(everywhere["hindsight oracle"] - everywhere["open-loop oracle"])
    assert r["best_one_setting"] in ("replant rule, one setting", "anyslot rule, one setting")
    text = json.dumps(r)
    assert f'"{tmp_path}' not in text and f" {tmp_path}" not in text  # relative paths
    with pytest.raises(SystemExit):
        probe.main(args)  # --out holds the first run's results
    assert "already holds an earlier run's results" in capsys.readouterr().err
    probe.main(args + ["--overwrite"])
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    assert again["episodes_played"] == 0 and again["means"] == r["means"]


def test_anyslot_replants_at_once_in_another_slot(monkeypatch):
    "A dud is pruned after its first epoch and the fallback grows in another, free slot at the next decision."
    probe = _probe(monkeypatch)
    from esper.tamiyo.episode import run_episode
    from esper.tamiyo.problems import TINY

    p = replace(TINY["mnist1d-small"], max_epochs=5)
    from esper.tamiyo.events import FailingTask

    task = FailingTask.of(p.load_task(0), ("conv_small",))
    r = run_episode(task, probe.AnySlotTamiyo("conv_small@block1/1", "conv_small,global_mix"), None, 0, problem=p)
    moves = [(x["epoch"], x["slot_id"], x["blueprint"], x["to"]) for x in r.lifecycle_log
             if x["to"] in ("PRUNED", "GERMINATED")]
    (_, first, *_), (_, pruned, *_), (_, other, *_) = moves[:3]
    assert [(m[0], m[3]) for m in moves[:3]] == [(1, "GERMINATED"), (2, "PRUNED"), (3, "GERMINATED")]
    assert [m[2] for m in moves[:3]] == ["conv_small", "conv_small", "global_mix"]  # the failed blueprint is skipped
    assert first == pruned != other  # not the pruned slot, which is under its embargo


@pytest.mark.parametrize("flags, message", [
    (["--tune-seeds", "1004", "1005", "--test-seeds", "2000", "2001"], "--tune-seeds: give seeds on which"),
    (["--tune-seeds", "1004", "1006", "--test-seeds", "2001"], "--test-seeds: give seeds on which"),
    (["--tune-seeds", "1004", "1006", "--test-seeds", "1006", "2000"], "must not share a seed"),
])
def test_bad_seeds_end_in_one_line(tmp_path, capsys, monkeypatch, flags, message):
    with pytest.raises(SystemExit):
        _probe(monkeypatch).main(flags + ["--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.jsonl").exists()
