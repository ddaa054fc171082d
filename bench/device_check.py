"""The throughput checks a GPU box is lent for, as one command: a population of hosts on the GPU against CPU workers.

A device machine is lent for minutes, so everything it should measure runs from one command. Each step runs in its
own process under its own time limit and the whole under `--budget` seconds: a step that overruns is stopped (its
worker processes with it) and the next one starts, so what finished still comes back. The steps, in order of need:

1. `bench_population.py --profile 8 64 --envs`: where one population epoch's time goes on the device;
2. `bench_population.py --group-sizes 1 8 64 256 --envs`: one stacked step against the env-by-env step, per group;
3. `bench_population.py --envs 64`: the PPO trainer with 64 envs on the device, env by env and as one population;
4. `bench_workers.py --workers 1 16 --independent`: the same trainer with its hosts on the CPU, in 1 and 16 worker
   processes (and as 1 and 16 independent processes);
5. `bench_population.py --envs 256`: the population curve one step further, if time is left.

On an H200 (2026-11-30, `nbs/results/gpu_h200/`) the steps took 23, 201, 56, 72 and 183 s (535 s): the default
budget just holds them, so give the device call a limit of about 590 s. Steps 3 to 5 train the same episodes
(`--max-epochs`, 30 batches of 64 per epoch). `summary.json` then sets the figures side by side: the population's
host-training samples per second over 16 workers' (the aim: 3x or more), 16 workers over one (12x or more), and
every step's exit status, seconds and file. `log.txt` holds every step's output. Nothing in `--out` is replaced
without `--overwrite`.

On a GPU box whose Python has PyTorch but not the rest of esper's needs, from the project root: the missing
packages fetched as wheels where a package index can be reached,

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        -d .whl fastcore==1.14.5 gymnasium==1.4.0 farama-notifications mnist1d==0.0.2.post1

then, on the box (its own PyTorch, esper from this checkout; `--out` defaults to $OUT where that is set):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \
        PYTHONPATH=/tmp/site python3 bench/device_check.py --out $OUT

On a CPU, tiny, to check the script itself (about a minute):

    OMP_NUM_THREADS=1 .venv/bin/python bench/device_check.py --device cpu --tiny --out /tmp/device_check
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's esper, installed or not (a device machine has it only here)

from esper.cli import OneLineParser, positive_int
from esper.leyline.files import relative_paths, write_json_atomic

FILES = ("pop_profile.json", "pop_groups.json", "pop_envs.json", "pop_envs_more.json", "workers", "summary.json",
         "log.txt")


def steps(args) -> list[tuple[str, float, list[str], str]]:
    "(name, seconds allowed, script and arguments, what it writes) of every step."
    out, dev = Path(args.out), ["--device", args.device]
    if args.tiny:  # the smallest run of every step: checks the script, measures nothing
        k, more, groups, profile = 2, 3, ["1", "2"], ["2"]
        ep = ["--max-epochs", "2", "--max-batches", "2"]
        workers = ["--workers", "1", "2", "--envs", "2"]
    else:
        k, more, groups, profile = 64, 256, ["1", "8", "64", "256"], ["8", "64"]
        ep = ["--max-epochs", str(args.max_epochs), "--max-batches", "30"]
        workers = ["--workers", "1", "16", "--envs", "16"]
    pop = ["bench_population.py", *dev]
    return [
        ("profile", 60, [*pop, "--profile", *profile, "--envs", "--out", str(out / "pop_profile.json")],
         "pop_profile.json"),
        ("groups", 240, [*pop, "--group-sizes", *groups, "--envs", "--out", str(out / "pop_groups.json")],
         "pop_groups.json"),
        ("population", 180, [*pop, "--envs", str(k), *ep, "--repeats", "1", "--out", str(out / "pop_envs.json")],
         "pop_envs.json"),
        ("workers", 150, ["bench_workers.py", *workers, "--batches", "2", *ep, "--independent", "--overwrite",
                          "--out", str(out / "workers")], "workers/scaling.json"),
        ("population, more envs", 240, [*pop, "--envs", str(more), *ep, "--repeats", "1", "--out",
                                        str(out / "pop_envs_more.json")], "pop_envs_more.json"),
    ]


def run_step(name: str, argv: list[str], limit: float, log, env: dict) -> dict:
    "Run one bench script under `limit` seconds (its process group stopped if it overruns); its record."
    cmd = [sys.executable, str(ROOT / "bench" / argv[0]), *argv[1:]]
    log.write(f"\n=== {name}: {shlex.join(cmd)} (at most {limit:.0f} s)\n")
    log.flush()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
    try:
        rc, timed_out = p.wait(timeout=limit), False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the step and any worker processes it started
        rc, timed_out = p.wait(), True
    except BaseException:  # Ctrl-C or SIGTERM here: the step (in a session of its own) must not run on
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    seconds = time.perf_counter() - t0
    log.write(f"=== {name}: exit status {rc}{' (stopped at its limit)' if timed_out else ''}, {seconds:.0f} s\n")
    log.flush()
    return {"step": name, "command": shlex.join(cmd[1:]), "rc": rc, "timed_out": timed_out, "seconds": seconds}


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summarize(out: Path) -> dict:
    "The figures side by side, from whatever files the steps wrote: population against workers, workers' scaling."
    s: dict = {}
    for key, name in (("population", "pop_envs.json"), ("population_more", "pop_envs_more.json")):
        res = _read(out / name)
        if res and res.get("rows"):
            row = res["rows"][0]
            s[key] = {"device": res.get("device"), "envs": row["envs"], "torch": res.get("torch"),
                      "population_samples_per_s": row["population"]["samples_per_s"],
                      "env_by_env_samples_per_s": row["lockstep"]["samples_per_s"], "ratio": row["ratio"]}
    scaling = _read(out / "workers" / "scaling.json")
    if scaling and scaling.get("rows"):
        rows = {r["workers"]: r for r in scaling["rows"]}
        one, most = rows[min(rows)], rows[max(rows)]
        s["workers"] = {"machine": scaling.get("machine"), "rows": scaling["rows"], "most": most["workers"],
                        "speedup": most["samples_per_s"] / one["samples_per_s"]}
        if "independent_samples_per_s" in most:
            s["workers"]["independent_speedup"] = (most["independent_samples_per_s"]
                                                    / one["independent_samples_per_s"])
        for key in ("population", "population_more"):
            if key in s:
                s[key]["over_most_workers"] = s[key]["population_samples_per_s"] / most["samples_per_s"]
    return s


def report(s: dict) -> list[str]:
    "The summary's lines."
    lines = []
    w = s.get("workers")
    if w:
        lines.append(f"{w['most']} CPU workers: {w['speedup']:.2f}x one worker (aim: 12x)"
                     + (f"; {w['most']} independent processes: {w['independent_speedup']:.2f}x one"
                        if "independent_speedup" in w else ""))
    for key in ("population", "population_more"):
        p = s.get(key)
        if p:
            vs = (f", {p['over_most_workers']:.2f}x {w['most']} CPU workers (aim: 3x)" if "over_most_workers" in p
                  else "")
            lines.append(f"population of {p['envs']} hosts on {p['device']}: {p['population_samples_per_s']:,.0f} "
                         f"samples/s, {p['ratio']:.2f}x env by env{vs}")
    return lines or ["no step left figures to compare"]


def run_steps(args, env: dict, t_end: float, records: list) -> None:
    "Every step in turn, each under its limit and what is left of the budget; a record each, into `records`."
    with open(args.out / "log.txt", "a") as log:
        for name, limit, step_argv, wrote in steps(args):
            left_s = t_end - time.perf_counter()
            if left_s < 10:
                records.append({"step": name, "rc": None, "skipped": "no time left in --budget"})
                print(f"{name}: skipped, no time left in --budget", flush=True)
                continue
            rec = run_step(name, step_argv, min(limit, left_s), log, env) | {"file": wrote}
            records.append(rec)
            state = "stopped at its limit" if rec["timed_out"] else f"exit status {rec['rc']}"
            print(f"{name}: {state}, {rec['seconds']:.0f} s -> {wrote}", flush=True)


def main(argv=None) -> int:
    ap = OneLineParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=os.environ.get("OUT"),
                    help="folder for the files (default: $OUT, the device machine's folder that comes back)")
    ap.add_argument("--device", default="cuda", help="where the population trains: cuda, cuda:N or cpu")
    ap.add_argument("--budget", type=positive_int, default=540, help="seconds for all steps (default: 540)")
    ap.add_argument("--max-epochs", type=positive_int, default=5, help="epochs per episode (default: 5)")
    ap.add_argument("--tiny", action="store_true", help="the smallest run of every step, to check the script")
    ap.add_argument("--overwrite", action="store_true", help="replace the files an earlier run left in --out")
    args = ap.parse_args(argv)
    if args.out is None:
        ap.error("--out: give a folder (no $OUT is set)")
    if args.max_epochs < 2:
        ap.error(f"--max-epochs must be >= 2 (got {args.max_epochs})")
    left = [f for f in FILES if (args.out / f).exists()]
    if left and not args.overwrite:
        ap.error(f"--out: {args.out} already holds an earlier run's {', '.join(left)}; pass --overwrite to replace")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "log.txt").write_text("")
    except OSError as e:
        ap.error(f"--out: cannot write to {args.out}: {e.strerror or e}")
    for f in (*FILES[:4], "workers/scaling.json"):  # a figure from an earlier run must not pass for this run's
        (args.out / f).unlink(missing_ok=True)
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t_end, records = time.perf_counter() + args.budget, []
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop from outside ends like Ctrl-C, below
    try:
        run_steps(args, env, t_end, records)
    except KeyboardInterrupt:
        ap.exit(130, f"device_check.py: stopped during step {len(records) + 1}; the files of the steps before it "
                     f"are in {args.out}\n")
    summary = summarize(args.out)
    lines = report(summary)
    steps_run = relative_paths(records, ROOT)  # each step's command as run from the project root
    write_json_atomic(args.out / "summary.json", {"steps": steps_run, "lines": lines, **summary}, indent=1)
    print("\n".join(lines))
    return 0 if all(r.get("rc") == 0 for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
