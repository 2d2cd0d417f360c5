"""Example programs that ship with pte_lab, for a first look with no torch and no export.

``pte_lab/data/examples/`` holds two of :mod:`pte_lab.examples`' programs as its builders export them with
executorch 1.5.1 (``tests/test_shipped.py`` checks each plan against a fresh export, so a copy never goes stale):

- ``portable``: a small model on ExecuTorch's portable kernels, one method, one arena;
- ``device``: the two-method program of ExecuTorch's loader fix (PR #22058), 64 x 64 matrices, ``forward2``
  delegated to XNNPACK with its arena tagged ``cuda:0``.

``pte-lab example NAME OUT`` writes the shipped copy where torch and executorch are not installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["SHIPPED", "shipped_path", "can_export"]

#: name -> the builder arguments the shipped copy was exported with (``pte_lab.examples.build(name, **args)``)
SHIPPED: dict[str, dict] = {"portable": {}, "device": {"side": 64}}

_FOLDER = Path(__file__).resolve().parent / "data" / "examples"


def shipped_path(name: str) -> Path:
    """The shipped copy of example ``name`` (:data:`SHIPPED`). Raises ``ValueError`` for another name."""
    if name not in SHIPPED:
        raise ValueError(f"no shipped example {name!r}; pte_lab ships {', '.join(SHIPPED)}")
    return _FOLDER / f"{name}.pte"


def can_export() -> bool:
    """Whether torch and executorch are installed (an example can be exported here)."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "executorch"))

