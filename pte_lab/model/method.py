"""One method of a program: its values, instructions, arenas and planned tensors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PteFormatError
from ..format import RawPlan
from .dtypes import nbytes as _nbytes
from .dtypes import scalar_type
from .findings import Finding
from .lifetimes import backward_jumps, instruction_uses, lifetimes, resolve_views
from .occupancy import occupancy as _occupancy
from .validate import Conflict, find_conflicts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: no tensor, offset or arena can reach this many bytes (int64 arithmetic stays exact)
MAX_BYTES = 2**62

#: columns of :attr:`Method.tensors`, in order
TENSOR_COLUMNS = (
    "value", "role", "dtype", "shape", "nbytes", "mem_id", "offset", "device",
    "first", "last", "producer", "op", "dynamic", "name",
)


@dataclass(frozen=True)
class Arena:
    """One planned memory arena of a method."""

    #: the file's numbering (``allocation_info.memory_id``); 0 is reserved
    mem_id: int
    #: what ExecuTorch's runtime and its error messages call it: mem_id - 1
    runtime_index: int
    #: bytes, from ``non_const_buffer_sizes``
    size: int
    #: "cpu" or a device such as "cuda:0" (``non_const_buffer_device``)
    device: str
    #: bytes alive at once at the worst instruction (aliases once): the lower bound
    peak_bytes: int
    #: size / peak_bytes (1.0 = no plan could be smaller); None when nothing is planned here
    efficiency: float | None
    #: planned tensors in this arena
    tensors: int
    method: str = ""

    def _repr_html_(self) -> str:
        from ..views.html import arena_html

        return arena_html(self)

    def __repr__(self) -> str:
        from ..views.text import arena_text

        return arena_text(self)


@dataclass(frozen=True)
class PlannedTensor:
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
    producer: int | None
    op: str | None
    dynamic: bool
    name: str | None


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


@dataclass(frozen=True)
class Instruction:
    index: int
    kind: str  # KernelCall | DelegateCall | MoveCall | JumpFalseCall | FreeCall
    #: operator name ("aten::add.out"), "delegate:<backend>", or the kind for control flow
    target: str
    args: tuple[int, ...]
    destination: int | None = None


@dataclass(frozen=True)
class Delegate:
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

    def __init__(self, raw: RawPlan, index: int = 0):
        self._raw = raw
        self.index = index
        self.name: str = raw.name

    # ------------------------------------------------------------------ basics
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
    def operators(self) -> list[str]:
        return [f"{n}.{o}" if o else n for n, o in self._raw.operators]

    @cached_property
    def delegates(self) -> list[Delegate]:
        out = []
        for i, d in enumerate(self._raw.delegates):
            specs = {k: _spec_value(v) for k, v in d.compile_specs.items()}
            td = specs.get("target_device")
            out.append(Delegate(i, d.id, specs, td if isinstance(td, str) else None, d.location, d.size))
        return out

    @cached_property
    def instructions(self) -> list[Instruction]:
        ops, dels = self.operators, self._raw.delegates
        out = []
        for i, ins in enumerate(self._raw.instructions):
            if ins.kind == "KernelCall":
                target = ops[ins.target]
            elif ins.kind == "DelegateCall":
                target = f"delegate:{dels[ins.target].id}"
            else:
                target = ins.kind
            dest = ins.destination if ins.kind == "JumpFalseCall" else None
            out.append(Instruction(i, ins.kind, target, ins.args, dest))
        return out

    @cached_property
    def operator_counts(self) -> dict[str, int]:
        """How many instructions call each operator or delegate backend."""
        return dict(Counter(i.target for i in self.instructions if i.kind in ("KernelCall", "DelegateCall")))

    @property
    def has_loops(self) -> bool:
        return bool(backward_jumps(self._raw))

    def _tensor_meta(self, v: int):
        t = self._raw.values[v].tensor
        where = f"method {self.name!r} value {v}"
        dtype, elsize = scalar_type(t.scalar_type, where)
        nb = _nbytes(t.sizes, elsize)
        if nb >= MAX_BYTES:
            raise PteFormatError(f"{where}: shape {list(t.sizes)} claims {nb} bytes, more than any arena can hold")
        if t.offset is not None and t.offset >= MAX_BYTES:
            raise PteFormatError(f"{where}: planned at offset {t.offset}, beyond any possible arena")
        return t, dtype, nb

    def _io(self, indices) -> list[IOSpec]:
        out = []
        for pos, v in enumerate(indices):
            val = self._raw.values[v]
            if val.tensor is None:
                out.append(IOSpec(pos, v, val.kind))
                continue
            t, dtype, nb = self._tensor_meta(v)
            out.append(IOSpec(pos, v, "Tensor", dtype, t.sizes, nb, t.mem_id is not None,
                              t.mem_id, t.offset, t.device, t.shape_dynamism != 0))
        return out

    @cached_property
    def inputs(self) -> list[IOSpec]:
        return self._io(self._raw.inputs)

    @cached_property
    def outputs(self) -> list[IOSpec]:
        return self._io(self._raw.outputs)

    # --------------------------------------------------------------- analysis
    @cached_property
    def _persistent(self) -> set[int]:
        """Planned values that hold state between calls (mutable buffers)."""
        raw = self._raw
        io = set(raw.inputs) | set(raw.outputs)
        persistent = set()
        for v, val in enumerate(raw.values):
            t = val.tensor
            if t is None or t.mem_id is None or v in io:
                continue
            if t.data_buffer_idx > 0 or t.fqn:
                persistent.add(v)
        # In-place kernels (``aten::copy_``...) write their first argument and
        # return it: a planned non-I/O value written that way is a buffer.
        ops = raw.operators
        for ins in raw.instructions:
            if ins.kind == "KernelCall" and len(ins.args) >= 2:
                name, overload = ops[ins.target]
                if name.endswith("_") and not overload.endswith("out") and ins.args[0] == ins.args[-1]:
                    v = ins.args[0]
                    t = raw.values[v].tensor
                    if t is not None and t.mem_id is not None and v not in io:
                        persistent.add(v)
        return persistent

    @cached_property
    def planned(self) -> list[PlannedTensor]:
        """Every tensor with an allocation in a planned arena, in value order."""
        raw = self._raw
        first, last = lifetimes(raw, self._persistent)
        views = resolve_views(raw, first, last, set(raw.inputs) | self._persistent)
        self._views = views
        uses_first = instruction_uses(raw)[0]  # first instruction naming each value
        inputs, outputs = set(raw.inputs), set(raw.outputs)
        instrs = self.instructions
        out = []
        for v, val in enumerate(raw.values):
            t = val.tensor
            if t is None or t.mem_id is None:
                continue
            _, dtype, nb = self._tensor_meta(v)
            if v in self._persistent:
                role = "mutable_buffer"
            elif v in inputs and v in outputs:
                role = "input_output"
            elif v in inputs:
                role = "input"
            elif v in outputs:
                role = "output"
            elif v in first:
                role = "intermediate"
            else:
                role = "unused"
            producer = op = None
            if v in views:
                role = "view" if role == "intermediate" else role
                producer = first.get(v) if first.get(v, -1) >= 0 else None
                op = f"view of v{views[v]}"
            elif role in ("intermediate", "output") and v in uses_first:
                producer = uses_first[v]
                op = instrs[producer].target
            out.append(PlannedTensor(
                v, role, dtype, t.sizes, nb, t.mem_id, t.offset, t.device,
                first.get(v), last.get(v), producer, op, t.shape_dynamism != 0, t.fqn,
            ))
        return out

    @cached_property
    def _columns(self) -> dict[str, np.ndarray]:
        p = self.planned
        return {
            "value": np.fromiter((t.value for t in p), np.int64, len(p)),
            "mem_id": np.fromiter((t.mem_id for t in p), np.int64, len(p)),
            "offset": np.fromiter((t.offset for t in p), np.int64, len(p)),
            "nbytes": np.fromiter((t.nbytes for t in p), np.int64, len(p)),
            # tensors without a lifetime are treated as never alive
            "first": np.fromiter((t.first if t.first is not None else 1 for t in p), np.int64, len(p)),
            "last": np.fromiter((t.last if t.last is not None else 0 for t in p), np.int64, len(p)),
        }

    @cached_property
    def tensors(self) -> "pd.DataFrame":
        """One row per planned tensor (see :data:`TENSOR_COLUMNS`).

        ``first``/``last`` follow the lifetime convention of
        :mod:`pte_lab.model.lifetimes`; ``producer`` is the instruction that
        first writes the value and ``op`` what it calls.
        """
        import pandas as pd

        rows = {c: [getattr(t, c) for t in self.planned] for c in TENSOR_COLUMNS}
        df = pd.DataFrame(rows, columns=list(TENSOR_COLUMNS))
        for c in ("first", "last", "producer"):
            df[c] = df[c].astype("Int64")
        return df

    def occupancy(self, mem_id: int) -> np.ndarray:
        """Occupied bytes of arena ``mem_id`` at times -1..N (index = time + 1)."""
        return self._occupancy[mem_id]

    @cached_property
    def _occupancy(self) -> dict[int, np.ndarray]:
        c = self._columns
        out = {}
        for mem_id in range(1, len(self._raw.buffer_sizes)):
            sel = c["mem_id"] == mem_id
            out[mem_id] = _occupancy(c["offset"][sel], c["nbytes"][sel], c["first"][sel],
                                     c["last"][sel], self.n_instructions)
        return out

    @cached_property
    def arenas(self) -> list[Arena]:
        """The planned arenas, mem_id 1..n (mem_id 0 is reserved and never listed)."""
        c = self._columns
        out = []
        sizes = self._raw.buffer_sizes
        for mem_id in range(1, len(sizes)):
            peak = int(self._occupancy[mem_id].max())
            size = sizes[mem_id]
            eff = size / peak if peak else None
            out.append(Arena(mem_id, mem_id - 1, size, self._raw.buffer_devices.get(mem_id, "cpu"),
                             peak, eff, int((c["mem_id"] == mem_id).sum()), self.name))
        return out

    def arena(self, mem_id: int) -> Arena:
        for a in self.arenas:
            if a.mem_id == mem_id:
                return a
        raise KeyError(f"method {self.name!r} has no arena with mem_id {mem_id} "
                       f"(it has {[a.mem_id for a in self.arenas]})")

    @property
    def planned_bytes(self) -> int:
        return sum(self._raw.buffer_sizes[1:])

    def planned_bytes_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.arenas:
            out[a.device] = out.get(a.device, 0) + a.size
        return out

    @property
    def devices(self) -> set[str]:
        """Non-CPU devices this method's arenas live on."""
        return set(self._raw.buffer_devices.values())

    @property
    def is_device_method(self) -> bool:
        return bool(self._raw.buffer_devices)

    def storage_of(self, value: int) -> int:
        """The value whose storage ``value`` uses: its base for a view (followed to the root), else itself."""
        self.planned
        while value in self._views:
            value = self._views[value]
        return value

    @cached_property
    def conflicts(self) -> list[Conflict]:
        """Planned tensors alive at once whose bytes overlap (should be empty)."""
        c = self._columns
        storage = [self.storage_of(int(v)) for v in c["value"]]
        return find_conflicts(c["value"], c["mem_id"], c["offset"], c["nbytes"], c["first"], c["last"],
                              storage=storage)

    def validate(self) -> list[Finding]:
        """Plan problems: overlapping live tensors, tensors outside their arena."""
        out = []
        sizes = self._raw.buffer_sizes
        for t in self.planned:
            if not 1 <= t.mem_id < len(sizes):
                out.append(Finding("error", "unknown_arena", self.name,
                                   f"value {t.value} is planned in mem_id {t.mem_id}, which this method "
                                   f"does not have (arenas 1..{len(sizes) - 1})", {"value": t.value}))
            elif t.offset + t.nbytes > sizes[t.mem_id]:
                out.append(Finding("error", "outside_arena", self.name,
                                   f"value {t.value} occupies bytes [{t.offset}, {t.offset + t.nbytes}) "
                                   f"past the end of arena {t.mem_id} ({sizes[t.mem_id]} bytes)",
                                   {"value": t.value}))
        for c in self.conflicts:
            out.append(Finding("error", "plan_overlap", self.name, str(c),
                               {"mem_id": c.mem_id, "values": (c.a, c.b)}))
        return out

    def findings(self) -> list[Finding]:
        """Device findings and plan validation for this method."""
        return list(self._findings)

    @cached_property
    def _findings(self) -> list[Finding]:
        out = []
        arena_dev = {a.mem_id: a.device for a in self.arenas}
        in_host = [t for t in self.planned if t.device != "cpu" and arena_dev.get(t.mem_id) == "cpu"]
        if in_host:
            devs = sorted({t.device for t in in_host})
            out.append(Finding(
                "warning", "device_tag_in_host_arena", self.name,
                f"{len(in_host)} tensors tagged for {', '.join(devs)} are planned in host arenas "
                f"(what enable_non_cpu_memory_planning=False produces): a device backend receives "
                f"host pointers for them", {"values": [t.value for t in in_host]}))
        on_dev = [t for t in self.planned if t.device == "cpu" and arena_dev.get(t.mem_id, "cpu") != "cpu"]
        if on_dev:
            out.append(Finding("warning", "host_tensor_in_device_arena", self.name,
                               f"{len(on_dev)} host tensors are planned in device arenas",
                               {"values": [t.value for t in on_dev]}))
        for a in self.arenas:
            if a.device != "cpu":
                out.append(Finding(
                    "info", "device_allocator", self.name,
                    f"arena mem_id {a.mem_id} (runtime buffer {a.runtime_index}, {a.size} bytes) lives on "
                    f"{a.device}: loading this method needs a {a.device.split(':')[0]} device allocator",
                    {"mem_id": a.mem_id, "device": a.device, "bytes": a.size}))
        if self.has_loops:
            out.append(Finding("info", "loops", self.name,
                               "the method jumps backwards (a loop): lifetimes of values used inside "
                               "the loop are extended to its last instruction"))
        unplanned = [s for s in self.inputs + self.outputs if s.kind == "Tensor" and not s.planned]
        if unplanned:
            out.append(Finding("info", "unplanned_io", self.name,
                               f"{len(unplanned)} inputs/outputs are not planned: the caller provides "
                               f"their memory", {"values": [s.value for s in unplanned]}))
        return out + self.validate()

    # ------------------------------------------------------------------ views
    def _repr_html_(self) -> str:
        from ..views.html import method_html

        return method_html(self)

    def __repr__(self) -> str:
        from ..views.text import method_text

        try:
            return method_text(self)
        except PteFormatError as exc:
            return f"<Method {self.name!r}: unreadable: {exc}>"
