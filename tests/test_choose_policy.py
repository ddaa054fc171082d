"""lab/probes/choose_policy.py on a tiny benchmark run with --keep-policies: the kept policies, the choice, its refusals."""
import json
from pathlib import Path

import torch

from test_bench_learning import TINY, _bench_module


def test_choose_takes_the_best_validation_score_and_the_latest_of_equals():
    choose = _bench_module("choose_policy").choose
    assert choose({"p/episode0002.pt": 80.0, "p/episode0004.pt": 81.5, "p/episode0006.pt": 79.0}) == "p/episode0004.pt"
    assert choose({"p/episode0002.pt": 81.5, "p/episode0004.pt": 80.0, "p/episode0006.pt": 81.5}) == "p/episode0006.pt"


def test_kept_policies_are_played_on_validation_seeds_and_the_choice_held_out(tmp_path, run_bench):
    out = tmp_path / "bl"
    p = run_bench("bench_learning.py", *TINY, "--keep-policies", "--out", str(out), cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for k in (0, 1):  # one policy per learning-curve evaluation; the last is the seed's final policy
        kept = sorted(p.name for p in (out / f"seed{k}" / "policies").iterdir())
        assert kept == ["episode0002.pt", "episode0004.pt"], kept
        last = torch.load(out / f"seed{k}" / "policies" / kept[-1], weights_only=True)["network_state_dict"]
        final = torch.load(out / f"seed{k}" / "agent.pt", weights_only=True)["network_state_dict"]
        assert all(torch.equal(last[n], final[n]) for n in final)
    p = run_bench("choose_policy.py", "--run", str(out), "--validation-seeds", "1005", "1006", "--workers", "2",
                  cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "choose_policy.json").read_text())
    assert report["eval_seeds"] == [2000, 2001] and report["validation_seeds"] == [1005, 1006]
    assert len(report["validation"]) == 2 * 2 * 2 and len(report["held_out"]) == 2 * 2  # policies x seeds
    for row in report["per_seed"]:
        mine = {n: s for n, s in report["scores"].items() if n.startswith(f"seed{row['train_seed']}/policies/")}
        assert row["chosen_validation"] == max(mine.values()) and row["chosen"] in {Path(n).name for n in mine}
        assert f"run seed {row['train_seed']}: last policy" in p.stdout
    refused = run_bench("choose_policy.py", "--run", str(out), "--validation-seeds", "1000", cwd=tmp_path, timeout=60)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "--validation-seeds [1000] are task seeds the run" in refused.stderr  # the run's curve seed
    (tmp_path / "plain").mkdir()
    missing = run_bench("choose_policy.py", "--run", str(tmp_path / "plain"), cwd=tmp_path, timeout=60)
    assert missing.returncode == 2 and "cannot read a finished benchmark's results.json" in missing.stderr
    (out / "seed1" / "policies" / "episode0002.pt").write_text("cut short")  # a kept policy that cannot be loaded
    broken = run_bench("choose_policy.py", "--run", str(out), "--validation-seeds", "1005", cwd=tmp_path, timeout=120)
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1, broken.stderr
    assert "cannot load kept policy" in broken.stderr and "episode0002.pt" in broken.stderr
