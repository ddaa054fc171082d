"""The learning benchmark: does PPO-Tamiyo learn? PPO against static, random, heuristic and fixed-rule controllers.

One PPO policy is trained per training seed, each in its own worker process with one torch thread. During training
each policy is evaluated greedily on the curve seeds every --eval-every episodes (the learning curve). At the end
every policy, and every baseline, plays one episode on each held-out evaluation seed. Written under --out:
results.json (config, every episode, the summary and the targets), table.md, learning_curves.png, lifecycle.png,
and seed<k>/agent.pt plus seed<k>/history.json per training seed (with --keep-policies also seed<k>/policies/, the
policy of every learning-curve evaluation, which lab/probes/choose_policy.py chooses among on validation task seeds),
and parts.jsonl: one line per invocation on these results (start, seconds, commit, flags; complete, stopped or
failed), kept and added to by --resume; results.json's config lists the parts and their seconds in all.

Usage, from the project root: `make bench-learning` (short preset) or `make bench-learning-full`, i.e.
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_learning.py --preset short
On many cores the full preset goes faster with environment workers per training seed, for example
`--workers 5 --env-workers 3` on 16 cores; `--resume` continues seeds whose training was cut short. Ctrl-C or
SIGTERM stops every worker and keeps each seed's last checkpoint.
With --suite NAME it judges policies trained on a suite (--train-suite) on every problem of NAME instead: see
the suite benchmark's section below and `make bench-suite`.
A tiny run that checks the plumbing in seconds:
    python bench/bench_learning.py --episodes 4 --n-envs 2 --max-epochs 3 --max-batches 2 --train-seeds 0 1 \\
        --eval-seeds 2000 --curve-seeds 1000 --eval-every 2 --workers 2 --schedules conv_small --out /tmp/bl

This script parses and checks the flags, runs the jobs and prints; the jobs are esper.simic.trainers.learning_jobs
(and suite_jobs for --suite), the summaries, targets, tables and figures esper.tamiyo.learning_report (suite_report).
"""
import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

import esper
import esper.tamiyo.suites  # noqa: F401  (registers train, tune and heldout)
from esper.cli import (OneLineParser, earlier_results, nonneg_int, positive_float, positive_int, DistinctSeeds, seed_int,
                       seed_span_error)
from esper.cli.runs import (PARTS_FILE, cpu_model, earlier_parts, git_state, part_of, parts_text, run_as_part,
                            stoppable_pool)
from esper.leyline.files import json_text, relative_paths, write_files_atomic
from esper.simic.envs.parallel_env_state import EpisodeSpec, problem_slots
from esper.simic.trainers.learning_jobs import (TASK, baseline_job, check_resume_files, ppo_eval_job, schedule_name,
                                              train_job, training_task_seeds)
from esper.simic.agent.checkpoint import save_policy
from esper.simic.trainers.job_pool import InProcess
from esper.simic.trainers.suite_jobs import play_all, summarize_suite
from esper.simic.trainers.suite_peer import MASKABLE_SKIP
from esper.tamiyo import suite_report as sb
from esper.tamiyo.features import FEATURE_SETS, policy_layout, union_layout
from esper.tamiyo.learning_report import (check_targets, markdown_report, plot_learning_curves, plot_lifecycle, png,
                                          summarize_runs)
from esper.tamiyo.plan_search import PlayCache
from esper.tamiyo.problems import SUITES, get_suite
from esper.tasks import HELDOUT_SEEDS_FROM, TRAINING_DATA_SEED
from esper.tolaria import LR_SCHEDULES

#: PPO settings of the Makefile's `make run` (PPO_FLAGS); both presets use them. PPO's learning rate, GAE lambda and
#: entropy coefficient at the start of the run are preset values below (None = TrainingConfig's default).
PPO_SETTINGS = {"entropy_coef_end": 0.01, "entropy_anneal_episodes": 240}
#: What each preset trains and evaluates on; max_batches None = every batch of the epoch.
PRESETS = {
    "short": {"episodes": 320, "max_epochs": 15, "max_batches": 30, "n_envs": 8,    # the `make run` setting
              "lr_schedule": "constant", "param_budget": None, "rent_weight": None,    # rent: RewardConfig's
              "contribution_weight": None, "unkept_weight": None, "lr": None, "gae_lambda": 0.8,
              "germinate_gae_lambda": 1.0, "episodes_per_task_seed": 1, "group_baseline": False, "lr_end": 0.0,
              "lr_anneal_episodes": None,                                          # the whole-run learning settings
              "entropy_coef_start": 0.3, "blueprint_entropy_coef": 0.0, "critic_warmup_episodes": 0,
              "blueprint_offer_episodes": 0, "prune_offer_episodes": 0},
    "full": {"episodes": 320, "max_epochs": 30, "max_batches": None, "n_envs": 8,   # whole 30-epoch host runs,
             "lr_schedule": "cosine",                                              # rates decayed to 0 by the end,
             "param_budget": 2500,                                                 # the target's 2,500 parameters,
             "rent_weight": 0.0,                                                   # which price them: no rent;
             "contribution_weight": 0.1, "unkept_weight": None,                    # a light payment at fossilizing,
             "lr": None, "gae_lambda": 0.8,                                        # advantages over ~5 decisions,
             "germinate_gae_lambda": 1.0,                                          # germinations over the whole run
             "episodes_per_task_seed": 1, "group_baseline": False,
             "lr_end": 0.0, "lr_anneal_episodes": None,                            # PPO's rate: to 0 over the run
             "entropy_coef_start": 0.3,                                            # first plans sampled longer
             "blueprint_entropy_coef": 0.0, "critic_warmup_episodes": 0,
             "blueprint_offer_episodes": 0,                                        # the policy picks from the start
             "prune_offer_episodes": 0},                                           # and prunes when it chooses to
}
#: Held-out task seeds of each preset's final evaluation (--eval-seeds): nothing trains, tunes or draws curves on them.
EVAL_SEEDS = {"short": [2000, 2001, 2002, 2003, 2004],
              "full": [2000, 2001, 2002, 2003, 2004, *range(3000, 3010)]}
BASELINES = ("static", "random", "heuristic")
DEFAULT_SCHEDULES = ("conv_heavy", "conv_heavy,conv_heavy", "conv_heavy,depthwise", "concurrent:conv_heavy,conv_heavy",
                     "concurrent:conv_heavy,depthwise", "concurrent:conv_heavy,conv_small")


# ----------------------------------------------------------------------------------------------- arguments

def build_parser() -> argparse.ArgumentParser:
    "The benchmark's flags; preset-dependent ones default to None and are filled in by `resolve_args`."
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="bench_learning.py")
    a = ap.add_argument
    a("--preset", choices=tuple(PRESETS), default="short",
      help="short: the `make run` setting (15 epochs x 30 batches, 320 episodes, 8 envs); "
           "full: 30-epoch episodes on every batch within 2,500 parameters, PPO with GAE lambda 0.8 (1 for "
           "germinations), a learning rate falling to 0 over the run, an entropy bonus from 0.3 and a payment at "
           "fossilization of 0.1 (default: short)")
    a("--episodes", type=positive_int, default=None, help="PPO training episodes per training seed (preset: 320)")
    a("--max-epochs", type=positive_int, default=None, help="epochs per episode, >= 2 (short: 15, full: 30)")
    a("--max-batches", type=nonneg_int, default=None,
      help="training batches per epoch, 0 = every batch (short: 30, full: every batch)")
    a("--n-envs", type=positive_int, default=None, help="episodes per PPO update, stepped in lockstep (preset: 8)")
    a("--train-seeds", "--run-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[0, 1, 2, 3, 4],
      help="PPO run seeds, one policy each; run k trains on task seeds k .. k + episodes / G - 1, G the "
           "--episodes-per-task-seed (default: 0 1 2 3 4)")
    a("--eval-seeds", "--test-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=None,
      help="held-out task seeds of the final evaluation (short: 2000-2004; full: those and 3000-3009, since five "
           "seeds priced a second blueprint at a tenth of its cost on fifteen). Not 1000-1009: those are the tuning "
           "seeds, so results on them are not held out")
    a("--curve-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001],
      help="task seeds of the learning-curve evaluations during training (default: 1000 1001)")
    a("--eval-every", type=positive_int, default=16,
      help="training episodes between learning-curve evaluations; the last update is always evaluated (default: 16)")
    a("--workers", type=positive_int, default=os.cpu_count() or 1,
      help="worker processes, one torch thread each (default: os.cpu_count())")
    a("--lr-schedule", choices=LR_SCHEDULES, default=None,
      help="host and seed learning rates over an episode (short: constant, full: cosine)")
    a("--param-budget", type=nonneg_int, default=None,
      help="most parameters in all, host and seeds, for every controller: a germination past it is refused and "
           "masked; 0 = none (short: none, full: 2500)")
    a("--rent-weight", type=float, default=None,
      help="PPO's reward: parameter rent per host-size of seed parameters (short: RewardConfig's, 0.05; full: 0, "
           "the budget prices parameters); given, the table says it")
    a("--contribution-weight", type=float, default=None,
      help="PPO's reward: weight of the counterfactual contribution paid at fossilization (short: RewardConfig's, "
           "0.5; full: 0.1); given, the table says it")
    a("--unkept-weight", type=float, default=None,
      help="PPO's reward: weight of the contributions of seeds still live, not fossilized, when a run ends, charged "
           "in its terminal term (preset: RewardConfig's, 0); given, the table says it")
    a("--lr", type=positive_float, default=None,
      help="PPO learning rate, for tuning runs: given, the table says the preset was changed (preset: "
           "TrainingConfig's, 3e-4)")
    a("--gae-lambda", type=float, default=None,
      help="PPO's GAE lambda in [0, 1], for tuning runs: given, the table says the preset was changed (short: "
           "TrainingConfig's, 0.95; full: 0.8)")
    a("--germinate-gae-lambda", type=float, default=None,
      help="PPO's GAE lambda in [0, 1] for the steps that germinate a seed, for tuning runs: 1 judges a "
           "germination by the rest of its run's return rather than by the critic's values a few steps on "
           "(short: --gae-lambda's; full: 1); given, the table says it")
    a("--lr-end", type=float, default=None,
      help="PPO training: the learning rate at the end of a linear ramp from --lr, in [0, 1] (short: none, a "
           "fixed rate; full: 0); given, the table says it")
    a("--lr-anneal-episodes", type=nonneg_int, default=None,
      help="PPO training: episodes over which the learning rate falls to --lr-end; a ramp shorter than the run "
           "holds --lr-end after it, 0 = no ramp, a fixed rate (default: the whole run, where there is an --lr-end)")
    a("--entropy-coef-start", type=float, default=None,
      help="PPO training: the entropy bonus's coefficient at the first update, falling linearly to "
           f"{PPO_SETTINGS['entropy_coef_end']} over the first {PPO_SETTINGS['entropy_anneal_episodes']} episodes "
           "(short: 0.05, full: 0.3); given, the table says it")
    a("--entropy-anneal-episodes", type=positive_int, default=None,
      help="PPO training: episodes over which the entropy bonus falls to "
           f"{PPO_SETTINGS['entropy_coef_end']} (default: {PPO_SETTINGS['entropy_anneal_episodes']}); given, the "
           "table says it")
    a("--blueprint-entropy-coef", type=float, default=None,
      help="PPO training: a second entropy bonus on the choice among blueprints alone (the policy's distribution "
           "over the blueprints it may germinate, given that it germinates), falling linearly to 0 over the same "
           f"{PPO_SETTINGS['entropy_anneal_episodes']} episodes (preset: 0, off); given, the table says it")
    a("--critic-warmup-episodes", type=nonneg_int, default=None,
      help="PPO training: the first episodes, a multiple of --n-envs, train PPO's critic alone (its policy is not "
           "updated, so they are played by the untrained policy) (preset: 0, none); given, the table says it")
    a("--blueprint-offer-episodes", type=nonneg_int, default=None,
      help="PPO training: the first episodes germinate with one blueprint on offer at each decision, drawn at "
           "random from those that fit (preset: 0, none); given, the table says it")
    a("--prune-offer-episodes", type=nonneg_int, default=None,
      help="PPO training: the first episodes offer PRUNE: at half the decisions where some seed may be pruned, only "
           "WAIT or PRUNE is allowed (no dud detector: any prunable seed) (preset: 0, none); given, the table says it")
    a("--episodes-per-task-seed", type=positive_int, default=None,
      help="PPO training: envs of an update that play one task seed, a divisor of --n-envs (preset: 1, every "
           "episode its own seed); given, the table says it")
    a("--group-baseline", action="store_true", default=None,
      help="PPO training: each episode's advantages less those of its siblings on the same task seed (a "
           "leave-one-out baseline); needs --episodes-per-task-seed >= 2")
    a("--features", choices=FEATURE_SETS, default=None,
      help="what the policy reads: the training signals and seed telemetry (signals); those and the run's "
           "budgets left and sizes of host and data (run); those and each slot's shape (run-slots) (default: run "
           "with --suite, where problems differ in budgets and sizes; signals otherwise)")
    a("--env-workers", type=nonneg_int, default=0,
      help="environment worker processes per training seed (train_ppo_vectorized's workers); 0 = step the envs in "
           "the training job's own process (default: 0). With K > 0, give --workers about cores / K")
    a("--keep-policies", action="store_true",
      help="save the policy of every learning-curve evaluation as seed<k>/policies/episode<NNNN>.pt (an agent "
           "checkpoint, about 2 MB each), for lab/probes/choose_policy.py and lab/probes/replay_actions.py")
    a("--resume", action="store_true",
      help="continue each training seed from its checkpoint seed<k>/agent.pt under --out where one exists (same "
           "settings), so a run cut short, e.g. by a time limit, goes on where it stopped")
    a("--suite", default=None,
      help="judge on a suite instead of one task: train each run seed's policy on --train-suite, then play it and "
           "every rule on every problem of this suite x the test seeds (the suite benchmark; default: off)")
    a("--train-suite", default="train", help="with --suite: the suite the policies train on (default: train)")
    a("--train-on-held-out", action="store_true",
      help="allow --train-suite to name a held-out suite (heldout, small-test): what tables report (default: refused)")
    a("--curve-suite", default="tune",
      help="with --suite: the suite of the learning-curve evaluations, on the --curve-seeds (default: tune)")
    a("--no-peer", action="store_true",
      help="with --suite: leave out the MaskablePPO peer (about as long per run seed as its PPO training); its row "
           "says skipped, and a later --resume without this flag adds it")
    a("--reuse-episodes", type=Path, nargs="+", default=[], metavar="RESULTS_JSON",
      help="with --suite: earlier suite benchmarks' (or lab/probes/selector.py's) results.json files whose rules' "
           "episodes are written into this run's plays.jsonl before it starts, so that a run changing only the "
           "policy (an ablation) plays no rule again; an episode is used only where this run plays the same "
           "problem, controller, seed and version (the cache's key), and a policy's never")
    a("--tune-seeds", type=seed_int, nargs="+", action=DistinctSeeds, default=[1000, 1001],
      help="with --suite: seeds that choose the oracle's plan, the best single rule and each policy's open-loop "
           "replay on every problem (default: 1000 1001)")
    a("--out", default=None, help="output folder (default: runs/bench_learning/<preset>, or <suite> with --suite)")
    a("--overwrite", action="store_true",
      help="replace an earlier benchmark's results and checkpoints in --out (default: refuse; --resume continues it)")
    a("--schedules", nargs="+", default=list(DEFAULT_SCHEDULES), metavar="BLUEPRINTS",
      help="fixed rules (ScheduleTamiyo), each a comma-separated list of blueprints germinated in slot order, "
           "one after the other; prefixed with concurrent: they grow side by side "
           f"(default: {' '.join(DEFAULT_SCHEDULES)})")
    return ap


def resolve_args(ap: argparse.ArgumentParser, argv: list[str]|None=None) -> argparse.Namespace:
    "Parse, fill the preset's values in, and refuse inconsistent settings with one line."
    args = ap.parse_args(argv)
    suite_only = ("train_suite", "curve_suite", "tune_seeds", "no_peer", "train_on_held_out", "reuse_episodes")
    given = [f for f in ("preset", "max_epochs", "max_batches", "param_budget", "lr_schedule", "schedules", *suite_only)
             if getattr(args, f) != ap.get_default(f)]
    idle = [f for f in given if (f in suite_only) == (args.suite is None)]
    if idle:  # a flag that changes nothing must not be recorded as if it had (issue 76)
        flag = "--" + idle[0].replace("_", "-")
        ap.error(f"{flag} works with --suite only: without one it changes nothing (drop it)" if args.suite is None else
                 f"{flag} has no effect with --suite: the suite benchmark plays its problems as they are set (drop it)")
    preset = PRESETS[args.preset]
    args.overrides, flagged = {}, set()
    for key, value in preset.items():
        if key == "lr_anneal_episodes" and value is None and args.lr_end is not None:
            value = args.episodes  # a ramp, the preset's or a flag's, spans the run (lr_end and episodes come first)
        given = getattr(args, key)
        if given is None:
            setattr(args, key, value)
            continue
        flagged.add(key)
        if key in ("max_batches", "param_budget") and given == 0: given = None  # 0 = every batch, no budget
        setattr(args, key, given)
        if given != value: args.overrides[key] = given
    if args.gae_lambda is not None and not 0 <= args.gae_lambda <= 1:
        ap.error(f"--gae-lambda must be in [0, 1] (got {args.gae_lambda})")
    if args.germinate_gae_lambda is not None and not 0 <= args.germinate_gae_lambda <= 1:
        ap.error(f"--germinate-gae-lambda must be in [0, 1] (got {args.germinate_gae_lambda})")
    if args.lr_end is not None and not 0 <= args.lr_end <= 1:
        ap.error(f"--lr-end must be in [0, 1] (got {args.lr_end})")
    if args.lr_anneal_episodes == 0:  # no ramp: a fixed rate, unless a ramp's end was asked for in the same breath
        if "lr_end" in flagged:
            ap.error(f"--lr-end {args.lr_end} needs a ramp: --lr-anneal-episodes 0 means a fixed rate")
        args.lr_end = args.lr_anneal_episodes = None
    elif args.lr_end is None and args.lr_anneal_episodes is not None:
        ap.error(f"--lr-anneal-episodes {args.lr_anneal_episodes} ramps PPO's learning rate down to --lr-end: "
                 "give --lr-end")
    tuned = (("lr", args.lr), ("gae_lambda", args.gae_lambda), ("germinate_gae_lambda", args.germinate_gae_lambda),
             ("lr_end", args.lr_end),
             ("lr_anneal_episodes", args.lr_anneal_episodes), ("entropy_coef_start", args.entropy_coef_start),
             ("blueprint_entropy_coef", args.blueprint_entropy_coef))
    args.ppo_settings = {k: v for k, v in tuned if v is not None}
    if args.entropy_anneal_episodes is not None:
        args.ppo_settings["entropy_anneal_episodes"] = args.entropy_anneal_episodes
        args.overrides["entropy_anneal_episodes"] = args.entropy_anneal_episodes
    if args.features is None: args.features = "run" if args.suite else "signals"
    if args.features != "signals": args.ppo_settings["features"] = args.features  # signals: TrainingConfig's default
    if args.critic_warmup_episodes % args.n_envs:
        ap.error(f"--critic-warmup-episodes {args.critic_warmup_episodes} must be a multiple of --n-envs "
                 f"{args.n_envs}: each PPO update plays --n-envs episodes")
    if args.critic_warmup_episodes:  # TrainingConfig counts the warm-up in updates
        args.ppo_settings["critic_warmup_steps"] = args.critic_warmup_episodes // args.n_envs
    for key in ("entropy_coef_start", "blueprint_entropy_coef", "rent_weight", "contribution_weight", "unkept_weight"):
        value = getattr(args, key)  # `not >= 0` also refuses nan
        if value is not None and not value >= 0: ap.error(f"--{key.replace('_', '-')} must be >= 0 (got {value})")
    for flag in ("blueprint_offer_episodes", "prune_offer_episodes"):
        if getattr(args, flag) > args.episodes:
            ap.error(f"--{flag.replace('_', '-')} {getattr(args, flag)} must be at most --episodes {args.episodes}")
    if args.n_envs % args.episodes_per_task_seed:
        ap.error(f"--episodes-per-task-seed {args.episodes_per_task_seed} must divide --n-envs {args.n_envs}")
    if args.group_baseline and args.episodes_per_task_seed < 2:
        ap.error("--group-baseline compares episodes on one task seed: it needs --episodes-per-task-seed >= 2")
    if args.max_epochs < 2: ap.error(f"--max-epochs must be >= 2 for PPO (got {args.max_epochs})")
    args.out = Path(args.out or f"runs/bench_learning/{args.suite or args.preset}")
    if args.eval_seeds is None: args.eval_seeds = list(EVAL_SEEDS["short" if args.suite else args.preset])
    if args.suite:  # its own flags are checked before any work: suites, menus, seeds
        check_suite_args(ap, args)
    for flag in ("schedules",):  # a repeated seed is refused as it is parsed (DistinctSeeds)
        values = getattr(args, flag)
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated: ap.error(f"--{flag.replace('_', '-')} repeats {repeated}")
    both = sorted(set(args.eval_seeds) & set(args.curve_seeds))
    if both: ap.error(f"task seeds {both} are both --eval-seeds and --curve-seeds; keep the evaluation held out")
    for k in args.train_seeds:  # run k plays task seeds k .. k + (episodes - 1) // G: each must be a seed
        why = f"--episodes {args.episodes}" + (f" and --episodes-per-task-seed {args.episodes_per_task_seed}"
                                               if args.episodes_per_task_seed > 1 else "")
        line = seed_span_error("--train-seeds", k, (args.episodes - 1) // args.episodes_per_task_seed + 1, why)
        if line: ap.error(line)
    used = training_task_seeds(args.train_seeds, args.episodes, args.episodes_per_task_seed)
    for flag in ("eval_seeds", "curve_seeds") + (("tune_seeds",) if args.suite else ()):
        seen = sorted(set(getattr(args, flag)) & used)
        if seen:
            ap.error(f"--{flag.replace('_', '-')} {seen} are task seeds that training episodes use "
                     f"(run k trains on seeds k .. k + {(args.episodes - 1) // args.episodes_per_task_seed}); "
                     "pick seeds outside them")
    for flag in ("eval_seeds", "curve_seeds") + (("tune_seeds",) if args.suite else ()):
        shared = sorted(s for s in getattr(args, flag) if s < HELDOUT_SEEDS_FROM)
        if shared:
            ap.error(f"--{flag.replace('_', '-')} {shared}: task seeds below {HELDOUT_SEEDS_FROM} share the training "
                     f"data (data seed {TRAINING_DATA_SEED}), so they are not held out; give seeds from "
                     f"{HELDOUT_SEEDS_FROM} up")
    try:
        args.schedules = [schedule_name(s) for s in args.schedules]
    except ValueError as e:
        ap.error(f"--schedules: {e}")
    # the results are written after the runs: make sure they can be, once the arguments hold, before any work starts
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=args.out): pass
    except OSError as e:
        ap.error(f"--out {args.out} is not a writable folder ({e.strerror or e})")
    if not (args.resume or args.overwrite):  # a finished benchmark holds hours of training: never replaced by accident
        found = earlier_results(args.out, SUITE_FILES if args.suite else RESULT_FILES) + sorted(
            str(p.relative_to(args.out)) for p in args.out.glob("seed*/agent.pt"))
        if found:
            ap.error(f"--out {args.out} already holds an earlier benchmark ({', '.join(found[:4])}"
                     f"{', ...' if len(found) > 4 else ''}); continue it with --resume, pass --overwrite to replace "
                     "it, or choose another --out")
    if args.resume:  # what a resumed seed reads back is checked now, before any work, not in a worker hours later
        line = changed_flags(ap, argv, args.out)
        if line: ap.error(line)
        for k in args.train_seeds:
            try:
                check_resume_files(args.out / f"seed{k}")
            except ValueError as e:
                ap.error(f"--resume: {e}")
    return args


#: Flags a --resume may change: where and how the work runs, not what it computes (a later --resume without
#: --no-peer adds the peer).
RESUME_MAY_CHANGE = ("out", "resume", "overwrite", "workers", "env_workers", "keep_policies", "no_peer",
                     "reuse_episodes")


def changed_flags(ap: argparse.ArgumentParser, argv: list[str] | None, out: Path) -> str | None:
    "With --resume: the one-line refusal of a flag that differs from the run being continued (None: none differs)."
    first = next((p for p in earlier_parts(out, True, "bench_learning.py") if isinstance(p.get("argv"), list)), None)
    if first is None:
        return None
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            before = vars(ap.parse_args(first["argv"]))
    except SystemExit:
        return f"--resume: the run in {out} was made with flags this version does not take ({' '.join(first['argv'])})"
    now = vars(ap.parse_args(sys.argv[1:] if argv is None else argv))
    shown = lambda v: "(not given)" if v is None else " ".join(map(str, v)) if isinstance(v, list) else v
    for dest, value in now.items():
        if dest not in RESUME_MAY_CHANGE and before.get(dest) != value:
            flag = "--" + dest.replace("_", "-")
            return (f"--resume continues the run in {out}, made with {flag} {shown(before.get(dest))}; this one "
                    f"gives {shown(value)}: give the same, or --overwrite to start again")
    return None


# ----------------------------------------------------------------------------------------------- results

#: The result set the benchmark writes into --out, all or nothing, once every job is done.
RESULT_FILES = ("results.json", "table.md", "learning_curves.png", "lifecycle.png")
#: The same with --suite (the suite benchmark below).
SUITE_FILES = ("results.json", "table.md", "paired.png", "scatter.png", "plans.png", "learning_curves.png")


# ----------------------------------------------------------------------------------------------- the suite benchmark
# `--suite NAME`: policies trained on --train-suite, judged on every problem of NAME beside the oracle, the rules,
# their own open-loop replays, a per-instance selector (fitted on --train-suite's plan search on the tune seeds) and
# the MaskablePPO peer: the jobs, and what they play, are in esper.simic.trainers.suite_jobs (the peer: suite_peer).
#
# Written under --out: results.json (config with commit, machine and versions; the headroom report; the summary; the
# targets; the selector's plans and cost; every episode), table.md, paired.png, scatter.png, plans.png,
# learning_curves.png; seed<k>/ per run seed (checkpoint, history, episodes.jsonl: its evaluation episodes, and
# policy.pt: the policy alone, 0.6 MB, to commit beside the results: `esper-train compare --checkpoint` and
# `load_ppo_controller` play it); plays.jsonl, every rule's episode (a cache: --resume and --overwrite keep it);
# maskable.jsonl, the peer's; parts.jsonl, one line per invocation that worked on these results (its start, seconds,
# commit, flags and how it ended: complete, stopped or failed), also written when one is stopped; a --resume adds to
# it, anything else starts it again. results.json's config lists the parts. An ablation (the same run with another
# --features) need not play the rules again: --reuse-episodes with the earlier run's results.json seeds plays.jsonl.
# `make bench-suite`, or in seconds on the `tiny` suite:
#     python bench/bench_learning.py --suite tiny --train-suite tiny --curve-suite tiny --run-seeds 0 --episodes 4 \\
#         --n-envs 2 --tune-seeds 1000 --test-seeds 2000 --curve-seeds 1000 --eval-every 2 --workers 2 --out /tmp/bs


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
    try:  # read now: a file that is not one would otherwise fail after the first part's work
        args.reused = reused_rows(args.reuse_episodes)
    except ValueError as e:
        ap.error(str(e))


def reused_rows(
    paths: list[Path],  # earlier results.json files (`--reuse-episodes`)
) -> list[dict]:
    """The rules' episodes of earlier results files: those without a run seed (a policy's episode or its open-loop
    replay has one), for `PlayCache.adopt`; a `ValueError` naming the file where one has no episode list."""
    rows = []
    for path in paths:
        try:
            episodes = json.loads(Path(path).read_text())["episodes"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"--reuse-episodes {path}: not a results.json with its episodes ({e})") from None
        if not isinstance(episodes, list):
            raise ValueError(f"--reuse-episodes {path}: its 'episodes' is not a list of episodes")
        rows += [r for r in episodes if isinstance(r, dict) and "run_seed" not in r]
    return rows


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
    if args.reuse_episodes:
        n = cache.adopt(args.reused)
        print(f"reused {n} rules' episodes of {', '.join(map(str, args.reuse_episodes))} "
              f"({len(args.reused) - n} already in plays.jsonl or not episodes it reads)", flush=True)
    tune, test = tuple(args.tune_seeds), tuple(args.eval_seeds)
    kept = f"the checkpoints and episodes in {args.out} are kept: run the same command with --resume to continue"
    parts = earlier_parts(Path(args.out), args.resume)
    this_part = part_of(started, t0, config)

    def body():
        if args.workers == 1:
            return play_all(InProcess(), None, args, setup, cache, progress)
        with stoppable_pool(args.workers) as pool:
            return play_all(pool, pool, args, setup, cache, progress)

    played = run_as_part(Path(args.out), parts, this_part, kept, body)
    headroom, rows, ppo_rows, skipped = played["headroom"], played["rows"], played["ppo_rows"], played["skipped"]
    notes = (skipped,) if skipped else ()
    report = summarize_suite(played, args, cache)
    summary, seeds, targets, searched = report["summary"], report["seeds"], report["targets"], report["searched"]
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
            "selector": {k: v for k, v in played["selector"].items() if k != "searched"},
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
    try:
        for t in played["trained"]:  # each policy alone (weights, config, normalisers), small enough to commit
            save_policy(t["checkpoint"], Path(t["checkpoint"]).with_name("policy.pt"), overwrite=True)
    except OSError as e:
        print(f"bench_learning.py: error: {e} (the results were saved; the policies alone were not: {kept})")
        return 1
    print(f"wrote {args.out / 'results.json'}, {', '.join(SUITE_FILES[1:])}, {PARTS_FILE}, seed<k>/policy.pt "
          f"({config['wall_seconds']:.0f} s; {config['wall_seconds_all_parts']:.0f} s in {len(parts)} part(s))")
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


# ----------------------------------------------------------------------------------------------- main

def run_jobs(args: argparse.Namespace, setup: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """Training, PPO evaluation and baseline jobs on a process pool; returns (trained runs, episode rows).

    No more jobs are in flight than there are workers, and a free worker takes, in this order: a training run
    (the longest jobs first), a held-out episode of a policy already trained, a baseline episode. So a trained
    policy's held-out figures come while the other policies still train, not after every baseline."""
    trained, rows, t0 = [], [], time.perf_counter()
    names = list(BASELINES) + args.schedules
    total = len(args.train_seeds) * (1 + len(args.eval_seeds)) + len(names) * len(args.eval_seeds)
    queues: dict[str, deque] = {
        "train": deque((train_job, (k, setup), ("train", k)) for k in args.train_seeds),
        "ppo": deque(),
        "baseline": deque((baseline_job, (n, s, setup), (n, s)) for n in names for s in args.eval_seeds),
    }
    with stoppable_pool(args.workers) as pool:
        jobs: dict[Any, tuple] = {}

        def fill() -> None:
            while len(jobs) < args.workers and (queue := next((q for q in queues.values() if q), None)):
                fn, job_args, tag = queue.popleft()
                jobs[pool.submit(fn, *job_args)] = tag

        fill()
        while jobs:
            done, _ = wait(jobs, return_when=FIRST_COMPLETED)
            for job in done:
                kind, key = jobs.pop(job)
                result = job.result()
                if kind == "train":
                    trained.append(result)
                    queues["ppo"].extend(
                        (ppo_eval_job, (key, result["checkpoint"], s, setup), ("ppo", s)) for s in args.eval_seeds
                    )
                    last = result["history"][-1]
                    what = (f"trained PPO seed {key} in {result['train_seconds']:.0f} s, "
                            f"curve {last.get('eval_accuracy', float('nan')):.1f}%")
                else:
                    rows.append(result)
                    seed = "" if result["train_seed"] is None else f" (PPO seed {result['train_seed']})"
                    what = (f"{kind}{seed} on eval seed {key}: {result['final_accuracy']:.1f}%, "
                            f"{result['params_in_all']} params")
                n = len(trained) + len(rows)
                print(f"[{time.perf_counter() - t0:6.0f} s] {n}/{total} {what}", flush=True)
            fill()
    return sorted(trained, key=lambda r: r["train_seed"]), rows


def make_setup(args: argparse.Namespace) -> dict[str, Any]:
    "What every worker job reads: the run's settings as plain values (with --suite, the suites' names too)."
    return {"out": str(args.out), "episodes": args.episodes, "n_envs": args.n_envs, "max_epochs": args.max_epochs,
            "max_batches": args.max_batches, "lr_schedule": args.lr_schedule, "param_budget": args.param_budget,
            "curve_seeds": list(args.curve_seeds), "eval_every": args.eval_every,
            "ppo": dict(PPO_SETTINGS) | args.ppo_settings,
            "env_workers": args.env_workers, "resume": args.resume, "keep_policies": args.keep_policies,
            "rent_weight": args.rent_weight, "contribution_weight": args.contribution_weight,
            "unkept_weight": args.unkept_weight,
            "episodes_per_task_seed": args.episodes_per_task_seed, "group_baseline": args.group_baseline,
            "blueprint_offer_episodes": args.blueprint_offer_episodes,
            "prune_offer_episodes": args.prune_offer_episodes,
            **({"train_suite": args.train_suite, "curve_suite": args.curve_suite} if args.suite else {})}


def run_config(args: argparse.Namespace, setup: dict[str, Any], started: str, argv: list[str]|None) -> dict[str, Any]:
    "results.json's config: the settings, the seeds, and the commit, machine and versions that produced it."
    return {"preset": args.preset, "overrides": args.overrides, "task": TASK, **setup,
            "train_seeds": args.train_seeds, "eval_seeds": args.eval_seeds, "workers": args.workers,
            "schedules": args.schedules, **git_state(Path(__file__).resolve().parent.parent), "device": "cpu",
            "torch": torch.__version__, "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "cpu_model": cpu_model(),
            "platform": platform.platform(), "started": started, "argv": sys.argv[1:] if argv is None else argv}


def main(argv: list[str]|None=None) -> int:
    "Run the benchmark; prints the tables and returns 0 (also when targets fail: they are a measurement)."
    ap = build_parser()
    args = resolve_args(ap, argv)
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned workers before they import torch
    torch.set_num_threads(1)
    import matplotlib
    matplotlib.use("Agg")
    if args.suite:
        return run_suite(args, argv)
    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.perf_counter()
    setup = make_setup(args)
    config = run_config(args, setup, started, argv)
    batches = "every batch" if args.max_batches is None else f"{args.max_batches} batches"
    budget = "" if args.param_budget is None else f"at most {args.param_budget:,} parameters, "
    budget += "" if args.rent_weight is None else f"rent weight {args.rent_weight:g}, "
    budget += "" if args.contribution_weight is None else f"contribution weight {args.contribution_weight:g}, "
    budget += "" if args.unkept_weight is None else f"unkept weight {args.unkept_weight:g}, "
    title = (f"{TASK}, {args.max_epochs} epochs x {batches}, {args.lr_schedule} learning rates, {budget}"
             f"{args.episodes} PPO episodes x {len(args.train_seeds)} seeds, eval seeds {args.eval_seeds}")
    print(f"learning benchmark, preset {args.preset}: {title}; {args.workers} workers -> {args.out}", flush=True)

    kept = f"the training checkpoints in {args.out} are kept: run the same command with --resume to continue"
    parts, this_part = earlier_parts(args.out, args.resume, "bench_learning.py"), part_of(started, t0, config)
    # Ctrl-C or SIGTERM: the checkpoints written stay valid, and the part is recorded
    trained, rows = run_as_part(args.out, parts, this_part, kept, lambda: run_jobs(args, setup), "bench_learning.py")
    summary, seeds = summarize_runs(trained, rows, list(BASELINES) + args.schedules)
    targets = check_targets(args.preset, summary, seeds)
    changed = ", ".join(f"{k}={v}" for k, v in args.overrides.items())
    note = f"{args.preset} preset" + (f"; flags changed it ({changed}): indicative only" if changed else "")
    table = markdown_report(title, summary, seeds, targets, note)
    config["wall_seconds"] = time.perf_counter() - t0
    config["parts"] = parts = parts + [this_part("complete")]
    config["wall_seconds_all_parts"] = round(sum(p["wall_seconds"] for p in parts), 1)

    print()
    print(table, flush=True)  # on the screen first: a folder that cannot take the results loses nothing shown
    histories = {t["train_seed"]: t["history"] for t in trained}
    files = {
        "results.json": json_text(relative_paths({"config": config, "summary": summary, "ppo_seeds": seeds,
                                                  "targets": targets, "episodes": rows, "table": table})),
        "table.md": table,
        "learning_curves.png": png(plot_learning_curves(seeds, summary, title)),
        "lifecycle.png": png(plot_lifecycle(seeds, histories, f"lifecycle decisions during training ({title})")),
        PARTS_FILE: parts_text(parts),
    }
    try:
        write_files_atomic(args.out, files, stale=RESULT_FILES)
    except OSError as e:
        print(f"bench_learning.py: error: {e} (the table above was not saved; {kept})", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'results.json'}, table.md, learning_curves.png, lifecycle.png, {PARTS_FILE} "
          f"({config['wall_seconds']:.0f} s; {config['wall_seconds_all_parts']:.0f} s in {len(parts)} part(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
