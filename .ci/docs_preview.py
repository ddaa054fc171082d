"""Offline HTML preview of the docs: every notebook rendered with nbconvert, with the site's navigation.

    python .ci/docs_preview.py nbs _preview [--execute]

nbdev's Quarto build (which makes the published site) is not available on these machines, so this renders
the same notebooks the way a reader sees them there, and nothing in the result loads from the network:

* Each notebook first goes through nbdev's own `add_show_docs` processor (the one `nbdev_docs` runs), which puts a
  `show_doc(name)` cell after each `#| export` cell for every public function and class it defines, unless the
  notebook already documents it. Then, as nbdev's `rm_export` and `hide_` do, the code of `#| export` / `#| exporti`
  cells is hidden (their outputs stay), `#| hide` cells and the `default_exp` cell are dropped; directives
  (`#| ...`) are removed and there are no In/Out prompts. The `# Title` and `> summary` lines of each notebook become
  the page's title block.
* Folders the site excludes (`!pattern` entries of `project.render` in `nbs/_quarto.yml`, e.g. `results/`) are
  not rendered.
* Navigation as on the Quarto site: a sidebar from `nbs/sidebar.yml` (same sections and order, `auto:` globs
  expanded in sorted order), a top bar (project name -> index, one link per section, "Kasmina: seeds" from the
  section "Kasmina — seeds"), previous/next links in
  sidebar order, an "on this page" list. Heading ids follow Pandoc's rules (`## Payload conventions` ->
  `#payload-conventions`), and relative links to `*.ipynb` (with or without `#anchor`) point at the `.html`.
* `show_doc(...)` cells are rendered from the exported `esper` objects (signature, docstring and a parameter
  table from the `# comment` docments; the block carries `data-api="module.qualname"` and `data-nparams`, which
  `docs_check.py` checks), falling back to the notebook's stored output with its Quarto markup
  (`---`, `{target=...}`, `:::`) turned into plain HTML when the object cannot be imported.
* `$...$` and `$$...$$` in markdown cells become MathML at build time (latex2mathml), which Chromium and
  Firefox render natively: no MathJax, no CDN.
* nbconvert's "basic" template (cells only, no require.js/MathJax/CDN scripts) inside our own page layout; one
  stylesheet, `_static/preview.css`, with the Pygments colours. Images are embedded as data URIs.
* `index.html` is `nbs/index.ipynb` followed by the list of chapters in reading (sidebar) order, each once, with
  its one-line summary. Re-export modules (a notebook whose exported code only imports names defined in another
  chapter) are not listed as chapters: they are named under the chapter that defines their objects. Titles left are deduplicated (first in reading order wins, with a warning).
"""
from __future__ import annotations

import argparse
import ast
import configparser
import dataclasses
import fnmatch
import html
import importlib
import inspect
import io
import json
import re
import sys
import textwrap
import tokenize
import typing
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from bs4 import BeautifulSoup
from latex2mathml.converter import convert as tex_to_mathml
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbconvert.preprocessors import ExecutePreprocessor
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

ROOT = Path(__file__).resolve().parents[1]
_directive = re.compile(r"^\s*#\|\s*(.*)$")
_external = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


# ---------------------------------------------------------------------------------------------- notebooks
@dataclass
class Page:
    src: Path                  # notebook, relative to nbs/
    dest: str                  # html file, relative to the output folder (posix)
    title: str = ""
    summary: str = ""
    section: str = ""          # sidebar section ("" for top-level entries such as index)
    module: str = ""           # default_exp
    reexport_of: str = ""      # module whose objects this (alias) module only re-exports
    nb: object = None
    in_sidebar: bool = True


def dest_of(rel: Path) -> str:
    return rel.with_suffix(".html").as_posix()


def directives(cell) -> list[str]:
    return [m.group(1).strip() for m in map(_directive.match, cell.source.splitlines()) if m]


def default_exp(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        for d in directives(cell):
            if d.startswith("default_exp"): return d.split(None, 1)[1].strip() if len(d.split()) > 1 else ""
    return ""


def title_block(nb) -> tuple[str, str]:
    "Pop the `# Title` line and the `> summary` lines of the first markdown cell (nbdev's front matter)."
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown": continue
        lines = cell.source.strip().splitlines()
        if not lines or not lines[0].startswith("# "): return "", ""
        title, rest = lines[0][2:].strip(), lines[1:]
        while rest and not rest[0].strip(): rest.pop(0)
        summary = []
        while rest and rest[0].startswith(">"):
            summary.append(rest.pop(0).lstrip(">").strip())
        cell.source = "\n".join(rest).strip()
        if not cell.source: del nb.cells[i]
        return title, " ".join(summary).strip()
    return "", ""


def nbdev_read(path: Path):
    """The notebook with the `show_doc` cells nbdev's docs build adds (its `add_show_docs` processor), as nbformat.

    nbdev_docs runs this processor before Quarto renders the page: every public function and class an exported
    cell defines gets a `show_doc(name)` cell right after it, unless the notebook already calls show_doc on it."""
    from execnb.nbio import read_nb
    from nbdev.process import NBProcessor
    from nbdev.processors import add_show_docs
    raw = read_nb(path)
    NBProcessor(nb=raw, procs=[add_show_docs], rm_directives=False).process()  # reader_view needs the #| lines
    keep = {"code": ("cell_type", "metadata", "source", "outputs", "execution_count"),
            "markdown": ("cell_type", "metadata", "source", "attachments"), "raw": ("cell_type", "metadata", "source")}
    cells = []
    for c in raw.cells:
        cell = {k: c[k] for k in keep.get(c["cell_type"], ()) if k in c}
        cell.setdefault("metadata", {})
        cell["id"] = c.get("id") or f"sd{len(cells)}"  # a show_doc cell nbdev added has none
        if c["cell_type"] == "code": cell.setdefault("outputs", []); cell.setdefault("execution_count", None)
        cells.append(cell)
    d = {"cells": cells, "metadata": dict(raw.get("metadata", {})), "nbformat": 4, "nbformat_minor": 5}
    return nbformat.reads(json.dumps(d, default=str), as_version=4)  # rejoins multi-line strings, as nbformat.read


def reader_view(nb):
    "Drop hidden cells, hide exported code and drop directive lines, as the published docs do (nbdev's rm_export)."
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            ds = directives(cell)
            if any(d.startswith(("hide", "default_exp")) or d.replace(" ", "") in ("include:false",) for d in ds):
                continue
            cell.source = "\n".join(l for l in cell.source.splitlines() if not _directive.match(l)).strip("\n")
            if any(d.split()[0] in ("export", "exporti") for d in ds if d): cell.source = ""
            if any(d.replace(" ", "") == "echo:false" for d in ds): cell.source = ""
            if any(d.replace(" ", "") == "output:false" for d in ds): cell.outputs = []
            alt = [d.split(":", 1)[1].strip().strip("'\"") for d in ds if re.match(r"fig-alt\s*:", d)]
            if alt: cell.metadata["esper_fig_alt"] = alt[0]
            sizes = [float(x) for x in re.findall(r"\b(?:fontsize|labelsize)\s*=\s*(\d+(?:\.\d+)?)\b", cell.source)]
            if sizes: cell.metadata["esper_text_pt"] = min(sizes)  # the smallest text the cell draws, when it says
            if not cell.source and not cell.get("outputs"): continue
        cells.append(cell)
    nb.cells = cells
    return nb


def exported_code(nb) -> str:
    return "\n".join("\n".join(l for l in c.source.splitlines() if not _directive.match(l))
                     for c in nb.cells if c.cell_type == "code"
                     and any(d.split()[0] in ("export", "exports", "exporti") for d in directives(c) if d))


def reexport_source(nb, module: str) -> str:
    """The module an alias notebook re-exports, or "".

    An alias is a module (not a package `__init__`) whose exported code is only `from esper.x import ...` and
    `__all__ = ...`: it defines nothing, so its chapter is the one of the module it imports most names from."""
    if not module or module.endswith("__init__"): return ""
    try: tree = ast.parse(exported_code(nb))
    except SyntaxError: return ""
    counts: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("esper."):
            counts[node.module] = counts.get(node.module, 0) + len(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)): continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and all(
                isinstance(t, ast.Name) and t.id == "__all__" for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            continue
        else: return ""
    return max(counts, key=counts.get) if counts else ""


# ---------------------------------------------------------------------------------------------- sidebar
def sidebar(nbs: Path) -> list[tuple[str, list[Path]]]:
    "Sections of nbs/sidebar.yml with their notebooks in order; `auto:` globs expanded in sorted order."
    return sidebar_tree(nbs)[0]


def sidebar_tree(nbs: Path) -> tuple[list[tuple[str, list[Path]]], dict[str, str]]:
    """The sections of nbs/sidebar.yml in order, flattened, and {section: the top-level section it sits in} for the
    sections nested in another (Quarto's sidebar nests `section:` entries; "Chapters" holds one per subsystem)."""
    path = nbs / "sidebar.yml"
    parents: dict[str, str] = {}
    if not path.exists(): return [], parents
    spec = yaml.safe_load(path.read_text()) or {}
    contents = spec.get("website", {}).get("sidebar", {}).get("contents", [])
    all_nbs = sorted(p.relative_to(nbs).as_posix() for p in nbs.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    sections: list[tuple[str, list[Path]]] = []

    def expand(items, bucket, parent=""):
        for item in items:
            if isinstance(item, str): bucket.append(Path(item))
            elif isinstance(item, dict) and "auto" in item:
                globs = item["auto"] if isinstance(item["auto"], list) else [item["auto"]]
                for g in globs: bucket += [Path(p) for p in all_nbs if fnmatch.fnmatch(p, g)]
            elif isinstance(item, dict) and "section" in item:
                sub: list[Path] = []
                name = str(item["section"])
                sections.append((name, sub))
                if parent: parents[name] = parents.get(parent, parent)
                expand(item.get("contents", []), sub, name)
            elif isinstance(item, dict) and "href" in item: bucket.append(Path(item["href"]))

    top: list[Path] = []
    sections.append(("", top))
    expand(contents, top)
    return sections, parents


def navbar(nbs: Path) -> list[tuple[str, str]]:
    "[(text, href)] of `website.navbar.left` in nbs/_quarto.yml: the top bar's links (hrefs relative to nbs/)."
    path = nbs / "_quarto.yml"
    spec = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    items = spec.get("website", {}).get("navbar", {}).get("left", []) or []
    return [(str(i.get("text") or i["href"]), str(i["href"])) for i in items if isinstance(i, dict) and i.get("href")]


def excluded_globs(nbs: Path) -> list[str]:
    "Notebook globs the site leaves out: the `!pattern` entries of `project.render` in `_quarto.yml`."
    path = nbs / "_quarto.yml"
    spec = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    pats = [r[1:] for r in spec.get("project", {}).get("render", []) or [] if isinstance(r, str) and r.startswith("!")]
    return [q for pat in pats for q in ([pat.rstrip("/") + "/*"] if pat.endswith("/") else [pat])]


# ---------------------------------------------------------------------------------------------- callouts
_callout = re.compile(r"^(:{3,})\s*\{([^}\n]*\.callout-[^}\n]*)\}[ \t]*\n(.*?)^\1[ \t]*$", re.S | re.M)


class CalloutStore:
    """Quarto callouts (`::: {.callout-warning title="..."}` ... `:::`) in markdown -> placeholder tokens, then the
    HTML Quarto gives them (a `div.callout.callout-warning` with its title and its body rendered as markdown)."""
    def __init__(self): self.items: list[str] = []

    def protect(self, md: str) -> str:
        return _callout.sub(self._sub, md)

    def _sub(self, m) -> str:
        attrs = m.group(2)
        kind = re.search(r"\.callout-([\w-]+)", attrs).group(1)
        title = re.search(r"title\s*=\s*\"([^\"]*)\"", attrs)
        head = f"<div class='callout-title'>{_inline_md(title.group(1))}</div>" if title else ""
        self.items.append(f"<div class='callout callout-{html.escape(kind)}' role='note'>{head}"
                          f"{markdown2html_mistune(m.group(3))}</div>")
        return f"\n\nESPERCALLOUT{len(self.items) - 1}X\n\n"

    def restore(self, body: str) -> str:
        return re.sub(r"(?:<p>)?ESPERCALLOUT(\d+)X(?:</p>)?", lambda m: self.items[int(m.group(1))], body)


# ---------------------------------------------------------------------------------------------- math
_code = re.compile(r"(```.*?```|~~~.*?~~~|(?<!`)(`+)(?!`).*?(?<!`)\2(?!`))", re.S)
_math = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?![\d$])", re.S)


class MathStore:
    "`$...$` / `$$...$$` outside code -> placeholder tokens in the markdown, MathML after rendering."
    def __init__(self): self.items: list[str] = []

    def protect(self, md: str) -> str:
        parts = _code.split(md)
        out, i = [], 0
        # re.split with 2 groups yields: text, code, backticks, text, code, backticks, ...
        while i < len(parts):
            out.append(_math.sub(self._sub, parts[i]))
            if i + 1 < len(parts): out.append(parts[i + 1])
            i += 3
        return "".join(out)

    def _sub(self, m) -> str:
        tex, block = (m.group(1), True) if m.group(1) is not None else (m.group(2), False)
        try: mathml = tex_to_mathml(tex.strip(), display="block" if block else "inline")
        except Exception as e:  # keep the TeX visible rather than failing the build
            print(f"  warning: cannot convert math {tex!r}: {e}", file=sys.stderr)
            mathml = f"<code class='tex'>{html.escape(m.group(0))}</code>"
        self.items.append(mathml)
        return f"ESPERMATH{len(self.items) - 1}X"

    def restore(self, body: str) -> str:
        return re.sub(r"ESPERMATH(\d+)X", lambda m: self.items[int(m.group(1))], body)


# ---------------------------------------------------------------------------------------------- show_doc
_qual = re.compile(r"\b(?:esper\.(?:\w+\.)*|__main__\.|typing\.|collections\.abc\.|builtins\.)(?=\w)")


def fmt_anno(a) -> str:
    if a is inspect.Parameter.empty: return ""
    if a is type(None): return "None"
    s = a if isinstance(a, str) else inspect.formatannotation(a)
    return _qual.sub("", s).replace("NoneType", "None")


def _tokens(src: str):
    return list(tokenize.generate_tokens(io.StringIO(src).readline))


def comment_docs(fn) -> dict[str, str] | None:
    """Docments from the `# comment` after each parameter (and after `)` for the return), or None.

    Written here rather than taken from fastcore.docments, which gives the comment of a trailing `**kwargs`
    line to the return value."""
    try: src = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError): return None
    try: node = next(n for n in ast.parse(src).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    except (StopIteration, SyntaxError): return None
    a = node.args
    args = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs, *([a.kwarg] if a.kwarg else [])]
    starts = sorted(((x.lineno, x.col_offset), x.arg) for x in args)
    docs: dict[str, str] = {}
    depth, close, in_def, after_colon, arrow = 0, None, False, False, False
    for tok in _tokens(src):
        if tok.type == tokenize.NAME and tok.string == "def" and not in_def: in_def = True; continue
        if not in_def: continue
        if tok.type == tokenize.OP and tok.string in ("(", "[", "{"): depth += 1
        elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
            depth -= 1
            if depth == 0 and close is None: close = tok.start
        if after_colon and tok.type != tokenize.COMMENT: break   # only a comment may follow `def ...:` on its line
        if tok.type == tokenize.OP and tok.string == "->" and depth == 0: arrow = True
        if tok.type == tokenize.OP and tok.string == ":" and depth == 0 and close is not None: after_colon = True
        elif tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if close is not None:  # after `)`: the last parameter's when on its line with no `->` (`x=1): # doc`)
                last = max(args, key=lambda x: (x.lineno, x.col_offset)) if args else None
                own = last and not arrow and (last.end_lineno or last.lineno) == tok.start[0]
                docs[last.arg if own else "return"] = text
            else:
                owner = [n for pos, n in starts if pos < tok.start]
                if owner: docs[owner[-1]] = text
    return docs


def param_docs(obj) -> dict[str, str]:
    from fastcore.docments import docments
    target = obj
    if inspect.isclass(obj):
        if dataclasses.is_dataclass(obj) or "__init__" not in vars(obj):
            try: return {k: v for k, v in docments(obj).items() if v}
            except Exception: return {}
        target = vars(obj)["__init__"]
    found = comment_docs(target)
    if found is not None: return found
    try: return {k: v for k, v in docments(target).items() if v}
    except Exception: return {}


def _inline_md(s: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(s))


def signature_text(obj, name: str) -> tuple[str, list[inspect.Parameter], object]:
    sig = inspect.signature(obj)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls") and not inspect.isclass(obj): params = params[1:]
    parts, seen_kwonly, prev_posonly = [], False, False
    for p in params:
        if prev_posonly and p.kind != p.POSITIONAL_ONLY: parts.append("/")
        prev_posonly = p.kind == p.POSITIONAL_ONLY
        if p.kind == p.KEYWORD_ONLY and not seen_kwonly: parts.append("*"); seen_kwonly = True
        if p.kind == p.VAR_POSITIONAL: seen_kwonly = True
        s = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if fmt_anno(p.annotation): s += ": " + fmt_anno(p.annotation)
        if p.default is not p.empty: s += (" = " if fmt_anno(p.annotation) else "=") + repr(p.default)
        parts.append(s)
    if prev_posonly: parts.append("/")
    ret = "" if inspect.isclass(obj) else fmt_anno(sig.return_annotation)
    kw = "class" if inspect.isclass(obj) else ("async def" if inspect.iscoroutinefunction(obj) else "def")
    one = f"{kw} {name}({', '.join(parts)})" + (f" -> {ret}" if ret else "")
    if len(one) <= 88: return one, params, sig.return_annotation
    body = "".join(f"    {p},\n" for p in parts)
    return f"{kw} {name}(\n{body})" + (f" -> {ret}" if ret else ""), params, sig.return_annotation


def source_url(obj, cfg) -> str:
    try:
        target = inspect.unwrap(obj)
        path = Path(inspect.getsourcefile(target)).resolve()
        line = inspect.getsourcelines(target)[1]
        rel = path.relative_to(ROOT).as_posix()
    except (TypeError, OSError, ValueError): return ""
    return f"{cfg.get('git_url', '').rstrip('/')}/blob/{cfg.get('branch', 'main')}/{rel}#L{line}"


def render_doc(obj, name: str, level: int, cfg) -> str:
    """HTML for one show_doc: heading, source link, signature, docstring, parameter table.

    A property shows its getter's docstring and type; a TypedDict its keys as the table; a class whose signature
    Python cannot give (an exception class) its bases."""
    rows = []
    if isinstance(obj, property):
        fget = obj.fget
        ret = fmt_anno(inspect.signature(fget).return_annotation)
        sig, params, docs, target = f"property {name}" + (f" -> {ret}" if ret else ""), [], {}, fget
        obj = fget
    elif typing.is_typeddict(obj):
        docs = param_docs(obj)
        hints = dict(getattr(obj, "__annotations__", {}))
        sig, params, target = f"class {name}(TypedDict)", list(hints), obj
        rows = [(k, fmt_anno(v), "", docs.get(k, "")) for k, v in hints.items()]
    else:
        try: sig, params, ret_anno = signature_text(obj, name)
        except (ValueError, TypeError):
            if not inspect.isclass(obj): raise
            bases = ", ".join(b.__name__ for b in obj.__bases__ if b is not object)
            sig, params, ret_anno = f"class {name}({bases})", [], inspect.Signature.empty
        docs = param_docs(obj)
        for p in params:
            label = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
            default = "" if p.default is p.empty else repr(p.default)
            rows.append((label, fmt_anno(p.annotation), default, docs.get(p.name, "")))
        ret = "" if inspect.isclass(obj) else fmt_anno(ret_anno)
        if ret or docs.get("return"): rows.append(("Returns", ret, "", docs.get("return", "")))
        target = inspect.unwrap(obj)
    url = source_url(obj, cfg)
    api = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', name)}"
    out = [f"<div class='doc-item' data-api='{html.escape(api)}' data-nparams='{len(params)}'>"]
    if url: out.append(f"<a class='doc-source' href='{html.escape(url)}' target='_blank' rel='noopener'>source</a>")
    out.append(f"<h{level} class='doc-name'>{html.escape(name)}</h{level}>")
    out.append(f"<div class='doc-signature'>{highlight(sig, PythonLexer(), HtmlFormatter(nowrap=False))}</div>")
    doc = inspect.getdoc(obj) or ""
    if doc: out.append(f"<div class='doc-docstring'>{markdown2html_mistune(doc)}</div>")
    if rows:
        out.append("<table class='doc-params'><thead><tr><th></th><th>Type</th><th>Default</th><th>Details</th>"
                   "</tr></thead><tbody>")
        for label, anno, default, d in rows:
            cls = " class='doc-returns'" if label == "Returns" else " class='doc-param'"
            out.append(f"<tr{cls}><td><code>{html.escape(label)}</code></td><td><code>{html.escape(anno)}</code></td>"
                       f"<td><code>{html.escape(default)}</code></td><td>{_inline_md(d)}</td></tr>")
        out.append("</tbody></table>")
    out.append("</div>")
    return "\n".join(out).replace("<code></code>", "")


def quarto_md_to_html(md: str) -> str:
    "A show_doc output stored as nbdev markdown (`---`, `[source](...){target=...}`, `:::` fences) -> HTML."
    lines = [l for l in md.strip().splitlines() if not re.match(r"^\s*:::", l)]
    while lines and lines[0].strip() in ("---", ""): lines.pop(0)
    md = "\n".join(lines)
    md = re.sub(r"\]\(([^)]*)\)\{[^}]*\}", r"](\1)", md)       # link attributes
    md = re.sub(r"\[([^\]]*)\]\{[^}]*\}", r"\1", md)           # bracketed spans with attributes
    md = re.sub(r"\s\{[.#][^}]*\}\s*$", "", md, flags=re.M)    # heading / block attributes
    out = markdown2html_mistune(md)
    out = re.sub(r"<p>\s*<a href=\"([^\"]+)\">source</a>\s*</p>",
                 r"<a class='doc-source' href='\1' target='_blank' rel='noopener'>source</a>", out, count=1)
    out = re.sub(r"<h([1-6])(?=[ >])", r"<h\1 class='doc-name'", out, count=1)
    return f"<div class='doc-item doc-stored'>{out}</div>"


@dataclass
class DocStats:
    from_objects: int = 0
    from_stored: int = 0
    unresolved: list[str] = field(default_factory=list)


def show_doc_calls(src: str) -> list[tuple[str, str | None, int]] | None:
    "[(expression, name=, title_level)] when the cell is only show_doc(...) calls, else None."
    try: tree = ast.parse(src)
    except SyntaxError: return None
    calls = []
    for st in tree.body:
        if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name)
                and st.value.func.id == "show_doc" and st.value.args): return None
        kw = {k.arg: k.value for k in st.value.keywords}
        name = kw["name"].value if isinstance(kw.get("name"), ast.Constant) else None
        level = kw["title_level"].value if isinstance(kw.get("title_level"), ast.Constant) else 3
        calls.append((ast.get_source_segment(src, st.value.args[0]), name, level))
    return calls or None


def namespace_for(nb, module: str) -> dict:
    "The exported module's globals, plus whatever the notebook's own import statements bring in."
    ns: dict = {}
    if module:
        mod = "esper." + module.removesuffix(".__init__").removesuffix("__init__").rstrip(".")
        try: ns.update(vars(importlib.import_module(mod)))
        except Exception as e: print(f"  warning: cannot import {mod}: {e}", file=sys.stderr)
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        try: tree = ast.parse("\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError: continue
        for st in tree.body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                try: exec(compile(ast.Module([st], []), "<imports>", "exec"), ns)
                except Exception: pass
    return ns


def render_show_docs(nb, module: str, cfg, stats: DocStats, where: str, html_blocks: list[str]):
    "Replace each show_doc-only code cell by a raw cell holding a token for its HTML (in `html_blocks`)."
    ns = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "show_doc" not in cell.source: continue
        calls = show_doc_calls(cell.source)
        if not calls: continue
        if ns is None: ns = namespace_for(nb, module)
        parts = []
        stored = [o.get("data", {}).get("text/markdown") for o in cell.get("outputs", [])]
        stored = [s for s in stored if s]
        for j, (expr, name, level) in enumerate(calls):
            try:
                obj = eval(expr, dict(ns))
                parts.append(render_doc(obj, name or expr, level, cfg)); stats.from_objects += 1
            except Exception as e:
                if j < len(stored):
                    parts.append(quarto_md_to_html(stored[j])); stats.from_stored += 1
                    print(f"  note: {where}: show_doc({expr}) from the stored output ({type(e).__name__}: {e})")
                else:
                    stats.unresolved.append(f"{where}: show_doc({expr}): {type(e).__name__}: {e}")
                    parts.append(f"<div class='doc-item'><h{level} class='doc-name'>{html.escape(name or expr)}"
                                 f"</h{level}><p class='doc-missing'>(signature not available in this preview)</p></div>")
        # nbconvert sanitises raw cells (clean_html), so the cell holds a token that `restore` swaps back
        html_blocks.append("\n".join(parts))
        nb.cells[i] = nbformat.v4.new_raw_cell(f"ESPERDOC{len(html_blocks) - 1}X", metadata={"raw_mimetype": "text/html"})


def restore_docs(body: str, html_blocks: list[str]) -> str:
    return re.sub(r"(?:<p>)?ESPERDOC(\d+)X(?:</p>)?", lambda m: html_blocks[int(m.group(1))], body)


# ---------------------------------------------------------------------------------------------- html
def pandoc_id(text: str) -> str:
    "Pandoc's auto_identifiers, which Quarto uses for heading anchors."
    s = re.sub(r"[^\w\s.-]", "", text, flags=re.U).strip().lower()
    s = re.sub(r"\s+", "-", s)
    s = re.sub(r"^[^a-z_]+", "", s) if not re.match(r"^[^\W\d_]", s, re.U) else s
    return s or "section"


def link_target(href: str) -> str | None:
    "Rewrite a relative link to a notebook (with or without #anchor) to its rendered page; None if not one."
    if not href or href.startswith("#") or _external.match(href): return None
    path, _, anchor = href.partition("#")
    if not path.endswith(".ipynb"): return None
    return re.sub(r"\.ipynb$", ".html", path) + (f"#{anchor}" if anchor else "")


def postprocess(body: str, page: Page, counts: dict, alts: dict[str, str] | None = None) -> tuple[str, list[tuple[int, str, str]]]:
    soup = BeautifulSoup(body, "html.parser")
    for tag, (alt, pt) in (alts or {}).items():  # a cell's `#| fig-alt:` on the images it shows, as Quarto does
        for img in soup.select(f".celltag_{tag} img"):
            if alt: img["alt"] = alt
            if pt: img["data-text-pt"] = f"{pt:g}"  # for docs_check: the smallest font size the cell asks for
    used: set[str] = set()
    toc = []
    for h in soup.find_all(re.compile(r"^h[1-6]$")):
        for a in h.find_all("a", class_="anchor-link"): a.decompose()
        base = pandoc_id(h.get_text(" ", strip=True))
        new, n = base, 1
        while new in used: new, n = f"{base}-{n}", n + 1
        used.add(new)
        h["id"] = new
        if "doc-name" not in (h.get("class") or []):
            a = soup.new_tag("a", href=f"#{new}", **{"class": "anchor-link", "aria-hidden": "true"})
            a.string = "#"
            h.append(a)
        if h.name in ("h2", "h3"): toc.append((int(h.name[1]), new, h.get_text(" ", strip=True).rstrip("#").strip()))
    for a in soup.find_all("a", href=True):
        if not _external.match(a["href"]) and not a["href"].startswith("#"): counts["internal"] += 1
        new = link_target(a["href"])
        if new is not None:
            a["data-notebook-href"] = a["href"]; a["href"] = new; counts["rewritten"] += 1
    for tag in soup.find_all(["script", "link", "iframe"]):
        src = tag.get("src") or tag.get("href") or ""
        if _external.match(src) and not src.startswith("data:"):
            print(f"  warning: {page.dest}: removed <{tag.name}> loading {src}", file=sys.stderr); tag.decompose()
    return str(soup), toc


CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--bg-code:#f6f8fa;--accent:#2780e3;--side:17rem}
*{box-sizing:border-box}
html{scroll-padding-top:4rem}
body{margin:0;font:16px/1.6 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg)}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.topbar{position:sticky;top:0;z-index:10;display:flex;align-items:center;gap:.3rem 1rem;padding:.45rem 1.2rem;
  background:var(--accent);color:#fff;flex-wrap:wrap}
.topbar a{color:#fff}.topbar .brand{font-weight:700;font-size:1.15rem}
.topbar nav{display:flex;gap:.15rem .8rem;flex-wrap:wrap;font-size:.84rem}.topbar nav a{opacity:.9;white-space:nowrap}
.topbar nav a.active{opacity:1;text-decoration:underline}
.topbar .badge{font-size:.72rem;opacity:.85;white-space:nowrap}
.layout{display:grid;grid-template-columns:var(--side) minmax(0,1fr) 13rem;gap:2rem;max-width:88rem;margin:0 auto}
#sidebar{position:sticky;top:3.2rem;align-self:start;max-height:calc(100vh - 3.4rem);overflow:auto;
  padding:1.2rem .4rem 2rem 1.2rem;font-size:.9rem;border-right:1px solid var(--line)}
#sidebar .section{margin:.9rem 0 .25rem;font-weight:600;color:var(--fg)}
#sidebar .section.sub{margin:.5rem 0 .15rem .5rem;font-weight:500;font-size:.86rem}#sidebar ul.sub{margin-left:.5rem}
.callout{border:1px solid var(--line);border-left:5px solid #f0ad4e;border-radius:6px;padding:.6rem 1rem;margin:1rem 0;
  background:#fffaf2}.callout-note{border-left-color:var(--accent);background:#f3f7fc}
.callout-important{border-left-color:#d9534f;background:#fdf4f4}.callout-title{font-weight:600;margin-bottom:.3rem}
.callout>p:last-child{margin-bottom:0}
#sidebar ul{list-style:none;margin:0;padding:0}#sidebar li{margin:.1rem 0}
#sidebar a{display:block;padding:.12rem .5rem;border-radius:4px;color:var(--muted)}
#sidebar a:hover{background:#eef4fc;text-decoration:none;color:var(--fg)}
#sidebar a[aria-current=page]{background:#e1ecfa;color:var(--accent);font-weight:600}
.tag{font-size:.72rem;color:var(--muted);border:1px solid var(--line);border-radius:3px;padding:0 .25rem;margin-left:.25rem}
main{padding:1.5rem 0 3rem;min-width:0}
.title-block h1{font-size:2.1rem;line-height:1.2;margin:.3rem 0 .6rem}
.title-block .subtitle{font-size:1.12rem;color:var(--muted);margin:0 0 1.5rem}
.toc{position:sticky;top:3.2rem;align-self:start;padding-top:1.6rem;font-size:.85rem;max-height:calc(100vh - 3.4rem);overflow:auto}
.toc h2{font-size:.85rem;margin:0 0 .4rem;color:var(--muted)}.toc ul{list-style:none;margin:0;padding:0}
.toc li.l3{padding-left:.8rem}.toc a{color:var(--muted)}
h1,h2,h3,h4{line-height:1.25}h2{margin-top:2rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
.anchor-link{margin-left:.35rem;color:var(--line);font-weight:400}h1:hover .anchor-link,h2:hover .anchor-link,
h3:hover .anchor-link,h4:hover .anchor-link{color:var(--muted)}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em;background:var(--bg-code);
  padding:.05rem .25rem;border-radius:3px}
pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.84rem;line-height:1.45;overflow:auto;margin:0}
pre code{background:none;padding:0}
.highlight{background:var(--bg-code);border-radius:6px;padding:.7rem .9rem;margin:.8rem 0}
.input_area .highlight{border-left:3px solid #c5d4e6}
.output_area pre,.output_subarea>pre{padding:.5rem .9rem;border-left:3px solid #e2e2e2;margin:.3rem 0 .8rem}
.output_stderr pre{background:#fff5f5;border-left-color:#f3b7b7}
.output_png img,.output_jpeg img,.output_svg svg{max-width:100%;height:auto;display:block;margin:.5rem 0 1rem}
table{border-collapse:collapse;margin:1rem 0;font-size:.92rem;display:block;overflow-x:auto}
td code,th code{overflow-wrap:anywhere}
th,td{border-bottom:1px solid var(--line);padding:.35rem .7rem;text-align:left;vertical-align:top}
thead th{border-bottom:2px solid #aab4c0}
blockquote{margin:1rem 0;padding:.2rem 1rem;border-left:4px solid var(--line);color:var(--muted)}
math[display=block]{margin:.8rem 0}
.doc-item{border-top:1px solid var(--line);margin:1.6rem 0;padding-top:.4rem}
.doc-item .doc-name{margin:.4rem 0;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:1.05rem;border:0}
.doc-source{float:right;font-size:.8rem;margin-top:.6rem}
.doc-docstring p{font-style:italic;margin:.4rem 0}
.doc-params{font-size:.88rem}.doc-params .doc-returns td:first-child code{font-weight:600;background:none}
.doc-missing{color:#a33}
.pager{display:flex;justify-content:space-between;gap:1rem;margin-top:3rem;padding-top:1rem;border-top:1px solid var(--line)}
.pager a{display:block;max-width:48%;padding:.6rem .9rem;border:1px solid var(--line);border-radius:6px}
.pager a:hover{background:#f3f7fc;text-decoration:none}.pager .next{margin-left:auto;text-align:right}
.pager small{display:block;color:var(--muted)}
.chapters h3{margin:1.4rem 0 .3rem;font-size:1.05rem}.chapters ul{margin:0;padding-left:1.1rem}
.chapters li{margin:.3rem 0}.chapters .summary{color:var(--muted)}.chapters .also{font-size:.85rem;color:var(--muted)}
@media (max-width:1100px){.layout{grid-template-columns:var(--side) minmax(0,1fr)}.toc{display:none}}
@media (max-width:760px){.layout{display:block;padding:0 1rem}#sidebar{position:static;max-height:none;border:0;padding:1rem 0}}
"""


def page_html(page: Page, body: str, toc, pages: list[Page], sections: list[tuple[str, list[Page]]], project: str,
              parents: dict[str, str] | None = None, links: list[tuple[str, str]] | None = None) -> str:
    """One page in the site's layout. `parents`: {nested section: its top-level section} (sidebar_tree); `links`: the
    top bar's [(text, notebook href)] (navbar); without them, one top-bar link per section."""
    up = "../" * page.dest.count("/")
    def href(p: Page) -> str: return up + p.dest
    e = html.escape
    parents = parents or {}
    side = ["<nav id='sidebar' aria-label='Chapters'>"]
    shown: set[str] = set()
    for name, items in sections:
        if not items: continue
        parent = parents.get(name)
        if parent and parent not in shown:
            side.append(f"<div class='section'>{e(parent)}</div>"); shown.add(parent)
        if name and name not in shown:
            side.append(f"<div class='section{' sub' if parent else ''}'>{e(name)}</div>"); shown.add(name)
        side.append("<ul class='sub'>" if parent else "<ul>")
        for p in items:
            cur = " aria-current='page'" if p is page else ""
            tag = f" <span class='tag' title='re-exports {e(p.reexport_of)}'>re-export</span>" if p.reexport_of else ""
            side.append(f"<li><a href='{e(href(p))}'{cur}>{e(p.title)}{tag}</a></li>")
        side.append("</ul>")
    side.append("</nav>")
    group = parents.get(page.section, page.section)
    if links:
        top = []
        for text, target in links:
            dest = link_target(target) or target
            first = next((p for p in pages if p.dest == dest.partition("#")[0]), None)
            active = " class='active'" if first is not None and (first is page or (
                group and parents.get(first.section, first.section) == group)) else ""
            top.append(f"<a href='{e(up + dest)}'{active}>{e(text)}</a>")
    else:
        top = [f"<a href='{up}index.html#chapters'>Chapters</a>"]
        for name, items in sections:
            if not name or not items: continue
            active = " class='active'" if page.section == name else ""
            top.append(f"<a href='{e(href(items[0]))}'{active}>{e(name.replace(' — ', ': '))}</a>")
    order = [p for p in pages if p.in_sidebar]
    pager = ["<nav class='pager' aria-label='Previous and next chapter'>"]
    if page in order:
        i = order.index(page)
        if i > 0:
            p = order[i - 1]; pager.append(f"<a class='prev' rel='prev' href='{e(href(p))}'><small>← Previous</small>{e(p.title)}</a>")
        if i + 1 < len(order):
            p = order[i + 1]; pager.append(f"<a class='next' rel='next' href='{e(href(p))}'><small>Next →</small>{e(p.title)}</a>")
    pager.append("</nav>")
    toc_html = ""
    if len(toc) > 1:
        toc_html = "<aside class='toc'><h2>On this page</h2><ul>" + "".join(
            f"<li class='l{lvl}'><a href='#{e(i)}'>{e(t)}</a></li>" for lvl, i, t in toc) + "</ul></aside>"
    subtitle = f"<p class='subtitle'>{_inline_md(page.summary)}</p>" if page.summary else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(page.title)} – {e(project)}</title>
<link rel="stylesheet" href="{up}_static/preview.css">
</head>
<body>
<header class="topbar"><a class="brand" href="{up}index.html">{e(project)}</a><span class="badge">offline preview</span><nav aria-label="Sections">{''.join(top)}</nav></header>
<div class="layout">
{''.join(side)}
<main id="content">
<header class="title-block"><h1>{e(page.title)}</h1>{subtitle}</header>
{body}
{''.join(pager)}
</main>
{toc_html}
</div>
<script>/* keep the current chapter in view in a long sidebar */
(function(){{var s=document.getElementById("sidebar"),c=s&&s.querySelector("[aria-current=page]");
if(c)s.scrollTop=c.offsetTop-s.clientHeight/3;}})();</script>
</body>
</html>
"""


def chapters_html(pages: list[Page], sections) -> tuple[str, list[str]]:
    "The index's chapter list: sidebar order, each title once, aliases named under the chapter they re-export."
    by_module = {p.module: p for p in pages if p.module}
    aliases: dict[str, list[Page]] = {}
    notes = []
    for p in pages:
        if p.reexport_of:
            target = by_module.get(p.reexport_of.removeprefix("esper."))
            if target: aliases.setdefault(target.dest, []).append(p)
            notes.append(f"{p.src.as_posix()} ('{p.title}') re-exports {p.reexport_of}: listed under "
                         f"{target.src.as_posix() if target else '(no chapter found)'}")
    seen: dict[str, Page] = {}
    out = ["<section class='chapters' id='chapters'><h2>Chapters</h2>"]
    for name, items in sections:
        lis = []
        for p in items:
            if p.dest == "index.html" or p.reexport_of: continue
            key = re.sub(r"\s+", " ", p.title).strip().lower()
            if key in seen:
                notes.append(f"duplicate title '{p.title}': {p.src.as_posix()} left out of the index "
                             f"(kept {seen[key].src.as_posix()}, first in reading order)")
                continue
            seen[key] = p
            also = "".join(f"<div class='also'>Also importable as <code>esper.{html.escape(a.module)}</code> "
                           f"(<a href='{html.escape(a.dest)}'>re-export page</a>).</div>" for a in aliases.get(p.dest, []))
            summary = f" <span class='summary'>— {_inline_md(p.summary)}</span>" if p.summary else ""
            lis.append(f"<li><a href='{html.escape(p.dest)}'>{html.escape(p.title)}</a>{summary}{also}</li>")
        if lis: out.append((f"<h3>{html.escape(name)}</h3>" if name else "") + "<ul>" + "".join(lis) + "</ul>")
    out.append("</section>")
    return "\n".join(out), notes


# ---------------------------------------------------------------------------------------------- main
def main(src: str, out: str, execute: bool = False) -> int:
    nbs, out = Path(src), Path(out)
    cfgp = configparser.ConfigParser(delimiters=["="]); cfgp.read(ROOT / "settings.ini")
    cfg = dict(cfgp.defaults())
    project = cfg.get("title") or cfg.get("lib_name") or "docs"
    sys.path.insert(0, str(ROOT))

    excluded = excluded_globs(nbs)
    found = {p.relative_to(nbs).as_posix(): p for p in sorted(nbs.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts
             and not any(fnmatch.fnmatch(p.relative_to(nbs).as_posix(), g) for g in excluded)}
    pages: list[Page] = []
    placed: set[str] = set()
    tree, parents = sidebar_tree(nbs)
    links = navbar(nbs)
    for name, items in tree:
        for rel in items:
            key = rel.as_posix()
            if key not in found:
                print(f"  warning: sidebar.yml lists {key}, which does not exist", file=sys.stderr); continue
            if key in placed: continue
            placed.add(key); pages.append(Page(rel, dest_of(rel), section=name))
    for key in found:
        if key not in placed:
            print(f"  warning: {key} is not in sidebar.yml; listed under 'Other'", file=sys.stderr)
            pages.append(Page(Path(key), dest_of(Path(key)), section="Other"))
    section_names = list(dict.fromkeys(p.section for p in pages))
    sections = [(s, [p for p in pages if p.section == s]) for s in section_names]

    for p in pages:
        nb = nbdev_read(nbs / p.src)
        p.module = default_exp(nb)
        p.reexport_of = reexport_source(nb, p.module)
        if execute:
            print(f"  executing {p.src}")
            ExecutePreprocessor(timeout=1200).preprocess(nb, {"metadata": {"path": str((nbs / p.src).parent)}})
        p.title, p.summary = title_block(nb)
        p.title = p.title or p.src.stem
        p.nb = reader_view(nb)

    exporter = HTMLExporter(template_name="basic", exclude_input_prompt=True, exclude_output_prompt=True)
    stats, counts = DocStats(), {"internal": 0, "rewritten": 0}
    chapters, notes = chapters_html(pages, sections)
    (out / "_static").mkdir(parents=True, exist_ok=True)
    (out / "_static" / "preview.css").write_text(CSS + HtmlFormatter(style="default").get_style_defs(".highlight"))
    n_math = 0
    for p in pages:
        nb = p.nb
        html_blocks: list[str] = []
        render_show_docs(nb, p.module, cfg, stats, p.src.as_posix(), html_blocks)
        math, callouts, alts = MathStore(), CalloutStore(), {}
        for cell in nb.cells:
            if cell.cell_type == "markdown": cell.source = math.protect(callouts.protect(cell.source))
            if cell.metadata.get("esper_fig_alt") or cell.metadata.get("esper_text_pt"):
                tag = f"esperfig{len(alts)}"
                cell.metadata["tags"] = list(cell.metadata.get("tags", [])) + [tag]
                alts[tag] = (cell.metadata.get("esper_fig_alt"), cell.metadata.get("esper_text_pt"))
        body, _ = exporter.from_notebook_node(nb)
        body = restore_docs(callouts.restore(math.restore(body)), html_blocks)
        n_math += len(math.items)
        if p.dest == "index.html": body += "\n" + chapters
        body, toc = postprocess(body, p, counts, alts)
        dest = out / p.dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(page_html(p, body, toc, pages, sections, project, parents, links))
        p.nb = None
    for n in notes: print(f"  index: {n}")
    for u in stats.unresolved: print(f"  warning: {u}", file=sys.stderr)
    print(f"wrote {len(pages)} pages to {out}/ (index: {out / 'index.html'}); "
          f"{counts['internal']} internal links, {counts['rewritten']} .ipynb links rewritten to .html; "
          f"{n_math} formulas as MathML; show_doc: {stats.from_objects} from esper objects, "
          f"{stats.from_stored} from stored outputs, {len(stats.unresolved)} unresolved")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default="nbs")
    ap.add_argument("out", nargs="?", default="_preview")
    ap.add_argument("--execute", action="store_true", help="re-run every notebook while rendering")
    a = ap.parse_args()
    sys.exit(main(a.src, a.out, a.execute))
