"""Replan writes back every layout ExecuTorch loads as it was: delegate data inline or in segments, with or
without an extended header (ExecuTorch 0.5 wrote an inline XNNPACK program as the flatbuffer alone),
constants inline or in a segment, constants in a ``.ptd``; and names the part it cannot write back.

The programs are exported here with executorch 1.5.1 (``extract_delegate_segments=False``,
``external_constants=True``); the older layouts are written from those with ExecuTorch's own flatbuffer
writer, as its serializer wrote them before segments."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import pte_lab
from pte_lab import planning
from pte_lab.cli import main as cli_main


def _layouts(out: Path) -> dict[str, Path]:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir._serialize._program import _program_to_flatbuffer, deserialize_pte_binary
    from executorch.exir.schema import DataSegment, SubsegmentOffsets

    from pte_lab import examples

    class Mixed(torch.nn.Module):  # XNNPACK takes the add and mul; portable kernels plan sin, cos and tanh
        def forward(self, x, y):
            a = torch.sin(x)
            return torch.tanh(torch.cos(a * y + x) + a)

    class MLP(torch.nn.Module):  # weights: XNNPACK keeps them as named data segments
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            return self.fc2(h * 2 + h)

    def export(module, inputs, partitioner=None, **config) -> bytes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(module.eval(), inputs)
            edge = to_edge_transform_and_lower(ep, partitioner=partitioner,
                                               compile_config=EdgeCompileConfig(_check_ir_validity=False))
            return bytes(edge.to_executorch(ExecutorchBackendConfig(**config)).buffer)

    torch.manual_seed(0)
    paths = {}
    xy = (torch.randn(8, 8), torch.randn(8, 8))
    inline = export(Mixed(), xy, [XnnpackPartitioner()], extract_delegate_segments=False)
    paths["inline_delegate"] = out / "inline_delegate.pte"
    paths["inline_delegate"].write_bytes(inline)
    paths["inline_delegate_named_data"] = out / "inline_delegate_named_data.pte"
    paths["inline_delegate_named_data"].write_bytes(export(MLP(), (torch.randn(4, 32),), [XnnpackPartitioner()],
                                                           extract_delegate_segments=False))
    # ExecuTorch 0.5: no extended header, no segment data, the delegate's data inline, an empty constant segment
    pf = deserialize_pte_binary(inline)
    assert not pf.program.constant_buffer and pf.named_data is None
    pf.program.constant_segment = SubsegmentOffsets(segment_index=0, offsets=[0])
    pf.program.segments = [DataSegment(offset=0, size=0)]
    paths["flat"] = out / "flat.pte"
    paths["flat"].write_bytes(bytes(_program_to_flatbuffer(pf.program).data))
    # constants inline in the flatbuffer (constant_buffer): what ExecuTorch wrote before constant segments
    pf = deserialize_pte_binary(examples.build("portable"))
    assert pf.program.constant_buffer and pf.named_data is None
    paths["inline_constants"] = out / "inline_constants.pte"
    paths["inline_constants"].write_bytes(bytes(_program_to_flatbuffer(pf.program).data))
    paths["external"] = Path(examples.save("external", out / "external.pte"))
    paths["bundled"] = out / "bundled.bpte"
    paths["bundled"].write_bytes(examples.build("bundled"))
    return paths


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    from pte_lab.quiet import quiet

    with quiet():
        return _layouts(tmp_path_factory.mktemp("layouts"))


def _where(p) -> tuple:
    """Where the program keeps its data: header, segments, each delegate's location, inline constants."""
    return (p.raw.header.extended, [(s.kind, s.size) for s in p.segments],
            [(d.location, d.size) for m in p.methods.values() for d in m.raw.delegates], p.raw.inline_constant_bytes)


@pytest.mark.parametrize("name", ["inline_delegate", "inline_delegate_named_data", "flat", "inline_constants",
                                  "external", "bundled"])
def test_replan_writes_each_layout_back_as_it_was(layouts, name, tmp_path):
    src = layouts[name]
    old = pte_lab.open(src)
    r = planning.replan(src, "first_fit", smaller_only=False)  # every arena takes the new plan
    out = r.write(tmp_path / "replanned.pte")
    new = pte_lab.open(out)
    assert _where(new) == _where(old)
    for m in old.methods.values():
        n = new.methods[m.name]
        plan = {a.mem_id: a for a in r.arenas if a.method == m.name}
        assert [(t.value, t.offset) for t in n.planned] == [(t.value, plan[t.mem_id].offsets[t.value])
                                                          for t in m.planned]
        assert n.validate() == []


def test_the_layouts_are_the_ones_named(layouts):
    """The fixtures hold what their names say (else the test above proves nothing)."""
    inline, named, flat, consts, ext = (pte_lab.open(layouts[n]) for n in
                                        ("inline_delegate", "inline_delegate_named_data", "flat",
                                         "inline_constants", "external"))
    assert [d.location for d in inline.methods["forward"].raw.delegates] == ["inline"]
    assert not any(s.kind.startswith("delegate") for s in inline.segments + named.segments)
    assert any(s.kind == "named_data" for s in named.segments)
    assert not flat.raw.header.extended and [d.location for d in flat.methods["forward"].raw.delegates] == ["inline"]
    assert not consts.raw.header.extended and consts.raw.inline_constant_bytes > 0 and not consts.segments
    assert ext.expects_external_data


@pytest.mark.parametrize("name", ["inline_delegate", "inline_delegate_named_data", "flat"])
def test_cli_replan_verifies_inline_delegate_programs(layouts, name, tmp_path, capsys):
    """ExecuTorch 1.5 runs the original and the replanned program alike (the 0.5 layout included)."""
    assert cli_main(["replan", str(layouts[name]), str(tmp_path / "o.pte"), "--verify", "--runs", "2"]) == 0
    assert "verify forward: bit-identical" in capsys.readouterr().out


def test_cli_replan_of_a_program_with_a_ptd_verifies_with_it(layouts, tmp_path, capsys):
    src = layouts["external"]
    (ptd,) = list(src.parent.glob("*.ptd"))
    before = ptd.read_bytes()
    assert cli_main(["replan", str(src), str(tmp_path / "o.pte"), "--algorithm", "first_fit", "--verify",
                     "--runs", "2", "--data", str(ptd)]) == 0
    out = capsys.readouterr().out
    assert "its external data is not rewritten" in out and "verify forward: bit-identical" in out
    assert ptd.read_bytes() == before


def test_a_bundled_program_is_written_back_bundled_with_its_test_suites(layouts, tmp_path):
    src = layouts["bundled"]
    out = planning.replan(src, "first_fit", smaller_only=False).write(tmp_path / "o.bpte")
    old, new = pte_lab.open(src), pte_lab.open(out)
    assert new.raw.bundled is not None and new.raw.bundled.suites == old.raw.bundled.suites
    assert all(v.identical for v in planning.verify(src, out, runs=2))
    passed = []
    for path in (src, out):
        with pte_lab.load(path) as prog:
            passed.append(list(prog.run_bundled_tests().passed))
    assert passed[0] == passed[1] and any(passed[1])


def _fake(extended=True, inline_constants=0, delegates=(("segment", 64),)):
    """The facts written_layout reads, for the layouts ExecuTorch's serializer cannot write (no exporter makes
    them any more)."""
    raw = SimpleNamespace(header=SimpleNamespace(extended=extended, segment_base_offset=4096 if extended else 0),
                          segments=[SimpleNamespace(offset=4096, size=64)], inline_constant_spans=[],
                          constant_offsets=(), constant_segment=None, inline_delegate_spans=[(512, 64)],
                          inline_constant_bytes=inline_constants)
    dels = [SimpleNamespace(location=loc, size=n, id="XnnpackBackend") for loc, n in delegates]
    return SimpleNamespace(raw=raw, methods={"forward": SimpleNamespace(name="forward",
                                                                        raw=SimpleNamespace(delegates=dels))})


def test_what_cannot_be_written_back_is_named():
    mixed = planning.written_layout(_fake(delegates=(("inline", 64), ("segment", 64))))
    assert mixed.unwritable.startswith("'forward' delegate 0 (XnnpackBackend) keeps its data inline in the "
                                       "flatbuffer and 'forward' delegate 1 (XnnpackBackend) in a segment")
    consts = planning.written_layout(_fake(inline_constants=1234))
    assert "its constants (1,234 bytes) sit inline in the flatbuffer while other data is in segments" in \
        consts.unwritable
    assert planning.written_layout(_fake(extended=False, inline_constants=1234)).unwritable is None
    assert planning.written_layout(_fake()).unwritable is None


def test_segments_changed_says_which(monkeypatch, layouts, tmp_path):
    """If the written segments still differ (an ExecuTorch serializer that lays them out otherwise), the refusal
    names each segment that changed, and nothing is written."""
    import importlib

    rp = importlib.import_module("pte_lab.planning.replan")

    real = rp._serialize
    monkeypatch.setattr(rp, "_serialize", lambda pf, layout: real(pf, rp.WrittenLayout(
        False, True, layout.segment_alignment, layout.constant_alignment, layout.delegate_alignment)))
    r = planning.replan(layouts["inline_delegate"])
    with pytest.raises(planning.PlanningError, match=r"segments changed: 1 segments before, 2 written: segment 1 "
                                                     r"was none, written \S+ \([\d,]+ bytes\)"):
        r.write(tmp_path / "o.pte")
    assert not list(tmp_path.iterdir())
