"""The documentation site as a reader opens it: built from a clean tree with the README's one command, then
read in Debian's Chromium (driven by Playwright, as ``test_browser.py`` does).

The site renders the notebooks from the runs ``test_notebooks.py`` keeps (``docs/_ext/notebook_cache.py``),
so in a full run of the suite no notebook runs a third time: the build waits for the notebook tests of this
session (collected before this file, so run before it on any worker) and executes only a notebook none of
them kept. Alone (``-k site``), the build executes every notebook itself, once.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import notebook_cache

CHROMIUM = "/usr/bin/chromium"
#: the README's command for the site
BUILD = [sys.executable, "-m", "sphinx", "-W", "docs", "docs/_build/html"]
#: what the browser opens: the landing page, one guide, one executed notebook, one API page
PAGES = ["index.html", "guides/sizing.html", "notebooks/02-memory-planning-101.html", "api.html"]


def _need(cond: bool, why: str):
    if not cond:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must build the documentation: {why}")
        pytest.skip(why)


def need_sphinx() -> None:
    """Skip (fail under CI) where the documentation's tools are not installed."""
    for module in ("sphinx", "myst_nb", "pydata_sphinx_theme"):
        try:
            __import__(module)
        except ImportError:
            _need(False, f"{module} is not installed (pip install -e '.[docs]')")


def _clean_tree(dst: Path) -> None:
    """The files a clean clone has: tracked ones and new ones git does not ignore (no build folders)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dst / name)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if a.get("href") is not None:
            self.hrefs.append(a["href"])


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def broken_links(html: Path) -> list[str]:
    """Every relative href of every page that names a missing file, or an anchor its page lacks (the
    theme's own templates under ``_static`` are not pages)."""
    pages = {p: _parse(p) for p in html.rglob("*.html") if "_static" not in p.relative_to(html).parts}
    bad = []
    for page, links in pages.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("//"):
                continue  # external: not this site's to keep
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                bad.append(f"{page.relative_to(html)}: {href} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    bad.append(f"{page.relative_to(html)}: {href} (no such anchor)")
    return bad


def test_broken_links_are_found(tmp_path):
    """The link check itself: a missing page and a missing anchor are reported, good links are not."""
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text('<a href="a/b.html#x">ok</a><a href="a/c.html">gone</a>'
                                         '<a href="#top">missing anchor</a><a href="https://x.org/">out</a>')
    (tmp_path / "a" / "b.html").write_text('<h1 id="x">x</h1><a href="../index.html">up</a>')
    assert broken_links(tmp_path) == ["index.html: a/c.html (no such file)",
                                      "index.html: #top (no such anchor)"]


def test_a_kept_run_is_found_by_content(tmp_path, monkeypatch):
    """The docs build reads the notebook test's run of the same cells, and runs an edited notebook again."""
    nbformat = pytest.importorskip("nbformat")
    monkeypatch.setenv("PTE_LAB_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    run = nbformat.from_dict(json.loads(json.dumps(nb)))
    run.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)]
    kept = notebook_cache.save(path, run, 1.5)
    monkeypatch.setattr(notebook_cache, "execute", lambda p: pytest.fail(f"{p} executed again"))
    assert notebook_cache.executed(path) == kept
    assert json.loads(kept.read_text())["metadata"]["pte_lab_run"] == {"seconds": 1.5}
    nb.metadata["note"] = "metadata and outputs are not content"
    nbformat.write(nb, path)
    assert notebook_cache.executed(path) == kept
    nb.cells[0].source = "1 + 2"
    nbformat.write(nb, path)
    assert notebook_cache.entry(path) != kept  # an edited cell is another entry, so it runs again
    notebook_cache.failed_marker(path).touch()  # and a failed run of it does not keep a build waiting
    executed = []
    monkeypatch.setattr(notebook_cache, "execute", lambda p: executed.append(p) or p)
    notebook_cache.executed(path, wait_s=600)
    assert executed == [path]


@pytest.mark.slow  # three kernels
def test_a_clean_build_runs_the_missing_notebooks_side_by_side_and_names_a_failed_one(tmp_path, monkeypatch):
    """What a clean clone's build does first: every notebook with no kept run executes in a process of its own
    (two at a time on two cores) and is kept; one that raises fails the build, named, after the others are kept;
    a kept one is not run again."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    monkeypatch.setenv("PTE_LAB_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    sources = {"a.ipynb": "1 + 1", "b.ipynb": "import os; os.getpid()", "bad.ipynb": "raise ValueError('boom')"}
    paths = []
    for name, code in sources.items():
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), tmp_path / name)
        paths.append(tmp_path / name)
    lines = []
    with pytest.raises(RuntimeError, match="bad.ipynb") as failed:
        notebook_cache.execute_missing(paths, jobs=2, log=lines.append)
    assert "boom" in str(failed.value) and "a.ipynb" not in str(failed.value)
    assert "2 at a time" in lines[0]
    kept = {p.name: json.loads(notebook_cache.entry(p).read_text()) for p in paths[:2]}
    assert "".join(kept["a.ipynb"]["cells"][0]["outputs"][0]["data"]["text/plain"]) == "2"
    pids = {int("".join(kept["b.ipynb"]["cells"][0]["outputs"][0]["data"]["text/plain"])), os.getpid()}
    assert len(pids) == 2  # run in a kernel of its own, not in the build's process
    monkeypatch.setattr(notebook_cache, "execute", lambda p: pytest.fail(f"{p} executed again"))
    lines.clear()
    notebook_cache.execute_missing(paths[:2], log=lines.append)
    assert lines == []  # nothing missing: nothing runs


@pytest.fixture(scope="module")
def site(request, tmp_path_factory):
    need_sphinx()
    tree = tmp_path_factory.mktemp("clean-tree")
    _clean_tree(tree)
    assert not (tree / "docs" / "_build").exists() and not (tree / "docs" / "notebooks").exists()
    # the notebook tests of this session keep their runs: wait for them rather than run a notebook again
    pending = {Path(item.callspec.params["path"]).name for item in request.session.items
               if item.originalname == "test_notebook_runs_twice" and hasattr(item, "callspec")}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if path.name in pending:
            notebook_cache.executed(path, wait_s=3 * 3600)
    env = dict(os.environ, PTE_LAB_NOTEBOOK_CACHE=str(notebook_cache.cache_dir()))
    r = subprocess.run(BUILD, cwd=tree, env=env, capture_output=True, text=True, timeout=3 * 3600)
    assert r.returncode == 0, f"the site did not build:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    html = tree / "docs" / "_build" / "html"
    assert (html / "index.html").exists()
    return html


def test_the_quick_build_passes_under_warnings_as_errors(tmp_path):
    """The README's quick build (the prose, the notebooks' cells without outputs) from a clean tree: -W passes,
    every notebook has its page, each says it has no outputs here, and no link is broken."""
    need_sphinx()
    _clean_tree(tmp_path)
    r = subprocess.run([*BUILD[:4], "-D", "pte_lab_notebooks=0", *BUILD[4:]], cwd=tmp_path, capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, f"the quick build failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    html = tmp_path / "docs" / "_build" / "html"
    pages = sorted(p.stem for p in (html / "notebooks").glob("*.html"))
    assert pages == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert all("This quick build" in (html / "notebooks" / f"{p}.html").read_text() for p in pages)
    assert not broken_links(html)


@pytest.mark.slow
def test_no_internal_link_is_broken(site):
    assert not broken_links(site)


@pytest.mark.slow
def test_pages_render_in_chromium(site, tmp_path):
    _need(Path(CHROMIUM).exists(), f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(os.environ.get("PTE_LAB_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                              "--disable-component-update", "--no-first-run"])
            try:
                for name in PAGES:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    errors = []
                    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    page.on("requestfailed", lambda q: errors.append(f"{q.url}: {q.failure}"))
                    page.goto(f"{base}/{name}", wait_until="networkidle")
                    article = page.locator("article.bd-article")
                    assert article.is_visible(), name
                    assert article.locator("h1").first.inner_text().strip(), f"{name} has no title"
                    assert len(article.inner_text()) > 500, f"{name} is nearly empty"
                    # every image on the page loaded and has a size
                    sizes = page.eval_on_selector_all("article img", "els => els.map(e => [e.src, e.naturalWidth])")
                    assert not [s for s, w in sizes if not w], f"{name}: images that did not load"
                    if name.startswith("notebooks/"):
                        figures = page.locator("article .cell_output img")
                        assert figures.count() >= 2, f"{name}: {figures.count()} figures"
                        assert all(src.startswith(base) for src, _ in sizes), "a figure is not the site's"
                        assert "Traceback" not in article.inner_text()
                    if name == "api.html":
                        for anchor in ("pte_lab.open", "pte_lab.plot.arena_layout", "pte_lab.runtime.sizes",
                                       "pte_lab.planning.replan"):
                            assert page.locator(f"[id='{anchor}']").count() == 1, anchor
                    page.screenshot(path=str(shots / f"site-{re.sub(r'[/.]', '-', name)}.png"), full_page=False)
                    assert not errors, f"{name}: console errors {errors}"
                    page.close()
            finally:
                browser.close()
    finally:
        server.shutdown()
