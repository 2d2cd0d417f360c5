"""Hostile programs built with flatbuffers.Builder (tests/crafting.py): self-referencing lists,
references that would wrap around, vectors that claim more than the file."""

from __future__ import annotations

import struct

import pytest

import pte_lab
from pte_lab import PteFormatError
from tests.crafting import build_program


def test_builder_program_reads():
    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]])
    m = pte_lab.open(data).methods["forward"]
    assert [a.size for a in m.arenas] == [64]
    assert list(m.tensors.role) == ["input", "output"]
    assert m.arena(1).peak_bytes == 32


def test_list_naming_itself_and_lists_of_lists_terminate():
    # value 2 names itself; value 3 names the list 2 (lists of lists are not followed). Instruction 1
    # returns list 2 (its last argument), so it writes value 1: nothing is read before it is written.
    values = [("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("list", [0, 2, 1]), ("list", [2, 3]),
              ("tensor", 1, 32, 4)]
    data = build_program(values, [[3], [4, 2]])
    m = pte_lab.open(data).methods["forward"]
    df = m.tensors.set_index("value")
    assert (df.loc[1, "first"], df.loc[1, "last"]) == (1, 1)  # named through list 2 at instruction 1
    assert m.validate() == []


def test_list_item_out_of_range():
    data = build_program([("tensor", 1, 0, 4), ("list", [0, 99]), ("tensor", 1, 16, 4)], [[1, 2]])
    with pytest.raises(PteFormatError, match="value index 99 out of range"):
        pte_lab.open(data).methods["forward"].arenas


def test_reference_that_would_wrap_around_is_refused():
    # a uoffset of 2**32 - k is a backwards reference under 32-bit arithmetic: a cycle
    data = bytearray(build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]]))
    root = struct.unpack_from("<I", data, 0)[0]
    vt = root - struct.unpack_from("<i", data, root)[0]
    plans_field = root + struct.unpack_from("<H", data, vt + 4 + 2 * 1)[0]
    data[plans_field : plans_field + 4] = struct.pack("<I", 2**32 - 8)
    with pytest.raises(PteFormatError, match="outside the flatbuffer"):
        pte_lab.open(bytes(data))


def test_vector_claiming_more_than_the_file():
    data = bytearray(build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]]))
    pos = bytes(data).find(b"forward") - 4  # the string's length prefix
    data[pos : pos + 4] = struct.pack("<I", 10**9)
    with pytest.raises(PteFormatError, match="claims 1000000000 elements"):
        pte_lab.open(bytes(data))


def test_a_shape_too_big_to_print_is_a_format_error_everywhere():
    """500 dims of 2**31-1: the byte count has ~4,700 digits, past Python's int-to-str limit."""
    data = build_program([("tensor", 1, 0, [2**31 - 1] * 500), ("tensor", 1, 16, 4)], [[0, 1, 1]])
    pte = pte_lab.open(data)
    m = pte.methods["forward"]
    with pytest.raises(PteFormatError, match="claims 2\\*\\*62 bytes or more") as info:
        m.tensors
    assert len(str(info.value)) < 400  # the shape is abbreviated, not 500 numbers
    assert "unreadable" in repr(pte) and "unreadable" in repr(m)
    for obj in (pte, m):
        html = obj._repr_html_()
        assert "unreadable" in html and "PteFormatError" in html


def test_a_vector_shared_by_many_references_is_refused_not_decoded_each_time():
    """2,000 kernel calls naming one 100,000-argument vector: 200 million arguments from a 0.4 MB file."""
    big = [0] * 100_000
    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [big] * 2_000 + [[0, 1, 1]])
    assert len(data) < 600_000
    with pytest.raises(PteFormatError, match="reference their vectors so many times over"):
        pte_lab.open(data).methods["forward"].instructions


def test_a_vector_shared_a_few_times_is_fine():
    args = [0, 1, 1]
    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [args] * 50)
    assert pte_lab.open(data).methods["forward"].n_instructions == 50


def test_a_written_tensor_without_memory_is_named_and_never_loaded(tmp_path):
    """The runtime would write through a null pointer (seen: execute segfaults)."""
    data = build_program([("tensor", 1, 0, 4), ("tensor", None, 0, 4), ("tensor", 1, 16, 4)],
                         [[0, 1, 1], [1, 2, 2]])
    pte = pte_lab.open(data)
    (f,) = [w for w in pte.warnings() if w.kind == "unbacked_tensor"]
    assert f.severity == "error" and f.details.values == (1,) and "instruction 0" in f.message
    path = tmp_path / "unbacked.pte"
    path.write_bytes(data)
    with pytest.raises(PteFormatError, match="no memory"):
        pte_lab.load(path)


def test_many_values_sharing_one_tensor_table():
    """20,000 values share one planned tensor table, each read once: every one is a view of the first
    writer at that offset (the view search scanned all of them for each: quadratic)."""
    shared = ("tensor", 1, 0, 4)
    n = 20_000
    values = [("tensor", 1, 16, 4)] + [shared] * n + [("tensor", 1, 32, 4)]
    # instruction 0 writes value 1 (its out argument); every later one reads the next value
    data = build_program(values, [[0, 1, 1]] + [[v, n + 1, n + 1] for v in range(2, n + 1)])
    m = pte_lab.open(data).methods["forward"]
    df = m.tensors.set_index("value")
    views = df[df.role == "view"]
    assert len(views) == n - 1 and (views["first"] == 0).all()
    assert df.loc[1, "last"] == n - 1  # the base stays alive while its views are read
    assert m.validate() == []


def test_a_planned_tensor_nothing_names_overlaps_nothing():
    """Value 1 is planned at the input's offset but no instruction names it: it is never alive, so it
    shares bytes with nothing (it was reported as overlapping the input, "alive [1, 0]")."""
    ins = [0, 2, 2]
    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [ins, list(ins)])
    m = pte_lab.open(data).methods["forward"]
    assert list(m.tensors.role) == ["input", "unused", "output"]
    assert m.conflicts == [] and m.findings() == []


def _count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_one_call_naming_20000_values_that_share_a_tensor_table(monkeypatch):
    """The issue's shape: 20,000 values sharing one tensor table, all read by one KernelCall. Each is read
    before anything writes its bytes (state, like a KV cache), so they all overlap: the findings say so once
    per pair up to the limit, and the instruction's arguments are worked out once, not once per value."""
    from pte_lab.model import lifetimes

    n = 20_000
    shared = ("tensor", 1, 0, 4)
    values = [("tensor", 1, 16, 4)] + [shared] * n + [("tensor", 1, 32, 4)]
    data = build_program(values, [list(range(1, n + 1)) + [n + 1, n + 1]])
    calls = _count_calls(monkeypatch, lifetimes, "_written")
    m = pte_lab.open(data).methods["forward"]
    df = m.tensors.set_index("value")
    assert (df.loc[1:n, "role"] == "mutable_buffer").all() and (df.loc[1:n, "first"] == -1).all()
    overlaps = [f for f in m.findings() if f.kind == "plan_overlap"]
    assert len(overlaps) == 1000 and "value 1 " in overlaps[0].message
    assert len(calls) <= 2  # once for the views, once for the unbacked-write check: not once per value


def test_an_instruction_record_named_many_times_is_worked_out_once(monkeypatch):
    """50,000 places name one Instruction table of 30 arguments: what it writes is worked out once, not
    50,000 times (1.5 million arguments)."""
    from pte_lab.model import lifetimes

    values = [("tensor", 1, 16 * i, 4) for i in range(30)]
    ins = list(range(29)) + [29, 29]
    data = build_program(values, [ins] * 50_000, sizes=(0, 16 * 30))
    calls = _count_calls(monkeypatch, lifetimes, "_written")
    m = pte_lab.open(data).methods["forward"]
    assert m.n_instructions == 50_000
    df = m.tensors.set_index("value")
    assert (df.loc[29, "role"], df.loc[29, "first"], df.loc[29, "last"]) == ("output", 0, 50_000)
    assert (df.loc[1, "role"], df.loc[1, "first"]) == ("mutable_buffer", -1)  # read before anything writes it
    assert m.validate() == [] and not [f for f in m.findings() if f.severity == "error"]
    assert len(calls) <= 2


def test_a_list_named_over_and_over_is_charged_like_decoding():
    """One TensorList of 60,000 items named by 100,000 calls (one shared Instruction table): reading it the
    way the analysis does means 6 billion items from a 0.6 MB file; refused, and quickly."""
    values = [("tensor", 1, 16, 4), ("tensor", 1, 0, 4), ("list", [1] * 60_000), ("tensor", 1, 32, 4)]
    ins = [2, 3, 3]
    data = build_program(values, [[0, 1, 1]] + [ins] * 100_000)
    with pytest.raises(PteFormatError, match="so many times over"):
        pte_lab.open(data).methods["forward"].instructions


# ------------------------------------------------- exported programs, one field changed: native deaths
def _plan(data, name):
    from pte_lab.format import read

    raw, _ = read(bytes(data))
    return next(p for p in raw._root.tables(1, "execution_plan") if p.string(0, "name") == name)


def _int_where_a_tensor_goes(data: bytes) -> bytes:
    """The portable MLP's relu (instruction 2, args [11, 14, 14]) reads v12, addmm's beta (an Int)."""
    data = bytearray(data)
    call = _plan(data, "forward").tables(5, "chains")[0].tables(2, "instructions")[2].table(1, "instr_args")
    at = call._field(1, 4)
    args = at + struct.unpack_from("<I", data, at)[0] + 4
    assert struct.unpack_from("<3i", data, args) == (11, 14, 14)
    struct.pack_into("<i", data, args, 12)
    return bytes(data)


def _delegate_retargeted(data: bytes, method: str, delegate: int, segment: int) -> bytes:
    """``method``'s delegate now names ``segment``, another delegate's blob."""
    data = bytearray(data)
    ref = _plan(data, method).tables(7, "delegates")[delegate].table(1, "processed")
    struct.pack_into("<I", data, ref._field(1, 4), segment)
    return bytes(data)


def test_a_kernel_argument_of_the_wrong_kind_is_refused_before_executorch_sees_it(program_bytes, tmp_path):
    """ExecuTorch's relu kernel unboxes its first argument as a tensor: given an Int, the process aborts
    (SIGABRT in execute, checked in the slow test below). pte_lab.load refuses it, naming the argument."""
    data = _int_where_a_tensor_goes(program_bytes("portable"))
    path = tmp_path / "int_for_tensor.pte"
    path.write_bytes(data)
    assert not [f for f in pte_lab.open(data).warnings() if f.severity == "error"]  # the file alone looks fine
    with pytest.raises(PteFormatError, match=r"instruction 2 \(aten::relu.out\) passes v12, an Int, as 'self', "
                                             r"where its schema takes Tensor"):
        pte_lab.load(path)
    from pte_lab.runtime.schemas import schema_findings

    (f,) = [f for f in schema_findings(pte_lab.open(data)) if f.kind == "operator_arguments"]
    assert f.severity == "error" and f.method == "forward" and len(f.details.problems) == 1


def test_operators_without_a_schema_are_named(program_bytes):
    """The exported LLM calls executorch_prim::et_view, which torch's registry does not know: findings say its
    arguments are not checked; every other operator of every example program passes the check."""
    from pte_lab.runtime.schemas import program_schemas, schema_findings

    pte = pte_lab.open(program_bytes("llm"))
    schemas = program_schemas(pte)
    assert schemas["llama::update_cache.out"]["arguments"][:3] == (("value", "Tensor"), ("cache", "Tensor"),
                                                                   ("start_pos", "int"))
    (f,) = schema_findings(pte, schemas)
    assert f.kind == "unchecked_operators" and f.severity == "info"
    assert f.details.operators == ("executorch_prim::et_view.default",)
    assert f in pte.methods["forward"].findings(schemas)
    for name in ("portable", "xnnpack", "kv_cache", "dynamic", "cond", "transformer", "llm_index_put"):
        assert not [f for f in schema_findings(pte_lab.open(program_bytes(name))) if f.severity != "info"], name


def test_a_delegate_naming_another_delegates_blob_is_a_finding(program_bytes):
    """forward's XNNPACK delegate retargeted at the segment of attention's delegate 5 (ExecuTorch segfaults
    running it: the slow test below)."""
    data = _delegate_retargeted(program_bytes("xnnpack"), "forward", 0, 6)
    (f,) = [f for f in pte_lab.open(data).warnings() if f.kind == "shared_delegate_blob"]
    assert f.severity == "error" and f.details.delegates == (("attention", 5), ("forward", 0))
    assert "segment 6" in f.message
    assert not [f for f in pte_lab.open(program_bytes("xnnpack")).warnings()
                if f.kind in ("shared_delegate_blob", "delegate_blob_format")]


def test_a_blob_that_is_not_its_backends_is_a_finding(program_bytes):
    from pte_lab.format import read

    data = bytearray(program_bytes("xnnpack"))
    seg = read(bytes(data))[0].segments[8]  # forward's XNNPACK blob
    assert data[seg.offset + 4 : seg.offset + 8] == b"XH00"
    data[seg.offset + 4 : seg.offset + 8] = b"ZZZZ"
    (f,) = [f for f in pte_lab.open(bytes(data)).warnings() if f.kind == "delegate_blob_format"]
    assert f.method == "forward" and f.severity == "error" and "b'XH00'" in f.message


@pytest.mark.slow
def test_no_crafted_file_kills_the_process_in_the_default_mode(program_bytes, tmp_path):
    """Each file, given straight to ExecuTorch in a child process, kills it or fails it; through pte_lab.load with the
    default isolate=None, each is refused or runs in a worker, and the error is named."""
    import subprocess
    import sys

    import torch

    from pte_lab.errors import ExecuTorchError, RuntimeCrashedError

    bad = tmp_path / "bad_header.pte"
    data = bytearray(program_bytes("xnnpack"))
    from pte_lab.format import read

    seg = read(bytes(data))[0].segments[8]
    data[seg.offset + 4 : seg.offset + 8] = b"ZZZZ"
    bad.write_bytes(bytes(data))
    cases = {"int_for_tensor": (_int_where_a_tensor_goes(program_bytes("portable")), [torch.randn(4, 32)]),
             "retargeted": (_delegate_retargeted(program_bytes("xnnpack"), "forward", 0, 6), [torch.randn(4, 32)])}
    child = ("import sys, torch\nfrom executorch.runtime import Runtime\n"
             "m = Runtime.get().load_program(sys.argv[1]).load_method('forward')\nm.execute([torch.randn(4, 32)])\n")
    for name, (blob, _inputs) in cases.items():
        path = tmp_path / f"{name}.pte"
        path.write_bytes(blob)
        rc = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, timeout=300).returncode
        if name == "int_for_tensor":
            assert rc < 0 or rc in (134, 139), (name, rc)  # SIGABRT / SIGSEGV
        else:  # undefined behaviour: a SIGSEGV on most runs, a refused execute on others
            assert rc != 0, (name, rc)
    with pytest.raises(PteFormatError, match="passes v12, an Int"):
        pte_lab.load(tmp_path / "int_for_tensor.pte")
    with pte_lab.load(tmp_path / "retargeted.pte") as prog:
        assert prog.isolated
        # Reading a delegate's arguments from the wrong values is undefined: in the worker it ends in a
        # SIGSEGV or, with another memory layout, in the backend refusing them (0x12). Either way the caller
        # lives on with a named error naming the method.
        with pytest.raises((RuntimeCrashedError, ExecuTorchError), match="SIGSEGV|0x12") as info:
            prog.load_method("forward")(*cases["retargeted"][1])
        assert "forward" in str(info.value)
    with pte_lab.load(bad) as prog:
        assert prog.isolated
        with pytest.raises(ExecuTorchError, match="DelegateInvalidCompatibility"):
            prog.load_method("forward")


# ------------------------------------------------------------------ Vela bin streams (EthosUBackend blobs)
def _block(name: bytes, payload: bytes, external: int = 0) -> bytes:
    """One block as Arm's packer writes it (written here independently of pte_lab's reader)."""
    head = name[:16].ljust(16, b"\0") + struct.pack("<IB11x", len(payload), external)
    return head + payload + b"\0" * (-len(payload) % 16)


def _ios(*ios) -> bytes:
    return struct.pack("<i", len(ios)) + b"".join(struct.pack("<9i", *io) for io in ios)


def _stream(*middle: bytes, end: bool = True) -> bytes:
    return _block(b"vela_bin_stream", b"") + b"".join(middle) + (_block(b"vela_end_stream", b"") if end else b"")


GOOD = (_block(b"cmd_data", b"COP1" + bytes(28)), _block(b"weight_data", bytes(100)),
        _block(b"scratch_size", struct.pack("<I", 4096)), _block(b"inputs", _ios((1, 1, 1, 3, 4, 4, 1, 0, 1))),
        _block(b"outputs", _ios((1, 1, 1, 8, 4, 4, 1, 64, 1))))


def _vela(data: bytes, file_offset: int | None = 0):
    from pte_lab.format.vela import read_vela

    calls = []

    def read(off, n):
        calls.append(n)
        return data[off : off + n]

    s = read_vela(read, len(data), file_offset)
    return s, calls


def test_a_vela_stream_reads():
    s, _ = _vela(_stream(*GOOD))
    assert s.ok and (s.command_bytes, s.weight_bytes, s.scratch_bytes) == (32, 100, 4096)
    assert [b.name for b in s.blocks][1:4] == ["cmd_data", "weight_data", "scratch_size"]
    assert s.inputs[0].shape == (1, 1, 1, 3, 4, 4) and s.inputs[0].nbytes == 48 and s.outputs[0].offset == 64


@pytest.mark.parametrize("data, words", [
    (b"", "shorter than one 32-byte block header"),
    (b"vela_bin_stream\0" + bytes(20), "not a multiple of 16"),
    (_stream(*GOOD)[32:], "does not start with 'vela_bin_stream'"),
    (_stream(*GOOD, end=False), "not the 'vela_end_stream' footer"),
    (_stream(*GOOD, end=False), "ends without a 'vela_end_stream' block"),
    (_stream(_block(b"cmd_data", b"COP9" + bytes(12))), "not COP1 or COP2"),
    (_stream(_block(b"cmd_data", b"CO")), "too short for its 4-byte magic"),
    (_stream(_block(b"scratch_size", b"\1\0")), "not a 4-byte size"),
    (_stream(_block(b"mystery", b"")), "unknown block 'mystery'"),
    (_stream(_block(b"inputs", struct.pack("<i", 0x7FFFFFFF))), "claims 2147483647 descriptors"),
    (_stream(_block(b"inputs", struct.pack("<i", -3))), "claims -3 descriptors"),
    (_stream(_block(b"inputs", b"\1")), "less than its 4-byte count"),
    (_stream(_block(b"weight_data", bytes(40), external=1)), "holds a 40-byte key, not 64"),
    (_stream() + _block(b"weight_data", b""), "followed by 32 more bytes"),
    (_stream(_block(b"vela_bin_stream", b"")), "appears again at byte 32"),
])
def test_malformed_vela_streams_are_problems_never_errors(data, words):
    s, _ = _vela(data)
    assert not s.ok and any(words in p for p in s.problems), s.problems


def test_a_block_claiming_more_than_the_blob_reads_nothing_past_it():
    data = bytearray(_stream(*GOOD))
    struct.pack_into("<I", data, 32 + 16, 0xFFFFFFF0)  # cmd_data's size
    s, calls = _vela(bytes(data))
    assert "declares 4,294,967,280 bytes, past the end" in s.problems[0]
    assert max(calls) <= 32  # headers only: nothing the size claims is read or allocated


def test_many_blocks_stop_the_walk():
    from pte_lab.format.vela import MAX_BLOCKS

    s, calls = _vela(_stream(*[_block(b"weight_data", b"")] * 5000))
    assert len(s.blocks) == MAX_BLOCKS and "stopped reading" in s.problems[-1]
    assert len(calls) < 3 * MAX_BLOCKS


def test_a_misaligned_blob_is_refused_by_the_runtime():
    s, _ = _vela(_stream(*GOOD), file_offset=8)
    assert s.problems == ("the blob starts at byte 8 of the program, not on a 16-byte boundary: the runtime "
                          "refuses a stream whose address is not 16-byte aligned",)


def test_a_pre_0_7_stream_carries_its_scratch_and_is_refused_now():
    s, _ = _vela(_stream(GOOD[0], GOOD[1], _block(b"scratch_data", bytes(2048)), *GOOD[3:]))
    assert (s.scratch_bytes, s.legacy_scratch_bytes) == (None, 2048)
    assert any("ExecuTorch 0.7 and later refuse" in p for p in s.problems)


def test_external_blocks_name_their_named_data():
    key = b"ab" * 32
    s, _ = _vela(_stream(GOOD[0], _block(b"weight_data", key, external=1), *GOOD[2:]))
    assert s.ok and s.external == {"weight_data": key.decode()} and s.weight_bytes == 64
    from pte_lab.model.ethos_u import DelegateMemory

    d = DelegateMemory("forward", 0, "EthosUBackend", "segment", 0, 1, stream=s,
                       external=(("weight_data", key.decode(), 12345),))
    assert d.weight_bytes == 12345
    (w,) = [p for p in d.parts() if p.part == "weights"]
    assert w.source == "named data" and w.allocator.startswith("read in place from named data abababab")


def test_an_operator_prints_as_the_file_names_it_and_is_read_by_its_parts():
    # three kernels: an operator with no overload, one with no namespace, one whose name carries an escape
    values = [("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("tensor", 1, 32, 4), ("tensor", 1, 48, 4)]
    ops = (("aten::relu", ""), ("my_op", "out"), ("evil::x\x1b[2J", "out"))
    data = build_program(values, [(0, [0, 1]), (1, [1, 2]), (2, [2, 3])], sizes=(0, 64), operators=ops)
    m = pte_lab.open(data).methods["forward"]
    assert [i.target for i in m.instructions] == ["aten::relu", "my_op.out", "evil::x\x1b[2J.out"]
    assert [(o.namespace, o.name, o.overload) for o in m.operators] == [
        ("aten", "relu", None), (None, "my_op", "out"), ("evil", "x\x1b[2J", "out")]
    assert [i.operator.name for i in m.instructions] == ["relu", "my_op", "x\x1b[2J"]
    # what wrote each tensor, as the tensors table and the text show it: the file's text, escaped
    made = m.tensors.set_index("value")["op"]
    assert [made[v] for v in (1, 2, 3)] == ["aten::relu", "my_op.out", "evil::x\\x1b[2J.out"]
    assert "\x1b" not in repr(m) and "\x1b" not in repr(m.arena(1))


def test_a_backend_pte_lab_does_not_know_gets_what_is_true_of_any_delegate(tmp_path, capsys):
    """A program of a backend nothing here exports or registers (its XNNPACK delegate renamed, its blob's header
    overwritten): inspect names it, counts its blob's bytes, gives any delegate's note, and reads none of its
    bytes as XNNPACK's (what CONTRIBUTING's blob-layout recipe starts from)."""
    from pathlib import Path

    from pte_lab.cli import main
    from tests.crafting import with_delegate_renamed

    real = (Path(__file__).parent / "data" / "apple" / "focus_xnnpack.pte").read_bytes()
    path = tmp_path / "toy.pte"
    path.write_bytes(with_delegate_renamed(real, "XnnpackBackend", "ToyNpuBackend", b"\0\0\0\0TOY1"))
    (d,) = pte_lab.open(path).methods["forward"].delegate_memory
    assert d.backend == "ToyNpuBackend" and d.contents is None  # no reader registered: no parts guessed
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ToyNpuBackend delegate 1.9 KiB" in out
    assert "backend ToyNpuBackend (ToyNpuBackend): known: the planned arenas and the blob's bytes" in out
    assert "XH00" not in out and "graph" not in out
