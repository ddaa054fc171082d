"""The notebooks' code keeps the project's layout rules, which `ruff format` alone does not enforce.

`make test` already fails when `ruff format` would change a notebook (one statement per line, calls wrapped to fit).
Ruff never splits a string or a comment, so a long docstring can still run past the limit: this check reads every
code cell of every notebook and names each line longer than 120 characters. And the generated package imports
nothing it does not use (ruff's F401); the tests, benchmarks and probes pass all of pyflakes' checks (ruff's F).
"""
import ast
import json
import subprocess
import sys
from pathlib import Path

NBS = Path(__file__).resolve().parents[1] / "nbs"
MAX_LINE = 120


def long_lines(nb: Path, root: Path = NBS) -> list[str]:
    "`path:cell:line (length)` for each code line of `nb` over `MAX_LINE` characters (path relative to `root`)."
    cells = json.loads(nb.read_text())["cells"]
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        for j, line in enumerate("".join(cell["source"]).splitlines(), 1):
            if line.startswith("#| fig-alt:") or line.startswith("#| fig-cap:"):  # prose, one line for Quarto
                continue
            if len(line) > MAX_LINE:
                out.append(f"{nb.relative_to(root)}:cell {i}:line {j} ({len(line)})")
    return out


def test_long_lines_are_found(tmp_path):
    nb = tmp_path / "probe.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["#| fig-alt: " + "c" * 130 + "\n", "x = 1\n",
                                                                         "y = '" + "a" * 130 + "'"]},
                                        {"cell_type": "markdown", "source": ["b" * 200]}]}))
    assert long_lines(nb, tmp_path) == ["probe.ipynb:cell 0:line 3 (136)"]


def test_no_code_line_is_longer_than_120_characters():
    found = [hit for nb in sorted(NBS.rglob("*.ipynb")) for hit in long_lines(nb)]
    assert not found, "lines over 120 characters:\n" + "\n".join(found)


def test_the_package_imports_nothing_it_does_not_use():
    "An import only a chapter's examples need belongs in a plain cell; a re-export is listed in `_all_`."
    pkg = NBS.parent / "esper"
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F401", "--output-format", "concise",
                        "--no-cache", str(pkg)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


def test_tests_benchmarks_and_probes_leave_nothing_unused_or_undefined():
    "Pyflakes' checks (ruff's F) on the code outside the package: an unused name is often a check someone forgot."
    root = NBS.parent
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--output-format", "concise",
                        "--no-cache", *(str(root / d) for d in ("tests", "bench", "lab", ".ci"))],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


MAX_PARAMETERS = 10


def parameter_count(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    "A function's parameters, `self` and `cls` not counted, `*args` and `**kwargs` one each."
    a = f.args
    named = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return len([n for n in named if n not in ("self", "cls")]) + (a.vararg is not None) + (a.kwarg is not None)


def long_signatures(root: Path) -> dict[str, int]:
    "`path:name` -> parameters, for every function and method under `root` with more than `MAX_PARAMETERS`."
    out = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameter_count(node) > MAX_PARAMETERS:
                out[f"{path.relative_to(root.parent)}:{node.name}"] = parameter_count(node)
    return out


def test_parameters_are_counted(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("class A:\n    def f(self, a, b, c, d, e, f, g, h, i, j): pass\n"
                                           "def g(a, b, c, d, e, f, g, h, i, *args, **kw): pass\n"
                                           "def h(a, b, c, d, e, f, g, h, i, j, /, *, k=1): pass\n")
    assert long_signatures(tmp_path / "pkg") == {"pkg/m.py:g": 11, "pkg/m.py:h": 11}


def test_no_function_takes_more_than_ten_parameters():
    "Settings travel as objects (a dataclass), not as long flat signatures."
    found = long_signatures(NBS.parent / "esper")
    assert not found, f"functions over {MAX_PARAMETERS} parameters: {dict(sorted(found.items()))}"
