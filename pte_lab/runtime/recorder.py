"""What-if's shape recorder, driven where the runtime runs (the native engine's worker): one method run once, every
value its instructions wrote, as ExecuTorch's ETDump logs them, without ExecuTorch's Python package.

``native/shape_recorder.cpp`` attaches an event tracer of its own to the method (debug level: intermediate
outputs) and keeps, per value the runtime logs, the instruction and the tensor's sizes, as ETDump writes them
(see that file and :mod:`pte_lab.runtime.shapes`, whose :func:`~pte_lab.runtime.shapes.record_shapes` reads the
same sequence back from an ETDump). :func:`record` returns it as plain data.

Inputs are plain data too (:func:`~pte_lab.runtime.inputs.plain_example_inputs`): a tensor as ``(ScalarType code, shape,
contiguous bytes)``, a scalar as a Python int, float or bool.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

from ..errors import PteLabError, error_name
from . import native

__all__ = ["record", "RecordError"]

#: dims a logged tensor may have (ExecuTorch's kTensorDimensionLimit)
_MAX_DIMS = 16


class _Logged(ctypes.Structure):
    """Layout of ``PteLabLogged`` in shape_recorder.cpp (checked against its size when loaded)."""

    _fields_ = [("instruction", ctypes.c_uint32), ("dim", ctypes.c_int32), ("sizes", ctypes.c_int64 * _MAX_DIMS)]


class _Input(ctypes.Structure):
    """Layout of ``PteLabShapeInput`` in shape_recorder.cpp (checked against its size when loaded)."""

    _fields_ = [("kind", ctypes.c_int32), ("scalar_type", ctypes.c_int32), ("dim", ctypes.c_int32),
                ("reserved", ctypes.c_int32), ("sizes", ctypes.c_int64 * _MAX_DIMS), ("data", ctypes.c_void_p),
                ("nbytes", ctypes.c_uint64), ("int_value", ctypes.c_int64), ("double_value", ctypes.c_double)]


#: shape_recorder.cpp's steps, as a message names them
_STEPS = {1: "load_program", 2: "load_method", 3: "set_input", 4: "execute", 5: "log", 6: "log", 7: "prepare"}


class RecordError(PteLabError):
    """The recorded run failed: ExecuTorch refused a step, or a value could not be logged as ETDump logs it."""


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    lib = native.library()
    if (lib.pte_lab_shapes_logged_size() != ctypes.sizeof(_Logged)
            or lib.pte_lab_shapes_input_size() != ctypes.sizeof(_Input)):
        raise PteLabError("the shape recorder's record layout does not match this pte_lab")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    sig = {
        "pte_lab_shapes_record": ([cp, cp, cp, ctypes.POINTER(_Input), ctypes.c_uint64, ctypes.c_uint64], vp),
        "pte_lab_shapes_outcome": ([vp, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64)],
                                   ctypes.c_int32),
        "pte_lab_shapes_count": ([vp], ctypes.c_uint64),
        "pte_lab_shapes_read": ([vp, ctypes.POINTER(_Logged), ctypes.c_uint64], None),
        "pte_lab_shapes_free": ([vp], None),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def _inputs(inputs: list) -> tuple[ctypes.Array, list]:
    """The C inputs, and the buffers they point into (kept alive through the run)."""
    arr = (_Input * max(1, len(inputs)))()
    keep = []
    for i, v in enumerate(inputs):
        r = arr[i]
        if isinstance(v, tuple):
            code, shape, data = v
            if len(shape) > _MAX_DIMS:
                raise RecordError(f"input {i} has {len(shape)} dims; ExecuTorch takes at most {_MAX_DIMS}")
            buf = ctypes.create_string_buffer(bytes(data), max(1, len(data)))
            keep.append(buf)
            r.kind, r.scalar_type, r.dim = 0, int(code), len(shape)
            for d, n in enumerate(shape):
                r.sizes[d] = int(n)
            r.data, r.nbytes = ctypes.cast(buf, ctypes.c_void_p), len(data)
        elif isinstance(v, bool):
            r.kind, r.int_value = 3, int(v)
        elif isinstance(v, int):
            r.kind, r.int_value = 1, v
        elif isinstance(v, float):
            r.kind, r.double_value = 2, v
        else:
            raise RecordError(f"input {i} is a {type(v).__name__}: the shape recorder takes tensors, ints, floats "
                              "and bools")
    return arr, keep


def _failure(step: int, code: int, detail: int) -> str:
    if step == 5:
        return f"a value of tag {detail} was logged, which ETDump cannot log (it aborts)"
    if step == 6:
        return (f"the logged tensors' bytes outgrew the debug buffer ({detail:,} B needed; ETDump aborts): "
                "Ran out of space to store intermediate outputs")
    where = _STEPS.get(step, f"step {step}")
    if step == 3 and detail >= 0:
        where = f"set_input of input {detail}"
    return f"{where} failed with error {error_name(code)}"


def record(path: str, method: str, inputs: list, debug_buffer: int,
           data_path: str | None = None) -> list[tuple[int, "tuple[int, ...] | None"]]:
    """Run ``method`` of the program at ``path`` once on ``inputs`` (plain data, see the module) with the
    recorder attached, its tensors' bytes kept in a buffer of ``debug_buffer`` bytes as ETDump's are: every value
    its instructions wrote, ``(instruction, sizes)`` in order (sizes None: not a tensor), the method's own tensor
    outputs left out. Raises :class:`RecordError` for a step ExecuTorch refused (named, with its error code)."""
    lib = _lib()
    arr, keep = _inputs(inputs)
    h = lib.pte_lab_shapes_record(os.fsencode(path), os.fsencode(data_path or ""), method.encode(), arr,
                                  len(inputs), int(debug_buffer))
    try:
        code, detail = ctypes.c_int32(0), ctypes.c_int64(0)
        step = lib.pte_lab_shapes_outcome(h, ctypes.byref(code), ctypes.byref(detail))
        if step:
            raise RecordError(f"method {method!r}: {_failure(step, code.value, detail.value)}")
        n = int(lib.pte_lab_shapes_count(h))
        out = (_Logged * max(1, n))()
        lib.pte_lab_shapes_read(h, out, n)
        return [(int(r.instruction), None if r.dim < 0 else tuple(r.sizes[:r.dim])) for r in out[:n]]
    finally:
        lib.pte_lab_shapes_free(h)
        del keep
