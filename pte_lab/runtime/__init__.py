"""Load and run programs with ExecuTorch, memory accounted; the emulated device.

Importing this package imports nothing heavy; ExecuTorch is imported by the
first call that needs it.
"""

from __future__ import annotations

from .device import EmulatedDevice, emulate_device
from .info import RuntimeInfo, runtime_info
from .inputs import call_sequence, example_inputs
from .program import LabMethod, LabProgram, OperatorLibraryWarning, SharedArenasWarning, load
from .run_all import MethodRun, RunAll, run_all
from .sizing import MethodSizes, Sizes, SizingError, PoolVerification, sizes

__all__ = ["load", "LabProgram", "LabMethod", "SharedArenasWarning", "emulate_device", "EmulatedDevice",
           "runtime_info", "RuntimeInfo", "example_inputs", "call_sequence", "run_all", "RunAll", "MethodRun",
           "OperatorLibraryWarning", "sizes", "Sizes", "MethodSizes", "PoolVerification", "SizingError"]
