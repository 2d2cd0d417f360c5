"""What if a finding's change were made (issue 48): the safe softmax's planes removed, predicted at any bound
and checked against re-exports of a look-alike model with the change made; and ``--need N``: whether the
largest bound under a budget runs the app's longest input, and which changes plan it under the budget."""

from __future__ import annotations

import json

import pytest

import pte_lab
from pte_lab.cli import main
from pte_lab.model.plan_edit import PlanEdit
from pte_lab.model.shape_fit import WhatIfError
from pte_lab.planning.at_bound import largest_bound, what_if

torch = pytest.importorskip("torch")

BOUND = 128  # the exported bound of the sequence


class Attn(torch.nn.Module):
    """Multi-head attention through scaled_dot_product_attention: exir decomposes it for portable kernels into
    q * s, k^T * s, bmm, softmax, then the safe softmax (eq -> logical_not -> any -> full_like -> where)."""

    def __init__(self, d=64, heads=8):
        super().__init__()
        self.heads, self.qkv, self.out = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def attend(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.out(self.attend(q, k, v).transpose(1, 2).reshape(b, n, d))


class LikeDecomposition(Attn):
    """The change made as the decomposition writes the rest: q and k^T scaled by sqrt(scale), a plain softmax."""

    def attend(self, q, k, v):
        s = q.shape[-1] ** -0.25
        return torch.softmax((q * s) @ (k.transpose(-2, -1) * s), dim=-1) @ v


class AsPrescribed(Attn):
    """The change as the finding words it: torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v."""

    def attend(self, q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v


def _export(cls, bound: int) -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=bound)
    ep = torch.export.export(cls().eval(), (torch.randn(1, 16, 64),), dynamic_shapes=({1: seq},))
    return to_edge_transform_and_lower(ep).to_executorch().buffer


@pytest.fixture(scope="module")
def attention(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("apply") / "attn.pte"
    path.write_bytes(_export(Attn, BOUND))
    return str(path)


def test_the_attention_finding_carries_its_change_as_the_tensors_it_removes(attention):
    m = pte_lab.open(attention).methods["forward"]
    f = next(f for f in m.findings() if f.kind == "attention_scores")
    edit = f.edit
    assert isinstance(edit, PlanEdit) and edit.change.startswith("write the attention by hand")
    planned = {t.value: t for t in m.planned}
    ops = sorted(planned[v].op for v in edit.removed)
    assert ops == sorted(["aten::eq.Scalar_out", "aten::logical_not.out", "aten::any.out", "aten::logical_not.out",
                          "aten::full_like.out", "aten::where.self_out"])
    (old, new), = edit.read_instead
    assert planned[old].op == "aten::where.self_out" and planned[new].op == "aten::_softmax.out"
    # the other findings carry no such change: a smaller bound is what-if's own --bound
    assert [g.kind for g in m.findings() if g.edit is not None] == ["attention_scores"]


@pytest.mark.parametrize("bound", [BOUND, 64, 100])
def test_the_change_predicted_at_any_bound_plans_what_a_reexport_with_the_change_plans(attention, bound):
    """The prediction (the file's tensors less the safe softmax's, replanned with ExecuTorch's greedy) equals the
    plan of the look-alike model re-exported with a plain softmax at that bound: the arena, the peak, and every
    [L, L] plane. The look-alike's other tensors are not all the file's (its tail permutes differently after
    `@ v` than SDPA's decomposition does), which is why the whole tensor list is not compared: the same bytes."""
    w = what_if(attention, {(0, 1): bound}, apply="attention_scores")
    assert w.applied is not None and w.applied.kinds == ("attention_scores",)
    assert w.planned < w.applied.planned_without
    for cls in (LikeDecomposition, AsPrescribed):
        m = pte_lab.open(_export(cls, bound)).methods["forward"]
        assert [a.planned for a in w.arenas] == [a.size for a in m.arenas], cls.__name__
        assert w.lower_bound == sum(a.peak_bytes for a in m.arenas)
    m = pte_lab.open(_export(LikeDecomposition, bound)).methods["forward"]

    def planes(ts):
        return sorted(t.nbytes for t in ts if len(t.shape) >= 2 and t.shape[-1] == t.shape[-2] == bound)

    assert planes(w.tensors) == planes(m.planned)
    # without the change, the prediction is the file's own plan at its bound
    if bound == BOUND:
        assert w.applied.planned_without == pte_lab.open(attention).methods["forward"].arenas[0].size


def test_the_text_says_it_is_a_prediction_and_what_the_change_takes_out(attention, capsys):
    assert main(["what-if", attention, "--bound", "0:1=64", "--apply", "attention_scores"]) == 0
    out = capsys.readouterr().out
    assert "a prediction with the change of finding attention_scores made" in out
    assert "the file's tensors less the 6 planned tensors it removes" in out and "read in place of" in out
    assert "without the change it plans 410,112 B" in out and "planned (ExecuTorch's greedy" in out
    assert "the change (attention_scores): write the attention by hand with a plain softmax" in out
    assert main(["what-if", attention, "--bound", "0:1=64", "--apply", "attention_scores", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["applied"]["prediction"] is True and doc["applied"]["findings"] == ["attention_scores"]
    assert len(doc["applied"]["removed"]) == 6 and doc["applied"]["planned_without"] == 410_112


def test_need_above_the_largest_bound_says_the_answer_refuses_it_and_which_change_fits(attention, capsys):
    """1 MB fits a bound of 100; the app runs 120: without the safe softmax, 120 fits (checked against a
    re-export of the look-alike at 120)."""
    assert main(["what-if", attention, "--budget", "1MB", "--need", "120", "--planned-only"]) == 1  # refused: a failed check
    out, err = capsys.readouterr()
    assert out.startswith("largest bound of input 0 axis 1 under 1MB = 1,000,000 B (977 KiB): 100 (exported: 128; "
                          "counted: the planned arenas alone)")
    assert "planned bytes only; the method pool, temp pool and heap come on top: `pte-lab sizes FILE`" in out
    assert ("pte-lab: the largest bound under the budget, 100, refuses the longest input you run, 120; the fewest "
            "changes that plan 120 under it: attention_scores") in err
    assert ("that is below the longest input you run, 120: a program exported at Dim(\"seq\", max=100) for input 0, "
            "axis 1 refuses inputs over 100 on that axis") in out
    assert "at 120 exir's greedy plans 1,414,080 B (1.3 MiB), 414,080 B (404 KiB) over the budget" in out
    reexport = pte_lab.open(_export(LikeDecomposition, 120)).methods["forward"].arenas[0].size
    assert f"attention_scores  a re-export (ExecuTorch's greedy)       {reexport:,}  fits" in out
    assert ("the fewest changes that fit: attention_scores, re-exported with Dim(\"seq\", max=120) for input 0, "
            f"axis 1: {reexport:,} B") in out
    assert "fits the budget but refuses inputs over 100; for 120, see the changes above" in out
    b = largest_bound(attention, "1MB", need=120)
    assert b.covers_need is False and b.fitting[0].kinds == ("attention_scores",)
    assert b.fitting[0].planned == reexport
    doc = b.to_dict()
    assert doc["covers_need"] is False and any(o["fits"] and o["findings"] == ["attention_scores"]
                                               for o in doc["options"])


def test_need_within_the_largest_bound_is_said_covered(attention):
    b = largest_bound(attention, 1_000_000, need=90)
    assert b.covers_need is True and b.options == ()
    text = str(b)
    assert "it covers the longest input you run, 90: 10 to spare" in text
    assert "under 1,000,000 B (977 KiB): 100" in text  # bytes given: echoed as bytes


def test_with_the_change_the_budget_search_finds_a_larger_bound(attention):
    plain, changed = largest_bound(attention, "1MB"), largest_bound(attention, "1MB", apply="attention_scores")
    assert changed.bound > plain.bound and changed.at.applied is not None
    assert changed.at.planned <= 1_000_000
    assert changed.next_planned is None or changed.next_planned > 1_000_000


def test_bad_need_and_apply_are_one_line(attention, capsys, program_path):
    assert main(["what-if", attention, "--bound", "0:1=64", "--need", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--need N goes with --budget SIZE" in err[0]
    assert main(["what-if", attention, "--budget", "1MB", "--need", "129"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bound 129 for input 0 axis 1 is above the exported one (128)" in err[0]
    with pytest.raises(WhatIfError, match=r"no dynamic_bound finding whose change .* here: attention_scores"):
        what_if(attention, {(0, 1): 64}, apply="dynamic_bound")
    assert main(["what-if", str(program_path("dynamic")), "--bound", "0:0=8", "--apply", "attention_scores"]) == 2
    err = [x for x in capsys.readouterr().err.strip().splitlines() if not x.startswith("pte-lab: [")]
    assert len(err) == 1 and "(the findings that carry one here: none" in err[0]


def test_the_peak_says_where_it_moves_without_the_safe_softmax_and_that_causes_overlap(attention):
    s = pte_lab.open(attention).methods["forward"].peak
    text = repr(s)
    safe = next(c for c in s.causes if c.kind == "safe_softmax")
    assert safe.after is not None and safe.after.at != s.at and safe.after.at_target == "aten::_softmax.out"
    assert safe.after.peak_bytes == s.peak_bytes - safe.recovers
    assert "without them the peak falls from 1.5 MiB by 513 KiB (33%) to 1.0 MiB" in text
    assert f"the peak moves to instruction {safe.after.at} of {s.n_instructions} (aten::_softmax.out), where " in text
    assert "- these causes overlap: attention scores, safe softmax, dynamic shapes count some of the same " in text
    assert "do not add up" in text


def test_need_with_no_change_that_fits_says_so(program_path, capsys):
    """The dynamic example (a linear layer) has no finding whose change pte_lab can make: nothing fits 30 in 1 kB."""
    assert main(["what-if", str(program_path("dynamic")), "--bound", "0:0", "--budget", "1kB", "--need", "30",
                 "--planned-only"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("largest bound of input 0 axis 0 under 1kB = 1,000 B: 5 (exported: 32;")
    assert "refuses inputs over 5 on that axis" in out and "none of these fits at 30" in out
    assert "no finding of this method carries a change pte_lab can make" in out
    assert "no change pte_lab predicts plans 30 under it" in out


def test_the_budget_is_the_apps_whole_memory_pools_and_the_loaders_heap_beside_the_plan(attention, capsys,
                                                                                        monkeypatch, tmp_path):
    """An app pays the method and temp pools and its loader's heap beside the planned arenas: the answer gives the
    plan the budget less them (the file's figures; once the program is sized, the sizing's), says which, and the
    bound it gives fits the whole where the planned-only answer would not."""
    import os

    from pte_lab.runtime.sizing import SizingError
    from pte_lab.planning import at_bound

    plain = largest_bound(attention, "1MB")

    def cannot_run(*args, **kwargs):
        raise SizingError("forward: cannot run here")

    # a method that cannot be sized here: the file's figures, the heap a floor
    monkeypatch.setattr(at_bound, "sizes", cannot_run)
    assert main(["what-if", attention, "--budget", "1MB"]) == 0
    out = capsys.readouterr().out
    b = largest_bound(attention, "1MB", whole=True)
    y = b.beyond
    assert [p.what.split(" (")[0].split(":")[0] for p in y.parts] == ["method pool", "temp pool", "heap"]
    assert [str(p.basis) for p in y.parts] == ["modelled", "modelled", "file"] and y.kept is None
    assert y.parts[2].bytes == os.path.getsize(attention)  # FileDataLoader's copy of the program
    assert b.at.planned + y.total <= 1_000_000 < b.next_planned + y.total
    assert b.bound < plain.bound  # the planned-only answer overruns the budget once the pools and heap are on
    assert out.startswith(f"largest bound of input 0 axis 1 under 1MB = 1,000,000 B (977 KiB): {b.bound} (exported: "
                          "128; counted: the planned arenas, the pools and the loader's heap together)")
    assert "beside the planned arenas, an app with Module's default LoadMode File (FileDataLoader" in out
    assert f"= {y.total:,} B" in out and f"the planned arenas get the rest of the budget, {1_000_000 - y.total:,} B" in out
    # the sizing was tried and could not be made: said, and why (not "pte-lab sizes FILE measures them")
    assert "not counted: what kernels malloc at run time beyond these, and the app's own memory: no sizing of these " \
           "bytes could be made here (forward: cannot run here)" in out
    assert y.unsized == "forward: cannot run here"
    assert b.to_dict()["beyond_plan"]["total"] == y.total and b.to_dict()["plan_budget"] == 1_000_000 - y.total
    assert b.to_dict()["beyond_plan"]["unsized"] == "forward: cannot run here"

    # nothing kept and the method runs: the answer sizes it first (and keeps that), so that the same question gets
    # the same answer whether or not `pte-lab sizes` ran before it
    monkeypatch.undo()
    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    heard = []
    now = largest_bound(attention, "1MB", whole=True, cache=True, progress=heard.append)
    assert now.beyond.measured and now.beyond.kept is None and not now.beyond.lower
    assert "a sizing of these bytes made now for this answer" in str(now) and "kept: the next question" in str(now)
    # what that first ask costs is said before it starts: a sizing of every method, as `pte-lab sizes FILE` makes
    sizing = heard.index("no sizing of these bytes is kept: sizing every method now, as `pte-lab sizes FILE` does, "
                         "for the app's pools and heap (once: it is kept)")
    assert "starting an isolated worker" in heard[sizing + 1:]
    # --no-cache: made now, and not kept
    unkept = largest_bound(attention, "1MB", whole=True, cache=False)
    assert unkept.beyond.measured and "; not kept: --no-cache)" in str(unkept)
    # sized (kept): the measured pools replace the file's figures, and FileDataLoader's heap peak, measured as the
    # sizing measures it, at the bound answered (the sizing's at the exported bound is where the search starts)
    m = pte_lab.sizes(attention, cache=True).methods["forward"]
    sized = largest_bound(attention, "1MB", whole=True, cache=True)
    assert [p.bytes for p in sized.beyond.parts[:2]] == [m.method_allocator, m.temp_allocator]
    assert sized.heap.measured[0] == (128, m.file_heap_peak)
    assert sized.beyond.heap_bound == sized.heap.basis == sized.bound
    assert sized.beyond.heap.bytes == sized.heap.at(sized.bound)
    assert sized.beyond.parts[0].bytes == y.parts[0].bytes  # the file's method pool is the one measured
    assert sized.beyond.kept is not None and not sized.beyond.lower
    assert (sized.bound, sized.beyond.parts[:2]) == (now.bound, now.beyond.parts[:2])  # the same answer
    assert sized.at.planned + sized.beyond.total <= 1_000_000
    assert "from a kept sizing of these bytes" in str(sized) and "not counted" not in str(sized)


def test_the_pages_say_what_the_budget_counts_and_what_its_first_ask_costs():
    """The help, the what-if guide and the CLI page say what --budget does: a kept sizing of these bytes, else one
    made now (every method, as `pte-lab sizes FILE`); the guide's example is the first ask's output, and its
    sections agree with each other and with the tool that the heap (the loader's copy, what kernels malloc) is
    counted."""
    import re
    from pathlib import Path

    from pte_lab.cli import build_parser

    docs = Path(__file__).resolve().parents[1] / "docs"
    flat = lambda text: " ".join(text.split())  # noqa: E731 - a page's prose, its line breaks gone
    options = {a.option_strings[0]: a.help for a in build_parser().commands["what-if"]._actions if a.option_strings}
    assert "a kept one, else one made now (the first ask sizes every method as `pte-lab sizes FILE` does" \
        in options["--budget"]
    assert "nothing is sized" in options["--planned-only"]
    guide = flat((docs / "guides" / "what-if.md").read_text())
    cli = flat((docs / "cli.md").read_text())
    cli_what_if = cli[cli.index("## `what-if`"):cli.index("## Sizes a file declares")]
    for page in (guide, cli_what_if):
        assert "sizes every method" in page and "`pte-lab sizes FILE`" in page
    assert "once `pte-lab sizes FILE` has run" not in guide
    # the example as the tool prints it on a first ask (tool's words: pte_lab.views.what_if)
    assert "needs, from a sizing of these bytes made now for this answer (the pools, at the exported bound:" in guide
    assert "the heap measured at each bound tried" in guide
    covers = guide[guide.index("## What the answer covers"):guide.index("## Static exports")]
    assert not re.search(r"budget answer does not count|Nor does it count the program", covers)
    assert "the budget answer on the command line counts" in covers.lower()
    assert "the loader's copy of the program and what kernels and delegates malloc" in covers
