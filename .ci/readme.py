"""Write README.md from nbs/index.ipynb: the landing page as markdown, with the outputs its cells saved.

Cells marked `#| echo: false` (hidden on the site by Quarto) show only their output here too, no `#|` line is shown,
a cell's `#| fig-alt:` is the alt text of its images, and links to notebooks are made relative to the project root.
"""
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import MarkdownExporter

src, out = Path(sys.argv[1]), Path(sys.argv[2])
nb = nbformat.read(src, as_version=4)
alts = {}  # cell index -> its `#| fig-alt:`, the alt text of the images it shows
for i, cell in enumerate(nb.cells):
    if cell.cell_type != "code": continue
    if re.search(r"^#\|\s*echo:\s*false", cell.source, re.M):
        cell.metadata["transient"] = {"remove_source": True}
    alt = re.search(r"^#\|\s*fig-alt:\s*(.+)$", cell.source, re.M)
    if alt: alts[i] = alt.group(1).strip().strip("'\"")
    cell.source = "\n".join(l for l in cell.source.splitlines() if not re.match(r"\s*#\|", l))  # as the site shows it
body, resources = MarkdownExporter().from_notebook_node(nb, resources={"output_files_dir": f"{out.stem}_files", "unique_key": out.stem})
body = re.sub(rf"!\[png\]\(({re.escape(out.stem)}_files/{re.escape(out.stem)}_(\d+)_\d+\.png)\)",
              lambda m: f"![{alts.get(int(m.group(2)), 'png')}]({m.group(1)})", body)
body = re.sub(r"\]\(([A-Za-z0-9_./-]+\.ipynb)", rf"]({src.parent.as_posix()}/\1", body)
body = re.sub(r"\n{3,}", "\n\n", body)  # one blank line between blocks: nbconvert leaves up to four around outputs
out.write_text(body)
for name, data in resources.get("outputs", {}).items():
    (out.parent / name).parent.mkdir(parents=True, exist_ok=True)
    (out.parent / name).write_bytes(data)
