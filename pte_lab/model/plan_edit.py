"""A change a finding prescribes, as the planned tensors it touches: values no longer planned, and the value
read in place of a removed one (which then lives until the removed one's last use).

A finding's change is worded for a person (:attr:`~pte_lab.model.findings.Finding.change`); where the same
change is "these tensors go, that one is read instead" on the file's own graph, the finding carries it as a
:class:`PlanEdit` too, so that :mod:`pte_lab.planning.at_bound` can replan the method with the change made, at
any bound (``pte-lab what-if FILE --apply KIND``), without parsing words. Pure: a record.

Only changes that keep every other tensor as it is are expressible: the safe softmax's planes
(:func:`pte_lab.model.peak.safe_softmax_edit`). A fused attention writes tensors the file has no record of;
a smaller bound is the what-if itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PlanEdit"]


@dataclass(frozen=True)
class PlanEdit:
    """The planned tensors a change removes, and what is read in their place (value indices of the method)."""

    #: values no longer planned (a view of one goes with it)
    removed: tuple[int, ...]
    #: ``(removed, kept)``: instructions that read ``removed`` read ``kept`` instead, so ``kept`` lives until
    #: ``removed``'s last use
    read_instead: tuple[tuple[int, int], ...] = ()
    #: the model change this is, in words (the part of the finding's change it stands for)
    change: str = ""

    def __post_init__(self):
        gone = set(self.removed)
        for old, new in self.read_instead:
            if old not in gone or new in gone:
                raise ValueError(f"read_instead ({old}, {new}): the first must be removed, the second kept")
