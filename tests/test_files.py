"""Files from elsewhere: other writers' quirks, older ExecuTorch versions, non-default export options,
bundled programs (.bpte) and external data (.ptd). pte_lab must read what ExecuTorch reads, the same way."""

from __future__ import annotations

import json
import struct
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import ExecuTorchError, PteFormatError
from pte_lab.cli import main
from pte_lab.format import read
from pte_lab.model.dtypes import SCALAR_TYPES
from tests.test_against_executorch import check_against_executorch

deser = pytest.importorskip("executorch.exir._serialize._program")


def _run(path, method, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pte_lab.load(path) as prog:
            return prog.load_method(method)(*inputs)


# ------------------------------------------------------------------ reader rules
def test_a_vtable_smaller_than_its_fields_is_read_as_executorch_reads_it(program_path, tmp_path):
    """Some writers give DataSegment a vtable object size (8) below the end of its 8-byte size field at 4."""
    data = bytearray(program_path("portable").read_bytes())
    raw, _ = read(bytes(data))
    seg = raw._root.tables(4, "segments")[0]
    vt = seg._pos - struct.unpack_from("<i", data, seg._pos)[0]
    fields = struct.unpack_from(f"<{(struct.unpack_from('<H', data, vt)[0] - 4) // 2}H", data, vt + 4)
    assert max(fields) + 8 > 8  # the size field ends past offset 8
    struct.pack_into("<H", data, vt + 2, 8)  # object size 8
    path = tmp_path / "small_object.pte"
    path.write_bytes(data)
    pte, orig = pte_lab.open(path), pte_lab.open(program_path("portable"))
    assert [(s.kind, s.offset, s.size) for s in pte.segments] == [(s.kind, s.offset, s.size) for s in orig.segments]
    check_against_executorch(bytes(data))
    ref = deser.deserialize_pte_binary(bytes(data)).program
    assert [bytes(b.storage) for b in ref.constant_buffer] == [
        bytes(b.storage) for b in deser.deserialize_pte_binary(program_path("portable").read_bytes()).program.constant_buffer]
    x = torch.randn(4, 32)
    assert torch.equal(_run(path, "forward", [x])[0], _run(program_path("portable"), "forward", [x])[0])


def test_a_field_past_the_buffer_is_still_refused(program_path):
    data = bytearray(program_path("portable").read_bytes())
    raw, _ = read(bytes(data))
    seg = raw._root.tables(4, "segments")[0]
    vt = seg._pos - struct.unpack_from("<i", data, seg._pos)[0]
    struct.pack_into("<H", data, vt + 4 + 2, 0xFFF0)  # the size field far past the flatbuffer
    with pytest.raises(PteFormatError, match="outside the flatbuffer"):
        pte_lab.open(bytes(data))


def test_the_deprecated_constant_buffer_path_is_named(program_path, tmp_path):
    """Constants inline in constant_buffer (no constant segment): ExecuTorch 1.5.1 refuses; pte_lab says why."""
    from executorch.exir._serialize._program import _program_to_flatbuffer

    prog = deser.deserialize_pte_binary(program_path("portable").read_bytes()).program
    assert any(len(b.storage) for b in prog.constant_buffer)  # the deserializer inlines them
    path = tmp_path / "constant_buffer.pte"
    path.write_bytes(bytes(_program_to_flatbuffer(prog).data))
    pte = pte_lab.open(path)
    assert pte.inline_constant_bytes == sum(len(b.storage) for b in prog.constant_buffer)
    (f,) = [w for w in pte.warnings() if w.kind == "constant_buffer_path"]
    assert f.severity == "error" and "re-export" in f.message
    with pytest.raises(ExecuTorchError) as info:  # what ExecuTorch does with it
        pte_lab.load(path)
    assert info.value.step == "load_program" and "0x:23" in info.value.runtime_message
    assert info.value.code_name == "InvalidProgram" and "deprecated constant_buffer" in str(info.value)


# ------------------------------------------------------- other versions and options
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp_portable", "mlp_xnnpack", "buffer"])
def test_files_written_by_executorch_1_4_1(legacy_programs, name):
    path = legacy_programs / f"{name}.pte"
    check_against_executorch(path.read_bytes())
    ref = torch.load(legacy_programs / f"{name}.ref.pt", weights_only=True)
    out = _run(path, "forward", ref["inputs"])  # ExecuTorch 1.5.1's runtime
    assert torch.allclose(out[0], ref["outputs"][0], atol=1e-5)
    if name == "buffer":
        (t,) = [t for t in pte_lab.open(path).methods["forward"].planned if t.role == "mutable_buffer"]
        assert t.shape == (16, 8)


@pytest.mark.slow
def test_files_written_by_executorch_1_4_1_are_sized_and_proven(legacy_programs):
    """The sizing runner on another version's files: pools of exactly the reported sizes run them under
    1.5.1, and a method pool one byte smaller is refused."""
    for name in ("mlp_xnnpack", "buffer"):
        path = legacy_programs / f"{name}.pte"
        s = pte_lab.sizes(path, verify=True)
        m = s.methods["forward"]
        assert m.planned == tuple((a.mem_id, a.device, a.size) for a in pte_lab.open(path).methods["forward"].arenas)
        assert s.verified["forward"].sufficient and s.verified["forward"].tight, s.verified


OPTIONS = {
    "inline_delegates": {"extract_delegate_segments": False},
    "aligned_segments": {"segment_alignment": 4096, "constant_tensor_alignment": 64},
    "stacktrace": {"emit_stacktrace": True},
}


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_non_default_export_options(option, tmp_path, program_path):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig

    from pte_lab import examples

    torch.manual_seed(0)
    mods = examples._modules()
    eps = {"forward": examples._export(mods["MLP"](), (torch.randn(4, 32),))}
    data = examples._lower(eps, partitioner={"forward": [XnnpackPartitioner()]},
                           backend_config=ExecutorchBackendConfig(**OPTIONS[option]))
    check_against_executorch(data)
    pte = pte_lab.open(data)
    if option == "inline_delegates":
        assert pte.methods["forward"].delegates[0].location == "inline"
    if option == "aligned_segments":
        assert all(s.offset % OPTIONS[option]["segment_alignment"] == 0 for s in pte.segments)
    path = tmp_path / f"{option}.pte"
    path.write_bytes(data)
    x = torch.randn(4, 32)
    assert torch.allclose(_run(path, "forward", [x])[0], _run(program_path("portable"), "forward", [x])[0],
                          atol=1e-5)  # same seeded MLP


# --------------------------------------------------------------------- bundled
@pytest.fixture(scope="module")
def bundled_path(program_dir):
    from pte_lab import examples

    path = program_dir / "bundled.bpte"
    if not path.exists():
        path.write_bytes(examples.build("bundled"))
    return path


def test_a_bundled_program_opens_as_its_program_with_its_suites(bundled_path):
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    data = bundled_path.read_bytes()
    ref = deserialize_from_flatbuffer_to_bundled_program(data)
    pte = pte_lab.open(bundled_path)
    check_against_executorch(bytes(ref.program))  # the carried program, field by field
    assert set(pte.methods) == {"forward", "affine"}
    assert pte.bundled.file_size == len(data) and pte.bundled.program_bytes == len(ref.program)
    suites = {s.method: s for s in pte.bundled.suites}
    for rs in ref.method_test_suites:
        s = suites[rs.method_name]
        assert s.cases == len(rs.test_cases)
        for i, case in enumerate(rs.test_cases):
            inputs, expected = pte.bundled.case(rs.method_name, i)
            for (dtype, shape, raw), v in zip(inputs + expected, list(case.inputs) + list(case.expected_outputs)):
                t = v.val  # ExecuTorch's schema Tensor: scalar type code, sizes, bytes
                assert (dtype, tuple(shape)) == (SCALAR_TYPES[int(t.scalar_type)][0], tuple(t.sizes))
                assert raw == bytes(t.data)
    assert pte.bundled.table().set_index("method").loc["forward", "inputs"] == "float32[4, 32]"


def test_bundled_inspect_text_and_json(bundled_path, capsys):
    assert main(["inspect", str(bundled_path)]) == 0
    out = capsys.readouterr().out
    assert "bundled program (version" in out and "forward: 3 cases; inputs float32[4, 32]" in out
    assert main(["inspect", str(bundled_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["method"]: s["cases"] for s in doc["bundled"]["suites"]} == {"forward": 3, "affine": 3}
    assert set(doc["methods"]) == {"forward", "affine"}


@pytest.mark.parametrize("isolate", [False, True])
def test_bundled_tests_run_and_agree_with_executorchs_own_verification(bundled_path, isolate):
    from executorch.extension.pybindings import portable_lib

    bp = portable_lib._load_bundled_program_from_buffer(bundled_path.read_bytes())

    def executorch_says(method, i, atol):
        try:
            bp.verify_result_with_bundled_expected_output(method, i, 1e-5, atol)
            return True
        except RuntimeError:
            return False

    with pte_lab.load(bundled_path, isolate=isolate) as prog:
        for atol in (1e-8, 1e-6):  # ExecuTorch's default, and a looser one
            df = prog.run_bundled_tests(atol=atol)
            assert len(df) == 6 and (df.error == "").all()
            for r in df.itertuples():
                assert r.passed == executorch_says(r.method, r.case, atol), (r.method, r.case, atol)
            assert df.passed.all() or atol == 1e-8
            assert (df.max_abs_error < 1e-5).all()


def test_a_plain_program_has_no_bundled_tests(program_path):
    with pte_lab.load(program_path("portable")) as prog:
        with pytest.raises(pte_lab.PteLabError, match="not a bundled program"):
            prog.run_bundled_tests()


# ------------------------------------------------------------------------ .ptd
@pytest.fixture(scope="module")
def external_pair(tmp_path_factory):
    from pte_lab import examples

    d = tmp_path_factory.mktemp("external")
    pte = examples.save("external", d / "external.pte")
    (ptd,) = list(d.glob("*.ptd"))
    return pte, ptd


def _mlp_weights() -> dict[str, tuple[tuple[int, ...], int]]:
    """name -> (shape, bytes) of the parameters of the MLP the external example exports (torch's view)."""
    from pte_lab import examples

    params = examples._modules()["MLP"]().state_dict()
    return {k: (tuple(t.shape), t.numel() * t.element_size()) for k, t in params.items()}


def test_a_ptd_lists_its_tensors_as_executorch_does(external_pair, capsys):
    from executorch.extension.flat_tensor.serialize.serialize import _deserialize_to_flat_tensor

    _, ptd = external_pair
    d = pte_lab.open(ptd)
    assert isinstance(d, pte_lab.DataFile)
    ref = _deserialize_to_flat_tensor(ptd.read_bytes())
    assert d.keys == [n.key for n in ref.named_data]
    for t, n in zip(d.tensors, ref.named_data):
        assert (t.segment, t.shape) == (n.segment_index, tuple(n.tensor_layout.sizes))
        assert t.dtype == "float32" and t.nbytes == ref.segments[n.segment_index].size
    weights = _mlp_weights()
    assert {t.key: (t.shape, t.nbytes) for t in d.tensors} == weights  # every parameter, its shape and bytes
    assert d.table().nbytes.sum() == d.data_bytes == sum(n for _, n in weights.values())
    assert main(["inspect", str(ptd)]) == 0
    assert "fc1.weight  float32  [64, 32]" in capsys.readouterr().out
    assert main(["inspect", str(ptd), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "pte_lab.data"


def test_a_program_with_its_ptd_says_every_key_is_there(external_pair, capsys):
    pte_path, ptd = external_pair
    pte = pte_lab.open(pte_path, data=ptd)
    ext = pte.external_data()
    assert ext.present.all() and set(ext.key) == set(pte.data.keys)
    weights = _mlp_weights()
    total = sum(n for _, n in weights.values())
    assert pte.external_bytes_by_method() == {"forward": total}
    (f,) = [w for w in pte.warnings() if w.kind == "external_data"]
    assert f"has all {len(weights)} keys" in f.message and f"forward maps {total / 1024:.1f} KiB" in f.message
    assert main(["inspect", str(pte_path), "--data", str(ptd), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["missing"] == []
    # with the data file, the runtime loads and runs it
    with pte_lab.load(pte_path, data_path=ptd) as prog:
        assert prog.load_method("forward")(torch.randn(4, 32))[0].shape == (4, 16)


def test_a_ptd_missing_keys_is_an_error_finding(external_pair):
    from pte_lab.model import DataFile
    from pte_lab.format import read_data

    pte_path, ptd = external_pair
    raw, path = read_data(ptd)
    raw.tensors = [t for t in raw.tensors if not t.key.startswith("fc2")]
    pte = pte_lab.open(pte_path, data=DataFile(raw, path))
    (f,) = [w for w in pte.warnings() if w.kind == "external_data_missing"]
    assert f.severity == "error" and set(f.details.missing) == {"fc2.weight", "fc2.bias"}
    assert not pte.external_data().set_index("key").present["fc2.bias"]


def test_a_ptd_is_not_a_program():
    with pytest.raises(PteFormatError, match="is a .ptd data file"):
        read(b"\x10\x00\x00\x00FT01FH01" + b"\x00" * 40)


# ----------------------------------------------------------------------- fuzzing
def test_fuzz_bundled_and_data_readers(bundled_path, external_pair):
    """Seeded mutations of a .bpte and a .ptd: every outcome is a file or a PteFormatError, quickly."""
    import os
    import time

    from tests.fuzzing import mutations

    n = int(os.environ.get("PTE_LAB_FUZZ_CASES", "800"))
    _, ptd = external_pair
    for data, flat in ((bundled_path.read_bytes(), None), (ptd.read_bytes(), pte_lab.open(ptd)._raw.header.flatbuffer_end)):
        flat = flat or len(data)  # a bundled file is one flatbuffer, the carried program inside it
        errors, slowest = 0, 0.0
        for buf in mutations(data, flat, "pte_lab-files", n):
            t = time.perf_counter()
            try:
                f = pte_lab.open(buf)
                repr(f), f._repr_html_()
                if isinstance(f, pte_lab.DataFile):
                    f.table()
                else:
                    f.to_dict()
                    for k, s in enumerate(f.bundled.suites if f.bundled else ()):
                        for i in range(s.cases):
                            f.bundled.case(k, i)
            except PteFormatError:
                errors += 1
            slowest = max(slowest, time.perf_counter() - t)
        assert errors > n // 10 and slowest < 5.0


# ------------------------------------------------------------------ file layout
@pytest.mark.parametrize("name", ["portable", "xnnpack", "external", "llm", "device"])
def test_file_layout_accounts_for_every_byte(program_path, name):
    path = program_path(name)
    pte = pte_lab.open(path)
    df = pte.file_layout()
    assert df.bytes.sum() == path.stat().st_size
    assert (df.offset.diff().dropna() > 0).all()  # in file order, no overlaps
    assert ((df.offset + df.bytes).shift(1).fillna(0).astype(int) == df.offset).all()  # contiguous
    consts = df[df.region == "constant"]
    assert consts.bytes.sum() == sum(s.size for s in pte.segments if s.kind == "constants")
    # bytes from memory give the same layout as the path
    assert pte_lab.open(path.read_bytes()).file_layout().drop(columns="owner").equals(df.drop(columns="owner"))


def test_identical_blobs_are_found_by_their_bytes(program_path):
    path = program_path("xnnpack")
    df = pte_lab.open(path).file_layout()
    data = path.read_bytes()
    dups = df[df.duplicate_of.notna()]
    assert len(dups) >= 1
    for r in dups.itertuples():
        (first,) = df[df.name == r.duplicate_of].itertuples()
        assert data[r.offset : r.offset + r.bytes] == data[first.offset : first.offset + first.bytes]
    # and blobs not marked are all different
    blobs = df[df.sha256.notna() & df.duplicate_of.isna()]
    assert len({data[o : o + n] for o, n in zip(blobs.offset, blobs.bytes)}) == len(blobs)
    # what they add up to is too small (a 128 B bias in an 80 KiB file) to be a finding (tests/test_prescribe.py)
    assert int(dups.bytes.sum()) < 0.01 * len(data) and pte_lab.open(path).duplicate_blobs() == []


def test_inspect_layout_and_plot(program_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    from pte_lab import plot

    path = program_path("llm")
    assert main(["inspect", str(path), "--layout", "--rows", "3"]) == 0
    out = capsys.readouterr().out
    assert "region" in out and "largest blobs" in out and "constant" in out and "named data" in out
    ax = plot.file_layout(pte_lab.open(path))
    assert sum(p.get_width() for p in ax.patches if p.get_facecolor()[3] > 0) == path.stat().st_size


# ------------------------------------------------------- names and devices ExecuTorch resolves
def test_two_plans_with_one_name_follow_executorchs_lookup(tmp_path):
    from pte_lab import examples

    data = examples.build("three_methods", side=8)
    assert data.count(b"large") == 1 and pte_lab.open(data).raw.plan_names[0] == "large"
    path = tmp_path / "dup.pte"
    path.write_bytes(data.replace(b"large", b"small"))  # plans: small (was large), on_device, small
    pte = pte_lab.open(path)
    assert list(pte.methods) == ["small", "on_device"] and len(pte.methods["small"].inputs) == 2
    (f,) = [w for w in pte.warnings() if w.kind == "duplicate_method"]
    assert f.details.plans == (0, 2) and "loads the first" in f.message
    x, y = torch.randn(8, 8), torch.randn(8, 8)  # ExecuTorch runs plan 0: relu(x @ y) + 1, two inputs
    assert torch.allclose(_run(path, "small", [x, y])[0], torch.relu(x @ y) + 1, atol=1e-5)


def test_an_unknown_device_type_is_named_and_never_loaded(tmp_path):
    from pte_lab import examples

    data = bytearray(examples.build("device", side=8))
    raw, _ = read(bytes(data))
    (d,) = [p.tables(9, "non_const_buffer_device")[0] for p in raw._root.tables(1, "execution_plan")
            if len(p.tables(9, "non_const_buffer_device"))]
    data[d._field(1, 1)] = 2  # device_type 2: not one ExecuTorch defines
    path = tmp_path / "type2.pte"
    path.write_bytes(data)
    (f,) = [w for w in pte_lab.open(path).warnings() if w.kind == "unknown_device"]
    assert f.severity == "error" and "device2:0" in f.message
    with pytest.raises(PteFormatError, match="not one ExecuTorch defines"):
        pte_lab.load(path)


def test_device_problems():
    from pte_lab.devices import device_name, device_problem

    assert device_problem("cpu") is None and device_problem("cuda:0") is None
    assert "negative" in device_problem(device_name(1, -1))
    assert "not one ExecuTorch defines" in device_problem(device_name(7, 0))


def test_a_segment_read_as_two_kinds_of_data_is_never_loaded(program_path, tmp_path):
    """A delegate's blob reference retargeted into the constant segment (XNNPACK aborts on it)."""
    data = bytearray(program_path("xnnpack").read_bytes())
    raw, _ = read(bytes(data))
    consts = next(s.index for s in raw.segments if s.kind == "constants")
    processed = raw._root.tables(1, "execution_plan")[0].tables(7, "delegates")[0].table(1, "processed")
    struct.pack_into("<I", data, processed._field(1, 4), consts)
    path = tmp_path / "retargeted.pte"
    path.write_bytes(data)
    (f,) = [w for w in pte_lab.open(path).warnings() if w.kind == "segment_roles"]
    assert f.details.segment == consts and "constants" in f.details.roles
    with pytest.raises(PteFormatError, match="read as constants and as delegate"):
        pte_lab.load(path)


def test_a_branch_on_a_float_tensor_is_never_loaded(program_path, tmp_path):
    data = bytearray(program_path("cond").read_bytes())
    raw, _ = read(bytes(data))
    plan = raw._root.tables(1, "execution_plan")[0]
    m = pte_lab.open(bytes(data)).methods["forward"]
    j = next(i for i in m.instructions if i.kind == "JumpFalseCall" and i.args[0])  # 0 is a default: not stored
    floaty = next(t.value for t in m.planned if t.dtype == "float32")
    k = 0
    for chain in plan.tables(5, "chains"):
        for ins in chain.tables(2, "instructions"):
            if k == j.index:
                _, call = ins.union(0, 1, "instr_args")
                struct.pack_into("<i", data, call._field(0, 4), floaty)
            k += 1
    path = tmp_path / "float_branch.pte"
    path.write_bytes(data)
    (f,) = [w for w in pte_lab.open(path).warnings() if w.kind == "operand_kinds"]
    assert f"branches on v{floaty}, a Tensor" in f.message
    with pytest.raises(PteFormatError, match="not a boolean"):
        pte_lab.load(path)


def test_a_file_with_overlapping_live_tensors_runs_in_a_worker_by_default(program_path, tmp_path):
    from pte_lab import planning

    src = program_path("portable")
    r = planning.replan(src, "naive")
    m = r.original.methods["forward"]
    a, b = [t for t in m.planned if t.role == "intermediate"][:2]
    (plan,) = r.arenas
    plan.offsets[b.value], plan.kept = plan.offsets[a.value], False
    assert r.conflicts()  # the validator sees the overlap; allow_overlaps writes it for the experiment
    bad = r.write(tmp_path / "overlap.pte", allow_overlaps=True)
    assert any(w.kind == "plan_overlap" for w in pte_lab.open(bad).warnings())
    with pte_lab.load(bad) as prog:
        assert prog.isolated and prog.suspicious  # a worker: a crash would not end this process
        prog.load_method("forward")(torch.randn(4, 32))
    with pte_lab.load(src) as prog:
        assert not prog.isolated  # a clean file runs in this process


def test_a_backend_registered_but_unavailable_is_refused_before_load_method(program_path, tmp_path):
    """ExecuTorch 1.5's wheel registers OpenvinoBackend but, without OpenVINO's library, load_method fails
    with NotFound (0x20): pte_lab names the backend first, as for any backend this runtime lacks."""
    from executorch.runtime import Runtime

    from pte_lab import BackendUnavailableError

    registry = Runtime.get().backend_registry
    if "OpenvinoBackend" not in registry.registered_backend_names or registry.is_available("OpenvinoBackend"):
        pytest.skip("this ExecuTorch build has no unusable OpenvinoBackend")
    pte = deser.deserialize_pte_binary(program_path("xnnpack").read_bytes())
    for plan in pte.program.execution_plan:
        for d in plan.delegates:
            d.id = "OpenvinoBackend"
    path = tmp_path / "openvino.pte"
    path.write_bytes(bytes(deser.serialize_pte_binary(pte)))
    for isolate in (False, True):
        with pte_lab.load(path, isolate=isolate) as prog:
            with pytest.raises(BackendUnavailableError) as exc:
                prog.load_method("forward")
        e = exc.value
        assert e.backend == "OpenvinoBackend" and e.method == "forward"
        assert "OpenvinoBackend" not in e.registered and "XnnpackBackend" in e.registered
        assert "registers but cannot use on this machine" in str(e)
