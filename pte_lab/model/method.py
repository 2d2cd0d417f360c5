"""One method of a program: a thin front over the file's facts and their analysis.

What the file says (instructions, inputs, outputs, delegates, operators) is
decoded here; what follows from it (roles, lifetimes, views, arenas,
occupancy, conflicts) comes from :func:`pte_lab.model.analysis.analyse`, and
findings from :mod:`pte_lab.model.findings`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PteFormatError
from ..format import RawPlan, TensorShapeDynamism
from ..vocabulary import CallTarget, DelegateCall, OperatorTarget, Role, InstructionKind
from .analysis import TENSOR_COLUMNS, Analysis, Arena, PlannedTensor, analyse, instruction_targets
from .analysis import tail_paddings, tensor_meta
from .attribution import SOURCE_COLUMNS, TensorSource, attribute, attribute_stacktraces
from .many_records import paused_gc
from .computed_once import cached_property
from .ethos_u import Blobs, DelegateMemory, delegate_memory
from .findings import Finding, method_findings, operator_findings, plan_findings
from .lifetimes import backward_jumps
from .modules import ModuleMemory, module_memory
from .peak import PeakStory, explain_peak
from .validate import Conflict

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Method", "Arena", "PlannedTensor", "IOSpec", "Instruction", "Delegate", "TENSOR_COLUMNS"]

#: how many arenas' occupancy curves a method keeps (each is 8 bytes per instruction)
_CURVES_KEPT = 8


@dataclass(frozen=True)
class IOSpec:
    """A method input or output."""

    position: int
    value: int
    kind: str  # "Tensor", "Int", ...
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    nbytes: int | None = None
    #: True: lives in a planned arena; False: the caller provides its memory
    planned: bool = False
    mem_id: int | None = None
    offset: int | None = None
    device: str = "cpu"
    dynamic: bool = False
    #: an Int, Bool or Double input's or output's value in the file (the only one ExecuTorch's set_input takes
    #: for an input; what a method without instructions returns, export_llm's get_max_seq_len...)
    scalar: int | float | bool | None = None


@dataclass(frozen=True)
class Instruction:
    """One instruction of a method's execution plan: its kind (KernelCall, DelegateCall, MoveCall,
    JumpFalseCall, FreeCall), what it calls and the values it names."""
    index: int
    kind: InstructionKind
    #: an :class:`~pte_lab.call_targets.OperatorTarget` (``"aten::add.out"``), a
    #: :class:`~pte_lab.call_targets.DelegateCall` (``"delegate:<backend>"``), or the kind for control flow
    target: CallTarget
    args: tuple[int, ...]
    destination: int | None = None

    @property
    def operator(self) -> OperatorTarget | None:
        """The operator a kernel call runs; None for any other instruction."""
        return self.target if isinstance(self.target, OperatorTarget) else None

    @property
    def backend(self) -> str | None:
        """The backend a delegate call hands its work to; None for any other instruction."""
        return self.target.backend if isinstance(self.target, DelegateCall) else None


@dataclass(frozen=True)
class Delegate:
    """A delegate of a method (:attr:`Method.delegates`): its backend, compile specs, target device, and where
    its blob is stored (inline or in a segment) and its bytes."""
    index: int
    backend: str
    compile_specs: dict
    #: the ``target_device`` compile spec, when the delegate names one
    target_device: str | None
    location: str  # "inline" | "segment"
    size: int


def _spec_value(v: bytes):
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        return v
    return s if s.isprintable() else v


class Method:
    """A method (ExecutionPlan) of a ``.pte``: read from the file, nothing loaded.

    Attributes are computed on first use and cached.
    """

    def __init__(self, raw: RawPlan, index: int = 0, blobs: Blobs | None = None, record=None):
        self._raw = raw
        self.index = index
        self.name: str = raw.name
        self._blobs = blobs
        #: this method's part of the ETRecord given with the program (a ``MethodRecord``), or None
        self.etrecord = record

    # ------------------------------------------------------------ the file
    @property
    def raw(self) -> RawPlan:
        return self._raw

    @property
    def n_instructions(self) -> int:
        return len(self._raw.instructions)

    @property
    def n_values(self) -> int:
        return len(self._raw.values)

    @cached_property
    def operators(self) -> list[OperatorTarget]:
        return [OperatorTarget.from_table(n, o) for n, o in self._raw.operators]

    @cached_property
    def delegates(self) -> list[Delegate]:
        out = []
        for i, d in enumerate(self._raw.delegates):
            specs = {k: _spec_value(v) for k, v in d.compile_specs.items()}
            td = specs.get("target_device")
            out.append(Delegate(i, d.id, specs, td if isinstance(td, str) else None, d.location, d.size))
        return out

    @cached_property
    def delegate_memory(self) -> list[DelegateMemory]:
        """What each delegate's blob declares about memory (see :mod:`pte_lab.model.ethos_u`): Ethos-U blobs
        are read (command stream, weights, scratch and the allocator it comes from, Vela's I/O descriptors);
        other backends' are sized only."""
        return delegate_memory(self._raw, self._blobs, [d.compile_specs for d in self.delegates])

    @property
    def delegate_temp_bytes(self) -> int:
        """The most any one delegate call takes from the temp allocator (the scratch), from the blobs."""
        return max((d.temp_bytes for d in self.delegate_memory), default=0)

    @cached_property
    def instructions(self) -> list[Instruction]:
        targets = instruction_targets(self._raw)
        return [Instruction(i, ins.kind, targets[i], ins.args,
                            ins.destination if ins.kind == InstructionKind.JUMP_FALSE_CALL else None)
                for i, ins in enumerate(self._raw.instructions)]

    @cached_property
    def operator_counts(self) -> dict[CallTarget, int]:
        """How many instructions call each operator or delegate backend."""
        return dict(Counter(i.target for i in self.instructions if i.kind in (InstructionKind.KERNEL_CALL, InstructionKind.DELEGATE_CALL)))

    @property
    def has_loops(self) -> bool:
        return bool(backward_jumps(self._raw))

    def _io(self, indices) -> list[IOSpec]:
        out = []
        for pos, v in enumerate(indices):
            val = self._raw.values[v]
            if val.tensor is None:
                out.append(IOSpec(pos, v, val.kind, scalar=val.scalar))
                continue
            t, dtype, nb = tensor_meta(self._raw, v)
            out.append(IOSpec(pos, v, "Tensor", dtype, t.sizes, nb, t.mem_id is not None,
                              t.mem_id, t.offset, t.device,
                              t.shape_dynamism != TensorShapeDynamism.STATIC))
        return out

    @cached_property
    def inputs(self) -> list[IOSpec]:
        return self._io(self._raw.inputs)

    @cached_property
    def outputs(self) -> list[IOSpec]:
        return self._io(self._raw.outputs)

    @property
    def n_arenas(self) -> int:
        """How many planned arenas the method has (``non_const_buffer_sizes`` less the reserved index 0)."""
        return max(0, len(self._raw.buffer_sizes) - 1)

    @property
    def planned_bytes(self) -> int:
        return sum(self._raw.buffer_sizes[1:])

    @property
    def devices(self) -> set[str]:
        """Non-CPU devices this method's arenas live on."""
        return set(self._raw.buffer_devices.values())

    @property
    def is_device_method(self) -> bool:
        return bool(self._raw.buffer_devices)

    # ------------------------------------------------------------ analysis
    @cached_property
    def analysis(self) -> Analysis:
        """Roles, lifetimes, views, arenas, occupancy and conflicts (see :mod:`pte_lab.model.analysis`)."""
        with paused_gc():
            return analyse(self._raw)

    @property
    def planned(self) -> tuple[PlannedTensor, ...]:
        """Every tensor with an allocation in a planned arena, in value order."""
        return self.analysis.planned

    @cached_property
    def tensors(self) -> "pd.DataFrame":
        """One row per planned tensor (see :data:`~pte_lab.model.analysis.TENSOR_COLUMNS`).

        ``first``/``last`` follow the lifetime convention of
        :mod:`pte_lab.model.lifetimes`; ``producer`` is the instruction that
        first writes the value's bytes and ``op`` what it calls. A static view has no instruction of its own: its
        ``producer`` is the instruction that writes its base, and its ``op`` reads ``view of v69 (aten::...)``.
        """
        import pandas as pd

        c = self.analysis.columns
        if not len(c["value"]):
            return pd.DataFrame(columns=list(TENSOR_COLUMNS)).astype(dict.fromkeys(("first", "last", "producer"),
                                                                                   "Int64"))
        known = {"first": c["named"], "last": c["named"], "producer": c["producer"] >= 0}
        frame = pd.DataFrame({k: pd.arrays.IntegerArray(c[k].copy(), ~known[k]) if k in known else c[k]
                              for k in TENSOR_COLUMNS})
        if self.sources is not None:  # with an ETRecord: the node, module and source line of each
            for k in SOURCE_COLUMNS:
                frame[k] = [s.column(k) for s in self.sources]
        return frame

    @cached_property
    def sources(self) -> tuple[TensorSource, ...] | None:
        """With an ETRecord (``pte_lab.open(path, etrecord=...)``): where each planned tensor comes from in
        the model's source, in :attr:`planned` order (its FX node, innermost module path and type, the
        user's source line; see :mod:`pte_lab.model.attribution`). Without one, from the stack traces a program
        exported with ``emit_stacktrace=True`` carries (the source line only); None with neither. Raises
        :class:`~pte_lab.errors.ETRecordError` when the ETRecord is another export's."""
        if self.etrecord is not None:
            return attribute(self, self.etrecord)
        return attribute_stacktraces(self)

    @cached_property
    def peak(self) -> PeakStory | None:
        """What makes the peak of this method's largest arena: the tensors alive there, grouped, and the export
        choices behind them with the bytes at stake (:mod:`pte_lab.model.peak`); None without live tensors."""
        return explain_peak(self)

    @cached_property
    def modules(self) -> ModuleMemory:
        """Memory by module (:mod:`pte_lab.model.modules`): each level of the module hierarchy with the bytes
        it holds at the peak, the most it holds at once in each arena over the run, and the constants, named
        data and delegate blobs its calls read. Raises :class:`~pte_lab.model.modules.NoModulesError` (saying
        what to pass) without an ETRecord."""
        return module_memory(self)

    def by_module(self) -> "pd.DataFrame":
        """:attr:`modules` as a table: one row per module (every level of its path: ``layers``, ``layers.0``,
        ``layers.0.attention``...), parents first; bytes count the module and all inside it."""
        return self.modules.frame()

    @cached_property
    def _source_index(self) -> dict[int, TensorSource]:
        return {s.value: s for s in self.sources or ()}

    def source_of(self, value: int) -> TensorSource | None:
        """:attr:`sources`' entry for planned value ``value`` (None without an ETRecord)."""
        return self._source_index.get(value)

    @cached_property
    def state(self) -> tuple[PlannedTensor, ...]:
        """The state this method keeps between calls (role ``mutable_buffer``: mutable buffers, KV caches),
        each storage once: views of state share their base's bytes and are not listed again."""
        return tuple(t for t in self.planned if t.role == Role.MUTABLE_BUFFER and self.storage_of(t.value) == t.value)

    def occupancy(self, mem_id: int) -> np.ndarray:
        """Occupied bytes of arena ``mem_id`` at times -1..N (index = time + 1)."""
        return self._curves(mem_id)

    @cached_property
    def _curves(self):
        """The last few arenas' occupancy curves, kept: memory ~ instructions, whatever the arenas."""
        return lru_cache(maxsize=_CURVES_KEPT)(self.analysis.occupancy)

    @property
    def arenas(self) -> list[Arena]:
        """The planned arenas, mem_id 1..n (mem_id 0 is reserved and never listed)."""
        return list(self.analysis.arenas)

    def arena(self, mem_id: int) -> Arena:
        arenas = self.analysis.arenas  # mem_id 1..n, in order: arena k is at k - 1
        try:
            a = arenas[mem_id - 1] if 1 <= mem_id <= len(arenas) else None
        except TypeError:
            a = None
        if a is not None and a.mem_id == mem_id:
            return a
        raise KeyError(f"method {self.name!r} has no arena with mem_id {mem_id} "
                       f"(it has {[a.mem_id for a in self.analysis.arenas]})")

    def tail_padding(self, mem_id: int) -> int:
        """Bytes of arena ``mem_id`` past its last tensor (that end rounded up to exir's
        ``TENSOR_ALIGNMENT``, 16): what exir adds past the end of every arena of a method with a
        delegate (an XNNPACK one: 64, its source giving no reason), not room the plan wastes."""
        self.arena(mem_id)  # an arena the method does not have: its error
        return tail_paddings(self)[mem_id]

    def waste(self, mem_id: int) -> int:
        """Bytes of arena ``mem_id`` the plan spends beyond its peak live bytes, its :meth:`tail_padding` left
        out (0 where no tensor is alive in it, or where nothing is spent beyond them): the room the plan wastes
        above the bound no plan with these lifetimes goes below (``plot.arena_layout`` brackets it)."""
        a = self.arena(mem_id)
        return max(0, a.size - self.tail_padding(mem_id) - a.peak_bytes) if a.peak_bytes else 0

    def planned_bytes_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.analysis.arenas:
            out[a.device] = out.get(a.device, 0) + a.size
        return out

    def storage_of(self, value: int) -> int:
        """The value whose storage ``value`` uses: its base for a view (followed to the root), else itself."""
        return self.analysis.storage_of(value)

    @property
    def conflicts(self) -> list[Conflict]:
        """Planned tensors alive at once whose bytes overlap (should be empty)."""
        return list(self.analysis.conflicts)

    def validate(self) -> list[Finding]:
        """Plan problems: overlapping live tensors, tensors outside their arena."""
        a = self.analysis
        return plan_findings(self.name, a.columns, a.buffer_sizes, a.conflicts)

    def findings(self, schemas: dict | None = None) -> list[Finding]:
        """Device findings and plan validation for this method.

        ``schemas`` (operator -> its schema, or None when unknown: see
        ``pte_lab.runtime.schemas.operator_schemas``, which needs torch)
        adds each KernelCall's arguments against its operator's schema.
        """
        if schemas is None:
            return list(self._findings)
        return list(self._findings) + operator_findings(self, schemas)

    @cached_property
    def _findings(self) -> tuple[Finding, ...]:
        return tuple(method_findings(self))

    # --------------------------------------------------------------- views
    def _repr_html_(self) -> str:
        from ..views.html import method_html, unreadable_html

        try:
            return method_html(self)
        except PteFormatError as exc:
            return unreadable_html(repr(self), exc)

    def __repr__(self) -> str:
        from ..views.text import method_text

        try:
            return method_text(self)
        except PteFormatError as exc:
            return f"<Method {self.name!r}: unreadable: {exc}>"
