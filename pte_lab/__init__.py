"""pte_lab: the lab bench for ExecuTorch memory in Jupyter.

>>> import pte_lab
>>> pte = pte_lab.open("model.pte")        # reads the header and flatbuffer only
>>> pte.methods["forward"].arenas          # sizes, devices, peak, size/peak
>>> pte.methods["forward"].tensors         # one row per planned tensor
>>> pte.load_cost("corrected")             # what Runtime.load_program allocates, when
>>> pte_lab.sizes("model.pte")             # every byte each method needs at run time, measured

``import pte_lab`` is light: submodules (and pandas, matplotlib, torch,
executorch) are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import (
    BackendUnavailableError,
    DeviceAllocationError,
    ExecuTorchError,
    MemoryBudgetError,
    NativeBuildError,
    OperatorMissingError,
    PteFormatError,
    PteLabError,
    RuntimeCrashedError,
)

__version__ = "0.1.0"

__all__ = [
    "open", "load", "sizes", "explore", "DataFile", "emulate_device", "runtime_info", "Pte", "Method", "Arena", "LabProgram", "LabMethod",
    "PteLabError", "PteFormatError", "DeviceAllocationError", "BackendUnavailableError", "MemoryBudgetError",
    "RuntimeCrashedError", "NativeBuildError", "ExecuTorchError", "OperatorMissingError",
    "__version__",
]

_LAZY = {
    "Pte": ("pte_lab.model", "Pte"),
    "DataFile": ("pte_lab.model", "DataFile"),
    "Method": ("pte_lab.model", "Method"),
    "Arena": ("pte_lab.model", "Arena"),
    "Finding": ("pte_lab.model", "Finding"),
    "load": ("pte_lab.runtime", "load"),
    "sizes": ("pte_lab.runtime", "sizes"),
    "emulate_device": ("pte_lab.runtime", "emulate_device"),
    "runtime_info": ("pte_lab.runtime", "runtime_info"),
    "LabProgram": ("pte_lab.runtime", "LabProgram"),
    "LabMethod": ("pte_lab.runtime", "LabMethod"),
    "explore": ("pte_lab.widgets", "explore"),
}
_SUBMODULES = {"format", "model", "views", "examples", "cli", "runtime", "plot", "widgets", "planning",
               "experiments", "units", "devices"}

if TYPE_CHECKING:  # pragma: no cover
    from .model import Arena, Method, Pte


def open(source, data=None):  # noqa: A001 - the natural name, like io.open
    """Open a ``.pte``, a bundled ``.bpte`` or a ``.ptd`` data file (path, bytes or binary file).

    Nothing is loaded: only the tables are read. A program opens as a
    :class:`~pte_lab.model.Pte` (a ``.bpte`` as the program it carries, its test
    suites in ``pte.bundled``); ``data`` is the program's external ``.ptd``.
    A ``.ptd`` alone opens as a :class:`~pte_lab.model.DataFile`. Raises
    :class:`PteFormatError` for anything else.
    """
    from .format import identify
    from .model import open_data, open_pte

    if hasattr(source, "read") and hasattr(source, "seek"):
        start = source.tell()
        kind = identify(source)
        source.seek(start)
    else:
        kind = identify(source)
    if kind == "data":
        if data is not None:
            raise ValueError("data= goes with a program (.pte/.bpte); this source is itself a .ptd file")
        return open_data(source)
    return open_pte(source, data=data)


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'pte_lab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
