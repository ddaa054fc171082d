"""bench/bench_growth_lm.py on a corpus the test writes: the whole benchmark at toy size (tune seeds, held-out
seeds, twins, the table with its targets, the JSON and the figure), --replot, --price, and its refusals in one line."""
import json

import pytest

from conftest import load_script


def _bench():
    return load_script("bench/bench_growth_lm.py", register=True)  # its jobs are pickled by name for the workers


TOY = ["--budget", "2", "--context", "16", "--train-chars", "512", "--eval-chars", "256", "--blueprints", "mlp",
       "--tune-seeds", "0", "--eval-seeds", "1000", "--workers", "1"]


def test_the_benchmark_at_toy_size(text_corpus, tmp_path, capsys):
    b = _bench()
    out = tmp_path / "r" / "results.json"
    assert b.main(TOY + ["--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["settings"]["budget"] == 2 and r["settings"]["data_dir"] is None and "git_commit" in r
    kinds = {x["kind"] for x in r["runs"]}
    assert kinds == {"episode", "twin"}
    static = next(x for x in r["runs"] if x.get("rival") == "static")
    twin = next(x for x in r["runs"] if x["kind"] == "twin" and x["grown"] == "")
    assert static["test_bits"] == pytest.approx(twin["test_bits"], abs=1e-6)  # the episode and the bare loop agree
    table = out.with_suffix(".md").read_text()
    assert "| static |" in table and "- Target: the best controller" in table
    assert out.with_suffix(".png").stat().st_size > 0
    with pytest.raises(SystemExit):  # an earlier run is never replaced by accident
        b.main(TOY + ["--out", str(out)])
    assert "holds an earlier run's results" in capsys.readouterr().err
    out.with_suffix(".md").unlink()
    assert b.main(["--replot", "--out", str(out)]) == 0
    assert out.with_suffix(".md").read_text() == table


def test_the_price_and_the_refusals(text_corpus, tmp_path, capsys):
    b = _bench()
    out = tmp_path / "price.json"
    assert b.main(TOY + ["--price", "--price-epochs", "2", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert len(r["tokens_per_second_esper"]) == 5 and r["median_ratio"] > 0
    for flags, said in (
        (["--eval-seeds", "3"], "--eval-seeds must be held-out seeds"),
        (["--tune-seeds", "1000"], "--tune-seeds must be below 1000"),
        (["--lr", "2"], "--lr must be in (0, 1)"),
        (["--context", "4096"], "context must be"),
    ):
        with pytest.raises(SystemExit):
            b.main(TOY + flags + ["--out", str(tmp_path / "x.json")])
        assert said in capsys.readouterr().err
