"""Write _preview/index.html: a table of contents linking every rendered notebook, grouped like nbs/sidebar.yml."""
import html
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
nbs = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("nbs")
groups: dict[str, list[tuple[str, str]]] = {}
for page in sorted(out.rglob("*.html")):
    rel = page.relative_to(out)
    if rel.name == "index.html" and rel.parent == Path("."):
        rel_nb = Path("index.ipynb")
    else:
        rel_nb = rel.with_suffix(".ipynb")
    title = rel.stem
    nb = nbs / rel_nb
    if nb.exists():
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "markdown" and src.lstrip().startswith("# "):
                title = src.lstrip()[2:].splitlines()[0]
                break
    groups.setdefault(str(rel.parent) if str(rel.parent) != "." else "", []).append((str(rel), title))
parts = ["<!doctype html><meta charset='utf-8'><title>Esper docs (offline preview)</title>",
         "<style>body{font-family:sans-serif;max-width:46rem;margin:2rem auto;line-height:1.5}h2{margin-top:1.5rem}</style>",
         "<h1>Esper — offline docs preview</h1>",
         "<p>Rendered with <code>jupyter nbconvert</code> by <code>make docs</code>; the published site is built with Quarto from the same notebooks.</p>"]
for group in sorted(groups):
    parts.append(f"<h2>{html.escape(group or 'Home')}</h2><ul>")
    for href, title in groups[group]:
        if href == "index.html": href = "home.html"
        parts.append(f"<li><a href='{html.escape(href)}'>{html.escape(title)}</a></li>")
    parts.append("</ul>")
if (out / "index.html").exists(): (out / "index.html").rename(out / "home.html")
(out / "index.html").write_text("\n".join(parts))
print(f"wrote {out / 'index.html'} ({sum(len(v) for v in groups.values())} pages)")
