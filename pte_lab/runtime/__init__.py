"""Load and run programs with ExecuTorch, memory accounted; the emulated device.

Importing this package imports nothing heavy: its names are loaded when first used (so that the isolated
worker, ``python -m pte_lab.runtime.worker``, starts in a fraction of a second), and ExecuTorch is imported by
the first call that needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

#: each public name -> the submodule that defines it
_LAZY = {
    "load": "loaded", "LabProgram": "loaded", "LabMethod": "loaded", "SharedArenasWarning": "loaded",
    "OperatorLibraryWarning": "loaded",
    "emulate_device": "device", "EmulatedDevice": "device",
    "runtime_info": "info", "RuntimeInfo": "info",
    "example_inputs": "inputs", "call_sequence": "inputs",
    "run_all": "run_all", "RunAll": "run_all", "MethodRun": "run_all",
    "sizes": "sizing", "Sizes": "sizing", "MethodSizes": "sizing", "SizingError": "sizing",
    "PoolVerification": "sizing",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:  # pragma: no cover
    from .device import EmulatedDevice, emulate_device
    from .info import RuntimeInfo, runtime_info
    from .inputs import call_sequence, example_inputs
    from .loaded import LabMethod, LabProgram, OperatorLibraryWarning, SharedArenasWarning, load
    from .run_all import MethodRun, RunAll, run_all
    from .sizing import MethodSizes, PoolVerification, Sizes, SizingError, sizes


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
