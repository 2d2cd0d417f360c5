"""The counts of a method's tables that its RawPlan does not keep: how many items each list value holds
(IntList, the lists the plan does not expand) and how many instructions each chain holds. They size what
ExecuTorch's Method::init takes from the method allocator (:mod:`pte_lab.model.method_pool`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..vocabulary import ValueKind
from .program_tables import RawProgram

__all__ = ["MethodTables", "method_tables"]

#: value kinds whose table is a vector of items at field 0 (IntList items are int64 indices; a String's
#: field is a string, whose length the runtime does not allocate by)
_LISTS = {ValueKind.INT_LIST: 8, ValueKind.DOUBLE_LIST: 8, ValueKind.BOOL_LIST: 1}


@dataclass(frozen=True)
class MethodTables:
    #: value index -> item count, for IntList, DoubleList and BoolList values
    list_lengths: dict[int, int]
    #: instructions per chain, in chain order
    chain_lengths: tuple[int, ...]


def method_tables(raw: RawProgram, plan_index: int) -> MethodTables:
    """The list lengths and chain lengths of execution plan ``plan_index``; O(values + chains)."""
    decoded = raw.plan(plan_index)  # decoded (and checked) first: a bad table is named where decoding names it
    plan = raw._root.tables(1, "execution_plan")[plan_index]
    values = plan.tables(2, "values")
    lengths: dict[int, int] = {}
    for i, v in enumerate(decoded.values):
        size = _LISTS.get(v.kind)
        if size is not None:  # only these values' tables are read again
            lengths[i] = values[i].table(1, "val").vector_len(0, f"values[{i}].items", size)
    chains = plan.tables(5, "chains")
    return MethodTables(lengths, tuple(c.vector_len(2, "instructions") for c in chains))
