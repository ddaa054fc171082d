"""bench/device_check.py: the figures it sets side by side, its refusals in one line, and (slow) a tiny run on the CPU
of every step it runs on a device."""
import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import load_script
from esper.leyline.files import MACHINE_PATH


def _device_check():
    return load_script("bench/device_check.py")


def test_the_summary_sets_the_population_beside_the_workers(tmp_path):
    dc = _device_check()
    row = {"envs": 64, "population": {"samples_per_s": 90_000.0}, "lockstep": {"samples_per_s": 30_000.0}, "ratio": 3.0}
    (tmp_path / "pop_envs.json").write_text(json.dumps({"device": "GPU", "torch": "2.x", "rows": [row]}))
    (tmp_path / "workers").mkdir()
    rows = [{"workers": 1, "samples_per_s": 2_000.0, "independent_samples_per_s": 2_100.0},
            {"workers": 16, "samples_per_s": 20_000.0, "independent_samples_per_s": 29_400.0}]
    (tmp_path / "workers" / "scaling.json").write_text(json.dumps({"machine": "16 cores", "rows": rows}))
    s = dc.summarize(tmp_path)
    assert s["workers"]["speedup"] == 10.0 and s["workers"]["independent_speedup"] == 14.0
    assert s["population"]["over_most_workers"] == 4.5 and "population_more" not in s  # that step left no file
    lines = dc.report(s)
    assert lines[0] == "16 CPU workers: 10.00x one worker (aim: 12x); 16 independent processes: 14.00x one"
    assert lines[1] == "population of 64 hosts on GPU: 90,000 samples/s, 3.00x env by env, 4.50x 16 CPU workers (aim: 3x)"
    assert dc.report({}) == ["no step left figures to compare"]


def test_an_earlier_run_or_no_folder_is_one_line(tmp_path, run_bench):
    (tmp_path / "summary.json").write_text("{}")
    p = run_bench("device_check.py", "--out", str(tmp_path), "--device", "cpu", "--tiny", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--overwrite" in p.stderr, p.stderr
    assert (tmp_path / "summary.json").read_text() == "{}"  # left as it was
    p = run_bench("device_check.py", "--out", str(tmp_path / "summary.json" / "x"), "--tiny", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "cannot write" in p.stderr, p.stderr


@pytest.mark.slow
def test_a_tiny_run_on_the_cpu_runs_every_step_and_sums_them_up(tmp_path, run_bench):
    out = tmp_path / "dc"
    p = run_bench("device_check.py", "--device", "cpu", "--tiny", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr + (out / "log.txt").read_text()
    s = json.loads((out / "summary.json").read_text())
    assert [r["step"] for r in s["steps"]] == ["profile", "groups", "population", "workers", "population, more envs"]
    assert all(r["rc"] == 0 and not r["timed_out"] and (out / r["file"]).is_file() for r in s["steps"])
    assert s["workers"]["most"] == 2 and s["population"]["envs"] == 2 and s["population_more"]["envs"] == 3
    assert s["lines"] == p.stdout.strip().splitlines()[-3:]
    assert not MACHINE_PATH.search((out / "summary.json").read_text())  # its commands, relative to the root


def test_a_step_past_its_limit_is_stopped_with_the_processes_it_started(tmp_path):
    dc = _device_check()
    script = tmp_path / "hang.py"  # starts a child that would outlive it, then hangs
    script.write_text("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                      f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(child.pid))\n"
                      "print('started', flush=True)\ntime.sleep(60)\n")
    with open(tmp_path / "log.txt", "w") as log:
        rec = dc.run_step("hang", [str(script)], 3, log, dict(os.environ))
    assert rec["timed_out"] and rec["rc"] != 0 and rec["seconds"] < 30
    text = (tmp_path / "log.txt").read_text()
    assert "started" in text and "stopped at its limit" in text
    pid = int((tmp_path / "child.pid").read_text())
    for _ in range(50):  # the child went with it: gone, or a zombie waiting for whoever adopted it
        if not _running(pid):
            break
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_stop_from_outside_is_one_line_and_leaves_no_step_running(tmp_path, start_bench):
    out = tmp_path / "dc"
    p = start_bench("device_check.py", "--device", "cpu", "--tiny", "--out", str(out), cwd=tmp_path)
    for _ in range(300):  # until the first step has started
        if (out / "log.txt").exists() and "=== profile" in (out / "log.txt").read_text():
            break
        time.sleep(0.1)
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and len(err.strip().splitlines()) == 1 and "stopped during step 1" in err, err
    time.sleep(0.5)
    steps = [d for d in Path("/proc").iterdir() if d.name.isdigit() and _running(int(d.name))
             and str(out) in _cmdline(d)]
    assert steps == []  # the step it was running went with it


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:  # gone meanwhile
        return ""
