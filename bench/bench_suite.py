"""The suite benchmark, `bench_learning.py --suite NAME`: policies trained on a suite, judged on another's problems.

Each run seed trains one PPO policy on --train-suite (its learning curve: greedy episodes on the --curve-suite
problems x --curve-seeds). Then on every problem of --suite, on the same episode seeds: each policy greedily (on the
tune seeds, which choose its open-loop replay, and the test seeds, which report), the oracle and the best single rule
(chosen on the tune seeds by `plan_search.search`), the greedy rule, the heuristic, static, random, each policy's
open-loop replay (its most frequent plan on the problem's tune seeds, played blind on the test seeds) and, where
sb3-contrib is installed, MaskablePPO trained on the same suite and budget through `GrowthEnv`. The tables, paired
comparisons and targets come from `esper.tamiyo.suite_report`.

Every job runs in one pool of --workers processes, the longest first: each run seed's training and the peer's are
queued before the plan search's episodes, so the episodes fill the workers that no training holds and no core
waits while a job is left (with --workers 1, everything in this process, one job after another). Each episode is
seeded on its own, so the order changes no result.

Written under --out: results.json (config with commit, machine and versions; the headroom report; the summary; the
targets; every episode), table.md, paired.png, scatter.png, plans.png, learning_curves.png; seed<k>/ per run seed
(checkpoint, history, and episodes.jsonl: its evaluation episodes); plays.jsonl, every rule's episode (a cache:
--resume and --overwrite keep it); parts.jsonl, one line per invocation that worked on these results (its start,
seconds, commit, flags and how it ended: complete, stopped or failed), also written when one is stopped; a
--resume adds to it, anything else starts it again. results.json's config lists the parts and their seconds in all.
`make bench-suite`, or in seconds on the `tiny` suite:
    python bench/bench_learning.py --suite tiny --train-suite tiny --curve-suite tiny --run-seeds 0 --episodes 4 \\
        --n-envs 2 --tune-seeds 1000 --test-seeds 2000 --curve-seeds 1000 --eval-every 2 --workers 2 --out /tmp/bs
"""
import argparse
import dataclasses
import hashlib
import json
import importlib.util
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

import esper
from bench_learning import (PARTS_FILE, SUITE_FILES, earlier_parts, make_setup, part_of, parts_text, png, reward_config,
                            run_as_part, run_config, seed_summary, train_job)
from esper.leyline.files import json_text, relative_paths, write_files_atomic
from esper.simic.envs.env import load_ppo_controller
from esper.simic.envs.parallel_env_state import EpisodeSpec, problem_slots
from esper.tamiyo.features import policy_layout, union_layout
from esper.tamiyo import suite_report as sb
from esper.tamiyo.plan_search import Play, PlayCache, as_played, plan_controllers, run_plays, search
from esper.tamiyo.problems import SUITES, get_suite
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)
from esper.cli.runs import stoppable_pool
MASKABLE_SKIP = (None if importlib.util.find_spec("sb3_contrib") else
                 "MaskablePPO: skipped (sb3-contrib is not installed; `make bench-sb3` installs it).")


def check_suite_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, in one line and before any work, suites that do not exist, do not share a menu or grow seeds where the
    train suite never does, and shared seeds; where the suites' hosts have different slots, the policies read the
    train suite's slot layout (`ppo_settings['slot_layout']`)."""
    for flag in ("suite", "train_suite", "curve_suite"):
        if getattr(args, flag) not in SUITES:
            ap.error(f"--{flag.replace('_', '-')}: unknown suite {getattr(args, flag)!r}; "
                     f"choose one of: {', '.join(SUITES)}")
    if get_suite(args.train_suite).held_out and not args.train_on_held_out:
        ap.error(f"--train-suite {args.train_suite} is held out: the problems every table reports; training on it "
                 "spends them (pass --train-on-held-out to do it anyway)")
    menu = get_suite(args.train_suite).blueprints
    for flag in ("suite", "curve_suite"):
        other = get_suite(getattr(args, flag)).blueprints
        if other != menu:
            ap.error(f"--{flag.replace('_', '-')} {getattr(args, flag)} offers {', '.join(other)}; the policies "
                     f"train on --train-suite {args.train_suite}'s menu {', '.join(menu)}: give suites of one menu")
    try:  # one policy reads the train suite's slots: a problem with another would fail hours into the run
        hosts = {flag: problem_slots(EpisodeSpec(get_suite(getattr(args, flag))), 0)
                 for flag in ("train_suite", "suite", "curve_suite")}
    except ValueError as e:
        ap.error(str(e))
    layout = union_layout(hosts["train_suite"].values())
    for flag in ("suite", "curve_suite"):
        for name, slots in hosts[flag].items():
            if unseen := [s for s in slots if s not in layout]:
                ap.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: problem {name!r} grows seeds in slots "
                         f"{unseen} that no problem of --train-suite {args.train_suite} has (its slots: "
                         f"{', '.join(layout)}); the policies never read them")
    if policy_layout({f"{k}:{n}": s for k, v in hosts.items() for n, s in v.items()}) is not None:
        args.ppo_settings["slot_layout"] = layout  # hosts differ: the policies read the train suite's layout
    both = sorted(set(args.tune_seeds) & set(args.eval_seeds))
    if both:
        ap.error(f"seeds {both} are both --tune-seeds and --test-seeds: nothing may be chosen on a reporting seed")


def checkpoint_digest(path: str) -> str:
    "A short fingerprint of a checkpoint: the key of its evaluation episodes, so a retrained policy plays again."
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def ppo_job(run_seed: int, checkpoint: str, problem: str, seeds: list[int], setup: dict[str, Any]) -> list[dict]:
    "Run seed `run_seed`'s policy, greedy, on one problem of the judged suite and each of `seeds`."
    torch.set_num_threads(1)
    suite, acts = get_suite(setup["suite"]), get_suite(setup["train_suite"])
    controller, p = load_ppo_controller(checkpoint), suite[problem]
    digest = checkpoint_digest(checkpoint)
    rows = [sb.play_policy(controller, acts, p, s) | {"run_seed": run_seed, "key": f"{p.key}|ppo|{s}|{digest}"}
            for s in seeds]
    return [r | {"params_in_all": r["params"]} for r in rows]  # the name bench_learning's seed summary reads


class _InProcess:
    "The pool's `map` and `submit` run in this process: --workers 1 spawns no worker (each would import torch)."

    def map(self, fn, *iterables):
        return map(fn, *iterables)

    def submit(self, fn, *args):
        result = fn(*args)
        return type("Done", (), {"result": lambda self: result})()


def _when_done(future, fn):
    """Call `fn(result)` once, as soon as `future` has ended well (at once for `_InProcess`'s), from the pool's thread;
    returns `ensure()`, which makes sure it was called (waiting for it, or calling it) and raises if the job failed.
    The pool wakes a waiter on `.result()` before it runs the callbacks: `ensure` is what closes that gap."""
    lock, called = threading.Lock(), []

    def once(f):
        with lock:
            if not called:
                fn(f.result())
                called.append(True)

    if isinstance(future, Future):
        future.add_done_callback(lambda f: f.cancelled() or f.exception() is not None or once(f))
    else:
        once(future)
    return lambda: once(future)


def start_training(pool, args: argparse.Namespace, setup: dict[str, Any], progress) -> list:
    "Submit every run seed's training (a job each); each says when it ends."
    training = [pool.submit(train_job, k, setup) for k in args.train_seeds]
    for f in training:
        _when_done(f, lambda t: progress(f"trained run seed {t['train_seed']} in {t['train_seconds']:.0f} s"))
    return training


def play_trained(pool, training: list, args, setup, progress) -> tuple[list[dict], list[dict]]:
    "Each run seed's policy played on every problem as soon as it is trained; returns (trained runs, rows)."
    suite, seeds = get_suite(args.suite), list(args.tune_seeds) + list(args.eval_seeds)
    rows, trained, jobs = [], [], []
    for t in _as_completed(training):
        trained.append(t)
        k, cache = t["train_seed"], PlayCache(Path(args.out) / f"seed{t['train_seed']}" / "episodes.jsonl")
        digest = checkpoint_digest(t["checkpoint"])
        for p in suite.problems:
            keys = [f"{p.key}|ppo|{s}|{digest}" for s in seeds]
            if all(key in cache.rows for key in keys):  # a resumed run whose policy was played already
                rows += [cache.rows[key] for key in keys]
            else:
                jobs.append((cache, pool.submit(ppo_job, k, t["checkpoint"], p.name, seeds, setup)))
    for cache, job in jobs:
        played = job.result()
        for r in played:
            cache.add(r)
        rows += played
        progress(f"PPO run seed {played[0]['run_seed']} on {played[0]['problem']}: "
                 f"{statistics.fmean(r['test_accuracy'] for r in played):.1f}% (tune and test seeds)")
    return sorted(trained, key=lambda t: t["train_seed"]), rows


def _as_completed(futures: list) -> Iterator[Any]:
    "The results of `futures` in the order they finish (in submission order for `_InProcess`'s, done already)."
    if all(isinstance(f, Future) for f in futures):
        for f in as_completed(futures):
            yield f.result()
    else:
        for f in futures:
            yield f.result()


def open_loop_rows(args, ppo_rows: list[dict], cache: PlayCache, progress, pool=None) -> list[dict]:
    "Each policy's open-loop replay on every problem: its most frequent tune-seed plan, played on the test seeds."
    suite, chosen = get_suite(args.suite), {}
    for k in args.train_seeds:
        for p in suite.problems:
            tune = [r for r in ppo_rows
                    if r["run_seed"] == k and r["problem"] == p.name and r["seed"] in args.tune_seeds]
            chosen[k, p.name] = sb.open_loop_plan(sorted(tune, key=lambda r: r["seed"]))
    jobs = {key: [Play(suite[key[1]], plan, s) for s in args.eval_seeds] for key, plan in chosen.items()}
    played = run_plays([j for js in jobs.values() for j in js], cache, args.workers, on_row=progress_row(progress),
                       pool=pool)
    by_key = {r["key"]: r for r in played}
    return [by_key[j.key] | {"controller": "open-loop", "run_seed": k, "plan": plan, "rule": j.controller}
            for (k, name), js in jobs.items() for j in js for plan in [chosen[k, name]]]


def progress_row(progress):
    "`run_plays`'s on_row: a line per newly played episode."
    return lambda r: progress(f"{r['problem']} {r['controller']} seed {r['seed']}: {r['test_accuracy']:.1f}%")


def peer_key(problem: Any, run_seed: int, seed: int, setup: dict[str, Any]) -> str:
    "The peer's cache key: the problem, the run and task seeds, and every setting its training read (issue 76)."
    train, ppo = get_suite(setup["train_suite"]), setup.get("ppo", {})
    read = {"train_suite": [train.name, train.version], "episodes": setup["episodes"],
            "features": ppo.get("features", "signals"), "slot_layout": ppo.get("slot_layout"),
            "reward": dataclasses.asdict(reward_config(setup))}
    digest = hashlib.sha256(json.dumps(read, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{problem.key}|maskable_ppo|{run_seed}|{seed}|{digest}"


def maskable_job(run_seed: int, setup: dict[str, Any], problems: list[str], seeds: list[int]) -> list[dict]:
    """The peer: sb3-contrib's MaskablePPO trained on --train-suite through `GrowthEnv` for the same episodes, reading
    the same features as the PPO policies, with bench_maskable_ppo.py's settings, then played greedily (its
    observation statistics frozen) on each problem."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from bench_maskable_ppo import N_ENVS, greedy
    from esper.simic.envs.gym_env import GrowthEnv
    from esper.tamiyo.problems import Suite

    torch.set_num_threads(1)
    train, judged, reward = get_suite(setup["train_suite"]), get_suite(setup["suite"]), reward_config(setup)
    layout = setup.get("ppo", {}).get("slot_layout")  # where the suites' hosts differ, the peer reads that layout
    features = setup.get("ppo", {}).get("features", "signals")  # and it reads what the PPO policies read
    steps = max(p.max_epochs for p in train.problems) - 1  # decisions of the longest episode
    make = lambda: GrowthEnv(suite=train, reward_config=reward, slot_layout=layout, features=features)
    venv = VecNormalize(DummyVecEnv([make] * N_ENVS), norm_obs=True, norm_reward=False, gamma=0.99)
    model = MaskablePPO("MlpPolicy", venv, n_steps=steps, batch_size=N_ENVS * steps, n_epochs=10, gamma=0.99,
                        ent_coef=0.01, policy_kwargs=dict(net_arch=[256, 256]), seed=run_seed, device="cpu", verbose=0)
    model.learn(total_timesteps=setup["episodes"] * steps)
    policy, rows = greedy(model, venv), []
    for name in problems:
        p = judged[name]
        env = GrowthEnv(suite=Suite(f"{judged.name}:{name}", judged.version, (p,)), reward_config=reward,
                        slot_layout=layout, features=features)
        for s in seeds:
            obs, info = env.reset(seed=s)
            done = False
            while not done:
                obs, _, term, trunc, info = env.step(policy(obs, env.action_masks()))
                done = term or trunc
            rows.append({"key": peer_key(p, run_seed, s, setup), "problem": name,
                         "controller": "maskable_ppo", "run_seed": run_seed, "seed": s,
                         "test_accuracy": info["final_accuracy"], "params_added": info["params_added"]})
    return rows


def start_peer(pool, args: argparse.Namespace, setup: dict[str, Any], progress):
    """Submit the peer's run seeds not yet played (each cached in maskable.jsonl as it ends); returns
    `finish() -> (rows, None)`, or, where the peer does not run, `finish() -> ([], the line that says why)`."""
    if MASKABLE_SKIP:
        return lambda: ([], MASKABLE_SKIP)
    if getattr(args, "no_peer", False):
        return lambda: ([], "MaskablePPO: skipped (--no-peer; a later --resume without it adds the peer).")
    suite = get_suite(args.suite)
    if any(p.blueprints != suite.blueprints for p in suite.problems):
        why = "MaskablePPO: skipped (its GrowthEnv plays one menu, and the problems of this suite differ)."
        return lambda: ([], why)
    cache = PlayCache(Path(args.out) / "maskable.jsonl")
    key = lambda p, k, s: peer_key(p, k, s, setup)  # the settings it trained with are part of the key
    todo = [k for k in args.train_seeds
            if not all(key(p, k, s) in cache.rows for p in suite.problems for s in args.eval_seeds)]
    def keep(played):  # each run seed's episodes are cached as it ends: a stop loses only the runs still going
        for r in played:
            cache.add(r)
        progress(f"MaskablePPO run seed {played[0]['run_seed']}: "
                 f"{statistics.fmean(r['test_accuracy'] for r in played):.1f}%")

    futures = [pool.submit(maskable_job, k, setup, list(suite.names), list(args.eval_seeds)) for k in todo]
    kept = [_when_done(f, keep) for f in futures]

    def finish():
        for ensure in kept:
            ensure()  # its episodes are cached (a failed run seed raises here)
        rows = [cache.rows[key(p, k, s)] for k in args.train_seeds for p in suite.problems for s in args.eval_seeds]
        return rows, None

    return finish


def play_all(pool, plays, args, setup, cache: PlayCache, progress) -> dict[str, Any]:
    """Every episode of the benchmark, its jobs on `pool` (the rules' episodes on `plays`: the same pool, or None to
    play them in this process): the headroom report, each problem's oracle and best-rule plan, the rows, the trained
    runs, the PPO rows and the peer's skip line (or None)."""
    suite, tune, test = get_suite(args.suite), tuple(args.tune_seeds), tuple(args.eval_seeds)
    training = start_training(pool, args, setup, progress)  # the long jobs first
    finish_peer = start_peer(pool, args, setup, progress)
    headroom = search(suite, cache, args.workers, (1,), tune, test, on_row=progress_row(progress), pool=plays)
    oracle = {r["problem"]: r["oracle_plan"] for r in headroom["problems"]}
    rule = {p.name: as_played(p, headroom["best_single_rule"]) for p in suite.problems}
    fixed = [Play(p, c, s) for p in suite.problems
             for c in dict.fromkeys([oracle[p.name], rule[p.name], "greedy", "heuristic", "static", "random"])
             for s in test]
    rows = run_plays(fixed, cache, args.workers, on_row=progress_row(progress), pool=plays)
    trained, ppo_rows = play_trained(pool, training, args, setup, progress)
    rows += [r | {"controller": "ppo"} for r in ppo_rows if r["seed"] in test]
    rows += open_loop_rows(args, ppo_rows, cache, progress, plays)
    peer, skipped = finish_peer()
    return {"headroom": headroom, "oracle": oracle, "rule": rule, "rows": rows + peer, "trained": trained,
            "ppo_rows": ppo_rows, "skipped": skipped}


def run_suite(args: argparse.Namespace, argv: list[str]|None) -> int:
    "The whole suite benchmark: episodes, summary, targets and files (see the module's docstring)."
    t0, started = time.perf_counter(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    suite = get_suite(args.suite)
    setup = make_setup(args) | {"suite": args.suite}
    config = run_config(args, setup, started, argv) | {
        "task": None, "suite": {"name": suite.name, "version": suite.version,
                                "problems": [p.to_dict() for p in suite.problems]},
        "tune_seeds": list(args.tune_seeds), "test_seeds": list(args.eval_seeds), "run_seeds": list(args.train_seeds),
        "esper": esper.__version__, "numpy": _version("numpy"),
        "sb3_contrib": None if MASKABLE_SKIP else _version("sb3_contrib")}
    title = (f"suite {suite.name} v{suite.version}: PPO ({args.features} features) trained on {args.train_suite} "
             f"({args.episodes} episodes x "
             f"{len(args.train_seeds)} run seeds), test seeds {list(args.eval_seeds)}")
    print(f"suite benchmark: {title}; {args.workers} workers -> {args.out}", flush=True)
    progress = lambda line: print(f"[{time.perf_counter() - t0:6.0f} s] {line}", flush=True)
    cache = PlayCache(Path(args.out) / "plays.jsonl")
    tune, test = tuple(args.tune_seeds), tuple(args.eval_seeds)
    kept = f"the checkpoints and episodes in {args.out} are kept: run the same command with --resume to continue"
    parts = earlier_parts(Path(args.out), args.resume)
    this_part = part_of(started, t0, config)

    def body():
        if args.workers == 1:
            return play_all(_InProcess(), None, args, setup, cache, progress)
        with stoppable_pool(args.workers) as pool:
            return play_all(pool, pool, args, setup, cache, progress)

    played = run_as_part(Path(args.out), parts, this_part, kept, body)
    headroom, oracle, rule, rows = played["headroom"], played["oracle"], played["rule"], played["rows"]
    trained, ppo_rows, skipped = played["trained"], played["ppo_rows"], played["skipped"]
    notes = (skipped,) if skipped else ()
    searched = [cache.rows[Play(p, c, s).key] | {"phase": "plan search"}  # every plan on the tune seeds
                for p in suite.problems for c in plan_controllers(p) for s in tune]
    summary = sb.suite_summary(suite, rows, oracle, rule, list(args.train_seeds), list(test))
    seeds = [seed_summary(t, [r for r in ppo_rows if r["run_seed"] == t["train_seed"] and r["seed"] in test])
             for t in trained]
    targets = sb.suite_targets(summary, {s["train_seed"]: s["explained_variance_last_quarter"] for s in seeds},
                               {s["train_seed"]: min(s["min_head_entropy"].values(), default=None) for s in seeds})
    table = sb.markdown_report(summary, targets, title, notes)
    config["wall_seconds"] = time.perf_counter() - t0
    config["parts"] = parts = parts + [this_part("complete")]
    config["wall_seconds_all_parts"] = round(sum(p["wall_seconds"] for p in parts), 1)
    print()
    print(table, flush=True)
    shares = sb.plan_shares([r for r in ppo_rows if r["seed"] in test], suite.names)
    files = {
        "results.json": json_text(relative_paths({
            "config": config, "headroom": headroom, "summary": summary, "targets": targets, "ppo_seeds": seeds,
            "plans": {p: dict(c) for p, c in shares.items()},
            "episodes": rows + [r for r in ppo_rows if r["seed"] in tune] + searched, "table": table})),
        "table.md": table,
        PARTS_FILE: parts_text(parts),
        "paired.png": png(sb.plot_paired(summary)),
        "scatter.png": png(sb.plot_scatter(summary)),
        "plans.png": png(sb.plot_plans(summary, shares)),
        "learning_curves.png": png(sb.plot_curves({s["train_seed"]: s["curve"] for s in seeds},
                                                  f"learning curves on {args.curve_suite} ({title})")),
    }
    try:
        write_files_atomic(args.out, files, stale=SUITE_FILES)
    except OSError as e:
        print(f"bench_learning.py: error: {e} (the table above was not saved; {kept})")
        return 1
    print(f"wrote {args.out / 'results.json'}, {', '.join(SUITE_FILES[1:])}, {PARTS_FILE} "
          f"({config['wall_seconds']:.0f} s; {config['wall_seconds_all_parts']:.0f} s in {len(parts)} part(s))")
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)
