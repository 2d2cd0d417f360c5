"""Programs written byte by byte with flatbuffers.Builder: crafted plans for the reader, the analysis and the
loader (shared by tests/test_crafted.py and benchmarks/bench_crafted.py).

A program has one method, ``forward``. ``values`` describe its EValues:

* ``("tensor", mem_id, offset, sizes)``: a float tensor (``sizes`` an int or a list); ``mem_id=None``
  leaves it without allocation_info; an optional fifth item is its scalar type (6 float, 0 uint8...);
* ``("list", [items])``: a TensorList; ``("int", n)``, ``("bool", b)``, ``("double", x)``, ``("null",)``.

``devices`` tag arenas for a device: ``(buffer_idx, device_type, device_index)``, as
``non_const_buffer_device``. ``instructions`` are KernelCalls: an argument list (operator 0), or ``(op_index, [args])``. The same Python
object given twice is written once and referenced twice (the same EValue table, the same argument vector,
the same Instruction table): that is how a small file names many things.
"""

from __future__ import annotations

import flatbuffers

#: EValue union tags (program.fbs KernelTypes)
TAGS = {"null": 1, "int": 2, "bool": 3, "double": 4, "tensor": 5, "list": 10}


def ints(b: flatbuffers.Builder, xs, size=4, prepend="PrependInt32"):
    b.StartVector(size, len(xs), size)
    for x in reversed(xs):
        getattr(b, prepend)(x)
    return b.EndVector()


def table(b, fields):
    """fields: list of (slot, kind, value) with kind 'off', 'u8', 'bool', 'i32', 'u32', 'i64', 'f64'."""
    b.StartObject(max(s for s, _, _ in fields) + 1)
    for slot, kind, value in fields:
        {"off": b.PrependUOffsetTRelativeSlot, "u8": b.PrependUint8Slot, "bool": b.PrependBoolSlot,
         "i32": b.PrependInt32Slot, "u32": b.PrependUint32Slot, "i64": b.PrependInt64Slot,
         "f64": b.PrependFloat64Slot}[kind](slot, value, 0 if kind != "f64" else 0.0)
    return b.EndObject()


def _offsets(b, offs):
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _value(b, v):
    kind = v[0]
    if kind == "tensor":
        _, mem_id, offset, n, *rest = v
        scalar_type = rest[0] if rest else 6
        sizes_vec = ints(b, list(n) if isinstance(n, (list, tuple)) else [n])
        if mem_id is None:  # no allocation_info: neither planned nor a constant
            t = table(b, [(0, "u8", scalar_type), (2, "off", sizes_vec)])
        else:
            alloc = table(b, [(0, "u32", mem_id), (1, "u32", offset)])
            t = table(b, [(0, "u8", scalar_type), (2, "off", sizes_vec), (6, "off", alloc)])
    elif kind == "list":
        t = table(b, [(0, "off", ints(b, v[1]))])
    elif kind == "int":
        t = table(b, [(0, "i64", v[1])])
    elif kind == "bool":
        t = table(b, [(0, "bool", v[1])])
    elif kind == "double":
        t = table(b, [(0, "f64", v[1])])
    elif kind == "null":
        b.StartObject(0)
        t = b.EndObject()
    else:
        raise ValueError(f"unknown value kind {kind!r}")
    return table(b, [(0, "u8", TAGS[kind]), (1, "off", t)])


def build_program(values, instructions, sizes=(0, 64), operators=(("aten::op", "out"),), inputs=None,
                  outputs=None, name: str = "forward", devices=()) -> bytes:
    """A one-method Program (see the module docs); inputs default to [0], outputs to the last value."""
    b = flatbuffers.Builder(1024)
    evs, same = [], {}
    for v in values:
        if id(v) not in same:
            same[id(v)] = _value(b, v)
        evs.append(same[id(v)])
    values_vec = _offsets(b, evs)
    instrs, vectors, tables = [], {}, {}
    for ins in instructions:
        if id(ins) not in tables:
            op, args = (0, ins) if isinstance(ins, list) else ins
            if id(args) not in vectors:
                vectors[id(args)] = ints(b, args)
            call = table(b, [(0, "i32", op), (1, "off", vectors[id(args)])])
            tables[id(ins)] = table(b, [(0, "u8", 1), (1, "off", call)])
        instrs.append(tables[id(ins)])
    chain = table(b, [(2, "off", _offsets(b, instrs))])
    chains = _offsets(b, [chain])
    ops = []
    for op_name, overload in operators:
        n, o = b.CreateString(op_name), b.CreateString(overload)
        ops.append(table(b, [(0, "off", n), (1, "off", o)]))
    ops_vec = _offsets(b, ops)
    sizes_vec = ints(b, list(sizes), 8, "PrependInt64")
    ins_vec = ints(b, [0] if inputs is None else list(inputs))
    outs_vec = ints(b, [len(values) - 1] if outputs is None else list(outputs))
    fields = []
    if devices:  # (buffer_idx, device_type, device_index): the arenas a device holds
        devs = [table(b, [(0, "i32", i), (1, "u8", t), (2, "u8", d)]) for i, t, d in devices]
        fields.append((9, "off", _offsets(b, devs)))
    name = b.CreateString(name)
    plan = table(b, [(0, "off", name), (2, "off", values_vec), (3, "off", ins_vec), (4, "off", outs_vec),
                     (5, "off", chains), (6, "off", ops_vec), (8, "off", sizes_vec), *fields])
    plans = _offsets(b, [plan])
    prog = table(b, [(0, "u32", 0), (1, "off", plans)])
    b.Finish(prog, file_identifier=b"ET12")
    return bytes(b.Output())


#: bundled-program Value union tags (bundled_program_schema.fbs ValueUnion)
BUNDLED_TAGS = {"tensor": 1, "int": 2, "bool": 3, "double": 4}


def _bundled_value(b, v):
    kind = v[0]
    if kind == "tensor":  # ("tensor", scalar_type, sizes, data)
        _, scalar_type, sizes, data = v
        b.StartVector(1, len(data), 16)  # force_align 16, as ExecuTorch writes tensor data
        for x in reversed(bytes(data)):
            b.PrependUint8(x)
        data_vec = b.EndVector()
        sizes_vec = ints(b, list(sizes))
        t = table(b, [(0, "u8", scalar_type), (1, "off", sizes_vec), (2, "off", data_vec)])
    elif kind == "int":
        t = table(b, [(0, "i64", v[1])])
    elif kind == "bool":
        t = table(b, [(0, "bool", v[1])])
    elif kind == "double":
        t = table(b, [(0, "f64", v[1])])
    else:
        raise ValueError(f"unknown bundled value kind {kind!r}")
    return table(b, [(0, "u8", BUNDLED_TAGS[kind]), (1, "off", t)])


def build_bundled(program: bytes, suites, version: int = 0) -> bytes:
    """A bundled program (``.bpte``, identifier BP08) carrying ``program``, written byte by byte.

    ``suites``: ``[(method_name, [(inputs, expected_outputs), ...]), ...]``; a value is
    ``("tensor", scalar_type, sizes, data)``, ``("int", n)``, ``("bool", b)`` or ``("double", x)``.
    A method may be given two suites, or a suite a method the program lacks.
    """
    b = flatbuffers.Builder(len(program) + 4096)
    suite_offs = []
    for method, cases in suites:
        case_offs = []
        for inputs, expected in cases:
            ins = _offsets(b, [_bundled_value(b, v) for v in inputs])
            outs = _offsets(b, [_bundled_value(b, v) for v in expected])
            case_offs.append(table(b, [(0, "off", ins), (1, "off", outs)]))
        cases_vec = _offsets(b, case_offs)
        name = b.CreateString(method)
        suite_offs.append(table(b, [(0, "off", name), (1, "off", cases_vec)]))
    suites_vec = _offsets(b, suite_offs)
    b.StartVector(1, len(program), 32)  # force_align 32, as ExecuTorch writes the carried program
    b.head = b.head - len(program)
    b.Bytes[b.head : b.head + len(program)] = program
    prog = b.EndVector()
    root = table(b, [(0, "u32", version), (1, "off", suites_vec), (2, "off", prog)])
    b.Finish(root, file_identifier=b"BP08")
    return bytes(b.Output())
