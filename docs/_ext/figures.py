"""The pictures on the landing page and in the README, drawn by pte_lab's own code, never pasted by hand.

:data:`FIGURES` names each picture and the function that draws it from a program pte_lab ships
(``pte_lab/data/examples``, :mod:`pte_lab.shipped`), so no export and no torch is needed. Two places show them:

- the site: this extension writes each into ``docs/_generated/`` (not committed) when the build starts, and the
  pages show them from there (``![...](_generated/first-look.png)``), so the site always shows what the code
  draws now;
- the README: GitHub shows only committed files, so ``docs/images/`` keeps a copy. ``python docs/_ext/figures.py``
  rewrites it; ``tests/test_site.py::test_the_readme_pictures_are_what_the_code_draws`` draws each again and
  fails when the committed one is missing or differs (pixel for pixel, under the matplotlib version that drew it).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
#: where the build writes the pictures (ignored by git)
GENERATED = DOCS / "_generated"
#: the README's committed copies
COMMITTED = DOCS / "images"
#: pixels per inch: sharp on a high-density screen, the README's image under 300 KB
DPI = 110


def first_look(path: Path) -> None:
    """The shipped ``device`` program (the loader fix's, PR #22058): forward2's arena on ``cuda:0`` as
    :func:`pte_lab.plot.arena_layout` draws it, and :func:`pte_lab.plot.placement` under the three loaders."""
    import matplotlib.pyplot as plt

    import pte_lab
    from pte_lab import plot
    from pte_lab.shipped import shipped_path

    pte = pte_lab.open(shipped_path("device"))
    with plt.style.context("default"):  # a user's matplotlibrc does not change the committed picture
        fig = plt.figure(figsize=(15.5, 4.6), layout="constrained")
        left, right = fig.subfigures(1, 2, width_ratios=[1.2, 1.0])
        plot.arena_layout(pte.methods["forward2"], mem_id=2, ax=left.subplots())
        plot.placement(pte, "all", ax=right.subplots())
        _save(fig, path)
        plt.close(fig)


#: each picture's file name and the function that draws it
FIGURES = {"first-look.png": first_look}


def _save(fig, path: Path) -> None:
    # no date and no version in the file: the same drawing is the same bytes
    # tight: the layout's legend sits outside its axes, and its title may be wider than them
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.15,
                metadata={"Software": None, "Source": "pte_lab docs/_ext/figures.py"})


def draw(name: str, folder: Path) -> Path:
    """Draw picture ``name`` of :data:`FIGURES` into ``folder``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    FIGURES[name](path)
    return path


def _build_started(app) -> None:
    for name in FIGURES:
        draw(name, GENERATED)


def setup(app):
    app.connect("builder-inited", _build_started)
    return {"parallel_read_safe": True}


if __name__ == "__main__":  # python docs/_ext/figures.py: rewrite the README's copies
    sys.path.insert(0, str(DOCS.parent))
    for name in FIGURES:
        print(draw(name, COMMITTED))
