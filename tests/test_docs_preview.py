"""The offline docs preview shows a page as the published site does (issue 77): the code of `#| export` cells is
hidden (their outputs stay), `#| hide` cells (the `nbdev.showdoc` import among them) are dropped, and no `#|` line
is left in a code cell. Before, nbdev's `NBProcessor` stripped the directives before the reader view looked for them,
so every page showed its export code and its hidden imports. `docs_check.py` fails a page that shows either."""
import json
from pathlib import Path

from conftest import load_script

CI = Path(__file__).resolve().parent.parent / ".ci"


def _load(name: str):
    return load_script(f".ci/{name}.py", f"_ci_{name}", register=True)  # dataclasses look their module up


def _notebook(path: Path) -> Path:
    cells = [
        ("code", "#| default_exp demo"),
        ("markdown", "# Demo\n\n> A page."),
        ("code", "#| export\ndef shown_only_by_its_api_block(x):\n    return x"),
        ("code", "#| hide\nfrom nbdev.showdoc import *"),
        ("code", "#| echo: false\nprint('only the output')"),
        ("code", "shown_only_by_its_api_block(1)"),
    ]
    nb = {"cells": [{"cell_type": k, "id": f"c{i}", "metadata": {}, "source": s, **({"outputs": [], "execution_count": None} if k == "code" else {})}
                    for i, (k, s) in enumerate(cells)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
    return path


def test_the_reader_view_hides_export_and_hide_cells_and_every_directive(tmp_path):
    preview = _load("docs_preview")
    nb = preview.reader_view(preview.nbdev_read(_notebook(tmp_path / "demo.ipynb")))
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert not any("#|" in s for s in code), code
    assert not any("nbdev.showdoc" in s or "def shown_only_by_its_api_block" in s for s in code), code
    assert "shown_only_by_its_api_block(1)" in code  # an ordinary cell stays


def test_docs_check_looks_for_directives_in_code_cells():
    check = (CI / "docs_check.py").read_text()
    assert "directives: [...document.querySelectorAll('.input_area')]" in check
    assert 'for code in v["directives"]: fail(p' in check


NBS = CI.parent / "nbs"


def test_a_quarto_callout_becomes_the_div_quarto_renders():
    preview = _load("docs_preview")
    store = preview.CalloutStore()
    md = store.protect('Before.\n\n::: {.callout-warning title="Measured before the honest splits"}\nSee '
                       "[the results](../results.ipynb).\n:::\n\nAfter.")
    assert ":::" not in md and "Before." in md and "After." in md
    html = store.restore(f"<p>{md.split()[1]}</p>")
    assert "class='callout callout-warning'" in html and "Measured before the honest splits" in html
    assert 'href="../results.ipynb"' in html  # postprocess rewrites it to .html with the other links


def test_fig_alt_and_font_sizes_reach_the_images_of_their_cell(tmp_path):
    preview = _load("docs_preview")
    nb = preview.reader_view(preview.nbdev_read(_notebook(tmp_path / "demo.ipynb")))
    cell = nb.cells[-1]
    cell.source = "#| fig-alt: A line that rises.\nplt.plot([1, 2], fontsize=8)"
    preview.reader_view(nb)
    assert cell.metadata["esper_fig_alt"] == "A line that rises." and cell.metadata["esper_text_pt"] == 8
    page = preview.Page(Path("demo.ipynb"), "demo.html")
    body, _ = preview.postprocess("<div class='cell celltag_esperfig0'><img src='x.png' alt='No description'></div>",
                                  page, {"internal": 0, "rewritten": 0}, {"esperfig0": ("A line that rises.", 8.0)})
    assert 'alt="A line that rises."' in body and 'data-text-pt="8"' in body


def test_the_sidebar_runs_tutorials_chapters_lab_and_the_top_bar_has_at_most_8_links():
    preview = _load("docs_preview")
    sections, parents = preview.sidebar_tree(NBS)
    top = [name for name, _ in sections if name and name not in parents]
    assert top == ["Tutorials", "Chapters", "Lab notebook"], top
    assert {parents[name] for name, _ in sections if name in parents} == {"Chapters"}
    links = preview.navbar(NBS)
    assert 1 + len(links) <= 8, links  # the project's name, then the navbar's links
    assert all((NBS / href.partition("#")[0]).exists() for _, href in links)


def test_docs_check_measures_figure_text_from_the_png_resolution():
    check = _load("docs_check")
    png = b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + bytes(13) + bytes(4)
    png += (9).to_bytes(4, "big") + b"pHYs" + (3937).to_bytes(4, "big") * 2 + b"\x01" + bytes(4)  # 3937 px/m: 100 dpi
    assert abs(check.png_dpi(png) - 100) < 0.01
    # a 12-inch figure at 100 dpi shown 736 px wide: its 10 pt text reads as 6.4 pt; at 7.5 inches, as 10.2 pt
    assert round(check.figure_text_pt(1200, 736, 100), 1) == 6.4
    assert check.figure_text_pt(750, 736, 100) > check.MIN_FIGURE_PT


def test_the_results_page_shows_no_code_and_the_lab_index_is_short():
    preview = _load("docs_preview")
    nb = preview.reader_view(preview.nbdev_read(NBS / "results.ipynb"))
    shown = [c.source for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert not shown, shown[:1]
    index = json.loads((NBS / "lab" / "00_index.ipynb").read_text())
    words = sum(len("".join(c["source"]).split()) for c in index["cells"] if c["cell_type"] == "markdown")
    assert words < 1000, words
