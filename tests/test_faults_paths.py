"""Results record paths relative to where the command ran: at 4a970d9, 37 files under nbs/ recorded absolute `/tmp`,
`/root` or `/work` paths (checkpoints, output folders, a temporary Inductor cache), which say nothing on another
machine and name this one."""
import json
import subprocess
from pathlib import Path

from esper.leyline.files import MACHINE_PATH

ROOT = Path(__file__).resolve().parents[1]


def _committed_results() -> list[str]:
    files = subprocess.run(["git", "ls-files", "nbs"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in files.split() if f.endswith((".json", ".jsonl", ".md"))]


def test_no_committed_result_records_a_machine_path():
    found = {f: m.group(0) for f in _committed_results() if (m := MACHINE_PATH.search((ROOT / f).read_text()))}
    assert not found, f"machine paths in committed results (esper.leyline.files.relative_paths): {found}"


def test_the_suite_benchmark_writes_paths_relative_to_where_it_ran(tmp_path, monkeypatch):
    "The checkpoints and --out it records, and its parts' argv, are relative to the working folder."
    from test_bench_suite import FLAGS, _bench

    monkeypatch.chdir(tmp_path)
    assert _bench().main([*FLAGS, "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "results.json").read_text()
    assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text)
    res = json.loads(text)
    assert res["config"]["out"] == "out" and res["config"]["parts"][0]["argv"][-1] == "out"
    assert {e["checkpoint"] for e in res["ppo_seeds"]} == {"out/seed0/agent.pt"}
    assert not MACHINE_PATH.search((tmp_path / "out" / "parts.jsonl").read_text())
