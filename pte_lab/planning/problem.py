"""The planning problem of one arena, as a ``.pte`` really poses it.

* **Storage groups**: tensors that the current plan makes share bytes while
  they are alive at the same time are aliases (a view and its base, a buffer
  and its in-place update); they must keep sharing, so they are merged into
  one group that moves as a whole. Tensors that merely reuse bytes at
  different times stay separate: that reuse is the planner's choice.
* **Sizes** are rounded up to the alignment: ExecuTorch plans with 16 bytes
  (a finer one is used only if the original plan has offsets that need it).
* **Lifetimes** follow :mod:`pte_lab.model.lifetimes`; a group lives from its
  first member's first instruction to its last member's last.
* **Padding**: bytes the original arena has past its last allocation
  (XNNPACK programs carry 64) are kept.
* **Lower bound**: the most group bytes alive at one instruction (rounded up
  to the alignment), plus the kept padding. No plan of these groups can be
  smaller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PteLabError
from ..format import TENSOR_ALIGNMENT
from ..units import align_up


class PlanningError(PteLabError, ValueError):
    """Raised when a method or arena cannot be replanned safely (the message says why)."""


@dataclass
class Group:
    """Planned tensors that share storage: placed together, alive from ``first`` to ``last``."""
    id: int
    #: (value index, offset relative to the group's start, nbytes)
    members: list[tuple[int, int, int]]
    size: int
    first: int
    last: int
    original_offset: int
    #: bytes the members really cover (size is this rounded up to the alignment)
    extent: int = 0


@dataclass
class Problem:
    """The planning problem of one arena: its storage groups, alignment and padding."""
    method: str
    mem_id: int
    device: str
    alignment: int
    groups: list[Group]
    original_size: int
    padding: int
    n_instructions: int
    #: planned tensors that no instruction names or that hold no bytes (placed at offset 0)
    idle: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lower_bound(self) -> int:
        """Most group bytes alive at one instruction, rounded up to the alignment, plus the padding.

        Uses each group's true extent (not its aligned size): any plan needs
        that many bytes, arenas are multiples of the alignment, and every plan
        here keeps the original padding.
        """
        if not self.groups:
            return self.padding
        n = self.n_instructions
        diff = np.zeros(n + 3, dtype=np.int64)
        for g in self.groups:
            diff[g.first + 1] += g.extent
            diff[g.last + 2] -= g.extent
        return align_up(int(np.cumsum(diff).max()), self.alignment) + self.padding

    def lifetimes_overlap(self, a: Group, b: Group) -> bool:
        return a.first <= b.last and b.first <= a.last

    @classmethod
    def from_tensors(cls, tensors, alignment: int = TENSOR_ALIGNMENT, name: str = "on paper") -> "Problem":
        """A problem straight from ``(nbytes, first, last)`` triples: a plan on paper, one group per tensor
        (value ids are the positions in ``tensors``)."""
        groups = []
        for i, (nbytes, first, last) in enumerate(tensors):
            if nbytes < 0 or first > last:
                raise ValueError(f"tensor {i}: {nbytes} bytes over [{first}, {last}] is not a tensor")
            groups.append(Group(i, [(i, 0, nbytes)], max(alignment, align_up(nbytes, alignment)), first, last,
                                0, nbytes))
        n = max((t[2] for t in tensors), default=0) + 1
        return cls(name, 1, "cpu", alignment, groups, 0, 0, n)


def _alignment(offsets) -> int:
    """ExecuTorch's planning alignment (16), unless the original plan used a finer one."""
    a = TENSOR_ALIGNMENT
    while a > 1 and any(o % a for o in offsets):
        a //= 2
    return a


def build_problem(method, mem_id: int, alignment: int | None = None) -> Problem:
    """The planning problem of arena ``mem_id`` of a :class:`pte_lab.model.Method`.

    ``alignment`` (a power of two) overrides the one read from the plan.

    Returns the :class:`Problem`. Raises ``ValueError`` for an alignment that is not a power of two and
    :class:`PlanningError` for a method that cannot be replanned safely (a loop).
    """
    if method.has_loops:
        raise PlanningError(
            f"method {method.name!r} jumps backwards (a loop): its lifetimes cannot be trusted from "
            f"instruction order alone, so pte_lab will not replan it")
    arena = method.arena(mem_id)
    ts = [t for t in method.planned if t.mem_id == mem_id]
    if alignment is None:
        alignment = _alignment([t.offset for t in ts])
    elif alignment < 1 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, not {alignment}")
    # empty tensors hold nothing: like tensors never alive, any in-bounds offset will do
    live = [t for t in ts if t.first is not None and t.last is not None and t.nbytes > 0]
    idle = [(t.value, t.nbytes) for t in ts if t.first is None or t.last is None or t.nbytes == 0]
    # union-find over pairs alive together whose bytes overlap (aliases)
    parent = list(range(len(live)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    order = sorted(range(len(live)), key=lambda i: live[i].offset)
    active: list[int] = []
    for i in order:
        t = live[i]
        active = [j for j in active if live[j].offset + live[j].nbytes > t.offset]
        for j in active:
            u = live[j]
            if u.first <= t.last and t.first <= u.last:
                parent[find(i)] = find(j)
        active.append(i)
    members: dict[int, list[int]] = {}
    for i in range(len(live)):
        members.setdefault(find(i), []).append(i)
    groups = []
    for gid, idxs in enumerate(members.values()):
        base = min(live[i].offset for i in idxs)
        end = max(live[i].offset + live[i].nbytes for i in idxs)
        groups.append(Group(
            gid, [(live[i].value, live[i].offset - base, live[i].nbytes) for i in idxs],
            max(alignment, align_up(end - base, alignment)),
            min(live[i].first for i in idxs), max(live[i].last for i in idxs), base, end - base))
    used = max((g.original_offset + g.size for g in groups), default=0)
    used = max(used, max((t.offset + t.nbytes for t in ts), default=0))
    padding = max(0, arena.size - align_up(used, alignment))
    return Problem(method.name, mem_id, arena.device, alignment, groups, arena.size, padding,
                   method.n_instructions, idle)
