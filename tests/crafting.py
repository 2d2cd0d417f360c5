"""Programs written byte by byte with flatbuffers.Builder: crafted plans for the reader, the analysis and the
loader (shared by tests/test_crafted.py and benchmarks/bench_crafted.py).

A program has one method, ``forward``. ``values`` describe its EValues:

* ``("tensor", mem_id, offset, sizes)``: a float tensor (``sizes`` an int or a list); ``mem_id=None``
  leaves it without allocation_info; an optional fifth item is its scalar type (6 float, 0 uint8...), a
  sixth its constant buffer (``data_buffer_idx``, with ``mem_id=None``);
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
        buffer = rest[1] if len(rest) > 1 else 0  # data_buffer_idx: a constant's buffer
        sizes_vec = ints(b, list(n) if isinstance(n, (list, tuple)) else [n])
        if mem_id is None:  # no allocation_info: neither planned nor a constant (unless a buffer is given)
            t = table(b, [(0, "u8", scalar_type), (2, "off", sizes_vec), (5, "u32", buffer)])
        else:
            high = [(2, "u32", offset >> 32)] if offset >> 32 else []  # memory_offset_high: past 4 GiB
            alloc = table(b, [(0, "u32", mem_id), (1, "u32", offset & 0xFFFFFFFF), *high])
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


def once(b, items, make) -> list[int]:
    """The offsets of ``items``, each written by ``make(b, item)``: the same Python object given twice is
    written once and referenced twice."""
    written: dict[int, int] = {}
    out = []
    for x in items:
        if id(x) not in written:
            written[id(x)] = make(b, x)
        out.append(written[id(x)])
    return out


def build_program(values, instructions, sizes=(0, 64), operators=(("aten::op", "out"),), inputs=None,
                  outputs=None, name: str = "forward", devices=()) -> bytes:
    """A one-method Program (see the module docs); inputs default to [0], outputs to the last value."""
    b = flatbuffers.Builder(1024)
    values_vec = _offsets(b, once(b, values, _value))
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


# ----------------------------------------------------------------- more of the format (issue 29's generators)
#: Instruction union tags (program.fbs InstructionArguments)
KERNEL_CALL, DELEGATE_CALL, JUMP_FALSE_CALL = 1, 2, 4


def _instruction(b, ins, vectors):
    """A KernelCall (a list, or ``(op, [args])``), ``("delegate", index, [args])`` or ``("jump", cond, dest)``."""
    if isinstance(ins, list):
        ins = (0, ins)
    if ins[0] == "jump":
        _, cond, dest = ins
        return table(b, [(0, "u8", JUMP_FALSE_CALL), (1, "off", table(b, [(0, "i32", cond), (1, "i32", dest)]))])
    tag, (target, args) = (DELEGATE_CALL, ins[1:]) if ins[0] == "delegate" else (KERNEL_CALL, ins)
    if id(args) not in vectors:
        vectors[id(args)] = ints(b, args)
    call = table(b, [(0, "i32", target), (1, "off", vectors[id(args)])])
    return table(b, [(0, "u8", tag), (1, "off", call)])


def _bytes_vector(b, data: bytes, align: int = 16):
    b.StartVector(1, len(data), align)
    b.head = b.head - len(data)
    b.Bytes[b.head : b.head + len(data)] = data
    return b.EndVector()


def build_full(values, instructions, sizes=(0, 64), operators=(("aten::op", "out"),), inputs=None, outputs=None,
               delegates=(), inline_data=(), constant_buffers=(), constant_offsets=None, segments=None,
               segment_data: bytes = b"", methods=1) -> bytes:
    """A Program as :func:`build_program` writes it, with more of the format:

    * instructions may be ``("jump", cond_value, destination)`` (JumpFalseCall) and ``("delegate", index,
      [args])`` (DelegateCall); the same Python object given twice is one Instruction table;
    * ``delegates``: ``(backend id, location, index)`` (location 0 inline, 1 segment), in every method;
    * ``inline_data``: the ``backend_delegate_data`` blobs (bytes; the same object twice is one table);
    * ``constant_buffers``: the ``constant_buffer`` storages (bytes; the same object twice is one table);
    * ``constant_offsets``: the constant segment's sub-segment offsets (segment 0), with ``segments``:
      ``[(offset, size)]`` into ``segment_data``, appended after the flatbuffer behind an extended header;
    * ``methods``: that many methods, ``forward``, ``m1``, ``m2``... sharing one plan's tables but its name.
    """
    b = flatbuffers.Builder(1024)
    blobs, data_tables = {}, []
    for blob in inline_data:
        if id(blob) not in blobs:
            blobs[id(blob)] = table(b, [(0, "off", _bytes_vector(b, blob))])
        data_tables.append(blobs[id(blob)])
    bufs, buf_tables = {}, []
    for blob in constant_buffers:
        if id(blob) not in bufs:
            bufs[id(blob)] = table(b, [(0, "off", _bytes_vector(b, blob))])
        buf_tables.append(bufs[id(blob)])
    values_vec = _offsets(b, once(b, values, _value))
    instrs, vectors, tables = [], {}, {}
    for ins in instructions:
        if id(ins) not in tables:
            tables[id(ins)] = _instruction(b, ins, vectors)
        instrs.append(tables[id(ins)])
    chain = table(b, [(2, "off", _offsets(b, instrs))])
    chains = _offsets(b, [chain])
    ops = []
    for name, overload in operators:
        n, o = b.CreateString(name), b.CreateString(overload)
        ops.append(table(b, [(0, "off", n), (1, "off", o)]))
    ops_vec = _offsets(b, ops)
    dels = []
    for did, loc, idx in delegates:
        ref = table(b, [(0, "u8", loc), (1, "u32", idx)])
        dels.append(table(b, [(0, "off", b.CreateString(did)), (1, "off", ref)]))
    dels_vec = _offsets(b, dels)
    sizes_vec = ints(b, list(sizes), 8, "PrependInt64")
    ins_vec = ints(b, [0] if inputs is None else list(inputs))
    outs_vec = ints(b, [len(values) - 1] if outputs is None else list(outputs))
    plans = []
    for k in range(methods):
        name = b.CreateString("forward" if k == 0 else f"m{k}")
        plans.append(table(b, [(0, "off", name), (2, "off", values_vec), (3, "off", ins_vec), (4, "off", outs_vec),
                               (5, "off", chains), (6, "off", ops_vec), (7, "off", dels_vec), (8, "off", sizes_vec)]))
    plans_vec = _offsets(b, plans)
    fields = [(0, "u32", 0), (1, "off", plans_vec)]
    if buf_tables:
        fields.append((2, "off", _offsets(b, buf_tables)))
    if data_tables:
        fields.append((3, "off", _offsets(b, data_tables)))
    if segments is not None:
        segs = [table(b, [(0, "i64", off), (1, "i64", size)]) for off, size in segments]
        fields.append((4, "off", _offsets(b, segs)))
    if constant_offsets is not None:
        offs = ints(b, list(constant_offsets), 8, "PrependUint64")
        fields.append((5, "off", table(b, [(0, "u32", 0), (1, "off", offs)])))
    prog = table(b, fields)
    b.Finish(prog, file_identifier=b"ET12")
    return with_segments(bytes(b.Output()), segment_data if segments is not None else None)


def with_segments(fb: bytes, segment_data: bytes | None) -> bytes:
    """``fb`` behind ExecuTorch's extended header (32 bytes at offset 8), then ``segment_data`` (16-aligned)."""
    import struct

    head = 32
    root = struct.unpack_from("<I", fb, 0)[0] + head
    program_size = len(fb) + head
    base = -(-program_size // 16) * 16 if segment_data is not None else 0
    data = segment_data or b""
    eh = b"eh00" + struct.pack("<IQQQ", head, program_size, base, len(data))
    out = struct.pack("<I", root) + fb[4:8] + eh + fb[8:]
    if segment_data is not None:
        out += b"\0" * (base - program_size) + data
    return out


def build_ptd(entries, segments=((0, 16),), segment_data: bytes = bytes(16)) -> bytes:
    """A ``.ptd`` (FlatTensor): ``entries`` are ``(key, segment, scalar_type, sizes)``; the same Python object
    given twice is one NamedData table named twice."""
    import struct

    b = flatbuffers.Builder(1024)
    same, named = {}, []
    for e in entries:
        if id(e) not in same:
            key, seg, st, sizes = e
            layout = table(b, [(0, "u8", st), (1, "off", ints(b, list(sizes)))])
            same[id(e)] = table(b, [(0, "off", b.CreateString(key)), (1, "u32", seg), (2, "off", layout)])
        named.append(same[id(e)])
    named_vec = _offsets(b, named)
    segs = _offsets(b, [table(b, [(0, "i64", off), (1, "i64", size)]) for off, size in segments])
    root = table(b, [(0, "u32", 0), (1, "off", segs), (2, "off", named_vec)])
    b.Finish(root, file_identifier=b"FT01")
    fb = bytes(b.Output())
    head = 48
    total_fb = len(fb) + head
    base = -(-total_fb // 16) * 16
    hdr = b"FH01" + struct.pack("<IQQQQ", 40, 0, total_fb, base, len(segment_data)) + bytes(head - 40)
    out = struct.pack("<I", struct.unpack_from("<I", fb, 0)[0] + head) + fb[4:8] + hdr + fb[8:]
    return out + b"\0" * (base - len(out)) + segment_data


#: bundled-program Value union tags (bundled_program_schema.fbs ValueUnion)
BUNDLED_TAGS = {"tensor": 1, "int": 2, "bool": 3, "double": 4}


def build_bundled(program: bytes, suites, version: int = 0) -> bytes:
    """A ``.bpte`` (identifier BP08) carrying ``program``: ``suites`` are ``(method, [(inputs, expected)])``
    with each value ``("tensor", scalar_type, sizes, data)``, ``("int", n)``, ``("bool", b)`` or
    ``("double", x)``; the same Python object twice is one table. A method may be given two suites, or a
    suite a method the program lacks."""
    b = flatbuffers.Builder(1024)
    memo: dict[int, int] = {}

    def once(obj, make):
        if id(obj) not in memo:
            memo[id(obj)] = make(obj)
        return memo[id(obj)]

    def value(v):
        if v[0] == "tensor":
            _, st, sizes, data = v
            t = table(b, [(0, "u8", st), (1, "off", ints(b, list(sizes))), (2, "off", _bytes_vector(b, data))])
            return table(b, [(0, "u8", 1), (1, "off", t)])
        kind = {"int": "i64", "bool": "bool", "double": "f64"}.get(v[0])
        if kind is None:
            raise ValueError(f"unknown bundled value kind {v[0]!r}")
        return table(b, [(0, "u8", BUNDLED_TAGS[v[0]]), (1, "off", table(b, [(0, kind, v[1])]))])

    def case(c):
        ins, outs = c
        iv = _offsets(b, [once(v, value) for v in ins])
        ov = _offsets(b, [once(v, value) for v in outs])
        return table(b, [(0, "off", iv), (1, "off", ov)])

    def suite(s):
        method, cases = s
        cv = _offsets(b, [once(c, case) for c in cases])
        return table(b, [(0, "off", b.CreateString(method)), (1, "off", cv)])

    suites_vec = _offsets(b, [once(s, suite) for s in suites])
    prog = _bytes_vector(b, program, 32)  # force_align 32, as ExecuTorch writes the carried program
    root = table(b, [(0, "u32", version), (1, "off", suites_vec), (2, "off", prog)])
    b.Finish(root, file_identifier=b"BP08")
    return bytes(b.Output())


# ------------------------------------------------------------------ Vela bin streams (EthosUBackend blobs)
def vela_block(name: bytes, payload: bytes, external: int = 0) -> bytes:
    """One block as Arm's packer writes it (written here independently of pte_lab's reader)."""
    import struct

    head = name[:16].ljust(16, b"\0") + struct.pack("<IB11x", len(payload), external)
    return head + payload + b"\0" * (-len(payload) % 16)


def vela_ios(*ios) -> bytes:
    import struct

    return struct.pack("<i", len(ios)) + b"".join(struct.pack("<9i", *io) for io in ios)


def vela_stream(*middle: bytes, end: bool = True) -> bytes:
    return (vela_block(b"vela_bin_stream", b"") + b"".join(middle)
            + (vela_block(b"vela_end_stream", b"") if end else b""))


# ------------------------------------------------------------ scaling generators (tests/test_scaling.py)
# Each builds one class of file that once cost quadratic work at size ``n``; doubling ``n`` doubles the file.
def many_arenas_many_tensors(n, grow=0):
    """n arenas, tensor i alone in arena i + 1, all named by one call; ``grow`` bytes more per tensor (a variant
    to diff against: every arena changes, every tensor is a cause)."""
    values = [("tensor", i + 1, 0, 4 + grow) for i in range(n)]
    return build_program(values, [list(range(n)) + [n - 1]], sizes=(0,) + (16 + 4 * grow,) * n)


def jump_chain(n):
    """n values first named at instruction 0 and last at 1, then n backward jumps, each reaching one past the
    last: every value's lifetime extends over the whole chain, link by link."""
    values = [("tensor", 1, 16 * i, 4) for i in range(n)] + [("bool", True)]
    writes = [v for i in range(n) for v in (i, i)]  # a kernel's out arguments: named twice, written
    return build_full(values, [writes, list(range(n))] + [("jump", n, k + 1) for k in range(n)],
                      sizes=(0, 16 * n), inputs=[n], outputs=[n - 1])


def one_table_named_often(n, blob_bytes=None):
    """One inline constant and one inline delegate blob (``blob_bytes``, default 8n) each named by n tables, one
    constant tensor named by n values."""
    k = 8 * n if blob_bytes is None else blob_bytes
    blob = (bytes(range(256)) * (k // 256 + 1))[:k]
    const = ("tensor", None, 0, [4, 4], 6, 1)
    values = [("tensor", 1, 0, 4)] + [const] * n + [("tensor", 1, 16, 4)]
    return build_full(values, [[0, n + 1, n + 1]], constant_buffers=[b""] + [blob] * n, inline_data=[blob] * n)


def ptd_one_entry_named_often(n, dims=64):
    """A .ptd whose n named_data entries all name one table (its layout ``dims`` dimensions of 1)."""
    entry = ("weight", 0, 6, [1] * dims)
    return build_ptd([entry] * n)


def many_descriptors(n, calls=None):
    """An EthosUBackend blob with n input descriptors and one output, called by ``calls`` (default n)
    DelegateCalls that share one Instruction table and pass two arguments."""
    io = (1, 1, 1, 3, 4, 4, 1, 0, 1)
    stream = vela_stream(vela_block(b"cmd_data", b"COP1" + bytes(28)), vela_block(b"weight_data", bytes(16)),
                         vela_block(b"scratch_size", __import__("struct").pack("<I", 4096)),
                         vela_block(b"inputs", vela_ios(*[io] * n)),
                         vela_block(b"outputs", vela_ios((1, 1, 1, 8, 4, 4, 1, 64, 1))))
    values = [("tensor", 1, 0, [1, 3, 4, 4], 1), ("tensor", 1, 48, [1, 8, 4, 4], 1)]
    call = ("delegate", 0, [0, 1])
    return build_full(values, [call] * (calls or n), sizes=(0, 176), delegates=[("EthosUBackend", 0, 0)],
                      inline_data=[stream], outputs=[1])


def long_offsets(n):
    """A constant segment of n one-byte sub-segments (the offset vector n long)."""
    values = [("tensor", 1, 0, 4), ("tensor", 1, 16, 4)]
    return build_full(values, [[0, 1, 1]], constant_offsets=list(range(n + 1)), segments=[(0, n + 1)],
                      segment_data=bytes((i * 7) % 251 for i in range(n + 1)))


def many_suites(n, shared=False):
    """A bundled program with n test suites for ``forward`` (one case each, one float input and output);
    ``shared``: one suite table named n times."""
    program = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1, 1]])
    x = ("tensor", 6, [4], bytes(16))
    if shared:
        suite = ("forward", [([x], [x])])
        return build_bundled(program, [suite] * n)
    return build_bundled(program, [("forward", [([("tensor", 6, [4], bytes([i % 256]) * 16)], [x])])
                                   for i in range(n)])


#: name -> (generator of the file at size n, the base size the suite uses)
SCALING = {
    "many arenas": (many_arenas_many_tensors, 200),
    "long jump chain": (jump_chain, 300),
    "one table named often": (one_table_named_often, 300),
    "ptd entry named often": (ptd_one_entry_named_often, 1000),
    "many Ethos-U descriptors": (many_descriptors, 300),
    "long offset vector": (long_offsets, 1000),
    "many suites": (many_suites, 200),
    "one suite named often": (lambda n: many_suites(n, shared=True), 1000),
}


def with_sizes(data: bytes, old, new) -> bytes:
    """``data`` (a real program) with its one int32 sizes vector ``old`` (a tensor's shape, e.g. an input's
    declared upper bound) rewritten in place to ``new``, of the same rank: what a file may declare, nothing
    else changed."""
    import struct

    find = struct.pack(f"<{len(old) + 1}i", len(old), *old)
    assert len(new) == len(old) and data.count(find) == 1, "the shape is not one sizes vector of this file"
    at = data.index(find)
    return data[:at] + struct.pack(f"<{len(new) + 1}i", len(new), *new) + data[at + len(find):]
# ------------------------------------------------------------ ETRecords (tests/test_etrecord_crafted.py and
# benchmarks/bench_etrecord.py): ZIP archives written byte by byte, so that their directory may lie
def zip_archive(entries) -> bytes:
    """A ZIP archive of ``entries``: ``(name, data)`` stored, or ``(name, data, options)`` with options
    ``deflate`` (True: the data deflated), ``pad`` (bytes of junk after the deflate stream, stored with the
    entry but never inflated) and ``declared`` (the uncompressed size the directory claims, instead of the
    data's), or ``same_as`` (another entry's tuple, given before: this name is listed in the central directory
    for that entry's stored bytes, overlapping it). The same tuple given twice is written once and listed twice;
    the same ``data`` object deflated twice is deflated once."""
    import struct
    import zlib

    body, directory, written, deflated = bytearray(), bytearray(), {}, {}
    count = 0
    for e in entries:
        name, data, opts = (e[0], e[1], e[2] if len(e) > 2 else {})
        key = id(opts["same_as"]) if "same_as" in opts else id(e)
        if key not in written:
            stored = data
            method = 0
            if opts.get("deflate"):
                if id(data) not in deflated:
                    c = zlib.compressobj(9, zlib.DEFLATED, -15)
                    deflated[id(data)] = c.compress(data) + c.flush()
                stored = deflated[id(data)] + b"\0" * opts.get("pad", 0)
                method = 8
            crc, size = zlib.crc32(data), opts.get("declared", len(data))
            raw = name.encode()
            offset = len(body)
            body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(stored), size,
                                len(raw), 0) + raw + stored
            written[key] = (offset, method, crc, len(stored), size)
        offset, method, crc, stored_size, size = written[key]
        raw = name.encode()
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, stored_size,
                                 size, len(raw), 0, 0, 0, 0, 0, offset) + raw
        count += 1
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(directory), len(body), 0)
    return bytes(body + directory + end)


def etr_node(name: str, handle=None, target: str = "executorch.exir.dialects.edge.ops.aten.op.default",
             module: str | None = None, trace: str | None = None, inputs=(), outputs=None, shape=None) -> dict:
    """One node of an edge program as torch.export's JSON writes it (``outputs`` default to its own name;
    ``shape`` names its output's sizes in the graph's ``tensor_values``, see :func:`edge_program`)."""
    md = {}
    if handle is not None:
        md["debug_handle"] = str(handle)
    if module is not None:
        md["nn_module_stack"] = f"L__self__,,pkg.Model;L__self__{module},{module},torch.nn.modules.linear.Linear"
    if trace is not None:
        md["stack_trace"] = trace
    outs = [name] if outputs is None else list(outputs)
    node = {"name": name, "target": target,
            "inputs": [{"name": f"a{k}", "arg": {"as_tensor": {"name": i}}} for k, i in enumerate(inputs)],
            "outputs": [{"as_tensor": {"name": o}} for o in outs], "metadata": md}
    if shape is not None:
        node["_shape"] = list(shape)
    return node


def edge_program(nodes, outputs=(), signature=None) -> bytes:
    """An edge program's JSON (``graph_module.graph``) holding ``nodes`` (:func:`etr_node`)."""
    import json

    values = {}
    clean = []
    for n in nodes:
        n = dict(n)
        shape = n.pop("_shape", None)
        if shape is not None:
            for o in n["outputs"]:
                values[o["as_tensor"]["name"]] = {"sizes": [{"as_int": d} for d in shape]}
        clean.append(n)
    graph = {"inputs": [], "outputs": [{"as_tensor": {"name": o}} for o in outputs], "nodes": clean,
             "tensor_values": values}
    gm = {"graph": graph}
    if signature is not None:
        gm["signature"] = signature
    return json.dumps({"graph_module": gm}, separators=(",", ":")).encode()


def build_etrecord(methods, *, deflate: bool = False, extra=()) -> bytes:
    """An ETRecord: ``methods`` maps a method name to ``{"handles": {instruction: handle or [handles]},
    "delegates": {instruction: backend}, "program": edge program bytes or None}``; ``deflate`` deflates every
    entry; ``extra`` are more ``zip_archive`` entries."""
    import json

    opts = {"deflate": True} if deflate else {}
    def dump(d):
        return json.dumps(d, separators=(",", ":")).encode()

    entries = [("ETRECORD_V0", b""),
               ("debug_handle_map", dump({m: {str(k): v for k, v in d.get("handles", {}).items()}
                                         for m, d in methods.items()}), opts),
               ("delegate_map", dump({m: {str(k): {"name": b} for k, b in d.get("delegates", {}).items()}
                                     for m, d in methods.items()}), opts)]
    for m, d in methods.items():
        if d.get("program") is not None:
            entries.append((f"edge_dialect_exported_program/{m}", d["program"], opts))
    return zip_archive(entries + list(extra))


def program_and_etrecord(instructions: int, nodes: int, *, handle_for=lambda i: 1, shapes: bool = True):
    """(program, ETRecord): a one-method program of ``instructions`` KernelCalls of ``aten::op.out``, each
    writing a tensor of 4 floats, and an ETRecord whose edge program has ``nodes`` ``aten.op`` nodes; instruction
    ``i`` carries handle ``handle_for(i)``, node ``j`` handle ``1 + j % max(handles)`` (all under handle 1 by
    default: the issue's 600 instructions under one debug handle)."""
    values = [("tensor", 1, 16 * i, 4) for i in range(instructions + 1)]
    program = build_program(values, [[i, i + 1] for i in range(instructions)],
                            sizes=(0, 16 * (instructions + 1)))
    handles = {i: handle_for(i) for i in range(instructions)}
    top = max(h for v in handles.values() for h in (v if isinstance(v, list) else [v]))
    graph = [etr_node(f"n{j}", 1 + j % top, module=f"layers.{j % 7}", shape=[4] if shapes else None,
                      inputs=[f"n{j - 1}"] if j else ())
             for j in range(nodes)]
    etr = build_etrecord({"forward": {"handles": handles, "program": edge_program(graph, [f"n{nodes - 1}"])}})
    return program, etr


# The campaign's ETRecords, each at size n (tests/test_etrecord_bounds.py at two sizes, benchmarks/bench_etrecord.py
# near 1 MB). A deflated entry is padded to a 100x ratio, what the old per-entry bound let through.
def _padded(data: bytes, ratio: int = 100) -> dict:
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return {"deflate": True, "pad": max(0, len(data) // ratio - len(c.compress(data) + c.flush()))}


def etr_handle_bomb(n: int) -> bytes:
    """One instruction listing n debug handles, deflated (2 bytes of JSON a handle: n = 50 M is 1 MB)."""
    data = b'{"forward":{"0":[' + b"1," * (n - 1) + b"1]}}"
    return zip_archive([("ETRECORD_V0", b""), ("debug_handle_map", data, _padded(data))])


def etr_minimal_nodes(n: int) -> bytes:
    """An edge program of n nodes of one handle, as little JSON as a node takes (~60 bytes)."""
    nodes = b",".join(b'{"name":"n%d","target":"aten.op.default","metadata":{"debug_handle":1}}' % j
                      for j in range(n))
    return b'{"graph_module":{"graph":{"nodes":[' + nodes + b"]}}}"


def etr_node_bomb(n: int) -> bytes:
    """n nodes (``{"name":"n"}``) in one deflated edge program (7.5 M nodes are about 1 MB)."""
    data = b'{"graph_module":{"graph":{"nodes":[' + b'{"name":"n"},' * (n - 1) + b'{"name":"n"}]}}}'
    return zip_archive([("ETRECORD_V0", b""), ("debug_handle_map", b'{"forward":{"0":1}}'),
                        ("edge_dialect_exported_program/forward", data, _padded(data))])


def etr_many_entries(k: int, entry_bytes: int = 1 << 20) -> bytes:
    """k edge programs of ``entry_bytes`` of JSON each (one node repeated), deflated: each within the old
    per-entry 1 MiB slack, ~2 KB stored."""
    node = b'{"name":"n","target":"aten.op.default","metadata":{"debug_handle":1}},'
    data = b'{"graph_module":{"graph":{"nodes":[' + node * (entry_bytes // len(node) - 1) + node[:-1] + b"]}}}"
    opts = {"deflate": True}
    handles = b"{" + b",".join(b'"m%d":{"0":1}' % i for i in range(k)) + b"}"
    return zip_archive([("ETRECORD_V0", b""), ("debug_handle_map", handles)]
                       + [(f"edge_dialect_exported_program/m{i}", data, opts) for i in range(k)])


def etr_stored_nodes(n: int, instructions: int = 4):
    """(program, ETRecord): the ETRecord stored (as ExecuTorch writes it) with n minimal nodes under one handle
    that every one of the program's ``instructions`` kernel calls carries: the most nodes a file of its size holds."""
    values = [("tensor", 1, 16 * i, 4) for i in range(instructions + 1)]
    program = build_program(values, [[i, i + 1] for i in range(instructions)], sizes=(0, 16 * (instructions + 1)))
    handles = b"{" + b",".join(b'"%d":1' % i for i in range(instructions)) + b"}"
    return program, zip_archive([("ETRECORD_V0", b""), ("debug_handle_map", b'{"forward":' + handles + b"}"),
                                 ("edge_dialect_exported_program/forward", etr_minimal_nodes(n))])


def delegates_sharing_a_handle(calls: int, nodes: int):
    """``calls`` delegate calls, each listing handle 1 (``nodes`` nodes) and one handle of its own."""
    values = [("tensor", 1, 16 * i, 4) for i in range(calls + 1)]
    program = build_full(values, [("delegate", 0, [i, i + 1]) for i in range(calls)],
                         sizes=(0, 16 * (calls + 1)), delegates=[("XnnpackBackend", 0, 0)], inline_data=[b"blob"])
    graph = [etr_node(f"n{j}", 1, inputs=[f"n{j - 1}"] if j else ()) for j in range(nodes)]
    graph += [etr_node(f"own{i}", 2 + i, inputs=[f"n{nodes - 1}"]) for i in range(calls)]
    return program, build_etrecord({"forward": {
        "handles": {i: [1, 2 + i] for i in range(calls)}, "delegates": {i: "XnnpackBackend" for i in range(calls)},
        "program": edge_program(graph, [f"own{calls - 1}"])}})


def with_delegate_renamed(program: bytes, old_id: str, new_id: str, head: bytes = b"") -> bytes:
    """``program`` (a real .pte whose one delegate is ``old_id``, its blob in a segment) with that delegate's id
    written as ``new_id`` (no longer than ``old_id``: the string's length prefix rewritten, the rest zeroed) and
    the first bytes of its blob replaced by ``head``: a program of a backend nothing here exports (a new
    delegate's blob layout, CONTRIBUTING's recipe), made from one that is."""
    import struct

    from pte_lab.format import read

    if len(new_id) > len(old_id):
        raise ValueError(f"{new_id!r} is longer than {old_id!r}: the flatbuffer has no room for it")
    data = bytearray(program)
    key = old_id.encode()
    at = data.find(key)
    if data.count(key) != 1 or struct.unpack_from("<I", data, at - 4) != (len(key),):
        raise ValueError(f"{old_id!r} is not one flatbuffer string of the program")
    struct.pack_into("<I", data, at - 4, len(new_id))
    data[at:at + len(key)] = new_id.encode().ljust(len(key), b"\0")
    (seg,) = [s for s in read(bytes(data))[0].segments if s.kind == f"delegate:{new_id}"]
    data[seg.offset:seg.offset + len(head)] = head
    return bytes(data)
