"""Other blueprints failing on other problems: does a replanting rule with one setting still read the run about as
well as knowing the failure in advance? (issue 75, item 4: what this change of the problems buys)

Six problems of ten epochs under both budgets: three of `duds-train`, where `global_mix` (their best blueprint) fails
in half the episodes, and three on ordered MNIST-1D, where the local blueprints `conv_small` and `dilated` (the best
there) fail in half the episodes. A rule with one setting must now serve problems on which different blueprints fail.

On the tune seeds (default 1004-1007: two sound, two failing on every problem, since the draw reads only the seed) it
plays the plan search (every plan at planting epoch 1) and every rule below, and chooses per problem the open-loop
oracle (the best plan), the hindsight oracle (the best plan on the sound tune episodes, and the best on the failing
ones) and the best rule, and over all six problems the rule with one setting of each kind:
- `replant:<plan>~<fallbacks>` (`ReplantTamiyo`): a seed that moves no weight in its first epoch is pruned and the
  first fallback that has not failed grows in its slot once the embargo is over;
- `anyslot:<plan>~<fallbacks>` (this probe's variant, registered here only): the fallback grows at once in the first
  free slot, so a dud costs one epoch, not the embargo.
Each chosen arm plays the test seeds; it prints and writes the test accuracy per problem and over each kind of
problem, on all, sound and failing episodes, and the paired differences (95% CIs over problems x test seeds). From
the project root (one process: `anyslot` lives in this script):

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/mixed_failures.py --cache runs/mixed_failures/plays.jsonl \
        --out nbs/results/mixed_failures
"""
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

# lab/probes/event_arms.py: what the event probes share
from event_arms import (best, paired_differences, parse_seeds_and_files, per_problem_and_command, split_means,
                        tables, write_report)
from selector import open_outputs, row_printer  # lab/probes/selector.py: --out and --cache checked, rows said

from esper.cli import OneLineParser
from esper.cli.runs import git_state, stops_in_one_line
from esper.leyline import LifecycleOp, SeedStage
from esper.tamiyo.controllers import CONTROLLER_REGISTRY, register_controller
from esper.tamiyo.events import SeedFailure
from esper.tamiyo.plan_search import Play, as_played, plan_controllers, run_plays
from esper.tamiyo.plans import Germination, ReplantTamiyo, fits
from esper.tamiyo.signals import TamiyoAction
from esper.tamiyo.suites import DUD_CHANCE, problem

FILES = ("results.json", "results.md")
LOCAL = ("conv_small", "dilated")


def _fails(p, blueprints: tuple[str, ...]):
    return replace(p, event=SeedFailure(blueprints, DUD_CHANCE))


#: The problems, by kind: the blueprints that fail on them.
PROBLEMS = {
    "global_mix fails": (
        _fails(problem("digits-c20-p1610", "digits", param_budget=1610, compute_budget=20.0), ("global_mix",)),
        _fails(problem("digits-occluded-c25-p1610", "digits", param_budget=1610, compute_budget=25.0, occlusion=3),
               ("global_mix",)),
        _fails(problem("mnist1d-shuffled-c25-p1600", param_budget=1600, compute_budget=25.0, shuffle_seq=True),
               ("global_mix",)),
    ),
    "local blueprints fail": (
        _fails(problem("mnist1d-c40-p1800", param_budget=1800, compute_budget=40.0), LOCAL),
        _fails(problem("mnist1d-c30-p2200", param_budget=2200, compute_budget=30.0), LOCAL),
        _fails(problem("mnist1d-c25-p1600", param_budget=1600, compute_budget=25.0), LOCAL),
    ),
}
#: The plans a rule may play, and its fallbacks in order of preference.
RULE_PLANS = ("global_mix@block1/1", "global_mix@block1/1+global_mix@block2/3",
              "global_mix@block1/1+conv_small@block2/1", "conv_small@block1/1+global_mix@block2/1",
              "conv_small@block1/1+conv_small@block2/1", "conv_small@block1/1+dilated@block2/1")
FALLBACKS = ("conv_small,global_mix", "global_mix,conv_small")
KINDS = ("replant", "anyslot")
WHERE = ("all", "sound", "fails")


class AnySlotTamiyo(ReplantTamiyo):
    "`ReplantTamiyo`, but the fallback grows at once in the first free slot, not in the pruned one after the embargo."

    def decide(self, observation, model) -> TamiyoAction:
        for slot, st in model.seed_states().items():
            if (slot not in self.judged and st.stage == SeedStage.TRAINING and st.telemetry.epoch > 0
                    and st.metrics.epochs_in_current_stage >= self.after and st.telemetry.gradient_norm <= self.still):
                self.judged.add(slot)
                self.failed.add(st.blueprint_id)
                self.waiting.append(slot)
                return TamiyoAction(LifecycleOp.PRUNE, slot, reason=f"{self.name}: not learning")
        if self.waiting:
            for slot in (s for s in model.slot_ids if model.slot(s).stage == SeedStage.DORMANT):
                for b in (b for b in self.fallbacks if b not in self.failed):
                    if model.fits(slot, b) and fits(model, [Germination(1, slot, b)]):
                        self.waiting.pop()
                        self.judged.add(slot)  # the fallback is not judged again
                        return TamiyoAction(LifecycleOp.GERMINATE, slot, b, reason=f"{self.name}: replant")
        return self.inner.decide(observation, model)


def _anyslot(seed, options, arg: str) -> AnySlotTamiyo:
    plan, tilde, fallback = arg.rpartition("~")
    if not tilde or not plan:
        raise ValueError(f"anyslot:{arg}: give anyslot:<plan>~<fallbacks>")
    return AnySlotTamiyo(plan, fallback)


if "anyslot" not in CONTROLLER_REGISTRY:
    register_controller("anyslot:<plan>~<fallbacks>", _anyslot)


def rules() -> list[str]:
    "Every rule: each kind, plan and list of fallbacks."
    return [f"{k}:{plan}~{fb}" for k in KINDS for plan in RULE_PLANS for fb in FALLBACKS]


def as_rule(p, rule: str) -> str | None:
    "The controller a rule plays on a problem: its plan cut to the budget (None: nothing of it fits)."
    kind, rest = rule.split(":", 1)
    plan, fallback = rest.split("~")
    cut = as_played(p, f"plan:{plan}")
    return None if cut is None else f"{kind}:{cut.removeprefix('plan:')}~{fallback}"


def markdown(r: dict) -> str:
    c = r["config"]
    lines = [f"Six problems, two kinds: {'; '.join(f'{k}: ' + ', '.join(ps) for k, ps in c['problems'].items())}. "
             f"Chosen on tune seeds {', '.join(map(str, c['tune_seeds']))} ({r['cost']['tune_episodes']} episodes), "
             f"played on test seeds {c['test_seeds'][0]}-{c['test_seeds'][-1]}; test accuracy %, all / sound / "
             "failing episodes. Rules with one setting: " +
             ", ".join(f"`{r['chosen'][k]}` ({r['tune_means'][r['chosen'][k]]:.1f} on tune)" for k in KINDS) + "."]
    lines += tables(r, WHERE) + per_problem_and_command(r, "the per-problem rule and the plans in `results.json`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="mixed_failures.py")
    problems = [p for ps in PROBLEMS.values() for p in ps]
    a = parse_seeds_and_files(ap, argv, problems, FILES,
                              tune=([1004, 1005, 1006, 1007], "seeds that choose (default: 1004-1007: two sound, two "
                                    "failing)"),
                              test=(list(range(2000, 2010)), "seeds that report (default: 2000-2009)"),
                              happens=("the blueprints fail", "they do not"))
    cache = open_outputs(ap, a.out, a.cache, a.overwrite, FILES)
    t0, (played, on_row) = time.perf_counter(), row_printer()
    every = rules()
    fails = {(p.name, s): p.event.draw(s) is not None for p in problems for s in (*a.tune_seeds, *a.test_seeds)}
    with stops_in_one_line("mixed_failures.py", f"the episodes played so far are kept in {a.cache}"):
        plans = {p.name: plan_controllers(p) for p in problems}
        tuning = [Play(p, c, s) for p in problems for c in plans[p.name] for s in a.tune_seeds]
        tuning += [Play(p, c, s) for p in problems for r in every if (c := as_rule(p, r)) for s in a.tune_seeds]
        rows = run_plays(tuning, cache, on_row=on_row)
        acc = {(x["problem"], x["controller"], x["seed"]): x["test_accuracy"] for x in rows}
        mean = lambda p, c, ss: statistics.fmean(acc[(p.name, c, s)] for s in ss)
        sound_t = [s for s in a.tune_seeds if not fails[(problems[0].name, s)]]
        fail_t = [s for s in a.tune_seeds if fails[(problems[0].name, s)]]
        playable = [r for r in every if all(as_rule(p, r) for p in problems)]
        tune_means = {r: statistics.fmean(mean(p, as_rule(p, r), a.tune_seeds) for p in problems) for r in playable}
        chosen = {k: best({r: v for r, v in tune_means.items() if r.startswith(k + ":")}) for k in KINDS}
        choice = {}  # per problem: arm -> (controller on sound episodes, controller on failing ones)
        on_tune = {}  # per problem: the two oracles on the very tune episodes that chose them
        for p in problems:
            ol = best({c: mean(p, c, a.tune_seeds) for c in plans[p.name]})
            own = best({c: mean(p, c, a.tune_seeds) for r in every if (c := as_rule(p, r))})
            hs = [best({c: mean(p, c, ss) for c in plans[p.name]}) for ss in (sound_t, fail_t)]
            on_tune[p.name] = {"open-loop oracle": mean(p, ol, a.tune_seeds),
                               "hindsight oracle": statistics.fmean([mean(p, hs[0], sound_t), mean(p, hs[1], fail_t)])}
            choice[p.name] = {"open-loop oracle": (ol, ol), "hindsight oracle": tuple(hs),
                              "per-problem rule": (own, own)}
            choice[p.name] |= {f"{k} rule, one setting": (as_rule(p, chosen[k]),) * 2 for k in KINDS}
        jobs = [Play(p, c[fails[(p.name, s)]], s) for p in problems for c in choice[p.name].values()
                for s in a.test_seeds]
        test_rows = run_plays(jobs, cache, on_row=on_row)
    got = {(x["problem"], x["controller"], x["seed"]): x["test_accuracy"] for x in test_rows}
    arms = list(next(iter(choice.values())))
    ep = {arm: {(p.name, s): got[(p.name, choice[p.name][arm][fails[(p.name, s)]], s)]
                for p in problems for s in a.test_seeds} for arm in arms}
    groups = {"all problems": problems, **PROBLEMS}
    keys, means = split_means(ep, groups, a.test_seeds, fails, WHERE)
    one = max((f"{k} rule, one setting" for k in KINDS), key=lambda arm: means[arm]["all problems"]["all"])
    comparisons = [("hindsight oracle", "open-loop oracle"), ("hindsight oracle", one),
                   ("hindsight oracle", "per-problem rule"), (one, "open-loop oracle"), ("per-problem rule", one),
                   ("anyslot rule, one setting", "replant rule, one setting")]
    paired = paired_differences(ep, keys, comparisons)
    per_problem = {p.name: {arm: statistics.fmean(ep[arm][(p.name, s)] for s in a.test_seeds) for arm in arms}
                   for p in problems}
    r = {
        "command": " ".join(["python lab/probes/mixed_failures.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"problems": {k: [p.name for p in ps] for k, ps in PROBLEMS.items()},
                   "failing": {p.name: list(p.event.blueprints) for p in problems}, "tune_seeds": a.tune_seeds,
                   "test_seeds": a.test_seeds, "rule_plans": list(RULE_PLANS), "fallbacks": list(FALLBACKS),
                   **git_state(Path.cwd())},
        "cost": {"tune_episodes": len(set(tuning)), "test_episodes": len(set(jobs))},
        "groups": list(groups), "tune_means": tune_means, "chosen": chosen, "best_one_setting": one,
        "choice": {p: {arm: list(c) for arm, c in v.items()} for p, v in choice.items()},
        "means": means, "paired": paired, "per_problem": per_problem, "oracles_on_tune": on_tune,
        "seconds": round(time.perf_counter() - t0, 1), "episodes_played": len(played),
        "episodes": {arm: {f"{p}|{s}": v for (p, s), v in d.items()} for arm, d in ep.items()},
    }
    write_report(r, markdown, a.out, a.cache)


if __name__ == "__main__":
    main()
