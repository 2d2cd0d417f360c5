"""ETRecords: names, modules and source lines for planned tensors, read without unpickling anything."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import pytest

import pte_lab
from pte_lab.errors import ETRecordError, PteFormatError
from pte_lab.format.etrecord import read_etrecord
from pte_lab.model.attribution import attribute, attribute_program

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

HERE = os.path.abspath(__file__)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))  # BLOCK-LINE


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


BLOCK_LINE = next(i for i, line in enumerate(open(HERE), 1) if line.rstrip().endswith("# BLOCK-LINE"))


def _export(dirname, xnnpack: bool):
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    ep = torch.export.export(TwoBlocks().eval(), (torch.randn(2, 8),))
    partitioner = []
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    program = to_edge_transform_and_lower(ep, partitioner=partitioner, generate_etrecord=True).to_executorch()
    pte, etr = dirname / "model.pte", dirname / "model.etrecord"
    pte.write_bytes(program.buffer)
    program.get_etrecord().save(str(etr))
    return str(pte), str(etr)


def _export_two_methods(dirname):
    """``to_edge`` then ``to_backend`` (the other flow): two methods, each one XNNPACK call whose
    handles list each linear's handle twice (its permute and addmm)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge

    torch.manual_seed(0)
    eps = {"forward": torch.export.export(TwoBlocks().eval(), (torch.randn(2, 8),)),
           "half": torch.export.export(Block().eval(), (torch.randn(2, 8),))}
    program = to_edge(eps, generate_etrecord=True).to_backend(XnnpackPartitioner()).to_executorch()
    pte, etr = dirname / "two.pte", dirname / "two.etrecord"
    pte.write_bytes(program.buffer)
    program.get_etrecord().save(str(etr))
    return str(pte), str(etr)


@pytest.fixture(scope="module")
def two_methods(tmp_path_factory):
    return _export_two_methods(tmp_path_factory.mktemp("two"))


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("portable"), xnnpack=False)


@pytest.fixture(scope="module")
def xnnpack(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("xnnpack"), xnnpack=True)


def test_instruction_0_is_blocks_0_fc1_and_its_line_in_this_file(portable):
    pte_path, etr = portable
    m = pte_lab.open(pte_path).methods["forward"]
    rows = attribute(m, read_etrecord(etr))
    assert [r.value for r in rows] == [t.value for t in m.planned]
    first = [r for r in rows if r.instruction == 0]
    assert first
    for r in first:
        assert (r.module, r.module_type) == ("blocks.0.fc1", "Linear")
        assert r.node == "aten_permute_copy_default" and r.op == "aten.permute_copy.default"
        assert (os.path.abspath(r.source.file), r.source.line) == (HERE, BLOCK_LINE)
        assert "self.fc1(x)" in r.source.code and f":{BLOCK_LINE} " in str(r.source)
    # every tensor an instruction writes has a module; relu's is the Block that calls it
    assert all(r.module for r in rows if r.instruction is not None)
    relu = [r for r in rows if r.op == "aten.relu.default"]
    assert [(r.module, r.module_type) for r in relu] == [("blocks.0", "Block"), ("blocks.1", "Block")]
    # an addmm is attributed to the addmm node, not to the permute that shares its handle
    addmm = [r for r in rows if r.instruction == 1]
    assert addmm and all(r.node == "aten_addmm_default" for r in addmm)


def test_every_handle_and_module_agrees_with_executorchs_parse_etrecord(portable, xnnpack, two_methods):
    from executorch.devtools.etrecord import parse_etrecord

    for _, etr in (portable, xnnpack, two_methods):
        theirs = parse_etrecord(etr)
        ours = read_etrecord(etr)
        assert set(ours.methods) == set(theirs._debug_handle_map)
        edge = theirs.edge_dialect_program
        programs = edge if isinstance(edge, dict) else {"forward": edge}
        assert set(programs) == set(ours.methods)
        for name, program in programs.items():
            rec = ours[name]
            for k, v in theirs._debug_handle_map[name].items():
                assert rec.handles[int(k)] == (tuple(v) if isinstance(v, list) else (v,))
            assert dict(rec.delegates) == {int(k): v["name"] for k, v in theirs._delegate_map[name].items()}
            expected = {}
            for n in program.graph_module.graph.nodes:
                if n.op != "call_function":
                    continue
                stack = list(n.meta.get("nn_module_stack", {}).values())
                expected[n.name] = (n.meta.get("debug_handle"), tuple(stack))
            assert {nd.name: (nd.debug_handle, nd.module_stack) for nd in rec.nodes} == expected
            assert len(expected) >= 3


def test_two_methods_through_to_backend(two_methods):
    pte_path, etr = two_methods
    rows = attribute_program(pte_lab.open(pte_path), read_etrecord(etr))
    assert set(rows) == {"forward", "half"}
    last = {name: [r for r in v if r.instruction is not None][-1] for name, v in rows.items()}
    assert (last["forward"].module, last["forward"].module_type) == ("blocks.1.fc2", "Linear")
    assert (last["half"].module, last["half"].module_type) == ("fc2", "Linear")
    assert last["half"].modules == (("fc1", "Linear"), ("", "Block"), ("fc2", "Linear"))
    assert last["half"].source.line == BLOCK_LINE


def test_the_delegate_calls_output_names_the_modules_it_swallowed(xnnpack):
    pte_path, etr = xnnpack
    pte = pte_lab.open(pte_path)
    rows = attribute_program(pte, read_etrecord(etr))["forward"]
    out = [r for r in rows if r.instruction is not None]
    assert out, "the delegate call writes a planned tensor"
    assert {m for r in out for m in r.modules} == {
        ("blocks.0.fc1", "Linear"), ("blocks.0.fc2", "Linear"), ("blocks.1.fc1", "Linear"),
        ("blocks.1.fc2", "Linear"), ("blocks.0", "Block"), ("blocks.1", "Block")}
    # the graph's output leaves the delegate from blocks.1.fc2
    assert (out[-1].module, out[-1].module_type, out[-1].node) == ("blocks.1.fc2", "Linear", "aten_linear_default_3")
    assert out[-1].source.line == BLOCK_LINE


def test_reading_never_unpickles(portable, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("pickle was called")

    class NoUnpickler:
        def __init__(self, *a, **k):
            refuse()

    monkeypatch.setattr(pickle, "Unpickler", NoUnpickler)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    rec = read_etrecord(portable[1])
    assert rec["forward"].nodes and rec["forward"].handles
    # the pickled parts are named as not read
    assert any(n.endswith("_state_dict") for n in rec.unread)


def _rewrite(src: str, change: dict) -> bytes:
    """The ETRecord with some entries replaced (bytes) or removed (None)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(buf, "w") as out:
        for info in z.infolist():
            if info.filename in change:
                if change[info.filename] is not None:
                    out.writestr(info.filename, change[info.filename])
            else:
                out.writestr(info, z.read(info))
    return buf.getvalue()


def _one_line_error(source, match):
    with pytest.raises(ETRecordError, match=match) as e:
        read_etrecord(source)
    assert "\n" not in str(e.value) and isinstance(e.value, PteFormatError)


def test_crafted_and_truncated_etrecords_are_named_errors(portable):
    pte_path, etr = portable
    data = open(etr, "rb").read()
    _one_line_error(open(pte_path, "rb").read(), "BadZipFile")                  # a .pte, not a ZIP
    for cut in (len(data) // 2, len(data) - 30, 100):
        _one_line_error(data[:cut], "not a readable ETRecord")                 # truncated
    _one_line_error(_rewrite(etr, {"debug_handle_map": None}), "no debug_handle_map")
    _one_line_error(_rewrite(etr, {"debug_handle_map": b"{not json"}), "not JSON")
    _one_line_error(_rewrite(etr, {"debug_handle_map": b"[1, 2]"}), "not a map of methods")
    _one_line_error(_rewrite(etr, {"debug_handle_map": b'{"forward": {"0": "x"}}'}), "not an integer")
    _one_line_error(_rewrite(etr, {"debug_handle_map": b"[" * 100000 + b"]" * 100000}), "not JSON")
    _one_line_error(_rewrite(etr, {"edge_dialect_exported_program/forward": b'{"graph_module": {}}'}),
                    "no graph_module")
    # a flipped byte inside a stored entry: the CRC says so
    i = data.index(b'"debug_handle": "1"')
    _one_line_error(data[:i] + b"X" + data[i + 1:], "not a readable ETRecord")
    # a ZIP bomb: 64 MiB of zeros deflated to a few KiB is refused before it is inflated
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("ETRECORD_V0", b"")
        z.writestr("debug_handle_map", b" " * (64 << 20))
    _one_line_error(bomb.getvalue(), "ZIP bomb")
    # the central directory claims 2 GiB stored for debug_handle_map: refused before any read
    i = data.index(b"PK\x01\x02")
    while data[i + 46:i + 46 + 16] != b"debug_handle_map":
        i = data.index(b"PK\x01\x02", i + 4)
    huge = (0x7FFFFFFF).to_bytes(4, "little")
    _one_line_error(data[:i + 20] + huge + huge + data[i + 28:], "past the end of the")
    # a ZIP of something else
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("model.onnx", b"x")
    _one_line_error(other.getvalue(), "without ETRecord entries")


def test_an_etrecord_from_another_export_is_refused_saying_how(portable, xnnpack):
    pte_p, etr_p = portable
    pte_x, etr_x = xnnpack
    with pytest.raises(ETRecordError, match="delegate calls at instructions"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(etr_x))
    with pytest.raises(ETRecordError, match="up to 9, the program has 1 instructions"):
        attribute_program(pte_lab.open(pte_x), read_etrecord(etr_p))
    renamed = _rewrite(etr_p, {"debug_handle_map": json.dumps({"decode": {"0": 1}}).encode(),
                               "edge_dialect_exported_program/forward": None})
    with pytest.raises(ETRecordError, match="it has methods decode, the program has forward"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(renamed))
    # every instruction pointing at relu's handle: the operators do not match
    relu_only = _rewrite(etr_p, {"debug_handle_map": json.dumps({"forward": {str(i): 2 for i in range(10)}}).encode()})
    with pytest.raises(ETRecordError, match=r"instruction 0 calls aten::permute_copy.out.*relu"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(relu_only))
    unknown = _rewrite(etr_p, {"debug_handle_map": json.dumps({"forward": {"0": 99}}).encode()})
    with pytest.raises(ETRecordError, match="on no node of its edge graph"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(unknown))
    # a smaller export of the same model (fewer layers): its handles, true as far as they go, stop before the
    # program's kernels do
    with zipfile.ZipFile(etr_p) as z:
        handles = json.loads(z.read("debug_handle_map"))["forward"]
    kernels = [i.index for i in pte_lab.open(pte_p).methods["forward"].instructions if i.kind == "KernelCall"]
    shorter = _rewrite(etr_p, {"debug_handle_map": json.dumps(
        {"forward": {k: v for k, v in handles.items() if int(k) < kernels[-1]}}).encode()})
    with pytest.raises(ETRecordError, match=rf"handles end at instruction \d+, the program calls kernels up to "
                                            rf"instruction {kernels[-1]}"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(shorter))
    empty = _rewrite(etr_p, {"debug_handle_map": json.dumps({"forward": {}}).encode()})
    with pytest.raises(ETRecordError, match=r"the ETRecord has no debug handles for it, the program calls \d+ kernels"):
        attribute_program(pte_lab.open(pte_p), read_etrecord(empty))


def test_reading_the_layers_does_not_import_torch_or_executorch():
    import subprocess
    import sys

    code = ("import sys, pte_lab; assert 'pte_lab.format.etrecord' not in sys.modules; "
            "import pte_lab.format.etrecord, pte_lab.model.attribution; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'executorch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(HERE)))
    assert out.stdout.strip() == "[]"


def test_open_with_an_etrecord_names_each_tensors_module_in_the_tensors_table(portable, xnnpack):
    pte_path, etr = portable
    m = pte_lab.open(pte_path, etrecord=etr).methods["forward"]
    t = m.tensors
    assert list(t.columns[-4:]) == ["node", "module", "module_type", "source"]
    first = t[t["producer"] == 0]
    assert set(first["module"]) == {"blocks.0.fc1"} and set(first["module_type"]) == {"Linear"}
    assert all(s.startswith(f"{HERE}:{BLOCK_LINE} ") for s in first["source"])
    # without one the table is as before; another export's is refused when its tensors are asked for
    assert "module" not in pte_lab.open(pte_path).methods["forward"].tensors.columns
    other = pte_lab.open(pte_path, etrecord=xnnpack[1]).methods["forward"]
    with pytest.raises(ETRecordError, match="does not belong to this program"):
        other.tensors


def test_inspect_with_an_etrecord_names_modules_at_the_peak_and_in_the_json(portable, two_methods, capsys):
    from pte_lab.cli import main

    pte_path, etr = portable
    assert main(["inspect", pte_path, "--etrecord", etr]) == 0
    text = capsys.readouterr().out
    assert "b=v9 float32[8, 16] permute_copy blocks.0.fc1;" in text  # the legend: shape, op, module
    peak = text[text.index("at the peak"):]
    assert "blocks.0.fc1 (Linear)" in peak and f"tests/test_etrecord.py:{BLOCK_LINE}" in peak
    assert main(["inspect", pte_path, "--etrecord", etr, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["methods"]["forward"]["tensors"]
    made = [r for r in rows if r["producer"] == 0]
    assert made and all(r["module"] == "blocks.0.fc1" and r["module_type"] == "Linear" for r in made)
    assert all(r["source"].startswith(f"{HERE}:{BLOCK_LINE} ") for r in made)
    assert main(["inspect", pte_path, "--json"]) == 0
    assert "module" not in json.loads(capsys.readouterr().out)["methods"]["forward"]["tensors"][0]
    # another export's: one line saying how they differ, exit 2
    assert main(["inspect", pte_path, "--etrecord", two_methods[1]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not belong to this program" in err[0] and "half" in err[0]


def test_an_etrecord_of_the_same_graph_with_another_width_is_refused_naming_the_shapes(portable, tmp_path):
    """Same operators and handles, another layer width: the shapes tell them apart."""
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    wide = TwoBlocks().eval()
    for b in wide.blocks:
        b.fc1, b.fc2 = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)
    program = to_edge_transform_and_lower(torch.export.export(wide, (torch.randn(2, 8),)),
                                          generate_etrecord=True).to_executorch()
    other = tmp_path / "wide.etrecord"
    program.get_etrecord().save(str(other))
    m = pte_lab.open(portable[0], etrecord=str(other)).methods["forward"]
    with pytest.raises(ETRecordError, match=r"writes \[.*16.*\], its node .* writes \[.*32.*\]"):
        m.sources


def test_an_etrecord_file_is_parsed_once_and_read_again_when_rewritten(tmp_path):
    """Re-opening a program with its unchanged ETRecord reuses the records; a rewritten file is read anew."""
    import json
    import os
    import zipfile

    from pte_lab.format.etrecord import read_etrecord

    path = tmp_path / "m.etrecord"

    def write(handles):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("ETRECORD_V0", "")
            z.writestr("debug_handle_map", json.dumps({"forward": handles}))

    write({"0": [1], "1": [2]})
    first = read_etrecord(path)
    assert read_etrecord(path) is first
    assert dict(first.methods["forward"].handles) == {0: (1,), 1: (2,)}
    write({"0": [7]})
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a rewrite within the clock's tick
    again = read_etrecord(path)
    assert dict(again.methods["forward"].handles) == {0: (7,)}
    assert dict(read_etrecord(path.read_bytes()).methods["forward"].handles) == {0: (7,)}
