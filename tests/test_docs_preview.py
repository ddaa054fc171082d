"""The offline docs preview shows a page as the published site does (issue 77): the code of `#| export` cells is
hidden (their outputs stay), `#| hide` cells (the `nbdev.showdoc` import among them) are dropped, and no `#|` line
is left in a code cell. Before, nbdev's `NBProcessor` stripped the directives before the reader view looked for them,
so every page showed its export code and its hidden imports. `docs_check.py` fails a page that shows either."""
import importlib.util
import json
import sys
from pathlib import Path

CI = Path(__file__).resolve().parent.parent / ".ci"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_ci_{name}", CI / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"_ci_{name}"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


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
