"""The peak, explained: which tensors make it, in the author's terms, and the export choice behind each part,
with the bytes at stake; in the text report, the HTML summary and ``pte-lab inspect``."""

from __future__ import annotations

import pytest

import pte_lab
from pte_lab.cli import main
from pte_lab.model.peak import CAUSES, explain_peak

torch = pytest.importorskip("torch")

SEQ = 128  # the dynamic sequence's bound


class Attn(torch.nn.Module):
    """Multi-head attention through scaled_dot_product_attention, which exir decomposes for portable kernels
    (softmax, then the 'safe softmax' eq -> logical_not -> any -> full_like -> where)."""

    def __init__(self, d=64, heads=8):
        super().__init__()
        self.heads, self.qkv, self.out = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()

    def forward(self, x):
        return self.attn(x)


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=SEQ)
    ep = torch.export.export(Model().eval(), (torch.randn(1, 16, 64),), dynamic_shapes=({1: seq},))
    program = to_edge_transform_and_lower(ep, generate_etrecord=True).to_executorch()
    d = tmp_path_factory.mktemp("attention")
    pte, etr = d / "attn.pte", d / "attn.etrecord"
    pte.write_bytes(program.buffer)
    program.get_etrecord().save(str(etr))
    return str(pte), str(etr)


def test_a_decomposed_attention_at_its_bound_is_named_with_the_bytes_at_stake(attention):
    pte, etr = attention
    m = pte_lab.open(pte, etrecord=etr).methods["forward"]
    s = m.peak
    scores = SEQ * SEQ * 8 * 4  # one float32[1, 8, SEQ, SEQ]
    top = s.groups[0]
    assert (top.dtype, top.shape, top.nbytes) == ("float32", (1, 8, SEQ, SEQ), scores)
    # the softmax output and the tensors of its 'safe softmax' are alive together at the peak
    assert len(top.values) >= 2 and any("softmax" in op for op in top.ops)
    assert top.modules == (("attn", "Attn"),)
    assert s.peak_bytes == m.arena(s.mem_id).peak_bytes and top.total <= s.peak_bytes
    kinds = {c.kind: c for c in s.causes}
    assert set(kinds) == {"attention_scores", "safe_softmax", "dynamic_bound"}
    assert kinds["attention_scores"].nbytes == top.total
    assert s.dynamic_inputs == ((0, (1, SEQ, 64)),)
    # the words: the shapes, the module, and the change that recovers the bytes
    text = repr(m)
    assert f"float32[1, 8, {SEQ}, {SEQ}]" in text and "in attn (Attn)" in text
    assert "model.use_sdpa_with_kv_cache=true" in text and "torch.export.Dim" in text
    assert "use_sdpa_with_kv_cache" in m._repr_html_()


def test_the_bytes_follow_the_bound(attention, tmp_path):
    """Exported at half the bound, the scores group is a quarter of the bytes (L x L)."""
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    half = torch.export.Dim("seq", min=2, max=SEQ // 2)
    ep = torch.export.export(Model().eval(), (torch.randn(1, 16, 64),), dynamic_shapes=({1: half},))
    small = pte_lab.open(to_edge_transform_and_lower(ep).to_executorch().buffer).methods["forward"].peak
    big = pte_lab.open(attention[0]).methods["forward"].peak
    assert small.groups[0].nbytes * 4 == big.groups[0].nbytes


class ManualAttn(Attn):
    """The same attention written by hand: softmax(q k^T / sqrt(d)) v."""

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        return self.out((scores @ v).transpose(1, 2).reshape(b, n, d))


def _export_attn(attn: torch.nn.Module, xnnpack: bool = False):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=SEQ)
    ep = torch.export.export(attn.eval(), (torch.randn(1, 16, 64),), dynamic_shapes=({1: seq},))
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()] if xnnpack else [])
    return pte_lab.open(program.to_executorch().buffer).methods["forward"]


@pytest.fixture(scope="module")
def hand_written():
    return _export_attn(ManualAttn())


def test_a_hand_written_attention_is_named_too_when_the_softmax_is_not_alive_at_the_peak(hand_written):
    m = hand_written
    kinds = {c.kind: c for c in m.peak.causes}
    assert "attention_scores" in kinds and "safe_softmax" not in kinds
    assert kinds["attention_scores"].nbytes >= SEQ * SEQ * 8 * 4
    assert "torch.ops.llama.custom_sdpa" in repr(m)


def test_the_safe_softmax_planes_are_told_apart_and_what_removing_them_saves_is_what_a_plain_softmax_plans(
        attention, hand_written):
    """scaled_dot_product_attention's decomposition adds where(mask, s, full_like(s, 0)) after the softmax: two
    more [L, L] planes. The peak without them, replayed from the lifetimes, is the hand-written export's."""
    m = pte_lab.open(attention[0]).methods["forward"]
    s = m.peak
    safe = next(c for c in s.causes if c.kind == "safe_softmax")
    plane = SEQ * SEQ * 8 * 4
    assert safe.times == 1 and safe.nbytes >= 2 * plane and {"aten::full_like.out", "aten::where.self_out"} <= set(
        safe.names)
    assert s.peak_bytes - safe.recovers == hand_written.peak.peak_bytes
    text = repr(s)  # plain Python prints the paragraph, not a dataclass dump
    assert text.startswith("Peak: ") and "- safe softmax:" in text and "2 more float32[1, 8, 128, 128] planes" in text
    assert "without them the peak falls from " in text and "the peak moves to instruction" in text
    assert "torch.softmax(q @ k.transpose(-2, -1)" in text
    # the finding carries the same bytes and change
    f = next(f for f in m.findings() if f.kind == "attention_scores")
    assert f.at_stake == safe.recovers and f.change.startswith("write the attention by hand with a plain softmax")
    assert f.details.safe_softmaxes == 1 and f.details.plane_bytes == plane
    h = next(f for f in hand_written.findings() if f.kind == "attention_scores")
    assert h.details.safe_softmaxes == 0 and "custom_sdpa" in h.change


def test_with_xnnpack_the_softmax_inside_the_delegate_still_names_the_score_planes():
    """XNNPACK runs the softmax; the safe softmax's full_like and where stay outside it, on planned planes."""
    m = _export_attn(Model(), xnnpack=True)
    kinds = {c.kind: c for c in m.peak.causes}
    assert {"attention_scores", "safe_softmax"} <= set(kinds)
    assert kinds["safe_softmax"].recovers > 0
    assert "its softmax inside XnnpackBackend" in repr(m.peak)


@pytest.mark.parametrize("name, cause", [("portable", "weight_copies"), ("kv_cache", "state_fp32"),
                                         ("gpt", "outside_delegate"), ("dynamic", "dynamic_bound")])
def test_each_cause_on_a_program_that_has_it(name, cause, program_path):
    m = pte_lab.open(program_path(name)).methods["forward"]
    kinds = {c.kind: c for c in m.peak.causes}
    assert cause in kinds and 0 < kinds[cause].nbytes <= m.peak.peak_bytes
    assert set(kinds) <= set(CAUSES)


def test_what_no_delegate_can_take_is_not_blamed_on_the_delegate(program_path):
    """Device copies the runtime inserts are not 'operators outside the delegate'."""
    m = pte_lab.open(program_path("three_methods")).methods["on_device"]
    assert "outside_delegate" not in {c.kind for c in m.peak.causes}


def test_a_method_with_nothing_alive_has_no_peak(program_path):
    p = pte_lab.open(program_path("llm"))
    assert p.methods["get_max_seq_len"].peak is None
    assert explain_peak(p.methods["forward"]) is not None


def test_inspect_prints_the_peak_paragraph(attention, capsys):
    assert main(["inspect", attention[0], "--etrecord", attention[1]]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("Peak:"))
    assert f"float32[1, 8, {SEQ}, {SEQ}]" in line and "attn (Attn)" in line
    assert "- attention scores:" in out
