"""Faults found by trying Esper as a new user would: no finished run replaced by accident, no result lost when its
last write fails, and a failure named for what it is.

Each test provokes one fault and fails on the code before the fix. The command-line cases run `esper.cli.main`
in this process; the telemetry cases compare event files event by event.
"""
import errno
import json
import os
from pathlib import Path

import pytest

from esper.cli import main
from esper.simic.agent.checkpoint import read_checkpoint

from conftest import load_script

# tiny runs: an episode of two epochs of two batches takes a fraction of a second
PPO = ["ppo", "--max-epochs", "2", "--max-batches", "2", "--update-every", "2", "--no-progress"]
VEC = ["ppo", "--vectorized", "--n-envs", "2", "--workers", "0", "--max-epochs", "3", "--max-batches", "2",
       "--no-progress"]
COMPARE = ["compare", "--controllers", "static", "--seeds", "0", "--max-epochs", "2", "--max-batches", "2"]
BASELINE = ["baseline", "--epochs", "1", "--no-progress"]
HEURISTIC = ["heuristic", "--max-epochs", "2", "--no-progress"]


def one_line(text: str) -> str:
    "The text, which must be exactly one line."
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def strict_json(path: Path):
    "Parse `path` as strict JSON: NaN and Infinity are refused, as JavaScript's or Go's parsers refuse them."
    def refuse(name):
        raise ValueError(f"{path} holds {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def events(folder: Path) -> list[dict]:
    "The events of a telemetry folder without their wall-clock timestamps."
    out = []
    for line in (folder / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        e.pop("timestamp")
        out.append(e)
    return out


# --- class 1: a finished run is never replaced by accident ----------------------------------------------------------

def test_save_holding_a_run_is_refused_before_any_work(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "4", "--save", str(save)]) == 0
    before = save.read_bytes()
    capsys.readouterr()
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 1
    out = capsys.readouterr()
    line = one_line(out.err)
    assert f"--save {save} already holds" in line and f"--resume {save}" in line and "--overwrite" in line, line
    assert "episode" not in out.out and "done" not in out.out  # nothing trained
    assert save.read_bytes() == before
    assert read_checkpoint(save)["trainer"]["history"][-1]["episodes"] == 4


def test_overwrite_replaces_and_resume_continues(tmp_path, capsys):
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "4", "--save", str(save)]) == 0
    assert main(PPO + ["--n-episodes", "2", "--save", str(save), "--overwrite"]) == 0
    assert read_checkpoint(save)["trainer"]["history"][-1]["episodes"] == 2
    assert main(PPO + ["--n-episodes", "4", "--save", str(save), "--resume", str(save)]) == 0
    assert read_checkpoint(save)["trainer"]["history"][-1]["episodes"] == 4


@pytest.mark.parametrize("argv, names", [
    (COMPARE, ["comparison.md", "comparison.json", "comparison.png"]),
    (BASELINE, ["summary.json", "learning_curve.png"]),
    (HEURISTIC, ["summary.json"]),
])
def test_out_holding_results_is_refused_unless_overwrite(tmp_path, capsys, argv, names):
    out = tmp_path / "out"
    assert main(argv + ["--out", str(out)]) == 0
    before = {n: (out / n).read_bytes() for n in names}
    capsys.readouterr()
    assert main(argv + ["--out", str(out)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"--out {out} already holds an earlier run's results ({names[0]}" in line and "--overwrite" in line, line
    assert {n: (out / n).read_bytes() for n in names} == before
    assert main(argv + ["--out", str(out), "--overwrite"]) == 0


@pytest.mark.parametrize("argv", [BASELINE + ["--out", "{t}/out"], PPO + ["--n-episodes", "2"]])
def test_telemetry_of_an_earlier_run_is_refused_or_replaced_whole(tmp_path, capsys, argv):
    argv = [a.format(t=tmp_path) for a in argv]
    tel = tmp_path / "tel"
    assert main(argv + ["--telemetry-dir", str(tel)]) == 0
    first = events(tel)
    capsys.readouterr()
    again = [a.replace(f"{tmp_path}/out", f"{tmp_path}/out2") for a in argv]
    assert main(again + ["--telemetry-dir", str(tel)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"--telemetry-dir {tel} already holds an earlier run's results (events.jsonl" in line, line
    assert events(tel) == first  # untouched
    assert main(again + ["--telemetry-dir", str(tel), "--overwrite"]) == 0
    second = events(tel)
    starts = [e for e in second if e["event_type"] == "training_started" and e["env_id"] is None]
    assert len(starts) == 1 and len(second) == len(first)  # the new run's events alone, never appended to the old


def test_a_resumed_run_writes_no_event_twice(tmp_path, capsys):
    "A run stopped inside its third batch, resumed from the checkpoint of its second: the same events as one whole run."
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(VEC + ["--n-episodes", "6", "--save", str(whole / "a.pt"), "--telemetry-dir", str(whole / "t")]) == 0
    assert main(VEC + ["--n-episodes", "4", "--save", str(cut / "a.pt"), "--telemetry-dir", str(cut / "t")]) == 0
    reference = (whole / "t" / "events.jsonl").read_text().splitlines(keepends=True)
    done = len((cut / "t" / "events.jsonl").read_text().splitlines())
    with open(cut / "t" / "events.jsonl", "a") as f:  # what a run stopped halfway through its third batch left
        f.writelines(reference[done: done + (len(reference) - done) // 2])
        f.write('{"event_type": "epoch_compl')  # and a line cut short by the kill
    capsys.readouterr()
    assert main(VEC + ["--n-episodes", "6", "--save", str(cut / "a.pt"), "--resume", str(cut / "a.pt"),
                       "--telemetry-dir", str(cut / "t")]) == 0
    assert "events after the checkpoint's batch 2 cut" in capsys.readouterr().out
    resumed = [e for e in events(cut / "t") if e["event_type"] not in ("checkpoint_loaded", "training_started")]
    whole_run = [e for e in events(whole / "t") if e["event_type"] != "training_started"]
    key = lambda e: (e["event_type"], e["step"], e["env_id"], e["epoch"], e["slot_id"])
    assert [key(e) for e in resumed] == [key(e) for e in whole_run]
    assert (cut / "t" / "tensorboard").is_dir() and any((cut / "t" / "tensorboard").iterdir())


def test_resume_into_telemetry_of_another_run_is_refused(tmp_path, capsys):
    save, tel = tmp_path / "a.pt", tmp_path / "tel"
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 0
    assert main(BASELINE + ["--out", str(tmp_path / "b"), "--telemetry-dir", str(tel)]) == 0
    capsys.readouterr()
    assert main(PPO + ["--n-episodes", "4", "--save", str(save), "--resume", str(save),
                       "--telemetry-dir", str(tel)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"--telemetry-dir {tel}" in line and "no event marks where the run" in line and "--overwrite" in line, line


# --- class 3: results are printed first and written all or nothing ---------------------------------------------------

def test_compare_prints_its_table_and_keeps_the_old_set_whole_when_the_disk_fills(tmp_path, capsys, monkeypatch):
    out = tmp_path / "cmp"
    assert main(COMPARE + ["--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    real, calls = os.fsync, []

    def full_on_second_file(fd):  # the table fits, the JSON does not
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", full_on_second_file)
    assert main(COMPARE + ["--out", str(out), "--seeds", "1", "--overwrite"]) == 1
    printed = capsys.readouterr()
    assert "| controller |" in printed.out and "seeds [1]" in printed.out  # the new table reached the screen
    line = one_line(printed.err)
    assert "No space left on device" in line and "not saved" in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the old set, whole: no new md beside old png


@pytest.mark.parametrize("argv, written", [
    (BASELINE, "summary.json"),
    (HEURISTIC, "summary.json"),
])
def test_summaries_are_printed_before_a_failed_write(tmp_path, capsys, monkeypatch, argv, written):
    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    assert main(argv + ["--out", str(tmp_path / "out")]) == 1
    printed = capsys.readouterr()
    assert "test accuracy" in printed.out
    assert "No space left on device" in one_line(printed.err) and "not saved" in printed.err
    assert not (tmp_path / "out" / written).exists()


# --- class 4: a failure named for what it is ------------------------------------------------------------------------

def test_a_diverged_baseline_fails_in_one_line_and_writes_no_nan(tmp_path, capsys):
    out = tmp_path / "b"
    # 1e10 overflowed within the 63 batches of the old 4,000-signal training split, not within today's 50: 1e20 does
    assert main(BASELINE + ["--lr", "1e20", "--out", str(out)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "diverged at epoch 1" in line and "--lr" in line, line
    assert not (out / "summary.json").exists()


def test_json_outputs_are_strict(tmp_path, capsys):
    "A PPO history with an undefined explained variance is still strict JSON."
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "2", "--save", str(save)]) == 0
    history = strict_json(Path(str(save) + ".history.json"))
    assert history and history[-1]["episodes"] == 2
    from esper.leyline.files import write_json_atomic
    write_json_atomic(tmp_path / "x.json", {"loss": float("nan"), "best": [float("inf"), 1.0]})
    assert strict_json(tmp_path / "x.json") == {"loss": None, "best": [None, 1.0]}


# --- class 5: advice and refusals that hold for the whole run --------------------------------------------------------

def test_resume_past_a_part_batch_is_refused_not_called_complete(tmp_path, capsys):
    "A run whose last batch was cut short by its own --n-episodes cannot grow: say so, not 'already complete'."
    save = tmp_path / "agent.pt"
    assert main(PPO + ["--n-episodes", "1", "--save", str(save)]) == 0  # one episode of a two-episode batch
    capsys.readouterr()
    assert main(PPO + ["--n-episodes", "2", "--save", str(save), "--resume", str(save)]) == 1
    out = capsys.readouterr()
    line = one_line(out.err)
    assert "part batch (1 episodes, 2 per update)" in line and "cannot continue to --n-episodes 2" in line, line
    assert "already complete" not in out.out


def _bench_learning():
    return load_script("bench/bench_learning.py")


@pytest.mark.parametrize("left", ["results.json", "seed0/agent.pt"])
def test_a_benchmark_out_holding_a_run_is_refused_unless_resume_or_overwrite(tmp_path, capsys, left):
    bl = _bench_learning()
    (tmp_path / left).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / left).write_text("{}")
    with pytest.raises(SystemExit):
        bl.resolve_args(bl.build_parser(), ["--train-seeds", "0", "--out", str(tmp_path)])
    line = one_line(capsys.readouterr().err)
    assert f"--out {tmp_path} already holds an earlier benchmark ({left})" in line and "--resume" in line, line
    assert bl.resolve_args(bl.build_parser(), ["--train-seeds", "0", "--out", str(tmp_path), "--overwrite"]).overwrite


@pytest.mark.parametrize("script, left", [("bench_workers.py", "scaling.json"), ("bench_episode.py", "profile.json")])
def test_measured_figures_are_never_replaced_by_accident(tmp_path, script, left):
    import subprocess
    import sys
    (tmp_path / left).write_text('{"measured": true}')
    bench = Path(__file__).resolve().parents[1] / "bench"
    p = subprocess.run([sys.executable, str(bench / script), "--out", str(tmp_path)], capture_output=True, text=True,
                       env=os.environ | {"OMP_NUM_THREADS": "1"}, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    line = one_line(p.stderr)
    assert f"--out {tmp_path} already holds an earlier run's figures ({left}" in line and "--overwrite" in line, line
    assert (tmp_path / left).read_text() == '{"measured": true}'
