"""Each instruction's output shapes, as ExecuTorch's runtime computed them for one call (via its event tracer).

A dynamic method's tensors are planned at the export's upper bound, but each call resizes them to the
shapes the inputs imply. ExecuTorch's event tracer (ETDump, with a debug buffer) logs every value an
instruction writes: a kernel call's returned value (a tensor list as its tensors, in order), and a
delegate call's arguments (its inputs, then its outputs). :func:`record_shapes` runs one method once with
ETDump on and hands back what it logged, as ``(instruction, sizes)`` pairs in order (sizes None: a
value that is not a tensor); the method's own outputs, logged again at the end, are left out.
:func:`pte_lab.model.shape_fit.value_shapes` maps them to the program's values.

What-if records the same sequence without ExecuTorch's Python package: pte_lab's own event tracer in the native
helper (:mod:`pte_lab.runtime.recorder`, through
:meth:`~pte_lab.runtime.native_engine.NativeEngine.record_shapes`), its inputs plain data
(:func:`pte_lab.runtime.inputs.plain_example_inputs`, drawn without torch). :func:`record_shapes` is the Python runtime's way
(:meth:`~pte_lab.runtime.engine.Engine.record_shapes`), kept as the reference the native recorder is checked
against. Both run where the runtime runs: in an isolated worker.

:func:`program_scalars` reads the method's Int values and IntList items with pte_lab's own reader, in the
caller's process.
"""

from __future__ import annotations

import os
import tempfile

from ..format import read
from ..quiet import quiet, quiet_import

__all__ = ["record_shapes", "program_scalars", "LoggedValue"]

#: one logged value: (instruction index, sizes or None when it is not a tensor)
LoggedValue = tuple[int, "tuple[int, ...] | None"]


def record_shapes(path: str, method: str, inputs: list, debug_buffer: int,
                  data_path: str | None = None) -> list[LoggedValue]:
    """Run ``method`` of the program at ``path`` once on ``inputs`` with ETDump's debug buffer of
    ``debug_buffer`` bytes; every value its instructions wrote, in order (see the module's docstring)."""
    portable = quiet_import("executorch.extension.pybindings.portable_lib")
    with quiet():
        from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    module = portable._load_for_executorch(path, data_path, enable_etdump=True,
                                           debug_buffer_size=int(debug_buffer))
    module.run_method(method, tuple(inputs))
    with tempfile.TemporaryDirectory(prefix="pte_lab_shapes_") as d:
        dump, buf = os.path.join(d, "run.etdp"), os.path.join(d, "debug.bin")
        module.write_etdump_result_to_file(dump, buf)
        with open(dump, "rb") as f:
            etdump = deserialize_from_etdump_flatcc(f.read())
    out: list[LoggedValue] = []
    for run in etdump.run_data:
        for event in run.events or ():
            d = event.debug_event
            if d is None or d.debug_entry is None:
                continue
            entry = d.debug_entry
            if entry.output is not None and entry.output.bool_val:  # the method's outputs, logged at the end
                continue
            ins = int(d.instruction_id)
            if entry.val == "TensorList" and entry.tensor_list is not None:  # a list output: each tensor
                out.extend((ins, tuple(int(s) for s in t.sizes)) for t in entry.tensor_list.tensors or ())
                continue
            t = entry.tensor if entry.val == "Tensor" else None
            out.append((ins, None if t is None else tuple(int(s) for s in t.sizes)))
    return out


def program_scalars(path: str, method: str) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
    """(value -> int for every ``Int`` value, value -> items for every ``IntList``) of ``method``, read with
    pte_lab's own reader (:meth:`pte_lab.format.RawProgram.plan_scalars`; the same as ExecuTorch's deserializer
    reads them): what a view's size list and the size arithmetic between kernels (``sym_size``,
    ``executorch_prim::mul.Scalar``...) start from. The runtime logs neither: those instructions are prim ops,
    which ETDump does not trace. Raises ``ValueError`` for a method the program does not have, and
    :class:`~pte_lab.errors.PteFormatError` for a file that is not a valid program."""
    raw, _ = read(path)
    if method not in raw.plan_names:
        raise ValueError(f"no method {method!r}")
    return raw.plan_scalars(raw.plan_names.index(method))
