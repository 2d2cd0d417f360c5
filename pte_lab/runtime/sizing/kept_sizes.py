"""A sizing asked before: its kept records (:mod:`pte_lab.runtime.kept`), read back without the measuring
machinery. :func:`~.results.sizes` keeps and finds its figures under :func:`options`; ``pte-lab sizes`` asks
:func:`kept_sizes` first, and imports what measures only when nothing is kept."""

from __future__ import annotations

import os
import stat
from dataclasses import replace

from .. import kept
from .records import HEAP_RUNS, Sizes

__all__ = ["KIND", "options", "kept_sizes"]

#: the kind of measurement a sizing is kept as
KIND = "sizes"


def options(methods: list[str] | None, runs: int, verify: bool, heap_runs: int) -> dict:
    """What of the question, beside the files' bytes, keys a kept sizing."""
    return {"methods": methods, "runs": runs, "verify": verify, "heap_runs": heap_runs}


def kept_sizes(path, methods: list[str] | None = None, *, data_path=None, runs: int = 2, verify: bool = False,
               heap_runs: int = HEAP_RUNS, cache: bool | None = None) -> Sizes | None:
    """The kept :class:`~.records.Sizes` of :func:`~.results.sizes` asked with these arguments (the figures
    named for ``path`` and ``data_path``), or None: the kept measurements off (``cache``), nothing kept, or a
    path that is not a regular file (:func:`~.results.sizes` says what is wrong with it)."""
    if not kept.enabled(cache):
        return None
    files = [os.fspath(p) for p in (path, data_path) if p is not None]
    for p in files:
        try:
            if not stat.S_ISREG(os.stat(p).st_mode):
                return None
        except OSError:
            return None
    got = kept.get(KIND, kept.key(KIND, files, options(methods, runs, verify, heap_runs)))
    if not isinstance(got, Sizes):
        return None
    # the same bytes, perhaps under another name: the figures are this file's
    return replace(got, path=files[0], data_path=files[1] if data_path is not None else None)
