"""`pte-lab replan` and an app that executes again without setting its input: a replan that puts another
tensor over a planned input says so (and whether the original plan did too), and --keep-io keeps planned
inputs and outputs apart."""

from __future__ import annotations

from pathlib import Path

import pte_lab
from pte_lab.cli import main as cli_main
from pte_lab.planning import replan

FOCUS = Path(__file__).parent / "data" / "apple" / "focus_xnnpack.pte"


def _over_input(m, offsets=None):
    """Values whose bytes overlap a planned input's (aliases of it left out)."""
    offsets = offsets or {}
    ts = [t for t in m.planned if t.first is not None and t.nbytes]
    out = set()
    for s in m.inputs:
        if s.kind != "Tensor" or not s.planned:
            continue
        t = next(t for t in ts if t.value == s.value)
        lo = offsets.get(t.value, t.offset)
        for u in ts:
            at = offsets.get(u.value, u.offset)
            if u.mem_id == t.mem_id and m.storage_of(u.value) != m.storage_of(t.value) and at < lo + t.nbytes \
                    and lo < at + u.nbytes:
                out.add(u.value)
    return out


def test_a_replan_that_puts_a_tensor_over_an_input_says_so():
    r = replan(FOCUS, smaller_only=False)
    m = r.original.methods["forward"]
    (a,) = r.arenas
    over = _over_input(m, a.offsets)
    assert over  # best_fit reuses the input's bytes once the slices have read it
    (x,) = r.input_reuses()
    assert (x.method, x.position, x.value) == ("forward", 0, m.inputs[0].value) and x.over in over
    assert x.original_too == bool(_over_input(m))
    from pte_lab.views.text import replan_text

    text = replan_text(r)
    assert "'forward' input 0" in text and "executes again without setting the input" in text
    assert "--keep-io" in text


def test_keep_io_keeps_inputs_and_outputs_apart(tmp_path, capsys):
    r = replan(FOCUS, keep_io=True)
    m = r.original.methods["forward"]
    (a,) = r.arenas
    assert not a.kept and r.input_reuses() == () and not _over_input(m, a.offsets)
    io = [s.value for s in (*m.inputs, *m.outputs)]
    spans = {t.value: (a.offsets[t.value], a.offsets[t.value] + t.nbytes) for t in m.planned if t.value in io}
    (i0, i1), (o0, o1) = spans[io[0]], spans[io[1]]
    assert o1 <= i0 or i1 <= o0  # the output is not over the input
    out = tmp_path / "kept_io.pte"
    assert cli_main(["replan", str(FOCUS), str(out), "--keep-io"]) == 0
    said = capsys.readouterr().out
    assert "kept apart" in said and "executes again without setting" not in said
    written = pte_lab.open(out).methods["forward"]
    assert not _over_input(written) and not written.validate()
