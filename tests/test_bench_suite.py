"""bench/bench_learning.py --suite on the `tiny` suite, end to end in one process: every arm on the same episodes, the
per-problem table read back from the episodes, the open-loop replay being the policy's own tune-seed plan, the
figures, the refusal of an earlier --out, and a --resume that plays nothing again."""
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import pytest

from esper.tamiyo.problems import TINY

BENCH = Path(__file__).resolve().parents[1] / "bench"
FLAGS = ["--suite", "tiny", "--train-suite", "tiny", "--curve-suite", "tiny", "--run-seeds", "0", "--episodes", "4",
         "--n-envs", "2", "--tune-seeds", "1000", "--test-seeds", "2000", "2001", "--curve-seeds", "1001",
         "--eval-every", "2", "--workers", "1"]


def _bench():
    if str(BENCH) not in sys.path: sys.path.insert(0, str(BENCH))
    import bench_learning
    return bench_learning


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "out"
    assert _bench().main([*FLAGS, "--out", str(out)]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_every_file_is_written_with_commit_machine_and_versions(run):
    out, res = run
    for name in ("table.md", "paired.png", "scatter.png", "plans.png", "learning_curves.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "plans.png").read_bytes()[:4] == b"\x89PNG"
    c = res["config"]
    assert c["git_commit"] and c["torch"] and c["python"] and c["esper"] and c["numpy"] and c["cpu_count"] >= 1
    assert c["suite"]["name"] == "tiny" and [p["name"] for p in c["suite"]["problems"]] == list(TINY.names)
    assert (c["run_seeds"], c["tune_seeds"], c["test_seeds"]) == ([0], [1000], [2000, 2001])
    searched = [e for e in res["episodes"] if e.get("phase") == "plan search"]
    assert len(searched) == sum(len(m) for m in res["headroom"]["tune_means"].values())  # every plan, one tune seed
    assert {e["seed"] for e in searched} == {1000}


def test_the_table_has_a_row_per_problem_read_from_the_episodes(run):
    _, res = run
    eps, s = res["episodes"], res["summary"]
    assert [r["problem"] for r in s["problems"]] == list(TINY.names)
    for row, h in zip(s["problems"], res["headroom"]["problems"]):
        p = row["problem"]
        ppo = [e["test_accuracy"] for e in eps if e["problem"] == p and e["controller"] == "ppo" and e["seed"] >= 2000]
        assert len(ppo) == 2 and row["ppo"] == pytest.approx(statistics.fmean(ppo))
        for arm in ("oracle", "greedy", "heuristic"):  # the rules as plan search scored them on the same seeds
            assert row[arm] == pytest.approx(h[arm]), (p, arm)
        assert row["best rule"] == pytest.approx(h["best single rule"])
        static = [e["test_accuracy"] for e in eps if e["problem"] == p and e["controller"] == "static"]
        assert row["static"] == pytest.approx(statistics.fmean(static))
        chosen = res["selector"]["plans"][p]  # tiny learns from tiny: each problem's own best plan on the tune seed
        assert row["selector_plan"] == chosen and chosen.startswith("plan:")
        played = [e["test_accuracy"] for e in eps
                  if e["problem"] == p and e["controller"] == chosen and e["seed"] >= 2000]
        assert len(played) == 2 and row["selector"] == pytest.approx(statistics.fmean(played))
    assert res["selector"]["train_suite"] == "tiny" and res["selector"]["plan_search_episodes"] == len(
        [e for e in eps if e.get("phase") == "plan search"])
    lines = res["table"].splitlines()
    head = lines[2].strip("| ").split(" | ")
    peer = ["maskable_ppo"] if "maskable_ppo" in s["arms"] else []  # where sb3-contrib is installed
    assert head == ["problem", "PPO", "run 0", "oracle", "best rule", "greedy", "heuristic", "static", "random",
                    "open-loop", "selector", *peer, "oracle plan"]
    body = [ln for ln in lines if ln.startswith(("| mnist1d-small |", "| digits-noisy |", "| **mean** |"))]
    assert len(body) == 3 and all(len(ln.split("|")) - 2 == len(head) for ln in body)
    if "maskable_ppo" not in s["arms"]:
        assert "MaskablePPO: skipped (sb3-contrib is not installed" in res["table"]
    assert [t["target"].split(" (")[0] for t in res["targets"]][3:] == [
        "PPO >= its open-loop replay + 1", "PPO >= the per-instance selector + 2, paired CI above 0",
        "PPO >= MaskablePPO",
        "explained variance >= 0.3 over the last quarter, every run seed",
        f"no head's entropy below 0.01 on a run seed that ends at or below {s['rule']}"]


def test_the_open_loop_replay_plays_the_policys_most_frequent_tune_plan(run):
    _, res = run
    eps = res["episodes"]
    for p in TINY.names:
        tune = [e["plan"] for e in eps if e["problem"] == p and e["controller"] == "ppo" and e["seed"] == 1000]
        replay = [e for e in eps if e["problem"] == p and e["controller"] == "open-loop"]
        assert len(tune) == 1 and len(replay) == 2
        assert {e["plan"] for e in replay} == {Counter(tune).most_common(1)[0][0]}
        assert {e["rule"] for e in replay} == {tune[0]}  # played as that plan, blind
    shares = res["plans"]
    assert sum(shares["digits-noisy"].values()) == 2  # one run seed x two test seeds


def test_an_earlier_out_is_refused_and_resume_plays_nothing_again(run, capsys):
    out, res = run
    with pytest.raises(SystemExit):
        _bench().main([*FLAGS, "--out", str(out)])
    assert "already holds an earlier benchmark" in capsys.readouterr().err
    plays, ppo = (out / "plays.jsonl").read_text(), (out / "seed0" / "episodes.jsonl").read_text()
    assert _bench().main([*FLAGS, "--out", str(out), "--resume"]) == 0
    assert (out / "plays.jsonl").read_text() == plays and (out / "seed0" / "episodes.jsonl").read_text() == ppo
    again = json.loads((out / "results.json").read_text())
    assert again["summary"]["means"] == res["summary"]["means"]
    first, parts = res["config"]["parts"], again["config"]["parts"]  # the resume is a second part of the same results
    assert len(first) == 1 and parts[0] == first[0] and len(parts) == 2
    assert [p["ended"] for p in parts] == ["complete", "complete"] and parts[1]["argv"][-1] == "--resume"
    assert again["config"]["wall_seconds_all_parts"] == pytest.approx(sum(p["wall_seconds"] for p in parts), abs=0.2)
    assert [json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()] == parts


def test_a_stopped_invocation_is_recorded_as_a_part(tmp_path, monkeypatch, capsys):
    bench = bench_suite = _bench()

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_suite, "play_all", stop)
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        bench.main([*FLAGS, "--out", str(out)])
    assert "interrupted" in capsys.readouterr().err
    parts = [json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()]
    assert len(parts) == 1 and parts[0]["ended"] == "stopped" and parts[0]["wall_seconds"] >= 0
    assert not (out / "results.json").exists()
    with pytest.raises(SystemExit):  # a --resume keeps the stopped part and adds its own
        bench.main([*FLAGS, "--out", str(out), "--resume"])
    assert [json.loads(line)["ended"] for line in (out / "parts.jsonl").read_text().splitlines()] == ["stopped"] * 2
    with open(out / "parts.jsonl", "a") as f:
        f.write("{not json\n")  # a damaged line: left out, with a note, and the other parts kept
    with pytest.raises(SystemExit):
        bench.main([*FLAGS, "--out", str(out), "--resume"])
    assert "1 line(s)" in capsys.readouterr().out
    assert [json.loads(line)["ended"] for line in (out / "parts.jsonl").read_text().splitlines()] == ["stopped"] * 3


def test_one_pool_of_two_workers_plays_the_same_episodes(run, tmp_path):
    "--workers 2 runs every job in one pool, the trainings first: the order changes, no episode does."
    _, res = run
    flags = [f if f != "1" or FLAGS[i - 1] != "--workers" else "2" for i, f in enumerate(FLAGS)]
    assert _bench().main([*flags, "--out", str(tmp_path / "two")]) == 0
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    strip = lambda eps: sorted(json.dumps({k: v for k, v in e.items() if k != "seconds"}, sort_keys=True) for e in eps)
    assert strip(two["episodes"]) == strip(res["episodes"])
    assert two["summary"] == res["summary"] and two["config"]["workers"] == 2


def test_a_job_is_kept_once_and_its_failure_raises_where_it_is_awaited():
    from concurrent.futures import ThreadPoolExecutor

    from esper.simic.trainers.job_pool import when_done
    calls = []
    with ThreadPoolExecutor(1) as pool:
        ensure = when_done(pool.submit(lambda: 3), calls.append)
        ensure(), ensure()
        assert calls == [3]  # once, whether the pool's thread or ensure() came first
        failed = when_done(pool.submit(lambda: 1 / 0), calls.append)
        with pytest.raises(ZeroDivisionError):
            failed()
    assert calls == [3]


@pytest.mark.parametrize("flags, line", [
    (["--train-suite", "train"], "give suites of one menu"),
    (["--tune-seeds", "2000"], "nothing may be chosen on a reporting seed"),
    (["--suite", "nope"], "unknown suite 'nope'"),
    (["--reuse-episodes", "missing.json"], "--reuse-episodes missing.json: not a results.json with its episodes"),
])
def test_bad_suite_flags_end_in_one_line_before_any_work(tmp_path, capsys, flags, line):
    with pytest.raises(SystemExit):
        _bench().main([*FLAGS, *flags, "--out", str(tmp_path / "o")])
    assert line in capsys.readouterr().err
    assert not (tmp_path / "o" / "plays.jsonl").exists()


def test_an_ablation_reuses_the_rules_episodes_of_an_earlier_run(run, tmp_path, capsys):
    "--reuse-episodes writes an earlier run's rule episodes into plays.jsonl first: only the policies play anew."
    out, res = run
    rules = [e for e in res["episodes"] if "run_seed" not in e]
    assert rules and len(rules) < len(res["episodes"])  # the policies' and their replays' rows are left out
    bench, new = _bench(), tmp_path / "ablation"
    assert bench.main([*FLAGS, "--features", "signals", "--out", str(new), "--reuse-episodes",
                       str(out / "results.json")]) == 0
    assert f"reused {len(rules)} rules' episodes" in capsys.readouterr().out
    lines = [json.loads(line) for line in (new / "plays.jsonl").read_text().splitlines()]
    again = json.loads((new / "results.json").read_text())
    replays = {e["key"] for e in again["episodes"] if e["controller"] == "open-loop"}
    assert lines[:len(rules)] == rules  # written first; a rule's episode played again would be added below them
    assert all(e["key"] in replays for e in lines[len(rules):])  # only the new policies' open-loop plans were played
    rule_means = lambda r: {k: v for k, v in r["summary"]["means"].items() if k not in ("ppo", "open-loop")}
    assert rule_means(again) == rule_means(res) and again["config"]["argv"][-2] == "--reuse-episodes"
    with pytest.raises(SystemExit):  # without --suite it would change nothing: refused
        bench.main(["--preset", "short", "--out", str(tmp_path / "x"), "--reuse-episodes", str(out / "results.json")])
    assert "--reuse-episodes works with --suite only" in capsys.readouterr().err


class _FakeVecNormalize:
    "Stands in for stable-baselines3's VecNormalize: observations pass through unchanged."
    def __init__(self, venv, **kw): self.venv, self.training = venv, True
    def normalize_obs(self, obs): return obs


class _FakeMaskablePPO:
    "Stands in for sb3-contrib's MaskablePPO: learns nothing, always picks each head's first allowed action."
    made = []
    def __init__(self, policy, venv, **kw): self.kw, self.learned, self.venv = kw, None, venv; self.made.append(self)
    def learn(self, total_timesteps): self.learned = total_timesteps
    def predict(self, obs, deterministic, action_masks):
        import numpy as np
        assert deterministic and obs.shape[0] == 1
        return np.array([[int(np.argmax(m)) for m in _FakeMaskablePPO.split(action_masks[0])]]), None
    split = None


def test_the_peer_trains_on_the_train_suite_and_plays_each_problem_greedily(monkeypatch):
    "MaskablePPO's wiring, with sb3 stand-ins (it is an optional dependency): its rows are the table's column."
    import types
    import numpy as np
    from esper.simic.envs.gym_env import GrowthEnv
    from esper.simic.trainers import suite_peer  # before the stand-ins: it asks whether sb3-contrib is installed
    sizes = GrowthEnv(suite="tiny").action_space.nvec
    _FakeMaskablePPO.split = staticmethod(lambda m: np.split(m, np.cumsum(sizes)[:-1]))
    monkeypatch.setitem(sys.modules, "sb3_contrib", types.SimpleNamespace(MaskablePPO=_FakeMaskablePPO))
    vec = types.SimpleNamespace(DummyVecEnv=lambda fns: [f() for f in fns], VecNormalize=_FakeVecNormalize)
    monkeypatch.setitem(sys.modules, "stable_baselines3.common.vec_env", vec)
    setup = {"suite": "tiny", "train_suite": "tiny", "episodes": 4, "rent_weight": None, "contribution_weight": None,
             "unkept_weight": None}
    rows = suite_peer.maskable_job(3, setup, ["digits-noisy"], [2000, 2001])
    assert [(r["problem"], r["controller"], r["run_seed"], r["seed"]) for r in rows] == [
        ("digits-noisy", "maskable_ppo", 3, 2000), ("digits-noisy", "maskable_ppo", 3, 2001)]
    assert all(0 <= r["test_accuracy"] <= 100 for r in rows)
    assert _FakeMaskablePPO.made[-1].venv.venv[0].features == "signals"  # a setup without PPO settings
    suite_peer.maskable_job(3, setup | {"ppo": {"features": "run"}}, ["digits-noisy"], [2000])
    env = _FakeMaskablePPO.made[-1].venv.venv[0]  # the peer reads what the PPO policies read
    assert env.features == "run"
    assert env.observation_space.shape == GrowthEnv(suite="tiny", features="run").observation_space.shape


def test_suites_whose_hosts_have_other_slots(capsys, monkeypatch):
    """A judged suite may grow seeds in fewer slots (the policies then read the train suite's layout); in a slot no
    train problem has, it is refused in one line before any work."""
    import dataclasses
    from esper.tamiyo.problems import SUITES, Suite
    bench = _bench()
    narrow = Suite("tiny-narrow", 1, tuple(dataclasses.replace(p, slots=("block1",)) for p in TINY.problems))
    monkeypatch.setitem(SUITES, "tiny-narrow", narrow)  # the same problems, seeds in one slot only
    same = bench.resolve_args(bench.build_parser(), [*FLAGS, "--out", "unused"])
    assert "slot_layout" not in same.ppo_settings  # one layout: nothing changes
    args = bench.resolve_args(bench.build_parser(), [*FLAGS, "--suite", "tiny-narrow", "--out", "unused"])
    assert args.ppo_settings["slot_layout"] == ("block1", "block2")
    with pytest.raises(SystemExit):
        bench.resolve_args(bench.build_parser(), [*FLAGS, "--train-suite", "tiny-narrow", "--out", "unused"])
    err = capsys.readouterr().err
    assert "--suite tiny: problem 'mnist1d-small' grows seeds in slots ['block2'] that no problem of" in err


def test_the_peers_cache_key_holds_every_setting_its_training_read():
    "Issue 76: at 4a970d9 a second run with other reward weights reported the first run's cached peer rows."
    from esper.simic.trainers.suite_peer import peer_key
    bl = _bench()

    args = bl.resolve_args(bl.build_parser(), [*FLAGS, "--out", "unused"])
    setup = bl.make_setup(args)
    problem = TINY.problems[0]
    key = peer_key(problem, 0, 2000, setup)
    assert key == peer_key(problem, 0, 2000, dict(setup))  # the same settings, the same key
    assert key.startswith(f"{problem.key}|maskable_ppo|0|2000|")
    for change in ({"rent_weight": 5.0}, {"contribution_weight": 2.0}, {"episodes": setup["episodes"] + 1},
                   {"ppo": {**setup["ppo"], "features": "run-data"}}, {"train_suite": "small-train"}):
        assert peer_key(problem, 0, 2000, setup | change) != key, change


def test_a_killed_invocation_is_accounted_for_up_to_its_heartbeat(tmp_path, monkeypatch, capsys):
    "At 4a970d9 a run killed by SIGKILL was missing from parts.jsonl, so the seconds in all came out low."
    bench = bench_suite = _bench()

    out, seen = tmp_path / "out", []

    def killed(*a, **k):  # what parts.jsonl holds while the run works: this part, running
        seen.append([json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()])
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_suite, "play_all", killed)
    with pytest.raises(SystemExit):
        bench.main([*FLAGS, "--out", str(out)])
    assert [p["ended"] for p in seen[0]] == ["running"]
    (out / "parts.jsonl").write_text(json.dumps(seen[0][0] | {"wall_seconds": 41.5}) + "\n")  # as SIGKILL leaves it
    capsys.readouterr()
    with pytest.raises(SystemExit):
        bench.main([*FLAGS, "--out", str(out), "--resume"])
    assert "1 earlier part(s)" in capsys.readouterr().out
    parts = [json.loads(line) for line in (out / "parts.jsonl").read_text().splitlines()]
    assert [p["ended"] for p in parts] == ["killed", "stopped"] and parts[0]["wall_seconds"] == 41.5


def test_damaged_rows_of_the_episode_caches_are_played_again_with_a_note(run, tmp_path, capsys):
    "A resume over plays.jsonl and a seed's episodes.jsonl with lines that are not rows: each is skipped, named."
    import shutil

    out = tmp_path / "out"
    shutil.copytree(run[0], out)
    for name in ("plays.jsonl", "seed0/episodes.jsonl"):
        with open(out / name, "a") as f:
            f.write('{"no": "key"}\n[1, 2]\n{"key": "x", "problem": "mnist1d-small"}\n{torn')
    capsys.readouterr()
    assert _bench().main([*FLAGS, "--out", str(out), "--resume"]) == 0
    said = "".join(capsys.readouterr())
    assert f"{out / 'plays.jsonl'} line" in said and f"{out / 'seed0' / 'episodes.jsonl'} line" in said
    again = json.loads((out / "results.json").read_text())
    assert again["summary"]["means"] == run[1]["summary"]["means"]


def test_each_run_seed_leaves_its_policy_alone_which_plays_its_episodes_again(run):
    "seed<k>/policy.pt: the weights without the optimiser, small enough to commit, and it plays the same episodes."
    import torch
    from esper.simic.envs.env import load_ppo_controller
    from esper.tamiyo import suite_report as sb
    out, res = run
    policy, checkpoint = out / "seed0" / "policy.pt", out / "seed0" / "agent.pt"
    assert torch.load(policy, weights_only=True)["optimizer_state_dict"] is None
    assert policy.stat().st_size < checkpoint.stat().st_size
    row = next(e for e in res["episodes"] if e["controller"] == "ppo" and e["seed"] == 2000)
    again = sb.play_policy(load_ppo_controller(str(policy)), TINY, TINY[row["problem"]], 2000)
    assert (again["test_accuracy"], again["plan"]) == (row["test_accuracy"], row["plan"])
