"""The documentation site as a reader opens it: built from a clean tree with the README's one command, then
read in Debian's Chromium (driven by Playwright, as ``test_browser.py`` does).

The site renders the notebooks from the runs ``test_notebooks.py`` keeps (``docs/_ext/notebook_cache.py``),
so in a full run of the suite no notebook runs a third time: the build waits for the notebook tests of this
session (collected before this file, so run before it on any worker) and executes only a notebook none of
them kept. Alone (``-k site``), the build executes every notebook itself, once.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import inspect
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
import figures
import notebook_cache

CHROMIUM = "/usr/bin/chromium"
#: the README's command for the site
BUILD = [sys.executable, "-m", "sphinx", "-W", "docs", "docs/_build/html"]
#: the README's quick build: the prose, the notebooks' cells without outputs
QUICK_BUILD = [*BUILD[:4], "-D", "pte_lab_notebooks=0", *BUILD[4:]]
#: what the browser opens: the landing page, one guide, one executed notebook, the API and the command line
PAGES = ["index.html", "guides/sizing.html", "notebooks/02-memory-planning-101.html", "api.html", "cli.html"]
#: the pictures the landing page shows: what the build draws (docs/_ext/figures.py) and the explorer's screenshot
#: (tests/test_browser.py takes it; PTE_LAB_DOCS_PICTURES=1 refreshes this copy)
PICTURES = [*figures.FIGURES, "explorer.png"]


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


def test_an_edited_pte_lab_runs_the_notebooks_again(tmp_path, monkeypatch):
    """A kept run shows what pte_lab's code printed: the same cells under edited pte_lab sources are another
    entry, so the site never shows an older pte_lab's outputs."""
    nbformat = pytest.importorskip("nbformat")
    from pte_lab.runtime import kept

    monkeypatch.setenv("PTE_LAB_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    before = notebook_cache.entry(path)
    monkeypatch.setattr(kept, "code_digest", lambda: "another pte_lab")
    assert notebook_cache.entry(path) != before


def quick_build(tree: Path) -> Path:
    """The README's quick build from a clean copy of this tree in ``tree``, with ``-n`` as well as the
    configuration's ``nitpicky`` (a build that lost the setting still fails); returns the HTML folder. The
    ``quick_site`` fixture (tests/conftest.py) makes it once per session, for this file and
    ``test_docs_reference.py``."""
    need_sphinx()
    _clean_tree(tree)
    r = subprocess.run([*QUICK_BUILD[:4], "-n", *QUICK_BUILD[4:]], cwd=tree, capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, f"the quick build failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    assert "reference target not found" not in r.stderr
    return tree / "docs" / "_build" / "html"


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


def test_the_quick_build_passes_under_warnings_as_errors(quick_site):
    """The README's quick build (the prose, the notebooks' cells without outputs) from a clean tree: -W passes,
    every notebook has its page, each says it has no outputs here, and no link is broken."""
    html = quick_site
    pages = sorted(p.stem for p in (html / "notebooks").glob("*.html"))
    assert pages == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert all("This quick build" in (html / "notebooks" / f"{p}.html").read_text() for p in pages)
    assert not broken_links(html)


def test_the_readme_pictures_are_what_the_code_draws(tmp_path):
    """The README's pictures are committed (GitHub shows only files), so each is drawn again here from the code
    and must be the committed one pixel for pixel: a change to the plots or to the shipped program that
    leaves the README's picture behind fails until ``python docs/_ext/figures.py`` rewrites it."""
    pytest.importorskip("matplotlib")
    from matplotlib import __version__ as mpl_version
    from matplotlib.image import imread

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in PICTURES:
        assert f"](docs/images/{name})" in readme, f"the README does not show docs/images/{name}"
        assert (figures.COMMITTED / name).is_file(), f"docs/images/{name} is missing"
    for name in figures.FIGURES:
        committed = figures.COMMITTED / name
        drawn = figures.draw(name, tmp_path)
        old, new = imread(committed), imread(drawn)
        assert old.shape == new.shape and (old == new).all(), (
            f"docs/images/{name} is not what the code draws now (matplotlib {mpl_version}; look at {drawn}): "
            f"`python docs/_ext/figures.py` rewrites it")


def test_the_repository_is_one_setting():
    """The header's link to the repository and the notebooks' Binder launch are made from ``REPOSITORY`` in
    docs/conf.py, and the README gives the same Binder address."""
    import runpy

    conf = runpy.run_path(str(ROOT / "docs" / "conf.py"))
    repository, binder = conf["REPOSITORY"], conf["BINDER"]
    assert conf["html_theme_options"]["github_url"] == repository
    owner_repo = repository.removeprefix("https://github.com/")
    assert binder.startswith(f"https://mybinder.org/v2/gh/{owner_repo}/")
    assert binder in conf["myst_substitutions"]["binder"]
    assert repository in conf["myst_substitutions"]["repository"]  # the landing page's "in a clone of"
    assert f"`{binder}`" in (ROOT / "README.md").read_text(encoding="utf-8")


@contextlib.contextmanager
def _chromium(html: Path):
    """Serve ``html`` on 127.0.0.1 and open its pages in Debian's Chromium: yields ``visit(name)``, which returns
    the page (1400 x 1000) and the list its console errors, failed requests and script errors land in."""
    _need(Path(CHROMIUM).exists(), f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                              "--disable-component-update", "--no-first-run"])

            def visit(name: str):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                errors: list[str] = []
                page.on("console", lambda m: m.type == "error" and errors.append(m.text))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("requestfailed", lambda q: errors.append(f"{q.url}: {q.failure}"))
                page.goto(f"{base}/{name}", wait_until="networkidle")
                return page, errors

            try:
                yield visit, base
            finally:
                browser.close()
    finally:
        server.shutdown()


def _words(text: str) -> str:
    """``text`` as lower-case words: the page capitalises help text, ends it with a stop and curls quotes."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower().replace("\u2019", "'")))


def test_the_landing_page_the_api_and_the_cli_in_chromium(quick_site, tmp_path):
    """What issue 50 asked of the site, as a reader sees it in Chromium: the landing page with its pictures
    loaded, the API page with ``open``'s parameters and ``WhatIf``'s fields, the CLI page with ``--region``
    explained (read from the code and the parser, not written down here)."""
    import dataclasses

    import pte_lab
    from pte_lab.cli import build_parser
    from pte_lab.planning.at_bound import WhatIf

    shots = Path(os.environ.get("PTE_LAB_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with _chromium(quick_site) as (visit, _):
        page, errors = visit("index.html")
        for name in PICTURES:
            img = page.locator(f"article figure img[src$='{name}']")
            assert img.count() == 1, f"the landing page does not show {name}"
            img.scroll_into_view_if_needed()
            assert img.is_visible(), name
            assert img.evaluate("e => e.complete && e.naturalWidth > 0"), f"{name} did not load"
            assert img.get_attribute("alt"), f"{name} has no alt text"
            caption = img.locator("xpath=ancestor::figure[1]/figcaption").inner_text()
            assert len(caption.split()) > 15, f"{name} has no caption"
        assert page.locator("a[href^='https://github.com/']").count() >= 1, "no link to the repository"
        page.screenshot(path=str(shots / "quick-index.png"), full_page=True)
        assert not errors, f"index.html: console errors {errors}"

        page, errors = visit("api.html")
        opened = page.locator("dt[id='pte_lab.open'] + dd")
        opened.scroll_into_view_if_needed()
        assert opened.is_visible()
        params = opened.locator("dt", has_text="Parameters").locator("xpath=following-sibling::dd[1]")
        listed = params.locator("li > p > strong").all_inner_texts()
        assert listed == list(inspect.signature(pte_lab.open).parameters), f"open's parameters: {listed}"
        assert opened.locator("dt", has_text="Returns").count() == 1
        for field in (f.name for f in dataclasses.fields(WhatIf) if not f.name.startswith("_")):
            entry = page.locator(f"dt[id='pte_lab.planning.at_bound.WhatIf.{field}']")
            assert entry.count() == 1, f"WhatIf.{field} is not on the API page"
            entry.scroll_into_view_if_needed()
            assert entry.is_visible(), f"WhatIf.{field}"
            assert re.fullmatch(rf"{field}: \S.*", entry.inner_text().strip()), f"WhatIf.{field} has no type"
        assert not errors, f"api.html: console errors {errors}"

        page, errors = visit("cli.html")
        sizes = build_parser().commands["sizes"]
        region = next(a for a in sizes._actions if "--region" in a.option_strings)
        entry = page.locator("dt[id='cmdoption-pte-lab-sizes-region']")
        entry.scroll_into_view_if_needed()
        assert entry.is_visible() and "--region" in entry.inner_text()
        explained = entry.locator("xpath=following-sibling::dd[1]").inner_text()
        assert _words(region.help) in _words(explained), f"--region is not explained: {explained!r}"
        page.screenshot(path=str(shots / "quick-cli-region.png"))
        assert not errors, f"cli.html: console errors {errors}"


@pytest.mark.slow
def test_no_internal_link_is_broken(site):
    assert not broken_links(site)


@pytest.mark.slow
def test_pages_render_in_chromium(site, tmp_path):
    shots = Path(os.environ.get("PTE_LAB_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with _chromium(site) as (visit, base):
        for name in PAGES:
            page, errors = visit(name)
            article = page.locator("article.bd-article")
            assert article.is_visible(), name
            assert article.locator("h1").first.inner_text().strip(), f"{name} has no title"
            assert len(article.inner_text()) > 500, f"{name} is nearly empty"
            # every image on the page loaded and has a size
            sizes = page.eval_on_selector_all("article img", "els => els.map(e => [e.src, e.naturalWidth])")
            assert not [s for s, w in sizes if not w], f"{name}: images that did not load"
            if name == "index.html":
                assert len(sizes) >= len(PICTURES), f"index.html shows {len(sizes)} pictures"
            if name.startswith("notebooks/"):
                figures_shown = page.locator("article .cell_output img")
                assert figures_shown.count() >= 2, f"{name}: {figures_shown.count()} figures"
                assert all(src.startswith(base) for src, _ in sizes), "a figure is not the site's"
                assert "Traceback" not in article.inner_text()
            if name == "api.html":
                for anchor in ("pte_lab.open", "pte_lab.plot.arena_layout", "pte_lab.runtime.sizes",
                               "pte_lab.planning.replan"):
                    assert page.locator(f"[id='{anchor}']").count() == 1, anchor
            if name == "cli.html":
                assert page.locator("[id='cmdoption-pte-lab-sizes-region']").count() == 1
            page.screenshot(path=str(shots / f"site-{re.sub(r'[/.]', '-', name)}.png"), full_page=False)
            assert not errors, f"{name}: console errors {errors}"
            page.close()
