"""lab/probes/suite_ablations.py: a policy beside its ablation and the selector, paired by cell, on made-up runs."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "probes"))
import suite_ablations as sa

CONFIG = {"suite": {"name": "mini", "version": 1}, "train_suite": "t", "test_seeds": [7, 8], "run_seeds": [0, 1],
          "episodes": 16, "tune_seeds": [1]}


def ep(controller, seed, acc, **kw):
    return {"problem": "p", "controller": controller, "seed": seed, "test_accuracy": acc, **kw}


def run(features, ppo, selector_plan=None):
    "One benchmark run: PPO's two run seeds on seeds 7 and 8 (`ppo`: run seed -> (acc 7, acc 8)) and the rules."
    eps = [ep("ppo", s, a, run_seed=r) for r, accs in ppo.items() for s, a in zip((7, 8), accs)]
    eps += [ep("open-loop", s, a - 1, run_seed=r) for r, accs in ppo.items() for s, a in zip((7, 8), accs)]
    eps += [ep("greedy", 7, 55.0), ep("greedy", 8, 45.0), ep("plan:A", 7, 50.0), ep("plan:A", 8, 40.0),
            ep("plan:B", 7, 59.0), ep("plan:B", 8, 49.0), ep("plan:A", 1, 99.0, phase="plan search"),
            ep("ppo", 1, 99.0, run_seed=0)]  # a tune seed: neither counts
    problem = {"problem": "p", "best_rule_plan": "plan:A", "oracle_plan": "plan:B"}
    problem |= {"selector_plan": selector_plan} if selector_plan else {}
    return {"config": CONFIG | {"argv": ["--features", features]}, "summary": {"problems": [problem]}, "episodes": eps}


def write(tmp_path, name, obj):
    (tmp_path / name).write_text(json.dumps(obj))
    return str(tmp_path / name)


def test_side_by_side(tmp_path, capsys):
    full = write(tmp_path, "full.json", run("run-data", {0: (60.0, 50.0), 1: (62.0, 52.0)}))
    abl = write(tmp_path, "abl.json", run("run", {0: (58.0, 48.0), 1: (60.0, 50.0)}, selector_plan="plan:B"))
    out = tmp_path / "out"
    assert sa.main(["--bench", full, "--ablation", f"run={abl}", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert r["selector_from"] == "played in the `run` run"
    assert r["rivals"] == {"selector": 54.0, "greedy": 50.0, "best rule": 45.0}
    assert r["full_less"]["run"] == {"mean": 2.0, "ci95": 0.0, "n": 2, "run_seeds": [0, 1]}
    f, a = r["policies"]["full"], r["policies"]["run"]
    assert (f["features"], f["mean"], f["run_seeds"]) == ("run-data", 56.0, {"0": 55.0, "1": 57.0})
    assert f["less"]["selector"]["mean"] == 2.0 and a["less"]["selector"]["mean"] == 0.0
    assert a["less"]["open-loop"]["mean"] == 1.0 and a["less"]["greedy"]["mean"] == 4.0
    assert "| run | `run` | 54.0 | 53.0, 55.0 | +0.00 ± 0.00 | +1.00 ± 0.00 | +4.00 ± 0.00 | +9.00 ± 0.00 |" in \
        (out / "results.md").read_text()
    assert "less the `run` ablation: +2.00 ± 0.00 (2 pairs; both on run seeds 0, 1)" in capsys.readouterr().out
    given = {"problems": [{"problem": "p", "variants": {"whole": {"plan": "A"}}}],  # selector.py's results
             "episodes": [ep("plan:A", 7, 50.0), ep("plan:A", 8, 40.0)]}
    out2 = tmp_path / "out2"
    assert sa.main(["--bench", full, "--ablation", f"run={abl}", "--selector", write(tmp_path, "sel.json", given),
                    "--out", str(out2)]) == 0
    r = json.loads((out2 / "results.json").read_text())
    assert r["selector_from"] == "lab/probes/selector.py's `whole` variant" and r["rivals"]["selector"] == 45.0


def test_an_ablation_of_some_run_seeds(tmp_path):
    "An ablation that trained run seed 1 alone is paired with the full policy's run seed 1, not its mean of two."
    full = write(tmp_path, "full.json", run("run-data", {0: (60.0, 50.0), 1: (64.0, 56.0)}))
    one = run("signals", {1: (61.0, 52.0)}, selector_plan="plan:B")
    one["config"] = one["config"] | {"run_seeds": [1]}
    out = tmp_path / "out"
    one = write(tmp_path, "one.json", one)
    assert sa.main(["--bench", full, "--ablation", f"signals={one}", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert r["full_less"]["signals"] == {"mean": 3.5, "ci95": pytest.approx(6.35, abs=0.01), "n": 2, "run_seeds": [1]}
    assert r["policies"]["full"]["mean"] == 57.5 and r["policies"]["signals"]["run_seeds"] == {"1": 56.5}


def test_refusals_in_one_line(tmp_path, capsys):
    full = write(tmp_path, "full.json", run("run-data", {0: (60.0, 50.0), 1: (62.0, 52.0)}))
    other = run("run", {0: (58.0, 48.0), 1: (60.0, 50.0)})
    other["config"]["episodes"] = 32
    longer = write(tmp_path, "longer.json", other)
    plain = write(tmp_path, "plain.json", run("run", {0: (58.0, 48.0), 1: (60.0, 50.0)}))
    more = run("run", {0: (58.0, 48.0), 2: (60.0, 50.0)})
    more["config"] = more["config"] | {"run_seeds": [0, 2]}
    more = write(tmp_path, "more.json", more)
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "results.json").write_text("{}")
    for args, says in ((["--ablation", f"run={longer}"], "differs from --bench in episodes"),
                       (["--ablation", f"run={more}"], "trained run seed 2, which --bench did not"),
                       (["--ablation", plain], "--ablation takes NAME=FILE"),
                       (["--ablation", f"full={plain}"], "distinct and not 'full'"),
                       (["--ablation", f"run={plain}"], "no run played the selector: give --selector"),
                       (["--ablation", f"run={plain}", "--out", str(tmp_path / "done")], "holds an earlier run's")):
        argv = ["--bench", full, *args] + ([] if "--out" in args else ["--out", str(tmp_path / "o")])
        with pytest.raises(SystemExit) as e:
            sa.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and says in err[0], err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
