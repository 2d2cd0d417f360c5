"""What changed in memory between two programs: :func:`diff_programs` returns a :class:`Diff`.

Facts only, each before and after (a :class:`Change`):

* per method, matched by name (methods only in one program are listed): every
  arena (size, device, peak live, size/peak), planned bytes, instruction and
  planned-tensor counts, the state kept between calls;
* planned tensors matched across the two files (:func:`match_tensors`), what
  changed for each pair, and every tensor that could not be matched;
* the program: file size, where its bytes go (:func:`~pte_lab.model.layout.file_regions`
  regions, delegate blobs per backend), identical blobs stored twice gained or
  lost, and what each loader allocates at each step;
* optionally the run-time sizes of both (:meth:`Diff.with_sizes`, from two
  ``pte_lab.sizes`` results; this module never runs anything).

Tensor matching is honest, never a guess. In order: by the file's names
(mutable-buffer fully qualified names, when a name is unique in both methods);
by method input and output position; with an ETRecord given to both programs, by
the FX node and module that write each tensor (when no other tensor names the same);
then by the sequence of planned tensors in instruction order, each keyed by what
makes it (the producing operator, or the first operator to touch state, or a
view's base operator) with its dtype: the longest common subsequence of those
keys pairs tensors whose keys are equal and in the same order on both sides
(:mod:`.align`). Shape is not part of any key: the same model exported at two
bounds pairs its tensors, each with its shape (and bytes) as what changed. What is left is listed in
:attr:`MethodDiff.only_before` / :attr:`MethodDiff.only_after`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from .computed_once import cached_property
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING
from collections.abc import Iterable, Mapping

from ..errors import CHECK_FAILED, TARGET_CHANGED, PteLabError
from ..vocabulary import BUDGET_KINDS, InstructionKind, MemoryPart, Pool, Role, ValueKind, Word
from .sequence_match import match_sequences
from .backends import BLOB_SETTINGS
from .analysis import Arena, PlannedTensor, instruction_targets, tail_paddings
from .many_records import paused_gc
from .ethos_u import IN_BLOB, describe_io
from .lifetimes import instruction_uses
from .load_cost import LOADERS, STEPS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .ethos_u import DelegateMemory
    from .method import Method
    from .pte import Pte

__all__ = ["diff_programs", "Diff", "Change", "MethodDiff", "ArenaDiff", "TensorMatch", "ArenaCauses",
           "RegionDiff", "DuplicateBlob", "LoadCostDiff", "SizesDiff", "PartDiff", "TotalDiff", "BudgetCheck",
           "BudgetVerdict",
           "match_tensors", "MATCHED_BY", "TENSOR_CHANGES", "DIFF_TENSOR_COLUMNS",
           "DelegateDiff", "Setting", "PLANNED_SUM", "BUDGETED_POOLS", "BUDGET_KINDS",
           "TargetChange", "DELEGATE_SETTINGS", "TARGET_CHANGES",
           "TARGET_CHANGE_KINDS", "TargetChangeKind", "pair_delegates", "linked_backends"]

#: how a pair of tensors was matched, in the order the rules are tried
MATCHED_BY = ("name", "input", "output", "source", "operators")
#: what can differ between two matched tensors: name -> the PlannedTensor fields compared
TENSOR_CHANGES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "role": ("role",), "dtype": ("dtype",), "shape": ("shape",), "size": ("nbytes",), "arena": ("mem_id",),
    "offset": ("offset",), "lifetime": ("first", "last"), "device": ("device",),
})
#: the pools a budget holds (:meth:`Diff.budget`): ``planned_buffers`` are the method's planned bytes, read
#: from the file, so the planned bytes' check is theirs
BUDGETED_POOLS = (Pool.METHOD_POOL, Pool.TEMP_POOL)
#: what the planned bytes of several methods are called: a sum over the methods, which no loader allocates
#: (``load_program`` shares arenas between host-only methods; see :attr:`Diff.load_cost`)
PLANNED_SUM = "planned bytes, summed over methods"


@dataclass(frozen=True)
class Change:
    """One quantity before and after (bytes or a count); ``None`` where that side has no such thing."""

    before: int | None
    after: int | None

    @property
    def delta(self) -> int:
        return (self.after or 0) - (self.before or 0)

    @property
    def growth(self) -> float | None:
        """``delta / before`` (0.25: grew by a quarter); ``inf`` from nothing to something; ``None``
        where one side is absent."""
        if self.before is None or self.after is None:
            return None
        if self.before == 0:
            return 0.0 if self.after == 0 else math.inf
        return self.delta / self.before

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class ArenaDiff:
    """One arena (by ``mem_id``) of a method in both programs; a side is None where it has no such arena."""

    mem_id: int
    before: Arena | None
    after: Arena | None
    #: bytes past the arena's last tensor (``model.analysis.tail_paddings``: exir's padding of an arena a
    #: delegate uses, XNNPACK's 64 B), each side; None where that side has no such arena
    padding: Change = Change(None, None)

    @cached_property
    def size(self) -> Change:
        return Change(_get(self.before, "size"), _get(self.after, "size"))

    @cached_property
    def peak(self) -> Change:
        """Peak live bytes: the lower bound of any plan with the method's lifetimes."""
        return Change(_get(self.before, "peak_bytes"), _get(self.after, "peak_bytes"))

    @cached_property
    def tensors(self) -> Change:
        """Planned tensors in the arena."""
        return Change(_get(self.before, "n_tensors"), _get(self.after, "n_tensors"))

    @property
    def devices(self) -> tuple[str | None, str | None]:
        return _get(self.before, "device"), _get(self.after, "device")


def _get(obj, name):
    return None if obj is None else getattr(obj, name)


@dataclass(frozen=True)
class TensorMatch:
    """A planned tensor of the first program paired with one of the second."""

    #: which rule paired them (:data:`MATCHED_BY`)
    by: str
    before: PlannedTensor
    after: PlannedTensor
    #: what differs (keys of :data:`TENSOR_CHANGES`), in that order
    changed: tuple[str, ...]


@dataclass(frozen=True)
class ArenaCauses:
    """Why an arena's bytes changed, tensor by tensor (views share their base's bytes: left out)."""

    mem_id: int
    #: unmatched tensors only in the second / the first program, in this arena
    new: tuple[PlannedTensor, ...]
    gone: tuple[PlannedTensor, ...]
    #: matched tensors that moved into / out of this arena from another
    moved_in: tuple[TensorMatch, ...]
    moved_out: tuple[TensorMatch, ...]
    #: matched tensors in this arena on both sides with more / fewer bytes
    larger: tuple[TensorMatch, ...]
    smaller: tuple[TensorMatch, ...]
    #: matched tensors in this arena on both sides alive over more / fewer instructions (state,
    #: alive over every call by definition, is left out)
    longer: tuple[TensorMatch, ...]
    shorter: tuple[TensorMatch, ...]


@dataclass(frozen=True)
class MethodDiff:
    """A method present in both programs."""

    name: str
    arenas: tuple[ArenaDiff, ...]
    instructions: Change
    #: planned tensors
    tensors: Change
    planned_bytes: Change
    #: planned bytes per device: ((device, Change), ...), devices sorted
    by_device: tuple[tuple[str, Change], ...]
    #: state kept between calls (``Method.state``: KV caches, mutable buffers), tensors and bytes
    state_tensors: Change
    state_bytes: Change
    matched: tuple[TensorMatch, ...] = field(repr=False)
    only_before: tuple[PlannedTensor, ...] = field(repr=False)
    only_after: tuple[PlannedTensor, ...] = field(repr=False)
    #: its delegate calls, paired (``pair_delegates``)
    delegates: tuple["DelegateDiff", ...] = field(default=(), repr=False)

    @property
    def changed(self) -> tuple[TensorMatch, ...]:
        """Matched tensors with anything different."""
        return tuple(m for m in self.matched if m.changed)

    @property
    def unchanged(self) -> bool:
        """The memory plan is the same: counts, arenas (size, device, peak), state, and every tensor matched
        unchanged (the delegates are :attr:`same`'s too)."""
        counts = (self.instructions, self.tensors, self.planned_bytes, self.state_tensors, self.state_bytes)
        return (not any(c.changed for c in counts) and not self.only_before and not self.only_after
                and not self.changed and all(a.before == a.after for a in self.arenas))

    @property
    def same(self) -> bool:
        """Nothing differs: the plan is :attr:`unchanged` and every delegate call is the same (settings and
        bytes). What the views call an unchanged method."""
        return self.unchanged and not any(x.changed for x in self.delegates)

    @cached_property
    def _arena_index(self) -> dict[int, ArenaDiff]:
        return {a.mem_id: a for a in self.arenas}

    def arena(self, mem_id: int) -> ArenaDiff:
        a = self._arena_index.get(mem_id)
        if a is None:
            raise KeyError(f"method {self.name!r} has no arena with mem_id {mem_id} in either program "
                           f"(it has {[a.mem_id for a in self.arenas]})")
        return a

    @cached_property
    def _causes_index(self) -> dict[int, list[list]]:
        """Every arena's causes, in one pass over the tensors (asked arena by arena, a scan per arena would be
        arenas x tensors): mem_id -> the eight lists of :class:`ArenaCauses`, in its field order."""
        by: dict[int, list[list]] = {}

        def lists(mem_id):
            got = by.get(mem_id)
            if got is None:
                got = by[mem_id] = [[], [], [], [], [], [], [], []]
            return got

        def span(t):
            return None if t.first is None or t.last is None else t.last - t.first

        for t in self.only_after:
            if t.role != Role.VIEW:
                lists(t.mem_id)[0].append(t)
        for t in self.only_before:
            if t.role != Role.VIEW:
                lists(t.mem_id)[1].append(t)
        for m in self.matched:
            a, b = m.before, m.after
            if b.role != Role.VIEW and a.mem_id != b.mem_id and a.role != Role.VIEW:
                lists(b.mem_id)[2].append(m)
            if a.role != Role.VIEW and a.mem_id != b.mem_id and b.role != Role.VIEW:
                lists(a.mem_id)[3].append(m)
            if a.mem_id != b.mem_id or a.role == Role.VIEW or b.role == Role.VIEW:
                continue
            own = lists(a.mem_id)
            if b.nbytes > a.nbytes:
                own[4].append(m)
            elif b.nbytes < a.nbytes:
                own[5].append(m)
            sa, sb = span(a), span(b)
            if Role.MUTABLE_BUFFER not in (a.role, b.role) and sa is not None and sb is not None:
                if sb > sa:
                    own[6].append(m)
                elif sb < sa:
                    own[7].append(m)
        return by

    def causes(self, mem_id: int) -> ArenaCauses:
        """The tensors behind arena ``mem_id``'s change (see :class:`ArenaCauses`)."""
        self.arena(mem_id)
        return ArenaCauses(mem_id, *(tuple(x) for x in self._causes_index.get(mem_id, [()] * 8)))

    def table(self) -> "pd.DataFrame":
        """One row per tensor: matched pairs, then those only in one program (:data:`DIFF_TENSOR_COLUMNS`).

        ``*_before`` / ``*_after`` are missing on the side a tensor is absent from.
        """
        import pandas as pd

        rows = [_tensor_row(m.by, m.before, m.after, m.changed) for m in self.matched]
        rows += [_tensor_row("only before", t, None, ()) for t in self.only_before]
        rows += [_tensor_row("only after", None, t, ()) for t in self.only_after]
        df = pd.DataFrame(rows, columns=list(DIFF_TENSOR_COLUMNS))
        for c in df.columns:
            if c.rsplit("_", 1)[0] in ("value", "nbytes", "mem_id", "offset", "first", "last"):
                df[c] = df[c].astype("Int64")
        return df


#: the columns of :meth:`MethodDiff.table`
DIFF_TENSOR_COLUMNS = ("matched_by", "role", "op", "dtype", "changed") + tuple(
    f"{c}_{side}" for c in ("value", "shape", "nbytes", "mem_id", "offset", "first", "last", "device")
    for side in ("before", "after"))


def _tensor_row(by, a, b, changed) -> tuple:
    one = a if a is not None else b
    cols = ("value", "shape", "nbytes", "mem_id", "offset", "first", "last", "device")
    side = [_get(t, c) for c in cols for t in (a, b)]
    return (by, one.role, one.op, one.dtype, ", ".join(changed), *side)


@dataclass(frozen=True)
class RegionDiff:
    """Bytes of one kind of region of the file (``file_layout``'s regions; delegate blobs per backend)."""

    region: str
    #: the backend for delegate blobs, else ""
    name: str
    bytes: Change
    #: how many rows of the layout (blobs, constant buffers...) the region has
    count: Change


@dataclass(frozen=True)
class DuplicateBlob:
    """A blob whose bytes repeat an earlier one of the same file (``file_layout``'s ``duplicate_of``)."""

    region: str
    name: str
    bytes: int
    duplicate_of: str


@dataclass(frozen=True)
class LoadCostDiff:
    """What one loader allocates for planned arenas at one step on one device (``Pte.load_totals``)."""

    loader: str
    step: str
    device: str
    bytes: Change


@dataclass(frozen=True)
class PartDiff:
    """One figure of a method's run-time sizes (a part of ``MethodSizes.parts()``, a :class:`MemoryPart`, or a
    :class:`Pool`; a total's ``"total (<target>)"``); a side is None where it was not measured or the method was
    not sized."""

    method: str
    part: MemoryPart | Pool | str
    bytes: Change
    #: the sides that have the method but did not measure this figure ("first", "second", "both"; None:
    #: measured wherever the method is): such a figure is neither unchanged nor grown, and no budget holds
    unmeasured: str | None = None
    #: how each side's figure was had, as ``pte-lab sizes``' ``from`` column says it ("file", "runner",
    #: "counter"...; None where that side has none): a side that could not run the method still has the
    #: figures its file declares ("file")
    basis: tuple[str | None, str | None] = (None, None)


@dataclass(frozen=True)
class TotalDiff(PartDiff):
    """One method's total on one kind of target (``MethodSizes.totals()``), both sides: ``part`` is
    ``"total (<target>)"``."""

    #: the kind of target ("host": an OS process, this host or an app; "bare-metal": a board)
    target: str = ""
    #: the data loader the total assumes there (``Total.loader``; None: not said)
    loader: str | None = None


@dataclass(frozen=True)
class SizesDiff:
    """Two ``pte_lab.sizes`` results side by side."""

    #: every part of every method sized in either program, in ``parts()`` order
    parts: tuple[PartDiff, ...]
    #: the pools (:class:`Pool`) of every method
    pools: tuple[PartDiff, ...]
    #: methods that could not be sized, and why
    skipped_before: Mapping[str, str]
    skipped_after: Mapping[str, str]
    executorch: tuple[str, str]
    #: the parts that are this host's measurements (heap, mappings, resident pages: they move with the CPU, the
    #: allocator and the run), never budgeted (:meth:`Diff.not_budgeted`)
    host_dependent: tuple[MemoryPart, ...] = ()
    #: each method's total per kind of target (``MethodSizes.totals()``: this host's, a bare-metal board's), as
    #: ``pte-lab sizes`` gives them: the one figure per side to decide on (part: ``"total (<target>)"``)
    totals: tuple["TotalDiff", ...] = ()
    #: (side, method) of every method a side could not run at all on this host (its backend is not in this
    #: ExecuTorch build): not measured, and no failure (``Sizes.cannot_run_here``)
    cannot_run_here: tuple[tuple[str, str], ...] = ()
    #: when each side's figures were measured, where they are kept figures (``Sizes.kept``: seconds since the
    #: epoch); None: measured for this diff
    kept: tuple[float | None, float | None] = (None, None)

    @property
    def not_measured(self) -> tuple[tuple[str, str, str], ...]:
        """(side, method, why) of every method a side has but could not size ("first" / "second")."""
        return tuple((side, n, why) for side, skipped in (("first", self.skipped_before),
                                                          ("second", self.skipped_after))
                     for n, why in skipped.items())


@dataclass(frozen=True)
class BudgetCheck:
    """Whether one quantity grew by more than ``limit_pct`` percent (a CI job's memory budget)."""

    what: str
    bytes: Change
    limit_pct: float
    #: the sides that did not measure it ("first", "second", "both"; None: both did): the check fails
    unmeasured: str | None = None
    #: which of :data:`BUDGET_KINDS` it is
    kind: str = "planned"

    @property
    def exceeded(self) -> bool:
        g = self.bytes.growth
        return self.unmeasured is None and g is not None and g * 100 > self.limit_pct

    @property
    def failed(self) -> bool:
        """Exceeded, or not measured on a side (a budget cannot hold what was not measured)."""
        return self.exceeded or self.unmeasured is not None


@dataclass(frozen=True)
class BudgetVerdict:
    """What a budget decides (:meth:`Diff.budget_result`; ``pte-lab diff --fail-if-grows``): which checks failed, the
    deployment changes it does not pass, whether it passes and the exit status that says so."""

    #: every check held (:meth:`Diff.budget`)
    checks: tuple[BudgetCheck, ...]
    #: every deployment change (:attr:`Diff.target_changes`), accepted or not
    target_changes: tuple["TargetChange", ...]
    #: the deployment changes were accepted (``--allow-target-change``)
    target_change_accepted: bool

    @property
    def failed(self) -> tuple[BudgetCheck, ...]:
        """The checks that failed (:attr:`BudgetCheck.failed`): exceeded, or not measured on a side."""
        return tuple(c for c in self.checks if c.failed)

    @property
    def exceeded(self) -> tuple[BudgetCheck, ...]:
        return tuple(c for c in self.checks if c.exceeded)

    @property
    def unmeasured(self) -> tuple[BudgetCheck, ...]:
        return tuple(c for c in self.checks if c.unmeasured is not None)

    @property
    def held(self) -> bool:
        """No check failed."""
        return not self.failed

    @property
    def target_changed(self) -> bool:
        """A deployment change the budget does not pass (one not accepted)."""
        return bool(self.target_changes) and not self.target_change_accepted

    @property
    def passes(self) -> bool:
        """What ``pte-lab diff --fail-if-grows`` exits 0 for: the budget held, and no change of target unless it
        was accepted (``budget_verdict.passes`` in the JSON, so that a script need not also read the exit
        status)."""
        return self.held and not self.target_changed

    @property
    def exit_status(self) -> int:
        """What ``pte-lab diff --fail-if-grows`` exits with (``budget_verdict.exit_status`` in the JSON): 0 when
        it :attr:`passes`, ``pte_lab.errors.TARGET_CHANGED`` (4) on a deployment change not accepted (whatever
        the bytes did), else ``pte_lab.errors.CHECK_FAILED`` (1)."""
        if self.passes:
            return 0
        return TARGET_CHANGED if self.target_changed else CHECK_FAILED


# ---------------------------------------------------------------------- delegates
#: what a delegate call is compared by, beyond its bytes: name -> how it is read from a ``DelegateMemory``
#: (None where that side has no such delegate, or the file does not say)
DELEGATE_SETTINGS = ("backend", "target", "system config", "memory mode", "stored", "command stream and weights "
                     "live", "scratch from", "scratch lives", "inputs", "outputs", *BLOB_SETTINGS)
#: the changes a memory budget does not pass (``--fail-if-grows``), in the order they are reported
TARGET_CHANGES = ("backend", "target", "memory mode", "deployment target", "flash to RAM", "method gone")


class TargetChangeKind(Word):
    """What a deployment change changes (:attr:`TargetChange.kind`): the runner (it must link another backend: a
    CPU-only one such as XNNPACK appearing is this, the board stays; or a method it loads is gone) or the board
    (the target, its memory mode, or RAM the board must give). Both are a deployment change (one exit status);
    the words and JSON say which, as ``"runner"`` or ``"board"``."""

    RUNNER = "runner"
    BOARD = "board"


#: what each of :data:`TARGET_CHANGES` changes of the deployment (:class:`TargetChangeKind`)
TARGET_CHANGE_KINDS: Mapping[str, TargetChangeKind] = MappingProxyType({
    "backend": TargetChangeKind.RUNNER, "target": TargetChangeKind.BOARD, "memory mode": TargetChangeKind.BOARD,
    "deployment target": TargetChangeKind.BOARD, "flash to RAM": TargetChangeKind.BOARD,
    "method gone": TargetChangeKind.RUNNER})


@dataclass(frozen=True)
class Setting:
    """One of a delegate's :data:`DELEGATE_SETTINGS`, before and after (None: that side does not say)."""

    what: str
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _io_text(ios) -> str | None:
    return None if ios is None else "; ".join(describe_io(io) for io in ios) or "none"


def _setting(d: "DelegateMemory | None", what: str) -> str | None:
    if d is None:
        return None
    s = d.stream
    if what == "backend":
        return d.backend
    if what == "target":
        return d.target
    if what == "system config":
        return d.system_config
    if what == "memory mode":
        return d.memory_mode
    if what == "stored":
        return d.location
    if what == "command stream and weights live":
        mode = d.placement
        return mode.program if s is not None and mode is not None else None
    if what == "scratch from":
        return d.scratch_from
    if what == "scratch lives":
        return d.scratch_lives
    if what in BLOB_SETTINGS:
        got = None if d.contents is None else d.contents.setting(what)
        return None if got is None else got.value
    return None if s is None else _io_text(s.inputs if what == "inputs" else s.outputs)


@dataclass(frozen=True)
class DelegateDiff:
    """One delegate call of a method in both programs, paired within its backend (``pair_delegates``; the
    delegates in the order of their first call, those never called following in table order): ``call`` is the
    row, a side None where that program's method has no such call; two backends where one replaced the other
    (:attr:`backend_changed`)."""

    method: str
    call: int
    before: "DelegateMemory | None" = field(repr=False)
    after: "DelegateMemory | None" = field(repr=False)
    #: the backends each program's methods call (what its runner links): a call only in one program is no
    #: change of backend when the other program calls that backend too
    linked: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())

    @property
    def backend_changed(self) -> bool:
        """A call of one backend in the first program where the second calls another (calls are paired within a
        backend first: ``pair_delegates``): one row that says so, its bytes not compared (a Core ML blob and
        an XNNPACK blob are not two sizes of one thing)."""
        return self.before is not None and self.after is not None and self.before.backend != self.after.backend

    @cached_property
    def settings(self) -> tuple[Setting, ...]:
        """Every one of :data:`DELEGATE_SETTINGS` that either side says."""
        got = (Setting(w, _setting(self.before, w), _setting(self.after, w)) for w in DELEGATE_SETTINGS)
        return tuple(x for x in got if x.before is not None or x.after is not None)

    @property
    def changed_settings(self) -> tuple[Setting, ...]:
        return tuple(x for x in self.settings if x.changed)

    @cached_property
    def blob_bytes(self) -> Change:
        return Change(_get(self.before, "blob_bytes"), _get(self.after, "blob_bytes"))

    @cached_property
    def command_bytes(self) -> Change:
        return Change(_get(self.before, "command_bytes"), _get(self.after, "command_bytes"))

    @cached_property
    def weight_bytes(self) -> Change:
        return Change(_get(self.before, "weight_bytes"), _get(self.after, "weight_bytes"))

    @cached_property
    def scratch_bytes(self) -> Change:
        """Scratch the delegate takes at every execute (Ethos-U: ``scratch_size``)."""
        return Change(_get(self.before, "scratch_bytes"), _get(self.after, "scratch_bytes"))

    @property
    def byte_changes(self) -> tuple[tuple[str, Change], ...]:
        """(what, Change) of the blob, command stream, weights and scratch, and of the parts another backend's
        blob holds (XNNPACK's graph, Core ML's model), those either side says; none for a change of backend
        (:attr:`backend_changed`: each side's bytes are its own)."""
        if self.backend_changed:
            return ()
        got = [("blob", self.blob_bytes), ("command stream", self.command_bytes), ("weights", self.weight_bytes),
               ("scratch", self.scratch_bytes)]
        pa, pb = (dict(() if x is None or x.contents is None else ((p.part, p.bytes) for p in x.contents.parts))
                  for x in (self.before, self.after))
        got += [(f"blob's {part}", Change(pa.get(part), pb.get(part))) for part in dict.fromkeys([*pa, *pb])]
        return tuple((w, c) for w, c in got if c.before is not None or c.after is not None)

    @property
    def changed(self) -> bool:
        return bool(self.changed_settings) or any(c.changed for _, c in self.byte_changes)

    @cached_property
    def target_changes(self) -> tuple["TargetChange", ...]:
        """What a memory budget does not pass (:data:`TARGET_CHANGES`): the backend, target or memory mode
        changed (a delegate only in one program changes the backend), or the command stream and weights
        must now be in RAM where flash held them."""
        out = []
        for what in ("backend", "target", "memory mode", "deployment target"):
            a, b = _setting(self.before, what), _setting(self.after, what)
            if what == "backend" and (a is None and b in self.linked[0] or b is None and a in self.linked[1]):
                continue  # another call of a backend the other program's runner links already
            if a != b and (what == "backend" or (self.before is not None and self.after is not None
                                                 and not self.backend_changed)):
                out.append(TargetChange(self.method, self.call, what, a, b))
        a, b = self.before, self.after
        if a is not None and b is not None and a.program_in_ram is False and b.program_in_ram:
            moved = sum(x or 0 for x in (b.command_bytes, b.weight_bytes))
            if b.scratch_from == IN_BLOB:  # the NPU works in a scratch block of the program's bytes
                moved += b.scratch_bytes or 0
            out.append(TargetChange(self.method, self.call, "flash to RAM", _setting(a, "memory mode"),
                                    _setting(b, "memory mode"), moved))
        return tuple(out)


@dataclass(frozen=True)
class TargetChange:
    """A change a memory budget does not pass: the program no longer runs where the first one ran, needs more
    RAM for bytes flash held, or lacks a method a runner loads by name (``what``: one of
    :data:`TARGET_CHANGES`)."""

    method: str
    #: the delegate call it is of (None: of the method itself, "method gone")
    call: int | None
    what: str
    before: str | None
    after: str | None
    #: "flash to RAM": the bytes (command stream and weights) that must now be in RAM
    bytes: int | None = None

    @property
    def kind(self) -> TargetChangeKind:
        """The runner (it must link another backend) or the board (:data:`TARGET_CHANGE_KINDS`)."""
        return TARGET_CHANGE_KINDS[self.what]


def _call_order(m: "Method") -> list[int]:
    """The method's delegates in the order of their first call, then those never called (by index)."""
    first: dict[int, None] = {}
    for ins in m.raw.instructions:
        if ins.kind == InstructionKind.DELEGATE_CALL:
            first.setdefault(ins.target, None)
    n = len(m.raw.delegates)
    order = [i for i in first if 0 <= i < n]
    seen = set(order)
    return order + [i for i in range(n) if i not in seen]


def pair_delegates(a: "Method", b: "Method",
                   linked: tuple[frozenset[str], frozenset[str]] | None = None) -> tuple[DelegateDiff, ...]:
    """The delegates of two versions of a method, paired within each backend (its k-th call in the first program
    with its k-th call in the second, in the order of the first calls), then the calls left in the first with
    those left in the second, in order, each such pair a change of backend (:attr:`DelegateDiff.backend_changed`),
    then those only in one program. ``DelegateDiff.call`` numbers the rows. ``linked``: the backends each whole
    program calls (default: each method's own)."""
    da, db = a.delegate_memory, b.delegate_memory
    oa, ob = _call_order(a), _call_order(b)
    if linked is None:
        linked = (linked_backends([a]), linked_backends([b]))
    ba, bb = [da[i].backend for i in oa], [db[i].backend for i in ob]
    pairs: list[tuple[int | None, int | None]] = []
    left_a: list[int] = []
    left_b: list[int] = []
    for backend in dict.fromkeys([*ba, *bb]):  # within a backend: its k-th call with its k-th call
        xa = [k for k, x in enumerate(ba) if x == backend]
        xb = [k for k, x in enumerate(bb) if x == backend]
        pairs += zip(xa, xb)
        left_a += xa[len(xb):]
        left_b += xb[len(xa):]
    left_a.sort()
    left_b.sort()
    pairs += zip(left_a, left_b)  # what is left: a call of another backend in its place, a change of backend
    pairs += [(k, None) for k in left_a[len(left_b):]] + [(None, k) for k in left_b[len(left_a):]]
    pairs.sort(key=lambda p: (p[0] if p[0] is not None else p[1], p[1] if p[1] is not None else p[0]))
    return tuple(DelegateDiff(a.name, row, None if i is None else da[oa[i]], None if j is None else db[ob[j]], linked)
                 for row, (i, j) in enumerate(pairs))


def linked_backends(methods: Iterable["Method"]) -> frozenset[str]:
    """The backends the methods' delegates name: what a runner of them links."""
    return frozenset(d.id for m in methods for d in m.raw.delegates)


@dataclass(frozen=True, eq=False)
class Diff:
    """What changed in memory from one program (``before``) to another (``after``)."""

    before: "Pte" = field(repr=False)
    after: "Pte" = field(repr=False)
    #: the two programs' paths, or ``<bytes>``
    labels: tuple[str, str]
    #: bytes of each program (a ``.bpte``: the program it carries)
    file_size: Change
    regions: tuple[RegionDiff, ...]
    duplicates_gained: tuple[DuplicateBlob, ...]
    duplicates_lost: tuple[DuplicateBlob, ...]
    load_cost: tuple[LoadCostDiff, ...]
    #: methods in both programs (only those asked for), in the first program's order
    methods: Mapping[str, MethodDiff]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    #: planned bytes of every method compared, added and removed ones included, summed (with several methods a
    #: sum no loader allocates: :data:`PLANNED_SUM`; :attr:`load_cost` has what each loader does)
    planned_bytes: Change
    #: run-time sizes of both programs (:meth:`with_sizes`), or None
    sizes: SizesDiff | None = None
    #: the budget the views show (:meth:`with_budget`): most percent any budgeted figure may grow, or None
    limit_pct: float | None = None
    #: a change of target (:attr:`target_changes`) accepted with the budget (``--allow-target-change``)
    target_change_allowed: bool = False
    #: the :data:`BUDGET_KINDS` the budget holds (``--budget-on``; default all)
    budget_on: tuple[str, ...] = tuple(BUDGET_KINDS)
    @property
    def many_methods(self) -> bool:
        """More than one method compared (added and removed ones count): :attr:`planned_bytes` is then a sum
        over methods (:data:`PLANNED_SUM`), not what a loader allocates."""
        return len(self.methods) + len(self.added) + len(self.removed) > 1

    @property
    def delegates(self) -> tuple["DelegateDiff", ...]:
        """Every delegate call of every method in both programs, paired (``pair_delegates``)."""
        return tuple(x for md in self.methods.values() for x in md.delegates)

    @property
    def target_changes(self) -> tuple[TargetChange, ...]:
        """What a memory budget does not pass: every delegate's (:attr:`DelegateDiff.target_changes`), then
        each method the first program has and the second lacks (a runner loads a method by name)."""
        return (tuple(c for d in self.delegates for c in d.target_changes)
                + tuple(TargetChange(n, None, "method gone", n, None) for n in self.removed))

    def with_sizes(self, before, after, host_dependent: Iterable[MemoryPart] = ()) -> "Diff":
        """This diff with two ``pte_lab.sizes`` results (the first program's, then the second's);
        ``host_dependent``: the parts that are this host's measurements (``MEASURED_PARTS``), never budgeted."""
        return replace(self, sizes=sizes_diff(before, after, [*self.methods, *self.removed, *self.added],
                                              host_dependent))

    def with_budget(self, limit_pct: float, allow_target_change: bool = False,
                    on: Iterable[str] | None = None) -> "Diff":
        """This diff held to a budget of ``limit_pct`` percent: its text, HTML and JSON then show
        :meth:`budget` (``pte-lab diff --fail-if-grows``). ``allow_target_change``: a change of what the
        runner must link or where the program runs is accepted (``--allow-target-change``), and the verdict
        says so. ``on``: which of :data:`BUDGET_KINDS` to hold (``--budget-on``; None: the ones this diff
        holds already, all by default), for example ``("planned", "pools")`` for memory alone when the
        weights are meant to change."""
        _check_limit(limit_pct)
        kinds = self.budget_on if on is None else tuple(dict.fromkeys(on))
        unknown = [k for k in kinds if k not in BUDGET_KINDS]
        if unknown or not kinds:
            raise PteLabError(f"a budget holds one or more of {', '.join(BUDGET_KINDS)}; got "
                              f"{', '.join(map(repr, unknown)) if unknown else 'none'}")
        return replace(self, limit_pct=limit_pct, target_change_allowed=allow_target_change,
                       budget_on=tuple(k for k in BUDGET_KINDS if k in kinds))

    def nothing_to_hold(self) -> dict[str, str]:
        """The kinds the budget holds (:attr:`budget_on`) that have no figure here -> why: a budget of them
        alone would pass whatever changed."""
        have = {c.kind for c in self.budget(self.limit_pct if self.limit_pct is not None else 0)}
        why = {"pools": "no method was sized in both programs" if self.sizes is not None else
               "the pools are measured only with --sizes (pte_lab.diff(..., sizes=True))",
               "scratch": "no delegate call of either program declares a scratch",
               "planned": "no method compared", "file": "no file"}
        return {k: why[k] for k in self.budget_on if k not in have}

    def not_budgeted(self) -> tuple[PartDiff, ...]:
        """The host-dependent parts (:attr:`SizesDiff.host_dependent`) measured on both sides, most grown first:
        what :meth:`budget` leaves out, for a budget to say so (empty without sizes)."""
        if self.sizes is None:
            return ()
        host = set(self.sizes.host_dependent)
        got = [p for p in self.sizes.parts if p.part in host and p.unmeasured is None
               and p.bytes.before is not None and p.bytes.after is not None]
        return tuple(sorted(got, key=lambda p: -p.bytes.delta))

    def budget(self, limit_pct: float | None = None) -> tuple[BudgetCheck, ...]:
        """What a CI job holds to a budget of ``limit_pct`` percent (default: :attr:`limit_pct`), each quantity
        once: the file's bytes, the planned bytes (of the one method compared; with several, their sum and
        each method in both; of a method that plans on several devices, each device's too), the scratch each
        delegate call declares (and a method's largest, when a call has no pair) and, with sizes, the method
        pool and temp pool of every method sized in both. A method's planned buffers at run time are its planned bytes
        (ExecuTorch reads them from the file), so they are that row, not another; this host's heap figures
        are never budgeted (:meth:`not_budgeted` lists those, for the budget to say so). Only the kinds in
        :attr:`budget_on` are held (:data:`BUDGET_KINDS`; ``--budget-on``).

        A check is exceeded when its bytes grew by more than ``limit_pct`` percent (from 0 to
        anything counts as more). A pool of a method a side has but did not measure is a check too, one
        that fails (:attr:`BudgetCheck.failed`): it is not compared.
        """
        limit_pct = self.limit_pct if limit_pct is None else limit_pct
        _check_limit(limit_pct)
        names = [*self.methods, *self.removed, *self.added]
        checks = [BudgetCheck("file bytes", self.file_size, limit_pct, kind="file"),
                  BudgetCheck(PLANNED_SUM if self.many_methods else  # else the one method's
                              f"planned bytes of {names[0]!r}" if names else "planned bytes", self.planned_bytes,
                              limit_pct)]
        for n, m in self.methods.items():
            if self.many_methods:
                checks.append(BudgetCheck(f"planned bytes of {n!r}", m.planned_bytes, limit_pct))
            if len(m.by_device) > 1:  # a method on two devices: each device's memory is its own budget
                checks += [BudgetCheck(f"planned bytes of {n!r} on {dev}", c, limit_pct) for dev, c in m.by_device]
        for n in self.methods:  # one scratch at a time (the temp allocator is reset after every instruction)
            a, b = (p.methods[n].delegate_temp_bytes for p in (self.before, self.after))
            calls = [x for x in self.methods[n].delegates if x.scratch_bytes.before or x.scratch_bytes.after]
            if len(calls) > 1 or any(x.before is None or x.after is None or x.backend_changed
                                     for x in calls):  # else the call's row
                checks.append(BudgetCheck(f"largest delegate scratch of {n!r} (the temp pool holds it)",
                                          Change(a, b), limit_pct, kind="scratch"))
        for x in self.delegates:  # the scratch each delegate call takes at every execute, as its blob declares it
            c = x.scratch_bytes
            if c.before is not None and c.after is not None:
                checks.append(BudgetCheck(f"scratch declared by delegate call {x.call} of {x.method!r}", c,
                                          limit_pct, kind="scratch"))
        if self.sizes is not None:
            checks += [BudgetCheck(f"{p.part.replace('_', ' ')} of {p.method!r}", p.bytes, limit_pct, p.unmeasured,
                                   kind="pools")
                       for p in self.sizes.pools if p.part in BUDGETED_POOLS
                       if p.unmeasured is not None or (p.bytes.before is not None and p.bytes.after is not None)]
        return tuple(c for c in checks if c.kind in self.budget_on)

    def budget_result(self, limit_pct: float | None = None) -> BudgetVerdict:
        """What the budget of ``limit_pct`` percent (default: :attr:`limit_pct`) decides: its :meth:`budget`'s
        failed checks, the deployment changes it does not pass, and the exit status
        (``pte-lab diff --fail-if-grows``)."""
        return BudgetVerdict(self.budget(limit_pct), self.target_changes, self.target_change_allowed)

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict:
        """The documented, versioned JSON document (see :mod:`pte_lab.views.diff`)."""
        from ..views.diff import diff_document

        return diff_document(self)

    def _repr_html_(self) -> str:
        from ..views.diff import diff_html

        return diff_html(self)

    def __repr__(self) -> str:
        from ..views.diff import diff_summary

        return diff_summary(self)

    def __str__(self) -> str:
        from ..views.diff import diff_text

        return diff_text(self)


# ---------------------------------------------------------------------- matching
def _keys(m: "Method", ts: Iterable[PlannedTensor], uses_first: dict[int, int], targets: list[str]):
    """(order, key) of each tensor: its place in the instruction stream, and what makes it."""
    ops = {t.value: t.op for t in m.planned if t.role != Role.VIEW}
    out = []
    for t in ts:
        first = uses_first.get(t.value)
        if t.role == Role.VIEW:
            what = ("view of", ops.get(m.storage_of(t.value)))
        elif t.producer is not None:
            what = ("made by", t.op)
        elif t.role in (Role.INPUT, Role.INPUT_OUTPUT):
            what = ("input",)
        else:  # state and anything no instruction writes: the first operator that touches it
            what = ("first used by", targets[first] if first is not None else None)
        out.append(((-1 if first is None else first, t.value), (*what, t.dtype)))
    return out


_COMPARED = attrgetter(*(f for fields_ in TENSOR_CHANGES.values() for f in fields_))


def _unique_sources(m: "Method", planned: dict[int, PlannedTensor]) -> dict[tuple, int]:
    """(node, module) -> value, for the tensors an ETRecord names a node of, where no other tensor names the
    same (views name their base's node: left to the other rules)."""
    seen: dict[tuple, list[int]] = {}
    for src in m.sources or ():
        t = planned.get(src.value)
        if src.node is not None and t is not None and t.role != Role.VIEW:
            seen.setdefault((src.node, src.module), []).append(src.value)
    return {k: vs[0] for k, vs in seen.items() if len(vs) == 1}


def _slices() -> tuple[tuple[str, slice], ...]:
    out, at = [], 0
    for k, fields_ in TENSOR_CHANGES.items():
        out.append((k, slice(at, at + len(fields_))))
        at += len(fields_)
    return tuple(out)


#: each of TENSOR_CHANGES' names and its fields' place in ``_COMPARED``'s tuple
_SLICES = _slices()


def _changed(a: PlannedTensor, b: PlannedTensor) -> tuple[str, ...]:
    va, vb = _COMPARED(a), _COMPARED(b)
    if va == vb:  # most pairs: nothing changed, one comparison
        return ()
    return tuple(k for k, at in _SLICES if va[at] != vb[at])


def match_tensors(a: "Method", b: "Method") -> tuple[tuple[TensorMatch, ...], tuple[PlannedTensor, ...],
                                                     tuple[PlannedTensor, ...]]:
    """(matched pairs, only in ``a``, only in ``b``): the planned tensors of two versions of a method.

    Rules, in order (see the module's docstring): unique names, input positions, output positions, with
    an ETRecord on both sides the FX node and module that write each tensor, then the sequence of what makes
    each tensor with its dtype (a shape is what changed between a pair, never what keeps two tensors apart).
    Nothing else is tried.
    """
    pa = {t.value: t for t in a.planned}
    pb = {t.value: t for t in b.planned}
    pairs: list[tuple[str, int, int]] = []
    used_a: set[int] = set()
    used_b: set[int] = set()

    def take(by, va, vb):
        if va in pa and vb in pb and va not in used_a and vb not in used_b:
            pairs.append((by, va, vb))
            used_a.add(va)
            used_b.add(vb)

    def unique_names(planned):
        seen: dict[str, list[int]] = {}
        for t in planned.values():
            if t.name:
                seen.setdefault(t.name, []).append(t.value)
        return {n: vs[0] for n, vs in seen.items() if len(vs) == 1}

    na, nb = unique_names(pa), unique_names(pb)
    for n, va in na.items():
        if n in nb:
            take("name", va, nb[n])
    for by, sa, sb in (("input", a.inputs, b.inputs), ("output", a.outputs, b.outputs)):
        for x, y in zip(sa, sb):
            if x.kind == ValueKind.TENSOR and y.kind == ValueKind.TENSOR and x.planned and y.planned:
                take(by, x.value, y.value)
    if a.etrecord is not None and b.etrecord is not None:  # the FX node and module that write each tensor
        sa, sb = _unique_sources(a, pa), _unique_sources(b, pb)
        for k, va in sa.items():
            if k in sb:
                take("source", va, sb[k])
    ua, ub = instruction_uses(a.raw)[0], instruction_uses(b.raw)[0]
    ka = sorted(_keys(a, (t for v, t in pa.items() if v not in used_a), ua, instruction_targets(a.raw)))
    kb = sorted(_keys(b, (t for v, t in pb.items() if v not in used_b), ub, instruction_targets(b.raw)))
    for i, j in match_sequences([k for _, k in ka], [k for _, k in kb]):
        take("operators", ka[i][0][1], kb[j][0][1])
    matched = tuple(sorted((TensorMatch(by, pa[va], pb[vb], _changed(pa[va], pb[vb])) for by, va, vb in pairs),
                           key=lambda m: m.after.value))
    return (matched, tuple(t for v, t in pa.items() if v not in used_a),
            tuple(t for v, t in pb.items() if v not in used_b))


# ------------------------------------------------------------------------ methods
def method_diff(a: "Method", b: "Method", linked: tuple[frozenset[str], frozenset[str]] | None = None) -> MethodDiff:
    """Two versions of a method compared; ``linked``: the backends each whole program calls
    (``pair_delegates``)."""
    arenas_a = {x.mem_id: x for x in a.arenas}
    arenas_b = {x.mem_id: x for x in b.arenas}
    pad_a, pad_b = tail_paddings(a), tail_paddings(b)
    arenas = tuple(ArenaDiff(i, arenas_a.get(i), arenas_b.get(i), Change(pad_a.get(i), pad_b.get(i)))
                   for i in sorted(set(arenas_a) | set(arenas_b)))
    da, db = a.planned_bytes_by_device(), b.planned_bytes_by_device()
    by_device = tuple((d, Change(da.get(d, 0), db.get(d, 0))) for d in sorted(set(da) | set(db)))
    matched, only_a, only_b = match_tensors(a, b)
    return MethodDiff(
        a.name, arenas, Change(a.n_instructions, b.n_instructions), Change(len(a.planned), len(b.planned)),
        Change(a.planned_bytes, b.planned_bytes), by_device,
        Change(len(a.state), len(b.state)), Change(sum(t.nbytes for t in a.state), sum(t.nbytes for t in b.state)),
        matched, only_a, only_b, pair_delegates(a, b, linked))


# --------------------------------------------------------------------------- file
def _regions(p: "Pte", hashes: bool):
    """(region, backend) -> [bytes, rows], and ((region, name, duplicate_of), row) of each duplicate blob, read
    from the layout's columns (a file may hold 110,000 constants: records are made for what the diff keeps)."""
    layout = p.layout(hashes=hashes)
    by: dict[tuple[str, str], list[int]] = {}
    for key, n in zip(zip(layout.region, layout.backend), layout.bytes):
        acc = by.get(key)
        if acc is None:
            acc = by[key] = [0, 0]
        acc[0] += n
        acc[1] += 1
    dups = [((layout.region[i], layout.name[i], first), i) for i, first in enumerate(layout.duplicate_of)
            if first is not None]
    return by, dups, layout


def _file_diff(a: "Pte", b: "Pte", hashes: bool):
    ra, dup_a, la = _regions(a, hashes)
    rb, dup_b, lb = _regions(b, hashes)
    keys = list(dict.fromkeys([*ra, *rb]))
    regions = tuple(RegionDiff(r, n, Change(ra.get((r, n), [0])[0], rb.get((r, n), [0])[0]),
                               Change(ra.get((r, n), [0, 0])[1], rb.get((r, n), [0, 0])[1])) for r, n in keys)

    def only(dups, other, layout):
        other = {key for key, _ in other}
        return tuple(DuplicateBlob(layout.region[i], layout.name[i], layout.bytes[i], layout.duplicate_of[i])
                     for key, i in dups if key not in other)

    return regions, only(dup_b, dup_a, lb), only(dup_a, dup_b, la)


def _load_cost_diff(a: "Pte", b: "Pte") -> tuple[LoadCostDiff, ...]:
    ta, tb = a.load_totals(), b.load_totals()
    out = []
    for loader in LOADERS:
        for step in STEPS:
            sa, sb = ta.get(loader, {}).get(step, {}), tb.get(loader, {}).get(step, {})
            for dev in sorted(set(sa) | set(sb)):
                out.append(LoadCostDiff(loader, step, dev, Change(sa.get(dev, 0), sb.get(dev, 0))))
    return tuple(out)


# ---------------------------------------------------------------------- run time
def sizes_diff(before, after, order: Iterable[str] = (), host_dependent: Iterable[MemoryPart] = ()) -> SizesDiff:
    """Two ``pte_lab.sizes`` results side by side (read through ``methods``, ``skipped`` and each
    ``MethodSizes``' ``parts()`` and ``totals()``, each pool the sum of its :attr:`Pool.parts`; nothing is
    imported from the runtime)."""
    ma, mb = before.methods, after.methods
    sa, sb = before.skipped, after.skipped
    # what the file declares of a method a side did not size (``Sizes.declared``): its figures, basis "file"
    da, db = (_declared_parts(getattr(x, "declared", None) or {}) for x in (before, after))
    names = [n for n in dict.fromkeys([*order, *ma, *mb, *sa, *sb]) if n in ma or n in mb or n in sa or n in sb]
    parts, pools, totals = [], [], []

    def unmeasured(n, va, vb):
        first = va is None and (n in sa or n in ma)
        second = vb is None and (n in sb or n in mb)
        return "both" if first and second else "first" if first else "second" if second else None

    def sources(x, declared, n):
        if x is not None:
            return x.part_sources() if hasattr(x, "part_sources") else {}
        return {part: "file" for part in declared.get(n, {})}

    for n in names:
        xa, xb = ma.get(n), mb.get(n)
        pa = _parts(xa) if xa is not None else da.get(n, {})
        pb = _parts(xb) if xb is not None else db.get(n, {})
        fa, fb = sources(xa, da, n), sources(xb, db, n)
        sized = [*(pa if xa is not None else ()), *(pb if xb is not None else ())]  # a sized side's order first
        for part in dict.fromkeys([*sized, *pa, *pb, *(p for p in POOL_PARTS_ORDER if n in sa or n in sb)]):
            va, vb = pa.get(part), pb.get(part)
            parts.append(PartDiff(n, part, Change(va, vb), unmeasured(n, va, vb),
                                  (fa.get(part) if va is not None else None, fb.get(part) if vb is not None else None)))
        for pool in Pool:
            va, vb = _pool(pa, pool), _pool(pb, pool)
            pools.append(PartDiff(n, pool, Change(va, vb), unmeasured(n, va, vb)))
        # the totals where the records give them (a sizing read back from elsewhere may hold the parts alone)
        ta = xa.totals() if hasattr(xa, "totals") else {}
        tb = xb.totals() if hasattr(xb, "totals") else {}
        for target in dict.fromkeys([*ta, *tb]):
            va = ta[target].bytes if target in ta else None
            vb = tb[target].bytes if target in tb else None
            basis = tuple(None if t is None else str(getattr(t, "basis", "")) or None
                          for t in (ta.get(target), tb.get(target)))
            loader = next((getattr(t, "loader", None) for t in (ta.get(target), tb.get(target)) if t is not None),
                          None)
            totals.append(TotalDiff(n, f"total ({target})", Change(va, vb), unmeasured(n, va, vb),
                                    (basis[0], basis[1]), target, loader))
    cannot = tuple((side, n) for side, s in (("first", before), ("second", after))
                   for n in getattr(s, "cannot_run_here", ()))
    return SizesDiff(tuple(parts), tuple(pools), MappingProxyType(dict(before.skipped)),
                     MappingProxyType(dict(after.skipped)),
                     (before.executorch_version, after.executorch_version), tuple(host_dependent), tuple(totals),
                     cannot, (getattr(before, "kept", None), getattr(after, "kept", None)))


#: the parts a sized method has and the file alone cannot give, listed (as not measured) for a method a side
#: could not run, in ``MethodSizes.parts()`` order
POOL_PARTS_ORDER = (MemoryPart.METHOD_ALLOCATOR, MemoryPart.TEMP_ALLOCATOR)


def _parts(m) -> dict[MemoryPart, int | None]:
    """``m.parts()`` keyed by :class:`MemoryPart` (a sizing read back from elsewhere may key them by their words)."""
    return {MemoryPart(k): v for k, v in m.parts().items()}


def _pool(parts: Mapping[MemoryPart, int | None], pool: Pool) -> int | None:
    """The bytes of ``pool``: the sum of its parts (:attr:`Pool.parts`), None where one is not known."""
    got = [parts.get(p) for p in pool.parts]
    return None if any(v is None for v in got) else sum(v for v in got if v is not None)


def _declared_parts(declared: Mapping) -> dict[str, dict[MemoryPart, int | None]]:
    """Method -> the parts of ``MethodSizes.parts()`` its file declares, for the methods a side could not size
    (``Sizes.declared``: ``DeclaredSizes``): the planned arenas, and the delegates' scratch where every
    delegate's blob declares one (a blob that does not say leaves the scratch to running)."""
    out: dict[str, dict[MemoryPart, int | None]] = {}
    for n, d in declared.items():
        got: dict[MemoryPart, int | None] = {MemoryPart.PLANNED_ARENAS: sum(b for _, _, b in d.planned)}
        if all(scratch is not None for _, _, scratch, _ in d.delegates):
            got[MemoryPart.DELEGATE_SCRATCH] = d.delegate_scratch
        out[n] = got
    return out


def _check_limit(limit_pct) -> None:
    if limit_pct is None:
        raise ValueError("no budget: give the percentage (or hold the diff to one with Diff.with_budget)")
    if not limit_pct >= 0:
        raise ValueError(f"the budget must be a percentage of at least 0, not {limit_pct}")



# ------------------------------------------------------------------------ the diff
@paused_gc()  # the pairs and rows hold no cycles: see model.many_records
def diff_programs(a: "Pte", b: "Pte", methods: Iterable[str] | None = None, hashes: bool = True,
                  labels: tuple[str, str] | None = None) -> Diff:
    """What changed in memory from program ``a`` to program ``b`` (two opened :class:`Pte`).

    ``methods`` limits the per-method part (and planned bytes) to those names; each must be in
    one of the programs. ``hashes`` reads the blobs to find identical ones stored twice
    (``file_layout``); without it duplicates are not compared. ``labels`` name the two sides in
    the views (default: their paths, or ``<bytes>``).
    """
    names_a, names_b = list(a.methods), list(b.methods)
    if methods is not None:
        wanted = list(dict.fromkeys(methods))
        for n in wanted:
            if n not in a.methods and n not in b.methods:
                raise PteLabError(f"no method {n!r} in either program (first: {', '.join(names_a) or 'none'}; "
                                  f"second: {', '.join(names_b) or 'none'})")
        names_a = [n for n in names_a if n in wanted]
        names_b = [n for n in names_b if n in wanted]
    common = [n for n in names_a if n in b.methods]
    removed = tuple(n for n in names_a if n not in b.methods)
    added = tuple(n for n in names_b if n not in a.methods)
    regions, gained, lost = _file_diff(a, b, hashes)
    planned = Change(sum(a.methods[n].planned_bytes for n in names_a),
                     sum(b.methods[n].planned_bytes for n in names_b))
    labels = tuple(labels) if labels is not None else (a.path or "<bytes>", b.path or "<bytes>")
    linked = (linked_backends(a.methods.values()), linked_backends(b.methods.values()))
    return Diff(a, b, labels, Change(a.file_size, b.file_size), regions,
                gained, lost, _load_cost_diff(a, b),
                MappingProxyType({n: method_diff(a.methods[n], b.methods[n], linked) for n in common}), added, removed,
                planned)
