"""A diff of two programs that run on different backends (Core ML against XNNPACK): what each side is known to
need, what is not known, and which needs less of what is known; the kinds of target both can run on; whether
what a budget could not hold is only what this host cannot run.

Facts for the views of :mod:`pte_lab.views.diff_backends` (records, not words):

* :func:`backend_verdict`: one :class:`SideKnown` per side (the planned bytes and the delegates' bytes in the
  file, read from it; what ``--sizes`` measured here; the backends' :class:`~.backends.BackendNote` for what
  neither gives) and which side needs less of what both sides know (:class:`BackendVerdict`), never more;
  where one side alone was measured here, that side (:attr:`BackendVerdict.measured_one_side`), whose measured
  figures the verdict must weigh.
* :func:`applicable_targets`: the kinds of target (``pte_lab.sizes``' "host", an OS process, and
  "bare-metal") every backend of both programs runs on (:attr:`~.backends.BackendNote.targets`): a total for
  another kind is no one's (a bare-metal total of an iOS comparison).
* :func:`not_run_here_only`: every figure a budget could not hold is of a method a side cannot run on this
  host (its backend is not in this ExecuTorch build): not a failed budget (``NOT_RUN_HERE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CHECK_FAILED, NOT_RUN_HERE
from ..vocabulary import Region
from .backends import BackendNote, backend_note
from .diff import linked_backends
from ..vocabulary import MemoryPart

if TYPE_CHECKING:  # pragma: no cover
    from .diff import Diff

__all__ = ["SideKnown", "BackendVerdict", "backend_verdict", "applicable_targets", "not_run_here_only", "exit_status",
           "DELEGATE_REGIONS", "TARGET_KIND_NAMES"]

#: the file's regions (``file_layout``) that hold the delegates' bytes: their blobs, and the named data they
#: read (XNNPACK's weights, when the program keeps them out of the blob)
DELEGATE_REGIONS = (Region.DELEGATE, Region.INLINE_DELEGATE, Region.NAMED_DATA)
#: the kinds of target a total is for, in the order they are said (``pte_lab.sizes``' target kinds)
TARGET_KIND_NAMES = ("host", "bare-metal")


@dataclass(frozen=True)
class SideKnown:
    """One program of a diff of two backends: what is known of its memory and what is not."""

    #: "first" or "second"
    side: str
    #: the backends its methods call (() : the portable kernels alone)
    backends: tuple[str, ...]
    #: planned bytes of the methods compared (read from the file)
    planned: int
    #: the delegates' bytes in the file: blobs and the named data they read (read from the file)
    delegate_bytes: int
    #: of :attr:`delegate_bytes`, (region, backend or "", bytes)
    delegate_parts: tuple[tuple[str, str, int], ...]
    #: of :attr:`delegate_bytes`, ExecuTorch's debug files inside the blobs (Core ML's: the profiler's map, not the
    #: model), read with the blob at load_method like the rest of it
    debug_bytes: int
    #: the method both programs have, where there is one: what :attr:`measured_here` is of
    method: str | None
    #: :attr:`method`'s total on this host as ``--sizes`` measured it (planned buffers, pools, the heap with the
    #: loader below), None where not measured (no --sizes, several methods in both, or it cannot run here)
    measured_here: int | None
    #: the data loader :attr:`measured_here` assumes
    loader: str | None
    #: of :attr:`measured_here`, the heap kept by load_method and execute on this host (where a backend
    #: allocates its own memory, as XNNPACK its packed weights and workspace, it is in this); None where not
    #: measured
    heap_here: int | None
    #: why nothing was measured here (the method cannot run on this host: the reason), None where it was or
    #: where no sizing was asked
    not_run_here: str | None
    #: what is not known of each backend, and how to measure it on the device
    notes: tuple[BackendNote, ...]

    @property
    def from_file(self) -> int:
        """What the file gives: planned bytes and the delegates' bytes."""
        return self.planned + self.delegate_bytes


@dataclass(frozen=True)
class BackendVerdict:
    """Which of two backends' programs is known to need less: of what both sides know, never more."""

    first: SideKnown
    second: SideKnown
    #: what was compared: "file" (planned + the delegates' bytes, both read from the files) or "measured here"
    #: (both sides' totals on this host, ``--sizes``)
    compared: str
    #: the figures compared, first and second
    before: int
    after: int
    #: backends whose own memory is not known on the device: no verdict on the whole is given
    unknown: tuple[str, ...]

    @property
    def less(self) -> str | None:
        """"first" or "second": the side known to need less of what is compared; None when they are equal."""
        if self.before == self.after:
            return None
        return "first" if self.before < self.after else "second"

    @property
    def by(self) -> int:
        return abs(self.after - self.before)

    @property
    def measured_one_side(self) -> SideKnown | None:
        """The side ``--sizes`` measured here where the other was not (it cannot run here): its measured figures
        (the heap its backend kept, its total) are beyond what is compared, and may outweigh the difference in
        it; None where both or neither were measured."""
        if self.compared != "file":
            return None
        done = [s for s in (self.first, self.second) if s.measured_here is not None]
        return done[0] if len(done) == 1 else None


def _side(d: "Diff", side: str) -> SideKnown:
    p = d.before if side == "first" else d.after
    names = [*d.methods, *(d.removed if side == "first" else d.added)]
    backends = tuple(sorted(linked_backends(p.methods[n] for n in names if n in p.methods)))
    planned = d.planned_bytes.before if side == "first" else d.planned_bytes.after
    parts = []
    for r in d.regions:
        n = r.bytes.before if side == "first" else r.bytes.after
        if r.region in DELEGATE_REGIONS and n:
            parts.append((r.region, r.name, n))
    measured = loader = heap = why = None
    s = d.sizes
    if s is not None:
        skipped = s.skipped_before if side == "first" else s.skipped_after
        why = next((w for n, w in skipped.items() if n in names), None)
        common = list(d.methods)  # like with like: a method both programs have
        host = [t for t in s.totals if t.target == "host" and t.method in common]
        got = [t.bytes.before if side == "first" else t.bytes.after for t in host]
        if len(common) == 1 and len(got) == 1 and got[0] is not None:
            measured, loader = got[0], host[0].loader
            own = [p for p in s.parts if p.method in common and p.part in (MemoryPart.HEAP_LOAD_METHOD,
                                                                          MemoryPart.HEAP_EXECUTE)]
            vals = [p.bytes.before if side == "first" else p.bytes.after for p in own]
            heap = sum(v for v in vals if v is not None) if vals and all(v is not None for v in vals) else None
    one = next(iter(d.methods)) if len(d.methods) == 1 else None
    # each blob once, however many calls name it (a blob's debug files are in its bytes once)
    blobs = {(dm.offset, dm.blob_bytes): dm.contents.debug_bytes for n in names if n in p.methods
             for dm in p.methods[n].delegate_memory if dm.contents is not None}
    return SideKnown(side, backends, planned or 0, sum(n for _, _, n in parts), tuple(parts), sum(blobs.values()),
                     one, measured, loader, heap, why, tuple(backend_note(b) for b in backends))


def backend_verdict(d: "Diff") -> BackendVerdict | None:
    """Each side's :class:`SideKnown` and which is known to need less (:class:`BackendVerdict`), where the two
    programs call different backends (a Core ML export against an XNNPACK one, or delegated against portable);
    None where they call the same."""
    a, b = _side(d, "first"), _side(d, "second")
    if a.backends == b.backends:
        return None
    if a.measured_here is not None and b.measured_here is not None:
        compared, x, y = "measured here", a.measured_here, b.measured_here
    else:
        compared, x, y = "file", a.from_file, b.from_file
    # a backend's own memory on the device: what nothing here measures (Core ML's inside; XNNPACK's heap is
    # measured here, on this CPU, not on the device's)
    unknown = tuple(dict.fromkeys(n.backend for s in (a, b) for n in s.notes))
    return BackendVerdict(a, b, compared, x, y, unknown)


def applicable_targets(d: "Diff") -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(the kinds of target every backend of both programs runs on, in :data:`TARGET_KIND_NAMES` order; kind
    left out -> the backends that do not run there). Programs of the portable kernels alone run on both; where
    no kind is common to both programs every kind is kept (each side's own is then said by its backends)."""
    backends = sorted(linked_backends(m for p in (d.before, d.after) for m in p.methods.values()))
    left: dict[str, tuple[str, ...]] = {}
    for kind in TARGET_KIND_NAMES:
        not_there = tuple(b for b in backends if kind not in backend_note(b).targets)
        if not_there:
            left[kind] = not_there
    kept = tuple(k for k in TARGET_KIND_NAMES if k not in left)
    return (kept, left) if kept else (TARGET_KIND_NAMES, {})


def not_run_here_only(d: "Diff") -> bool:
    """The budget (:meth:`~.diff.Diff.budget`) failed only for figures not measured because a side cannot run
    the method on this host (``SizesDiff.cannot_run_here``): nothing exceeded, nothing else unmeasured. Not a
    failed budget: ``pte-lab diff`` exits ``NOT_RUN_HERE`` for it (a deployment change still wins)."""
    s = d.sizes
    if s is None or d.limit_pct is None:
        return False
    failed = [c for c in d.budget() if c.failed]
    if not failed or any(c.exceeded for c in failed):
        return False
    cannot = set(s.cannot_run_here)
    sides = {"first": ("first",), "second": ("second",), "both": ("first", "second")}
    for p in (*s.parts, *s.pools):
        if p.unmeasured is not None and any((side, p.method) not in cannot for side in sides[p.unmeasured]):
            return False
    return all((side, n) in cannot for side, n, _ in s.not_measured)


def exit_status(d: "Diff", budget_status: int) -> int:
    """What ``pte-lab diff --fail-if-grows`` exits with, given the budget's status (0, ``CHECK_FAILED`` or
    ``TARGET_CHANGED``): a budget failed only for what this host cannot run (:func:`not_run_here_only`) is
    :data:`~pte_lab.errors.NOT_RUN_HERE`, not a failed check; a deployment change and an exceeded figure win."""
    if budget_status == CHECK_FAILED and not_run_here_only(d):
        return NOT_RUN_HERE
    return budget_status
