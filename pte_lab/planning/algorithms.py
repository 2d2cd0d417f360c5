"""Planners: each takes a :class:`~.problem.Problem` and returns ``{group id: offset}``.

* ``greedy`` — ExecuTorch's default (exir/memory_planning.py): groups, largest
  first, go into fixed-size "shared objects" laid end to end (Pisarchyk & Lee
  2020, "Greedy by Size for Shared Objects"; see :func:`greedy`).
* ``best_fit`` — offset calculation (Pisarchyk & Lee 2020, "Greedy by Size
  for Offset Calculation"): groups, one at a time, each placed in the
  smallest gap between already placed groups whose lifetimes overlap it, or
  above them all; several orders are tried and the smallest plan kept (see
  :func:`best_fit`).
* ``first_fit`` — offset calculation as TensorFlow Lite Micro's
  ``GreedyMemoryPlanner`` does it: largest first, each group at the *first*
  gap that fits (the lowest offset), one order only (see :func:`first_fit`).
* ``naive`` — every group gets its own bytes, laid end to end (no reuse).
* ``optimal`` — the smallest plan, by exhaustive search; tiny arenas only
  (see :mod:`.exact`).
"""

from __future__ import annotations

import numpy as np

from ..vocabulary import PLANNER_NAMES
from .exact import optimal as search
from ..units import align_up
from .problem import PlanningError, Problem


def _by_size(p: Problem):
    """Largest first, as exir orders its specs: it inserts them in graph order into a list kept sorted by
    size (``bisect.insort``: an equal size goes after) and reverses it, so of equal sizes the one that
    appears last goes first. The order decides which shared object each group joins."""
    return sorted(p.groups, key=lambda g: (-g.size, -g.first, -g.id))


def naive(p: Problem) -> dict[int, int]:
    out, off = {}, 0
    for g in sorted(p.groups, key=lambda g: (g.first, g.id)):
        out[g.id] = off
        off += g.size
    return out


class _Placed:
    """Placed groups as growing numpy arrays, for vectorised lifetime-overlap queries."""

    def __init__(self, n: int):
        self.first = np.empty(n, np.int64)
        self.last = np.empty(n, np.int64)
        self.offset = np.empty(n, np.int64)
        self.end = np.empty(n, np.int64)
        self.tag = np.empty(n, np.int64)
        self.n = 0

    def add(self, g, offset: int, tag: int = 0) -> None:
        i = self.n
        self.first[i], self.last[i], self.offset[i], self.end[i], self.tag[i] = g.first, g.last, offset, offset + g.size, tag
        self.n += 1

    def overlapping(self, g) -> np.ndarray:
        k = self.n
        return np.flatnonzero((self.first[:k] <= g.last) & (self.last[:k] >= g.first))


def greedy(p: Problem) -> dict[int, int]:
    """ExecuTorch's greedy (exir/memory_planning.py ``pick_shared_obj``), over pte_lab's groups.

    Largest first. A group goes at offset 0 of the first shared object none of
    whose occupants it overlaps in time; else on top of the highest
    time-overlapping occupant of the first object where it still fits; else
    into a new object of its own size. Objects are laid end to end.

    Kept per object and instruction: the highest end of the groups placed
    there alive then (0: none). A group's question to every object is then one
    slice over its own lifetime, so a method of thousands of tensors plans in
    milliseconds.
    """
    order = _by_size(p)
    a = p.alignment
    if not order:
        return {}
    lo = min(g.first for g in order)
    width = max(g.last for g in order) - lo + 1
    top = np.zeros((8, width), np.int64)  # object x instruction -> highest end alive there
    obj_size = np.zeros(8, np.int64)
    k = 0
    assign: dict[int, tuple[int, int]] = {}
    for g in order:
        f, l = g.first - lo, g.last - lo + 1
        picked = None
        if k:
            tops = top[:k, f:l].max(axis=1)
            free = tops == 0
            j = int(free.argmax())
            if free[j]:
                picked = (j, 0)
            else:
                tops = align_up(tops, a)
                fit = tops + g.size <= obj_size[:k]
                j = int(fit.argmax())
                if fit[j]:
                    picked = (j, int(tops[j]))
        if picked is None:
            if k == len(top):
                top = np.concatenate([top, np.zeros_like(top)])
                obj_size = np.concatenate([obj_size, np.zeros_like(obj_size)])
            obj_size[k] = g.size
            picked = (k, 0)
            k += 1
        row = top[picked[0], f:l]
        np.maximum(row, picked[1] + g.size, out=row)
        assign[g.id] = picked
    starts, total = [], 0
    for size in obj_size[:k].tolist():
        starts.append(total)
        total += align_up(size, a)
    return {gid: starts[obj] + off for gid, (obj, off) in assign.items()}


def _best_fit_in_order(p: Problem, order, first: bool = False) -> tuple[dict[int, int], int]:
    """Place ``order``'s groups one by one in the smallest gap that fits (``first``: the lowest one)."""
    placed = _Placed(len(p.groups))
    out: dict[int, int] = {}
    top = 0
    for g in order:
        idx = placed.overlapping(g)
        idx = idx[np.argsort(placed.offset[idx], kind="stable")]
        best_off, best_gap, cursor = None, None, 0
        for o, e in zip(placed.offset[idx].tolist(), placed.end[idx].tolist()):
            gap = o - cursor
            if gap >= g.size and (best_gap is None or gap < best_gap):
                best_off, best_gap = cursor, gap
                if first:
                    break
            if e > cursor:
                cursor = align_up(e, p.alignment)
        if best_off is None:
            best_off = cursor
        out[g.id] = best_off
        placed.add(g, best_off)
        top = max(top, best_off + g.size)
    return out, top


#: group orders tried by best_fit, in turn
ORDERS = {
    "largest first": lambda g: (-g.size, g.first, g.id),
    "earliest first": lambda g: (g.first, -g.size, g.id),
    "longest first": lambda g: (-(g.last - g.first), -g.size, g.id),
    "largest area first": lambda g: (-g.size * (g.last - g.first + 1), g.first, g.id),
}


def best_fit(p: Problem) -> dict[int, int]:
    """Best fit into the gaps between time-overlapping groups (offset calculation), several orders.

    Each order (:data:`ORDERS`) places groups one by one into the smallest gap
    left by the already placed groups that are alive at the same time, or on
    top of them. The smallest result wins; trying stops early at the lower
    bound, which no plan can beat.
    """
    bound = p.lower_bound - p.padding
    best, best_top = None, None
    for key in ORDERS.values():
        out, top = _best_fit_in_order(p, sorted(p.groups, key=key))
        if best_top is None or top < best_top:
            best, best_top = out, top
        if best_top <= bound:
            break
    return best or {}


def first_fit(p: Problem) -> dict[int, int]:
    """TensorFlow Lite Micro's ``GreedyMemoryPlanner``: groups largest first, each at the lowest offset where
    it fits beside the already placed groups alive at the same time (the first gap, or on top of them)."""
    return _best_fit_in_order(p, sorted(p.groups, key=ORDERS["largest first"]), first=True)[0]


def optimal(p: Problem) -> dict[int, int]:
    """The smallest plan (exhaustive search; refuses more than :data:`.exact.MAX_GROUPS` groups)."""
    return search(p)[0]


#: every planner :func:`plan_arena` and :func:`~.replan.replan` take, by its name
#: (:data:`pte_lab.vocabulary.PLANNER_NAMES`, the names' one home): each is the function of that name here
PLANNERS = {name: globals()[name] for name in PLANNER_NAMES}
#: the heuristics: they plan arenas of any size (all but the exhaustive search, which plans tiny arenas only)
ALGORITHMS = {name: fn for name, fn in PLANNERS.items() if fn is not optimal}


def plan_arena(problem: Problem, algorithm: str = "best_fit") -> tuple[dict[int, int], int]:
    """(value -> offset, arena size) for one arena's problem.

    Returns the new offset of every planned value and the arena's new size. Raises ``ValueError`` for an
    unknown ``algorithm`` (see :data:`PLANNERS`), :class:`PlanningError` if a planner misplaces a group."""
    try:
        fn = PLANNERS[algorithm]
    except KeyError:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {sorted(PLANNERS)}") from None
    starts = fn(problem)
    offsets: dict[int, int] = {}
    end = 0
    for g in problem.groups:
        base = starts[g.id]
        if base % problem.alignment:
            raise PlanningError(f"{algorithm} placed group {g.id} at unaligned offset {base}")
        for value, rel, _ in g.members:
            offsets[value] = base + rel
        end = max(end, base + g.size)
    for value, nbytes in problem.idle:  # never alive: any in-bounds offset will do
        offsets[value] = 0
        end = max(end, align_up(nbytes, problem.alignment))
    return offsets, align_up(end, problem.alignment) + problem.padding
