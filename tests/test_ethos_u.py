"""Ethos-U programs: what their delegates declare, read from the committed programs (no Arm flow needed),
checked against what Vela printed when it compiled them and against ExecuTorch's own scratch script; and,
where the ``arm`` extra is installed, exported here for two targets and three memory modes."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import pte_lab
from pte_lab import examples
from pte_lab.cli import main as cli_main
from pte_lab.units import human_bytes

DATA = Path(examples.ETHOS_U_PROGRAMS)
REPORT = json.loads((DATA / "vela.json").read_text())
FILES = sorted(REPORT["programs"])
HEADER = struct.Struct("<16sIB11s")


def _blocks(blob: bytes) -> dict[str, tuple[int, int]]:
    """block name -> (payload offset in the blob, payload size), walked independently of pte_lab's reader."""
    out, pos = {}, 0
    while pos + 32 <= len(blob):
        name, size, _, _ = HEADER.unpack_from(blob, pos)
        out[name.split(b"\0")[0].decode()] = (pos + 32, size)
        pos += 32 + -(-size // 16) * 16
    return out


def _blob(path: Path, pte, i: int = 0) -> tuple[int, bytes]:
    d = pte.delegate_memory()[i]
    data = path.read_bytes()
    return d.offset, data[d.offset : d.offset + d.blob_bytes]


@pytest.mark.parametrize("name", FILES)
def test_the_scratch_each_blob_declares_is_what_vela_printed(name):
    """Vela counts the scratch in SRAM (Shared_Sram, Sram_Only) or, with the weights, in DRAM (Dedicated_Sram)."""
    pte = pte_lab.open(DATA / name)
    printed = REPORT["programs"][name]["vela"]
    rows = pte.delegates
    assert list(rows.backend) == ["EthosUBackend"] * len(printed)
    for (_, row), vela in zip(rows.iterrows(), printed):
        assert row.memory_mode == vela["memory_mode"]
        assert row.target.replace("-", "_").upper() == vela["accelerator"].upper()
        if row.memory_mode.startswith("Dedicated_Sram"):
            assert f"{(row.scratch_bytes + row.weight_bytes) / 1024:.2f} KiB" == vela["dram_used"]
        else:
            assert f"{row.scratch_bytes / 1024:.2f} KiB" == vela["sram_used"]
        assert row.scratch_from == "temp allocator" and row.problem is None


@pytest.mark.parametrize("name", FILES)
def test_the_blocks_agree_with_an_independent_walk(name):
    path = DATA / name
    pte = pte_lab.open(path)
    for i, d in enumerate(pte.delegate_memory()):
        _, blob = _blob(path, pte, i)
        blocks = _blocks(blob)
        assert list(blocks) == ["vela_bin_stream", "cmd_data", "weight_data", "scratch_size", "inputs", "outputs",
                                "vela_end_stream"]
        assert d.command_bytes == blocks["cmd_data"][1] and d.weight_bytes == blocks["weight_data"][1]
        at, _ = blocks["scratch_size"]
        assert d.scratch_bytes == struct.unpack_from("<I", blob, at)[0]


@pytest.mark.slow
def test_the_scratch_is_what_executorchs_own_script_reads():
    """backends/arm/scripts/get_ethosu_scratch_from_pte.py, shipped in the executorch wheel."""
    import executorch

    script = Path(list(executorch.__path__)[0]) / "backends/arm/scripts/get_ethosu_scratch_from_pte.py"
    code = (f"import runpy, sys; f = runpy.run_path({str(script)!r})['get_scratch_from_pte']\n"
            f"for p in sys.argv[1:]: print('FILE', p); f(p)")
    out = subprocess.run([sys.executable, "-c", code, *(str(DATA / n) for n in FILES)], capture_output=True,
                         text=True, timeout=600)
    theirs = {}
    for chunk in out.stdout.split("FILE ")[1:]:
        path, _, rest = chunk.partition("\n")
        theirs[Path(path).name] = [int(x) for x in re.findall(r"EthosUBackend: scratch_size=(\d+) bytes", rest)]
    assert theirs == {n: [d.scratch_bytes for d in pte_lab.open(DATA / n).delegate_memory()] for n in FILES}, \
        out.stderr[-2000:]


@pytest.mark.parametrize("name", FILES)
def test_velas_descriptors_are_the_tensors_each_call_passes(name):
    pte = pte_lab.open(DATA / name)
    m = pte.methods["forward"]
    from pte_lab.model.ethos_u import io_checks

    assert not [w for w in pte.warnings() if w.kind in ("delegate_io", "delegate_blob_format")]
    for d in m.delegate_memory:
        checks = io_checks(m.raw, d)
        assert [c.direction for c in checks] == ["input"] * len(d.stream.inputs) + ["output"] * len(d.stream.outputs)
        for c in checks:
            assert c.refusal is None and c.dtype == "int8" and c.nbytes == c.io.nbytes == c.count
            assert c.io.offset + c.io.nbytes <= d.scratch_bytes


def test_memory_modes_say_where_each_part_lives():
    parts = {n: {p.part: p for p in pte_lab.open(DATA / n).delegate_memory()[0].parts()} for n in FILES}
    shared, sram, dedicated = (parts["u55_128_shared_sram.pte"], parts["u55_128_sram_only.pte"],
                               parts["u85_256_dedicated_sram_384kb.pte"])
    assert shared["scratch"].lives == "SRAM, shared with the CPU" and "flash" in shared["weights"].lives
    assert sram["scratch"].lives == "SRAM" and "SRAM port" in sram["weights"].lives
    assert "DRAM" in dedicated["scratch"].lives
    assert "fast scratch" not in shared and "fast scratch" not in sram
    fast = dedicated["fast scratch"]
    assert fast.bytes == 384 * 1024 and "ethosu_fast_scratch" in fast.allocator
    for p in parts.values():
        assert p["weights"].allocator == "read in place from the program's bytes"
        assert p["scratch"].allocator.startswith("temp allocator, at every execute")


def test_two_delegates_each_declare_their_own_scratch():
    pte = pte_lab.open(DATA / "u55_128_shared_sram_split.pte")
    m = pte.methods["forward"]
    assert [d.scratch_bytes for d in m.delegate_memory] == [4096, 4864]
    assert m.delegate_temp_bytes == 4864
    (f0, f1) = [w for w in m.findings() if w.kind == "delegate_scratch"]
    assert "4.0 KiB (4,096 bytes)" in f0.message and "4.8 KiB (4,864 bytes)" in f1.message
    assert f"planned arenas ({human_bytes(m.planned_bytes)})" in f0.message


def test_inspect_shows_the_declared_memory(capsys):
    path = DATA / "u85_256_dedicated_sram_384kb.pte"
    assert cli_main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "delegate 0: EthosUBackend" in out and "ethos-u85-256, Dedicated_Sram_384KB" in out
    assert "scratch: 2,048 B (2.0 KiB) declared by the delegate blob; temp allocator, at every execute" in out
    assert "fast scratch: 393,216 B (384 KiB) declared by the memory mode's name" in out
    assert cli_main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    mem = doc["methods"]["forward"]["delegates"][0]["memory"]
    assert (mem["memory_mode"], mem["scratch_bytes"], mem["scratch_from"]) == ("Dedicated_Sram_384KB", 2048,
                                                                             "temp allocator")
    assert mem["inputs"] == [{"shape": [1, 1, 1, 3, 16, 16], "elem_size": 1, "offset": 0, "region": 1}]
    assert [p["part"] for p in mem["parts"]] == ["command stream", "weights", "scratch", "fast scratch"]


def test_the_notebook_view_shows_each_part():
    html = pte_lab.open(DATA / "u55_128_shared_sram_split.pte")._repr_html_()
    rows = re.findall(r"<tr><td class='pte-num'>(\d)</td><td class=''>([^<]*)</td><td class=''>scratch</td>"
                      r"<td class='pte-num'>([^<]*)</td>.*?<td class=''>([^<]*)</td></tr>", html)
    assert rows == [("0", "ethos-u55-128, Shared_Sram", "4.0 KiB", "SRAM, shared with the CPU"),
                    ("1", "ethos-u55-128, Shared_Sram", "4.8 KiB", "SRAM, shared with the CPU")]
    assert "forward: delegates take 4.8 KiB of scratch from the temp allocator" in html


# ------------------------------------------------------------------- descriptors that do not match the plan
def _patched(name: str, edit) -> bytes:
    path = DATA / name
    pte = pte_lab.open(path)
    offset, blob = _blob(path, pte)
    blob = bytearray(blob)
    edit(blob, _blocks(bytes(blob)))
    data = bytearray(path.read_bytes())
    data[offset : offset + len(blob)] = blob
    return bytes(data)


def _set_io(direction: str, field: int, value: int):
    def edit(blob, blocks):
        at, _ = blocks[direction]
        struct.pack_into("<i", blob, at + 4 + 4 * field, value)  # count, then shape[6], elem_size, offset, region

    return edit


@pytest.mark.parametrize("direction, field, value, words", [
    ("inputs", 6, 4, "Vela expects 4-byte elements"),                   # elem_size: int8 tensor, int32 descriptor
    ("inputs", 7, 6500, "end past the 6,912-byte scratch"),            # offset: the copy would overflow
    ("inputs", 5, 17, "768 elements but Vela's descriptor"),            # shape: 3 x 16 x 17
    ("outputs", 7, 6000, "end past the 6,912-byte scratch"),
    ("outputs", 5, 32, "rows of 16 bytes"),                              # Vela's rows longer: padded copy works
])
def test_descriptors_that_do_not_match_the_plans_tensors_are_a_finding(direction, field, value, words):
    pte = pte_lab.open(_patched("u55_128_shared_sram.pte", _set_io(direction, field, value)))
    found = [w for w in pte.warnings() if w.kind == "delegate_io"]
    if words == "rows of 16 bytes":  # a longer Vela row is copied row by row: the runtime takes it
        assert not found
        return
    (f,) = found
    assert f.severity == "error" and words in f.message and "refuses it at execute" in f.message


def test_a_malformed_stream_is_a_finding_not_an_error():
    def bad_magic(blob, blocks):
        at, _ = blocks["cmd_data"]
        blob[at : at + 4] = b"XXXX"

    pte = pte_lab.open(_patched("u55_128_shared_sram.pte", bad_magic))
    (f,) = [w for w in pte.warnings() if w.kind == "delegate_blob_format"]
    assert "not COP1 or COP2" in f.message and "refuses or misreads it at load_method" in f.message
    assert pte.delegates.problem[0].startswith("the command stream starts with b'XXXX'")
    assert "the command stream starts with" in pte._repr_html_()


def test_fuzzed_blobs_never_raise():
    """Seeded mutations of the blob region: every outcome reads (problems listed), quickly."""
    from tests.fuzzing import mutations

    path = DATA / "u55_128_shared_sram_split.pte"
    data = path.read_bytes()
    pte = pte_lab.open(path)
    spans = [(d.offset, d.blob_bytes) for d in pte.delegate_memory()]
    seen_problems = 0
    for k, (off, n) in enumerate(spans):
        blob = data[off : off + n]
        for mutant in mutations(blob, len(blob), f"vela-{k}", 300):
            mutant = (mutant + bytes(n))[:n]  # keep the file's layout: truncation becomes zeros
            p = pte_lab.open(data[:off] + mutant + data[off + n :])
            table = p.delegates
            p.warnings()
            p.to_dict()
            seen_problems += table.problem.notna().sum()
    assert seen_problems > 100  # the mutations do bite


# ------------------------------------------------------------------------------ exported here (the arm extra)
arm = pytest.mark.skipif(not examples.has_arm_flow(), reason=examples.ARM_EXTRA)


@arm
@pytest.mark.slow
@pytest.mark.parametrize("target, mode", [("ethos-u55-128", "Shared_Sram"), ("ethos-u85-256", "Dedicated_Sram")])
def test_exported_here_the_blob_declares_what_vela_printed(target, mode):
    from pte_lab.examples import ethos_u_export
    from pte_lab.quiet import quiet

    with quiet():
        data, vela = ethos_u_export(target, mode, side=24)
    pte = pte_lab.open(data)
    (d,) = pte.delegate_memory()
    (printed,) = vela
    assert (d.target, d.memory_mode, printed["memory_mode"]) == (target, mode, mode)
    used = printed["dram_used"] if mode == "Dedicated_Sram" else printed["sram_used"]
    extra = d.weight_bytes if mode == "Dedicated_Sram" else 0
    assert f"{(d.scratch_bytes + extra) / 1024:.2f} KiB" == used
    assert d.stream.inputs[0].shape[-2:] == (24, 24)


# ----------------------------------------------------------- the same stream stored other ways (ExecuTorch's serializer)
def _reserialize(name: str, edit_blob=None, named: dict | None = None, segments: bool = True) -> bytes:
    """The committed program re-serialized by ExecuTorch: the blob inline or in a segment, optionally edited,
    with named data."""
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary((DATA / name).read_bytes())
    if edit_blob is not None:
        for d in pte.program.backend_delegate_data:
            d.data = edit_blob(bytes(d.data))
    if named:
        store = NamedDataStore()
        for key, value in named.items():
            store.add_named_data(key, value, alignment=16)
        pte.named_data = store.get_named_data_store_output()
    return bytes(serialize_pte_binary(pte, extract_delegate_segments=segments))


def test_an_inline_blob_reads_as_a_segment_does():
    inline = pte_lab.open(_reserialize("u55_128_shared_sram_split.pte", segments=False))
    seg = pte_lab.open(DATA / "u55_128_shared_sram_split.pte")
    assert list(inline.delegates.stored) == ["inline", "inline"]
    cols = ["backend", "blob_bytes", "command_bytes", "weight_bytes", "scratch_bytes", "inputs", "outputs", "problem"]
    assert inline.delegates[cols].equals(seg.delegates[cols])


def test_weights_stored_as_named_data_are_found_there():
    """ExecuTorch 1.5's VelaExternalBlockPlacements: the weight block holds a 64-character key into named data."""
    key = "e" * 64
    weights = {}

    def external(blob: bytes) -> bytes:
        blocks = _blocks(blob)
        at, n = blocks["weight_data"]
        weights["bytes"] = blob[at : at + n]
        head = at - 32
        new = (b"weight_data".ljust(16, b"\0") + struct.pack("<IB11x", 64, 1) + key.encode())
        return blob[:head] + new + blob[at + -(-n // 16) * 16 :]

    data = _reserialize("u55_128_shared_sram.pte", external, named={key: b"\x01" * 1168})
    pte = pte_lab.open(data)
    (d,) = pte.delegate_memory()
    assert d.stream.ok and d.stream.external == {"weight_data": key}
    assert d.weight_bytes == len(weights["bytes"]) == 1168  # the named data's bytes, not the key's 64
    (w,) = [p for p in d.parts() if p.part == "weights"]
    assert w.source == "named data" and "named data eeeeeeeeeeee" in w.allocator
    assert pte.methods["forward"].findings()  # still read: the scratch finding is there


def test_without_the_arm_flow_the_example_says_so_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(examples, "has_arm_flow", lambda: False)
    assert cli_main(["example", "ethos_u", str(tmp_path / "x.pte")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"pte-lab: error: {examples.ARM_EXTRA}" and not (tmp_path / "x.pte").exists()
    with pytest.raises(pte_lab.PteLabError, match=r"pip install \"pte_lab\[arm\]\""):
        examples.build("ethos_u")


def test_the_shipped_programs_are_the_ones_the_export_script_names():
    import runpy

    script = runpy.run_path(str(DATA / "export.py"))  # defines, exports nothing (its __main__ guard)
    assert sorted(script["PROGRAMS"]) == FILES == sorted(p.name for p in DATA.glob("*.pte"))
    with pytest.raises(ValueError, match="choose one of"):
        examples.ethos_u_program("u65")


@pytest.mark.parametrize("whole", [True, False], ids=["small file read whole", "blobs read from the file"])
def test_a_first_look_reads_each_blob_once_in_one_open(monkeypatch, whole):
    """The format check and the delegate's memory share one read of each Vela stream. A small file is read whole
    when opened, so its blobs cost no second open; a file past ``WHOLE_BYTES`` (here every file, the limit set to
    0) is opened once more for all its blobs (a small blob is one read)."""
    from pte_lab.format import blobs, reader, vela

    parsed, opens = [], []
    read_vela, open_regular = vela.read_vela, blobs.open_regular
    monkeypatch.setattr("pte_lab.model.ethos_u.read_vela",
                        lambda read, size, *rest: parsed.append(size) or read_vela(read, size, *rest))
    monkeypatch.setattr(blobs, "open_regular", lambda *a: opens.append(a) or open_regular(*a))
    if not whole:
        monkeypatch.setattr(reader, "WHOLE_BYTES", 0)
    for path in sorted(DATA.glob("*.pte")):
        parsed.clear()
        opens.clear()
        pte = pte_lab.open(path)
        text = repr(pte)
        memory = pte.delegate_memory()
        assert "scratch" in text and all(d.stream is not None for d in memory), path.name
        assert len(parsed) == len({(d.offset, d.blob_bytes, d.backend) for d in memory}), path.name
        assert len(opens) == (0 if whole else 1), path.name


def test_inspect_says_what_sizes_counts_of_the_backends_handle_and_no_app_load_modes(capsys):
    """inspect's Ethos-U line knows the backend's own handle (the figure sizes --target cortex-m counts in the
    board's heap), and a bare-metal program gets no Android/iOS Module::LoadMode paragraph (issue 48)."""
    from types import SimpleNamespace

    from pte_lab.model.backends import for_a_microcontroller
    from pte_lab.runtime.sizing.target import delegate_heap

    path = DATA / "u55_128_shared_sram.pte"
    assert cli_main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "backend EthosUBackend" in x)
    known, unknown = line.split("; not known: ")
    (handle,) = delegate_heap(pte_lab.open(str(path)), "forward", "cortex-m")
    assert f"the backend's own handle, one per delegate call (ExecutionHandle, 9 pointer-sized words: {handle.each} B " \
           "on a 32-bit Cortex-M" in known and "handle" not in unknown
    assert "Module::LoadMode" not in out
    # an app's program keeps it
    assert cli_main(["inspect", str(examples.kept_path("portable"))]) == 0
    assert "an app's Module reads the program by its Module::LoadMode: File (the default)" in capsys.readouterr().out
    # decided from the program's backends and kernels: EthosUBackend, or cortex_m operators alone
    method = lambda backends=(), ops=(): SimpleNamespace(  # noqa: E731
        delegates=[SimpleNamespace(backend=b) for b in backends], operators=list(ops))
    assert for_a_microcontroller(pte_lab.open(str(path)))
    assert for_a_microcontroller(SimpleNamespace(methods={"f": method(ops=["cortex_m::quantize_per_tensor.out"])}))
    assert not for_a_microcontroller(SimpleNamespace(methods={"f": method(["XnnpackBackend"], ["aten::add.out"])}))
    assert not for_a_microcontroller(pte_lab.open(str(examples.kept_path("portable"))))


def test_quantize_and_dequantize_left_at_the_edges_are_advised_int8_io():
    """The cortex_m quantize before the first Ethos-U call and dequantize after the last convert the program's
    float input and output: the change is int8 inputs and outputs, not a Focus layer's reshuffle (issue 48)."""
    from pte_lab.model.findings import Kind

    m = pte_lab.open(str(DATA / "u55_128_shared_sram.pte")).methods["forward"]
    (f,) = [f for f in m.findings() if f.kind == Kind.OUTSIDE_DELEGATE]
    assert "Focus" not in f.message and "strided slices" not in f.message
    assert ("the quantize converts the float input to int8 before the first delegate call and the dequantize "
            "converts the int8 output back to float after the last: export the program with int8 inputs and outputs"
            in f.message)
    assert "QuantizeInputs and QuantizeOutputs" in f.details.change
    assert f"the peak falls by up to {human_bytes(f.at_stake)}" in f.message


def test_inspect_says_the_backend_runs_here_only_as_its_stand_in(capsys):
    """inspect and sizes agree: EthosUBackend is sized here with pte_lab's stand-in (not 'cannot run here'), and
    what it allocates inside is measured on the device; Core ML, with no stand-in, cannot run here at all."""
    assert cli_main(["inspect", str(DATA / "u55_128_shared_sram.pte")]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "the plan leaves out" in ln]
    assert "EthosUBackend runs here only as pte_lab's stand-in (`pte-lab sizes FILE` sizes the pools" in line
    assert "cannot run here" not in line and "measure what it allocates inside on the device" in line
    coreml = Path(__file__).parent / "data" / "apple" / "focus_coreml.pte"
    assert cli_main(["inspect", str(coreml)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "the plan leaves out" in ln]
    assert "CoreMLBackend cannot run here" in line and "stand-in" not in line
