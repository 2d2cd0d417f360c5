"""Lifetimes against ExecuTorch's own reading of a program: the first and last instruction naming each value
(lists expanded, inputs from -1, outputs to N), read with ExecuTorch's deserializer, not pte_lab's reader.

The pattern of ExecuTorch's Cortex-M backend (the Arduino keyword-spotting examples): every
``cortex_m::quantized_depthwise_conv2d.out`` and friends takes a uint8 scratch tensor, planned by exir like any
other allocation. When CMSIS-NN needs no scratch it has 0 bytes and sits at the offset of whatever activation is
live there; otherwise it is read where earlier activations lived. Neither is a view, nor state.
"""

from __future__ import annotations

import pytest

import pte_lab
from pte_lab import planning
from tests.crafting import build_program

UINT8, FLOAT = 0, 6


def executorch_reading(data: bytes, method: int = 0) -> tuple[dict[int, int], dict[int, int]]:
    """(first, last) per value, from ExecuTorch's own deserializer."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall, JumpFalseCall, KernelCall, MoveCall, OptionalTensorList, TensorList

    plan = deserialize_pte_binary(data).program.execution_plan[method]
    instructions = [ins for chain in plan.chains for ins in chain.instructions]
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, ins in enumerate(instructions):
        a = ins.instr_args
        if isinstance(a, (KernelCall, DelegateCall)):
            args = list(a.args)
        elif isinstance(a, MoveCall):
            args = [a.move_from, a.move_to]
        elif isinstance(a, JumpFalseCall):
            args = [a.cond_value_index]
        else:
            args = [a.value_index]
        for v in args:
            val = plan.values[v].val
            for x in [v] + ([it for it in val.items if it >= 0] if isinstance(val, (TensorList, OptionalTensorList)) else []):
                first.setdefault(x, i)
                last[x] = i
    n = len(instructions)
    for v in plan.inputs:
        first[v] = -1
        last.setdefault(v, -1)
    for v in plan.outputs:
        first.setdefault(v, n)
        last[v] = n
    return first, last


def _with_cortex_m_scratch(data: bytes) -> tuple[bytes, dict[str, int]]:
    """The portable MLP with its three addmm calls turned into Cortex-M-style kernels taking a uint8 scratch
    tensor before their out argument, edited with ExecuTorch's own serializer.

    Plan (ExecuTorch's reading): input v6 [-1, 1] at 17408, v7 [0, 1] at 0, v11 [1, 2] at 16384, v14 [2, 4] at
    17408, v15 [3, 4] at 0, v19 [4, 5] at 16384, v22 [5, 7] at 4096, v23 [6, 7] at 0, output v27 [7, 8] at 16384.
    """
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
    from executorch.exir.schema import AllocationDetails, EValue, KernelCall, Operator, Tensor, TensorShapeDynamism

    pf = deserialize_pte_binary(data)
    plan = pf.program.execution_plan[0]

    def scratch(nbytes: int, offset: int) -> int:
        plan.values.append(EValue(Tensor(scalar_type=UINT8, storage_offset=0, sizes=[nbytes], dim_order=[0],
                                         requires_grad=False, layout=0, data_buffer_idx=0,
                                         allocation_info=AllocationDetails(1, offset, 0),
                                         shape_dynamism=TensorShapeDynamism.STATIC, extra_tensor_info=None)))
        return len(plan.values) - 1

    plan.operators.append(Operator("cortex_m::quantized_linear", "out"))
    op = len(plan.operators) - 1
    added = {
        # 0 bytes at its own output's offset (a live activation), and at bytes nothing wrote yet
        1: [("empty_at_live_output", 0, 16384), ("empty_never_written", 0, 8192)],
        # 0 bytes at the offset of v11, dead since 2, and of this call's output v19
        4: [("empty_at_dead_activation", 0, 16384)],
        # 1024 bytes where v14 (float32, 1024 bytes, dead since 4) lived: same place and size, other dtype
        7: [("scratch_where_v14_was", 1024, 17408)],
    }
    names = {}
    instructions = [ins for chain in plan.chains for ins in chain.instructions]
    for i, scratches in added.items():
        call = instructions[i].instr_args
        extra = []
        for name, nbytes, offset in scratches:
            names[name] = scratch(nbytes, offset)
            extra.append(names[name])
        instructions[i].instr_args = KernelCall(op, call.args[:-2] + extra + call.args[-2:])
    return bytes(serialize_pte_binary(pf)), names


def test_cortex_m_scratch_tensors_agree_with_executorch(program_bytes):
    original = program_bytes("portable")
    before = pte_lab.open(original).methods["forward"]
    assert not [t for t in before.planned if t.role == "view"]  # no views: every lifetime is its own uses
    data, names = _with_cortex_m_scratch(original)
    m = pte_lab.open(data).methods["forward"]
    assert "cortex_m::quantized_linear.out" in m.operators
    first, last = executorch_reading(data)
    for t in m.planned:
        assert (t.first, t.last) == (first[t.value], last[t.value]), t
    df = m.tensors.set_index("value")
    assert (df.loc[11, "first"], df.loc[11, "last"]) == (1, 2)  # the activation ends at its last use
    assert (df.loc[14, "first"], df.loc[14, "last"]) == (2, 4)
    for name, v in names.items():
        assert df.loc[v, "role"] == "intermediate", name  # never a view, never state
        assert df.loc[v, "op"] == "cortex_m::quantized_linear.out"
    assert not m.analysis.views
    assert not [f for f in m.findings() if f.kind == "plan_overlap"]
    assert m.arena(1).peak_bytes == before.arena(1).peak_bytes  # the scratch fits where nothing lives
    # replanning inherits the lifetimes: the activation is a group of its own, alive [1, 2]
    problem = planning.build_problem(m, 1)
    (group,) = [g for g in problem.groups if any(v == 11 for v, _, _ in g.members)]
    assert (group.first, group.last, [v for v, _, _ in group.members]) == (1, 2, [11])
    assert {v for v, _ in problem.idle} == {names["empty_at_live_output"], names["empty_never_written"],
                                            names["empty_at_dead_activation"]}


def test_scratch_buffers_of_one_size_at_one_offset_are_not_views_of_each_other():
    """Two calls each take a 16-byte uint8 scratch at offset 0, where the input lived (a Cortex-M55 program's
    depthwise convolutions): the second is no view of the first (a scratch is never written where it is first
    named, so it holds nothing for anyone), and neither keeps the input alive."""
    values = [("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("tensor", 1, 0, 16, UINT8), ("tensor", 1, 32, 4),
              ("tensor", 1, 0, 16, UINT8), ("tensor", 1, 16, 4)]
    data = build_program(values, [[0, 1, 1], [1, 2, 3, 3], [3, 4, 5, 5]], sizes=(0, 48))
    m = pte_lab.open(data).methods["forward"]
    df = m.tensors.set_index("value")
    assert [(df.loc[v, "first"], df.loc[v, "last"], df.loc[v, "role"]) for v in range(6)] == [
        (-1, 0, "input"), (0, 1, "intermediate"), (1, 1, "intermediate"), (1, 2, "intermediate"),
        (2, 2, "intermediate"), (2, 3, "output")]
    assert m.validate() == []


def test_a_view_has_its_bases_dtype_and_byte_count():
    """exir's _ViewSpec: a view shares its base's offset, dtype and bytes. Read where a tensor of another dtype
    or size was written, a tensor is no view of it (and its base is not kept alive)."""
    def plan(view):
        values = [("tensor", 1, 16, 4), ("tensor", 1, 0, 4), view, ("tensor", 1, 32, 4)]
        return build_program(values, [[0, 1, 1], [1, 3, 3], [2, 3, 3]], sizes=(0, 64))

    same = pte_lab.open(plan(("tensor", 1, 0, [2, 2]))).methods["forward"]  # float32 [4] read as [2, 2]
    assert same.analysis.views == {2: 1}
    assert [(t.first, t.last) for t in same.planned][1:3] == [(0, 2), (0, 2)]
    for other in (("tensor", 1, 0, 16, UINT8), ("tensor", 1, 0, 2)):  # 16 bytes of uint8; 8 bytes of float32
        m = pte_lab.open(plan(other)).methods["forward"]
        assert m.analysis.views == {}
        assert [(t.first, t.last, t.role) for t in m.planned][1:3] == [(0, 1, "intermediate"),
                                                                      (2, 2, "intermediate")]


def test_empty_tensors_hold_nothing():
    """A 0-byte tensor read first with nothing written there is no state, never conflicts with what lives at
    its offset, and never extends a lifetime, whatever the file names it with."""
    values = [("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("tensor", 1, 16, [0], UINT8), ("tensor", 1, 48, 0),
              ("tensor", 1, 32, 4)]
    # value 2 (0 bytes at value 1's offset) is read by the last call; value 3 is read first, nothing written there
    data = build_program(values, [[0, 1, 1], [1, 3, 4, 4], [2, 4, 4]], sizes=(0, 48))
    m = pte_lab.open(data).methods["forward"]
    df = m.tensors.set_index("value")
    assert (df.loc[1, "first"], df.loc[1, "last"]) == (0, 1)
    assert (df.loc[2, "role"], df.loc[2, "first"], df.loc[2, "last"]) == ("intermediate", 2, 2)
    assert (df.loc[3, "role"], df.loc[3, "first"], df.loc[3, "last"]) == ("intermediate", 1, 1)
    assert m.validate() == [] and m.arena(1).peak_bytes == 32


@pytest.mark.parametrize("name", ["kv_cache", "llm", "llm_index_put", "dynamic", "xnnpack", "transformer", "shared_state"])
def test_lifetimes_are_executorch_reading_apart_from_views_and_state(program_bytes, name):
    """Every planned tensor: its lifetime is ExecuTorch's reading, except state ([-1, N]), views (their base's
    start) and the bases of views (alive while a view is used)."""
    data = program_bytes(name)
    pte = pte_lab.open(data)
    for m in pte.methods.values():
        if m.has_loops:
            continue
        first, last = executorch_reading(data, m.index)
        views = m.analysis.views
        for t in m.planned:
            if t.role == "mutable_buffer":
                assert (t.first, t.last) == (-1, m.n_instructions)
            elif t.value in views:
                assert t.first == first[views[t.value]] and t.last >= last[t.value]
            elif t.value in views.values():
                assert t.first == first[t.value]
                assert t.last == max([last[t.value]] + [last[v] for v, b in views.items() if b == t.value])
            elif t.first is not None:
                assert (t.first, t.last) == (first[t.value], last[t.value]), (name, m.name, t)
