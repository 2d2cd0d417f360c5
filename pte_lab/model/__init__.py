"""The memory story of a program, computed from :mod:`pte_lab.format` records.

:class:`Pte` (a program), :class:`Method`, :class:`Arena`, planned-tensor
tables, lifetimes, occupancy and the lower bound, plan validation, device
findings and load-cost predictions for ExecuTorch's three loaders.
"""

from .findings import Finding
from .load_cost import LOADERS
from .method import Arena, Delegate, Instruction, IOSpec, Method, PlannedTensor
from .pte import Pte, Segment, open_pte

__all__ = [
    "Pte", "Method", "Arena", "PlannedTensor", "IOSpec", "Instruction", "Delegate", "Segment",
    "Finding", "LOADERS", "open_pte",
]
