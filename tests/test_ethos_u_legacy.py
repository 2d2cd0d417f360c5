"""Ethos-U programs written by older Arm flows (ExecuTorch 0.2 to 0.5): the backend is ``ArmBackend``, the
scratch is a ``scratch_data`` block of the blob, descriptors have 4 dimensions, and the compile specs carry
Vela's flags only (in 0.2 not even the memory mode). What pte_lab shows of them, as a user sees it.

The programs are the shipped Ethos-U programs rewritten here (:func:`as_arm_backend`): the delegate renamed,
its compile specs those of the older flow, its Vela stream repacked in the older layout (the older packer's
rules, as ``docs/ethos-u-layouts.md`` records them)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import pte_lab
from pte_lab import examples
from pte_lab.model.findings import Kind
from pte_lab.units import exact_bytes

DATA = Path(examples.ETHOS_U_PROGRAMS)
HEADER = struct.Struct("<16sIB11s")
#: the compile flags ExecuTorch 0.4 and 0.5's example passed (aot_arm_compiler.py) and 0.2's (no system
#: config, no memory mode)
FLAGS_0_4 = ("--accelerator-config=ethos-u55-128 --config=Arm/vela.ini --system-config=Ethos_U55_High_End_Embedded "
             "--memory-mode=Shared_Sram")
FLAGS_0_2 = "--accelerator-config=ethos-u55-128 --config=Arm/vela.ini"


def _walk(blob: bytes) -> list[tuple[str, bytes]]:
    out, pos = [], 0
    while pos + 32 <= len(blob):
        name, size, _, _ = HEADER.unpack_from(blob, pos)
        out.append((name.split(b"\0")[0].decode(), blob[pos + 32 : pos + 32 + size]))
        pos += 32 + -(-size // 16) * 16
    return out


def _four_dims(payload: bytes) -> bytes:
    """6-dimension descriptors (ExecuTorch 1.0+) as 4-dimension ones (before 1.0): the two leading 1s dropped."""
    (count,) = struct.unpack_from("<i", payload)
    out = struct.pack("<i", count)
    for i in range(count):
        *shape, elem, off, region = struct.unpack_from("<9i", payload, 4 + 36 * i)
        assert shape[:2] == [1, 1], shape
        out += struct.pack("<7i", *shape[2:], elem, off, region)
    return out


def legacy_stream(blob: bytes, *, scratch_in_blob: bool = True, dims: int = 4) -> bytes:
    """A 1.5 Vela stream repacked as an older flow wrote it: ``scratch_data`` (that many zeros) for
    ``scratch_size``, 4-dimension descriptors, and each header's 12 bytes after the size all zero."""
    out = b""
    for name, payload in _walk(blob):
        if name == "scratch_size" and scratch_in_blob:
            name, payload = "scratch_data", bytes(struct.unpack("<I", payload)[0])
        elif name in ("inputs", "outputs") and dims == 4:
            payload = _four_dims(payload)
        out += name.encode().ljust(16, b"\0") + struct.pack("<I12x", len(payload)) + payload
        out += b"\0" * (-len(payload) % 16)
    return out


def as_arm_backend(path: Path, *, backend: str = "ArmBackend", flags: str | None = FLAGS_0_4, **stream) -> bytes:
    """The program at ``path`` as an older Arm flow wrote it: every Ethos-U delegate renamed ``backend``, its
    compile specs ``output_format`` and ``compile_flags`` only (none at all for ``flags=None``), its stream
    repacked by :func:`legacy_stream`. Written with ExecuTorch's serializer, delegate data as segments."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    pf = deserialize_pte_binary(path.read_bytes())
    done = set()
    for plan in pf.program.execution_plan:
        for d in plan.delegates:
            d.id = backend
            d.compile_specs = ([] if flags is None else
                               [CompileSpec("output_format", b"vela"), CompileSpec("compile_flags", flags.encode())])
            if d.processed.index not in done:
                done.add(d.processed.index)
                inline = pf.program.backend_delegate_data[d.processed.index]
                inline.data = legacy_stream(inline.data, **stream)
    return bytes(serialize_pte_binary(pf, extract_delegate_segments=True))


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """name -> path of each crafted program (made once for the module)."""
    from pte_lab.quiet import quiet

    d = tmp_path_factory.mktemp("arm_backend")
    cases = {
        "shared": ("u55_128_shared_sram.pte", {}),
        "split": ("u55_128_shared_sram_split.pte", {}),
        "no_mode": ("u55_128_shared_sram.pte", {"flags": FLAGS_0_2}),
        "no_specs": ("u55_128_shared_sram.pte", {"flags": None}),
        # the older layout under the newer id: what an EthosUBackend program of 0.6 is
        "ethos_u_0_6": ("u55_128_shared_sram.pte", {"backend": "EthosUBackend"}),
        # 0.7: scratch_size, but descriptors of 4 dimensions
        "ethos_u_0_7": ("u55_128_shared_sram.pte", {"backend": "EthosUBackend", "scratch_in_blob": False}),
        # the newer layout under the older id
        "arm_new_layout": ("u55_128_shared_sram.pte", {"scratch_in_blob": False, "dims": 6}),
    }
    out = {}
    with quiet():
        for name, (src, kw) in cases.items():
            out[name] = d / f"{name}.pte"
            out[name].write_bytes(as_arm_backend(DATA / src, **kw))
    return out


def _shipped_scratch(name: str) -> list[int]:
    return [d.scratch_bytes for d in pte_lab.open(DATA / name).delegate_memory()]


@pytest.mark.parametrize("case, src", [("shared", "u55_128_shared_sram.pte"),
                                       ("split", "u55_128_shared_sram_split.pte")])
def test_an_arm_backend_program_shows_its_scratch_target_and_mode(legacy, case, src):
    pte = pte_lab.open(legacy[case])
    rows = pte.delegates
    scratch = _shipped_scratch(src)
    assert list(rows.backend) == ["ArmBackend"] * len(scratch)
    assert list(rows.scratch_bytes) == scratch and all(scratch)
    assert set(rows.target) == {"ethos-u55-128"} and set(rows.memory_mode) == {"Shared_Sram"}
    assert set(rows.scratch_from) == {"the program's bytes (a scratch_data block)"}
    assert set(rows.scratch_lives) == {"SRAM, shared with the CPU"}
    assert rows.problem.isna().all()
    # the descriptors are read at their 4 dimensions, and match the tensors each call passes
    for d in pte.delegate_memory():
        assert d.stream.shape_dims == 4 and d.stream.written_by == "ExecuTorch 0.2 to 0.5"
        assert all(len(io.shape) == 4 for io in d.stream.inputs + d.stream.outputs)
    assert not [w for w in pte.warnings() if w.kind in ("delegate_io", "delegate_blob_format")]


def _inspect(path, capsys) -> str:
    """What ``pte-lab inspect`` prints."""
    from pte_lab.cli import main

    assert main(["inspect", str(path)]) == 0
    return capsys.readouterr().out


def test_inspect_and_findings_say_where_the_scratch_is(legacy, capsys):
    pte = pte_lab.open(legacy["shared"])
    (n,) = _shipped_scratch("u55_128_shared_sram.pte")
    text = _inspect(legacy["shared"], capsys)
    assert "delegate 0: ArmBackend" in text and "ethos-u55-128, Shared_Sram" in text
    assert (f"scratch: {exact_bytes(n)} declared by the delegate blob; the program's bytes (a scratch_data block), which "
            f"the NPU works in at every execute: the program must be in memory the NPU can write (ExecuTorch 0.2 "
            f"to 0.5's layout); lives in SRAM, shared with the CPU") in text
    (f,) = [f for f in pte.methods["forward"].findings() if f.kind == Kind.DELEGATE_SCRATCH]
    assert f.details.bytes == n and f.details.allocator == "the program's bytes (a scratch_data block)"
    assert "from the program's bytes (a scratch_data block)" in str(f)


@pytest.mark.parametrize("case, said", [("no_mode", "ethos-u55-128, memory mode not recorded by this flow"),
                                        ("no_specs", "target not recorded by this flow, memory mode not recorded "
                                                     "by this flow")])
def test_what_the_flow_did_not_record_is_said(legacy, case, said, capsys):
    pte = pte_lab.open(legacy[case])
    (d,) = pte.delegate_memory()
    assert d.memory_mode is None and d.settings == said
    assert d.scratch_bytes == _shipped_scratch("u55_128_shared_sram.pte")[0]
    text = _inspect(legacy[case], capsys)
    assert "delegate 0: ArmBackend" in text and said in text
    (f,) = [f for f in pte.methods["forward"].findings() if f.kind == Kind.DELEGATE_SCRATCH]
    assert said in str(f)


def test_sizes_declares_the_scratch_outside_the_temp_pool(legacy):
    """An ArmBackend program runs on no runtime of today: sizes reports what the file declares, and the scratch
    is in the program's bytes, so the temp pool need not hold it."""
    from pte_lab.runtime.declared import declared_sizes
    from pte_lab.views.runtime.declared import declared_lines

    m = pte_lab.open(legacy["shared"]).methods["forward"]
    (n,) = _shipped_scratch("u55_128_shared_sram.pte")
    d = declared_sizes(m, "no ArmBackend in this runtime")
    assert d.delegates == ((0, "ArmBackend", n, "the program's bytes (a scratch_data block)"),)
    assert d.temp_pool_at_least == 0
    assert (f"  delegate 0 (ArmBackend) scratch: {exact_bytes(n)} in the program's bytes (a scratch_data block), "
            f"outside the temp pool (delegate blob)") in declared_lines(d)


def test_each_runtime_reads_only_its_own_layout(legacy):
    """An older stream under the newer id, or the newer under the older: the problem names what differs."""
    p06 = pte_lab.open(legacy["ethos_u_0_6"]).delegate_memory()[0]
    assert p06.stream.written_by == "ExecuTorch 0.6" and p06.scratch_bytes == _shipped_scratch(
        "u55_128_shared_sram.pte")[0]
    assert "ExecuTorch 0.7 and later refuse the block" in p06.problem
    p07 = pte_lab.open(legacy["ethos_u_0_7"]).delegate_memory()[0]
    assert p07.stream.written_by == "ExecuTorch 0.7" and p07.stream.shape_dims == 4
    assert p07.problem.startswith("the inputs block holds 1 descriptors of 4 dimensions (28 bytes each, as "
                                  "ExecuTorch before 1.0 writes them), but ExecuTorch 1.5's EthosUBackend reads 6")
    new = pte_lab.open(legacy["arm_new_layout"]).delegate_memory()[0]
    assert new.problem.startswith("unknown block 'scratch_size' at byte")
    assert "ArmBackend reads scratch_data, not scratch_size" in new.problem
    warned = [w.kind for w in pte_lab.open(legacy["arm_new_layout"]).warnings()]
    assert "delegate_blob_format" in warned


@pytest.mark.slow
def test_executorchs_own_script_misses_the_older_scratch_and_pte_lab_reads_it(legacy):
    """backends/arm/scripts/get_ethosu_scratch_from_pte.py (1.5) looks for scratch_size blocks only."""
    import re
    import subprocess
    import sys

    import executorch

    script = Path(list(executorch.__path__)[0]) / "backends/arm/scripts/get_ethosu_scratch_from_pte.py"
    code = (f"import runpy, sys; f = runpy.run_path({str(script)!r})['get_scratch_from_pte']\n"
            f"for p in sys.argv[1:]: print('RESULT', f(p))")
    shipped = DATA / "u55_128_shared_sram.pte"
    out = subprocess.run([sys.executable, "-c", code, str(shipped), str(legacy["shared"])], capture_output=True,
                         text=True, timeout=300)
    (n,) = _shipped_scratch("u55_128_shared_sram.pte")
    assert re.findall(r"RESULT (\w+)", out.stdout) == [str(n), "None"], out.stdout + out.stderr[-2000:]
    assert pte_lab.open(legacy["shared"]).delegate_memory()[0].scratch_bytes == n


def _read(blob: bytes, backend: str = "ArmBackend"):
    from pte_lab.format.vela import read_vela

    return read_vela(lambda off, n: blob[off : off + n], len(blob), 0, backend)


def test_crafted_legacy_streams_are_named_problems_never_exceptions():
    good = _read(legacy_stream(_blob()))
    assert good.ok and good.legacy_scratch_bytes and good.shape_dims == 4
    blob = bytearray(legacy_stream(_blob()))
    at = blob.index(b"inputs\0")
    bad_count = bytearray(blob)
    struct.pack_into("<i", bad_count, at + 32, 1_000_000_000)
    s = _read(bytes(bad_count))
    assert "claims 1000000000 descriptors but holds room for 1" in s.problems[0]
    cop2 = bytearray(blob)
    cop2[blob.index(b"COP1") + 3] = ord("2")
    assert "not COP1: the runtime refuses it" in _read(bytes(cop2)).problems[0]
    assert "not COP1 or COP2" not in _read(bytes(cop2)).problems[0]
    for cut in range(0, len(blob), 7):  # every truncation: problems, never an exception
        s = _read(bytes(blob[:cut]))
        assert not s.ok


def _blob() -> bytes:
    pte = pte_lab.open(DATA / "u55_128_shared_sram.pte")
    d = pte.delegate_memory()[0]
    return (DATA / "u55_128_shared_sram.pte").read_bytes()[d.offset : d.offset + d.blob_bytes]
