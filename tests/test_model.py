"""The model on real programs: roles, lifetimes, peaks, devices, load costs, findings."""

from __future__ import annotations

import pytest

import pte_lab
from pte_lab.format.program_tables import RawInstruction, RawPlan, RawTensor, RawValue
from pte_lab.model import Method
from pte_lab.model.findings import DeviceAllocatorDetails

SIDE = 64
F32 = 4


def _kinds(findings):
    return {f.kind for f in findings}


# --------------------------------------------------------------- real programs
def test_device_program_arenas_and_findings(program_path):
    pte = pte_lab.open(program_path("device_demo"))
    fwd, dev = pte.methods["forward"], pte.methods["forward2"]
    assert [a.device for a in fwd.arenas] == ["cpu"]
    assert not fwd.is_device_method
    a = dev.arena(2)
    assert (a.mem_id, a.runtime_index, a.device) == (2, 1, "cuda:0")
    # two copied-in inputs and the delegate's output, side x side float32 each
    assert a.size == 3 * SIDE * SIDE * F32
    assert a.peak_bytes == a.size and a.size_over_peak == 1.0
    df = dev.tensors
    on_dev = df[df.mem_id == 2]
    assert set(on_dev.device) == {"cuda:0"} and len(on_dev) == 3
    f = [x for x in dev.findings() if x.kind == "device_allocator"]
    assert f and f[0].details == DeviceAllocatorDetails(2, "cuda:0", a.size)
    assert "runtime buffer 1" in f[0].message
    # delegate carries the target device
    assert dev.delegates[0].target_device == "cuda:0"
    assert dev.operator_counts["delegate:BackendWithCompilerDemo"] == 1


def test_a_device_is_read_once_and_named_as_before(program_path):
    """An arena's device is a record (its type and index as the file numbers them) that reads, prints and
    writes as the name every document gives it, and survives the trip to an isolated worker."""
    import json
    import pickle

    from pte_lab.devices import Device

    a = pte_lab.open(program_path("device_demo")).methods["forward2"].arena(2)
    assert isinstance(a.device, Device)
    assert (a.device.kind, a.device.device_type, a.device.device_index) == ("cuda", 1, 0)
    assert a.device == "cuda:0" and repr(a.device) == "'cuda:0'" and json.dumps({a.device: a.device}) == '{"cuda:0": "cuda:0"}'
    assert pickle.loads(pickle.dumps(a.device)).device_index == 0 and Device.of("cuda:0") == a.device


def test_host_planned_device_tags_are_named(program_path):
    pte = pte_lab.open(program_path("device_hostplanned"))
    dev = pte.methods["forward2"]
    assert [a.device for a in dev.arenas] == ["cpu"]
    found = [f for f in dev.findings() if f.kind == "device_tag_in_host_arena"]
    assert len(found) == 1
    tagged = set(dev.tensors.query("device == 'cuda:0'").value)
    assert tagged and set(found[0].details.values) == tagged
    # two host-only methods now share arenas under the corrected loader
    assert "shared_arenas" in _kinds(pte.warnings())


def test_xnnpack_device_program_pads_its_arenas(program_path):
    dev = pte_lab.open(program_path("device")).methods["forward2"]
    a = dev.arena(2)
    assert a.device == "cuda:0" and a.size == 3 * SIDE * SIDE * F32 + 64  # XNNPACK's 64 bytes
    assert a.peak_bytes == 3 * SIDE * SIDE * F32
    assert dev.delegates[0].backend == "XnnpackBackend" and dev.delegates[0].target_device == "cuda:0"


def test_load_cost_three_loaders(program_path):
    pte = pte_lab.open(program_path("device_demo"))
    host, dev = pte.methods["forward"], pte.methods["forward2"]
    h1 = host.arena(1).size
    d1, d2 = dev.arena(1).size, dev.arena(2).size
    c = pte.load_cost("corrected")
    assert c.method.isna().tolist() == [True, False, False]
    rows = [tuple(r) for r in c[["step", "sharing", "mem_id", "device", "bytes", "used_by"]].itertuples(index=False)]
    assert rows == [
        ("load_program", "shared", 1, "cpu", h1, ("forward",)),  # host-only methods' shared arenas
        ("load_method", "private", 2, "cuda:0", d2, ("forward2",)),  # device arena first
        ("load_method", "private", 1, "cpu", d1, ("forward2",)),
    ]
    assert list(c.method[1:]) == ["forward2", "forward2"]
    assert list(c.runtime_index) == [0, 1, 0]
    legacy = pte.load_cost("legacy")
    assert list(legacy.step) == ["load_program"] * 2
    assert list(legacy.device) == ["cpu", "cpu"]
    assert list(legacy.bytes) == [max(h1, d1), d2]  # per index max over all methods, all on the host
    module = pte.load_cost("module")
    assert set(module.step) == {"first_execute"}
    assert module.groupby("method").bytes.sum().to_dict() == {"forward": h1, "forward2": d1 + d2}
    assert module[module.device == "cuda:0"].bytes.sum() == d2
    with pytest.raises(ValueError, match="unknown loader"):
        pte.load_cost("bogus")


def test_xnnpack_two_host_methods_share(program_path):
    pte = pte_lab.open(program_path("xnnpack"))
    assert set(pte.methods) == {"forward", "attention"}
    w = [x for x in pte.warnings() if x.kind == "shared_arenas"]
    assert w and set(w[0].details.methods) == {"forward", "attention"}
    shared = pte.load_cost("corrected")
    sizes = {n: m.arena(1).size for n, m in pte.methods.items()}
    assert list(shared.bytes) == [max(sizes.values())]
    assert pte.delegate_bytes["XnnpackBackend"] > 0
    assert any(s.kind == "delegate:XnnpackBackend" for s in pte.segments)
    # XNNPACK arenas carry padding: the plan is bigger than the bytes ever alive
    for m in pte.methods.values():
        a = m.arena(1)
        assert a.size > a.peak_bytes and a.size_over_peak > 1.0


def test_mutable_buffer_spans_whole_method(program_path):
    m = pte_lab.open(program_path("kv_cache")).methods["forward"]
    buf = m.tensors.query("role == 'mutable_buffer'")
    assert len(buf) == 1
    row = buf.iloc[0]
    assert tuple(row["shape"]) == (16, 8)
    assert (row["first"], row["last"]) == (-1, m.n_instructions)


def test_inputs_outputs_lifetime_convention(program_path):
    m = pte_lab.open(program_path("portable")).methods["forward"]
    df = m.tensors
    n = m.n_instructions
    assert (df[df.role == "input"]["first"] == -1).all()
    assert (df[df.role == "output"]["last"] == n).all()
    inter = df[df.role == "intermediate"]
    assert ((inter["first"] >= 0) & (inter["last"] < n)).all()
    # the producer is the instruction that writes the tensor, and op what it calls, as ExecuTorch reads them
    deser = pytest.importorskip("executorch.exir._serialize._program")
    (plan,) = deser.deserialize_pte_binary(program_path("portable").read_bytes()).program.execution_plan
    calls = [ins.instr_args for chain in plan.chains for ins in chain.instructions]
    assert len(inter) > 1
    for _, r in inter.iterrows():
        call = calls[r["producer"]]
        op = plan.operators[call.op_index]
        assert r["op"] == (f"{op.name}.{op.overload}" if op.overload else op.name)
        assert r["value"] in call.args
        assert r["first"] == r["producer"]


def test_dynamic_shapes_planned_at_upper_bound(program_path):
    m = pte_lab.open(program_path("dynamic")).methods["forward"]
    (x,) = m.inputs
    assert x.dynamic and x.shape == (32, 16) and x.nbytes == 32 * 16 * F32
    assert m.tensors["dynamic"].any()


def test_cond_control_flow(program_path):
    m = pte_lab.open(program_path("cond")).methods["forward"]
    kinds = [i.kind for i in m.instructions]
    assert "JumpFalseCall" in kinds and "MoveCall" in kinds
    assert not m.has_loops
    # the branch result is produced by a MoveCall
    assert "MoveCall" in set(m.tensors.op.dropna())
    assert m.validate() == []


def test_unplanned_io(program_path):
    m = pte_lab.open(program_path("unplanned_io")).methods["forward"]
    assert [s.planned for s in m.inputs + m.outputs] == [False, False]
    io = {s.value for s in m.inputs + m.outputs}
    assert io.isdisjoint(set(m.tensors.value))
    assert "unplanned_io" in _kinds(m.findings())


def test_external_data_is_expected(program_path):
    pte = pte_lab.open(program_path("external"))
    assert pte.expects_external_data
    assert "fc1.weight" in pte.external_keys
    assert "external_data" in _kinds(pte.warnings())
    assert pte.constant_bytes == 0
    # a program with its weights inside expects nothing
    assert not pte_lab.open(program_path("portable")).expects_external_data


# ------------------------------------------------------------ synthetic plans
def _t(mem_id, offset, n_floats, device="cpu"):
    return RawValue("Tensor", tensor=RawTensor(6, (n_floats,), (0,), 0, mem_id, offset, 0, device))


def _plan(values, instructions, inputs=(), outputs=(), sizes=(0, 64), devices=None):
    return RawPlan("m", values, tuple(inputs), tuple(outputs), instructions, 1, [("aten::op", "out")],
                   [], tuple(sizes), devices or {})


def _k(*args):
    return RawInstruction("KernelCall", 0, tuple(args))


def test_peak_counts_aliases_once_and_efficiency():
    # v0 input [0,16); v1 alias of v0 (same bytes); v2 [16,32) -> union 32 bytes at instr 0
    vals = [_t(1, 0, 4), _t(1, 0, 4), _t(1, 16, 4)]
    m = Method(_plan(vals, [_k(0, 1, 2)], inputs=[0], outputs=[2], sizes=(0, 64)))
    a = m.arena(1)
    assert a.peak_bytes == 32
    assert a.size_over_peak == 2.0
    assert m.validate() == []  # same offset = same storage


def test_validator_reports_overlap_and_outside():
    # v1 [8,24) and v2 [16,32) both alive at instruction 0, different offsets
    vals = [_t(1, 0, 2), _t(1, 8, 4), _t(1, 16, 4), _t(1, 60, 4)]
    m = Method(_plan(vals, [_k(0, 1, 2), _k(2, 3)], inputs=[0], outputs=[3], sizes=(0, 64)))
    kinds = [f.kind for f in m.validate()]
    assert kinds.count("plan_overlap") == 1
    assert kinds.count("outside_arena") == 1  # [60, 76) past 64
    c = m.conflicts[0]
    assert {c.a, c.b} == {1, 2}


def test_conflict_search_looks_only_at_pairs_overlapping_in_bytes_and_time(monkeypatch):
    """12,000 tensors share bytes at different times and 8,000 are alive together in different bytes:
    72 million pairs overlap in bytes only and 128 million in time only. The search looks at none of
    them; with one true overlap added, it looks at that pair alone."""
    import numpy as np

    import pte_lab.model.validate as validate

    looked = []
    runs = validate._runs

    def counted(*args):
        for chunk in runs(*args):
            looked.append(len(chunk[0]))
            yield chunk

    monkeypatch.setattr(validate, "_runs", counted)
    k, m = 12_000, 8_000
    off = np.r_[np.zeros(k), 16 + 16 * np.arange(m)]
    first = np.r_[np.arange(k), np.zeros(m)]
    last = np.r_[np.arange(k), np.full(m, k)]
    values = np.arange(k + m)
    assert validate.find_conflicts(values, np.ones(k + m), off, np.full(k + m, 16), first, last, storage=values) == []
    assert sum(looked) == 0
    off[k + 5] = 8  # now [8, 24): it meets [0, 16) of every one of the first 12,000 and [16, 32) of value k
    found = validate.find_conflicts(values, np.ones(k + m), off, np.full(k + m, 16), first, last, storage=values)
    assert len(found) == 1000 and all(k + 5 in (c.a, c.b) for c in found)  # the limit: 12,001 pairs overlap
    pairs = [(c.a, c.b) for c in found]
    assert pairs[:3] == [(0, k + 5), (k, k + 5), (k + 5, 1)]  # in the order overlaps begin
    assert sum(looked) <= 10_000  # the pairs it reports, looked at a few thousand at a time


def test_lists_expand_and_self_reference_is_safe():
    # value 3 is a TensorList naming values 1 and 2 and itself; 4 is an optional list with -1
    vals = [_t(1, 0, 2), _t(1, 8, 2), _t(1, 16, 2), RawValue("TensorList", items=(1, 2, 3)),
            RawValue("OptionalTensorList", items=(-1, 0)), _t(1, 32, 2)]
    m = Method(_plan(vals, [_k(0, 1), _k(2), _k(3, 5), _k(4)], inputs=[0], outputs=[5]))
    df = m.tensors.set_index("value")
    assert (df.loc[1, "first"], df.loc[1, "last"]) == (0, 2)  # named again through the list at 2
    assert (df.loc[2, "first"], df.loc[2, "last"]) == (1, 2)
    assert df.loc[0, "last"] == 3  # via the optional list


def test_backward_jump_extends_lifetimes():
    # instr 0 defines v1; loop body 1..3 uses v1 at 1 only; instr 3 jumps back to 1
    vals = [_t(1, 0, 2), _t(1, 8, 2), _t(1, 16, 2), RawValue("Bool")]
    ins = [_k(0, 1), _k(1, 2), _k(2), RawInstruction("JumpFalseCall", -1, (3,), 1), _k(2)]
    m = Method(_plan(vals, ins, inputs=[0], outputs=[2]))
    assert m.has_loops
    df = m.tensors.set_index("value")
    assert df.loc[1, "last"] == 3  # must survive every iteration
    assert "loops" in _kinds(m.findings())


def test_unknown_arena_is_reported():
    vals = [_t(1, 0, 2), _t(3, 0, 2)]
    m = Method(_plan(vals, [_k(0, 1)], inputs=[0], outputs=[1]))
    assert "unknown_arena" in _kinds(m.validate())


def test_occupancy_matches_peak(program_path):
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    for a in m.arenas:
        occ = m.occupancy(a.mem_id)
        assert len(occ) == m.n_instructions + 2
        assert occ.max() == a.peak_bytes
        assert occ[0] > 0  # inputs are alive before the first instruction


@pytest.mark.parametrize("few", ["as shipped", "never"])
def test_validator_and_occupancy_match_brute_force(monkeypatch, few):
    """Random plans: the vectorised checks agree with byte-by-byte counting (tensors never alive, with
    first > last, and tensors of no bytes hold nothing); so do the plain-Python ways for a few tensors, and
    with ``few="never"`` the array ways take every plan, however few its tensors."""
    import numpy as np

    import pte_lab.model.occupancy as occupancy_mod
    import pte_lab.model.validate as validate

    if few == "never":
        monkeypatch.setattr(validate, "_FEW", 0)
        monkeypatch.setattr(occupancy_mod, "_FEW", 0)
    monkeypatch.setattr(validate, "_CHUNK", 7)  # exercise the chunked walk
    monkeypatch.setattr(validate, "_FIRST_CHUNK", 2)
    monkeypatch.setattr(validate, "_ASKED", 5)  # ... and the questions asked in parts
    from pte_lab.model.occupancy import occupied_bytes
    from pte_lab.model.validate import find_conflicts

    rng = np.random.default_rng(0)
    for trial in range(300):
        n, N = int(rng.integers(1, 30)), int(rng.integers(1, 20))
        off, nb = rng.integers(0, 100, n) * 4, rng.integers(0, 40, n) * 4
        f = rng.integers(-1, N, n)
        l = np.minimum(f + rng.integers(-2, 8, n), N)
        mem = rng.integers(1, 3, n)
        storage = rng.integers(0, 6, n) if trial % 2 else None
        same = off if storage is None else storage
        found = find_conflicts(np.arange(n), mem, off, nb, f, l, limit=10**6, storage=storage)
        got = {(c.a, c.b) for c in found}
        expected = {
            (i, j) for i in range(n) for j in range(i + 1, n)
            if mem[i] == mem[j] and nb[i] and nb[j] and same[i] != same[j] and f[i] <= l[i] and f[j] <= l[j]
            and off[i] < off[j] + nb[j] and off[j] < off[i] + nb[i] and f[i] <= l[j] and f[j] <= l[i]
        }
        assert {tuple(sorted(p)) for p in got} == expected and len(found) == len(expected)
        assert all((f[a], a) < (f[b], b) for a, b in got)  # a starts first
        assert len(find_conflicts(np.arange(n), mem, off, nb, f, l, limit=2, storage=storage)) == min(2, len(expected))
        occ = occupied_bytes(off, nb, f, l, N)
        with monkeypatch.context() as mp:  # the ways for huge grids agree too: sums and the tangled apart...
            mp.setattr(occupancy_mod, "_GRID_CELLS", 0)
            assert (occupied_bytes(off, nb, f, l, N) == occ).all()
            mp.setattr(occupancy_mod, "_TANGLED_PAIRS", 0)  # ... or every tensor swept
            assert (occupied_bytes(off, nb, f, l, N) == occ).all()
        for t in range(-1, N + 1):
            live = np.flatnonzero((f <= t) & (l >= t))
            covered = set().union(*(range(off[i], off[i] + nb[i]) for i in live)) if len(live) else set()
            assert occ[t + 1] == len(covered)


def test_state_shared_with_a_device_method_is_not_shared_under_the_corrected_loader():
    """prefill (host) and decode (one device arena) plan k_cache at one place: the device method's is its own."""
    from types import SimpleNamespace

    from pte_lab.model.findings import program_findings

    def method(name, devices):
        cache = RawValue("Tensor", tensor=RawTensor(6, (16,), (0,), 0, 2, 0, 0, "cpu", "k_cache"))
        vals = [_t(1, 0, 4), cache, _t(1, 16, 4)]
        ins = [RawInstruction("KernelCall", 0, (0, 1, 2, 2))]  # reads the cache, writes v2
        return Method(RawPlan(name, vals, (0,), (2,), ins, 1, [("aten::op", "out")], [], (0, 64, 64), devices))

    methods = {"prefill": method("prefill", {}), "decode": method("decode", {1: "cuda:0"})}
    p = SimpleNamespace(methods=methods, expects_external_data=False, external_keys=[])
    found = {f.kind: f for f in program_findings(p)}
    assert found["shared_state"].details.names == ("k_cache",)
    assert found["state_not_shared"].details.methods == ("decode",)
    assert "private arenas" in found["state_not_shared"].message and found["state_not_shared"].severity == "warning"
    assert "shared_arenas" not in found  # one host method shares with nobody
    # the places shared, one record each: where, who, what, how much
    from pte_lab.model.findings import SharedState, shared_state

    assert shared_state(methods.values()) == [SharedState(2, 0, ("prefill", "decode"), ("k_cache",), 64)]


def test_loop_extension_matches_the_fixed_point_definition():
    """Random jumps and lifetimes: the range-maximum extension equals repeating every loop until nothing moves."""
    import random

    from pte_lab.model.lifetimes import _extend_over_loops

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(2, 40)
        jumps = [(s, rng.randint(0, s)) for s in (rng.randint(0, n) for _ in range(rng.randint(1, 6)))]
        first = {v: rng.randint(-1, n) for v in range(rng.randint(1, 25))}
        last = {v: min(n, f + rng.randint(0, 10)) for v, f in first.items()}
        want = dict(last)
        changed = True
        while changed:  # the definition, as written in the module docs
            changed = False
            for src, dst in jumps:
                for v, f in first.items():
                    if f < dst <= want[v] < src:
                        want[v], changed = src, True
        got = dict(last)
        _extend_over_loops(first, got, jumps)
        assert got == want


def test_many_loops_over_many_values():
    """50,000 values and 50,000 loops (the repeat-until-stable scan needed minutes: bench_loops.py)."""
    from pte_lab.model.lifetimes import _extend_over_loops

    n = 50_000
    first = {v: v % 97 for v in range(n)}
    last = {v: first[v] + 50 for v in range(n)}
    jumps = [(200 + k, 60 + k % 100) for k in range(n)]
    _extend_over_loops(first, last, jumps)
    # loops start at 60..159 and end at 200..: a value last used at 60 or later is inside one, and then
    # inside all of them (its last use moves past every start); one last used before 60 is in none
    assert last == {v: (200 + n - 1) if first[v] + 50 >= 60 else first[v] + 50 for v in range(n)}


def test_peak_without_the_curve_matches_the_curve():
    import numpy as np

    from pte_lab.model.occupancy import occupied_bytes, peak, peak_and_time

    rng = np.random.default_rng(1)
    for _ in range(200):
        k, n = int(rng.integers(0, 40)), int(rng.integers(1, 30))
        off, nb = rng.integers(0, 50, k) * 8, rng.integers(0, 20, k) * 8
        f = rng.integers(-1, n + 1, k)
        last = np.minimum(f + rng.integers(-1, 8, k), n)
        assert peak(off, nb, f, last, n) == (int(occupied_bytes(off, nb, f, last, n).max()) if k else 0)
        # where the peak is first reached (the peak's story and the delegate findings' point), each way
        occ = occupied_bytes(off, nb, f, last, n)
        want = (int(occ.max()), int(occ.argmax()) - 1) if k and occ.max() else (0, -1)
        for small in (0, 8, 64):
            assert peak_and_time(off, nb, f, last, n, small) == want


def test_many_arenas_do_not_cost_arenas_times_instructions():
    """20,001 arenas and 20,000 instructions: the arena table is built without a curve per arena, and
    asking for many arenas' curves keeps only the last few (a curve is 8 bytes per instruction)."""
    import tracemalloc

    n = 20_000
    curve = (n + 2) * 8
    vals = [_t(1, 0, 4), _t(2, 0, 4)]
    ins = [_k(0, 1)] * n
    m = Method(_plan(vals, ins, inputs=[0], outputs=[1], sizes=(0,) + (16,) * 20_001))
    tracemalloc.start()
    try:
        arenas = m.arenas
        table_peak = tracemalloc.get_traced_memory()[1]
        held = tracemalloc.get_traced_memory()[0]
        curves = [m.occupancy(k) for k in range(1, 101)]
        del curves
        kept = tracemalloc.get_traced_memory()[0] - held
    finally:
        tracemalloc.stop()
    assert len(arenas) == 20_001 and [a.peak_bytes for a in arenas[:3]] == [16, 16, 0]
    assert table_peak < 0.01 * len(arenas) * curve  # not a curve per arena (3.2 GB), not even 1 % of them
    assert kept < 16 * curve  # of 100 arenas' curves, a few are kept
    assert len(m.occupancy(1)) == n + 2 and m.occupancy(1).max() == arenas[0].peak_bytes
    assert m.occupancy(1) is m.occupancy(1)  # a curve asked for again is not recomputed


@pytest.mark.parametrize("name", ["xnnpack", "three_methods", "kv_cache", "cond", "dynamic", "device", "gpt"])
def test_the_ways_for_a_few_values_say_what_the_array_ways_say(program_path, monkeypatch, name):
    """A method of a few values (a delegated method has a handful) is read and analysed in plain Python where
    numpy's set-up would cost more than the work; with every such threshold at 0 the array ways take every
    method, and the program reads the same: summary, methods, JSON document."""
    import json

    import pte_lab.format.program_tables as program_mod
    import pte_lab.model.analysis as analysis_mod
    import pte_lab.model.arrays as arrays_mod
    import pte_lab.model.lifetimes as lifetimes_mod
    import pte_lab.model.occupancy as occupancy_mod
    import pte_lab.model.validate as validate_mod

    def look():
        p = pte_lab.open(program_path(name))
        return repr(p), [repr(m) for m in p.methods.values()], json.dumps(p.to_dict(), default=str)

    few = look()
    for mod, attr in ((program_mod, "FEW"), (analysis_mod, "_FEW"), (arrays_mod, "_FEW"), (arrays_mod, "_PAIRS"),
                      (lifetimes_mod, "_FEW"), (occupancy_mod, "_FEW"), (validate_mod, "_FEW")):
        monkeypatch.setattr(mod, attr, 0)
    assert look() == few
