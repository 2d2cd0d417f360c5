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
from ..model.bulk import dict_maker
from ..model.load_cost import LOAD_COST_COLUMNS, LOADERS, STEPS
from ..units import PEAK_LIVE, SIZE_OVER_PEAK

__all__ = ["state_summary", "bundled_record", "data_tensor_records", "MethodRow", "METHOD_HEADERS", "method_rows",
           "delegate_scratch_rows", "load_cost_rows", "TENSOR_TABLE", "tensor_records", "io_records", "delegate_records",
           "delegate_memory_record", "ARENA_ROW", "arena_records", "load_cost_records", "finding_records"]


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


def tensor_records(m) -> list[dict]:
    """Every planned tensor as a dict of :data:`TENSOR_COLUMNS` (shapes as lists), from the columns."""
    cols = m.analysis.column_lists()
    cols["shape"] = list(map(list, cols["shape"]))
    return list(map(_tensor_record, *cols.values()))


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
    """Arenas under the JSON document's keys (:data:`ARENA_ROW`)."""
    return list(starmap(_arena_record, map(_arena_fields, m.arenas)))


_load_cost_record = dict_maker(LOAD_COST_COLUMNS, tuple(k for k in LOAD_COST_COLUMNS if k != "loader"))


def load_cost_records(columns: dict[str, list]) -> list[dict]:
    """Allocations (:meth:`~pte_lab.model.Pte.allocation_columns`) under
    :data:`~pte_lab.model.load_cost.LOAD_COST_COLUMNS` less ``loader`` (the JSON rows)."""
    return list(map(_load_cost_record, *columns.values()))


def finding_records(findings, with_method: bool) -> list[dict]:
    keys = ("severity", "kind", "method", "message") if with_method else ("severity", "kind", "message")
    return [{k: str(getattr(f, k)) if k == "kind" else getattr(f, k) for k in keys} for f in findings]


def state_summary(m) -> tuple[int, int, list[str]]:
    """(tensors, bytes, names) of the state a method keeps between calls (role ``mutable_buffer``).

    Views of state share their base's bytes and are not counted again.
    """
    state = [t for t in m.planned if t.role == "mutable_buffer" and m.storage_of(t.value) == t.value]
    return len(state), sum(t.nbytes for t in state), [t.name for t in state if t.name]


def _value_record(v) -> dict:
    return {"kind": v.kind, "dtype": v.dtype, "shape": list(v.shape) if v.shape is not None else None,
            "value": v.value}


def bundled_record(b) -> dict:
    """A bundled program's test suites (JSON section ``bundled``)."""
    return {"version": b.version, "program_bytes": b.program_bytes,
            "suites": [{"method": s.method, "cases": s.cases, "inputs": [_value_record(v) for v in s.inputs],
                        "expected_outputs": [_value_record(v) for v in s.expected_outputs]} for s in b.suites]}


def data_tensor_records(d) -> list[dict]:
    """A ``.ptd`` file's named tensors."""
    return [{"key": t.key, "dtype": t.dtype, "shape": list(t.shape) if t.shape is not None else None,
             "nbytes": t.nbytes, "segment": t.segment, "offset": t.offset} for t in d.tensors]
