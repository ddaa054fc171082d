"""Longer runs: does a data shift leave more room for reacting in 30 epochs than in 10, and does a rule with one
setting take it? (issue 75, item 4: what longer runs buy)

Four MNIST-1D problems of 30 epochs (three times the suites' ten; compute budgets scaled alike), whose data shifts at an
epoch drawn in 8-16 in half the episodes (the draw reads only the task seed): two lose their order (`shuffle_seq`),
where ten-epoch runs found the shift came too late to reward another plan (lab page 16), and two gain correlated noise,
which lowers every plan alike. On the tune seeds (default 1000 and 1006 keep their data, 1002 and 1004 shift at epochs
11 and 12) it plays the plans below and every rule, and chooses per problem the open-loop oracle (the best plan), the
hindsight oracle (the best plan on the tune episodes that keep their data, and the best on those that shift) and the
best rule, and over all four problems the rule with one setting of each kind:
- `switch:<plan>~<fallback>/<drop>` (this probe's, registered here only): plays the plan but keeps its seeds in
  HOLDING, prunable, instead of fossilizing them; once validation accuracy falls `drop` points below its best, it
  prunes every live seed not of the fallback's blueprint and grows the fallback in each freed slot after the embargo;
- `cswitch:<plan>~<fallback>/<x>` (this probe's too): the same, fired instead by a held seed whose counterfactual
  contribution falls below `x` points, the issue's "prune a seed whose contribution stays below x" for seeds kept
  prunable;
- `reactive:<k>/<x>` (the heuristic's plateau and contribution knobs, as in the plan search).
Beside them, a bound on what swapping after the shift can buy: `knows:<plan>~global_mix`, the open-loop oracle's plan
swapped as `switch` does, but told the episode's shift epoch, so that it swaps at the first decision that sees the
shifted data and never on a false alarm.
Each chosen arm plays the test seeds (default: the first five seeds from 2000 on whose data shifts, at epochs 11-14,
and the first five whose data does not, so that the mean over all is at the event's chance of one half); it prints
and writes the test accuracy per problem and over each kind, on all, kept and shifted episodes, and the paired
differences (95% CIs over problems x test seeds). From the project root (one process: `switch` lives in this script):

    OMP_NUM_THREADS=1 .venv/bin/python lab/probes/long_shifts.py --cache runs/long_shifts/plays.jsonl \
        --out nbs/results/long_shifts
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
from esper.leyline import LIVE_STAGES, LifecycleOp, SeedStage
from esper.tamiyo.controllers import register_controller
from esper.tamiyo.events import DataShift
from esper.tamiyo.features import ops_allowed
from esper.tamiyo.plan_search import REACTIVE_GRID, Play, as_played, run_plays
from esper.tamiyo.plans import Germination, PlanTamiyo, fits
from esper.tamiyo.signals import TamiyoAction
from esper.tamiyo.suites import problem

FILES = ("results.json", "results.md")
EPOCHS, FIRST, LAST = 30, 8, 16


def _long(name: str, shift: dict, **kw):
    p = replace(problem(name, **kw), max_epochs=EPOCHS)
    return replace(p, event=DataShift(tuple(shift.items()), FIRST, LAST, 0.5))


#: The problems, by kind of shift.
PROBLEMS = {
    "loses its order": (
        _long("mnist1d-to-shuffled-c90-e30", {"shuffle_seq": True}, compute_budget=90.0),
        _long("mnist1d-to-shuffled-p2500-e30", {"shuffle_seq": True}, param_budget=2500),
    ),
    "gains noise": (
        _long("mnist1d-to-noisy-c90-e30", {"corr_noise_scale": 1.0}, compute_budget=90.0),
        _long("mnist1d-to-noisy-p2500-e30", {"corr_noise_scale": 1.0}, param_budget=2500),
    ),
}
#: The plans searched (cut to each budget): one or two seeds, planted at epoch 1, 9 or 17.
PLANS = ("conv_small@block1/1", "global_mix@block1/1", "conv_small@block1/1+global_mix@block2/1",
         "conv_small@block1/1+global_mix@block2/9", "conv_small@block1/1+global_mix@block2/17",
         "global_mix@block1/1+conv_small@block2/1", "global_mix@block1/1+global_mix@block2/9",
         "dilated@block1/1+global_mix@block2/9", "global_mix@block1/1+dilated@block2/1")
#: The plans a switching rule may play, its fallback and the drops it may react to.
SWITCH_PLANS = ("conv_small@block1/1+global_mix@block2/1", "dilated@block1/1+global_mix@block2/1")
DROPS = (3, 6, 12)
#: The contributions (points of validation accuracy) below which a held seed fires a `cswitch` rule.
CONTRIBUTIONS = (5, 10, 20)
#: The heuristic's settings tried: plant after k epochs without progress (its prune threshold x changed no episode of
#: the duds suites, lab page 17, so one value).
REACTIVE = tuple(r for r in REACTIVE_GRID if r.endswith("/0"))
KINDS = ("switch", "cswitch", "reactive")
WHERE = ("all", "keeps", "shifts")
#: The first five seeds from 2000 on whose data shifts, and the first five whose data does not.
TEST_SEEDS = [2000, 2005, 2013, 2021, 2024, 2001, 2002, 2003, 2004, 2006]


class SwitchTamiyo:
    "Plays a plan holding its seeds prunable; on a drop in validation accuracy, swaps them for the fallback's seeds."

    kind = "switch"

    def __init__(self, plan: str, fallback: str, drop: float):
        self.inner, self.fallback, self.drop = PlanTamiyo(plan), fallback, float(drop)
        self.name = f"{self.kind}:{self.inner.plan}~{fallback}/{drop:g}"
        self.reset()

    def reset(self) -> None:
        self.inner.reset()
        self.switched, self.waiting = False, []

    def fires(self, observation, model) -> bool:
        "Whether to swap now: validation accuracy `drop` points or more below its best."
        return observation["best_val_accuracy"] - observation["val_accuracy"] >= self.drop

    def decide(self, observation, model) -> TamiyoAction:
        if not self.switched and self.fires(observation, model):
            self.switched = True
            self.inner.pending = [g for g in self.inner.pending if g.blueprint == self.fallback]
        if self.switched:
            for slot, st in model.seed_states().items():
                if st.stage in LIVE_STAGES and st.blueprint_id != self.fallback and slot not in self.waiting:
                    self.waiting.append(slot)
                    return TamiyoAction(LifecycleOp.PRUNE, slot, reason=f"{self.name}: the data changed")
            for slot in list(self.waiting):
                if model.slot(slot).stage == SeedStage.DORMANT:
                    self.waiting.remove(slot)
                    if model.fits(slot, self.fallback) and fits(model, [Germination(1, slot, self.fallback)]):
                        return TamiyoAction(LifecycleOp.GERMINATE, slot, self.fallback, reason=f"{self.name}: swap")
        a = self.inner.decide(observation, model)
        if a.op == LifecycleOp.GERMINATE or self.switched:
            return a
        for slot in model.slot_ids:  # advance as the plan does, but hold every seed in HOLDING: it stays prunable
            allowed = dict(zip(LifecycleOp, ops_allowed(model.slot(slot).stage)))
            if model.gate_open(slot) and allowed[LifecycleOp.ADVANCE] and not allowed[LifecycleOp.FOSSILIZE]:
                return TamiyoAction(LifecycleOp.ADVANCE, slot, reason=self.name)
        return TamiyoAction.wait(self.name)


class ContributionSwitchTamiyo(SwitchTamiyo):
    "`SwitchTamiyo`, fired instead by a held seed whose counterfactual contribution falls below `drop` points."

    kind = "cswitch"

    def fires(self, observation, model) -> bool:
        return any(st.stage == SeedStage.HOLDING and st.blueprint_id != self.fallback
                   and st.metrics.contribution is not None and st.metrics.contribution < self.drop
                   for st in model.seed_states().values())


class KnowsWhenTamiyo(SwitchTamiyo):
    "`SwitchTamiyo` told the episode's shift epoch: it swaps at the first decision that sees the shifted data."

    kind = "knows"

    def __init__(self, plan: str, fallback: str, at: int | None):
        super().__init__(plan, fallback, 0)
        self.at, self.name = at, f"knows:{self.inner.plan}~{fallback}"

    def fires(self, observation, model) -> bool:
        return self.at is not None and observation["epoch"] >= self.at


def _knows(seed, options, arg: str) -> KnowsWhenTamiyo:
    plan, tilde, fallback = arg.rpartition("~")
    if not (tilde and plan and fallback):
        raise ValueError(f"knows:{arg}: give knows:<plan>~<fallback>")
    event = next(iter(PROBLEMS.values()))[0].event  # every problem here draws its shift epoch alike
    return KnowsWhenTamiyo(plan, fallback, event.draw(seed))


register_controller("knows:<plan>~<fallback>", _knows)  # again on each load: the factory reads this PROBLEMS


def _factory(cls):
    def make(seed, options, arg: str):
        rest, slash, drop = arg.rpartition("/")
        plan, tilde, fallback = rest.rpartition("~")
        if not (slash and tilde and plan and fallback):
            raise ValueError(f"{cls.kind}:{arg}: give {cls.kind}:<plan>~<fallback>/<threshold>")
        return cls(plan, fallback, float(drop))
    return make


for _cls in (SwitchTamiyo, ContributionSwitchTamiyo):
    register_controller(f"{_cls.kind}:<plan>~<fallback>/<threshold>", _factory(_cls))


def rules() -> list[str]:
    "Every rule of each kind."
    return ([f"switch:{p}~global_mix/{d}" for p in SWITCH_PLANS for d in DROPS]
            + [f"cswitch:{p}~global_mix/{x}" for p in SWITCH_PLANS for x in CONTRIBUTIONS] + list(REACTIVE))


def as_rule(p, rule: str) -> str | None:
    "The controller a rule plays on a problem: a switching rule's plan cut to the budget (None: nothing fits)."
    kind, _, rest = rule.partition(":")
    if kind not in ("switch", "cswitch"):
        return rule
    rest, _, drop = rest.rpartition("/")
    plan, _, fallback = rest.rpartition("~")
    cut = as_played(p, f"plan:{plan}")
    return None if cut is None or cut == "plan:" else f"{kind}:{cut.removeprefix('plan:')}~{fallback}/{drop}"


def plans_of(p) -> list[str]:
    "The searched plans the problem's budget lets play, each once."
    return list(dict.fromkeys(c for c in (as_played(p, f"plan:{x}") for x in PLANS) if c and c != "plan:"))


def markdown(r: dict) -> str:
    c = r["config"]
    lines = [f"Four problems of {c['epochs']} epochs, shifts at an epoch in {c['shift_epochs'][0]}-"
             f"{c['shift_epochs'][1]} in half the episodes; "
             f"{'; '.join(f'{k}: ' + ', '.join(ps) for k, ps in c['problems'].items())}. "
             f"Chosen on tune seeds {', '.join(map(str, c['tune_seeds']))} ({r['cost']['tune_episodes']} episodes), "
             f"played on test seeds {c['test_seeds'][0]}-{c['test_seeds'][-1]}; test accuracy %, all / kept / "
             "shifted episodes. Rules with one setting: " +
             ", ".join(f"`{r['chosen'][k]}` ({r['tune_means'][r['chosen'][k]]:.1f} on tune)" for k in KINDS) + "."]
    lines += tables(r, WHERE) + per_problem_and_command(r, "the controllers each arm played are in `results.json`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0], prog="long_shifts.py")
    problems = [p for ps in PROBLEMS.values() for p in ps]
    a = parse_seeds_and_files(ap, argv, problems, FILES,
                              tune=([1000, 1002, 1004, 1006], "seeds that choose (default: 1000-1006, even)"),
                              test=(TEST_SEEDS, "seeds that report (default: five that shift, five that do not)"),
                              happens=("the data shifts", "it does not"))
    cache = open_outputs(ap, a.out, a.cache, a.overwrite, FILES)
    t0, (played, on_row) = time.perf_counter(), row_printer()
    every = rules()
    shifts = {(p.name, s): p.event.draw(s) is not None for p in problems for s in (*a.tune_seeds, *a.test_seeds)}
    with stops_in_one_line("long_shifts.py", f"the episodes played so far are kept in {a.cache}"):
        plans = {p.name: plans_of(p) for p in problems}
        tuning = [Play(p, c, s) for p in problems for c in plans[p.name] for s in a.tune_seeds]
        tuning += [Play(p, c, s) for p in problems for r in every if (c := as_rule(p, r)) for s in a.tune_seeds]
        rows = run_plays(tuning, cache, on_row=on_row)
        acc = {(x["problem"], x["controller"], x["seed"]): x["test_accuracy"] for x in rows}

        def mean(p, c, ss):
            return statistics.fmean(acc[(p.name, c, s)] for s in ss)

        playable = [r for r in every if all(as_rule(p, r) for p in problems)]
        tune_means = {r: statistics.fmean(mean(p, as_rule(p, r), a.tune_seeds) for p in problems) for r in playable}
        chosen = {k: best({r: v for r, v in tune_means.items() if r.startswith(k + ":")}) for k in KINDS}
        choice, on_tune = {}, {}  # per problem: arm -> (controller on kept episodes, on shifted ones); the oracles
        for p in problems:
            kept_t = [s for s in a.tune_seeds if not shifts[(p.name, s)]]
            shift_t = [s for s in a.tune_seeds if shifts[(p.name, s)]]
            ol = best({c: mean(p, c, a.tune_seeds) for c in plans[p.name]})
            own = best({c: mean(p, c, a.tune_seeds) for r in every if (c := as_rule(p, r))})
            hs = [best({c: mean(p, c, ss) for c in plans[p.name]}) for ss in (kept_t, shift_t)]
            on_tune[p.name] = {"open-loop oracle": statistics.fmean([mean(p, ol, kept_t), mean(p, ol, shift_t)]),
                               "hindsight oracle": statistics.fmean([mean(p, hs[0], kept_t), mean(p, hs[1], shift_t)])}
            choice[p.name] = {"open-loop oracle": (ol, ol), "hindsight oracle": tuple(hs),
                              "per-problem rule": (own, own)}
            choice[p.name] |= {f"{k} rule, one setting": (as_rule(p, chosen[k]),) * 2 for k in KINDS}
            knows = f"knows:{ol.removeprefix('plan:')}~global_mix"
            choice[p.name]["open-loop plan, swapped at the shift"] = (knows, knows)
        jobs = [Play(p, c[shifts[(p.name, s)]], s) for p in problems for c in choice[p.name].values()
                for s in a.test_seeds]
        test_rows = run_plays(jobs, cache, on_row=on_row)
    got = {(x["problem"], x["controller"], x["seed"]): x["test_accuracy"] for x in test_rows}
    arms = list(next(iter(choice.values())))
    ep = {arm: {(p.name, s): got[(p.name, choice[p.name][arm][shifts[(p.name, s)]], s)]
                for p in problems for s in a.test_seeds} for arm in arms}
    groups = {"all problems": problems, **PROBLEMS}
    keys, means = split_means(ep, groups, a.test_seeds, shifts, WHERE)
    one = max((f"{k} rule, one setting" for k in KINDS), key=lambda arm: means[arm]["all problems"]["all"])
    comparisons = [("hindsight oracle", "open-loop oracle"), *(("hindsight oracle", f"{k} rule, one setting")
                                                                for k in KINDS),
                   ("open-loop plan, swapped at the shift", "open-loop oracle"),
                   ("hindsight oracle", "open-loop plan, swapped at the shift"),
                   ("hindsight oracle", "per-problem rule"), (one, "open-loop oracle"), ("per-problem rule", one)]
    paired = paired_differences(ep, keys, comparisons)
    per_problem = {p.name: {arm: statistics.fmean(ep[arm][(p.name, s)] for s in a.test_seeds) for arm in arms}
                   for p in problems}
    r = {
        "command": " ".join(["python lab/probes/long_shifts.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": {"problems": {k: [p.name for p in ps] for k, ps in PROBLEMS.items()}, "epochs": EPOCHS,
                   "shift_epochs": [FIRST, LAST], "tune_seeds": a.tune_seeds, "test_seeds": a.test_seeds,
                   "shift_at": {f"{p}|{s}": problems[0].event.draw(s) for (p, s) in shifts if p == problems[0].name},
                   "plans": list(PLANS), "switch_plans": list(SWITCH_PLANS), "drops": list(DROPS),
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
