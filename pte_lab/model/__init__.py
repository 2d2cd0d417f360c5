"""The memory story of a program, computed from :mod:`pte_lab.format` records.

:class:`Pte` (a program), :class:`Method`, :class:`Arena`, planned-tensor
tables, lifetimes, occupancy and the lower bound, plan validation, device
findings and load-cost predictions for ExecuTorch's three loaders.

Its names are loaded when first used: a submodule (``pte_lab.model.dtypes``, say) is imported without the
whole analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

#: each public name -> the submodule that defines it
_LAZY = {
    "TENSOR_COLUMNS": "analysis", "Analysis": "analysis", "Arena": "analysis", "PlannedTensor": "analysis",
    "analyse": "analysis",
    "Bundled": "bundled", "BundledValue": "bundled", "TestSuite": "bundled",
    "DataFile": "data_file", "NamedTensor": "data_file", "open_data": "data_file",
    "Finding": "findings", "Kind": "findings",
    "LOAD_COST_COLUMNS": "load_cost", "LOADERS": "load_cost", "STEPS": "load_cost",
    "Delegate": "method", "Instruction": "method", "IOSpec": "method", "Method": "method",
    "Pte": "pte", "Segment": "pte", "open_pte": "pte",
    "NativePackage": "package", "NativeMethod": "package", "open_package": "package",
}

__all__ = [
    "Pte", "Method", "Arena", "PlannedTensor", "IOSpec", "Instruction", "Delegate", "Segment",
    "Finding", "Kind", "Analysis", "analyse", "LOADERS", "STEPS", "LOAD_COST_COLUMNS", "TENSOR_COLUMNS",
    "open_pte", "open_data", "DataFile", "NamedTensor", "Bundled", "BundledValue", "TestSuite",
    "NativePackage", "NativeMethod", "open_package",
]

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import TENSOR_COLUMNS, Analysis, Arena, PlannedTensor, analyse
    from .bundled import Bundled, BundledValue, TestSuite
    from .data_file import DataFile, NamedTensor, open_data
    from .findings import Finding, Kind
    from .load_cost import LOAD_COST_COLUMNS, LOADERS, STEPS
    from .method import Delegate, Instruction, IOSpec, Method
    from .package import NativeMethod, NativePackage, open_package
    from .pte import Pte, Segment, open_pte


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
