"""Write numpy.inv and matplotlib.inv: the names of numpy and matplotlib that pte_lab's pages link to.

Sphinx inventories (version 2), as the projects' own objects.inv would list these names, with the addresses
of the projects' current documentation. Neither project's inventory ships where this repository can fetch
it, so these few names are kept here: a page that links to another name of theirs adds it to ``NAMES`` and
runs ``python docs/_intersphinx/partial.py`` (the build fails on the name until then: ``nitpicky``).
"""

from __future__ import annotations

import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: project -> (version, [(name, role, address relative to the project's documentation root)])
NAMES = {
    "numpy": ("2.4", [
        ("numpy.ndarray", "py:class", "reference/generated/numpy.ndarray.html#numpy.ndarray"),
        ("numpy.dtype", "py:class", "reference/generated/numpy.dtype.html#numpy.dtype"),
        ("numpy.int64", "py:class", "reference/arrays.scalars.html#numpy.int64"),
    ]),
    "matplotlib": ("3.11", [
        ("matplotlib.axes.Axes", "py:class", "api/_as_gen/matplotlib.axes.Axes.html#matplotlib.axes.Axes"),
        ("matplotlib.figure.Figure", "py:class", "api/_as_gen/matplotlib.figure.Figure.html#matplotlib.figure.Figure"),
        ("matplotlib.axes.Axes.bar", "py:method", "api/_as_gen/matplotlib.axes.Axes.bar.html#matplotlib.axes.Axes.bar"),
        ("matplotlib.axes.Axes.barh", "py:method",
         "api/_as_gen/matplotlib.axes.Axes.barh.html#matplotlib.axes.Axes.barh"),
        ("matplotlib.axes.Axes.plot", "py:method",
         "api/_as_gen/matplotlib.axes.Axes.plot.html#matplotlib.axes.Axes.plot"),
        ("matplotlib.axes.Axes.step", "py:method",
         "api/_as_gen/matplotlib.axes.Axes.step.html#matplotlib.axes.Axes.step"),
        ("matplotlib.axes.Axes.fill_between", "py:method",
         "api/_as_gen/matplotlib.axes.Axes.fill_between.html#matplotlib.axes.Axes.fill_between"),
        ("matplotlib.axes.Axes.add_collection", "py:method",
         "api/_as_gen/matplotlib.axes.Axes.add_collection.html#matplotlib.axes.Axes.add_collection"),
        ("matplotlib.collections.PolyCollection", "py:class",
         "api/collections_api.html#matplotlib.collections.PolyCollection"),
        ("matplotlib.pyplot.subplots", "py:function",
         "api/_as_gen/matplotlib.pyplot.subplots.html#matplotlib.pyplot.subplots"),
        ("matplotlib.pyplot.gca", "py:function", "api/_as_gen/matplotlib.pyplot.gca.html#matplotlib.pyplot.gca"),
    ]),
}


def inventory(project: str, version: str, names: list[tuple[str, str, str]]) -> bytes:
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in sorted(names)).encode()
    return header + zlib.compress(body, 9)


def main() -> None:
    for project, (version, names) in NAMES.items():
        (HERE / f"{project}.inv").write_bytes(inventory(project, version, names))


if __name__ == "__main__":
    main()
