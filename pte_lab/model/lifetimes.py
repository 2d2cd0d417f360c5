"""Lifetimes read from the instruction stream.

Convention (the one pte_lab uses everywhere):

* ``first`` / ``last`` are the indices of the first and last instruction whose
  arguments name the value. TensorList and OptionalTensorList arguments name
  their items too; MoveCall (both ends), FreeCall and JumpFalseCall (its
  condition) count like any other instruction.
* Method inputs start at ``-1`` (they are written before the first
  instruction); method outputs end at ``N``, the instruction count (they are
  read after the last one).
* State that persists between calls (mutable buffers) spans ``[-1, N]``.
* Loops: when an instruction jumps backwards from ``j`` to ``d``, any value
  alive before ``d`` and used inside ``[d, j]`` must survive every iteration,
  so its ``last`` is extended to ``j``.
* A value no instruction names and that is not an input, output or buffer has
  no lifetime (``None``).

ExecuTorch itself computes lifetimes on FX nodes, not instructions, and does
not store them; this convention gave no plan conflicts on exported programs.
"""

from __future__ import annotations

from ..format import RawPlan


def instruction_uses(plan: RawPlan) -> tuple[dict[int, int], dict[int, int]]:
    """first and last instruction naming each value (lists expanded)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    values = plan.values
    for i, ins in enumerate(plan.instructions):
        for a in ins.args:
            first.setdefault(a, i)
            last[a] = i
            v = values[a]
            if v.items:
                for it in v.items:
                    if it >= 0:
                        first.setdefault(it, i)
                        last[it] = i
    return first, last


def backward_jumps(plan: RawPlan) -> list[tuple[int, int]]:
    """(source, destination) of every JumpFalseCall that jumps backwards."""
    return [
        (i, ins.destination)
        for i, ins in enumerate(plan.instructions)
        if ins.kind == "JumpFalseCall" and ins.destination <= i
    ]


def lifetimes(plan: RawPlan, persistent: set[int]) -> tuple[dict[int, int], dict[int, int]]:
    """first/last per value under the convention above.

    ``persistent`` are the values (mutable buffers) that live across calls.
    """
    n = len(plan.instructions)
    first, last = instruction_uses(plan)
    for v in plan.inputs:
        first[v] = -1
        last.setdefault(v, -1)
    for v in plan.outputs:
        first.setdefault(v, n)
        last[v] = n
    for v in persistent:
        first[v] = -1
        last[v] = n
    jumps = backward_jumps(plan)
    if jumps:
        changed = True
        while changed:  # nested loops: repeat until nothing moves
            changed = False
            for src, dst in jumps:
                for v, f in first.items():
                    if f < dst <= last[v] < src:
                        last[v] = src
                        changed = True
    return first, last
