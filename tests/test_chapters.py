"""Chapters read like fastcore's: each exported definition is followed by its example or test (issue 77, item 5).

A definition cell is a code cell marked `#| export` or `#| exporti` that defines a function or class at top level.
When the next code cell (markdown cells skipped) is another definition cell, the first one is *stacked*: the reader
meets a second definition before seeing what the first one does. Cells that define several tightly bound helpers
together count once, as one cell.
"""
import ast
import itertools
import json
import re
from pathlib import Path

NBS = Path(__file__).resolve().parents[1] / "nbs"
EXPORT = re.compile(r"^#\|\s*exporti?\s*$", re.MULTILINE)
#: Notebooks still allowed this many stacked definitions (a ratchet): a notebook over its allowance fails, and one
#: under it fails too until its entry is lowered (or dropped at 0). Notebooks not listed must have none.
ALLOWED: dict[str, int] = {
}


def is_definition(cell: dict) -> bool:
    "Whether `cell` is an exported code cell with a top-level `def` or `class`."
    if cell["cell_type"] != "code":
        return False
    src = "".join(cell["source"])
    if not EXPORT.search(src):
        return False
    code = "\n".join(line for line in src.splitlines() if not line.startswith(("%", "!")))
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in body)


def stacked(cells: list[dict]) -> list[int]:
    "Indices (in `cells`) of definition cells whose next code cell is another definition cell."
    code = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    return [i for (i, a), (_, b) in itertools.pairwise(code) if is_definition(a) and is_definition(b)]


def _cell(kind: str, src: str) -> dict:
    return {"cell_type": kind, "source": [src]}


def test_stacked_definitions_are_counted():
    d = "#| export\ndef f(): pass"
    cells = [_cell("code", d), _cell("markdown", "prose"), _cell("code", "#| exporti\nclass A: pass"),
             _cell("code", "test_eq(f(), None)"), _cell("code", d), _cell("code", "#| export\nX = 1"),
             _cell("code", d), _cell("code", "#| hide\n" + d[9:]), _cell("code", d)]
    assert stacked(cells) == [0]
    assert not is_definition(_cell("markdown", d)) and not is_definition(_cell("code", "#| exports\ndef f(): pass"))


def counts() -> dict[str, int]:
    "Stacked definitions per notebook (path relative to `nbs/`), notebooks with none left out."
    out = {}
    for nb in sorted(NBS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        n = len(stacked(json.loads(nb.read_text())["cells"]))
        if n:
            out[str(nb.relative_to(NBS))] = n
    return out


def test_each_definition_is_followed_by_its_example():
    found = counts()
    worse = {k: (n, ALLOWED.get(k, 0)) for k, n in found.items() if n > ALLOWED.get(k, 0)}
    better = {k: (found.get(k, 0), n) for k, n in ALLOWED.items() if found.get(k, 0) < n}
    assert not worse, f"stacked definitions (found, allowed): {worse}; put each one's example or test after it"
    assert not better, f"fewer stacked definitions than allowed (found, allowed): {better}; lower ALLOWED"
