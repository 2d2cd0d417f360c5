"""What a dynamic method would plan at another export bound, the largest bound under a budget, and the bytes
a call at one shape really uses.

``pte_lab.what_if("model.pte", bounds={(0, 1): 800})`` runs the method at a few sizes in an isolated worker
(:mod:`pte_lab.runtime.shapes`), fits every planned tensor's dims exactly (:mod:`pte_lab.model.shape_fit`;
refused, naming the tensor, where a dim is not affine), then replans each arena with ExecuTorch's own
greedy (:func:`~.algorithms.greedy`: 16-byte alignment, XNNPACK's 64-byte tail kept), so that the prediction
is what a re-export at ``Dim(..., max=800)`` plans, byte for byte; pte_lab's ``best_fit`` and the lower bound
say what a better planner would reach. Lifetimes and aliases are the file's: another bound changes sizes,
not the graph.

``pte_lab.largest_bound("model.pte", "300MiB", dim=(0, 1))`` finds the largest bound whose planned bytes fit
(exactly: the plan is not monotonic in the bound, see :func:`_search`). ``pte_lab.usage_at("model.pte", {(0, 1): 800})`` runs the method once at that shape: the
bytes each planned tensor uses, what a plan for that shape would need, and the gap to the plan at the bound.

The replanning (:class:`Predictor`) is pure: once the samples are taken, a prediction is a few milliseconds.
"""

from __future__ import annotations

import functools
import os
import dataclasses
from dataclasses import dataclass, field
from ..vocabulary import Word
from fractions import Fraction

import numpy as np

from ..arguments import AT_LEAST_ONE, BOOL, DIM, DIM_SIZES, NAME, PATH, PROGRAM, PROGRESS, SIZE, arguments, optional
from ..errors import PteLabError
from ..format.regular_file import check_regular
from ..format.schema import TensorShapeDynamism
from ..model import Pte, open_pte
from ..model.dtypes import nbytes as nbytes_of
from ..model.dtypes import scalar_type, short_shape
from ..model.findings import Finding
from ..model.method_pool import method_pool
from ..model.plan_edit import PlanEdit
from ..model.shape_fit import (TWO_EXPORTS, ShapeFit, WhatIfError, check_axes, check_bounds, dim_name, dynamic_inputs,
                              export_change, fit_shapes, logged_values, point_text, read_axes, sample_points,
                              unrecorded, value_shapes)
from ..runtime.inputs import check_build, input_parts, plain_example_inputs, shape_bytes
from ..progress import reporter, telling
from ..runtime import kept, native
from ..runtime.libraries import registry
from ..runtime.isolate import RemoteError, Worker
from ..runtime.shapes import program_scalars
from ..runtime.sizing.kept_sizes import kept_sizes
from ..runtime.sizing.results import heap_at, sizes
from ..runtime.sizing.measure import cannot_run_here
from ..runtime.sizing.records import Basis
from ..units import INT64_MAX, align_up, check_int64, exact_bytes, parse_bytes
from .problem import Group, Problem, build_problem
from .algorithms import plan_arena

__all__ = ["what_if", "largest_bound", "usage_at", "learn", "Predictor", "WhatIf", "ArenaAt", "TensorAt",
           "BoundUnderBudget", "UsageAt", "BeyondPlan", "BeyondPart", "Loader", "beyond_plan", "Applied", "NeedOption", "changes", "Planner", "search_budget", "dynamic_dims", "parse_budget", "dim_name", "export_change", "CURVE_POINTS",
           "FromExports", "HeapSearch", "HEAP_MEASUREMENTS", "HEAP_NOISE"]

#: how many bounds the budget search's curve shows
CURVE_POINTS = 48

#: the most bounds a whole-app budget search measures the heap at (one fresh worker each), beside the sizing's
#: at the exported bound
HEAP_MEASUREMENTS = 6
#: how far two heap peaks measured in fresh workers may differ with nothing changed (malloc's layout moves them by
#: some hundred bytes): a smaller bound's heap above a larger one's by more is the heap not growing with the bound
HEAP_NOISE = 4096


def parse_budget(text) -> int:
    """``300MiB`` -> 314572800 (bytes, or a number with KiB, MiB or GiB: :func:`pte_lab.units.parse_bytes`, which
    ``sizes --budget`` reads too). Raises :class:`WhatIfError` for anything else, a budget of 0, or one beyond
    what int64 holds."""
    try:
        n = check_int64(text, "budget") if isinstance(text, (int, np.integer)) else parse_bytes(text)
    except ValueError as e:
        raise WhatIfError(str(e) if isinstance(text, (int, np.integer)) else f"budget {e}") from None
    if n <= 0:
        raise WhatIfError(f"budget {text!r}: a budget is more than 0 bytes")
    return n


@dataclass(frozen=True)
class TensorAt:
    """One planned tensor at the asked bound, beside the export's."""

    value: int
    role: str
    op: str | None
    name: str | None
    dtype: str
    mem_id: int
    shape: tuple[int, ...]
    nbytes: int
    exported_shape: tuple[int, ...]
    exported_nbytes: int
    #: its offset in ExecuTorch's greedy plan at the asked bound
    offset: int


@dataclass(frozen=True)
class ArenaAt:
    """One arena at the asked bound: what ExecuTorch's greedy plans, pte_lab's best fit, the lower bound."""

    mem_id: int
    device: str
    planned: int
    #: None: not asked for (``Predictor.predict(..., best_fit=False)``)
    best_fit: int | None
    lower_bound: int
    #: the arena's size in the file (at the exported bound)
    exported: int


@dataclass(frozen=True)
class FromExports:
    """Where a static prediction comes from (:func:`~pte_lab.planning.from_two_exports.what_if_from`): two exports
    at two values of one parameter."""

    sources: tuple[str | None, str | None]
    values: tuple[int, int]
    #: the metadata methods that return those values (export_llm's ``max_seq_len``, ``max_context_len``:
    #: ``get_`` left off); empty where the programs have none
    names: tuple[str, ...] = ()

    def export_change(self, value: int) -> str:
        """``max_seq_len = 256, max_context_len = 256``: the re-export the prediction stands for."""
        return ", ".join(f"{n} = {value}" for n in self.names or ("the parameter",))


class Planner(Word):
    """Which plan a figure is: what a re-export plans (ExecuTorch's greedy), or that re-export replanned by
    ``pte-lab replan`` (pte_lab's best fit, from the same lifetimes)."""

    GREEDY = "greedy"
    BEST_FIT = "best_fit"



@dataclass(frozen=True)
class Applied:
    """Findings' changes made before replanning: a prediction of the program with them made (the file's
    tensors, less those the changes remove, with what is read in their place living on)."""

    #: the findings whose changes are made (each carries its :class:`~pte_lab.model.plan_edit.PlanEdit`)
    findings: tuple[Finding, ...]
    #: the tensors taken out and their bytes at the prediction's bound (a view of one goes with it, not listed)
    removed: tuple[tuple[int, int], ...]
    #: what ExecuTorch's greedy plans at the same bound without the changes
    planned_without: int

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(str(f.kind) for f in self.findings)

    @property
    def removed_bytes(self) -> int:
        return sum(n for _, n in self.removed)


class Loader(Word):
    """The data loader the app's budget is for: what it holds on the heap beyond the pools."""

    #: an app's C++ Module with its default LoadMode File (iOS, Android): it mallocs the program's bytes it reads
    FILE = "Module's default LoadMode File (FileDataLoader: it mallocs the program's bytes it reads; iOS, Android)"



@dataclass(frozen=True)
class BeyondPart:
    """One thing the app needs beside the planned arenas (the method pool, the temp pool, the heap): its bytes and
    their basis (:class:`~pte_lab.runtime.sizing.records.Basis`); ``lower``: the figure is a floor, more may be
    needed (the heap, where only the loader's copy of the file is known)."""

    what: str
    bytes: int
    basis: str
    lower: bool = False


@dataclass(frozen=True)
class BeyondPlan:
    """What an app pays beyond the planned arenas, per :attr:`loader`: the method and temp pools and the heap, from
    a sizing of these bytes (kept, or made for this answer; measured here, at the exported bound: pools do not scale
    with the bound; the heap, which kernels and delegates malloc by the shapes, measured at :attr:`heap_bound` where
    a budget search measured it there) or, where none can be made here (:attr:`unsized`), from the file (the method
    pool replayed from its tables with this host's ABI, kernel resolution's temp pool, and the loader's copy of the
    program). The budget search gives the planned arenas the budget less these."""

    method: str
    parts: tuple[BeyondPart, ...]
    loader: Loader = Loader.FILE
    #: when the kept sizing was measured (seconds since the epoch); None: measured for this answer, or the file's
    kept: float | None = None
    #: a sizing made for this answer is kept, and the next question reads it (False: ``cache=False``, --no-cache)
    keeping: bool = False
    #: why no sizing of these bytes could be made here (the figures are then the file's); None: one was made or kept
    unsized: str | None = None
    #: the bound the heap part was measured at (:class:`HeapSearch`); None: the sizing's, at the shapes the file
    #: declares (the exported bound), or the file's
    heap_bound: int | None = None

    @property
    def heap(self) -> BeyondPart:
        """The heap part (the last)."""
        return self.parts[-1]

    def with_heap(self, bound: int, nbytes: int) -> "BeyondPlan":
        """The same pools, with the heap peak measured at ``bound``."""
        return dataclasses.replace(self, parts=self.parts[:-1] + (BeyondPart(
            f"heap peak at bound {bound:,} (the loader's copy of the program, what kernels and delegates malloc at "
            f"that bound)", nbytes, Basis.MEASURED_HERE),), heap_bound=bound)

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.parts)

    @property
    def lower(self) -> bool:
        """Some part is a floor: the whole may need more (``pte-lab sizes`` measures it)."""
        return any(p.lower for p in self.parts)

    @property
    def measured(self) -> bool:
        """Its figures are a sizing's (kept, or made for this answer), not the file's."""
        return all(p.basis == Basis.MEASURED_HERE for p in self.parts)


def beyond_plan(pte, path: str, method: str, cache: bool | None = None, *, measure: bool = False,
                progress=None) -> BeyondPlan | None:
    """What the app needs beyond the planned arenas of ``method`` (:class:`BeyondPlan`): a kept sizing of these
    bytes where one is kept; else, with ``measure``, a sizing of every method made now, as ``pte-lab sizes FILE``
    makes it (seconds: said to ``progress``; kept, so that the next question, and ``pte-lab sizes``, read it), so
    that a budget's answer does not depend on whether ``pte-lab sizes`` ran first;
    else (or where the method cannot run here) what the file says, the heap as a floor. None where none gives the
    method pool (a delegate whose init the model does not know)."""
    for verify in (False, True):
        s = kept_sizes(path, verify=verify, cache=cache)
        m = s.methods.get(method) if s is not None else None
        if m is not None and m.file_heap_peak is not None:
            return _measured_beyond(method, m, s.kept)
    unsized = None
    if measure:
        if callable(progress):
            progress("no sizing of these bytes is kept: sizing every method now, as `pte-lab sizes FILE` does, for "
                     "the app's pools and heap" + (" (once: it is kept)" if kept.enabled(cache) else ""))
        try:  # what `pte-lab sizes FILE` measures and keeps, so that either asked first gives the other's figures
            s = sizes(path, cache=cache, progress=progress)
        except PteLabError as exc:
            s, unsized = None, str(exc).splitlines()[0]  # it cannot be sized here: the file's figures, as floors
        m = s.methods.get(method) if s is not None else None
        if m is not None and m.file_heap_peak is not None:
            return _measured_beyond(method, m, s.kept, keeping=s.kept is None and kept.enabled(cache))
        if s is not None:
            unsized = s.skipped.get(method, "the sizing gave no heap figure with FileDataLoader for it")
    mp = method_pool(pte, method, "host", external_data=False)
    if mp.bytes is None or pte.methods[method].raw.delegates:
        return None  # a delegate's own memory is not in the file: only a sizing says it
    size = os.path.getsize(path)
    return BeyondPlan(method, (
        BeyondPart("method pool", mp.bytes, Basis.MODELLED),
        BeyondPart("temp pool (kernel resolution)", max(mp.resolution_temp, mp.resolution_minimum), Basis.MODELLED,
                   lower=True),
        BeyondPart("heap: the loader's copy of the program (the file's size)", size, Basis.FILE, lower=True)),
        unsized=unsized)


#: what the heap part of a measured :class:`BeyondPlan` is
HEAP_AT_BOUND = "heap peak (the loader's copy of the program, what kernels and delegates malloc)"


def _measured_beyond(method: str, m, kept: float | None, keeping: bool = False) -> BeyondPlan:
    return BeyondPlan(method, (
        BeyondPart("method pool", m.method_allocator, Basis.MEASURED_HERE),
        BeyondPart("temp pool", m.temp_allocator, Basis.MEASURED_HERE),
        BeyondPart(HEAP_AT_BOUND, m.file_heap_peak, Basis.MEASURED_HERE)), kept=kept, keeping=keeping)


@dataclass(frozen=True)
class HeapSearch:
    """How a whole-app budget search counted the heap. Kernels and delegates malloc by the shapes (XNNPACK sizes
    its workspace by its graph's declared shapes, the export's bound), so an export at a smaller bound needs less
    heap: the search measured the heap peak at the bounds it tried (``pte_lab.runtime.sizing.heap_at``: one
    fresh worker each, the dynamic input at that bound), and counts, for each bound, the heap measured at the
    nearest bound at or above it (the heap grows with the bound). A bound is ruled out where its planned bytes
    with the heap measured at the nearest bound at or below it are over the budget."""

    #: (bound, heap peak) measured, in the order made; the first is the sizing's, at the exported bound
    measured: tuple[tuple[int, int], ...]
    #: the bound whose heap the answer counts: the answer itself where it was measured there
    basis: int
    #: True: every bound above the answer is ruled out; False: :attr:`upper` is the largest that is not (the
    #: search stopped: ``HEAP_MEASUREMENTS`` measurements, or one that failed, :attr:`stopped`)
    exact: bool
    upper: int | None = None
    #: why a measurement could not be made (the runtime's words); None: none failed
    stopped: str | None = None
    #: the tensors XNNPACK keeps in its workspace that the measuring runs declared at the least size (0: none)
    xnnpack_resized: int = 0
    #: two bounds measured, the smaller with more heap than the larger by over ``HEAP_NOISE`` (a kernel that
    #: mallocs at some shapes and not at others): the heap does not grow with the bound here, and a bound ruled
    #: out with the heap measured below it may fit; None: none seen
    falls: tuple[int, int] | None = None

    def at(self, bound: int) -> int | None:
        """The heap peak measured at ``bound`` (None: not measured there)."""
        return dict(self.measured).get(bound)


@dataclass(frozen=True)
class NeedOption:
    """One way to plan the longest input the app runs (``need``): some findings' changes (none: as exported,
    at that bound), planned by ``planner``; predicted bytes, and whether they fit the budget."""

    kinds: tuple[str, ...]
    planner: Planner
    planned: int
    fits: bool


@dataclass
class WhatIf:
    """A method as if exported at another bound (see the module), or, with :attr:`exports`, at another value
    of the parameter two static exports differ in (its one key is then that parameter's name)."""

    #: the program's path (None: opened from bytes)
    source: str | None
    #: the method predicted
    method: str
    #: the dynamic dims predicted, each ``(input, axis)`` (with :attr:`exports`: the parameter's name)
    keys: tuple
    #: the bound asked for each of :attr:`keys`, in order
    point: tuple[int, ...]
    #: the bound each of :attr:`keys` was exported with (the file's)
    exported: tuple[int, ...]
    #: every planned tensor at :attr:`point` beside its exported shape and bytes, with its offset in the
    #: predicted plan
    tensors: list[TensorAt]
    #: each arena at :attr:`point`: ExecuTorch's greedy, pte_lab's best fit, the lower bound, the file's size
    arenas: list[ArenaAt]
    #: the instruction where the most bytes are alive at once (-1: the inputs written)
    peak_instruction: int | None
    #: the values of the tensors alive at :attr:`peak_instruction`, largest first
    peak_values: tuple[int, ...]
    #: the bytes alive there, each storage group once (a view with its base)
    peak_bytes: int
    #: the shapes learnt from the sample runs (each planned tensor's dims as exact affine functions of the
    #: bounds), which the prediction applies
    fit: ShapeFit = field(repr=False)
    #: the backends the method's delegate calls use: their own memory (heap) is outside the plan
    backends: tuple[str, ...] = ()
    #: None: predicted from runs of one dynamic export (:func:`what_if`)
    exports: FromExports | None = None
    #: findings' changes made before replanning (None: the program as it is, at another bound)
    applied: Applied | None = None

    @property
    def planned(self) -> int:
        """Planned bytes (every arena, ExecuTorch's greedy): what a re-export at this bound plans."""
        return sum(a.planned for a in self.arenas)

    @property
    def best_fit(self) -> int | None:
        """Planned bytes with pte_lab's best fit (every arena): what ``pte-lab replan`` of that re-export
        plans; None where it was not asked for."""
        return None if any(a.best_fit is None for a in self.arenas) else sum(a.best_fit for a in self.arenas)

    @property
    def lower_bound(self) -> int:
        """The most bytes alive at once, summed over the arenas: no plan at this bound can be smaller."""
        return sum(a.lower_bound for a in self.arenas)

    @property
    def exported_planned(self) -> int:
        """Planned bytes in the file (every arena, at the exported bound)."""
        return sum(a.exported for a in self.arenas)

    @property
    def peak_tensors(self) -> list[TensorAt]:
        """The tensors alive at the peak (:attr:`peak_values`), largest first."""
        by = {t.value: t for t in self.tensors}
        return [by[v] for v in self.peak_values if v in by]

    def export_change(self) -> str:
        if self.exports is not None:
            return self.exports.export_change(self.point[0])
        return export_change(self.keys, self.point)

    def table(self):
        """One row per planned tensor: shapes and bytes at the bound asked and at the export's."""
        import pandas as pd

        return pd.DataFrame([t.__dict__ for t in self.tensors])

    def to_dict(self) -> dict:
        from ..views.what_if import what_if_dict

        return what_if_dict(self)

    def __str__(self) -> str:
        from ..views.what_if import what_if_text

        return what_if_text(self)

    def _repr_html_(self) -> str:
        from ..views.what_if import what_if_html

        return what_if_html(self)


@dataclass
class BoundUnderBudget:
    """The largest bound whose planned bytes fit a budget, what plans it, and the curve searched."""

    budget: int
    key: tuple[int, int]
    #: the answer (None: no bound fits)
    bound: int | None
    at: WhatIf | None
    #: planned bytes at the smallest bound (:attr:`smallest_bound`: 1, or the first that gives whole shapes)
    smallest: int
    exported: int
    #: planned bytes one past the answer (None: the answer is the exported bound)
    next_planned: int | None = None
    smallest_bound: int = 1
    #: True: no dim was given and the method has exactly one dynamic dim, this one
    dim_chosen: bool = False
    _pred: "Predictor | None" = field(default=None, repr=False)
    #: the longest input the app runs (None: not given); where :attr:`bound` is below it, an export at
    #: :attr:`bound` refuses the longer inputs, and :attr:`options` say what plans it instead
    need: int | None = None
    #: the budget as given, where it was a size written out (``"300MB"``); None: given in bytes
    asked: str | None = None
    #: at :attr:`need`: the program as exported and with each finding's change (and all of them), each planned by
    #: ExecuTorch's greedy and replanned by pte_lab's best fit; empty where the bound covers the need
    options: tuple[NeedOption, ...] = ()
    #: the findings whose changes the options make (each with a :class:`~pte_lab.model.plan_edit.PlanEdit`)
    findings: tuple[Finding, ...] = ()
    #: what the app needs beyond the planned arenas at the answer, taken off the budget (None: the budget is the
    #: planned arenas' alone)
    beyond: BeyondPlan | None = None
    #: how the heap was measured at the bounds tried (None: no heap measured: the budget is the planned arenas'
    #: alone, or what the app needs beside them is the file's, the method not running here)
    heap: HeapSearch | None = None
    #: one past the answer: (the bound the heap counted there was measured at, that heap peak): the heap it needs
    #: at least (None: no heap search, or the answer is the exported bound)
    next_heap: tuple[int, int] | None = None
    #: what the app needs beyond the planned arenas at :attr:`need` (the heap measured there), which
    #: :attr:`options` are set against; None: as :attr:`beyond`
    need_beyond: BeyondPlan | None = None

    @property
    def plan_budget(self) -> int:
        """The planned arenas' share of the budget at the answer: the budget less :attr:`beyond`."""
        return self.budget - (self.beyond.total if self.beyond is not None else 0)

    @property
    def need_share(self) -> int:
        """The planned arenas' share of the budget at :attr:`need`: the budget less what the app needs beyond
        them there."""
        y = self.need_beyond if self.need_beyond is not None else self.beyond
        return self.budget - (y.total if y is not None else 0)

    @property
    def next_total(self) -> int | None:
        """One past the answer, the least the app needs with the heap of :attr:`next_heap` (None: not known)."""
        if self.next_planned is None or self.next_heap is None or self.beyond is None:
            return None
        return self.next_planned + self.beyond.total - self.beyond.heap.bytes + self.next_heap[1]

    @property
    def covers_need(self) -> bool | None:
        """Whether the answer runs the longest input given (None: no need given)."""
        return None if self.need is None else self.bound is not None and self.bound >= self.need

    @property
    def fitting(self) -> tuple[NeedOption, ...]:
        """The options that bring the plan at :attr:`need` under the budget, fewest changes first, then the
        smallest."""
        return tuple(sorted((o for o in self.options if o.fits),
                            key=lambda o: (len(o.kinds), o.planner != Planner.GREEDY, o.planned)))

    @functools.cached_property
    def curve(self) -> list[tuple[int, int, int]]:
        """(bound, planned bytes with ExecuTorch's greedy, lower bound) at about :data:`CURVE_POINTS` bounds,
        the answer among them (worked out when first asked: the search itself needs none of it)."""
        pred, top = self._pred, self.exported
        lo = next(n for n in range(1, top + 1) if _fits(pred, n))
        step = max(1, top // CURVE_POINTS)
        xs = sorted({x for x in range(lo, top + 1, step) if _fits(pred, x)} | {top, self.bound})
        out = []
        for x in xs:
            probs = pred.problems_for(pred.nbytes_at((x,)))
            out.append((x, sum(Predictor.size(p)[1] for p in probs), sum(p.lower_bound for p in probs)))
        return out

    def plot(self, ax=None, **kwargs):
        from ..plot import what_if_curve

        return what_if_curve(self, ax=ax, **kwargs)

    def to_dict(self) -> dict:
        from ..views.what_if import budget_dict

        return budget_dict(self)

    def __str__(self) -> str:
        from ..views.what_if import budget_text

        return budget_text(self)


@dataclass
class UsageAt:
    """One call at ``point``: the bytes each planned tensor uses, a plan for that shape, the plan at the bound."""

    method: str
    keys: tuple
    point: tuple[int, ...]
    #: (value, role, shape run at, bytes used, bytes planned at the bound)
    tensors: list[tuple[int, str, tuple[int, ...], int, int]]
    #: the sum of the planned tensors' bytes at this shape, each storage once (a view with its base; not all
    #: alive at once, so more than any plan needs), a plan made for this shape
    #: (ExecuTorch's greedy), its lower bound,
    #: and the plan at the bound (allocated whole, whatever the shape)
    used: int
    plan_for_shape: int
    lower_bound: int
    planned_at_bound: int

    @property
    def gap(self) -> int:
        """Bytes the bound's plan holds beyond a plan for this shape."""
        return self.planned_at_bound - self.plan_for_shape

    def to_dict(self) -> dict:
        from ..views.what_if import usage_dict

        return usage_dict(self)

    def __str__(self) -> str:
        from ..views.what_if import usage_text

        return usage_text(self)


class Predictor:
    """A method's arenas replanned for new tensor sizes: the file's groups and lifetimes, new bytes."""

    def __init__(self, method, fit: ShapeFit | None = None, edit: PlanEdit | None = None,
                 findings: tuple[Finding, ...] = ()):
        self.method, self.fit, self.edit, self.findings = method, fit, edit, tuple(findings)
        values = fit.values if fit is not None else tuple(t.value for t in method.planned)
        self.row = {v: i for i, v in enumerate(values)}
        #: planned bytes (ExecuTorch's greedy) per point asked: a budget search asks a point more than once
        self._planned_at: dict[tuple[int, ...], int] = {}
        self.problems = [build_problem(method, a.mem_id) for a in method.arenas]
        #: the values the edit takes out of the plan (those it removes, and views of them)
        self.dropped: frozenset[int] = frozenset()
        if edit is not None:
            self.problems, self.dropped = _edited(method, self.problems, edit)
        self._members = []
        for p in self.problems:
            gid = np.array([g.id for g in p.groups for _ in g.members], np.int64)
            rows = np.array([self.row[v] for g in p.groups for v, _, _ in g.members], np.int64)
            rel = np.array([r for g in p.groups for _, r, _ in g.members], np.int64)
            idle = np.array([self.row[v] for v, _ in p.idle], np.int64)
            self._members.append((gid, rows, rel, idle))

    def problems_for(self, nbytes: np.ndarray) -> list[Problem]:
        """Each arena's problem with the tensors at ``nbytes`` (in the fit's value order)."""
        out = []
        for p, (gid, rows, rel, _idle) in zip(self.problems, self._members):
            ext = np.zeros(len(p.groups), np.int64)
            if len(gid):
                np.maximum.at(ext, gid, rel + nbytes[rows])
            a = p.alignment
            size = np.maximum(a, align_up(ext, a))
            ext_l, size_l, nb = ext.tolist(), size.tolist(), nbytes.tolist()
            groups = [Group(g.id, [(v, r, nb[self.row[v]]) for v, r, _ in g.members], size_l[k], g.first, g.last,
                            g.original_offset, ext_l[k]) for k, g in enumerate(p.groups)]
            out.append(Problem(p.method, p.mem_id, p.device, a, groups, p.original_size, p.padding,
                               p.n_instructions, [(v, nb[self.row[v]]) for v, _ in p.idle]))
        return out

    def with_edit(self, edit: PlanEdit | None, findings: tuple[Finding, ...] = ()) -> "Predictor":
        """The same method and fit, with ``edit`` made (None: as the file plans)."""
        return Predictor(self.method, self.fit, edit, findings)

    @staticmethod
    def size(problem: Problem, algorithm: str = "greedy") -> tuple[dict[int, int], int]:
        """(offsets, arena size) of ``problem`` with ``algorithm`` (:func:`~.algorithms.plan_arena`)."""
        return plan_arena(problem, algorithm)

    def planned(self, nbytes: np.ndarray) -> int:
        """Planned bytes (ExecuTorch's greedy, every arena) for tensors of ``nbytes``."""
        return sum(self.size(p)[1] for p in self.problems_for(nbytes))

    def planned_at(self, point) -> int:
        """:meth:`planned` at ``point`` (the fit's bytes there), worked out once per point."""
        point = tuple(int(n) for n in point)
        got = self._planned_at.get(point)
        if got is None:
            got = self._planned_at[point] = self.planned(self.nbytes_at(point))
        return got

    def lower_bound(self, nbytes: np.ndarray) -> int:
        return sum(p.lower_bound for p in self.problems_for(nbytes))

    def nbytes_at(self, point) -> np.ndarray:
        if self.fit is None:
            raise WhatIfError("this predictor has no shape fit: give the tensors' bytes")
        return self.fit.nbytes_at(point)

    def predict(self, point, source: str | None = None, best_fit: bool = True) -> WhatIf:
        """The method as if exported at ``point`` (one bound per fitted dim); ``best_fit=False`` leaves out
        pte_lab's best fit (the slowest part: four orders tried), leaving ExecuTorch's plan and the bound."""
        point = tuple(int(n) for n in point)
        shapes = self.fit.shapes_at(point)
        nbytes = self.fit.bytes_of(shapes, point)
        problems = self.problems_for(nbytes)
        arenas, offsets = [], {}
        for p, a in zip(problems, self.method.arenas):
            offs, greedy_size = self.size(p, "greedy")
            offsets.update(offs)
            arenas.append(ArenaAt(p.mem_id, p.device, greedy_size,
                                  self.size(p, "best_fit")[1] if best_fit else None, p.lower_bound, a.size))
        self._planned_at.setdefault(point, sum(a.planned for a in arenas))
        nb, dims, row = nbytes.tolist(), shapes.tolist(), self.row
        tensors = []
        for t in self.method.planned:
            if t.value in self.dropped:
                continue
            i = row[t.value]
            tensors.append(TensorAt(t.value, t.role, t.op, t.name, t.dtype, t.mem_id,
                                    tuple(dims[i][:len(self.fit.dims[i])]), nb[i], t.shape, t.nbytes,
                                    offsets.get(t.value, t.offset)))
        ins, peak, peak_bytes = _peak(problems, self.method.n_instructions)
        applied = None
        if self.edit is not None:
            applied = Applied(self.findings, tuple((v, nb[row[v]]) for v in self.edit.removed),
                              self.plain.planned_at(point))
        return WhatIf(source, self.method.name, self.fit.keys, point, self.fit.exported, tensors, arenas, ins,
                      tuple(sorted(peak, key=lambda v: -nb[self.row[v]])), peak_bytes, self.fit,
                      tuple(dict.fromkeys(d.backend for d in self.method.delegates)), applied=applied)

    @functools.cached_property
    def plain(self) -> "Predictor":
        """This predictor without its edit (itself where it has none)."""
        return self if self.edit is None else Predictor(self.method, self.fit)


def _edited(method, problems: list[Problem], edit: PlanEdit) -> tuple[list[Problem], frozenset[int]]:
    """``problems`` with ``edit`` made: each storage group of removed values (and views of them) gone, and the
    group of a value read in place of a removed one alive until the removed one's last use. Raises
    :class:`WhatIfError` for a removed value that shares its bytes with one kept (not a view of it)."""
    roles = {t.value: t.role for t in method.planned}
    gone, instead = set(edit.removed), dict(edit.read_instead)
    until: dict[int, int] = {}
    dropped: set[int] = set()
    kept_groups: list[list[Group]] = []
    for p in problems:
        keep = []
        for g in p.groups:
            values = [v for v, _, _ in g.members]
            hit = [v for v in values if v in gone]
            if not hit:
                keep.append(g)
                continue
            others = [v for v in values if v not in gone and roles.get(v) != "view"]
            if others:
                raise WhatIfError(f"{method.name}: the change removes v{hit[0]}, which shares its bytes with "
                                  f"v{others[0]} (an alias the change keeps): pte_lab cannot plan one without "
                                  f"the other")
            dropped.update(values)
            for v in hit:
                if v in instead:
                    until[instead[v]] = max(until.get(instead[v], -1), g.last)
        kept_groups.append(keep)
    out = []
    for p, keep in zip(problems, kept_groups):
        groups = []
        for k, g in enumerate(keep):
            last = max([g.last] + [until[v] for v, _, _ in g.members if v in until])
            groups.append(Group(k, g.members, g.size, g.first, last, g.original_offset, g.extent))
        out.append(Problem(p.method, p.mem_id, p.device, p.alignment, groups, p.original_size, p.padding,
                           p.n_instructions, [(v, n) for v, n in p.idle if v not in gone]))
    dropped.update(v for p in problems for v, _ in p.idle if v in gone)
    missing = set(until) - {v for p in out for g in p.groups for v, _, _ in g.members}
    if missing:
        raise WhatIfError(f"{method.name}: the change reads v{min(missing)} in place of a removed value, but "
                          f"v{min(missing)} is not planned")
    return out, frozenset(dropped)


def _peak(problems: list[Problem], n: int) -> tuple[int | None, list[int], int]:
    """(the instruction where the most group bytes are alive over all arenas, the values alive there, those
    bytes: each storage group once, a view with its base)."""
    groups = [g for p in problems for g in p.groups]
    if not groups:
        return None, [], 0
    diff = np.zeros(n + 3, np.int64)
    first = np.array([g.first for g in groups], np.int64)
    last = np.array([g.last for g in groups], np.int64)
    ext = np.array([g.extent for g in groups], np.int64)
    np.add.at(diff, first + 1, ext)
    np.add.at(diff, last + 2, -ext)
    at = int(np.argmax(np.cumsum(diff))) - 1
    alive = np.flatnonzero((first <= at) & (last >= at))
    return at, [v for k in alive.tolist() for v, _, _ in groups[k].members], int(ext[alive].sum())


# ----------------------------------------------------------------- sampling (runs the method)
_FITS: dict = {}


def program_and_path(source) -> tuple[Pte, str]:
    """The program and its path (what-if runs it): ``WhatIfError`` for a program that has no path."""
    pte = source if isinstance(source, Pte) else open_pte(source)
    path = pte.path if isinstance(source, Pte) else (os.fspath(source) if isinstance(source, (str, os.PathLike))
                                                       else None)
    if path is None:
        raise WhatIfError("what-if runs the method: give the program as a path (or a Pte opened from one)")
    return pte, os.fspath(path)


def what_if_method(pte: Pte, method: str | None):
    """The method what-if runs: the one named, else the program's one method with a dynamic input
    (``WhatIfError`` where there is none, several, or no method of that name)."""
    if method is not None:
        if method not in pte.methods:
            raise WhatIfError(f"no method {method!r} (methods: {', '.join(pte.methods)})")
        return pte.methods[method]
    dyn = [m for m in pte.methods.values() if dynamic_inputs(m)]
    if len(dyn) == 1:
        return dyn[0]
    if not dyn:
        names = ", ".join(pte.methods)
        raise WhatIfError(f"no method of this program has a dynamic input ({names}): every tensor is planned at "
                          f"its one shape, so another bound changes nothing; {TWO_EXPORTS}")
    raise WhatIfError(f"methods {', '.join(m.name for m in dyn)} have dynamic inputs: name one (method=...)")


def _debug_buffer(method, keys, point) -> int:
    """Bytes ETDump's debug buffer needs for one run at ``point``: every logged value, a dynamic one scaled by
    the largest ratio of ``point`` to the exported bounds (four times it, at most its bytes at the bound), exact."""
    scale = max(Fraction(n, method.inputs[p].shape[a]) for (p, a), n in zip(keys, point))
    total = 1 << 20
    for _, values in logged_values(method):
        for v in values:
            t = method.raw.values[v].tensor
            if t is None:
                total += 64
                continue
            n = shape_bytes([max(0, d) for d in t.sizes], scalar_type(t.scalar_type, "")[1])
            total += 64 + (int(n * min(1, 4 * scale)) if t.shape_dynamism != TensorShapeDynamism.STATIC else n)
    return total


def _shapes_at(method, keys, point) -> dict[int, tuple[int, ...]]:
    """Input position -> its shape at ``point``: the declared shape, each dim of ``keys`` at its size there."""
    shapes = {}
    for (pos, axis), n in zip(keys, point):
        shape = list(shapes.get(pos, method.inputs[pos].shape))
        shape[axis] = n
        shapes[pos] = tuple(shape)
    return shapes


def _run_shapes(path: str, method, keys, points, data_path=None, max_input_bytes=None, progress=None
                ) -> list[tuple[tuple[int, ...], dict]]:
    why = cannot_run_here(method)  # known from the file and this install: said before any worker starts
    if why is not None:
        raise WhatIfError(f"{method.name} cannot run here, and what-if learns its shapes by running it: {why}. "
                          "The plan at the file's bound is pte-lab inspect's")
    # ExecuTorch's Module allocates the method's planned arenas whole, at the file's bound, when it loads: a
    # real program's own cost, checked against the memory free here (not the inputs' limit) before a worker
    check_build([(f"planned arena {k}", n) for k, n in enumerate(method.raw.buffer_sizes[1:], 1)],
                method=method.name, limit=INT64_MAX,
                doing="ExecuTorch's Module (it allocates the method's planned arenas whole as it loads it)")
    # each run's inputs, built at its point (never at the bound), and its debug buffer: checked before a worker
    # starts (the file declares both)
    for point in points:
        check_build(input_parts(method, _shapes_at(method, keys, point))
                    + [("ETDump's debug buffer", _debug_buffer(method, keys, point))],
                    method=method.name, doing=f"a run at {point_text(keys, point)}",
                    limit=max_input_bytes)
    # the Int values, read here with pte_lab's own reader: a static axis is refused before a worker starts
    scalars = program_scalars(path, method.name)
    check_axes(method, keys, read_axes(method, scalars[0]))
    report = reporter(progress, total=len(points), desc="what-if")
    report.step("starting an isolated worker")
    with telling(report.step):
        native.library_path()  # built here, said as it starts (the first time), not silently inside the worker
        # the native engine: ExecuTorch's libraries loaded directly and pte_lab's own shape recorder, never its
        # Python package
        engine = Worker(count=False, native=True, known=registry())
    try:
        engine.call("provide_operators", method.operators)
        runs = []
        for k, point in enumerate(points, 1):
            report.step(f"method {method.name!r}: a run at {point_text(keys, point)} ({k}/{len(points)})")
            # plain data built with numpy, not torch tensors: the native recorder takes bytes, and torch's import
            # (about 1 s of CPU) would be most of a small program's answer
            inputs = plain_example_inputs(method, shapes=_shapes_at(method, keys, point), limit=max_input_bytes)
            try:
                logged = engine.call("record_shapes", path, method.name, inputs,
                                     _debug_buffer(method, keys, point), data_path)
            except RemoteError as exc:
                raise WhatIfError(f"{method.name} did not run at {point}: {exc.message.splitlines()[0]}") from None
            runs.append((tuple(point), value_shapes(method, logged, point, keys, scalars)))
            report.advance()
        return runs
    finally:
        engine.close()
        report.close()


def learn(source, keys, method: str | None = None, data_path=None, max_input_bytes=None,
          cache: bool | None = None, progress=None) -> ShapeFit:
    """Every planned tensor's dims as exact affine functions of the dynamic dims ``keys`` (runs the method at
    :func:`~pte_lab.model.shape_fit.sample_points`, its inputs built at each, never at the bound). Kept: per file,
    method and keys in this process, and on disk by the file's bytes, pte_lab, ExecuTorch and the keys
    (:mod:`pte_lab.runtime.kept`; the fit's ``kept`` says when its runs were made); ``cache=False`` runs them
    again. ``max_input_bytes``: the most a run may build (``pte_lab.runtime.inputs.input_limit``)."""
    pte, path = program_and_path(source)
    m = what_if_method(pte, method)
    keys, _, exported = check_bounds(m, {k: 1 for k in keys})
    st = os.stat(path)
    cache_key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, m.name, keys)
    fit = _FITS.get(cache_key) if kept.enabled(cache) else None
    if fit is None:
        def runs():
            # what takes seconds the first time (the install's registry probed, a native part built) is said as it
            # starts, where progress is a callable (a bar is made once the runs start)
            with telling(progress):
                return fit_shapes(m, keys, exported, _run_shapes(path, m, keys, sample_points(keys, exported),
                                                                 data_path, max_input_bytes=max_input_bytes,
                                                                 progress=progress))

        if data_path is not None:
            check_regular(data_path, "a data file (.ptd)")
        fit = _FITS[cache_key] = kept.kept_or("what-if", [path, data_path], {"method": m.name, "keys": keys},
                                             runs, cache)
    return fit


def changes(method) -> tuple[Finding, ...]:
    """The method's findings whose change is expressible as planned tensors removed (each carries a
    :class:`~pte_lab.model.plan_edit.PlanEdit`): what ``apply=`` and ``--apply`` take, by kind."""
    return tuple(f for f in method.findings() if f.edit is not None)


def _merged(findings) -> PlanEdit | None:
    if not findings:
        return None
    return PlanEdit(tuple(v for f in findings for v in f.edit.removed),
                    tuple(p for f in findings for p in f.edit.read_instead),
                    "; ".join(f.edit.change for f in findings))


def _applied(method, apply) -> tuple[PlanEdit | None, tuple[Finding, ...]]:
    """``apply`` (a finding's kind, or several) -> the merged edit and the findings that carry it. Raises
    :class:`WhatIfError` naming the kinds that carry a change where one asked for carries none."""
    if apply is None:
        return None, ()
    kinds = [apply] if isinstance(apply, str) else list(apply)
    have = {str(f.kind): f for f in changes(method)}
    picked = []
    for k in dict.fromkeys(str(k) for k in kinds):
        if k not in have:
            listed = ", ".join(sorted(have)) or "none"
            raise WhatIfError(f"method {method.name!r} has no {k} finding whose change pte_lab can make on the "
                              f"file's tensors (the findings that carry one here: {listed}; a smaller bound is "
                              f"--bound itself)")
        picked.append(have[k])
    return _merged(picked), tuple(picked)


@arguments(source=PROGRAM, bounds=DIM_SIZES, method=optional(NAME), data_path=optional(PATH), cache=optional(BOOL),
           progress=PROGRESS)
def what_if(source, bounds: dict, method: str | None = None, data_path=None, max_input_bytes=None,
            cache: bool | None = None, progress=None, apply=None) -> WhatIf:
    """The method as if exported with ``bounds`` ({(input, axis): N}): every planned tensor's shape and bytes,
    each arena as ExecuTorch's greedy plans it (and pte_lab's best fit, the lower bound), the peak.

    The method runs at a few small sizes (``learn``), its inputs built at each and checked first against
    ``max_input_bytes`` (``pte_lab.runtime.inputs.input_limit``: 1 GiB unless raised) and the memory free.
    The shapes learnt are kept (``cache``: see ``learn``); ``progress`` tells each run as it starts.

    Parameters
    ----------
    source : str or os.PathLike or pte_lab.Pte
        The program on disk (a path, or an opened :class:`~pte_lab.model.Pte`).
    bounds : dict
        ``{(input, axis): N}``: the bound of each dynamic dim to plan for (at most the exported one).
    method : str, optional
        The method (default: the program's one method with dynamic inputs).
    data_path : str or os.PathLike, optional
        The program's external ``.ptd``, when it has one.
    max_input_bytes : int or str, optional
        The most bytes built for one run's inputs (default 1 GiB, or ``$PTE_LAB_MAX_INPUT_BYTES``).
    cache : bool, optional
        ``False`` learns afresh and keeps nothing; default: use and keep the shapes learnt.
    progress : bool or collections.abc.Callable, optional
        None (silent), True (a bar) or a callable taking one line per step (:mod:`pte_lab.progress`).
    apply : str or list of str, optional
        A finding's kind (``"attention_scores"``), or several: their changes made before replanning (the
        tensors each removes, ``changes(method)``), a prediction of the program with the model edited.

    Returns
    -------
    WhatIf
        The prediction: each tensor's shape and bytes, each arena's plans, the peak (``applied``: the changes
        made, the tensors they remove, the plan without them).

    Raises
    ------
    pte_lab.model.shape_fit.WhatIfError
        (One line) for a bound above the exported one, a method without dynamic inputs, or a tensor whose dims
        are not affine (named).
    pte_lab.errors.DeclaredSizeError
        For a run whose inputs would be over the limit (their bytes in the message).
    """
    pte, path = program_and_path(source)
    m = what_if_method(pte, method)
    keys, point, _ = check_bounds(m, bounds)
    edit, findings = _applied(m, apply)
    fit = learn(pte if isinstance(source, Pte) else path, keys, m.name, data_path, max_input_bytes, cache, progress)
    return Predictor(m, fit, edit, findings).predict(point, path)


def _lower_bound_at(pred: Predictor, n: int) -> int:
    """The lower bound (bytes alive at once) at bound ``n``, each dim rounded up to a whole size where the fit
    gives a fraction there: a lower bound on what ExecuTorch's greedy plans at ``n``, and non-decreasing in
    ``n`` where every dim is."""
    return pred.lower_bound(pred.fit.nbytes_at((n,), round_up=True))


def _search(pred: Predictor, budget: int, lo: int, hi: int) -> int | None:
    """The largest N in [lo, hi] whose plan (ExecuTorch's greedy) fits ``budget``, exactly, though the plan is not
    monotonic in N (a larger bound can plan fewer bytes: the greedy's placement changes). The lower bound is
    monotonic (every dim non-decreasing in N) and no plan is below it, so a bisection on it finds the largest N
    that can fit; from there N goes down one by one until the greedy plan fits (a dim that shrinks as N grows:
    from ``hi``)."""
    start = hi
    if (pred.fit._arrays()[1] >= 0).all():
        if _lower_bound_at(pred, lo) > budget:
            return None
        if _lower_bound_at(pred, hi) > budget:
            ok, bad = lo, hi
            while bad - ok > 1:
                mid = (ok + bad) // 2
                ok, bad = (mid, bad) if _lower_bound_at(pred, mid) <= budget else (ok, mid)
            start = ok
    return next((n for n in range(start, lo - 1, -1) if _fits(pred, n) and pred.planned_at((n,)) <= budget), None)


def _fits(pred: Predictor, n: int) -> bool:
    try:
        pred.nbytes_at((n,))
        return True
    except WhatIfError:
        return False


def dynamic_dims(source, method: str | None = None) -> tuple[tuple[int, int], ...]:
    """The (input, axis) pairs the method reads as sizes: its dynamic dims (reads the program's Int values with
    pte_lab's own reader; nothing runs)."""
    pte, path = program_and_path(source)
    m = what_if_method(pte, method)
    ints, _ = pte.raw.plan_scalars(m.index)
    axes = read_axes(m, ints)
    return tuple((p, a) for p in sorted(axes) for a in sorted(axes[p]))


@arguments(source=PROGRAM, budget=SIZE, dim=optional(DIM), method=optional(NAME),
           data_path=optional(PATH), cache=optional(BOOL), progress=PROGRESS, need=optional(AT_LEAST_ONE))
def largest_bound(source, budget, dim: tuple[int, int] | None = None, method: str | None = None, data_path=None,
                  fit: ShapeFit | None = None, max_input_bytes=None, cache: bool | None = None,
                  progress=None, need: int | None = None, apply=None, whole: bool = False) -> BoundUnderBudget:
    """The largest bound of dynamic dim ``dim`` whose planned bytes (ExecuTorch's greedy) fit ``budget``: the
    method at that bound, and the curve of planned bytes against the bound.

    Parameters
    ----------
    source : str or os.PathLike or pte_lab.Pte
        The program on disk (a path, or an opened :class:`~pte_lab.model.Pte`).
    budget : int or str
        Bytes, or a size (``"300MiB"``; decimal ``"300MB"``).
    dim : tuple of int, optional
        ``(input, axis)``; None: the method's one dynamic dim.
    method : str, optional
        The method (default: the program's one method with dynamic inputs).
    data_path : str or os.PathLike, optional
        The program's external ``.ptd``, when it has one.
    max_input_bytes : int or str, optional
        The most bytes built for one run's inputs (default 1 GiB, or ``$PTE_LAB_MAX_INPUT_BYTES``).
    fit : pte_lab.model.shape_fit.ShapeFit, optional
        Shapes already learnt (a :class:`WhatIf`'s ``fit``): no run again.
    cache : bool, optional
        As for :func:`what_if`.
    progress : bool or collections.abc.Callable, optional
        None (silent), True (a bar) or a callable taking one line per step (:mod:`pte_lab.progress`).
    need : int, optional
        The longest input the app runs (at most the exported bound). Where the answer is below it, an export at
        the answer refuses those inputs: ``options`` then say what plans ``need`` instead (each finding's
        change, ``changes(method)``, and pte_lab's replan), with the predicted bytes and whether they fit.
    apply : str or list of str, optional
        As for :func:`what_if`: the search is made with those changes made.
    whole : bool, default False
        The budget is the app's whole memory: the planned arenas get it less what the app needs beyond them
        (``beyond_plan``: the method and temp pools and the heap with Module's default FileDataLoader, from
        a kept sizing of these bytes, else from one made now: the first ask sizes every method as
        ``pte_lab.sizes`` does, and keeps it; from the file where the program cannot be sized here); ``beyond``
        says which. False: the planned arenas' alone.

    Returns
    -------
    BoundUnderBudget
        The bound, the method at that bound, and the curve (with ``need``: ``covers_need``, ``options``).

    Raises
    ------
    pte_lab.model.shape_fit.WhatIfError
        For a budget below what any bound plans (with the smallest total), no ``dim`` where the method has
        several dynamic dims (listed), and where :func:`what_if` does (``max_input_bytes`` as there).
    pte_lab.errors.DeclaredSizeError
        As :func:`what_if`.
    """
    given, budget = budget, parse_budget(budget)
    pte, path = program_and_path(source)
    m = what_if_method(pte, method)
    chosen = dim is None
    if chosen:
        dims = dynamic_dims(pte if isinstance(source, Pte) else path, m.name)
        if not dims:
            raise WhatIfError(f"method {m.name!r} reads no axis of its dynamic inputs "
                              f"({', '.join(f'{s.position} {short_shape(s.shape)}' for s in dynamic_inputs(m))}) "
                              f"as a size, so which one is dynamic is not in the file: name it (dim=(input, axis); "
                              f"--bound INPUT:AXIS)")
        if len(dims) > 1:
            raise WhatIfError(f"method {m.name!r} has {len(dims)} dynamic dims "
                              f"({', '.join(f'{p}:{a}' for p, a in dims)}): name the one to search "
                              f"(dim=(input, axis); --bound INPUT:AXIS)")
        dim = dims[0]
    keys, _, exported = check_bounds(m, {tuple(dim): 1})
    if need is not None:
        check_bounds(m, {tuple(dim): need})  # a need above the exported bound: refused before any run
    edit, findings = _applied(m, apply)
    if fit is None:
        fit = learn(pte if isinstance(source, Pte) else path, keys, m.name, data_path, max_input_bytes, cache, progress)
    beyond = beyond_plan(pte, path, m.name, cache, measure=True, progress=progress) if whole else None
    pred = Predictor(m, fit, edit, findings)
    if beyond is not None and beyond.measured:
        b = _whole_budget(pred, budget, path, need, beyond, data_path, max_input_bytes, cache, progress)
    else:
        b = search_budget(pred, budget, path, need=need, beyond=beyond)
    b.dim_chosen = chosen
    b.asked = given.strip() if isinstance(given, str) else None
    return b


def _smallest_bound(pred: Predictor) -> int:
    """The first bound that gives whole shapes (``WhatIfError`` where none does)."""
    key, top = pred.fit.keys[0], pred.fit.exported[0]
    lo = next((n for n in range(1, top + 1) if _fits(pred, n)), None)
    if lo is None:
        raise WhatIfError(f"{pred.method.name}: no bound of input {key[0]} axis {key[1]} gives whole shapes")
    return lo


def _whole_budget(pred: Predictor, budget: int, path: str, need: int | None, beyond: BeyondPlan, data_path,
                  max_input_bytes, cache, progress) -> BoundUnderBudget:
    """The largest bound whose planned arenas fit beside the pools and the heap measured at that bound
    (:func:`_heap_search`; the heap at ``need`` too, where the answer is below it)."""
    method, key = pred.method, pred.fit.keys[0]
    report = reporter(progress, desc="what-if")

    def measure(bound: int) -> tuple[int, int]:
        got = heap_at(path, method.name, _shapes_at(method, (key,), (bound,)), data_path=data_path,
                      max_input_bytes=max_input_bytes, cache=cache, progress=progress,
                      announce=lambda: report.step(f"the heap at bound {bound:,}: the method run with "
                                                   f"{point_text((key,), (bound,))} in a fresh worker, as the "
                                                   f"sizing measures its heap"))
        if got.file_heap_peak is None:
            raise PteLabError("the allocation counter is not preloaded in the sizing worker")
        return got.file_heap_peak, got.xnnpack_resized

    try:
        heap = _heap_search(pred, budget, beyond, measure)
        heaps = dict(heap.measured)
        at = beyond if heap.basis == pred.fit.exported[0] else beyond.with_heap(heap.basis, heaps[heap.basis])
        need_beyond = None
        fits = _answer(pred, budget, beyond, heaps, _smallest_bound(pred), pred.fit.exported[0])[0]
        if need is not None and fits is not None and fits < need:
            # the heap at the need, for what plans it (need_beyond) only: the answer is the search's, from the
            # heaps it measured (a heap measured higher up may be smaller, where a kernel mallocs at some shapes
            # and not at others: counted for the bounds below it, it would let one through unmeasured)
            if need not in heaps:
                try:
                    heaps[need] = measure(need)[0]
                except PteLabError:
                    pass  # the heap at the nearest bound measured above it: no smaller
            above = min(m for m in heaps if m >= need)
            need_beyond = beyond.with_heap(above, heaps[above]) if above != pred.fit.exported[0] else beyond
    finally:
        report.close()
    return search_budget(pred, budget, path, need=need, beyond=at, heap=heap, need_beyond=need_beyond)


def search_budget(pred: Predictor, budget: int, source: str | None = None, need: int | None = None,
                  beyond: BeyondPlan | None = None, heap: HeapSearch | None = None,
                  need_beyond: BeyondPlan | None = None) -> BoundUnderBudget:
    """:func:`largest_bound` once the samples are taken (``pred``: a :class:`Predictor` over a one-dim fit):
    the largest bound that fits, whatever dips the plan takes (:func:`_search`; the curve is drawn when asked).
    Pure: no run. With ``heap`` (a whole-app search's, :func:`_heap_search`), the answer is its: ``beyond`` is
    what the app needs beside the plan there, ``need_beyond`` at ``need``. Raises :class:`WhatIfError` for a budget
    below what any bound plans."""
    key, top = pred.fit.keys[0], pred.fit.exported[0]
    lo = _smallest_bound(pred)
    smallest = pred.planned_at((lo,))
    share = budget - (beyond.total if beyond is not None else 0)
    if heap is not None:
        n: int | None = _answer(pred, budget, beyond, dict(heap.measured), lo, top)[0]
    else:
        n = _search(pred, share, lo, top) if share > 0 else None
    if n is None:
        outside = "" if beyond is None else (f" with the {exact_bytes(beyond.total)} the app needs beyond the plan "
                                             f"({', '.join(p.what for p in beyond.parts)}"
                                             + (f", the heap measured at bound {beyond.heap_bound:,}"
                                                if beyond.heap_bound is not None else "") + ")")
        failed = "" if heap is None or heap.stopped is None else \
            f"; the heap could not be measured at a smaller bound: {heap.stopped}"
        raise WhatIfError(f"budget {exact_bytes(budget)} is below what any bound plans{outside}: the smallest, at "
                          f"bound {lo}, plans {exact_bytes(smallest)}{failed}")
    after = pred.planned_at((n + 1,)) if n < top and _fits(pred, n + 1) else None
    next_heap = None
    if heap is not None and after is not None:
        below = max(m for m, _ in heap.measured if m <= n + 1) if any(m <= n + 1 for m, _ in heap.measured) else None
        next_heap = None if below is None else (below, dict(heap.measured)[below])
    b = BoundUnderBudget(budget, key, n, pred.predict((n,), source), smallest, top, after, smallest_bound=lo,
                         _pred=pred, need=need, beyond=beyond, heap=heap, next_heap=next_heap,
                         need_beyond=need_beyond)
    if need is not None and n < need:
        b.findings = changes(pred.method)
        b.options = _need_options(pred, b.need_share, need, b.findings)
    return b


def _answer(pred: Predictor, budget: int, beyond: BeyondPlan, heaps: dict[int, int], lo: int, top: int
            ) -> tuple[int | None, int | None]:
    """(the largest bound that fits ``budget`` with the heap measured at the nearest bound at or above it, the
    largest bound not ruled out with the heap measured at the nearest bound at or below it: (0 below the least
    measured)), from the heap peaks measured so far (``heaps``: bound -> bytes; the exported bound's among them).
    The heap grows with the bound, so the first fits and every bound above the second is over the budget; where
    they are the same bound, the answer is exact. ``beyond``'s pools are counted with each heap."""
    pools = beyond.total - beyond.heap.bytes
    marks = sorted(heaps)
    fits = None
    start = lo
    for m in marks:  # bounds in (the last mark, m] count the heap at m
        if m >= start:
            got = _search(pred, budget - pools - heaps[m], start, m) if budget - pools - heaps[m] > 0 else None
            if got is not None:
                fits = got
        start = m + 1
    open_ = None
    floors = [(lo, marks[0] - 1, 0)] + [(m, (marks[k + 1] - 1 if k + 1 < len(marks) else top), heaps[m])
                                        for k, m in enumerate(marks)]
    for a, b, h in reversed(floors):  # bounds in [a mark, the next) need at least its heap
        a = max(a, (fits or 0) + 1)
        if a <= b and budget - pools - h > 0:
            open_ = _search(pred, budget - pools - h, a, b)
            if open_ is not None:
                break
    return fits, open_


def _heap_search(pred: Predictor, budget: int, beyond: BeyondPlan, measure) -> HeapSearch:
    """The heap measured at the bounds a whole-app budget search needs (:class:`HeapSearch`). From the sizing's at
    the exported bound, each round measures the heap at the bound where the budget runs out by the heap's estimate
    (:func:`_heap_estimate`, through the bounds measured so far), above the largest that fits and no higher than
    the largest not ruled out (:func:`_answer`), until no bound above the answer is left, at most
    :data:`HEAP_MEASUREMENTS` times (and once more where the answer's own heap is still to measure); the answer's
    heap is measured first, and the bound past it last. ``measure(bound)`` gives (the heap peak there, the XNNPACK tensors resized),
    or raises :class:`~pte_lab.errors.PteLabError`, which stops the search where it is."""
    lo, top = _smallest_bound(pred), pred.fit.exported[0]
    heaps = {top: beyond.heap.bytes}
    order = [(top, beyond.heap.bytes)]
    pools = beyond.total - beyond.heap.bytes
    stopped, resized = None, 0
    for k in range(HEAP_MEASUREMENTS + 1):
        fits, open_ = _answer(pred, budget, beyond, heaps, lo, top)
        if k == HEAP_MEASUREMENTS and (fits is None or fits in heaps):
            break  # one more only to measure the answer itself
        if fits is not None and fits not in heaps:
            bound = fits  # the answer counts the heap measured at itself
        elif open_ is not None:
            bound = _next_to_measure(pred, budget - pools, heaps, lo if fits is None else fits + 1, open_)
        elif fits is not None and fits < top and fits + 1 not in heaps and _fits(pred, fits + 1):
            bound = fits + 1  # one past the answer, with its own heap: over whatever the heap does above it
        else:
            break
        if bound in heaps:  # nothing new to learn (the estimate found nothing above the answer to try)
            break
        try:
            got, n = measure(bound)
        except PteLabError as exc:
            stopped = str(exc).splitlines()[0]
            break
        resized = max(resized, n)
        heaps[bound] = got
        order.append((bound, got))
    fits, open_ = _answer(pred, budget, beyond, heaps, lo, top)
    basis = min((m for m in heaps if fits is not None and m >= fits), default=top)
    marks = sorted(heaps)
    falls = next(((a, b) for i, a in enumerate(marks) for b in marks[i + 1:] if heaps[a] > heaps[b] + HEAP_NOISE),
                 None)
    return HeapSearch(tuple(order), basis, open_ is None, open_, stopped, resized, falls)


def _heap_estimate(heaps: dict[int, int], n: int) -> float:
    """The heap at bound ``n`` as the bounds measured suggest: through the (up to) three measured nearest it (a
    workspace grows with the bound's square, a kernel's buffer with the bound), kept between the heap measured
    at the nearest bound below (0 where none) and the nearest above it. An estimate that picks where to measure next; no
    answer rests on it."""
    marks = sorted(heaps)
    below = heaps[max(m for m in marks if m <= n)] if marks[0] <= n else 0
    above = heaps[min(m for m in marks if m >= n)] if marks[-1] >= n else heaps[marks[-1]]
    near = sorted(marks, key=lambda m: (abs(m - n), m))[:3]
    est = 0.0
    for i, a in enumerate(near):  # Lagrange's polynomial through them
        term = float(heaps[a])
        for j, b in enumerate(near):
            if i != j:
                term *= (n - b) / (a - b)
        est += term
    return min(max(est, below), above)


def _next_to_measure(pred: Predictor, share: int, heaps: dict[int, int], first: int, last: int) -> int:
    """The bound in [``first``, ``last``] (``last``: the largest not ruled out, never measured) where the plan and
    the heap's estimate (:func:`_heap_estimate`) run out of ``share`` (the budget less the pools): the largest not
    measured whose plan fits beside the estimate, found as :func:`_search` finds a plan under a budget (a bisection
    on the plan's lower bound and the estimate, both growing with the bound, then down to a plan that fits); else
    ``first``, which settles whether the answer is the bound below it, or ``last`` where ``first`` was measured."""
    def under(n: int) -> bool:
        return _lower_bound_at(pred, n) + _heap_estimate(heaps, n) <= share

    start = None
    if under(first):
        ok, bad = first, last + 1
        while bad - ok > 1:
            mid = (ok + bad) // 2
            ok, bad = (mid, bad) if under(mid) else (ok, mid)
        start = ok
    for n in range(start if start is not None else first - 1, first - 1, -1):
        if n not in heaps and _fits(pred, n) and pred.planned_at((n,)) + _heap_estimate(heaps, n) <= share:
            return n
    return first if first not in heaps else last


def _need_options(pred: Predictor, budget: int, need: int, findings: tuple[Finding, ...]) -> tuple[NeedOption, ...]:
    """At bound ``need``: the program as exported, with each finding's change, and with all of them, each as
    ExecuTorch's greedy plans it (a re-export) and as pte_lab's best fit replans that (``pte-lab replan``)."""
    sets: list[tuple[Finding, ...]] = [()] + [(f,) for f in findings] + ([findings] if len(findings) > 1 else [])
    out = []
    for fs in sets:
        w = pred.plain.with_edit(_merged(fs), fs).predict((need,)) if fs else pred.plain.predict((need,))
        kinds = tuple(str(f.kind) for f in fs)
        out.append(NeedOption(kinds, Planner.GREEDY, w.planned, w.planned <= budget))
        out.append(NeedOption(kinds, Planner.BEST_FIT, w.best_fit, w.best_fit <= budget))
    return tuple(out)


@arguments(source=PROGRAM, shape=DIM_SIZES, method=optional(NAME), data_path=optional(PATH))
def usage_at(source, shape: dict, method: str | None = None, data_path=None, max_input_bytes=None) -> UsageAt:
    """Run the method once at ``shape`` ({(input, axis): size}): the bytes each planned tensor uses, what a
    plan made for that shape needs (ExecuTorch's greedy and the lower bound), and the plan at the bound,
    which the runtime allocates whole whatever the shape (it explains a measured RSS).

    Parameters
    ----------
    source : str or os.PathLike or pte_lab.Pte
        The program on disk (a path, or an opened :class:`~pte_lab.model.Pte`).
    shape : dict
        ``{(input, axis): size}``: the size of each dynamic dim for this run (at most its bound).
    method : str, optional
        The method (default: the program's one method with dynamic inputs).
    data_path : str or os.PathLike, optional
        The program's external ``.ptd``, when it has one.
    max_input_bytes : int or str, optional
        The most bytes built for one run's inputs (default 1 GiB, or ``$PTE_LAB_MAX_INPUT_BYTES``).

    Returns
    -------
    UsageAt
        Each tensor's bytes at ``shape``, the plan for that shape, the plan at the bound, the gap.

    Raises
    ------
    pte_lab.model.shape_fit.WhatIfError
        For a size above the bound, a method without dynamic inputs, or a dynamic tensor no instruction logged.
    pte_lab.errors.DeclaredSizeError
        For inputs at ``shape`` over ``max_input_bytes`` (see :func:`what_if`).
    """
    pte, path = program_and_path(source)
    m = what_if_method(pte, method)
    keys, point, _ = check_bounds(m, shape)
    (_, shapes), = _run_shapes(path, m, keys, [point], data_path, max_input_bytes=max_input_bytes)
    pred = Predictor(m)
    rows, nb = [], []
    for t in m.planned:
        raw = m.raw.values[t.value].tensor
        s = shapes.get(t.value)
        if s is None:
            if raw.shape_dynamism != TensorShapeDynamism.STATIC:
                raise unrecorded(m, t.value, keys, point)
            s = t.shape
        used = nbytes_of(tuple(s), scalar_type(raw.scalar_type, f"{m.name} v{t.value}")[1])
        rows.append((t.value, t.role, tuple(s), used, t.nbytes))
        nb.append(used)
    arr = np.array(nb, np.int64)
    problems = pred.problems_for(arr)
    used = sum(g.extent for p in problems for g in p.groups) + sum(n for p in problems for _, n in p.idle)
    return UsageAt(m.name, keys, point, rows, used, sum(plan_arena(p, "greedy")[1] for p in problems),
                   sum(p.lower_bound for p in problems), sum(a.size for a in m.arenas))
