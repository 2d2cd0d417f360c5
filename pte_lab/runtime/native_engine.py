"""The native engine: pte_lab's sizing runner with ExecuTorch's libraries loaded directly, never its Python package.

Sizing a method is native work from end to end: ``native/sizing.cpp`` loads and runs it through ExecuTorch's
C++ runtime, and the kernels and backends it calls register themselves when their libraries load. Importing
ExecuTorch's Python package to get those libraries loaded costs a worker about 8 s of CPU (torch, torchao and
more) and measures nothing. A :class:`NativeEngine` loads, instead, the libraries the registry probe found
(:func:`~pte_lab.runtime.libraries.registry`): ``libexecutorch.so`` with pte_lab's helper, every backend's
library at the start (a backend is asked whether it is available, as the Python runtime asks it), and a kernel
library when a method first calls one of its operators. The runs, their pools and their counts are the same
as under the Python runtime: the same runner over the same libraries.

It also records a method's shapes for what-if (:meth:`NativeEngine.record_shapes`: pte_lab's own event tracer,
:mod:`pte_lab.runtime.recorder`). It lives in an isolated worker (``Worker(native=True)``);
:class:`~pte_lab.runtime.engine.Engine` adds what needs the Python runtime (loading programs as ``Runtime.load_program`` does, torch tensors in and out).
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING

from . import device as devmod
from . import native
from .libraries import registry
from .operators import Provision
from .recorder import record
from .sizing_runner import file_loader_default_alignment, run_method
from .stand_ins import register, stats

if TYPE_CHECKING:  # pragma: no cover
    from .libraries import Registry
    from .sizing_runner import RunnerResult

__all__ = ["NativeEngine", "NativeOps"]


class NativeOps:
    """The engine operations that are native work only: sizing runs, stand-ins, the emulated device's ledger.
    Shared by :class:`NativeEngine` and the Python runtime's :class:`~pte_lab.runtime.engine.Engine`."""

    def size_method(self, path: str, name: str, **pools) -> "RunnerResult":
        """Load and run ``name`` with pte_lab's sizing runner (see :mod:`pte_lab.runtime.sizing_runner`; ``pools``: its
        keyword arguments)."""
        return run_method(path, name, **pools)

    def file_loader_default_alignment(self) -> int:
        """FileDataLoader's default alignment in this build (alignof(std::max_align_t))."""
        return file_loader_default_alignment()

    def register_stand_ins(self, backends: list[str], operators: list[str]) -> list[str]:
        """Register pte_lab's stand-ins for a backend or kernels the wheel lacks (sizing workers only; see
        :mod:`pte_lab.runtime.stand_ins`); what was registered."""
        return register(backends, operators)

    def stand_in_stats(self) -> dict:
        return stats()

    def allocator_registered(self, device: str) -> bool | None:
        return devmod.allocator_registered(device)

    def ledger_events(self, since: int = 0) -> list:
        """The emulated device's ledger events (``native.LedgerEvent``) from position ``since``."""
        try:
            return devmod.native.read_events(since)
        except Exception:  # noqa: BLE001 - no helper built: no ledger
            return []

    def ledger_mark(self) -> int:
        try:
            return int(devmod.native.library().pte_lab_event_count())
        except Exception:  # noqa: BLE001 - no helper built: no ledger, nothing counted
            return 0


class NativeEngine(NativeOps):
    """Sizing runs in a process that never imports ExecuTorch's Python package (see the module's docstring).

    ``devices``: the devices the program's arenas name; ``emulate``: those to emulate where no real allocator is
    registered (as :class:`~pte_lab.runtime.engine.Engine` does); ``known``: the install's
    :class:`~pte_lab.runtime.libraries.Registry` where the caller has it (else read here)."""

    def __init__(self, devices: list[str] = (), emulate: list[str] = (), known: "Registry | None" = None):
        native.without_python_extension()
        native.library()  # libexecutorch.so, through the helper's own link
        # ``known``: the registry as the parent read it (each worker would otherwise list the install's
        # libraries again to find its key, about 50 ms)
        self.registry = known if known is not None else registry()
        self._loaded: set[str] = set()
        self._backends: list[str] = []
        for name, lib in sorted(self.registry.backends.items()):
            if name in self.registry.unavailable:  # its own runtime library is missing here: not loaded
                continue
            if self._load(lib):
                self._backends.append(name)
        for d in emulate:  # a device with a real allocator registered is used as it is
            if not devmod.allocator_registered(d):
                devmod.emulate_device(d)
        self.devices = list(devices)

    def _load(self, path: str) -> bool:
        """Load one library of the install (its kernels and backends register as it loads); False where it
        cannot be loaded here."""
        if path in self._loaded:
            return True
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            return False
        self._loaded.add(path)
        return True

    def record_shapes(self, path: str, name: str, inputs: list, debug_buffer: int, data_path: str | None = None):
        """Run ``name`` once with pte_lab's shape recorder: the values its instructions wrote, as ETDump logs them
        (:func:`pte_lab.runtime.recorder.record`; ``inputs``: plain data, :func:`.inputs.plain_example_inputs`)."""
        return record(path, name, inputs, debug_buffer, data_path)

    def registered_backends(self) -> list[str]:
        """The backends this runtime can use: their library loaded, and available (the registry probe asked)."""
        return list(self._backends)

    def unavailable_backends(self) -> list[str]:
        return sorted(self.registry.unavailable)

    def provide_operators(self, operators: list[str]) -> "Provision":
        """Load the libraries that register ``operators``; what no library of the install registers (sorted),
        and the libraries loaded for the others (file name -> the operators it was loaded for)."""
        loaded: dict[str, str] = {}
        missing = []
        for op in sorted(set(operators)):
            lib = self.registry.kernels.get(op)
            if lib is None:
                missing.append(op)
            elif lib not in self._loaded:
                if self._load(lib):
                    loaded[os.path.basename(lib)] = op
                else:
                    missing.append(op)
        return Provision(tuple(missing), loaded)
