"""Decode ExecuTorch's ``program.fbs`` tables into plain records.

Only the tables that describe structure and memory are decoded; constant,
delegate and named-data bytes stay where they are (their sizes are read from
the segment table or from the inline vector's length, never their content).
Slot numbers follow ``executorch/exir/_serialize/program.fbs`` (a union field
takes two slots: its type, then its value).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..devices import CPU, Device, device_name
from ..errors import PteFormatError
from ..vocabulary import DelegateSegment, InstructionKind, SegmentKind, ValueKind
from ._flat import Table, TableVector, root_table
from ._values_fast import FEW, read_values
from .bundled import RawBundled
from .etrecord import SourceLine
from .header import Header
from .schema import DataLocation

# EValue union tags (KernelTypes)
VALUE_KINDS = {
    0: ValueKind.NONE, 1: ValueKind.NULL, 2: ValueKind.INT, 3: ValueKind.BOOL, 4: ValueKind.DOUBLE, 5: ValueKind.TENSOR,
    6: ValueKind.STRING, 7: ValueKind.INT_LIST, 8: ValueKind.DOUBLE_LIST, 9: ValueKind.BOOL_LIST,
    10: ValueKind.TENSOR_LIST, 11: ValueKind.OPTIONAL_TENSOR_LIST,
}
# Instruction union tags (InstructionArguments)
INSTRUCTION_KINDS = {1: InstructionKind.KERNEL_CALL, 2: InstructionKind.DELEGATE_CALL, 3: InstructionKind.MOVE_CALL,
                     4: InstructionKind.JUMP_FALSE_CALL, 5: InstructionKind.FREE_CALL}


@dataclass(slots=True)
class RawTensor:
    """A tensor value as the file stores it: scalar type, sizes, dim order, its arena and offset when planned."""
    #: a :class:`~.schema.ScalarType` code (kept as read: an unknown one stays visible)
    scalar_type: int
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    data_buffer_idx: int
    #: None when the tensor has no allocation_info (constant or caller-provided)
    mem_id: int | None
    offset: int | None
    #: a :class:`~.schema.TensorShapeDynamism` code
    shape_dynamism: int
    device: Device = CPU
    fqn: str | None = None
    #: a :class:`~.schema.TensorDataLocation` code (EXTERNAL: data in a .ptd file); None without extra_tensor_info
    location: int | None = None


@dataclass(slots=True)
class RawValue:
    """One value of an execution plan as the file stores it: its kind, its tensor, the items of a list, a
    scalar's value."""
    kind: ValueKind
    tensor: RawTensor | None = None
    #: value indices for TensorList / OptionalTensorList (-1: none)
    items: tuple[int, ...] = ()
    #: the value an Int, Bool or Double method input or output holds in the file (read for those only; the
    #: runtime's set_input takes only that value for such an input, a constant method returns it); None otherwise
    scalar: int | float | bool | None = None


@dataclass(slots=True)
class RawInstruction:
    """One instruction as the file stores it: its kind, its operator or delegate index, the values it names."""
    kind: InstructionKind
    #: operator index (KernelCall) or delegate index (DelegateCall), else -1
    target: int
    #: every value index the instruction names, in order
    args: tuple[int, ...]
    #: JumpFalseCall destination, else -1
    destination: int = -1


@dataclass(slots=True)
class RawDelegate:
    """One delegate as the file stores it: its backend id, where its blob is, its compile specs and bytes."""
    id: str
    location: str  # "inline" | "segment"
    index: int
    compile_specs: dict[str, bytes]
    size: int


@dataclass(slots=True)
class RawPlan:
    """One execution plan as the file stores it: values, inputs, outputs, instructions, operators, delegates and
    the arenas' sizes."""
    name: str
    values: list[RawValue]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    instructions: list[RawInstruction]
    chains: int
    operators: list[tuple[str, str]]
    delegates: list[RawDelegate]
    buffer_sizes: tuple[int, ...]
    #: mem_id -> device name, for non-CPU arenas only (the file's sparse list)
    buffer_devices: dict[int, Device]
    has_stacktrace: bool = False
    #: with ``ExecutorchBackendConfig(emit_stacktrace=True)``: each instruction's stack trace (``Chain.stacktrace``,
    #: a ``FrameList`` per instruction), outermost frame first; ``()`` where a chain gives an instruction none
    stacktraces: "tuple[tuple[SourceLine, ...], ...] | None" = None
    #: the values that are tensor lists with items (what an instruction naming them names too)
    lists: frozenset[int] | None = None
    #: the distinct value records, in order of first use (values sharing one table share one record), and
    #: for each value the index of its record: what follows from a record is worked out once per record
    records: list[RawValue] | None = None
    record_of: np.ndarray | None = None
    #: what the analysis derives from the plan once and asks for from several places (key -> result; not a
    #: fact of the file, and not compared: the plan is read once and never changed)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.lists is None:
            self.lists = frozenset(i for i, v in enumerate(self.values) if v.items)
        if self.records is None:
            index: dict[int, int] = {}
            self.record_of = np.fromiter((index.setdefault(id(v), len(index)) for v in self.values), np.int64,
                                         len(self.values))
            self.records = list({id(v): v for v in self.values}.values())


@dataclass(slots=True)
class RawSegment:
    """One segment as the file declares it: its file offset, bytes, and what the program uses it for."""
    index: int
    offset: int  # absolute file offset
    size: int
    #: a :class:`~pte_lab.vocabulary.SegmentKind`, or the :class:`~pte_lab.call_targets.DelegateSegment` of the
    #: delegate whose blob it holds (``"delegate:<id>"``)
    kind: SegmentKind | DelegateSegment = SegmentKind.UNUSED
    #: every role the program gives it (more than one kind: one table points into another's data)
    roles: list[SegmentKind | DelegateSegment] = field(default_factory=list)

    def use(self, kind: SegmentKind | DelegateSegment) -> "RawSegment":
        if self.kind == SegmentKind.UNUSED:
            self.kind = kind
        if kind not in self.roles:
            self.roles.append(kind)
        return self


def covered_bytes(spans) -> int:
    """Bytes of the file that (offset, length) spans cover: their union, so a vector that many tables name
    (a flatbuffer may share one) counts once. O(n log n) in the spans."""
    total = end = 0
    for off, n in sorted(set(spans)):
        if n and off + n > end:
            total += off + n - max(off, end)
            end = off + n
    return total


@dataclass
class RawProgram:
    """The program's tables as the file stores them (:attr:`Pte.raw`): the header, the execution plans (decoded
    when first asked for), the segments, constant and delegate bytes, named data."""
    header: Header
    version: int
    plan_names: list[str]
    segments: list[RawSegment]
    constant_bytes: int
    inline_constant_bytes: int
    delegate_bytes: dict[str, int]
    named_data: list[tuple[str, int]]
    _root: Table = field(repr=False, default=None)
    _inline_sizes: list[int] = field(repr=False, default_factory=list)
    _plans: dict[int, RawPlan] = field(repr=False, default_factory=dict)
    #: each plan's table, read (and checked) once with the program
    _plan_tables: list[Table] = field(repr=False, default_factory=list)
    #: each plan's delegates, decoded once with the program (their blobs' sizes are the program's) and kept
    _delegates: dict[int, list[RawDelegate]] = field(repr=False, default_factory=dict)
    #: the constant segment's index and its sub-segment offsets (one per constant buffer index)
    constant_segment: int | None = None
    constant_offsets: tuple[int, ...] = ()
    #: (offset, length) in the flatbuffer of inline constant buffers and inline delegate blobs
    inline_constant_spans: list[tuple[int, int]] = field(repr=False, default_factory=list)
    inline_delegate_spans: list[tuple[int, int]] = field(repr=False, default_factory=list)
    #: bytes the inline delegate blobs take in the file (``covered_bytes``: a blob named twice counts once)
    inline_delegate_bytes: int = 0
    #: the test suites when the program came inside a bundled program (``.bpte``)
    bundled: "RawBundled | None" = None
    #: the source's bytes when they were given in memory, or the bundled file's bytes (test tensors
    #: and segment data are read from there on demand); None when read from a file
    container: memoryview | None = field(repr=False, default=None)
    #: where the program starts and ends inside ``container`` (a bundled file carries it inside)
    program_span: tuple[int, int] | None = None

    def plan(self, i: int) -> RawPlan:
        """Execution plan ``i``, decoded on first use (methods are read lazily) and kept.

        Records are never changed after decoding, so every reader of this
        program can share them.
        """
        rec = self._plans.get(i)
        if rec is None:
            plans = self._plan_tables or self._root.tables(1, "execution_plan")
            rec = self._plans[i] = _decode_plan(plans[i], self, self._delegates.get(i))
        return rec

    def plan_scalars(self, i: int) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
        """(value -> its int for every ``Int`` value, value -> its items for every ``IntList``) of execution plan
        ``i``, read from their tables (the plan's decoding reads only their kinds): what a view's size list and
        the size arithmetic between kernels start from. Values sharing one table are read once."""
        plan = self.plan(i)
        values_vec = (self._plan_tables or self._root.tables(1, "execution_plan"))[i].tables(2, "values")
        ints: dict[int, int] = {}
        lists: dict[int, tuple[int, ...]] = {}
        seen: dict[int, int | tuple[int, ...]] = {}  # by table position
        for v, rec in enumerate(plan.values):
            if rec.kind not in (ValueKind.INT, ValueKind.INT_LIST):
                continue
            pos = values_vec.position(v)
            got = seen.get(pos)
            if got is None:
                val = values_vec.table_at(v, pos).table(1, "val")
                got = seen[pos] = (val.scalar(0, "int64") if rec.kind == ValueKind.INT
                                   else val.int_tuple(0, "int64", "items"))
            if rec.kind == ValueKind.INT:
                ints[v] = got
            else:
                lists[v] = got
        return ints, lists


def _ints(a: np.ndarray) -> tuple[int, ...]:
    return tuple(a.tolist())


def decode_program(flatbuffer: memoryview, header: Header) -> RawProgram:
    """Decode the program-level tables and check every segment against the file."""
    root = root_table(flatbuffer)
    version = root.scalar(0, "uint32")
    plans, names = [], []  # each plan's table read once, for its name, its delegates and the plan
    for p in root.tables(1, "execution_plan"):
        plans.append(p)
        names.append(p.string(0, "name", ""))

    # Segments: offsets are relative to segment_base_offset.
    segments: list[RawSegment] = []
    seg_vec = root.tables(4, "segments")
    # Without segment data (no extended header, or base 0) only empty segments can exist:
    # programs whose constants live in an external .ptd file list one such segment.
    limit = (header.segment_data_size or (header.file_size - header.segment_base_offset)
             if header.segment_base_offset else 0)
    for i, s in enumerate(seg_vec):
        off, size = s.scalar(0, "uint64"), s.scalar(1, "uint64")
        if off + size > limit:
            raise PteFormatError(
                f"program.segments[{i}]: offset {off} + size {size} runs past the segment data "
                f"({limit} bytes from file offset {header.segment_base_offset}): the file is truncated or corrupt"
            )
        segments.append(RawSegment(i, header.segment_base_offset + off, size))

    def segment(idx: int, what: str) -> RawSegment:
        if not 0 <= idx < len(segments):
            raise PteFormatError(f"{what}: segment index {idx} out of range ({len(segments)} segments)")
        return segments[idx]

    # Constants: a sub-segment table into one segment, plus any inline buffers.
    constant_bytes = 0
    constant_index, constant_offsets = None, ()
    cseg = root.table(5, "constant_segment")
    if cseg is not None and len(segments):
        offsets = cseg.scalars(1, "uint64", "offsets")
        if len(offsets):
            constant_index = cseg.scalar(0, "uint32")
            seg = segment(constant_index, "program.constant_segment")
            seg.use(SegmentKind.CONSTANTS)
            constant_bytes = seg.size
            if int(offsets.max()) > seg.size:
                raise PteFormatError(
                    f"program.constant_segment.offsets: offset {int(offsets.max())} is past the end "
                    f"of its segment ({seg.size} bytes)"
                )
            constant_offsets = _ints(offsets)
    inline_spans = [buf.bytes_vector_span(0, f"constant_buffer[{i}].storage")
                    for i, buf in enumerate(root.tables(2, "constant_buffer"))]
    inline_constant_bytes = covered_bytes(inline_spans)

    mseg = root.tables(6, "mutable_data_segments")
    for i, m in enumerate(mseg):
        segment(m.scalar(0, "uint32"), f"program.mutable_data_segments[{i}]").use(SegmentKind.MUTABLE_DATA)

    named = []
    for i, nd in enumerate(root.tables(7, "named_data")):
        key = nd.string(0, "key", "")
        idx = nd.scalar(1, "uint32")
        seg = segment(idx, f"program.named_data[{i}] ({key!r})")
        seg.use(SegmentKind.NAMED_DATA)
        named.append((key, idx))

    prog = RawProgram(header, version, names, segments, constant_bytes, inline_constant_bytes,
                      {}, named, _root=root, constant_segment=constant_index, constant_offsets=constant_offsets,
                      inline_constant_spans=inline_spans, _plan_tables=plans)
    inline = root.tables(3, "backend_delegate_data")
    prog.inline_delegate_spans = [d.bytes_vector_span(0, f"backend_delegate_data[{i}].data")
                                  for i, d in enumerate(inline)]
    prog._inline_sizes = [n for _, n in prog.inline_delegate_spans]
    prog.inline_delegate_bytes = covered_bytes(prog.inline_delegate_spans)
    # Delegate blobs by backend, over every plan (delegate tables are small).
    for p_i, p in enumerate(plans):
        prog._delegates[p_i] = _decode_delegates(p, prog, f"program.execution_plan[{p_i}]")
        for d in prog._delegates[p_i]:
            prog.delegate_bytes[d.id] = prog.delegate_bytes.get(d.id, 0) + d.size
    return prog


def _decode_delegates(plan: Table, prog: RawProgram, where: str) -> list[RawDelegate]:
    out = []
    for i, d in enumerate(plan.tables(7, "delegates")):
        did = d.string(0, "id", "")
        ref = d.table(1, "processed")
        loc = ref.scalar(0, "int8") if ref is not None else DataLocation.INLINE
        idx = ref.scalar(1, "uint32") if ref is not None else 0
        if loc == DataLocation.INLINE:
            if not 0 <= idx < len(prog._inline_sizes):
                raise PteFormatError(f"{where}.delegates[{i}] ({did!r}): inline data index {idx} out of range")
            size = prog._inline_sizes[idx]
            location = "inline"
        elif loc == DataLocation.SEGMENT:
            if not 0 <= idx < len(prog.segments):
                raise PteFormatError(f"{where}.delegates[{i}] ({did!r}): segment index {idx} out of range")
            seg = prog.segments[idx]
            seg.use(DelegateSegment(did))
            size = seg.size
            location = "segment"
        else:
            raise PteFormatError(f"{where}.delegates[{i}] ({did!r}): unknown data location {loc}")
        specs = {}
        for j, cs in enumerate(d.tables(2, "compile_specs")):
            specs[cs.string(0, "key", "")] = cs.bytes_vector(1, f"compile_specs[{j}].value")
        out.append(RawDelegate(did, location, idx, specs, size))
    return out


def _decode_tensor(t: Table) -> RawTensor:
    alloc = t.table(6, "allocation_info")
    mem_id = offset = None
    if alloc is not None:
        mem_id = alloc.scalar(0, "uint32")
        offset = alloc.scalar(1, "uint32") + (alloc.scalar(2, "uint32") << 32)
    sizes = t.int_tuple(2, "int32", "sizes")
    if sizes and min(sizes) < 0:
        raise PteFormatError(f"{t.where}.sizes: negative dimension {min(sizes)}")
    rt = RawTensor(
        scalar_type=t.scalar(0, "int8"),
        sizes=sizes,
        dim_order=t.int_tuple(3, "uint8", "dim_order"),
        data_buffer_idx=t.scalar(5, "uint32"),
        mem_id=mem_id,
        offset=offset,
        shape_dynamism=t.scalar(8, "int8"),
    )
    extra = t.table(9, "extra_tensor_info")
    if extra is not None:
        rt.fqn = extra.string(1, "fully_qualified_name")
        rt.location = extra.scalar(2, "int8")
        rt.device = device_name(extra.scalar(3, "int8"), extra.scalar(4, "int8"))
    return rt


#: EValue kinds a method input may be besides tensors -> the type of their table's one field (Int { int_val:
#: long }, Bool { bool_val: bool }, Double { double_val: double })
_SCALAR_INPUTS = {ValueKind.INT: "int64", ValueKind.BOOL: "bool", ValueKind.DOUBLE: "float64"}


def _decode_value(v: Table, n_values: int) -> RawValue:
    """One EValue; only tensors and tensor lists matter for memory: other values' tables are not read."""
    tag = v.scalar(0, "uint8")
    kind = VALUE_KINDS.get(tag)
    if kind is None:
        raise PteFormatError(f"{v.where}: unknown value type {tag}")
    if tag != 0 and not v.has(1):
        raise PteFormatError(f"{v.where}: {kind} value without its table")
    if kind == ValueKind.TENSOR:
        return RawValue(kind, tensor=_decode_tensor(v.table(1, "val")))
    if kind in (ValueKind.TENSOR_LIST, ValueKind.OPTIONAL_TENSOR_LIST):
        val = v.table(1, "val")
        items = val.int_tuple(0, "int32", "items")
        low = -1 if kind == ValueKind.OPTIONAL_TENSOR_LIST else 0
        if items and (min(items) < low or max(items) >= n_values):
            it = min(items) if min(items) < low else max(items)
            raise PteFormatError(f"{val.where}.items: value index {it} out of range ({n_values} values)")
        return RawValue(kind, items=items)
    return RawValue(kind)


def _decode_values(values_vec: TableVector) -> tuple[list[RawValue], list[RawValue], np.ndarray]:
    """(values, records, record_of): values sharing one table share one record, decoded once, in order of
    first use (so a bad table is named where it is first used)."""
    n = len(values_vec)
    if n < FEW:  # a few values (a delegated method has a handful): each by the checked reader, in plain Python
        index: dict[int, int] = {}
        records, which = [], []
        for i in range(n):
            pos = values_vec.position(i)
            k = index.get(pos)
            if k is None:
                k = index[pos] = len(records)
                records.append(_decode_value(values_vec.table_at(i, pos), n))
            which.append(k)
        return list(map(records.__getitem__, which)), records, np.array(which, dtype=np.intp)
    positions = values_vec.positions()
    tables, first_at, record_of = np.unique(positions, return_index=True, return_inverse=True)
    order = np.argsort(first_at)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    # the common values all at once; any other (and every error's wording) by the checked reader, in order
    records = read_values(values_vec.buffer, tables[order], values_vec.budget, VALUE_KINDS, RawValue, RawTensor)
    for k, (i, pos) in enumerate(zip(first_at[order].tolist(), tables[order].tolist())):
        if records[k] is None:
            records[k] = _decode_value(values_vec.table_at(i, pos), n)
    record_of = rank[record_of.reshape(-1)]
    return list(map(records.__getitem__, record_of.tolist())), records, record_of


def _stacktraces(chains: TableVector) -> tuple[tuple[SourceLine, ...], ...]:
    """Each instruction's frames (``Frame{filename, lineno, name, context}``), chain by chain; an instruction
    past the end of its chain's ``stacktrace`` has none."""
    out: list[tuple[SourceLine, ...]] = []
    for c in chains:
        traces = c.tables(3, "stacktrace")
        for k in range(c.vector_len(2, "instructions")):
            out.append(() if k >= len(traces) else tuple(
                SourceLine(f.string(0, "filename", ""), f.scalar(1, "int32"), f.string(2, "name", ""),
                           f.string(3, "context", "")) for f in traces[k].tables(0, "items")))
    return tuple(out)


def _decode_plan(plan: Table, prog: RawProgram, delegates: list[RawDelegate] | None = None) -> RawPlan:
    """Plan ``plan`` of ``prog``; ``delegates``: its delegates as :func:`decode_program` decoded them (else
    decoded again)."""
    where = plan.where
    values_vec = plan.tables(2, "values")
    n_values = len(values_vec)
    values, records, record_of = _decode_values(values_vec)

    def indices(slot: int, what: str) -> tuple[int, ...]:
        got = plan.int_tuple(slot, "int32", what)
        if got and (min(got) < 0 or max(got) >= n_values):
            bad = min(got) if min(got) < 0 else max(got)
            raise PteFormatError(f"{where}.{what}: value index {bad} out of range ({n_values} values)")
        return got

    inputs = indices(3, "inputs")
    outputs = indices(4, "outputs")
    # a scalar input's or output's value, from its table (other values' tables are never read): an input's is
    # what set_input takes, an output's what a constant method returns (export_llm's get_max_seq_len...)
    for i in inputs + outputs:
        kind = _SCALAR_INPUTS.get(values[i].kind)
        if kind is not None and values[i].scalar is None:
            val = values_vec[i].table(1, "val")
            values[i].scalar = val.scalar(0, kind, {"bool": False, "float64": 0.0}.get(kind, 0))
    operators = [(o.string(0, "name", ""), o.string(1, "overload", "")) for o in plan.tables(6, "operators")]
    if delegates is None:
        delegates = _decode_delegates(plan, prog, where)

    instructions: list[RawInstruction] = []
    chains = plan.tables(5, "chains")
    has_stack = False
    if n_values < FEW:
        item_counts = [len(v.items) for v in values]
        lists = frozenset(i for i, k in enumerate(item_counts) if k)
    else:
        counts = np.fromiter((len(r.items) for r in records), np.int64, len(records))[record_of]
        item_counts = counts.tolist()
        lists = frozenset(np.flatnonzero(counts).tolist())
    seen: dict[int, tuple[RawInstruction, int]] = {}  # by table position: the record, and its list items
    for chains_i, c in enumerate(chains):
        has_stack = has_stack or c.vector_len(3, "stacktrace") > 0
        instrs = c.tables(2, "instructions")
        for k in range(len(instrs)):
            pos = instrs.position(k)
            if pos in seen:  # one Instruction table named again: the same record, its arguments charged again
                rec, items = seen[pos]
                plan.charge(len(rec.args) + items, f".chains[{chains_i}].instructions[{k}]")
                instructions.append(rec)
                continue
            ins = instrs.table_at(k, pos)
            tag, a = ins.union(0, 1, "instr_args")
            kind = INSTRUCTION_KINDS.get(tag)
            if kind is None or a is None:
                raise PteFormatError(f"{ins.where}: unknown or empty instruction (type {tag})")
            if kind in (InstructionKind.KERNEL_CALL, InstructionKind.DELEGATE_CALL):
                target = a.scalar(0, "int32")
                limit = len(operators) if kind == InstructionKind.KERNEL_CALL else len(delegates)
                if not 0 <= target < limit:
                    what = "operator" if kind == InstructionKind.KERNEL_CALL else "delegate"
                    raise PteFormatError(f"{a.where}: {what} index {target} out of range ({limit})")
                args = a.int_tuple(1, "int32", "args")
                rec = RawInstruction(kind, target, args)
            elif kind == InstructionKind.MOVE_CALL:
                rec = RawInstruction(kind, -1, (a.scalar(0, "int32"), a.scalar(1, "int32")))
            elif kind == InstructionKind.JUMP_FALSE_CALL:
                rec = RawInstruction(kind, -1, (a.scalar(0, "int32"),), a.scalar(1, "int32"))
            else:
                rec = RawInstruction(kind, -1, (a.scalar(0, "int32"),))
            if rec.args and (min(rec.args) < 0 or max(rec.args) >= n_values):
                x = min(rec.args) if min(rec.args) < 0 else max(rec.args)
                raise PteFormatError(f"{a.where}: value index {x} out of range ({n_values} values)")
            # the analysis reads each list an instruction names where it names it: charged like decoding
            items = 0 if lists.isdisjoint(rec.args) else sum(item_counts[x] for x in rec.args)
            if items:
                ins.charge(items, " (the items of the lists it names)")
            seen[pos] = (rec, items)
            instructions.append(rec)
    n_instr = len(instructions)
    traces = _stacktraces(chains) if has_stack else None
    for i, ins in enumerate(instructions):
        if ins.kind == InstructionKind.JUMP_FALSE_CALL and not 0 <= ins.destination <= n_instr:
            raise PteFormatError(f"{where}: instruction {i} jumps to {ins.destination}, outside [0, {n_instr}]")

    sizes = plan.scalars(8, "int64", "non_const_buffer_sizes")
    if len(sizes) and sizes.min() < 0:
        raise PteFormatError(f"{where}.non_const_buffer_sizes: negative size {int(sizes.min())}")
    devices: dict[int, Device] = {}
    for d in plan.tables(9, "non_const_buffer_device"):
        idx = d.scalar(0, "int32")
        if not 1 <= idx < len(sizes):
            raise PteFormatError(
                f"{d.where}: buffer_idx {idx} names no planned arena (arenas are 1..{len(sizes) - 1})"
            )
        name = device_name(d.scalar(1, "int8"), d.scalar(2, "int8"))
        if name != "cpu":
            devices[idx] = name
    return RawPlan(
        name=plan.string(0, "name", ""),
        values=values,
        inputs=inputs,
        outputs=outputs,
        instructions=instructions,
        chains=len(chains),
        operators=operators,
        delegates=delegates,
        buffer_sizes=_ints(sizes),
        buffer_devices=devices,
        has_stacktrace=has_stack,
        stacktraces=traces,
        lists=lists,
        records=records,
        record_of=record_of,
    )
