"""Every bad path, fault and signal ends in one clear line, with nothing lost.

Each test names the fault it provokes. The command-line cases run `esper.cli.main` in this process where
that is enough; signals, kills and a second writer need real processes.
"""
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from esper.cli import main
from esper.simic.agent.checkpoint import read_checkpoint

# tiny PPO runs: one episode of two epochs of two batches takes a fraction of a second
PPO = ["ppo", "--max-epochs", "2", "--max-batches", "2", "--update-every", "2", "--no-progress"]
COMPARE = ["compare", "--controllers", "static", "--seeds", "0", "--max-epochs", "2", "--max-batches", "2"]
ENV = os.environ | {"OMP_NUM_THREADS": "1"}


def one_line(text: str) -> str:
    "The text, which must be exactly one line."
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def stop_line(err: str) -> str:
    "How a stopped run ended: no traceback, and its last line (earlier lines are warnings from training)."
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def disk_full(fd):
    "What `os.fsync` raises when the disk has filled up under a write."
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def blocked(tmp_path) -> Path:
    "A regular file: every path below it is impossible to create (as root too)."
    p = tmp_path / "plain"
    p.write_text("a regular file, not a folder")
    return p


# --- outputs are checked before any work -------------------------------------------------------------------------

@pytest.mark.parametrize("argv, named", [
    (["baseline", "--epochs", "1", "--no-progress", "--out", "{b}/out"], "--out {b}/out"),
    (["baseline", "--epochs", "1", "--no-progress", "--out", "{t}/ok", "--telemetry-dir", "{b}/tel"],
     "--telemetry-dir {b}/tel"),
    (["baseline", "--epochs", "1", "--no-progress", "--out", "{t}/ok", "--data-dir", "{b}/data"], "--data-dir {b}/data"),
    (["heuristic", "--max-epochs", "2", "--no-progress", "--out", "{b}/out"], "--out {b}/out"),
    (COMPARE + ["--out", "{b}/out"], "--out {b}/out"),
    (PPO + ["--n-episodes", "2", "--save", "{b}/agent.pt"], "--save {b}/agent.pt"),
    (PPO + ["--n-episodes", "2", "--telemetry-dir", "{b}/tel"], "--telemetry-dir {b}/tel"),
    (PPO + ["--n-episodes", "2", "--save", "{t}"], "--save {t}: is a folder"),  # a folder where a file is wanted
])
def test_unwritable_output_fails_in_one_line_before_any_work(argv, named, tmp_path, blocked, capsys):
    argv = [a.format(b=blocked, t=tmp_path) for a in argv]
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 1
    line = one_line(out.err)
    assert named.format(b=blocked, t=tmp_path) in line, line
    assert "epoch" not in out.out and "seed 0" not in out.out and "batch" not in out.out  # nothing ran


# --- a full disk, and the atomic writer ------------------------------------------------------------------------------

def test_full_disk_names_the_file_and_keeps_the_previous_one(tmp_path, capsys, monkeypatch):
    out = tmp_path / "cmp"
    assert main(COMPARE + ["--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    monkeypatch.setattr(os, "fsync", disk_full)
    rc = main(COMPARE + ["--out", str(out), "--seeds", "1", "--overwrite"])
    printed = capsys.readouterr()
    line = one_line(printed.err)
    assert rc == 1 and "No space left on device" in line and str(out / "comparison.md") in line, line
    assert "| controller |" in printed.out  # the table was printed before the write failed
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # same files, same bytes, no temp files


def test_checkpoint_write_on_a_full_disk_keeps_the_last_checkpoint(tmp_path, capsys, monkeypatch):
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 0
    good = save.read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(os, "fsync", disk_full)
    rc = main(PPO + ["--n-episodes", "4", "--save", str(save), "--resume", str(save)])
    line = one_line(capsys.readouterr().err)
    assert rc == 1 and f"cannot write {save}: No space left on device" in line, line
    assert save.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.pt", "agent.pt.history.json"]


def test_outputs_get_the_users_umask(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert main(PPO + ["--n-episodes", "2", "--save", str(tmp_path / "agent.pt")]) == 0
        assert main(COMPARE + ["--out", str(tmp_path / "cmp")]) == 0
    finally:
        os.umask(old)
    for p in (tmp_path / "agent.pt", tmp_path / "agent.pt.history.json", tmp_path / "cmp" / "comparison.md",
              tmp_path / "cmp" / "comparison.json", tmp_path / "cmp" / "comparison.png"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, (p, oct(p.stat().st_mode))


# --- checkpoints that are not ours, resume that does not match --------------------------------------------------------

class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_foreign_pickle_is_not_an_esper_checkpoint_and_is_refused_first(tmp_path, capsys):
    bad = tmp_path / "hostile.pt"
    torch.save({"format": "esper.simic.PPOAgent", "x": _RunsCode()}, bad)
    rc = main(COMPARE + ["--controllers", "static", "ppo", "--checkpoint", str(bad), "--out", str(tmp_path / "c")])
    out = capsys.readouterr()
    line = one_line(out.err)
    assert rc == 1 and "is not an Esper checkpoint" in line and "weights_only" not in line, line
    assert "static" not in out.out and "must never run" not in out.out  # checked before the other controllers


def test_missing_compare_checkpoint_is_refused_before_the_other_controllers(tmp_path, capsys):
    rc = main(COMPARE + ["--controllers", "static", "ppo", "--checkpoint", str(tmp_path / "nope.pt"),
                         "--out", str(tmp_path / "c")])
    out = capsys.readouterr()
    assert rc == 1 and "nope.pt" in one_line(out.err) and "static" not in out.out


def test_resume_with_a_changed_setting_is_refused_with_the_differences(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 0
    capsys.readouterr()
    good = save.read_bytes()
    rc = main(PPO + ["--n-episodes", "4", "--save", str(save), "--resume", str(save), "--lr", "0.001",
                     "--gamma", "0.9"])
    line = one_line(capsys.readouterr().err)
    assert rc == 1 and "lr: checkpoint 0.0003, now 0.001" in line and "gamma: checkpoint 0.99, now 0.9" in line, line
    assert save.read_bytes() == good


def test_resume_of_a_complete_run_says_so_and_touches_nothing(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "4", "--save", str(save)]) == 0
    capsys.readouterr()
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    for n in ("4", "3"):
        rc = main(PPO + ["--n-episodes", n, "--save", str(save), "--resume", str(save)])
        out = capsys.readouterr()
        assert rc == 0 and "already complete (4 episodes done" in out.out and "wrote" not in out.out, out
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before


# --- one writer per output -----------------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from esper.leyline.files import RunLock
    with RunLock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
""")


def test_a_second_writer_of_the_same_checkpoint_is_refused(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, f"{save}.lock"], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc = main(PPO + ["--n-episodes", "2", "--save", str(save)])
        line = one_line(capsys.readouterr().err)
        assert rc == 1 and f"--save {save} is being written by another Esper run (pid {holder.pid}" in line, line
        assert not save.exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 0  # the dead holder's lock is stale: taken over
    assert not Path(f"{save}.lock").exists()


def test_concurrent_runs_on_one_output_folder_exclude_each_other(tmp_path):
    from esper.leyline.files import RunLock
    lock = tmp_path / "runs" / ".esper.lock"
    with RunLock(lock, "--out runs"):
        with pytest.raises(OSError, match="--out runs is being written by another Esper run"):
            RunLock(lock, "--out runs").acquire()


# --- signals and kills ---------------------------------------------------------------------------------------------

_STARTED: list[subprocess.Popen] = []  # every `_esper` run, so a failed test leaves none behind


@pytest.fixture(autouse=True)
def _kill_left_runs():
    "A run whose test failed before stopping it (a signal it did not heed, a timeout) is killed, not left running."
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _default_signals() -> None:
    "In a started run: SIGINT and SIGTERM as a terminal gives them, even where this suite runs with them ignored."
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job of a script inherits SIGINT ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _esper(*argv: str, **kw) -> subprocess.Popen:
    code = "import sys; from esper.cli import main; sys.exit(main(sys.argv[1:]))"
    _STARTED.append(subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=_default_signals, **kw))
    return _STARTED[-1]


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float=120) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "the run wrote no checkpoint"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, word, status", [(signal.SIGINT, "interrupted", 130), (signal.SIGTERM, "terminated", 143)])
def test_a_signal_stops_ppo_with_one_line_and_a_valid_checkpoint(sig, word, status, tmp_path):
    save = tmp_path / "agent.pt"
    proc = _esper(*PPO, "--n-episodes", "100000", "--save", str(save))
    _wait_for(save, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    line = stop_line(err)
    assert line.startswith(f"esper-train ppo: {word} at episode ") and f"checkpoint saved to {save}" in line, line
    assert f"--resume {save}" in line
    trainer = read_checkpoint(save)["trainer"]
    assert json.loads(Path(f"{save}.history.json").read_text()) == json.loads(json.dumps(trainer["history"]))
    assert not Path(f"{save}.lock").exists()


def test_ctrl_c_in_a_job_without_checkpoints_is_one_line(tmp_path):
    proc = _esper("baseline", "--epochs", "100000", "--out", str(tmp_path / "b"))
    t0 = time.monotonic()
    while "epoch   1" not in (proc.stdout.readline() or "epoch   1"):
        assert time.monotonic() - t0 < 120
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert stop_line(err.split("\r")[-1]) == "esper-train baseline: interrupted; nothing was written"


def _group(pgid: int) -> list[str]:
    "The processes still in process group `pgid` (none once every worker is gone)."
    return subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()


def test_ctrl_c_reaches_a_comparison_and_its_workers_and_ends_in_one_line(tmp_path):
    "A terminal's Ctrl-C goes to the whole process group: the comparison stops its workers and says one line."
    argv = ["compare", "--suite", "small-test", "--seeds", "2000", "2001", "--workers", "2"]
    proc = _esper(*argv, "--out", str(tmp_path / "c"), start_new_session=True)
    t0 = time.monotonic()
    while " seed 2000: test" not in (proc.stdout.readline() or " seed 2000: test"):  # an episode played: workers busy
        assert time.monotonic() - t0 < 120
    assert len(_group(proc.pid)) >= 3  # the comparison and its two workers
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["esper-train compare: interrupted; nothing was written"], err
    t0 = time.monotonic()
    while _group(proc.pid) and time.monotonic() - t0 < 10:  # multiprocessing's resource tracker leaves last
        time.sleep(0.1)
    assert not _group(proc.pid)
    assert not (tmp_path / "c").exists()


KILLER = textwrap.dedent("""
    import os, signal, sys
    target, when = sys.argv[1], int(sys.argv[2])
    calls = {"fsync": 0, "replace": 0}
    def killing(name, real):
        def call(*a, **k):
            calls[name] += 1
            if target == name and calls[name] == when:  # before the call: mid-write, or written but not renamed
                os.kill(os.getpid(), signal.SIGKILL)
            out = real(*a, **k)
            if target == name + "d" and calls[name] == when:  # after the rename: in the next batch's training
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        return call
    os.fsync = killing("fsync", os.fsync)
    os.replace = killing("replace", os.replace)
    from esper.cli import main
    sys.exit(main(sys.argv[3:]))
""")


# fsync and replace are called once per checkpoint (four of them), then once for the history file
# One kill before and one during the rename run by default; the other kill points (about 8 s each) are slow tests.
@pytest.mark.parametrize("target, when", [("fsync", 1), ("replace", 2), pytest.param("fsync", 3, marks=pytest.mark.slow),
                                          pytest.param("replaced", 2, marks=pytest.mark.slow),
                                          pytest.param("replace", 5, marks=pytest.mark.slow)])
def test_sigkill_while_writing_leaves_the_last_checkpoint_loadable(target, when, tmp_path):
    save = tmp_path / "agent.pt"
    args = [*PPO, "--n-episodes", "8", "--save", str(save)]
    proc = subprocess.run([sys.executable, "-c", KILLER, target, str(when), *args], capture_output=True, text=True,
                          env=ENV, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    if save.exists():
        read_checkpoint(save)  # whole, and ours
    # whatever was left, the same command with --resume (or afresh) finishes the run
    rc = subprocess.run([sys.executable, "-c", "import sys; from esper.cli import main; sys.exit(main(sys.argv[1:]))",
                         *args, *(["--resume", str(save)] if save.exists() else [])],
                        capture_output=True, text=True, env=ENV, timeout=300)
    assert rc.returncode == 0, rc.stderr
    assert read_checkpoint(save)["trainer"]["history"][-1]["episodes"] == 8
