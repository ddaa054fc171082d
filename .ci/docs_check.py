"""Check the offline docs preview in headless Chromium: navigation, links, markup, images, no network.

    python .ci/docs_check.py _preview [--chapter simic/envs/20_rewards.html] [--chromium PATH]

Every `*.html` page under the folder is loaded from file:// in one headless Chromium, driven over the Chrome
DevTools Protocol on a pipe (`--remote-debugging-pipe`: no port, no extra package). For each page it checks

* navigation: the sidebar (`nav#sidebar` with links), the top bar's link to the index, previous/next links;
* links: every relative `href`/`src` (as Chromium resolves it) points at an existing file, and its `#anchor`
  at an existing id in that file; same-page `#anchors` too;
* markup: no raw Quarto/nbdev markup (`:::` fences, `{.class}` / `{target=...}` attributes) in the page's text, and no
  code cell that shows a `#|` directive or `from nbdev.showdoc import *` (export and hide cells are hidden on the site),
  and no show_doc the preview could not render (`.doc-missing`);
* images: every `<img>` loaded (`naturalWidth > 0`);
* network: every request the page makes is file:, data: or blob: (anything else is recorded, blocked and
  reported), and no file:// request fails;
* length: no page's prose (the text outside code, outputs and API blocks) is over 6,000 words.
* top bar: at most 8 links (the project's name among them);
* tables: none wider than its column at 1280 px (none scrolls);
* figures: every image has alt text that is neither empty nor nbconvert's "No description has been provided for this
  image"; and a figure's text is at least 9 pt as shown: a PNG's resolution (pHYs) gives its width in inches, the page
  the width it is shown at, and the text is taken at the smallest `fontsize=`/`labelsize=` its cell asks for
  (`data-text-pt`, from the preview) or else at matplotlib's default 10 pt;
* the honest splits: a page whose prose names commits, all of them older than 51274e9 (the train/validation/test
  splits), carries a callout that says it was measured before the honest splits and links to results.html.
  Faults listed in PENDING (page -> kinds) are counted rather than failed until they are fixed.

And over the whole site:

* API reference: every public function and class the `esper` package exports (the names in each module's
  `__all__` that the module defines itself) has a rendered API block (`.doc-item[data-api]`, as nbdev's docs build
  adds one for each) on some page, and every API block lists each of its parameters (`data-nparams` rows);
* landing page: README.md (generated from nbs/index.ipynb) is at most 160 lines, and index.html shows a figure
  before its list of chapters.

It saves `_screenshots/index.png` and `_screenshots/chapter.png` in the folder, prints a summary and exits 1
with the list of failures if there is any (2 when Chromium cannot be started).
"""
from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
RESOURCE_ATTRS = {"script": "src", "link": "href", "img": "src", "iframe": "src", "source": "src", "video": "src",
                  "audio": "src", "embed": "src", "object": "data", "track": "src"}
MARKUP = re.compile(r":::|\{[.#][\w-]|\{target=|\{style=")
PAGE_TIMEOUT = 30.0
MAX_WORDS = 6000          # prose words on one page
MAX_LANDING_LINES = 160   # README.md, i.e. nbs/index.ipynb rendered (about 150)
ROOT = Path(__file__).resolve().parents[1]
MAX_TOPBAR = 8            # links in the top bar, the project's name among them
MIN_FIGURE_PT = 9         # the smallest text of a figure, in points, as the page shows it
FIGURE_TEXT_PT = 10       # the size a figure's smallest text is drawn at: matplotlib's default (ticks, labels, legend)
CSS_PX_PER_INCH = 96
NO_ALT = ("", "no description has been provided for this image")
# The commit that gave every task its train/validation/test splits: a page whose prose names commits, all of them
# older than this one, reports measurements made before the splits and carries a callout that says so.
HONEST_SPLITS = "51274e9"
# Known faults not fixed yet, page by page (a ratchet): a listed page's faults of that kind are counted, not failed,
# and a listed page that no longer has them fails until it leaves the list. Each needs its figure drawn again (at
# column width, text of 9 pt or more) or its table split.
PENDING: dict[str, set[str]] = {}

PROBE = r"""(() => {
  const side = document.querySelector('nav#sidebar');
  const brand = document.querySelector('header.topbar a.brand');
  const text = document.body ? document.body.innerText : '';
  const hits = [];
  const re = /:::|\{[.#][\w-]|\{target=|\{style=/g; let m;
  while ((m = re.exec(text)) && hits.length < 5) {
    hits.push(text.slice(Math.max(0, m.index - 40), m.index + 40)); re.lastIndex = m.index + 40; }
  return {
    title: document.title,
    sidebar: side ? side.querySelectorAll('a[href]').length : -1,
    brand: brand ? brand.href : null,
    pager: document.querySelectorAll('nav.pager a[href]').length,
    links: [...document.querySelectorAll('a[href], link[href]')].map(a => [a.getAttribute('href'), a.href,
            !!a.closest('nav, header.topbar, aside.toc, head'), a.getAttribute('data-notebook-href')]),
    srcs: [...document.querySelectorAll('[src]')].map(e => [e.getAttribute('src').slice(0, 200), e.src.slice(0, 300)]),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id).concat(
         [...document.querySelectorAll('a[name]')].map(e => e.getAttribute('name'))),
    images: [...document.images].map(i => [i.getAttribute('src').slice(0, 80), i.complete, i.naturalWidth]),
    markup: hits,
    directives: [...document.querySelectorAll('.input_area')].map(e => e.innerText)
          .filter(t => /^\s*#\|/m.test(t) || t.includes('nbdev.showdoc')).map(t => t.trim().split('\n')[0].slice(0, 80)),
    missing_docs: [...document.querySelectorAll('.doc-missing')].map(e => e.closest('.doc-item')?.innerText.split('\n')[0] || '?'),
    math: document.getElementsByTagName('math').length,
    api: [...document.querySelectorAll('.doc-item[data-api]')].map(e => [e.dataset.api, +e.dataset.nparams,
          e.querySelectorAll('tr.doc-param').length]),
    words: (() => { const m = document.querySelector('main'); if (!m) return 0; const c = m.cloneNode(true);
          c.querySelectorAll('.doc-item, .input_area, .output_area, .output, pre, nav.pager, section.chapters, math')
           .forEach(e => e.remove());
          return (c.textContent.match(/[A-Za-z0-9][\w'’.,:;%±-]*/g) || []).length; })(),
    topbar: document.querySelectorAll('header.topbar a[href]').length,
    tables: [...document.querySelectorAll('main table')].filter(t => t.scrollWidth > t.clientWidth + 1)
          .map(t => [t.scrollWidth, t.clientWidth, !!t.closest('.doc-item'),
                     (t.querySelector('tr') ? t.querySelector('tr').innerText : '').replace(/\s+/g, ' ').trim().slice(0, 90)]),
    pictures: [...document.querySelectorAll('main img')].filter(i => !i.closest('section.chapters'))
          .map(i => [i.getAttribute('src').slice(0, 3000), i.naturalWidth, i.getBoundingClientRect().width, i.getAttribute('alt'),
                     parseFloat(i.dataset.textPt || '0')]),
    callouts: [...document.querySelectorAll('main .callout')].map(c => [c.innerText.replace(/\s+/g, ' ').slice(0, 300),
          [...c.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))]),
    commits: (() => { const m = document.querySelector('main'); if (!m) return []; const c = m.cloneNode(true);
          c.querySelectorAll('.doc-item, .input_area, .output_area, .output, pre').forEach(e => e.remove());
          return [...new Set(c.textContent.match(/\b[0-9a-f]{7}\b/g) || [])]; })(),
    figures: (() => { const m = document.querySelector('main'); if (!m) return 0;
          return [...m.querySelectorAll('img, svg')].filter(e => !e.closest('section.chapters')).length; })(),
  };
})()"""


class CDP:
    "Chrome DevTools Protocol over --remote-debugging-pipe (fd 3: commands in, fd 4: replies out, NUL-terminated)."

    def __init__(self, chromium: str, profile: str):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def fds():  # in the child: its fd 3 reads our commands, its fd 4 carries its replies
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]  # clear of 3 and 4
            os.dup2(high[0], 3); os.dup2(high[1], 4)  # dup2 leaves them inheritable
        args = [chromium, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--allow-file-access-from-files",
                f"--user-data-dir={profile}", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=fds, pass_fds=(3, 4), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r); os.close(from_chrome_w)
        self._buf, self._id, self.events = b"", 0, []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0: raise TimeoutError("no reply from Chromium")
            ready, _, _ = select.select([self._r], [], [], left)
            if not ready: continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk: raise RuntimeError("Chromium closed the DevTools pipe (did it start?)")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = PAGE_TIMEOUT):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session: msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m: raise RuntimeError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            if "method" in m: self.events.append(m)

    def wait_event(self, method: str, session: str, timeout: float = PAGE_TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events):
            if e["method"] == method and e.get("sessionId") == session:
                del self.events[i]; return True
        while time.monotonic() < deadline:
            try: m = self._read_message(deadline)
            except TimeoutError: return False
            if m.get("method") == method and m.get("sessionId") == session: return True
            if "method" in m: self.events.append(m)
        return False

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try: m = self._read_message(deadline)
            except TimeoutError: return
            if "method" in m: self.events.append(m)

    def close(self) -> None:
        try: self.send("Browser.close", timeout=5)
        except Exception: pass
        try: self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        os.close(self._w); os.close(self._r)


class _Resources(HTMLParser):
    "Static pass: resource URLs (src/href that the browser would fetch) in the raw HTML."
    def __init__(self):
        super().__init__(); self.urls = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = RESOURCE_ATTRS.get(tag)
        if name and a.get(name): self.urls.append((tag, a[name]))
        if a.get("srcset"): self.urls += [(tag, u.split()[0]) for u in a["srcset"].split(",") if u.strip()]
        if a.get("style") and "url(" in a["style"]: self.urls += [(tag, u) for u in re.findall(r"url\(['\"]?([^'\")]+)", a["style"])]


def external_refs(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    p = _Resources(); p.feed(text)
    found = [f"<{t}> {u}" for t, u in p.urls if not u.startswith(LOCAL_SCHEMES) and re.match(r"^(?:[a-z][\w+.-]*:|//)", u, re.I)]
    found += [f"css {u}" for u in re.findall(r"(?:@import\s+(?:url\()?|url\()\s*['\"]?((?:https?:)?//[^'\")\s]+)", text)]
    return found


def ids_of(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        class P(HTMLParser):
            def __init__(s): super().__init__(); s.ids = set()
            def handle_starttag(s, tag, attrs):
                for k, v in attrs:
                    if k == "id" or (tag == "a" and k == "name"): s.ids.add(v)
        p = P(); p.feed(path.read_text(errors="replace")); cache[path] = p.ids
    return cache[path]


def exported_api() -> dict[str, str]:
    """{"module.qualname": module} for every public function and class of the `esper` package: the names of each
    module's `__all__` (nbdev writes it from the `#| export` cells) that the module itself defines with a `def` or
    `class` statement (nbdev's index of them, `esper/_modidx.py`): the names nbdev's docs build documents."""
    import importlib, inspect, pkgutil
    sys.path.insert(0, str(ROOT))
    import esper
    from esper._modidx import d as modidx
    statements = {sym for syms in modidx["syms"].values() for sym in syms}
    found = {}
    for info in pkgutil.walk_packages(esper.__path__, "esper."):
        if info.name.rsplit(".", 1)[-1].startswith("_"): continue
        try: mod = importlib.import_module(info.name)
        except Exception as e:
            print(f"docs-check: note: cannot import {info.name} ({type(e).__name__}: {e}); its API is not checked"); continue
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)): continue
            # defined in this module under this name (not an alias, a re-export or a function that a call made)
            if getattr(obj, "__module__", None) != mod.__name__ or getattr(obj, "__name__", None) != name: continue
            if f"{mod.__name__}.{name}" not in statements: continue
            found[f"{mod.__name__}.{obj.__qualname__}"] = mod.__name__
    return found


def png_dpi(data: bytes) -> float | None:
    "The resolution a PNG records (its pHYs chunk, in pixels per metre), in dots per inch; None if it records none."
    if data[:8] != b"\x89PNG\r\n\x1a\n": return None
    i = 8
    while i + 8 <= len(data):
        n, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8]
        if kind == b"pHYs" and i + 17 <= len(data):
            ppu, unit = int.from_bytes(data[i + 8:i + 12], "big"), data[i + 16]
            return ppu * 0.0254 if unit == 1 and ppu else None
        if kind in (b"IDAT", b"IEND"): return None
        i += 12 + n
    return None


def image_head(src: str, page: Path) -> bytes:
    "The first bytes of an image: decoded from a data: URI or read from the file a relative src names."
    if src.startswith("data:"):
        b64 = src.split(",", 1)[1] if "," in src else ""
        b64 = b64[: len(b64) // 4 * 4]
        try: return base64.b64decode(b64)
        except ValueError: return b""
    if re.match(r"^(?:[a-z][\w+.-]*:|//)", src, re.I): return b""
    f = (page.parent / unquote(src.split("#")[0])).resolve()
    return f.read_bytes()[:4096] if f.is_file() else b""


def figure_text_pt(natural_px: int, shown_px: float, dpi: float, drawn_pt: float = FIGURE_TEXT_PT) -> float:
    """The size, in points on the page, of text drawn at `drawn_pt` (the smallest font size the figure's cell asks for,
    `data-text-pt`, else matplotlib's default): the figure is natural_px / dpi inches wide and is shown shown_px CSS
    pixels wide (96 to the inch)."""
    return drawn_pt * shown_px / (natural_px / dpi * CSS_PX_PER_INCH)


def pre_split(commits: list[str], cache: dict) -> bool | None:
    "Whether every commit named is older than HONEST_SPLITS (None when git cannot tell, or none is named)."
    import subprocess
    known = []
    for c in commits:
        if c not in cache:
            r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{c}^{{commit}}"], capture_output=True)
            if r.returncode: cache[c] = None
            else:
                cache[c] = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", c, HONEST_SPLITS],
                                          capture_output=True).returncode == 0
        if cache[c] is not None: known.append(cache[c])
    return all(known) if known else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", nargs="?", default="_preview")
    ap.add_argument("--chapter", default="simic/envs/20_rewards.html", help="page for _screenshots/chapter.png")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM") or shutil.which("chromium")
                    or shutil.which("chromium-browser") or shutil.which("google-chrome"))
    a = ap.parse_args()
    site = Path(a.site).resolve()
    t0 = time.monotonic()
    if not (site / "index.html").exists():
        print(f"docs-check: {site}/index.html not found; run `make docs` first"); return 2
    if not a.chromium:
        print("docs-check: no chromium on PATH (apt-get install -y --no-install-recommends chromium)"); return 2
    pages = sorted(p for p in site.rglob("*.html") if not any(part.startswith("_") for part in p.relative_to(site).parts))
    failures: list[tuple[str, str]] = []   # (kind, "page: message")
    def fail(page: Path | str, msg: str, kind: str = "other"):
        failures.append((kind, f"{page if isinstance(page, str) else page.relative_to(site).as_posix()}: {msg}"))

    # static: nothing in the HTML points at a resource off the machine
    for p in pages:
        for ref in external_refs(p): fail(p, f"references an external resource: {ref}", "external resource in the HTML")
    for css in site.rglob("*.css"):
        for u in re.findall(r"(?:@import\s+(?:url\()?|url\()\s*['\"]?((?:https?:)?//[^'\")\s]+)", css.read_text()):
            fail(css.relative_to(site).as_posix(), f"stylesheet loads {u}", "external resource in the HTML")

    profile = tempfile.mkdtemp(prefix="docs-check-chromium-")
    results: dict[Path, dict] = {}
    requests: dict[Path, list[str]] = {}
    external: list[tuple[Path, str]] = []
    cdp = CDP(a.chromium, profile)
    current = None
    try:
        try:
            cdp.send("Browser.getVersion", timeout=60)
        except Exception as e:
            print(f"docs-check: cannot start Chromium ({a.chromium}): {e}"); return 2
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sess = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for m in ("Page.enable", "Network.enable", "Runtime.enable"): cdp.send(m, session=sess)
        try:  # blocked requests are still reported (requestWillBeSent), they just fail at once
            cdp.send("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]}, session=sess)
        except RuntimeError as e: print(f"docs-check: note: cannot block network requests ({e}); they are still recorded")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True}, session=sess)
        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=sess)
        shots = site / "_screenshots"; shots.mkdir(exist_ok=True)
        chapter = (site / a.chapter).resolve()
        if chapter not in pages:
            fail(a.chapter, "the --chapter page for the screenshot does not exist"); chapter = None
        for p in pages:
            current = p
            cdp.events.clear()
            nav = cdp.send("Page.navigate", {"url": p.as_uri()}, session=sess)
            if nav.get("errorText"): fail(p, f"cannot be opened: {nav['errorText']}", "page load"); continue
            if not cdp.wait_event("Page.loadEventFired", sess): fail(p, f"did not finish loading in {PAGE_TIMEOUT:.0f} s", "page load")
            cdp.drain(0.05)
            urls, failed = [], []
            for e in cdp.events:
                if e.get("sessionId") != sess: continue
                if e["method"] == "Network.requestWillBeSent": urls.append(e["params"]["request"]["url"])
                elif e["method"] == "Network.loadingFailed": failed.append(e["params"])
            req_by_id = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in cdp.events
                         if e.get("sessionId") == sess and e["method"] == "Network.requestWillBeSent"}
            requests[p] = urls
            for u in urls:
                if not u.startswith(LOCAL_SCHEMES): external.append((p, u)); fail(p, f"request leaves the machine: {u[:200]}", "external request")
            for f in failed:
                u = req_by_id.get(f["requestId"], "?")
                if u.startswith("file:"): fail(p, f"could not load {u} ({f.get('errorText')})", "failed file:// request")
            r = cdp.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=sess)
            if "exceptionDetails" in r: fail(p, f"probe failed: {r['exceptionDetails'].get('text')}", "page load"); continue
            results[p] = r["result"]["value"]
            if p == site / "index.html" or p == chapter:
                shot = cdp.send("Page.captureScreenshot", {"format": "png"}, session=sess)
                (shots / ("index.png" if p == site / "index.html" else "chapter.png")).write_bytes(base64.b64decode(shot["data"]))
    except (RuntimeError, TimeoutError, OSError) as e:
        where = current.relative_to(site).as_posix() if current else "start-up"
        print(f"docs-check: Chromium stopped answering ({where}): {e}"); return 2
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)

    # per-page checks, then links across pages (anchors need the target's ids)
    ids = {p: set(v["ids"]) for p, v in results.items()}
    id_cache: dict[Path, set[str]] = {}
    n_internal = n_content = n_anchor = n_external_links = n_images = n_math = 0
    n_no_dpi = 0
    pending_seen: dict[tuple[str, str], int] = {}
    smallest_pt = float("inf")
    commit_cache: dict[str, bool | None] = {}
    index_uri = (site / "index.html").as_uri()
    for p, v in results.items():
        if v["sidebar"] < 0: fail(p, "no sidebar (nav#sidebar)", "navigation")
        elif v["sidebar"] < len(pages) - 1: fail(p, f"sidebar has {v['sidebar']} links for {len(pages)} pages", "navigation")
        if v["brand"] != index_uri: fail(p, f"top bar has no link to the index (got {v['brand']})", "navigation")
        if v["pager"] < 1: fail(p, "no previous/next links", "navigation")
        for hit in v["markup"]: fail(p, f"raw Quarto markup in the text: ...{hit.strip()!r}...", "raw markup")
        for code in v["directives"]: fail(p, f"a code cell shows a #| directive or nbdev.showdoc: {code!r}", "raw markup")
        if v["words"] > MAX_WORDS: fail(p, f"{v['words']:,} words of prose (at most {MAX_WORDS:,})", "page length")
        for api, nparams, rows in v["api"]:
            if rows != nparams: fail(p, f"API block {api}: {rows} parameter rows for {nparams} parameters", "API reference")
        for d in v["missing_docs"]: fail(p, f"show_doc not rendered: {d}", "raw markup")
        n_math += v["math"]
        for src, _, width in [(s, c, w) for s, c, w in v["images"]]:
            n_images += 1
            if not width: fail(p, f"image does not load: {src}", "image")
        rel = p.relative_to(site).as_posix()
        if v["topbar"] > MAX_TOPBAR: fail(p, f"top bar has {v['topbar']} links (at most {MAX_TOPBAR})", "navigation")
        def known(kind: str) -> bool:  # a fault the PENDING list names for this page: counted, not failed
            if kind not in PENDING.get(rel, ()): return False
            pending_seen[(rel, kind)] = pending_seen.get((rel, kind), 0) + 1
            return True
        for wide, room, api, head in v["tables"]:
            if not known("wide table"):
                fail(p, f"{'API ' if api else ''}table {wide} px wide in {room} px (it scrolls): {head!r}", "wide table")
        for src, natural, shown, alt, text_pt in v["pictures"]:
            name = src[:40] + ("..." if len(src) > 40 else "")
            if (alt or "").strip().lower().rstrip(".") in NO_ALT:
                if not known("alt text"): fail(p, f"image without alt text (say what it shows: `#| fig-alt:` or ![alt](path)): {name}", "alt text")
            dpi = png_dpi(image_head(src, p)) if natural else None
            if dpi:
                drawn = min(text_pt or FIGURE_TEXT_PT, FIGURE_TEXT_PT)
                pt = figure_text_pt(natural, shown, dpi, drawn)
                smallest_pt = min(smallest_pt, pt)
                if pt < MIN_FIGURE_PT:
                    if not known("small figure text"): fail(p, f"figure text {pt:.1f} pt as shown ({natural / dpi:.1f} in wide at {dpi:.0f} dpi, shown "
                                  f"{shown:.0f} px wide; its {drawn:g} pt text needs at least "
                                  f"{MIN_FIGURE_PT / drawn * natural / dpi * CSS_PX_PER_INCH:.0f} px): {(alt or name)[:70]!r}", "small figure text")
            else: n_no_dpi += 1
        if pre_split(v["commits"], commit_cache):
            banner = [t for t, hrefs in v["callouts"] if "honest splits" in t.lower() and any("results.html" in h for h in hrefs)]
            if not banner:
                fail(p, f"reports measurements from before the honest splits (commits {', '.join(v['commits'][:4])}, all older "
                        f"than {HONEST_SPLITS}) with no callout saying so and linking to results.html", "pre-split banner")
        for attr, resolved, *extra in v["links"] + v["srcs"]:
            nav, nb_href = (extra + [None, None])[:2]
            if attr is None or attr.startswith(("data:", "javascript:")): continue
            if re.match(r"^(?:[a-z][\w+.-]*:|//)", attr, re.I):
                n_external_links += 1; continue
            u = urlparse(resolved)
            if u.scheme != "file": fail(p, f"relative link {attr!r} resolves to {resolved}", "broken link"); continue
            target = Path(unquote(u.path))
            if attr.startswith("#"): n_anchor += 1
            else:
                n_internal += 1
                if nav is False: n_content += 1
            shown = f"{attr!r}" + (f" (written {nb_href!r} in the notebook)" if nb_href else "")
            if not target.is_file(): fail(p, f"broken link {shown}: {target.relative_to(site) if target.is_relative_to(site) else target} does not exist", "broken link"); continue
            if u.fragment:
                frag = unquote(u.fragment)
                have = ids.get(target) if target in ids else (ids_of(target, id_cache) if target.suffix == ".html" else set())
                if frag not in have:
                    fail(p, f"broken anchor {shown}: no id {frag!r} in {target.relative_to(site).as_posix()}", "broken link")

    for rel, kinds in PENDING.items():
        for kind in sorted(kinds):
            if (site / rel) in results and (rel, kind) not in pending_seen:
                fail(rel, f"listed in PENDING for {kind!r} but has no such fault now: take it off the list", "pending list")
    # the API reference: every exported public function and class has its block somewhere on the site
    expected = exported_api()
    shown = {api for v in results.values() for api, _, _ in v["api"]}
    missing = sorted(set(expected) - shown)
    for api in missing: fail(api, "exported, but no page has its API block (show_doc)", "API reference")
    n_blocks = sum(len(v["api"]) for v in results.values())
    # the landing page: short, with a figure
    readme = ROOT / "README.md"
    n_lines = len(readme.read_text().splitlines()) if readme.exists() else 0
    if n_lines > MAX_LANDING_LINES: fail("README.md", f"{n_lines} lines (the landing page: at most {MAX_LANDING_LINES})", "landing page")
    index = results.get(site / "index.html")
    if index is not None and index["figures"] < 1: fail("index.html", "no figure on the landing page", "landing page")
    longest = max(results.items(), key=lambda kv: kv[1]["words"], default=(None, {"words": 0}))

    n_requests = sum(len(u) for u in requests.values())
    secs = time.monotonic() - t0
    print(f"docs-check: {len(results)}/{len(pages)} pages loaded in headless Chromium in {secs:.1f} s")
    print(f"  links: {n_internal} relative links to files ({n_content} in page content, the rest navigation and "
          f"stylesheets), {n_anchor} same-page anchors, {n_external_links} external (not followed); "
          f"{sum(1 for k, _ in failures if k == 'broken link')} broken")
    print(f"  images: {n_images} ({sum(1 for v in results.values() for i in v['images'] if not i[2])} not loading); "
          f"formulas (MathML): {n_math}")
    print(f"  figures: smallest text {smallest_pt:.1f} pt as shown (at least {MIN_FIGURE_PT}); {n_no_dpi} without a "
          f"recorded resolution (not measured)")
    print(f"  known faults not fixed yet (PENDING, {len(PENDING)} pages): " + (", ".join(
          f"{sum(n for (_, k), n in pending_seen.items() if k == kind)} {kind}" for kind in
          sorted({k for ks in PENDING.values() for k in ks})) or "none"))
    print(f"  requests: {n_requests} in all, {len(external)} leaving the machine")
    print(f"  API reference: {len(expected)} exported public functions and classes, {len(expected) - len(missing)} "
          f"with an API block; {n_blocks} API blocks in all")
    print(f"  landing page: README.md {n_lines} lines, {index['figures'] if index else 0} figure(s) on index.html; "
          f"longest page {longest[1]['words']:,} words of prose"
          + (f" ({longest[0].relative_to(site).as_posix()})" if longest[0] else ""))
    print(f"  screenshots: {site / '_screenshots' / 'index.png'}, {site / '_screenshots' / 'chapter.png'}")
    if failures:
        kinds = sorted({k for k, _ in failures})
        print(f"\ndocs-check FAILED: {len(failures)} problem(s): " +
              ", ".join(f"{sum(1 for k2, _ in failures if k2 == k)} {k}" for k in kinds))
        for k in kinds:
            msgs = [m for k2, m in failures if k2 == k]
            print(f"{k} ({len(msgs)}):")
            for m in msgs[:60]: print(f"  - {m}")
            if len(msgs) > 60: print(f"  ... and {len(msgs) - 60} more")
        return 1
    print("docs-check passed: every page has the sidebar, top bar and previous/next links; no broken link or anchor; "
          "no raw Quarto markup; every image loads; no request left the machine; every exported function and class "
          "has its API block with its parameters; no page over 6,000 words; a short landing page with a figure; a top bar of at most 8 links; no table that scrolls, "
          "every figure with alt text and its text at 9 pt or more (but the PENDING list); a banner on every page measured "
          "before the honest splits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
