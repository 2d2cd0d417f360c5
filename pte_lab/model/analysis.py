"""What a method's instruction stream says about its planned memory: ``analyse``.

``analyse(plan)`` takes a decoded :class:`~pte_lab.format.RawPlan` and returns
an :class:`Analysis`: the planned tensors (role, lifetime, producer), the
views and their bases, and, computed when first asked for, the bytes alive in
each arena at each instruction, the arenas with their peak (the lower bound
of any plan) and the plan's conflicts. It is a pure function of the plan: the
result is immutable and depends on nothing else; the later stages are cached
on it, never written anywhere else.

Rules live in their own modules: roles in ``roles``, lifetimes and views
in :mod:`.lifetimes`, occupancy in ``occupancy``, overlaps in
:mod:`.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from .computed_once import cached_property
from itertools import repeat
from types import MappingProxyType
from collections.abc import Mapping

import numpy as np

from ..devices import CPU, Device
from ..errors import PteFormatError
from ..format import TENSOR_ALIGNMENT, RawPlan, TensorShapeDynamism, runtime_index_of
from ..printable import printable
from ..units import align_up
from ..vocabulary import CallTarget, DelegateCall, InstructionKind, MadeBy, OperatorTarget, Role, ViewOf
from ..call_targets import escaped_target
from .arrays import isin, unique
from .many_records import frozen_records, paused_gc
from .dtypes import MAX_BYTES, SCALAR_TYPES, scalar_type, short_shape
from .dtypes import nbytes as _nbytes
from .lifetimes import instruction_uses, lifetimes, resolve_views
from .occupancy import occupied_bytes
from .occupancy import peak_and_time
from .roles import declared_state, found_state, roles_of, state_values
from .validate import Conflict, find_conflicts

__all__ = ["analyse", "Analysis", "PlannedTensor", "Arena", "TENSOR_COLUMNS", "MAX_BYTES",
           "instruction_targets", "tensor_meta", "tail_paddings"]



@dataclass(frozen=True)
class PlannedTensor:
    """One tensor with an allocation in a planned arena (a row of ``Method.tensors``)."""

    value: int
    role: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    mem_id: int
    offset: int
    device: str
    first: int | None
    last: int | None
    #: the instruction that first writes it, and what that instruction calls (for a view, the value it views:
    #: a :class:`~pte_lab.call_targets.ViewOf`); its names from the file made safe to show
    producer: int | None
    op: MadeBy | None
    dynamic: bool
    name: str | None


#: columns of ``Method.tensors`` and of the JSON document's tensors, in order: the fields above
TENSOR_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(PlannedTensor))


@dataclass(frozen=True)
class Arena:
    """One planned memory arena of a method."""

    #: the file's numbering (``allocation_info.memory_id``); 0 is reserved
    mem_id: int
    #: what ExecuTorch's runtime and its error messages call it: mem_id - 1
    runtime_index: int
    #: bytes, from ``non_const_buffer_sizes``
    size: int
    #: the CPU or a device such as cuda:0 (``non_const_buffer_device``), named as ``"cpu"``, ``"cuda:0"``
    device: Device
    #: bytes alive at once at the worst instruction (aliases once): the lower bound
    peak_bytes: int
    #: size / peak_bytes: 1.0 means no plan with these lifetimes could be smaller, 2.0
    #: twice the bytes ever alive at once; None when nothing is alive here
    size_over_peak: float | None
    #: how many planned tensors live in this arena
    n_tensors: int
    method: str = ""

    def _repr_html_(self) -> str:
        from ..views.html import arena_html

        return arena_html(self)

    def __repr__(self) -> str:
        from ..views.text import arena_text

        return arena_text(self)


def tail_paddings(method) -> dict[int, int]:
    """Arena ``mem_id`` -> its bytes past its last tensor's end (that end rounded up to exir's
    ``TENSOR_ALIGNMENT``) for every arena of ``method`` (a :class:`~pte_lab.model.Method`): what exir adds past
    the end of every arena of a method with a delegate (an XNNPACK one: 64 B, its source giving no reason),
    not room the plan wastes. One pass over the planned tensors."""
    ends: dict[int, int] = {}
    for t in method.planned:
        end = t.offset + t.nbytes
        if end > ends.get(t.mem_id, 0):
            ends[t.mem_id] = end
    return {a.mem_id: max(0, a.size - align_up(ends.get(a.mem_id, 0), TENSOR_ALIGNMENT)) for a in method.arenas}


def instruction_targets(plan: RawPlan) -> list[CallTarget]:
    """What each instruction calls: an :class:`~pte_lab.call_targets.OperatorTarget`, a
    :class:`~pte_lab.call_targets.DelegateCall`, or (control flow) its :class:`~pte_lab.vocabulary.InstructionKind`
    (worked out once per plan; the list is the plan's: do not change it)."""
    got = plan.memo.get("targets")
    if got is None:
        got = plan.memo["targets"] = _instruction_targets(plan)
    return got


def _instruction_targets(plan: RawPlan) -> list[CallTarget]:
    ops = [OperatorTarget.from_table(n, o) for n, o in plan.operators]
    out: list[CallTarget] = []
    for ins in plan.instructions:
        if ins.kind == InstructionKind.KERNEL_CALL:
            out.append(ops[ins.target])
        elif ins.kind == InstructionKind.DELEGATE_CALL:
            out.append(DelegateCall(plan.delegates[ins.target].id))
        else:
            out.append(ins.kind)  # control flow: the kind is its target
    return out


def tensor_meta(plan: RawPlan, v: int):
    """(raw tensor, dtype name, bytes) of value ``v``; absurd sizes or offsets are a PteFormatError."""
    t = plan.values[v].tensor
    # the place is worded only for an error (a look asks this of every tensor)
    dtype, elsize = SCALAR_TYPES.get(t.scalar_type) or scalar_type(t.scalar_type, f"method {plan.name!r} value {v}")
    nb = _nbytes(t.sizes, elsize)
    if nb >= MAX_BYTES:
        raise PteFormatError(f"method {plan.name!r} value {v}: shape {short_shape(t.sizes)} claims 2**62 bytes or "
                             f"more, more than any arena can hold")
    if t.offset is not None and t.offset >= MAX_BYTES:
        raise PteFormatError(f"method {plan.name!r} value {v}: planned at offset {t.offset}, beyond any possible "
                             f"arena")
    return t, dtype, nb


@dataclass(frozen=True, eq=False)
class Analysis:
    """The planned memory of one method; make one with ``analyse``."""

    method: str
    n_instructions: int
    #: ``non_const_buffer_sizes`` (index 0 reserved) and the sparse device list
    buffer_sizes: tuple[int, ...]
    buffer_devices: Mapping[int, Device]
    #: view value -> the value whose bytes it shares
    views: Mapping[int, int]
    #: the planned tensors, in value order, one array per column of :data:`TENSOR_COLUMNS`:
    #: int64 (value, mem_id, offset, nbytes, first, last, producer), bool (dynamic) and object
    #: (role, dtype, shape, device, op, name); ``named`` says which have a lifetime: the others
    #: have first=1 > last=0 (never alive), and producer is -1 where there is none
    columns: Mapping[str, np.ndarray] = field(repr=False)

    @property
    def n_planned(self) -> int:
        return len(self.columns["value"])

    def column_lists(self) -> dict[str, list]:
        """:data:`TENSOR_COLUMNS` as Python lists, None where a tensor has no lifetime or producer."""
        c = self.columns
        out = {k: c[k].tolist() for k in TENSOR_COLUMNS}
        for k, known in (("first", c["named"]), ("last", c["named"]), ("producer", c["producer"] >= 0)):
            if not known.all():
                out[k] = [x if ok else None for x, ok in zip(out[k], known.tolist())]
        return out

    @cached_property
    def planned(self) -> tuple[PlannedTensor, ...]:
        """Every tensor with an allocation in a planned arena, in value order (made when first asked for)."""
        with paused_gc():
            return tuple(frozen_records(PlannedTensor, *self.column_lists().values()))

    def storage_of(self, value: int) -> int:
        """The value whose storage ``value`` uses: its base for a view (followed to the root), else itself."""
        while value in self.views:
            value = self.views[value]
        return value

    @cached_property
    def _by_arena(self) -> dict[int, np.ndarray]:
        """mem_id -> indices (into ``columns``) of its tensors; arenas without tensors are absent."""
        ids = self.columns["mem_id"]
        if not len(ids):
            return {}
        if len(ids) <= _FEW:  # a few tensors: grouped in plain Python (the same groups, in the same order)
            groups: dict[int, list[int]] = {}
            for i, m in enumerate(ids.tolist()):
                groups.setdefault(m, []).append(i)
            return {m: np.array(groups[m], dtype=np.intp) for m in sorted(groups)}
        order = np.argsort(ids, kind="stable")
        keys, starts = unique(ids[order], return_index=True)
        return dict(zip(keys.tolist(), np.split(order, starts[1:])))

    def _arena_columns(self, mem_id: int):
        c, sel = self.columns, self._by_arena.get(mem_id, np.zeros(0, dtype=np.int64))
        return c["offset"][sel], c["nbytes"][sel], c["first"][sel], c["last"][sel]

    def occupancy(self, mem_id: int) -> np.ndarray:
        """Bytes occupied in arena ``mem_id`` at times -1..N (index = time + 1); see ``occupancy``.

        Built on demand, one arena at a time: memory stays proportional to the
        instructions, not to arenas x instructions.
        """
        if not 1 <= mem_id < len(self.buffer_sizes):
            raise KeyError(f"method {self.method!r} has no arena with mem_id {mem_id}")
        return occupied_bytes(*self._arena_columns(mem_id), self.n_instructions)

    @cached_property
    def arenas(self) -> tuple[Arena, ...]:
        """The planned arenas, mem_id 1..n (mem_id 0 is reserved and never listed)."""
        ids = range(1, len(self.buffer_sizes))
        held = {m: len(rows) for m, rows in self._by_arena.items()}
        top = self._peaks
        peaks = [top[m][0] if m in top else 0 for m in ids]
        sizes = self.buffer_sizes[1:]
        with paused_gc():  # a file may list many arenas, most of them empty
            return tuple(frozen_records(Arena, ids, map(runtime_index_of, ids), sizes,
                                        map(self.buffer_devices.get, ids, repeat(CPU)), peaks,
                                        [size / p if p else None for size, p in zip(sizes, peaks)],
                                        map(held.get, ids, repeat(0)), repeat(self.method)))

    def peak_time(self, mem_id: int) -> int:
        """The first time (-1: the inputs written) arena ``mem_id``'s peak is reached: ``occupancy(mem_id).argmax()
        - 1``, kept from when the peak was measured (-1 for an arena nothing is alive in)."""
        return self._peaks.get(mem_id, (0, -1))[1]

    @cached_property
    def _peaks(self) -> dict[int, tuple[int, int]]:
        """mem_id -> (peak bytes, the first time reached) of each arena holding planned tensors."""
        top = self._lone_peaks()  # arenas of one tensor, at once (a file may list 100,000 of them)
        n_arenas = len(self.buffer_sizes)
        top.update((m, peak_and_time(*self._arena_columns(m), self.n_instructions))
                   for m, rows in self._by_arena.items() if len(rows) > 1 and 1 <= m < n_arenas)
        return top

    def _lone_peaks(self) -> dict[int, tuple[int, int]]:
        """mem_id -> (peak, time reached) of each arena holding one planned tensor: its bytes and its first
        instruction (clipped to the method), if it is ever alive; else (0, -1)."""
        c, n = self.columns, self.n_instructions
        if not self.n_planned:
            return {}
        if self.n_planned <= _FEW:  # a few tensors: in plain Python
            rows = list(zip(*(c[k].tolist() for k in ("mem_id", "first", "last", "nbytes"))))
            held: dict[int, int] = {}
            for m, *_ in rows:
                held[m] = held.get(m, 0) + 1
            return {m: ((nb, max(-1, f)) if f <= k and nb > 0 and f <= n and k >= -1 else (0, -1))
                    for m, f, k, nb in rows if held[m] == 1 and 1 <= m < len(self.buffer_sizes)}
        ids, counts = unique(c["mem_id"], return_counts=True)
        lone = isin(c["mem_id"], ids[counts == 1]) & (c["mem_id"] >= 1) & (c["mem_id"] < len(self.buffer_sizes))
        first, last, nb = c["first"][lone], c["last"][lone], c["nbytes"][lone]
        alive = (first <= last) & (nb > 0) & (first <= n) & (last >= -1)
        return dict(zip(c["mem_id"][lone].tolist(), zip(np.where(alive, nb, 0).tolist(),
                                                        np.where(alive, np.maximum(first, -1), -1).tolist())))

    @cached_property
    def conflicts(self) -> tuple[Conflict, ...]:
        """Planned tensors alive at once whose bytes overlap without sharing storage (should be empty).

        A view has its base's bytes, and its base is alive whenever it is: any
        conflict of a view is one of its base, so views are left out (however
        many views one base has, the check stays one entry per storage).
        """
        c = self.columns
        if not self.n_planned:
            return ()
        keep = ~isin(c["value"], np.fromiter(self.views, np.int64, len(self.views)))
        return tuple(find_conflicts(*(c[k][keep] for k in ("value", "mem_id", "offset", "nbytes", "first", "last")),
                                    storage=c["value"][keep]))


def analyse(plan: RawPlan) -> Analysis:
    """Roles, lifetimes, views and producers of every planned tensor of ``plan``."""
    values = planned_values(plan)
    if not len(values):  # nothing planned (a metadata method such as get_max_seq_len): no roles, lifetimes, views
        return _analysis(plan, {}, {k: np.zeros(0, dtype=kind) for k, kind in _EMPTY.items()})
    declared = declared_state(plan)
    uses = instruction_uses(plan)
    first, last = lifetimes(plan, declared, uses)
    found = found_state(plan, uses[0], first, declared)
    views = resolve_views(plan, first, last, set(plan.inputs) | declared | found)
    state = state_values(declared, found, views)
    n_ins = len(plan.instructions)
    for v in state - declared:  # found from how the instructions use it: alive over every call
        first[v], last[v] = -1, n_ins
    columns = _record_columns(plan, values)
    columns.update(_lifetime_columns(values, first, last))
    columns["role"] = roles_of(values, inputs=plan.inputs, outputs=plan.outputs, state=state,
                               named=columns["named"], views=views)
    columns.update(_producer_columns(plan, values, columns["role"], uses[0], columns, views))
    return _analysis(plan, views, columns)


#: planned tensors below which a method's arenas are grouped and measured in plain Python
_FEW = 16

#: the columns' kinds (see :attr:`Analysis.columns`), for a method with no planned tensor
_EMPTY = {**dict.fromkeys(("value", "mem_id", "offset", "nbytes", "first", "last", "producer"), np.int64),
          **dict.fromkeys(("dynamic", "named"), bool),
          **dict.fromkeys(("role", "dtype", "shape", "device", "op", "name"), object)}


def _analysis(plan: RawPlan, views: dict, columns: dict) -> Analysis:
    return Analysis(plan.name, len(plan.instructions), tuple(plan.buffer_sizes),
                    MappingProxyType(dict(plan.buffer_devices)), MappingProxyType(views), MappingProxyType(columns))


def planned_values(plan: RawPlan) -> np.ndarray:
    """The values with an allocation in a planned arena, in order (one look per distinct record)."""
    planned = np.fromiter((r.tensor is not None and r.tensor.mem_id is not None for r in plan.records), bool,
                          len(plan.records))
    return np.flatnonzero(planned[plan.record_of])


def _record_columns(plan: RawPlan, values: np.ndarray) -> dict[str, np.ndarray]:
    """What each planned value's tensor record says (worked out once per record, in order of first use:
    absurd sizes or offsets are refused naming the first value with them)."""
    records, first_at, which = unique(plan.record_of[values], return_index=True, return_inverse=True)
    rows = []
    for _record, v in zip(records.tolist(), values[first_at].tolist()):
        t, dtype, nb = tensor_meta(plan, v)
        rows.append((t.mem_id, t.offset, nb, dtype, t.sizes, t.device,
                     t.shape_dynamism != TensorShapeDynamism.STATIC, None if t.fqn is None else printable(t.fqn)))
    per = list(zip(*rows)) or [()] * 8
    kinds = (np.int64, np.int64, np.int64, object, object, object, bool, object)
    names = ("mem_id", "offset", "nbytes", "dtype", "shape", "device", "dynamic", "name")
    out = {k: np.fromiter(col, kind, len(rows))[which] for k, col, kind in zip(names, per, kinds)}
    out["value"] = values
    return out


def _lifetime_columns(values: np.ndarray, first: dict, last: dict) -> dict[str, np.ndarray]:
    """first/last of each value, and ``named``: whether it has a lifetime (first=1 > last=0 where not)."""
    vs = values.tolist()
    return {"first": np.fromiter(map(first.get, vs, repeat(1)), np.int64, len(vs)),
            "last": np.fromiter(map(last.get, vs, repeat(0)), np.int64, len(vs)),
            "named": np.fromiter(map(first.__contains__, vs), bool, len(vs))}


def _producer_columns(plan, values, role, first_use, columns, views) -> dict[str, np.ndarray]:
    """The instruction that first writes each value (-1: none) and what it calls; a view names its base
    (and what wrote the base)."""
    n = len(values)
    producer = np.full(n, -1, dtype=np.int64)
    op = np.full(n, None, dtype=object)
    is_view = isin(values, np.fromiter(views, np.int64, len(views)))
    made = np.flatnonzero(((role == Role.INTERMEDIATE) | (role == Role.OUTPUT)) & ~is_view)
    at = np.fromiter(map(first_use.get, values[made].tolist(), repeat(-1)), np.int64, len(made))
    made, at = made[at >= 0], at[at >= 0]
    if len(made):
        producer[made] = at
        targets = instruction_targets(plan)
        shown = {t: escaped_target(t) for t in set(targets)}  # names from the file, terminal-safe: once each
        op[made] = np.array([shown[t] for t in targets], dtype=object)[at]
    if not views:
        return {"producer": producer, "op": op}
    seen = np.flatnonzero(is_view)
    starts = columns["first"][seen]
    known = columns["named"][seen] & (starts >= 0)
    producer[seen[known]] = starts[known]
    rows = np.searchsorted(values, [views[v] for v in values[seen].tolist()])  # bases are planned, never views
    for i, base, row in zip(seen.tolist(), values[rows].tolist(), rows.tolist()):
        op[i] = ViewOf(base, op[row] if role[i] == Role.VIEW and op[row] else None)
    return {"producer": producer, "op": op}
