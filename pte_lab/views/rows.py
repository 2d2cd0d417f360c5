"""The rows that the text, HTML and JSON views share: what each table holds, in one place.

Each function returns plain values (ints, strings, ``(device, bytes)``
pairs); the views only format them (text pads columns, HTML adds badges and
escapes, JSON keeps them as they are).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import starmap
from operator import attrgetter

from ..model.analysis import TENSOR_COLUMNS
from ..model.attribution import SOURCE_COLUMNS
from ..model.backends import BackendNote, backend_note
from ..model.many_records import dict_maker
from ..model.diff import PLANNED_SUM, Change
from ..vocabulary import MemoryPart, Pool
from ..model.load_cost import (LOAD_COST_COLUMNS, LOADERS, MODULE_LOAD_MODES, PROGRAM_APIS, STEPS,
                               DataLoaderKind)
from ..units import PEAK_LIVE, SIZE_OVER_PEAK, first_few
from .base import delegate_heap_note

__all__ = ["state_summary", "bundled_record", "data_tensor_records", "MethodRow", "METHOD_HEADERS", "method_rows",
           "delegate_scratch_rows", "load_cost_rows", "TENSOR_TABLE", "tensor_records", "tensor_record", "DiffLine",
           "diff_lines", "change_record", "cause_summary", "io_records", "delegate_records", "delegate_memory_record",
           "ARENA_ROW", "arena_records", "load_cost_records", "finding_records", "summary_findings",
           "delegate_heap_rows", "delegate_heap_note"]


@dataclass(frozen=True)
class MethodRow:
    """One method in a program's summary table."""

    name: str
    instructions: int
    tensors: int
    arenas: int
    planned_bytes: int
    #: planned bytes per device, devices sorted
    by_device: tuple[tuple[str, int], ...]


METHOD_HEADERS = ("method", "instructions", "tensors", "arenas", "planned", "by device")


def method_rows(p) -> list[MethodRow]:
    return [MethodRow(m.name, m.n_instructions, len(m.planned), len(m.arenas), m.planned_bytes,
                      tuple(sorted(m.planned_bytes_by_device().items())))
            for m in p.methods.values()]


def delegate_scratch_rows(p) -> list[tuple[str, int]]:
    """(method, bytes) for each method whose delegates take scratch from the temp allocator: the largest one
    call takes (the temp allocator is reset after every instruction)."""
    return [(m.name, m.delegate_temp_bytes) for m in p.methods.values() if m.delegate_temp_bytes]


def summary_findings(p) -> list:
    """The findings a program's summary lists: the program's own and every warning or error; a method's info
    findings are listed under that method (once)."""
    return [w for w in p.warnings() if w.method is None or w.severity != "info"]


def delegate_heap_rows(p) -> list[tuple[str, str]]:
    """(methods, :func:`delegate_heap_note`) for the methods that call delegates: one row per note, the methods
    that share it named together (``method_0, method_1 and 13 more``), so that a program of many delegated
    methods says it once."""
    by_note: dict[str, list[str]] = {}
    for m in p.methods.values():
        backends = tuple(dict.fromkeys(d.backend for d in m.delegates))
        if backends:
            not_here = tuple(b for b in backends if not backend_note(b).runs_here)
            by_note.setdefault(delegate_heap_note(backends, not_here), []).append(m.name)
    return [(names[0] if len(names) == 1 else f"{first_few(names, 3)} ({len(names)} methods)", note)
            for note, names in by_note.items()]


def backend_rows(p) -> list[tuple[BackendNote, tuple[str, ...]]]:
    """(:class:`~pte_lab.model.backends.BackendNote`, the methods calling it) for each backend the program's
    delegates name, in the order first named."""
    by: dict[str, list[str]] = {}
    for m in p.methods.values():
        for d in m.delegates:
            names = by.setdefault(d.backend, [])
            if m.name not in names:
                names.append(m.name)
    return [(backend_note(b), tuple(names)) for b, names in by.items()]


def mapped_rows_line() -> str:
    """What the heap rows of a sizing are (the program mapped) and which API loads a program that way, against
    the FileDataLoader an app's Module reads with by default (:data:`~pte_lab.model.load_cost.MODULE_LOAD_MODES`)."""
    mapped = [a.api for a in PROGRAM_APIS if a.data_loader is DataLoaderKind.MMAP and a.arenas_as != "legacy"]
    default = next(m for m in MODULE_LOAD_MODES if m.default)
    mmap = next(m for m in MODULE_LOAD_MODES if m.data_loader is DataLoaderKind.MMAP)
    return (f"rows measured with the program mapped ({DataLoaderKind.MMAP.value}): as {' and '.join(mapped)} read it, "
            f"and an app's Module with LoadMode {mmap.name} (iOS {mmap.ios}, Android {mmap.android}); an app's "
            f"Module reads with a {default.data_loader.value} by default (LoadMode {default.name}): its heap is "
            f"the {default.data_loader.value} line below")


def loader_apis() -> dict[str, str]:
    """loader (:data:`LOADERS`) -> the APIs whose arenas follow it, in words (Python's and the mobile apps')."""
    out: dict[str, list[str]] = {}
    for a in PROGRAM_APIS:
        out.setdefault(a.arenas_as, []).append(a.api)
    return {k: "; ".join(v) for k, v in out.items()}


def module_load_modes_line() -> str:
    """The C++ Module's load modes (what the iOS and Android APIs take): each one's data loader and pages."""
    return "an app's Module reads the program by its Module::LoadMode: " + "; ".join(
        f"{m.name}{' (the default)' if m.default else ''} = {m.data_loader.value}, {m.pages}" for m in MODULE_LOAD_MODES)


def load_cost_rows(p) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    """``(loader, step, ((device, bytes), ...))`` for every loader and step that allocates, in order."""
    totals = p.load_totals()
    out = []
    for loader in LOADERS:
        steps = totals.get(loader, {})
        for step in STEPS:
            if steps.get(step):
                out.append((loader, step, tuple(sorted(steps[step].items()))))
    return out


#: (column of ``Method.tensors``, header) shown in the tensor table of the notebook view
TENSOR_TABLE = (("value", "value"), ("role", "role"), ("dtype", "dtype"), ("shape", "shape"),
                ("nbytes", "bytes"), ("mem_id", "mem_id"), ("offset", "offset"), ("device", "device"),
                ("first", "first"), ("last", "last"), ("op", "op"), ("name", "name"))


_tensor_record = dict_maker(TENSOR_COLUMNS)
_tensor_fields = attrgetter(*TENSOR_COLUMNS)
_SHAPE = TENSOR_COLUMNS.index("shape")


def tensor_record(t) -> dict:
    """One planned tensor as a dict of :data:`TENSOR_COLUMNS` (its shape as a list)."""
    vals = list(_tensor_fields(t))  # hot for big methods: no dataclasses.asdict (it deep-copies)
    vals[_SHAPE] = list(vals[_SHAPE])
    return dict(zip(TENSOR_COLUMNS, vals))


def tensor_records(m) -> list[dict]:
    """Every planned tensor as a dict of :data:`TENSOR_COLUMNS` (shapes as lists), from the columns."""
    cols = m.analysis.column_lists()
    cols["shape"] = list(map(list, cols["shape"]))
    rows = list(map(_tensor_record, *cols.values()))
    if m.sources is not None:  # with an ETRecord: where each comes from in the model's source
        for row, src in zip(rows, m.sources):
            row.update((k, src.column(k)) for k in SOURCE_COLUMNS)
    return rows


def io_records(specs) -> list[dict]:
    return [{**asdict(s), "shape": list(s.shape) if s.shape is not None else None} for s in specs]


def _spec(v):
    return v if isinstance(v, str) else v.hex()


def _io_record(io) -> dict:
    return {"shape": list(io.shape), "elem_size": io.elem_size, "offset": io.offset, "region": io.region}


def delegate_memory_record(d) -> dict | None:
    """What a delegate's blob declares (JSON ``memory``); None for a backend whose blobs pte_lab does not read."""
    if not d.reads_blob:
        return None
    s = d.stream
    return {
        "target": d.target, "system_config": d.system_config, "memory_mode": d.memory_mode,
        "blob_offset": d.offset, "command_bytes": d.command_bytes, "weight_bytes": d.weight_bytes,
        "scratch_bytes": d.scratch_bytes, "scratch_from": d.scratch_from,
        "parts": [asdict(p) for p in d.parts()],
        "inputs": None if s is None or s.inputs is None else [_io_record(io) for io in s.inputs],
        "outputs": None if s is None or s.outputs is None else [_io_record(io) for io in s.outputs],
        "external": [{"block": b, "key": k, "bytes": n} for b, k, n in d.external],
        "problems": list(s.problems) if s is not None else [],
        "unread": d.unread,
    }


def delegate_records(m) -> list[dict]:
    return [{"index": d.index, "backend": d.backend, "target_device": d.target_device, "location": d.location,
             "size": d.size, "compile_specs": {k: _spec(v) for k, v in d.compile_specs.items()},
             "memory": delegate_memory_record(mem)}
            for d, mem in zip(m.delegates, m.delegate_memory)]


#: an arena's row in every table of arenas (text, HTML, JSON), in order: (``Arena`` attribute, header,
#: key in the JSON document, version 1: ``efficiency`` is ``size_over_peak``, ``tensors`` ``n_tensors``)
ARENA_ROW = (("mem_id", "mem_id", "mem_id"), ("runtime_index", "runtime index", "runtime_index"),
             ("device", "device", "device"), ("size", "size", "size"), ("peak_bytes", PEAK_LIVE, "peak_bytes"),
             ("size_over_peak", SIZE_OVER_PEAK, "efficiency"), ("n_tensors", "tensors", "tensors"))


_arena_fields = attrgetter(*(attr for attr, _, _ in ARENA_ROW))
_arena_record = dict_maker(tuple(key for _, _, key in ARENA_ROW))


def arena_records(m) -> list[dict]:
    """Arenas under the JSON document's keys (:data:`ARENA_ROW`), with ``size_over_peak`` beside
    ``efficiency`` (the same figure: the name the diff document uses, the other kept for version-1 readers)."""
    out = list(starmap(_arena_record, map(_arena_fields, m.arenas)))
    for r in out:
        r["size_over_peak"] = r["efficiency"]
    return out


_load_cost_record = dict_maker(LOAD_COST_COLUMNS, tuple(k for k in LOAD_COST_COLUMNS if k != "loader"))


def load_cost_records(columns: dict[str, list]) -> list[dict]:
    """Allocations (:meth:`~pte_lab.model.Pte.allocation_columns`) under
    :data:`~pte_lab.model.load_cost.LOAD_COST_COLUMNS` less ``loader`` (the JSON rows)."""
    return list(map(_load_cost_record, *columns.values()))


def finding_records(findings, with_method: bool) -> list[dict]:
    """The JSON findings; one that prescribes adds ``at_stake`` (bytes) and ``change`` (its words)."""
    keys = ("severity", "kind", "method", "message") if with_method else ("severity", "kind", "message")
    out = []
    for f in findings:
        rec = {k: str(getattr(f, k)) if k == "kind" else getattr(f, k) for k in keys}
        if f.change is not None:
            rec.update(at_stake=f.at_stake, change=f.change)
        out.append(rec)
    return out


def state_summary(m) -> tuple[int, int, list[str]]:
    """(tensors, bytes, names) of the state a method keeps between calls (:attr:`Method.state`)."""
    state = m.state
    return len(state), sum(t.nbytes for t in state), [t.name for t in state if t.name]


def _value_record(v) -> dict:
    return {"kind": v.kind, "dtype": v.dtype, "shape": list(v.shape) if v.shape is not None else None,
            "value": v.value}


def bundled_record(b) -> dict:
    """A bundled program's test suites (JSON section ``bundled``)."""
    suites = []
    for s, at in b.distinct_suites():  # a suite table named many times is one record, with where it is named
        rec = {"method": s.method, "cases": s.cases, "inputs": [_value_record(v) for v in s.inputs],
               "expected_outputs": [_value_record(v) for v in s.expected_outputs]}
        if len(at) > 1:
            rec["positions"] = list(at)
        suites.append(rec)
    return {"version": b.version, "program_bytes": b.program_bytes, "suites_named": len(b.suites),
            "suites": suites}


def data_tensor_records(d) -> list[dict]:
    """A ``.ptd`` file's named tensors."""
    return [{"key": t.key, "dtype": t.dtype, "shape": list(t.shape) if t.shape is not None else None,
             "nbytes": t.nbytes, "segment": t.segment, "offset": t.offset} for t in d.tensors]


# ------------------------------------------------------------------------ diffs
def change_record(c) -> dict:
    """A :class:`~pte_lab.model.diff.Change` in the JSON document: before, after, delta, growth_pct
    (None where a side is absent or the quantity grew from 0)."""
    g = c.growth
    return {"before": c.before, "after": c.after, "delta": c.delta,
            "growth_pct": None if g is None or g == float("inf") else round(g * 100, 4)}


@dataclass(frozen=True)
class DiffLine:
    """One figure of a diff's summary: what it is, and its change in bytes."""

    what: str
    #: file | planned | arena | state | delegate | region | pool | part
    kind: str
    change: Change


def diff_lines(d) -> list[DiffLine]:
    """Every byte figure of a diff that a reader scans for growth, each once, in reading order (the views sort
    them: what grew first). The planned bytes of one method are said once: as its arena where it has one
    (``forward: arena 1 (cpu) = planned bytes``), a sum over methods only where there are several; with sizes,
    a pool is not said again as the part or the file's plan that is the same figure."""
    many = d.many_methods
    out = [DiffLine("file", "file", d.file_size)]
    if many:
        out.append(DiffLine(PLANNED_SUM, "planned", d.planned_bytes))
    planned = {}
    for name, m in d.methods.items():
        planned[name] = m.planned_bytes
        one = len(m.arenas) == 1 and m.arenas[0].size == m.planned_bytes
        if not one:
            out.append(DiffLine(f"{name}: planned bytes", "planned", m.planned_bytes))
        for a in m.arenas:
            dev_a, dev_b = a.devices
            dev = dev_a if dev_b in (None, dev_a) else (dev_b if dev_a is None else f"{dev_a} -> {dev_b}")
            out.append(DiffLine(f"{name}: arena {a.mem_id} ({dev})" + (" = planned bytes" if one else ""), "arena",
                                a.size))
        if m.state_bytes.before or m.state_bytes.after:
            out.append(DiffLine(f"{name}: state kept between calls", "state", m.state_bytes))
        for x in m.delegates:  # what each delegate call needs outside the plan, as its blob declares it
            backend = (x.after or x.before).backend
            for what, c in x.byte_changes:
                if what != "blob":  # the file's regions have the blob
                    out.append(DiffLine(f"{name}: delegate call {x.call} ({backend}) {what}", "delegate", c))
    for n in d.added:
        planned[n] = _absent(None, d.after.methods[n])
        out.append(DiffLine(f"{n}: planned bytes (added method)", "planned", planned[n]))
    for n in d.removed:
        planned[n] = _absent(d.before.methods[n], None)
        out.append(DiffLine(f"{n}: planned bytes (removed method)", "planned", planned[n]))
    for r in d.regions:
        out.append(DiffLine(f"file: {r.region}" + (f" {r.name}" if r.name else ""), "region", r.bytes))
    if d.sizes is not None:  # a figure a side did not measure is neither the same nor grown: left out
        for p in d.sizes.pools:
            if p.unmeasured is None and not (p.part is Pool.PLANNED_BUFFERS and p.bytes == planned.get(p.method)):
                out.append(DiffLine(f"{p.method}: {p.part.replace('_', ' ')}", "pool", p.bytes))
        for p in d.sizes.parts:
            # a part that is a pool (or a pool less another part) is said once, as the pool
            if (isinstance(p.part, MemoryPart) and p.part.pool is None and p.part.remainder_of is None
                    and p.unmeasured is None):
                out.append(DiffLine(f"{p.method}: {p.part}", "part", p.bytes))
    return out


def _absent(a, b):
    return Change(None if a is None else a.planned_bytes, None if b is None else b.planned_bytes)


def cause_summary(c) -> list[tuple[str, int, int, bool]]:
    """(what, tensors, largest, signed) behind an arena's change (:class:`~pte_lab.model.diff.ArenaCauses`), the
    non-empty ones. ``largest`` is the one tensor's bytes, or change, of largest magnitude: ``signed`` ones count
    up for what the second program has more of (new, moved in, the growth of larger tensors) and down for what it
    has less of (gone, moved out, smaller), the others are a tensor's bytes (alive over more or fewer
    instructions). The tensors' bytes are never summed: tensors alive at different times share the arena's bytes,
    so a sum is not memory (the arena's size is)."""
    groups = [
        ("new tensors", [t.nbytes for t in c.new], True),
        ("tensors gone", [-t.nbytes for t in c.gone], True),
        ("moved in from another arena", [m.after.nbytes for m in c.moved_in], True),
        ("moved out to another arena", [-m.before.nbytes for m in c.moved_out], True),
        ("larger", [m.after.nbytes - m.before.nbytes for m in c.larger], True),
        ("smaller", [m.after.nbytes - m.before.nbytes for m in c.smaller], True),
        ("alive over more instructions", [m.after.nbytes for m in c.longer], False),
        ("alive over fewer instructions", [m.after.nbytes for m in c.shorter], False),
    ]
    return [(what, len(xs), max(xs, key=abs), signed) for what, xs, signed in groups if xs]
