"""PPO on a duds suite, split into the test episodes whose seeds fail and those whose seeds are sound.

Reads the suite benchmark's results.json (`bench/bench_learning.py --suite duds-heldout ...`), plays beside it the
hindsight oracle and the tuned replanting controller that `lab/probes/events_headroom.py` and
`lab/probes/duds_replant.py` chose on the same tune seeds (their JSON, e.g. `nbs/results/duds/epochs1`: planting
epoch 1, as the suite benchmark's plan search) on the benchmark's test seeds (through the episode cache, so only
episodes not played yet cost anything), and prints and writes: every arm's mean on all / sound / failing test
episodes; PPO (the mean over run seeds), each run seed and the open-loop replay less every arm, paired over problems x
test seeds, with 95% CIs; and what the policies did on failing and sound episodes (germinations, prunes, plans).

    OMP_NUM_THREADS=1 python lab/probes/duds_split.py --results runs/pduds/results.json \\
        --duds nbs/results/duds/epochs1 --cache runs/pduds/plays.jsonl --out nbs/results/duds_ppo
"""

import collections
import json
import statistics
from pathlib import Path

from esper.cli import OneLineParser, add_overwrite_argument, earlier_results
from esper.leyline.files import check_output_dir, json_text, write_files_atomic
from esper.leyline.stats import mean_ci95
from esper.tamiyo.plan_search import Play, PlayCache, run_plays
from esper.tamiyo.problems import get_suite
import esper.tamiyo.suites  # noqa: F401  (registers the duds suites)

KINDS = ("all", "sound", "fails")
#: What one run writes into --out.
FILES = ("split.json", "split.md")


def ci(xs):
    return list(mean_ci95(xs)) if xs else None


def analyse(res: dict, duds: Path, cache: PlayCache) -> dict:
    summ = res["summary"]
    suite, test, runs = get_suite(summ["suite"]), summ["test_seeds"], summ["run_seeds"]
    split = json.loads((duds / "events_headroom.json").read_text())["problems"]
    hind = {p["problem"]: p["hindsight_plans"] for p in split}
    repl = {p["problem"]: p["replant"] for p in json.loads((duds / "replant.json").read_text())["problems"]}
    acc = {}
    for r in res["episodes"]:
        if r.get("phase") == "plan search":
            continue
        acc[(r["problem"], r["controller"], r["seed"], r.get("run_seed"))] = r["test_accuracy"]
    arms = {k: {} for k in ["ppo", *[f"ppo run {k}" for k in runs], "open-loop",
                            *[f"open-loop run {k}" for k in runs], "oracle", "best rule", "greedy", "heuristic",
                            "static", "random", "hindsight oracle", "tuned replant"]}
    if all("selector_plan" in pr for pr in summ["problems"]):  # benchmarks since the selector joined them
        arms["selector"] = {}
    fails = {}
    for pr in summ["problems"]:
        p = suite[pr["problem"]]
        for s in test:
            fails[(p.name, s)] = p.event.draw(s) is not None
        plays = {s: Play(p, hind[p.name]["shifts" if fails[(p.name, s)] else "keeps"], s) for s in test}
        hrows = run_plays(list(plays.values()), cache, 1)
        rrows = run_plays([Play(p, repl[p.name], s) for s in test], cache, 1)
        for s, h, r in zip(test, hrows, rrows):
            key = (p.name, s)
            arms["hindsight oracle"][key] = h["test_accuracy"]
            arms["tuned replant"][key] = r["test_accuracy"]
            for k in runs:
                arms[f"ppo run {k}"][key] = acc[(p.name, "ppo", s, k)]
                arms[f"open-loop run {k}"][key] = acc[(p.name, "open-loop", s, k)]
            arms["ppo"][key] = statistics.fmean(acc[(p.name, "ppo", s, k)] for k in runs)
            arms["open-loop"][key] = statistics.fmean(acc[(p.name, "open-loop", s, k)] for k in runs)
            arms["oracle"][key] = acc[(p.name, pr["oracle_plan"], s, None)]
            arms["best rule"][key] = acc[(p.name, pr["best_rule_plan"], s, None)]
            for a in ("greedy", "heuristic", "static", "random"):
                arms[a][key] = acc[(p.name, a, s, None)]
            if "selector" in arms:
                arms["selector"][key] = acc[(p.name, pr["selector_plan"], s, None)]
    keys = list(arms["ppo"])
    sel = {"all": keys, "sound": [k for k in keys if not fails[k]], "fails": [k for k in keys if fails[k]]}
    means = {a: {w: statistics.fmean(v[k] for k in sel[w]) for w in KINDS} for a, v in arms.items()}
    def less(a, b):
        return {w: ci([arms[a][k] - arms[b][k] for k in sel[w]]) for w in KINDS}
    paired = {f"ppo less {b}": less("ppo", b) for b in arms if not b.startswith("ppo")}
    paired |= {f"ppo run {k} less open-loop run {k}": less(f"ppo run {k}", f"open-loop run {k}") for k in runs}
    paired |= {f"{a} less oracle": less(a, "oracle") for a in ("hindsight oracle", "tuned replant", "open-loop")}
    # what the policies did
    ppo_rows = [r for r in res["episodes"] if r["controller"] == "ppo" and r["seed"] in test]
    behaviour = {}
    for w in ("sound", "fails"):
        rs = [r for r in ppo_rows if fails[(r["problem"], r["seed"])] == (w == "fails")]
        gm = [r for r in rs if "global_mix" in (r.get("plan") or "")]
        behaviour[w] = {
            "episodes": len(rs),
            "germinated_mean": statistics.fmean(r["seeds_germinated"] for r in rs),
            "with_global_mix_planted": len(gm),
            "pruned_any": sum(r["seeds_pruned"] > 0 for r in rs),
            "global_mix_and_pruned": sum(r["seeds_pruned"] > 0 for r in gm),
            "pruned_and_germinated_again": sum(r["seeds_pruned"] > 0 and r["seeds_germinated"] >= 2 for r in gm),
            "plans": dict(collections.Counter(r.get("plan") for r in rs).most_common()),
            "grown": dict(collections.Counter(r.get("grown") for r in rs).most_common(12)),
        }
    per_problem = []
    for pr in summ["problems"]:
        row = {"problem": pr["problem"]}
        for a in ("ppo", "open-loop", "oracle", "hindsight oracle", "tuned replant", "best rule", "greedy"):
            for w in ("sound", "fails"):
                row[f"{a} {w}"] = statistics.fmean(arms[a][(pr["problem"], s)] for s in test
                                                   if fails[(pr["problem"], s)] == (w == "fails"))
        per_problem.append(row)
    failing_seeds = sorted({s for (p, s), f in fails.items() if f})
    return {"suite": summ["suite"], "version": summ["version"], "test_seeds": test, "run_seeds": runs,
            "failing_test_seeds": failing_seeds, "pairs": {w: len(v) for w, v in sel.items()},
            "hindsight_plans": hind, "replant_controllers": repl,
            "means": means, "paired": paired, "behaviour": behaviour, "per_problem": per_problem,
            "episodes": {a: {f"{p}|{s}": v for (p, s), v in d.items()} for a, d in arms.items()}}


def lifecycles(res: dict, train_suite: str, only_fails: bool = False) -> list[dict]:
    """Each run seed's policy replayed greedily (as the benchmark plays it) on every test episode, with its lifecycle
    log: the germinations and prunes, and whether the replay's accuracy matches the benchmark's row."""
    from esper.leyline import ActionSpace
    from esper.simic.envs.env import load_ppo_controller
    from esper.tamiyo.episode import run_episode

    summ = res["summary"]
    suite, acts = get_suite(summ["suite"]), get_suite(train_suite)
    rec = {(r["problem"], r["seed"], r["run_seed"]): r["test_accuracy"] for r in res["episodes"]
           if r["controller"] == "ppo"}
    out = []
    for k, ckpt in res["checkpoints"].items():
        controller = load_ppo_controller(ckpt)
        for p in suite.problems:
            for s in summ["test_seeds"]:
                fails = p.event.draw(s) is not None
                if only_fails and not fails:
                    continue
                r = run_episode(p.load_task(s), controller, None, s, actions=ActionSpace(acts.blueprints), problem=p)
                events = [{"epoch": e.get("epoch"), "slot": e.get("slot_id"), "to": e.get("to"),
                           "blueprint": e.get("blueprint")} for e in r.lifecycle_log
                          if e.get("to") in ("GERMINATED", "PRUNED", "FOSSILIZED")]
                acc = r.to_dict().get("final_accuracy")
                out.append({"problem": p.name, "seed": s, "run_seed": k, "fails": fails, "events": events,
                            "test_accuracy": acc, "benchmark_accuracy": rec.get((p.name, s, k))})
    return out


def lifecycle_summary(eps: list[dict]) -> dict:
    "Per kind of episode: global_mix planted, pruned (and when), something planted after a prune."
    out = {}
    for w in ("sound", "fails"):
        es = [e for e in eps if e["fails"] == (w == "fails")]
        gm = [e for e in es if any(v["to"] == "GERMINATED" and v["blueprint"] == "global_mix" for v in e["events"])]
        pruned_gm, after = [], 0
        for e in gm:
            ev = e["events"]
            slots = {v["slot"] for v in ev if v["to"] == "GERMINATED" and v["blueprint"] == "global_mix"}
            pr = [v for v in ev if v["to"] == "PRUNED" and v["slot"] in slots]
            if pr:
                pruned_gm.append(pr[0]["epoch"])
                after += any(v["to"] == "GERMINATED" and v["epoch"] > pr[0]["epoch"] for v in ev)
        out[w] = {"episodes": len(es), "global_mix_planted": len(gm), "a_global_mix_seed_pruned": len(pruned_gm),
                  "prune_epochs": dict(collections.Counter(pruned_gm)), "germinated_after_that_prune": after,
                  "any_prune": sum(any(v["to"] == "PRUNED" for v in e["events"]) for e in es),
                  "replay_matches_benchmark": sum(e["benchmark_accuracy"] is not None and
                                                  abs(e["test_accuracy"] - e["benchmark_accuracy"]) < 1e-6
                                                  for e in es)}
    return out


def merge(results: list[dict]) -> dict:
    "One benchmark's results with the run seeds and PPO episodes of the others added (same suite and test seeds)."
    first = results[0]
    for other in results[1:]:
        o, f = other["summary"], first["summary"]
        assert (o["suite"], o["test_seeds"]) == (f["suite"], f["test_seeds"]), "pool benchmarks of one suite and seeds"
        for plan in ("oracle_plan", "selector_plan"):  # the same rivals, or the pooled rows would mix them
            assert [p.get(plan) for p in o["problems"]] == [p.get(plan) for p in f["problems"]], plan
        f["run_seeds"] = f["run_seeds"] + o["run_seeds"]
        first["episodes"] = first["episodes"] + [r for r in other["episodes"] if r.get("run_seed") is not None]
        first["checkpoints"] |= other["checkpoints"]
    return first


def fmt(c):
    return "n/a" if c is None else f"{c[0]:+.2f} ± {c[1]:.2f}"


def markdown(r: dict) -> str:
    n = r["pairs"]
    out = [f"Suite `{r['suite']}` v{r['version']}, test seeds {r['test_seeds'][0]}-{r['test_seeds'][-1]} "
           f"(failing: {', '.join(map(str, r['failing_test_seeds']))}), PPO run seeds {r['run_seeds']}; "
           f"pairs: {n['all']} all / {n['sound']} sound / {n['fails']} failing (problems x test seeds).", "",
           "| arm | all | sound | failing |", "|---|---|---|---|"]
    for a, m in r["means"].items():
        out.append(f"| {a} | {m['all']:.1f} | {m['sound']:.1f} | {m['fails']:.1f} |")
    out += ["", "| paired difference (95% CI) | all | sound | failing |", "|---|---|---|---|"]
    for k, v in r["paired"].items():
        out.append(f"| {k} | {fmt(v['all'])} | {fmt(v['sound'])} | {fmt(v['fails'])} |")
    out += ["", "| problem | " + " | ".join(k for k in r["per_problem"][0] if k != "problem") + " |",
            "|---|" + "---|" * (len(r["per_problem"][0]) - 1)]
    for p in r["per_problem"]:
        out.append(f"| {p['problem']} | " + " | ".join(f"{v:.1f}" for k, v in p.items() if k != "problem") + " |")
    out += ["", "What the policies did on test episodes (all run seeds):", ""]
    for w, b in r["behaviour"].items():
        out.append(f"- {w}: {b['episodes']} episodes, {b['germinated_mean']:.2f} germinations each; global_mix planted "
                   f"in {b['with_global_mix_planted']}, a seed pruned in {b['pruned_any']} (of those with global_mix: "
                   f"{b['global_mix_and_pruned']}, then germinated again: {b['pruned_and_germinated_again']}); plans: "
                   + ", ".join(f"`{p}` {c}" for p, c in list(b["plans"].items())[:8]))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__.split("\n")[0], prog="duds_split.py")
    ap.add_argument("--results", nargs="+", required=True, help="results.json of one or more benchmarks of the same "
                    "suite, test seeds and settings but other run seeds: their policies are pooled")
    ap.add_argument("--duds", default="nbs/results/duds/epochs1")
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lifecycles", action="store_true", help="replay each policy on every test episode to log "
                    "its germinations and prunes (the benchmark's rows keep only the last seed of each slot)")
    add_overwrite_argument(ap)
    a = ap.parse_args(argv)
    found = earlier_results(a.out, FILES)
    if found and not a.overwrite:  # checked before any episode is played
        ap.error(f"--out {a.out} already holds {', '.join(found)}; pass --overwrite to replace them")
    check_output_dir(a.out, "--out")
    results = []
    for f in a.results:
        try:
            res = json.loads(Path(f).read_text())
            res["checkpoints"] = {s["train_seed"]: str(Path(f).parent / f"seed{s['train_seed']}" / "agent.pt")
                                  for s in res["ppo_seeds"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--results {f}: not a suite benchmark's results.json ({type(e).__name__}: {e})")
        results.append(res)
    train_suite = results[0]["config"].get("train_suite", "duds-train")
    res = merge(results)
    r = analyse(res, Path(a.duds), PlayCache(a.cache))
    r["results"] = a.results
    if a.lifecycles:
        eps = lifecycles(res, train_suite)
        r["lifecycle_summary"] = lifecycle_summary(eps)
        r["lifecycles"] = eps
    md = markdown(r)
    if "lifecycle_summary" in r:
        md += "\nReplayed with lifecycle logs (global_mix planted, a global_mix seed pruned, at which epoch, and a "
        md += "germination after that prune):\n\n" + "".join(f"- {w}: {json.dumps(v)}\n"
                                                            for w, v in r["lifecycle_summary"].items())
    print(md)
    write_files_atomic(Path(a.out), {"split.json": json_text(r, indent=1), "split.md": md})


if __name__ == "__main__":
    main()
