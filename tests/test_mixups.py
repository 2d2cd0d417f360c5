"""Files given where a .pte is expected: each is named for what it is, with what to do instead, by
pte_lab.open, pte_lab.load, pte_lab.diff and the CLI alike (pte_lab.format.mixups)."""

from __future__ import annotations

import struct
import zipfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import NotAProgramError, PteFormatError
from pte_lab.cli import main
from pte_lab.format import read, read_data


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Real files of each kind, written by their own tools, each saved with a .pte suffix."""
    from executorch.devtools import generate_etrecord
    from executorch.exir import to_edge
    from executorch.extension.pybindings import portable_lib

    d = tmp_path_factory.mktemp("mixups")
    m, x = _Tiny().eval(), (torch.randn(1, 4),)
    out = {}
    scripted = torch.jit.script(m)
    torch.jit.save(scripted, str(d / "torchscript.pte"))
    out["torchscript"] = d / "torchscript.pte"
    scripted._save_for_lite_interpreter(str(d / "mobile.pte"))  # PyTorch Mobile (bytecode.pkl)
    out["mobile"] = d / "mobile.pte"
    torch.save(m.state_dict(), d / "checkpoint.pte")
    out["checkpoint"] = d / "checkpoint.pte"
    ep = torch.export.export(m, x)
    torch.export.save(ep, d / "exported.pte")
    out["pt2"] = d / "exported.pte"
    edge = to_edge(ep)
    et = edge.to_executorch()
    program = d / "tiny.pte"
    program.write_bytes(et.buffer)
    out["program"] = program
    generate_etrecord(str(d / "etrecord.pte"), edge, et)
    out["etrecord"] = d / "etrecord.pte"
    module = portable_lib._load_for_executorch(str(program), enable_etdump=True)
    module.run_method("forward", x)
    module.write_etdump_result_to_file(str(d / "etdump.pte"))
    out["etdump"] = d / "etdump.pte"
    return out


# flatbuffer prelude (root offset, identifier) of TensorFlow Lite; an ONNX ModelProto's first fields
TFLITE = struct.pack("<I", 28) + b"TFL3" + b"\x00" * 56
ONNX = (b"\x08\x08" + b"\x12\x07pytorch" + b"\x1a\x052.1.0" + b"\x3a\x13" + b"\x0a\x04node" + b"\x12\x0bonnx::Relu_"
        + b"\x42\x02\x10\x11")


def _kind(source) -> str:
    with pytest.raises(NotAProgramError) as exc:
        pte_lab.open(source)
    assert isinstance(exc.value, PteFormatError)
    return exc.value.kind


@pytest.mark.parametrize("name, kind", [
    ("torchscript", "torchscript"), ("mobile", "torchscript"), ("checkpoint", "checkpoint"), ("pt2", "pt2"),
    ("etrecord", "etrecord"), ("etdump", "etdump"),
])
def test_files_written_by_other_tools_are_named(files, name, kind):
    path = files[name]
    assert _kind(path) == kind
    assert _kind(path.read_bytes()) == kind  # bytes: the ZIP's member names read from memory
    with open(path, "rb") as f:
        assert _kind(f) == kind


def test_a_torchscript_zip_says_what_it_is_and_how_to_export(files):
    with pytest.raises(NotAProgramError) as exc:
        pte_lab.open(files["torchscript"])
    assert str(exc.value) == (
        "not a .pte file: this is a ZIP archive: a TorchScript or PyTorch Mobile model, which ExecuTorch cannot "
        "load; export with torch.export + ExecuTorch (to_edge_transform_and_lower, to_executorch)")


def test_an_etrecord_is_told_from_torchscript_by_its_member_names_only(files, monkeypatch):
    names = zipfile.ZipFile(files["etrecord"]).namelist()
    assert "ETRECORD_V0" in names
    import pickle

    def refuse(*a, **k):
        raise AssertionError("a file given by mistake is never unpickled")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    assert _kind(files["etrecord"]) == "etrecord"
    assert _kind(files["torchscript"]) == "torchscript"


def test_crafted_headers_tflite_onnx_etdump_and_others():
    assert _kind(TFLITE) == "tflite"
    assert _kind(ONNX) == "onnx"
    assert _kind(struct.pack("<II", 120, 16) + b"ED00" + b"\x00" * 8) == "etdump"  # flatcc's size prefix
    assert _kind(b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 123\n") == "lfs_pointer"
    assert _kind(b"\n<!DOCTYPE html><html><head>") == "html"
    assert _kind(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16) == "gguf"
    assert _kind(b"PK\x03\x04\x14\x00\x00\x00") == "zip"  # not readable as an archive: a ZIP all the same
    # none of these: the plain answer, as before
    for junk in (b"\0\0\0\0JUNK" + b"\0" * 32, b"\x08\x08\x12\x05\xff\xfe\x00\x01\x02", b"\x08\x08\x99\x99\x99\x99\x99\x99\x99"):
        assert _kind(junk) == "unknown"


def test_a_real_program_is_never_misnamed(files):
    data = files["program"].read_bytes()
    assert pte_lab.open(data).methods  # opens
    assert data[4:8] == b"ET12"


def test_a_ptd_given_as_a_program_and_a_program_given_as_data(files, tmp_path):
    from pte_lab import examples

    pte = examples.save("external", tmp_path / "external.pte")
    (ptd,) = list(tmp_path.glob("*.ptd"))
    with pytest.raises(NotAProgramError) as exc:
        read(ptd)
    assert exc.value.kind == "ptd" and "FlatTensor" in str(exc.value) and "data=" in str(exc.value)
    assert isinstance(pte_lab.open(ptd), pte_lab.DataFile)  # open() still opens it as what it is
    with pytest.raises(NotAProgramError, match="not a .ptd file: this is a ZIP archive: a TorchScript") as exc:
        read_data(files["torchscript"])
    with pytest.raises(NotAProgramError, match="not a .ptd file: this is a ZIP archive: a TorchScript"):
        pte_lab.open(pte, data=files["torchscript"])


def test_load_diff_and_the_cli_say_the_same(files, capsys):
    with pytest.raises(NotAProgramError, match="TorchScript or PyTorch Mobile"):
        pte_lab.load(files["torchscript"])
    with pytest.raises(NotAProgramError, match="ETRecord"):
        pte_lab.diff(files["program"], files["etrecord"])
    for command in (["inspect"], ["sizes"]):
        code = main([*command, str(files["torchscript"])])
        err = capsys.readouterr().err
        assert code != 0
        assert "ZIP archive: a TorchScript or PyTorch Mobile model" in err and "Traceback" not in err


def test_a_native_package_of_1_5_1_is_named_as_such(tmp_path):
    """ExecuTorch 1.5.1's .ptn (to_native(...).save) and the native graph inside it: pte_lab.open reads them (a
    NativePackage, tests/test_ptn.py); where a plan is needed (load, diff, read as a .pte) each is named for what it
    is, holding no plan, with where to look instead and how to get a planned .pte (before: 'a ZIP archive ... open
    the .pte inside')."""
    from executorch.exir.native import to_native

    from pte_lab.model import NativePackage

    ptn = tmp_path / "m.ptn"
    to_native(torch.export.export(_Tiny().eval(), (torch.randn(1, 4),))).save(str(ptn))
    with zipfile.ZipFile(ptn) as z:
        assert "program.ptg" in z.namelist()
        (tmp_path / "program.ptg").write_bytes(z.read("program.ptg"))
    for path, kind, said in ((ptn, "ptn", "an ExecuTorch native program package (.ptn"),
                             (tmp_path / "program.ptg", "ptg", "the native program of an ExecuTorch native program "
                                                               "package (.ptn")):
        assert isinstance(pte_lab.open(path), NativePackage)
        for call in (read, pte_lab.load):
            with pytest.raises(NotAProgramError) as e:
                call(path)
            assert e.value.kind == kind and said in str(e.value) and "carries no memory plan" in str(e.value)
            assert "pte-lab inspect" in str(e.value) and "to_edge_transform_and_lower" in str(e.value)
