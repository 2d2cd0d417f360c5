"""Findings that prescribe: each names the bytes at stake and the change that recovers them, on real programs;
and a program's own stack traces (``emit_stacktrace=True``) name the source lines without an ETRecord."""

from __future__ import annotations

import html
import os

import pytest

import pte_lab
from pte_lab.cli import main
from pte_lab.errors import PteFormatError
from pte_lab.model.findings import Kind, duplicate_blob_findings
from pte_lab.model.layout import LayoutRow
from pte_lab.views.text import pte_text

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

HERE = os.path.abspath(__file__)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = torch.cumsum(self.fc1(x), dim=-1)  # CUMSUM-LINE (XNNPACK has no cumsum: the graph is split here)
        return self.fc2(torch.relu(h))


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


CUMSUM_LINE = next(i for i, line in enumerate(open(HERE), 1) if "# CUMSUM-LINE" in line)


def _export(dirname, name: str, xnnpack: bool, **config):
    """TwoBlocks exported (XNNPACK or portable) with an ETRecord and ``ExecutorchBackendConfig(**config)``."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    ep = torch.export.export(TwoBlocks().eval(), (torch.randn(4, 16),))
    parts = []
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        parts = [XnnpackPartitioner()]
    program = to_edge_transform_and_lower(ep, partitioner=parts, generate_etrecord=True).to_executorch(
        ExecutorchBackendConfig(**config))
    pte, etr = dirname / f"{name}.pte", dirname / f"{name}.etrecord"
    pte.write_bytes(program.buffer)
    program.get_etrecord().save(str(etr))
    return str(pte), str(etr)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("split"), "split", xnnpack=True)


def _one(findings, kind):
    (f,) = [f for f in findings if f.kind == kind]
    return f


def test_an_arena_above_its_bound_says_what_replan_recovers(program_path, capsys):
    from pte_lab.planning import replan

    path = program_path("transformer")
    pte = pte_lab.open(path)
    m = pte.methods["forward"]
    f = _one(m.findings(), Kind.ARENA_ABOVE_BOUND)
    d = f.details
    (plan,) = replan(str(path)).arenas
    # the bound is pte_lab's planner's: replanning reaches it and recovers what the finding says is at stake
    assert (d.size, d.lower_bound) == (plan.before, plan.lower_bound)
    assert f.at_stake == d.size - d.lower_bound == plan.saved > 0
    assert "pte-lab replan" in f.change and f.change in f.message
    assert f in pte.findings() and str(f) in repr(m) and "pte-lab replan" in m._repr_html_()
    assert main(["inspect", str(path)]) == 0
    assert "arena 1 plans 100 KiB where its tensors need 88.0 KiB" in capsys.readouterr().out


def test_a_prescription_is_its_claim_then_its_change(program_path):
    """The claim and the change are fields of their own: the message joins them, the HTML sets the change in bold
    after the claim (never found by searching the message for it)."""
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    f = _one(m.findings(), Kind.ARENA_ABOVE_BOUND)
    assert f.message == f"{f.claim}; {f.change}" and f.change not in f.claim and f.claim.endswith("at stake")
    assert f"{html.escape(f.claim)}; <b>{html.escape(f.change)}</b>" in m._repr_html_()
    # a finding that prescribes nothing is its claim alone
    plain = [g for g in pte_lab.open(program_path("unplanned_io")).findings() if g.change is None]
    assert plain and all(g.message == g.claim for g in plain)


def test_an_arena_at_its_bound_has_no_finding(program_path):
    assert not [f for f in pte_lab.open(program_path("portable")).findings() if f.kind == Kind.ARENA_ABOVE_BOUND]


@pytest.mark.parametrize("name, axis, bound", [("dynamic", 0, 32), ("llm", 1, 31)])
def test_a_dynamic_input_driving_the_arena_is_named_with_its_axis_and_bound(program_path, name, axis, bound):
    m = pte_lab.open(program_path(name)).methods["forward"]
    f = _one(m.findings(), Kind.DYNAMIC_BOUND)
    d = f.details
    assert d.inputs[0][0] == 0 and d.axes == (axis,) and d.inputs[0][1][axis] == bound
    assert f"input 0 {list(d.inputs[0][1])}, axis {axis} at its bound {bound}" in f.message
    assert 2 * f.at_stake >= d.peak_bytes == m.peak.peak_bytes
    assert "Dim(" in f.change
    # what scales with the bound is not all recoverable: the figure at a bound is what-if's
    assert "not all recoverable" in f.message
    assert f"pte-lab what-if FILE --bound 0:{axis} --budget SIZE" in f.change
    # the JSON document carries the bytes at stake and the change beside the message
    (rec,) = [r for r in pte_lab.open(program_path(name)).to_dict()["methods"]["forward"]["findings"]
              if r["kind"] == "dynamic_bound"]
    assert (rec["at_stake"], rec["change"], rec["message"]) == (f.at_stake, f.change, f.message)


def test_operators_left_between_delegates_are_named_with_their_module_and_line(split):
    pte_path, etr = split
    m = pte_lab.open(pte_path, etrecord=etr).methods["forward"]
    f = _one(m.findings(), Kind.DELEGATE_SPLIT)
    d = f.details
    assert d.backend == "XnnpackBackend" and d.calls == 3
    assert [op for op, _ in d.operators] == ["aten::cumsum.out"] and len(d.operators[0][1]) == 2
    (where,) = d.sources  # one operator, one line, called from two modules
    code = open(HERE).read().splitlines()[CUMSUM_LINE - 1].strip()
    assert where == f"aten::cumsum.out in blocks.0 (Block), blocks.1 (Block) at {HERE}:{CUMSUM_LINE} {code}"
    assert where in f.message
    assert 0 < f.at_stake <= m.peak.peak_bytes
    # inside one delegate call those tensors still need XNNPACK's heap: the plan shrinks, the process by less
    assert "leave the plan, but not the process" in f.change and "`pte-lab sizes FILE`" in f.change
    # the summary says the delegate's own memory is outside the plan, and where to measure it
    p = pte_lab.open(pte_path)
    for text in (repr(p), html.unescape(p._repr_html_())):
        assert "XNNPACK's packed weights and workspaces" in text and "`pte-lab sizes FILE` measures them" in text
    # without the ETRecord the operators are still named
    bare = _one(pte_lab.open(pte_path).methods["forward"].findings(), Kind.DELEGATE_SPLIT)
    assert bare.details.operators == d.operators and bare.details.sources == ()


def test_inspect_lists_a_method_s_info_findings_once(program_path, capsys):
    from pte_lab.cli import main

    assert main(["inspect", str(program_path("dynamic"))]) == 0
    out = capsys.readouterr().out
    assert out.count("info: [forward] input 0 [32, 16], axis 0 at its bound 32") == 1
    assert "outside the planned arenas" not in out  # no delegate: nothing said about one


def test_a_single_delegate_call_is_not_split(program_path):
    m = pte_lab.open(program_path("xnnpack")).methods["forward"]
    assert len([i for i in m.instructions if i.kind == "DelegateCall"]) == 1
    assert not [f for f in m.findings() if f.kind == Kind.DELEGATE_SPLIT]


def test_inline_delegate_data_says_to_export_with_segments(tmp_path, split):
    pte_path, _ = _export(tmp_path, "inline", xnnpack=True, extract_delegate_segments=False)
    pte = pte_lab.open(pte_path)
    f = _one(pte.findings(), Kind.INLINE_DELEGATE_DATA)
    inline = [d for m in pte.methods.values() for d in m.delegates]
    assert all(d.location == "inline" for d in inline) and f.at_stake == sum(d.size for d in inline)
    assert f.details.flatbuffer == pte.flatbuffer_size and "extract_delegate_segments=True" in f.change
    # the summary (a notebook's repr) says what the finding sees and where its change is; inspect says it all
    assert f.claim in repr(pte) and f.change not in repr(pte) and "pte.findings()" in repr(pte)
    assert str(f) in pte_text(pte, methods_below=True)
    # the same model with segments (the default) has none
    assert not [f for f in pte_lab.open(split[0]).findings() if f.kind == Kind.INLINE_DELEGATE_DATA]


def _row(region, name, nbytes, dup=None, owner="forward"):
    return LayoutRow(region, name, owner, 0, nbytes, "ab" * 8, dup)


def test_duplicate_blobs_are_grouped_and_tiny_ones_are_noise(program_path):
    # a 128 B bias stored twice in an 80 KiB file is not worth a finding
    assert pte_lab.open(program_path("xnnpack")).duplicate_blobs() == []
    rows = [_row("flatbuffer", "program tables", 100_000, owner=""),
            _row("constant", "forward v3 float32[256, 256]", 262_144),
            _row("named data", "w_key", 262_144, "forward v3 float32[256, 256]"),
            _row("constant", "forward v0 int64[] (+103 more)", 16)]
    rows += [_row("constant", f"forward v{k} int64[]", 16, "forward v0 int64[] (+103 more)") for k in range(10, 13)]
    (f,) = duplicate_blob_findings(rows)
    assert f.at_stake == f.details.bytes == 262_144 + 3 * 16
    assert f.details.groups[0] == ("forward v3 float32[256, 256]", "constant", 262_144, 1)
    assert "forward v3 float32[256, 256] (constant, 256 KiB) stored again as w_key (named data" in f.message
    assert "and 3 smaller copies (48 B)" in f.message and "int64[]" not in f.message
    assert "partitioner" in f.change
    assert duplicate_blob_findings(rows[:1] + rows[3:]) == []  # only the tiny copies: noise


def test_stack_traces_in_the_program_name_source_lines_without_an_etrecord(tmp_path):
    pte_path, etr = _export(tmp_path, "stack", xnnpack=False, emit_stacktrace=True)
    m = pte_lab.open(pte_path).methods["forward"]
    traces = m.raw.stacktraces
    assert traces is not None and len(traces) == m.n_instructions
    # the frames ExecuTorch's own deserializer reads
    from executorch.exir._serialize._program import deserialize_pte_binary

    theirs = deserialize_pte_binary(open(pte_path, "rb").read())
    theirs = getattr(theirs, "program", theirs).execution_plan[0].chains[0].stacktrace
    assert [[(f.file, f.line, f.function, f.code) for f in t] for t in traces] == [
        [(f.filename, f.lineno, f.name, f.context) for f in fl.items] for fl in theirs]
    cumsum = [t for t in m.planned if t.op == "aten::cumsum.out"]
    assert len(cumsum) == 2
    for t in cumsum:
        s = m.source_of(t.value)
        assert (s.source.file, s.source.line) == (HERE, CUMSUM_LINE) and s.module is None
    assert m.tensors.source.notna().sum() == sum(1 for s in m.sources if s.source is not None) > 0
    # with the ETRecord, its nodes and modules are used (and agree on the line)
    with_etr = pte_lab.open(pte_path, etrecord=etr).methods["forward"]
    assert with_etr.source_of(cumsum[0].value).source.line == CUMSUM_LINE
    assert with_etr.source_of(cumsum[0].value).module == "blocks.0"
    # a program exported without them has none
    plain, _ = _export(tmp_path, "plain", xnnpack=False)
    assert pte_lab.open(plain).methods["forward"].sources is None
    # a frame's file name claiming more bytes than the file has is a named error, not a crash or a guess
    data = bytearray(open(pte_path, "rb").read())
    at = data.find(HERE.encode())
    data[at - 4:at] = (0x7FFFFFF0).to_bytes(4, "little")
    with pytest.raises(PteFormatError, match=r"stacktrace\[\d+\]\.items\[\d+\]\.filename"):
        pte_lab.open(bytes(data)).methods["forward"].findings()


def test_finding_copies_hashes_only_blobs_that_share_a_size(program_path):
    """A blob of a size no other blob has is no copy: duplicate_blobs() hashes the others only, and finds the
    same copies as hashing every blob (a 40 MB LLM's inspect hashed all of its weights)."""
    from collections import Counter

    from pte_lab.model.layout import DUPLICATES, file_regions
    from tests.crafting import long_offsets

    unique = []
    for pte in (pte_lab.open(program_path("transformer")), pte_lab.open(long_offsets(600))):
        full, some = file_regions(pte, True), file_regions(pte, DUPLICATES)
        assert list(some.duplicate_of) == list(full.duplicate_of)
        spans = {(r.offset, r.bytes) for r in full if r.sha256 is not None}
        shared = Counter(n for _, n in spans)
        assert {(r.offset, r.bytes) for r in some if r.sha256 is not None} == {s for s in spans if shared[s[1]] > 1}
        unique.append(sum(shared[n] == 1 for _, n in spans))
    assert unique[0] > 0  # the transformer has a blob of its own size: not hashed
    assert any(r.duplicate_of for r in file_regions(pte, DUPLICATES))  # the crafted file: 349 copies
