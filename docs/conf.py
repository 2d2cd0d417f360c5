"""Sphinx configuration: ``python -m sphinx -W docs docs/_build/html`` (after ``pip install -e ".[docs]"``).

Sphinx with myst-nb and the PyData theme, as xarray, pandas and ipywidgets build theirs. The notebooks are
rendered from executed runs kept by content (``_ext/notebook_cache.py``): the notebook test's run when
there is one, else one made here, once; myst-nb itself executes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]  # the pte_lab of this tree, and the cache

import notebook_cache  # noqa: E402

project = "pte_lab"
author = "pte_lab contributors"
copyright = "pte_lab contributors"
release = version = "0.1.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx", "api_refs", "cli_reference",
              "figures"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
#: the repository's address on GitHub: the one setting the site's links to it are made from, the header's GitHub
#: link and the notebooks' Binder launch (BINDER). OWNER/REPO stands for it until the project has a public
#: address; a fork names its own here (CONTRIBUTING.md, "The documentation").
REPOSITORY = "https://github.com/OWNER/REPO"
_OWNER_REPO = REPOSITORY.removeprefix("https://github.com/").strip("/")
#: the placeholder is still there: the pages show the Binder address as text to fill in, not as a link
PLACEHOLDER = _OWNER_REPO == "OWNER/REPO"
#: the Binder launch of the notebooks: mybinder.org builds binder/ from the repository
BINDER = f"https://mybinder.org/v2/gh/{_OWNER_REPO}/HEAD?urlpath=lab/tree/notebooks"
myst_substitutions = {
    "binder": (f"[Binder](https://mybinder.org) (`{BINDER}`, once `REPOSITORY` in `docs/conf.py` names this "
               "repository)") if PLACEHOLDER else f"[Binder]({BINDER})",
    "repository": (f"`{REPOSITORY}`, once `REPOSITORY` in `docs/conf.py` names it") if PLACEHOLDER
    else f"[{_OWNER_REPO}]({REPOSITORY})",
}
myst_heading_anchors = 3

# notebooks: rendered from the kept runs, never executed by myst-nb
nb_execution_mode = "off"
nb_merge_streams = True

# every cross-reference must resolve: under -W an unresolved one fails the build. A reference to a documented
# object by another of its names (``pte_lab.model.Pte`` for ``pte_lab.Pte``, ``pd.DataFrame``) is resolved by
# _ext/api_refs.py; what is left is a broken reference.
nitpicky = True
#: each entry names something documented nowhere, and says why it is referenced all the same
nitpick_ignore = [
    # the enums flatc generates from ExecuTorch's program.fbs (pte_lab.format.schema): a raw tensor's fields
    # hold them; ExecuTorch documents them in the schema itself, not in any Sphinx inventory
    ("py:class", "schema.ScalarType"),
    ("py:class", "schema.TensorShapeDynamism"),
    ("py:class", "schema.TensorDataLocation"),
    # Explorer's base class: ipywidgets documents its widgets in prose, not as Python objects of an inventory
    ("py:class", "ipywidgets.widgets.widget_box.VBox"),
    # the call-target records' private bases (a str that keeps its parts; a delegate's backend id): their members
    # are documented on each record
    ("py:class", "pte_lab.call_targets._TextRecord"),
    ("py:class", "pte_lab.call_targets._Delegated"),
]

# The other projects' inventories are kept in the repository (_intersphinx/), not fetched: the build needs no
# network (a user's machine, CI) and gives the same links everywhere. python.inv (Python 3.11) and pandas.inv
# (pandas 1.5.3) are the projects' own inventories, as Debian ships them (python3.11-doc, python-pandas-doc);
# numpy.inv and matplotlib.inv hold the names these pages link to, written by _intersphinx/partial.py (no
# release of either ships its inventory where this project can fetch it). The links go to the current docs.
# `python docs/_intersphinx/partial.py` rewrites the two partial ones; a name missing from them fails the build.
INVENTORIES = DOCS / "_intersphinx"
intersphinx_mapping = {
    "python": ("https://docs.python.org/3/", str(INVENTORIES / "python.inv")),
    "numpy": ("https://numpy.org/doc/stable/", str(INVENTORIES / "numpy.inv")),
    "pandas": ("https://pandas.pydata.org/docs/", str(INVENTORIES / "pandas.inv")),
    "matplotlib": ("https://matplotlib.org/stable/", str(INVENTORIES / "matplotlib.inv")),
}

# numpydoc or Google sections in the docstrings (Parameters, Returns, Raises), read by napoleon
napoleon_numpy_docstring = True
napoleon_google_docstring = True
napoleon_use_rtype = False
napoleon_preprocess_types = True

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# curly quotes and ellipses, but "--" stays two hyphens: the pages name options (--verify) in running text
smartquotes_action = "qe"
default_role = "code"  # the docstrings write `name` for code, as the README does

html_theme = "pydata_sphinx_theme"
html_title = "pte_lab"
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 4,
    "show_toc_level": 2,
    "github_url": REPOSITORY,  # the header's link to the repository
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_context = {"default_mode": "light"}
# a section navigation only where a page has sections below it (the notebooks); elsewhere it was empty
html_sidebars = {name: [] for name in ("index", "glossary", "cli", "api", "ethos-u-layouts", "guides/*")}
html_show_sourcelink = False


#: the first cell of a notebook page in a quick build (-D pte_lab_notebooks=0)
QUICK_NOTE = ("*This quick build (`-D pte_lab_notebooks=0`) shows the notebook's cells without running them: "
              "the full build (`python -m sphinx -W docs docs/_build/html`) renders each with its outputs.*")


def _notebooks(app) -> None:
    """Put each notebook's executed run under docs/notebooks/ (generated; not committed) before reading;
    with ``-D pte_lab_notebooks=0`` (the prose alone, for a quick look) its cells without outputs, said so."""
    out = DOCS / "notebooks"
    out.mkdir(exist_ok=True)
    paths = sorted(notebook_cache.NOTEBOOKS.glob("*.ipynb"))
    if app.config.pte_lab_notebooks:  # those with no kept run, two at a time on two cores
        notebook_cache.execute_missing(paths, log=lambda m: print(f"pte_lab docs: {m}", flush=True))
    for path in paths:
        if app.config.pte_lab_notebooks:
            nb = json.loads(notebook_cache.executed(path, log=lambda m: print(f"pte_lab docs: {m}", flush=True))
                            .read_text())
        else:
            nb = json.loads(path.read_text())
            for cell in nb["cells"]:
                if cell["cell_type"] == "code":
                    cell["outputs"], cell["execution_count"] = [], None
            nb["cells"].insert(1, {"cell_type": "markdown", "id": "pte-lab-quick-build", "metadata": {},
                                   "source": [QUICK_NOTE]})
        # widget views need their JavaScript from a CDN: the page shows the widget's text instead
        nb["metadata"].pop("widgets", None)
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        target = out / path.name
        if not target.exists() or target.read_text() != text:  # unchanged pages are not rebuilt
            target.write_text(text)


def _napoleon_not_for_attributes(app) -> None:
    """Napoleon reads the docstrings of functions and classes only. An attribute's ``#:`` comment is prose
    (``bytes alive at once at the worst instruction (aliases once): the lower bound``), not Google's
    ``type: description`` line napoleon would read its first line as: its type is the annotation's."""
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)

    def process(app, what, name, obj, options, lines):
        if what not in ("attribute", "data", "property"):
            _process_docstring(app, what, name, obj, options, lines)

    app.connect("autodoc-process-docstring", process)


def setup(app):
    app.add_config_value("pte_lab_notebooks", True, "env", [bool, int])
    _napoleon_not_for_attributes(app)
    app.connect("builder-inited", _notebooks)
    return {"parallel_read_safe": True}
