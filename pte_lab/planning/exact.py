"""The smallest plan of a tiny arena, found by exhaustive search: what the heuristics are measured against.

Placing tensors with known lifetimes in the fewest bytes is NP-hard in
general (it is *dynamic storage allocation*, problem SR2 of Garey & Johnson's
catalogue), which is why ExecuTorch and TensorFlow Lite use greedy
heuristics. For a handful of tensors it can still be solved exactly, and that
tells a learner two things no heuristic can: whether the lower bound (the most
bytes alive at once) is reachable at all, and how far a heuristic is from the
best plan.

The search tries arena sizes upward from the lower bound. Any plan can be
pushed down until every group rests on offset 0 or on top of a group it
overlaps in time, and such a plan, read from the bottom up, places each group
after the one it rests on. So the search builds plans bottom up: at each step
any unplaced group, at 0 or on top of a placed group it overlaps, never below
the previous group's offset. If no such plan fits, none does.
"""

from __future__ import annotations

from ..units import align_up
from .problem import PlanningError, Problem

#: more groups than this are refused (the search grows exponentially)
MAX_GROUPS = 10


def optimal(p: Problem, max_groups: int = MAX_GROUPS) -> tuple[dict[int, int], int]:
    """``({group id: offset}, size)`` of a smallest plan of ``p`` (padding excluded).

    Raises :class:`PlanningError` for more than ``max_groups`` groups.
    """
    groups = sorted(p.groups, key=lambda g: (-g.size, g.first, g.id))
    if len(groups) > max_groups:
        raise PlanningError(f"exhaustive search is for tiny problems: {len(groups)} groups, at most "
                            f"{max_groups} (the problem is NP-hard); use best_fit")
    if not groups:
        return {}, 0
    overlaps = {g.id: [h for h in groups if h is not g and g.first <= h.last and h.first <= g.last]
                for g in groups}
    size = align_up(p.lower_bound - p.padding, p.alignment)
    total = sum(g.size for g in groups)
    while size <= total:
        found = _place(groups, overlaps, size, {})
        if found is not None:
            return found, max(found[g.id] + g.size for g in groups)
        size += p.alignment
    raise AssertionError("laying every group end to end always fits")  # pragma: no cover


def _place(groups, overlaps, size: int, placed: dict[int, int], floor: int = 0) -> dict[int, int] | None:
    if len(placed) == len(groups):
        return dict(placed)
    for g in groups:
        if g.id in placed:
            continue
        busy = [(placed[h.id], placed[h.id] + h.size) for h in overlaps[g.id] if h.id in placed]
        for start in sorted({0} | {end for _, end in busy}):
            if start < floor or start + g.size > size:
                continue
            if all(start + g.size <= lo or hi <= start for lo, hi in busy):
                placed[g.id] = start
                got = _place(groups, overlaps, size, placed, start)
                if got is not None:
                    return got
                del placed[g.id]
    return None
