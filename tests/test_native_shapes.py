"""What-if without ExecuTorch's Python package (issue 45): the Int values read by pte_lab's own reader and the shapes
recorded by pte_lab's own event tracer are ExecuTorch's, entry for entry (its deserializer, its ETDump)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pte_lab
from pte_lab.model.shape_fit import sample_points
from pte_lab.runtime.inputs import plain_inputs
from pte_lab.runtime.shapes import program_scalars

#: the dynamic programs what-if's tests run, and the dim each is asked about: a linear layer's batch; export_llm's
#: llama with its KV caches (XNNPACK with custom sdpa and caches; portable with index_put_ caches), the prompt's
#: length
PROGRAMS = [
    ("dynamic", (0, 0)),
    pytest.param("llm_fp32", (0, 1), marks=pytest.mark.slow),
    pytest.param("llm_index_put", (0, 1), marks=pytest.mark.slow),
]


def _exir_scalars(path: str, method: str):
    """(Int values, IntList items) as ExecuTorch's own deserializer reads them: what program_scalars read before."""
    from pte_lab.quiet import quiet

    with quiet():
        from executorch.exir._serialize._program import deserialize_pte_binary
    with open(path, "rb") as f:
        program = deserialize_pte_binary(f.read()).program
    plan = next(p for p in program.execution_plan if p.name == method)
    ints, lists = {}, {}
    for i, v in enumerate(plan.values):
        name = type(v.val).__name__
        if name == "Int":
            ints[i] = int(v.val.int_val)
        elif name == "IntList":
            lists[i] = tuple(int(x) for x in v.val.items)
    return ints, lists


@pytest.mark.parametrize("name, key", PROGRAMS)
def test_program_scalars_are_what_executorchs_deserializer_reads(program_path, name, key):
    pytest.importorskip("executorch.exir")
    path = str(program_path(name))
    for method in pte_lab.open(path).methods:
        ints, lists = program_scalars(path, method)
        assert (ints, lists) == _exir_scalars(path, method), method
        if method == "forward":
            assert ints and lists  # sizes and size lists are there to compare


@pytest.mark.parametrize("name, key", PROGRAMS)
def test_the_native_recorder_logs_what_etdump_logs_entry_for_entry(program_path, name, key):
    """At each size what-if samples, the same inputs (seeded) run once through ExecuTorch's Python runtime with ETDump
    and once through pte_lab's recorder in a worker that never imports ExecuTorch's Python package: the two
    sequences of (instruction, sizes) are equal."""
    pytest.importorskip("executorch.extension.pybindings.portable_lib")
    from pte_lab.planning.at_bound import _debug_buffer, _shapes_at
    from pte_lab.runtime.inputs import example_inputs
    from pte_lab.runtime.isolate import Worker

    path = str(program_path(name))
    m = pte_lab.open(path).methods["forward"]
    keys = (key,)
    exported = (m.inputs[key[0]].shape[key[1]],)
    etdump, native = Worker(count=False), Worker(count=False, native=True)
    try:
        for engine in (etdump, native):
            engine.call("provide_operators", m.operators)
        for point in sample_points(keys, exported):
            inputs = example_inputs(m, shapes=_shapes_at(m, keys, point))
            buffer = _debug_buffer(m, keys, point)
            old = etdump.call("record_shapes", path, m.name, inputs, buffer)
            new = native.call("record_shapes", path, m.name, plain_inputs(m, inputs), buffer)
            assert new == old, point
            assert any(s is not None and point[0] in s for _, s in new)  # the dim at the size run
    finally:
        etdump.close()
        native.close()


def test_the_recorder_never_imports_executorchs_python_package(program_path):
    """The native engine records a run with inputs given as plain data (zeros here): neither ExecuTorch's Python
    package nor torch is imported, and the dynamic dim is logged at the size run."""
    path = str(program_path("dynamic"))
    code = ("import json, sys\n"
            "from pte_lab.runtime.native_engine import NativeEngine\n"
            "e = NativeEngine()\n"
            f"e.provide_operators({pte_lab.open(path).methods['forward'].operators!r})\n"
            f"got = e.record_shapes({path!r}, 'forward', [(6, (5, 16), bytes(5 * 16 * 4))], 1 << 20)\n"
            "print(json.dumps([got, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'executorch'))]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got, heavy = json.loads(r.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert any(s is not None and s[0] == 5 for _, s in got)


def test_a_failed_step_is_named_with_executorchs_error(program_path):
    """An input of the wrong shape is refused by set_input, named, with ExecuTorch's error code."""
    from pte_lab.runtime.recorder import RecordError, record

    path = str(program_path("dynamic"))
    with pytest.raises(RecordError, match=r"set_input of input 0 failed with error .*\(0x"):
        record(path, "forward", [(6, (64, 16), bytes(64 * 16 * 4))], 1 << 20)  # above the bound of 32 rows
    with pytest.raises(RecordError, match=r"outgrew the debug buffer"):
        record(path, "forward", [(6, (8, 16), bytes(8 * 16 * 4))], 64)


def test_what_if_leaves_executorchs_python_package_and_torch_unimported(program_path):
    """A what-if's runs import neither ExecuTorch's Python package nor torch (its inputs are drawn with numpy, as
    plain data: torch's import alone was most of a small program's answer)."""
    path = str(program_path("dynamic"))
    code = ("import sys, pte_lab\n"
            f"w = pte_lab.what_if({path!r}, {{(0, 0): 20}}, cache=False)\n"
            "print(w.planned, sorted({m.split('.')[0] for m in sys.modules} & {'executorch', 'torch'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    planned, heavy = r.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(planned) > 0 and heavy == "[]"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8",
                                   "bool", "complex64"])
def test_plain_inputs_drawn_without_torch_are_what_torch_would_give_the_recorder(tmp_path, dtype):
    """For each dtype, the plain inputs what-if draws with numpy carry the ScalarType code, shape and byte count of
    the torch tensors example_inputs builds (the recorder reads nothing else), and values a kernel takes as
    drawn: floats finite and about standard normal, integers 0 to 3, bool 0 or 1."""
    import numpy as np
    import torch

    from crafting import build_program
    from pte_lab.model.dtypes import SCALAR_TYPES
    from pte_lab.runtime.inputs import example_inputs, plain_example_inputs

    code = next(c for c, (name, _) in SCALAR_TYPES.items() if name == dtype)
    path = tmp_path / f"{dtype}.pte"  # one planned input of this dtype, [8, 16]
    path.write_bytes(build_program([("tensor", 1, 0, [8, 16], code)], [[0, 0]], sizes=(0, 2048), outputs=[0]))
    m = pte_lab.open(str(path)).methods["forward"]
    assert m.inputs[0].dtype == dtype
    plain = plain_example_inputs(m, shapes={0: (8, 16)})
    via_torch = plain_inputs(m, example_inputs(m, shapes={0: (8, 16)}))
    assert [(c, s, len(b)) for c, s, b in plain] == [(c, s, len(b)) for c, s, b in via_torch]
    assert plain[0][0] == code
    _, shape, data = plain[0]
    values = torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(shape)
    if values.is_floating_point() or values.is_complex():
        real = torch.view_as_real(values).float() if values.is_complex() else values.float()
        assert bool(torch.isfinite(real).all()) and 0.5 < float(real.std()) < 1.5
    else:
        assert set(np.unique(values.numpy().astype(int))) <= {0, 1, 2, 3}
        assert len(np.unique(values.numpy())) > 1  # drawn, not zeros
