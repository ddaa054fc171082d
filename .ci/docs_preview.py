"""Offline HTML preview of the docs: every notebook rendered with nbconvert, plus an index page.

    python .ci/docs_preview.py nbs _preview [--execute]

nbdev's Quarto build (which makes the published site) is not available on these machines, so this renders
the same notebooks the way a reader sees them there: nbdev directives (`#| ...`) removed, `#| hide` cells
and the `default_exp` cell dropped, no In/Out prompts. Sections follow `nbs/sidebar.yml`.
"""
import html
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor

_directive = re.compile(r"^\s*#\|\s*(.*)$")


def reader_view(nb):
    "Drop hidden cells and directive lines, as the published docs do."
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines = cell.source.splitlines()
            directives = [m.group(1).strip() for m in map(_directive.match, lines) if m]
            if any(d.startswith(("hide", "default_exp")) for d in directives): continue
            cell.source = "\n".join(l for l in lines if not _directive.match(l)).strip("\n")
            if not cell.source and not cell.get("outputs"): continue
        cells.append(cell)
    nb.cells = cells
    return nb


def title_of(nb, default):
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            return cell.source.lstrip()[2:].splitlines()[0]
    return default


def section_order(nbs: Path) -> list[str]:
    "Folder order as listed in sidebar.yml (folders not listed come last)."
    side = (nbs / "sidebar.yml").read_text() if (nbs / "sidebar.yml").exists() else ""
    seen = []
    for m in re.finditer(r'(?:auto: "|- )([a-z_]+)/', side):
        if m.group(1) not in seen: seen.append(m.group(1))
    return seen


def main(src: str, out: str, execute: bool = False) -> None:
    nbs, out = Path(src), Path(out)
    exporter = HTMLExporter(exclude_input_prompt=True, exclude_output_prompt=True)
    pages: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(nbs.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts: continue
        rel = path.relative_to(nbs)
        nb = nbformat.read(path, as_version=4)
        if execute:
            ExecutePreprocessor(timeout=1200).preprocess(nb, {"metadata": {"path": str(path.parent)}})
        nb = reader_view(nb)
        body, _ = exporter.from_notebook_node(nb)
        dest = out / (rel.with_suffix(".html") if rel != Path("index.ipynb") else Path("home.html"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(body)
        group = rel.parent.name if rel.parent != Path(".") else ""
        pages.setdefault(group, []).append((str(dest.relative_to(out)), title_of(nb, rel.stem)))
    order = [""] + section_order(nbs)
    groups = sorted(pages, key=lambda g: (order.index(g) if g in order else len(order), g))
    parts = ["<!doctype html><meta charset='utf-8'><title>Esper docs (offline preview)</title>",
             "<style>body{font-family:sans-serif;max-width:46rem;margin:2rem auto;line-height:1.5}h2{margin-top:1.5rem}</style>",
             "<h1>Esper — offline docs preview</h1>",
             "<p>Rendered from the notebooks by <code>make docs</code>; the published site is built with Quarto from the same notebooks.</p>"]
    for g in groups:
        parts.append(f"<h2>{html.escape(g.capitalize() if g else 'Home')}</h2><ul>")
        parts += [f"<li><a href='{html.escape(h)}'>{html.escape(t)}</a></li>" for h, t in pages[g]]
        parts.append("</ul>")
    (out / "index.html").write_text("\n".join(parts))
    print(f"wrote {out / 'index.html'} ({sum(map(len, pages.values()))} pages)")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(*(args or ["nbs", "_preview"]), execute="--execute" in sys.argv)
