"""The sizing runner, driven where the runtime runs (the isolated worker): one method, pools it owns.

``native/sizing.cpp`` loads and runs a method the way a bare-metal build
does: a MemoryManager of ExecuTorch's own MemoryAllocator (method pool),
HierarchicalAllocator (the planned arenas at their planned sizes) and a temp
allocator (or none, as many runners pass), each pool either counting (its
high-water mark recorded) or of an exact size. :func:`run_method` drives it
step by step, setting every input before every execute as an application
does (every tensor input at its planned shape, or a dynamic one at a smaller shape given), and returns what
each step took as plain data (:class:`RunnerResult`),
which crosses the worker's pipe to the caller's front
(:mod:`pte_lab.runtime.sizing`).
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

from ..devices import device_name
from ..errors import PteLabError
from ..vocabulary import ValueKind
from . import memory, native
from .sizing_runner_records import INPUT_VALUES, MethodIO, PoolUse, RunnerResult, Step, StepKind, StepUse

__all__ = ["run_method", "RunnerResult", "Step", "StepKind", "StepUse", "PoolUse", "MethodIO", "COUNTING", "NO_TEMP",
           "INPUT_VALUES", "file_loader_default_alignment"]

#: the pool size that asks the runner to count instead of capping
COUNTING = 2**64 - 1
#: the temp pool "size" that asks for no temp allocator at all (the MemoryManager gets nullptr)
NO_TEMP = 2**64 - 2


class _PoolUse(ctypes.Structure):
    """Layout of ``PteLabPoolUse`` in sizing.cpp (checked against its size when loaded)."""

    _fields_ = [(n, ctypes.c_uint64) for n in (
        "method_peak", "method_calls", "method_failed", "method_max_alignment",
        "temp_peak", "temp_calls", "temp_failed", "temp_max_alignment",
        "temp_run_peak", "temp_run_calls", "temp_run_padded")]


#: sizing.cpp's scalar_type for an input or output that is not a tensor
_NOT_A_TENSOR = -1


class _IO(ctypes.Structure):
    """Layout of ``PteLabIO`` in sizing.cpp (checked against its size when loaded)."""

    _fields_ = [("tag", ctypes.c_char * 24), ("tag_code", ctypes.c_int32), ("scalar_type", ctypes.c_int32), ("dim", ctypes.c_int32),
                ("planned", ctypes.c_int32), ("has_value", ctypes.c_int32), ("nbytes", ctypes.c_uint64),
                ("sizes", ctypes.c_int64 * 16), ("dim_order", ctypes.c_int64 * 16), ("int_value", ctypes.c_int64),
                ("double_value", ctypes.c_double)]


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    lib = native.library()
    if (lib.pte_lab_sizing_struct_size() != ctypes.sizeof(_PoolUse)
            or lib.pte_lab_sizing_counts_size() != ctypes.sizeof(memory.Counts)):
        raise PteLabError("the sizing runner's record layout does not match this pte_lab")
    if lib.pte_lab_sizing_io_struct_size() != ctypes.sizeof(_IO):
        raise PteLabError("the sizing runner's input/output record does not match this pte_lab")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    sig = {
        "pte_lab_sizing_resolution_bytes_per_arg": ([], ctypes.c_uint64),
        "pte_lab_sizing_open": ([cp, cp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int32)], vp),
        "pte_lab_sizing_file_loader_default_alignment": ([], ctypes.c_uint64),
        "pte_lab_sizing_close": ([vp], None),
        "pte_lab_sizing_planned_count": ([vp, cp], ctypes.c_int64),
        "pte_lab_sizing_planned_buffer": ([vp, cp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int32),
                                           ctypes.POINTER(ctypes.c_int32)], ctypes.c_int64),
        "pte_lab_sizing_prepare": ([vp, cp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64],
                                   ctypes.c_int32),
        "pte_lab_sizing_io_count": ([vp, ctypes.c_int32], ctypes.c_int32),
        "pte_lab_sizing_io": ([vp, ctypes.c_int32, ctypes.c_uint64, ctypes.POINTER(_IO)], ctypes.c_int32),
        "pte_lab_sizing_load_method": ([vp, cp], ctypes.c_int32),
        "pte_lab_sizing_input_shape": ([vp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32],
                                       ctypes.c_int32),
        "pte_lab_sizing_set_inputs": ([vp], ctypes.c_int32),
        "pte_lab_sizing_execute": ([vp], ctypes.c_int32),
        "pte_lab_sizing_pools": ([vp, ctypes.POINTER(_PoolUse)], None),
        "pte_lab_sizing_platform": ([ctypes.c_int32], ctypes.c_int32),
        "pte_lab_sizing_platform_use": ([ctypes.POINTER(ctypes.c_uint64)] * 3, None),
        "pte_lab_sizing_last_step": ([vp, ctypes.POINTER(memory.Counts), ctypes.POINTER(memory.Counts)],
                                     ctypes.c_int32),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def file_loader_default_alignment() -> int:
    """FileDataLoader's default alignment here (alignof(std::max_align_t)): what ``FileDataLoader::from(path)``
    aligns the buffers it reads to."""
    return int(_lib().pte_lab_sizing_file_loader_default_alignment())


def _io(lib, handle, output: bool) -> tuple[MethodIO, ...]:
    out = []
    for i in range(max(0, lib.pte_lab_sizing_io_count(handle, int(output)))):
        r = _IO()
        if lib.pte_lab_sizing_io(handle, int(output), i, ctypes.byref(r)):
            break
        kind = r.tag.decode(errors="replace")
        value = None
        if r.has_value:
            value = (bool(r.int_value) if kind == ValueKind.BOOL else float(r.double_value) if kind == ValueKind.DOUBLE
                     else int(r.int_value))
        dtype = None if r.scalar_type == _NOT_A_TENSOR else int(r.scalar_type)
        out.append(MethodIO(i, kind, int(r.tag_code), dtype,
                            tuple(r.sizes[:r.dim]),
                            tuple(r.dim_order[:r.dim]), int(r.nbytes), bool(r.planned), value))
    return tuple(out)


def run_method(path: str, name: str, *, method_pool: int | None = None, temp_pool: int | None = None,
               alignment: int = 4096, runs: int = 2, data_path: str | None = None,
               planned_alignment: int = 0, file_loader: int = 0, bare_metal: bool = False,
               input_shapes: dict[int, tuple[int, ...]] | None = None) -> RunnerResult:
    """Load and run ``name`` with the sizing runner; what each step took.

    ``method_pool``/``temp_pool`` None: counting pools; else exact pools of that many bytes
    whose base is aligned to ``alignment`` and no more; ``temp_pool`` :data:`NO_TEMP`: no temp
    allocator. Host arenas' bases are aligned to ``planned_alignment`` and no more (0: a page).
    ``file_loader`` 0: the program is mapped (MmapDataLoader, as Runtime.load_program does); else it
    is read by a FileDataLoader of that alignment, which mallocs what it reads (the heap differs, the
    pools do not). ``bare_metal``: the platform layer's allocator (et_pal_allocate, where a method with no
    temp allocator takes its temp memory) refuses every request, as a bare-metal platform layer's does;
    else it is this host's (malloc). Either way what was asked of it is counted.
    Every input is set before every execute (:data:`INPUT_VALUES`); ``input_shapes`` (input position -> shape)
    gives a dynamic input a smaller shape than its planned one (ExecuTorch resizes it at set_input, as an
    app's smaller input; its zeros are built at that shape). Runs where it is called
    (the worker). Each step's allocations are counted right around it, inside the runner
    (``None`` without the counter).
    """
    lib = _lib()
    bname = name.encode()
    out = RunnerResult(name, int(lib.pte_lab_sizing_resolution_bytes_per_arg()))
    if lib.pte_lab_sizing_platform(int(bare_metal)):
        raise PteLabError("ExecuTorch refused pte_lab's platform layer (register_pal)")
    out.bare_metal = bare_metal
    try:
        return _run(lib, out, path, bname, method_pool=method_pool, temp_pool=temp_pool, alignment=alignment,
                    runs=runs, data_path=data_path, planned_alignment=planned_alignment, file_loader=file_loader,
                    input_shapes=input_shapes or {})
    finally:
        calls, asked, refused = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        lib.pte_lab_sizing_platform_use(ctypes.byref(calls), ctypes.byref(asked), ctypes.byref(refused))
        out.platform_calls, out.platform_largest, out.platform_refused = calls.value, asked.value, refused.value
        lib.pte_lab_sizing_platform(0)


def _run(lib, out: RunnerResult, path: str, bname: bytes, *, method_pool, temp_pool, alignment, runs, data_path,
         planned_alignment, file_loader, input_shapes) -> RunnerResult:
    def file_rss() -> int | None:  # the program's file and its .ptd
        got = [memory.file_rss(p) for p in (path, data_path) if p]
        return None if None in got else sum(got)

    def record(label: Step, handle, rc: int, file_before: int | None) -> int:
        before, after = memory.Counts(), memory.Counts()
        if handle and lib.pte_lab_sizing_last_step(handle, ctypes.byref(before), ctypes.byref(after)):
            rss = file_rss()
            out.steps[label] = StepUse(
                heap=after.heap_live - before.heap_live, heap_peak=after.heap_peak - before.heap_live,
                anon=after.anon_mapped - before.anon_mapped, file_mapped=after.file_mapped - before.file_mapped,
                file_rss=None if rss is None or file_before is None else rss - file_before)
        else:
            out.steps[label] = None
        out.fail(rc, label)
        return rc

    err = ctypes.c_int32(0)
    handle = lib.pte_lab_sizing_open(os.fsencode(path), os.fsencode(data_path or ""), file_loader, ctypes.byref(err))
    if not handle:
        return out.fail(err.value, Step(StepKind.LOAD_PROGRAM))
    try:
        record(Step(StepKind.LOAD_PROGRAM), handle, 0, 0)
        n = lib.pte_lab_sizing_planned_count(handle, bname)
        if n < 0:
            return out.fail(-n, Step(StepKind.METHOD_META))
        planned = []
        for i in range(n):
            dt, di = ctypes.c_int32(), ctypes.c_int32()
            size = lib.pte_lab_sizing_planned_buffer(handle, bname, i, ctypes.byref(dt), ctypes.byref(di))
            if size < 0:
                return out.fail(-size, Step(StepKind.METHOD_META))
            planned.append((i + 1, device_name(dt.value, di.value), int(size)))
        out.planned = tuple(planned)
        rc = lib.pte_lab_sizing_prepare(handle, bname, COUNTING if method_pool is None else method_pool,
                                        COUNTING if temp_pool is None else temp_pool, alignment, planned_alignment)
        if rc:
            return out.fail(rc, Step(StepKind.PREPARE))
        if not record(Step(StepKind.LOAD_METHOD), handle, lib.pte_lab_sizing_load_method(handle, bname), file_rss()):
            out.inputs, out.outputs = _io(lib, handle, False), _io(lib, handle, True)
            for i, shape in sorted(input_shapes.items()):
                dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
                if out.fail(lib.pte_lab_sizing_input_shape(handle, int(i), dims, len(shape)),
                            Step(StepKind.SET_INPUTS, 1)).error:
                    runs = 0
                    break
            for r in range(1, runs + 1):
                if out.fail(lib.pte_lab_sizing_set_inputs(handle), Step(StepKind.SET_INPUTS, r)).error:
                    break
                if record(Step(StepKind.EXECUTE, r), handle, lib.pte_lab_sizing_execute(handle), file_rss()):
                    break
            out.file_rss = file_rss()
        use = _PoolUse()
        lib.pte_lab_sizing_pools(handle, ctypes.byref(use))
        out.pools = PoolUse(**{n: int(getattr(use, n)) for n, _ in _PoolUse._fields_})
        return out
    finally:
        lib.pte_lab_sizing_close(handle)
