""".ptn packages (ExecuTorch 1.5.1's to_native(...).save): what pte_lab reads from one, set against what torch and
ExecuTorch say of the same export; the commands that need a plan say it has none; a broken, truncated or crafted
package is refused in one line with a named error."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir.native")

import pte_lab
from pte_lab import NotAProgramError, PackageError, PteFormatError
from pte_lab.cli import main
from pte_lab.model import NativePackage
from pte_lab.model.package import NativeRole, StateKind

import ptn_packages


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """name -> (path, exported programs by method, the NativeProgramManager), exported once for this module."""
    d = tmp_path_factory.mktemp("ptn")
    return {name: ptn_packages.build(name, d) for name in ptn_packages.NAMES}


def test_the_reader_follows_the_installed_native_schema():
    """Each table pte_lab reads lists, in ExecuTorch's own native_graph.fbs, the fields the reader's slots assume, in
    that order (a schema that moved a field would be read wrong), and the dtype and kind enums have its values."""
    import re
    from importlib.resources import files

    from pte_lab.format import ptn

    fbs = (files("executorch") / "backends/native/serialization/native_graph.fbs").read_text()
    fbs = re.sub(r"//[^\n]*", "", fbs)
    tables = {m[1]: [f.split(":")[0].strip() for f in m[2].split(";") if ":" in f]
              for m in re.finditer(r"table\s+(\w+)\s*\{([^}]*)\}", fbs)}
    for table, fields in ptn.FIELDS.items():
        assert tuple(tables[table][: len(fields)]) == fields, table
    for enum in (ptn.NativeScalarType, ptn.OpKind, ptn.InputKind, ptn.OutputKind):
        body = re.search(rf"enum\s+{enum.__name__.removeprefix('Native')}\s*:\s*byte\s*\{{([^}}]*)\}}", fbs)[1]
        declared = dict(re.findall(r"(\w+)\s*=\s*(\d+)", body))
        assert {k: int(v) for k, v in declared.items()} == {e.name: e.value for e in enum}, enum.__name__
    assert re.search(r'file_identifier\s+"NPTG"', fbs)


def _executorch_view(path):
    """ExecuTorch's own reader of the native program (its graph serializer's deserialize_program)."""
    from executorch.backends.native.serialization.graph_serialize import deserialize_program

    with zipfile.ZipFile(path) as z:
        return deserialize_program(z.read("program.ptg"))


_TORCH_NAMES = {torch.float32: "float32", torch.int64: "int64", torch.float16: "float16", torch.int32: "int32",
                torch.bfloat16: "bfloat16", torch.uint8: "uint8", torch.int8: "int8", torch.bool: "bool"}


@pytest.mark.parametrize("name", ptn_packages.NAMES)
def test_contents_are_what_executorch_reads(packages, name):
    path, programs, manager = packages[name]
    p = pte_lab.open(path)
    assert isinstance(p, NativePackage) and p.has_memory_plan is False
    assert set(p.methods) == manager.methods == set(programs)
    program = _executorch_view(path)
    # every data key ExecuTorch's reader lists, with the dtype, shape and bytes of the tensor ExecuTorch saved under
    # it (the manager's constants), and for the module's own parameters and buffers, of torch.export's
    saved = manager._constants
    assert {c.key for c in p.constants} == {c.data_key for m in program.methods for c in m.constants or []} == set(saved)
    exported = {k: v for f in programs.values() for k, v in f["tensors"].items()}
    for c in p.constants:
        t = saved[c.key]
        if c.key in exported:
            assert torch.equal(exported[c.key], t)
        assert (c.dtype, c.shape, c.nbytes) == (_TORCH_NAMES[t.dtype], tuple(t.shape), t.nbytes), c.key
        if c.alias:  # stored once under another key: the bytes are the same
            assert torch.equal(saved[c.owner], t)
    # each identical set of bytes stored once: the stored bytes are those of the distinct tensors
    assert p.stored_bytes == sum(c.nbytes for c in p.constants if not c.alias)
    for m in program.methods:
        ours = p.methods[m.name]
        assert [t.name for t in ours.inputs] == list(m.graph.inputs)
        assert [t.name for t in ours.outputs] == list(m.graph.outputs)
        theirs = {tv.name: tv.meta for tv in m.graph.tensor_values or []}
        mine = {t.name: t for t in ours.tensors}
        for tname, meta in theirs.items():
            t = mine[tname]
            assert t.shape == tuple(d.max for d in meta.sizes) and t.min_shape == tuple(d.min for d in meta.sizes)
        assert {b.fqn for b in m.mutable_buffers or []} <= {s.fqn for s in p.state}
    # and what torch.export said of the user inputs: their dtypes, and bytes at the bound of each dimension
    for mname, f in programs.items():
        assert len(f["inputs"]) == len(p.methods[mname].inputs)
        for (dtype, elsize), t in zip(f["inputs"], p.methods[mname].inputs):
            assert t.dtype == _TORCH_NAMES[dtype] and t.nbytes == elsize * torch.Size(t.shape).numel()


def test_repeated_constants_are_stored_once_and_named_as_aliases(packages, capsys):
    path, _, _ = packages["repeated"]
    with zipfile.ZipFile(path) as z:
        written = json.loads(z.read("aliases.json"))
    p = pte_lab.open(path)
    assert p.aliases == written == {"b.bias": "a.bias", "b.weight": "a.weight", "k2": "k1"}
    by_key = {c.key: c for c in p.constants}
    assert by_key["b.weight"].alias and by_key["b.weight"].owner == "a.weight" and not by_key["a.weight"].alias
    assert p.referenced_bytes == 2 * p.stored_bytes == 640
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "aliases.json" in out and "alias of a.weight" in out and "640 B referenced take 320 B" in out


def test_kv_cache_state_is_zero_initialised_and_shared_by_its_methods(packages):
    path, programs, _ = packages["kv_cache"]
    p = pte_lab.open(path)
    state = {s.fqn: s for s in p.state}
    model = ptn_packages.KVCache()
    for fqn in ("k_cache", "v_cache"):  # non-persistent: no bytes in the file, zeros at load
        s = state[fqn]
        assert s.kind is StateKind.ZEROS and s.methods == ("forward", "prefill")
        assert (s.shape, s.nbytes) == (tuple(getattr(model, fqn).shape), getattr(model, fqn).nbytes)
    assert state["steps"].kind is StateKind.STORED  # persistent and written: starts from its stored bytes
    assert p.zero_state_bytes == 2 * 16 * 4 * 4
    with zipfile.ZipFile(path) as z:
        header = z.read("program.safetensors")
    stored_keys = set(json.loads(header[8 : 8 + struct.unpack("<Q", header[:8])[0]]))
    assert "k_cache" not in stored_keys and "steps" in stored_keys
    # each write-back names the buffer torch.export says the method mutates
    for mname, f in programs.items():
        writes = {t.writes for t in p.methods[mname].outputs if t.role is NativeRole.WRITE_BACK}
        assert writes == f["mutates"] == {"k_cache", "v_cache", "steps"}


def test_dynamic_shapes_are_shown_at_their_bound(packages, capsys):
    path, _, _ = packages["dynamic"]
    m = pte_lab.open(path).methods["forward"]
    (x,) = m.inputs
    assert x.dynamic and x.shape == (ptn_packages.SEQ_MAX, 8) and x.nbytes == ptn_packages.SEQ_MAX * 8 * 4
    assert m.dynamic and m.fresh_bytes == 2 * ptn_packages.SEQ_MAX * 8 * 4  # linear and softmax, none shared
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"[2..{ptn_packages.SEQ_MAX}, 8]" in out and "each at its upper bound" in out


def test_inspect_names_the_format_and_says_there_is_no_plan(packages, capsys):
    path, _, _ = packages["mlp"]
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Ptn {path}: an ExecuTorch native program package (.ptn")
    assert "carries no memory plan" in out and "plans memory when it loads the package" in out
    assert main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pte_lab.package" and doc["file"]["format"] == "ptn" and doc["file"]["memory_plan"] is None
    assert [c["key"] for c in doc["constants"]] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert doc["methods"]["forward"]["inputs"][0]["shape"] == [2, 8]
    html = pte_lab.open(path)._repr_html_()
    assert "ExecuTorch native program package" in html and "a.weight" in html


def test_bytes_a_file_object_and_a_bare_program_ptg_open_too(packages, tmp_path):
    path, _, _ = packages["mlp"]
    data = path.read_bytes()
    assert set(pte_lab.open(data).methods) == {"forward"}
    with open(path, "rb") as f:
        assert [c.key for c in pte_lab.open(f).constants] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    with zipfile.ZipFile(path) as z:
        (tmp_path / "program.ptg").write_bytes(z.read("program.ptg"))
    bare = pte_lab.open(tmp_path / "program.ptg")
    assert bare.graph_only and bare.stored_bytes is None and bare.missing == []
    assert bare.constants[0].nbytes == 16 * 8 * 4  # from its meta: the bytes are in the package, not here
    assert bare.methods["forward"].inputs[0].shape == (2, 8)


@pytest.mark.parametrize("command", [["sizes"], ["replan", "--to", "greedy"], ["what-if", "--bound", "0:0=4"]])
def test_commands_that_need_a_plan_say_in_one_line_it_has_none(packages, tmp_path, capsys, command):
    path, _, _ = packages["dynamic"]
    argv = [command[0], str(path), *command[1:]]
    if command[0] == "replan":
        argv = [command[0], str(path), str(tmp_path / "out.pte")]
    code = main(argv)
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("pte-lab: error: ") and "Traceback" not in err
    assert "carries no memory plan" in line and "pte-lab inspect" in line and "to_executorch()" in line


def test_load_and_diff_say_the_same(packages):
    path, _, _ = packages["mlp"]
    for call in (lambda: pte_lab.load(path), lambda: pte_lab.diff(path, path)):
        with pytest.raises(NotAProgramError, match="carries no memory plan") as e:
            call()
        assert e.value.kind == "ptn"


# -- broken, truncated and crafted packages ---------------------------------------------------------------------

def _local(name: bytes, data: bytes) -> bytes:
    return struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, zlib.crc32(data), len(data), len(data),
                       len(name), 0) + name + data


def _central(name: bytes, data: bytes, offset: int) -> bytes:
    return struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 0, 20, 0, 0, 0, 0, 0, zlib.crc32(data), len(data),
                       len(data), len(name), 0, 0, 0, 0, 0, offset) + name


def _archive(body: bytes, centrals: list[bytes]) -> bytes:
    cd = b"".join(centrals)
    return body + cd + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(centrals), len(centrals), len(cd), len(body), 0)


def _rezip(src, dst, *, compression=zipfile.ZIP_STORED, rename=None, extra=(), replace=None):
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", compression) as out:
        for info in z.infolist():
            data = (replace or {}).get(info.filename, z.read(info.filename))
            out.writestr((rename or {}).get(info.filename, info.filename), data)
        for name, data in extra:
            out.writestr(name, data)
    return dst


def _refused(path, cls, *said):
    with pytest.raises(cls) as e:
        pte_lab.open(path)
    text = str(e.value)
    assert "\n" not in text and all(s in text for s in said), text
    code = main(["inspect", str(path)])
    assert code == 2
    return text


def test_a_truncated_package_is_said_to_be_truncated(packages, tmp_path, capsys):
    data = packages["mlp"][0].read_bytes()
    for cut in (60, len(data) // 2, len(data) - 10):
        bad = tmp_path / f"cut{cut}.ptn"
        bad.write_bytes(data[:cut])
        _refused(bad, PackageError, "truncated")
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_crafted_archives_are_refused_in_one_line(packages, tmp_path, capsys):
    src = packages["repeated"][0]
    with zipfile.ZipFile(src) as z:
        ptg = z.read("program.ptg")
    inner = _local(b"program.ptg", ptg)
    overlap = _archive(_local(b"outer", inner), [_central(b"outer", inner, 0), _central(b"program.ptg", ptg, 30 + 5)])
    cases = {
        "deflated": (_rezip(src, tmp_path / "deflated.ptn", compression=zipfile.ZIP_DEFLATED), "compressed"),
        "path": (_rezip(src, tmp_path / "path.ptn", extra=[("../../etc/evil", b"x")]), "'..' part"),
        "absolute": (_rezip(src, tmp_path / "abs.ptn", extra=[("/tmp/evil", b"x")]), "absolute path"),
        "folder": (_rezip(src, tmp_path / "folder.ptn", rename={"program.ptg": "model/program.ptg"}), "inside a folder"),
        "huge header": (_rezip(src, tmp_path / "header.ptn", replace={
            "program.safetensors": struct.pack("<Q", 1 << 40) + b"{}"}), "header claims"),
        "offsets": (_rezip(src, tmp_path / "offsets.ptn", replace={"program.safetensors": (
            lambda h: struct.pack("<Q", len(h)) + h)(b'{"w":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}}')}),
            "not a range"),
        "alias": (_rezip(src, tmp_path / "alias.ptn", replace={"aliases.json": b'{"x": "nowhere"}'}),
                  "does not store"),
        "alias json": (_rezip(src, tmp_path / "aliasjson.ptn", replace={"aliases.json": b"[" * 100_000}),
                       "not JSON"),
        # a member inside another's bytes: the overlapping-entries trick of ZIP bombs
        "overlap": (overlap, "overlap"),
        "twice": (_archive(_local(b"program.ptg", ptg) + _local(b"program.ptg", ptg), [
            _central(b"program.ptg", ptg, 0), _central(b"program.ptg", ptg, 30 + 11 + len(ptg))]), "listed twice"),
    }
    for label, (made, said) in cases.items():
        if isinstance(made, bytes):
            p = tmp_path / f"{label.replace(' ', '_')}.ptn"
            p.write_bytes(made)
            made = p
        _refused(made, PackageError, said)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, (label, err)


def test_a_corrupt_program_ptg_is_refused(packages, tmp_path):
    src = packages["mlp"][0]
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        info = z.getinfo("program.ptg")
    data[info.header_offset + 30 + len("program.ptg") + 100] ^= 0xFF
    (tmp_path / "crc.ptn").write_bytes(bytes(data))
    _refused(tmp_path / "crc.ptn", PackageError, "CRC")
    garbage = b"\x00\x00\x00\x00NPTG" + b"\xff" * 64
    _refused(_rezip(src, tmp_path / "garbage.ptn", replace={"program.ptg": garbage}), PteFormatError, "program.ptg")


def test_a_zip_bomb_is_never_inflated(tmp_path):
    """A deflated member of 64 MiB of zeros (64 KiB on disk) is refused from the directory alone: pte_lab
    inflates nothing."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("program.ptg", b"\x00" * (64 << 20))
    (tmp_path / "bomb.ptn").write_bytes(buf.getvalue())
    _refused(tmp_path / "bomb.ptn", PackageError, "compressed", "inflates nothing")


def test_mutated_packages_open_or_are_refused_in_one_line(packages):
    """Bytes of real packages changed at random (seeded): each opens, or raises a PteFormatError (PackageError
    included) of one line; nothing else escapes."""
    import random

    rng = random.Random(48)
    for name in ("repeated", "kv_cache"):
        data = packages[name][0].read_bytes()
        for _ in range(150):
            b = bytearray(data)
            for _ in range(rng.choice((1, 2, 8))):
                b[rng.randrange(len(b))] = rng.randrange(256)
            if rng.random() < 0.2:
                b = b[: rng.randrange(len(b))]
            try:
                p = pte_lab.open(bytes(b))
            except PteFormatError as e:
                assert "\n" not in str(e)
                continue
            repr(p), p._repr_html_(), p.to_dict()  # what opens renders
