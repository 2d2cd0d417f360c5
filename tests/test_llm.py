"""LLM programs from ExecuTorch's own export flow: state kept between calls, custom operators, many calls.

Two small llamas exported with ``export_llm`` (see tests/conftest.py): KV caches updated by
``llama::update_cache`` (XNNPACK, 8da4w) and by ``index_put_`` (portable); both use grouped-query
attention (4 query heads over 2 KV heads). And a program whose prefill and decode share one cache.
"""

from __future__ import annotations

import warnings

import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import planning
from pte_lab.runtime import OperatorLibraryWarning, call_sequence

LAYERS, KV_HEADS, HEAD_DIM, SEQ = 2, 2, 64 // 4, 32
CACHE_BYTES = SEQ * KV_HEADS * HEAD_DIM * 4  # one float32 K or V cache of one layer


def _state(m):
    return [t for t in m.planned if t.role == "mutable_buffer" and m.storage_of(t.value) == t.value]


@pytest.mark.parametrize("name", ["llm", "llm_index_put"])
def test_kv_caches_are_state_over_the_whole_method(program_path, name):
    m = pte_lab.open(program_path(name)).methods["forward"]
    caches = _state(m)
    assert len(caches) == 2 * LAYERS  # a K and a V cache per layer, nothing else
    assert {t.nbytes for t in caches} == {CACHE_BYTES}  # sized by the KV heads, not the query heads
    n = m.n_instructions
    assert all((t.first, t.last) == (-1, n) for t in caches)
    # what ExecuTorch's planner decided agrees: no other tensor ever uses a cache's bytes
    for c in caches:
        others = [t for t in m.planned if t.mem_id == c.mem_id and m.storage_of(t.value) != c.value
                  and t.offset < c.offset + c.nbytes and c.offset < t.offset + t.nbytes and t.nbytes]
        assert others == [], f"v{c.value} shares bytes with {[t.value for t in others]}"
    a = m.arena(caches[0].mem_id)
    assert a.peak_bytes >= sum(t.nbytes for t in caches)  # the caches are in the lower bound
    assert m.conflicts == [] and a.size_over_peak <= 1.05


def test_metadata_methods_share_nothing(program_path):
    pte = pte_lab.open(program_path("llm"))
    assert {"get_max_seq_len", "use_kv_cache"} <= set(pte.methods)
    assert pte.methods["get_max_seq_len"].n_arenas == 0
    assert "shared_arenas" not in {w.kind for w in pte.warnings()}  # only forward plans anything


def test_custom_operators_are_registered_and_prefill_then_decode_runs(program_path):
    path = program_path("llm")
    m = pte_lab.open(path).methods["forward"]
    assert {"llama::update_cache.out", "llama::custom_sdpa.out"} <= set(m.operators)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = pte_lab.load(path)
        f = prog.load_method("forward")
    assert any(issubclass(w.category, OperatorLibraryWarning) and "custom_ops" in str(w.message) for w in caught)
    calls = call_sequence(m, 3)
    assert [c[0].shape[1] for c in calls] == [8, 1, 1] and [int(c[1]) for c in calls] == [0, 8, 9]
    outs = [f(*c)[0] for c in calls]
    assert all(torch.isfinite(o).all() for o in outs)
    # the caches carry state: the same token at the same position reads what earlier calls wrote
    prog2 = pte_lab.load(path)
    g = prog2.load_method("forward")
    g(torch.tensor([[3, 1, 2, 0, 1, 2, 3, 3]]), torch.tensor([0]))  # a different prefill
    assert not torch.equal(g(*calls[1])[0], outs[1])
    prog.close()
    prog2.close()


def test_replanning_an_llm_keeps_its_state_and_verifies_over_decode_steps(program_path, tmp_path):
    src = program_path("llm")
    r = planning.replan(src, "best_fit")
    (a,) = [x for x in r.arenas if x.method == "forward"]
    state_bytes = sum(t.nbytes for t in _state(r.original.methods["forward"]))
    assert a.lower_bound >= state_bytes and a.after <= 1.05 * a.lower_bound
    out = r.write(tmp_path / "llm.replanned.pte")
    results = {v.method: v for v in planning.verify(src, out, runs=4)}
    assert results["forward"].identical and results["forward"].runs == 4


def test_a_plan_that_clobbers_a_cache_fails_verification(program_path, tmp_path):
    """Put a short-lived tensor on a layer-0 cache after layer 0 read it: the first call is still right,
    the decode steps are not. Verification over many calls must see it (through the public API, as
    notebook 05 does)."""
    src = program_path("llm")
    r = planning.replan(src, "best_fit")  # the original plan kept: then one tensor is moved onto a cache
    m = r.original.methods["forward"]
    first_cache = min(_state(m), key=lambda t: min(i.index for i in m.instructions if t.value in i.args))
    reader = max(i.index for i in m.instructions if first_cache.value in i.args)
    late = next(t for t in m.planned if t.role == "intermediate" and t.first > reader + 2
                and 0 < t.nbytes <= first_cache.nbytes and t.mem_id == first_cache.mem_id)
    (a,) = [x for x in r.arenas if x.method == "forward"]
    a.offsets[late.value] = a.offsets[first_cache.value]
    assert r.conflicts()  # pte_lab's own validator sees the clobbering ...
    with pytest.raises(planning.PlanningError, match="overlapping live tensor"):
        r.write(tmp_path / "refused.pte")  # ... and refuses to write it
    out = r.write(tmp_path / "clobbered.pte", allow_overlaps=True)  # unless told to, for the experiment
    (v,) = [x for x in planning.verify(src, out, runs=3) if x.method == "forward"]
    assert not v.identical and v.failed_call == 2  # the prefill was right; the first decode step was not


def test_a_replan_that_moves_every_cache_still_computes_the_same_over_decode_steps(program_path, tmp_path):
    src = program_path("llm")
    r = planning.replan(src, "best_fit", smaller_only=False)  # the same size, other offsets
    (a,) = [x for x in r.arenas if x.method == "forward"]
    m = r.original.methods["forward"]
    assert not a.kept and set(a.moved(m)) >= {t.value for t in _state(m)}  # every cache moves
    out = r.write(tmp_path / "moved.pte")
    moved = pte_lab.open(out).methods["forward"]
    assert [t.offset for t in _state(moved)] != [t.offset for t in _state(m)]  # in the file, too
    results = {v.method: v for v in planning.verify(src, out, runs=4)}
    assert results["forward"].identical and results["forward"].failed_call is None


def test_prefill_and_decode_share_their_cache(program_path):
    path = program_path("shared_state")
    pte = pte_lab.open(path)
    found = {w.kind: w for w in pte.warnings()}
    shared = found["shared_state"]
    assert shared.details.mem_id == 2 and set(shared.details.methods) == {"prefill", "decode"}
    assert shared.details.names == ("k_cache",)
    for m in pte.methods.values():
        (t,) = _state(m)
        assert (t.name, t.mem_id, t.offset, t.first, t.last) == ("k_cache", 2, 0, -1, m.n_instructions)
    assert "k_cache" in set(pte.methods["decode"].tensors.name.dropna())
    # the runtime really shares it: decode after prefill reads what prefill wrote, as eager PyTorch does
    from pte_lab.examples import _modules

    torch.manual_seed(0)
    eager = _modules()["KVCache"](16, 8)
    x4, x1 = torch.randn(4, 8), torch.randn(1, 8)
    with torch.no_grad():
        eager(torch.arange(4), x4)
        expect = eager(torch.tensor([4]), x1)
    with pte_lab.load(path) as prog:
        prog.load_method("prefill")(torch.arange(4), x4)
        got = prog.load_method("decode")(torch.tensor([4]), x1)[0]
    assert torch.allclose(got, expect, atol=1e-5)


def test_inspect_names_state(program_path, capsys):
    from pte_lab.cli import main

    assert main(["inspect", str(program_path("shared_state")), "--method", "decode"]) == 0
    out = capsys.readouterr().out
    assert "state kept between calls: 1 tensor, 512 B: k_cache" in out
    assert "k_cache" in out.split("legend:")[-1]
