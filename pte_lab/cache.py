"""Where pte_lab keeps what it builds once (the native helpers, the pre-fix runtime's venv) and the
measurements it keeps (:mod:`pte_lab.runtime.kept`).

``$PTE_LAB_CACHE_DIR`` if set (``$PTE_LAB_CACHE``, its older name, too), else ``$XDG_CACHE_HOME/pte_lab``,
else ``~/.cache/pte_lab``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "dist_version"]


def cache_dir(*parts: str) -> Path:
    """The cache folder (or ``parts`` below it); nothing is created."""
    base = os.environ.get("PTE_LAB_CACHE_DIR") or os.environ.get("PTE_LAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pte_lab")
    return Path(base).joinpath(*parts)


def dist_version(dist: str) -> str:
    """An installed distribution's version ("-" where it is not installed)."""
    import importlib.metadata as md  # when asked: its import is a worker's largest

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "-"
