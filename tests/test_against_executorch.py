"""Every arena and tensor field pte_lab reads is checked against ExecuTorch's
own deserializer (``deserialize_pte_binary``) on real exported programs."""

from __future__ import annotations

import pytest

import pte_lab
from tests.conftest import PROGRAMS

deser = pytest.importorskip("executorch.exir._serialize._program")
schema = pytest.importorskip("executorch.exir.schema")


def _device(extra) -> str:
    if extra is None or int(extra.device_type) == 0:
        return "cpu"
    return f"cuda:{extra.device_index}"


def check_against_executorch(data: bytes, ref=None):
    """Every field pte_lab reads from ``data`` equals what ExecuTorch's deserializer reads.

    ``ref`` is ExecuTorch's Program for ``data`` when it must come from elsewhere (e.g. the
    program a bundled file carries); by default ``deserialize_pte_binary(data)``.
    """
    ref = deser.deserialize_pte_binary(data).program if ref is None else ref
    pte = pte_lab.open(data)
    assert list(pte.methods) == [p.name for p in ref.execution_plan]
    for plan in ref.execution_plan:
        m = pte.methods[plan.name]
        # arenas: sizes (index 0 reserved), runtime index, devices
        assert [0] + [a.size for a in m.arenas] == list(plan.non_const_buffer_sizes)
        assert [a.runtime_index for a in m.arenas] == [a.mem_id - 1 for a in m.arenas]
        ref_dev = {d.buffer_idx: f"cuda:{d.device_index}" for d in (plan.non_const_buffer_device or [])
                   if int(d.device_type) != 0}
        assert {a.mem_id: a.device for a in m.arenas if a.device != "cpu"} == ref_dev
        # every planned tensor: arena, offset, shape, dtype, device
        planned_ref = {}
        for i, v in enumerate(plan.values):
            t = v.val
            if isinstance(t, schema.Tensor) and t.allocation_info is not None:
                a = t.allocation_info
                planned_ref[i] = (a.memory_id, a.memory_offset_low + (a.memory_offset_high << 32),
                                  tuple(t.sizes), int(t.scalar_type), _device(t.extra_tensor_info))
        mine = {}
        for t in m.planned:
            raw = m.raw.values[t.value].tensor
            mine[t.value] = (t.mem_id, t.offset, t.shape, raw.scalar_type, t.device)
        assert mine == planned_ref
        df = m.tensors
        assert list(df["value"]) == sorted(planned_ref)
        assert (df["nbytes"] >= 0).all()
        # inputs / outputs / instructions / operators / delegates
        assert [s.value for s in m.inputs] == list(plan.inputs)
        assert [s.value for s in m.outputs] == list(plan.outputs)
        assert m.n_instructions == sum(len(c.instructions) for c in plan.chains)
        assert m.operators == [f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators]
        assert [d.backend for d in m.delegates] == [d.id for d in plan.delegates]
        for mine_d, ref_d in zip(m.raw.delegates, plan.delegates):
            assert mine_d.compile_specs == {c.key: bytes(c.value) for c in ref_d.compile_specs}
        for ins, ref_ins in zip(m.instructions, plan.chains[0].instructions):
            assert ins.kind == type(ref_ins.instr_args).__name__
        # a valid exported plan has no conflicts and fits its arenas
        assert m.validate() == []
        for a in m.arenas:
            assert a.peak_bytes <= a.size


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_fields_match_executorch(name, program_bytes):
    check_against_executorch(program_bytes(name))


def test_the_schema_numbers_pte_lab_names_are_executorchs():
    """pte_lab.format names the format's numbers once; each name means what ExecuTorch's own schema says."""
    from executorch.exir.scalar_type import ScalarType as ExirScalarType
    from executorch.exir.tensor import ALIGNMENT

    from pte_lab import format as fmt

    for mine, theirs in ((fmt.TensorShapeDynamism, schema.TensorShapeDynamism),
                         (fmt.TensorDataLocation, schema.TensorDataLocation), (fmt.DataLocation, schema.DataLocation)):
        assert {m.name: int(m) for m in mine} == {t.name: int(t.value) for t in theirs}, mine.__name__
    exir_types = {t.name: int(t) for t in ExirScalarType}
    assert {m.name: int(m) for m in fmt.ScalarType if m.name in exir_types} == exir_types
    assert fmt.TENSOR_ALIGNMENT == ALIGNMENT
