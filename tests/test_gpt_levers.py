"""lab/probes/gpt_levers.py on a corpus the test writes: the three levers on one toy problem (one block planted,
the shared twin, the table), the copy the G_stack lever starts from, and the refusals in one line."""
import json

import pytest

from conftest import load_script


def _probe():
    return load_script("lab/probes/gpt_levers.py", register=True)  # its jobs are pickled by name for the workers


TOY = ["--budget", "3", "--epoch", "1", "--context", "16", "--train-chars", "512", "--eval-chars", "256",
       "--eval-seeds", "1000"]


def test_the_levers_at_toy_size(text_corpus, tmp_path, capsys):
    p = _probe()
    out = tmp_path / "r" / "levers.json"
    assert p.main(TOY + ["--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["settings"]["epoch"] == 1 and r["settings"]["data_dir"] is None and "git_commit" in r
    eps = {x["rival"]: x for x in r["runs"] if x["kind"] == "episode"}
    assert set(eps) == {"static", "zero-init", "zero-init, 3x seed lr", "G_stack copy"}
    assert eps["G_stack copy"]["grown"].startswith("stacked_block@block1")
    assert eps["zero-init"]["grown"].startswith("transformer_block@block1")
    assert eps["zero-init, 3x seed lr"]["seed_lr"] == pytest.approx(3 * eps["zero-init"]["seed_lr"])
    assert [x["grown"] for x in r["runs"] if x["kind"] == "twin"] == ["transformer_block@block1"]  # one, shared
    same = [eps[k]["curve"][0] for k in ("static", "zero-init", "G_stack copy")]
    assert same[0] == same[1] == same[2]  # the first epoch is the bare host's in every run
    assert eps["G_stack copy"]["curve"] != eps["zero-init"]["curve"]  # the copy changes what is learned
    table = out.with_suffix(".md").read_text()
    assert "| G_stack copy |" in table and "The twin's test bits" in table
    for lever in ("zero-init", "G_stack copy"):
        assert set(r["summary"][lever]["per_seed"][0]) >= {"saving", "test_bits", "val_bits", "twin_test_bits"}
    with pytest.raises(SystemExit):  # an earlier run is never replaced by accident
        p.main(TOY + ["--out", str(out)])
    assert "holds an earlier run's results" in capsys.readouterr().err


def test_the_refusals(text_corpus, tmp_path, capsys):
    p = _probe()
    for flags, said in (
        (["--eval-seeds", "3"], "--eval-seeds must be held-out seeds"),
        (["--epoch", "3"], "--epoch must be below --budget"),
        (["--slot", "head"], "--slot: no slot 'head' in gpt_tiny (its slots: embed, block1)"),
        (["--slot", "block1", "block1"], "--slot: each slot once"),
        (["--seed-lr-factor", "400"], "--seed-lr-factor must be in (0, 1)"),
    ):
        with pytest.raises(SystemExit):
            p.main(TOY + flags + ["--out", str(tmp_path / "x.json")])
        assert said in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_block_in_each_of_two_slots(text_corpus, tmp_path):
    "`--slot embed block1` grows the one-block host into three blocks: no G_stack copy (embed has no block before it)."
    p = _probe()
    out = tmp_path / "three.json"
    assert p.main(TOY + ["--slot", "block1", "embed", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    eps = {x["rival"]: x for x in r["runs"] if x["kind"] == "episode"}
    assert set(eps) == {"static", "zero-init", "zero-init, 3x seed lr"}
    assert r["settings"]["slot"] == ["embed", "block1"]  # in the host's order
    assert eps["zero-init"]["plan"] == "plan:transformer_block@embed/1+transformer_block@block1/1"
    assert eps["zero-init"]["grown"].count("transformer_block@") == 2
    twins = [x["grown"] for x in r["runs"] if x["kind"] == "twin"]
    assert twins == ["transformer_block@embed + transformer_block@block1"]
    assert "No G_stack copy: slot embed has no block before it." in out.with_suffix(".md").read_text()
