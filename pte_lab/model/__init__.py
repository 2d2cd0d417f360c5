"""The memory story of a program, computed from :mod:`pte_lab.format` records.

:class:`Pte` (a program), :class:`Method`, :class:`Arena`, planned-tensor
tables, lifetimes, occupancy and the lower bound, plan validation, device
findings and load-cost predictions for ExecuTorch's three loaders.
"""

from .analysis import TENSOR_COLUMNS, Analysis, Arena, PlannedTensor, analyse
from .bundled import Bundled, BundledValue, TestSuite
from .data import DataFile, NamedTensor, open_data
from .findings import Finding, Kind
from .load_cost import LOAD_COST_COLUMNS, LOADERS, STEPS
from .method import Delegate, Instruction, IOSpec, Method
from .pte import Pte, Segment, open_pte

__all__ = [
    "Pte", "Method", "Arena", "PlannedTensor", "IOSpec", "Instruction", "Delegate", "Segment",
    "Finding", "Kind", "Analysis", "analyse", "LOADERS", "STEPS", "LOAD_COST_COLUMNS", "TENSOR_COLUMNS",
    "open_pte", "open_data", "DataFile", "NamedTensor", "Bundled", "BundledValue", "TestSuite",
]
