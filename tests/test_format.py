"""Reading: header checks, reading only the flatbuffer, bad input, fuzzing."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import textwrap
import time

import pytest

import pte_lab
from pte_lab import PteFormatError
from tests.fuzzing import mutations


def _analyse(pte):
    """Everything a person can ask of an opened program."""
    for m in pte.methods.values():
        m.arenas, m.planned, m.inputs, m.outputs, m.instructions, m.delegates
        m.findings()
    pte.warnings()
    pte.load_totals()
    pte.to_dict()


class CountingFile(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n=-1):
        out = super().read(n)
        self.bytes_read += len(out)
        return out

    def fileno(self):
        raise io.UnsupportedOperation


def test_open_reads_only_the_flatbuffer(program_bytes):
    data = program_bytes("xnnpack")
    pte = pte_lab.open(data)
    assert pte.header.segment_base_offset > pte.flatbuffer_size
    f = CountingFile(data)
    pte = pte_lab.open(f)
    _analyse(pte)
    assert f.bytes_read <= pte.flatbuffer_size + 64
    assert f.bytes_read < len(data) / 4


def test_big_weights_cost_nothing(tmp_path, program_bytes):
    # 400 MB of segment data appended behind a real program costs nothing to open
    data = bytearray(program_bytes("portable"))
    pte = pte_lab.open(bytes(data))
    base, seg = pte.header.segment_base_offset, pte.segments[0]
    extra = 400 * 1024 * 1024
    path = tmp_path / "big.pte"
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(len(data) + extra)  # sparse file: constant segment grows by 400 MB
    # rewrite the header's segment data size and the segment table's size
    new_size = pte.header.segment_data_size + extra
    with open(path, "r+b") as f:
        f.seek(32)
        f.write(struct.pack("<Q", new_size))
    import tracemalloc

    tracemalloc.start()
    big = pte_lab.open(path)
    _analyse(big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 * 1024 * 1024  # memory follows the flatbuffer, not the 400 MB of weights
    assert big.file_size == len(data) + extra
    assert big.methods["forward"].arena(1).size == pte.methods["forward"].arena(1).size
    assert base == big.header.segment_base_offset and seg.size == big.segments[0].size


def test_no_torch_or_executorch_imported(program_path, tmp_path):
    code = textwrap.dedent(f"""
        import sys, pte_lab
        pte = pte_lab.open({str(program_path('device'))!r})
        for m in pte.methods.values():
            m.arenas, m.planned, m.findings()
        pte.allocations("corrected"); pte.to_dict(); repr(pte); pte._repr_html_()
        heavy = sorted(k for k in ("torch", "executorch") if k in sys.modules)
        print("HEAVY", heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_sources_path_bytes_file(program_path):
    p = program_path("portable")
    a = pte_lab.open(p)
    b = pte_lab.open(p.read_bytes())
    with open(p, "rb") as f:
        c = pte_lab.open(f)
    d = pte_lab.open(str(p))
    sizes = {x.methods["forward"].arena(1).size for x in (a, b, c, d)}
    assert len(sizes) == 1
    assert a.path == str(p) and b.path is None
    with pytest.raises(TypeError):
        pte_lab.open(12345)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d[:6], "too short"),
        (lambda d: b"\0\0\0\0JUNK" + d[8:], "not a .pte"),
        (lambda d: d[:4] + b"ET11" + d[8:], "unsupported .pte schema version"),
        (lambda d: d[:16] + struct.pack("<Q", len(d) * 4) + d[24:], "program_size"),
        (lambda d: d[:24] + struct.pack("<Q", len(d) + 1) + d[32:], "segment_base_offset"),
        (lambda d: d[: len(d) - 200], "truncated"),
        (lambda d: d[: len(d) // 2], "truncated|program_size|run past"),
    ],
    ids=["short", "magic", "version", "program-size", "segment-base", "truncated-segments", "half"],
)
def test_bad_headers(program_bytes, mutate, match):
    data = program_bytes("portable")
    with pytest.raises(PteFormatError, match=match):
        _analyse(pte_lab.open(mutate(data)))


def test_error_is_a_value_error_and_names_the_place(program_bytes):
    data = bytearray(program_bytes("portable"))
    root = struct.unpack_from("<I", data, 0)[0]
    data[root : root + 4] = struct.pack("<i", -(10**6))  # vtable far past the end
    with pytest.raises(ValueError) as exc:
        pte_lab.open(bytes(data))
    assert isinstance(exc.value, PteFormatError)
    assert "program" in str(exc.value) and "vtable" in str(exc.value)


def _absurd_vector(data: bytes, count: int) -> bytes:
    """Make the first vector whose stored length equals ``count``... claim 2**31 elements."""
    pte = pte_lab.open(data)
    m = pte.methods["forward"]
    n = m.n_values
    # find the length word of the values vector: a u32 equal to n followed by n offsets
    buf = bytearray(data)
    for pos in range(8, pte.flatbuffer_size - 4, 4):
        if struct.unpack_from("<I", buf, pos)[0] == n:
            buf[pos : pos + 4] = struct.pack("<I", count)
            try:
                pte_lab.open(bytes(buf)).methods["forward"].arenas
            except PteFormatError as e:
                if "claims" in str(e):
                    return bytes(buf)
            buf[pos : pos + 4] = struct.pack("<I", n)
    raise AssertionError("values vector not found")


def test_absurd_vector_length_is_refused_without_allocating(program_bytes):
    import tracemalloc

    bad = _absurd_vector(program_bytes("portable"), 2**31 - 1)
    tracemalloc.start()
    with pytest.raises(PteFormatError, match="claims 2147483647 elements"):
        _analyse(pte_lab.open(bad))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 1024 * 1024


def test_absurd_arena_size_is_reported_not_allocated(program_bytes):
    data = program_bytes("portable")
    pte = pte_lab.open(data)
    size = pte.methods["forward"].arena(1).size
    buf = bytearray(data)
    pos = bytes(buf).find(struct.pack("<qq", 0, size))
    assert pos > 0
    buf[pos + 8 : pos + 16] = struct.pack("<q", 2**60)
    big = pte_lab.open(bytes(buf))
    a = big.methods["forward"].arena(1)
    assert a.size == 2**60 and a.size_over_peak > 1e12
    buf[pos + 8 : pos + 16] = struct.pack("<q", -5)
    with pytest.raises(PteFormatError, match="negative size"):
        pte_lab.open(bytes(buf)).methods["forward"].arenas


def test_directory_and_missing_file(tmp_path):
    with pytest.raises(PteFormatError, match="directory"):
        pte_lab.open(tmp_path)
    with pytest.raises(FileNotFoundError):
        pte_lab.open(tmp_path / "nope.pte")


@pytest.mark.parametrize("name", ["portable", "xnnpack", "device", "kv_cache", "cond"])
def test_fuzz_mutations_and_truncations(program_bytes, name):
    """Seeded mutations: every outcome is a program or a PteFormatError, quickly."""
    data = program_bytes(name)
    flat = pte_lab.open(data).flatbuffer_size
    n_cases = int(os.environ.get("PTE_LAB_FUZZ_CASES", "800"))
    outcomes = {"ok": 0, "error": 0}
    slowest = 0.0
    for buf in mutations(data, flat, f"pte_lab-{name}", n_cases):
        t = time.perf_counter()
        try:
            _analyse(pte_lab.open(buf))
            outcomes["ok"] += 1
        except PteFormatError:
            outcomes["error"] += 1
        slowest = max(slowest, time.perf_counter() - t)
    assert outcomes["error"] > n_cases // 10  # the mutations do bite
    assert slowest < 5.0  # nothing hangs


def test_a_large_file_without_extended_header_is_read_once(tmp_path, program_bytes):
    """A damaged extended-header magic makes the whole file the flatbuffer: read it, never copy it again."""
    import tracemalloc

    data = bytearray(program_bytes("portable"))
    data[8:12] = b"XX00"  # no extended header any more
    path = tmp_path / "big.pte"
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(64 * 1024 * 1024)  # 64 MiB, sparse
    tracemalloc.start()
    try:
        with pytest.raises(PteFormatError):
            pte_lab.open(path).methods["forward"].arenas
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.2 * 64 * 1024 * 1024  # one copy of the file, not two


def test_the_format_s_numbers_are_compared_by_name():
    """No module compares a tensor's scalar type, dynamism or data location with a bare number:
    pte_lab.format.schema names them (ScalarType.BOOL, TensorShapeDynamism.STATIC, ...)."""
    import ast
    from pathlib import Path

    fields = {"scalar_type", "shape_dynamism", "location"}
    bad = []
    for path in sorted((Path(pte_lab.__file__).parent).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if (any(isinstance(s, ast.Attribute) and s.attr in fields for s in sides)
                    and any(isinstance(s, ast.Constant) and type(s.value) is int for s in sides)):
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "\n".join(bad)


def test_a_core_ml_file_table_is_read_whatever_its_size():
    """Core ML's file table (JSON written backwards at the blob's end) is read from a tail that grows until it
    parses: a table of a few files and one of 2,000 (past the first 4 KiB read) give every file; a blob whose
    end is not a table says so in one line."""
    import json

    from pte_lab.format import coreml

    def blob(n_files: int) -> bytes:
        files, body = [], b""
        for k in range(n_files):
            data = bytes([k % 251]) * (k % 7 + 1)
            files.append({"name": f"file{k}.bin", "kind": 0, "dataRegion": {"offset": len(body), "size": len(data)}})
            body += data
        files.append({"name": "folder", "kind": 1})
        return body + json.dumps({"nodes": files}).encode()[::-1]

    for n in (3, 2000):
        data = b"\0" * 64 + blob(n) + b"\0" * 16  # the blob at offset 64 of the program, something after it
        size = len(data) - 80
        assert (len(json.dumps({"nodes": [0] * n})) > 4096) == (n == 2000)
        files, problem = coreml.read_file_table(lambda off, k: data[off:off + k], 64, size)
        assert problem is None and len(files) == n and "folder" not in files
        assert files[f"file{n - 1}.bin"][1] == (n - 1) % 7 + 1
    files, problem = coreml.read_file_table(lambda off, k: b"x" * k, 0, 10_000)
    assert files is None and problem == "its file table (reversed JSON at the blob's end) could not be read"
