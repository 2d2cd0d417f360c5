"""Deployment sizing: every byte a method needs, measured, and proven sufficient and tight.

``pte_lab.sizes("model.pte")`` loads and runs each method the way a bare-metal
build would, with pools it owns (``native/sizing.cpp``): a method allocator,
the planned arenas at their planned sizes, a temp allocator. The runner
records each pool's high-water mark; the allocation counter preloaded into the
worker that hosts it counts what lies outside ExecuTorch's allocators (what
delegates and kernels ``malloc``, anonymous mappings) and the kernel says how
much of the program file is mapped in. :meth:`Sizes.verify` then loads and
runs every method again with pools of exactly the reported sizes, and with a
method pool one byte smaller, which ExecuTorch must refuse.

Runs always happen in an isolated worker (a fresh process: clean counts, and a
crash cannot take the caller down).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ..devices import device_name
from ..errors import EXECUTORCH_ERROR_CODES, PteLabError, RuntimeCrashedError
from ..units import human_bytes

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["sizes", "Sizes", "MethodSizes", "SIZES_COLUMNS", "SizingError"]

#: one row per (method, part, device) in :meth:`Sizes.table`
SIZES_COLUMNS = ["method", "part", "device", "bytes", "source"]

#: the parts of a method's run-time memory, in the order a stacked bar draws them: part ->
#: (who measured it: "file", "runner", "counter" or "kernel"; what it is)
PARTS = {
    "planned arenas": ("file", "non_const_buffer_sizes, as ExecuTorch's MethodMeta reads them; "
                               "the runner allocates exactly these"),
    "method allocator": ("runner", "high-water mark of the method allocator during load_method"),
    "temp allocator": ("runner", "peak of the temp allocator over load_method and the runs, at least what "
                                 "kernel resolution needs"),
    "heap kept by load_program": ("counter", "malloc'd by Program::load and still held"),
    "heap kept by load_method": ("counter", "malloc'd during load_method and still held (delegates' state, "
                                            "packed weights, kernels)"),
    "heap kept by execute": ("counter", "malloc'd during the runs and still held (workspaces, thread pools)"),
    "anonymous mappings": ("counter", "mmap'd outside malloc during the steps and still held"),
    "program file resident": ("kernel", "pages of the program file (and .ptd) mapped in and resident "
                                        "(Rss in /proc/self/smaps); the loader mlocks them where the "
                                        "memlock limit allows, as Runtime.load_program does"),
}

#: sizes of pools a method needs to be given (what a bare-metal build sizes by hand)
POOLS = ("planned arenas", "method allocator", "temp allocator")

#: the pool size that asks the runner to count instead of capping
_COUNTING = 2**64 - 1
_MEMORY_ALLOCATION_FAILED = 0x21


class SizingError(PteLabError):
    """A method could not be sized (the runtime refused it at some step)."""


class _PoolUse(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "method_peak", "method_calls", "method_failed", "method_max_alignment",
        "temp_peak", "temp_calls", "temp_failed", "temp_max_alignment")]


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    from . import native

    lib = native.library()
    from .memory import Counts

    if (lib.pte_lab_sizing_struct_size() != ctypes.sizeof(_PoolUse)
            or lib.pte_lab_sizing_counts_size() != ctypes.sizeof(Counts)):
        raise PteLabError("the sizing runner's record layout does not match this pte_lab")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    sig = {
        "pte_lab_sizing_resolution_bytes_per_arg": ([], ctypes.c_uint64),
        "pte_lab_sizing_open": ([cp, cp, ctypes.POINTER(ctypes.c_int32)], vp),
        "pte_lab_sizing_close": ([vp], None),
        "pte_lab_sizing_planned_count": ([vp, cp], ctypes.c_int64),
        "pte_lab_sizing_planned_buffer": ([vp, cp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int32),
                                           ctypes.POINTER(ctypes.c_int32)], ctypes.c_int64),
        "pte_lab_sizing_prepare": ([vp, cp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64], ctypes.c_int32),
        "pte_lab_sizing_load_method": ([vp, cp], ctypes.c_int32),
        "pte_lab_sizing_set_inputs": ([vp], ctypes.c_int32),
        "pte_lab_sizing_execute": ([vp], ctypes.c_int32),
        "pte_lab_sizing_pools": ([vp, ctypes.POINTER(_PoolUse)], None),
        "pte_lab_sizing_last_step": ([vp, ctypes.POINTER(Counts), ctypes.POINTER(Counts)], ctypes.c_int32),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def _named(code: int) -> str:
    return f"{EXECUTORCH_ERROR_CODES.get(code, 'unknown error')} (0x{code:02x})"


# ------------------------------------------------------------------ in the worker
def run_method(path: str, name: str, method_pool: int | None = None, temp_pool: int | None = None,
               alignment: int = 4096, runs: int = 2, data_path: str | None = None) -> dict:
    """Load and run ``name`` with the sizing runner; what each step took (plain data).

    ``method_pool``/``temp_pool`` None: counting pools; else exact pools of that many bytes
    whose base is aligned to ``alignment``. Runs where it is called (the worker). Each step's
    allocations are counted right around it, inside the runner (``None`` without the counter).
    """
    from . import memory

    def file_rss() -> int | None:  # the program's file and its .ptd
        got = [memory.file_rss(p) for p in (path, data_path) if p]
        return None if None in got else sum(got)

    lib = _lib()
    bname = name.encode()
    out: dict = {"method": name, "error": 0, "step": None, "steps": {},
                 "resolution_bytes_per_arg": int(lib.pte_lab_sizing_resolution_bytes_per_arg())}

    def record(label: str, handle, rc: int, file_before: int | None) -> int:
        before, after = memory.Counts(), memory.Counts()
        if handle and lib.pte_lab_sizing_last_step(handle, ctypes.byref(before), ctypes.byref(after)):
            b, a = before.as_dict(), after.as_dict()
            rss = file_rss()
            out["steps"][label] = {
                "heap": a["heap_live"] - b["heap_live"], "heap_peak": a["heap_peak"] - b["heap_live"],
                "anon": a["anon_mapped"] - b["anon_mapped"], "file_mapped": a["file_mapped"] - b["file_mapped"],
                "file_rss": None if rss is None or file_before is None else rss - file_before}
        else:
            out["steps"][label] = None
        if rc and not out["error"]:
            out["error"], out["step"] = int(rc), label
        return rc

    err = ctypes.c_int32(0)
    handle = lib.pte_lab_sizing_open(path.encode(), (data_path or "").encode(), ctypes.byref(err))
    if not handle:
        out["error"], out["step"] = int(err.value), "load_program"
        return out
    try:
        record("load_program", handle, 0, 0)
        n = lib.pte_lab_sizing_planned_count(handle, bname)
        if n < 0:
            out["error"], out["step"] = int(-n), "method_meta"
            return out
        planned = []
        for i in range(n):
            dt, di = ctypes.c_int32(), ctypes.c_int32()
            size = lib.pte_lab_sizing_planned_buffer(handle, bname, i, ctypes.byref(dt), ctypes.byref(di))
            if size < 0:
                out["error"], out["step"] = int(-size), "method_meta"
                return out
            planned.append((i + 1, device_name(dt.value, di.value), int(size)))
        out["planned"] = planned
        rc = lib.pte_lab_sizing_prepare(handle, bname, _COUNTING if method_pool is None else method_pool,
                                        _COUNTING if temp_pool is None else temp_pool, alignment)
        if rc:
            out["error"], out["step"] = int(rc), "prepare"
            return out
        rss = file_rss()
        if record("load_method", handle, lib.pte_lab_sizing_load_method(handle, bname), rss):
            return _pools(lib, handle, out)
        rc = lib.pte_lab_sizing_set_inputs(handle)
        if rc:
            out["error"], out["step"] = int(rc), "set_inputs"
            return _pools(lib, handle, out)
        for r in range(runs):
            rss = file_rss()
            if record("first_execute" if r == 0 else f"execute {r + 1}", handle,
                      lib.pte_lab_sizing_execute(handle), rss):
                break
        out["file_rss"] = file_rss()
        return _pools(lib, handle, out)
    finally:
        lib.pte_lab_sizing_close(handle)


def _pools(lib, handle, out: dict) -> dict:
    use = _PoolUse()
    lib.pte_lab_sizing_pools(handle, ctypes.byref(use))
    out["pools"] = {n: int(getattr(use, n)) for n, _ in _PoolUse._fields_}
    return out


# ------------------------------------------------------------------ results
@dataclass(frozen=True)
class MethodSizes:
    """What one method needs at run time (bytes), and how each figure was had."""

    method: str
    #: (mem_id, device, bytes) of every planned arena, as ExecuTorch's MethodMeta reads them
    planned: tuple[tuple[int, str, int], ...]
    #: the method-allocator pool: high-water mark of load_method (measured)
    method_allocator: int
    method_allocations: int
    #: the temp-allocator pool to give: max(temp_peak, resolution_minimum)
    temp_allocator: int
    #: the temp allocator's measured peak over load_method and the runs
    temp_peak: int
    #: bytes Method::init needs in the temp pool to resolve its largest kernel call there (from the file)
    resolution_minimum: int
    #: the pools' base alignment the figures hold for: the largest alignment any allocation asked
    alignment: int
    #: measured by the allocation counter (None where it is not available)
    heap_load_method: int | None
    heap_execute: int | None
    heap_execute_peak: int | None
    anonymous_mapped: int | None
    file_resident: int | None
    heap_load_program: int | None
    runs: int
    #: the raw per-step measurements
    steps: dict = field(default_factory=dict, compare=False, repr=False)

    def planned_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, dev, b in self.planned:
            out[dev] = out.get(dev, 0) + b
        return out

    def parts(self) -> dict[str, int | None]:
        """The run-time bytes by part (:data:`PARTS`); planned arenas summed over devices."""
        return {
            "planned arenas": sum(b for _, _, b in self.planned),
            "heap kept by load_program": self.heap_load_program,
            "method allocator": self.method_allocator,
            "temp allocator": self.temp_allocator,
            "heap kept by load_method": self.heap_load_method,
            "heap kept by execute": self.heap_execute,
            "anonymous mappings": self.anonymous_mapped,
            "program file resident": self.file_resident,
        }


@dataclass
class Sizes:
    """Per method: the pools it needs and what it takes beyond them (see :data:`PARTS`)."""

    path: str
    data_path: str | None
    methods: dict[str, MethodSizes]
    #: methods that could not be sized: name -> why
    skipped: dict[str, str]
    counted: bool
    executorch_version: str
    #: per method: the verification's outcome (None until :meth:`verify` ran)
    verified: dict[str, dict] | None = None

    def table(self) -> "pd.DataFrame":
        """One row per method, part and device (:data:`SIZES_COLUMNS`)."""
        import pandas as pd

        rows = []
        for m in self.methods.values():
            for mem_dev, b in sorted(m.planned_by_device().items(), key=lambda kv: (kv[0] != "cpu", kv[0])):
                rows.append((m.method, "planned arenas", mem_dev, b, PARTS["planned arenas"][0]))
            for part, b in m.parts().items():
                if part == "planned arenas" or b is None:
                    continue
                rows.append((m.method, part, "cpu", b, PARTS[part][0]))
        df = pd.DataFrame(rows, columns=SIZES_COLUMNS)
        df.attrs.update(path=self.path, counted=self.counted, executorch=self.executorch_version)
        return df

    def pools(self) -> "pd.DataFrame":
        """One row per method: the pool sizes a bare-metal build gives it."""
        import pandas as pd

        rows = [(m.method, m.method_allocator, m.temp_allocator, m.alignment,
                 tuple(b for _, _, b in m.planned), tuple(d for _, d, _ in m.planned))
                for m in self.methods.values()]
        return pd.DataFrame(rows, columns=["method", "method_pool", "temp_pool", "alignment",
                                           "planned_buffers", "planned_devices"])

    def to_dict(self) -> dict:
        return {
            "schema": "pte_lab.sizes", "version": 1, "path": self.path, "executorch": self.executorch_version,
            "counted": self.counted,
            "parts": {p: {"source": how, "what": what} for p, (how, what) in PARTS.items()},
            "methods": {n: {k: v for k, v in asdict(m).items() if k != "steps"} | {"parts": m.parts()}
                        for n, m in self.methods.items()},
            "skipped": self.skipped,
            "verified": self.verified,
        }

    def verify(self) -> dict[str, dict]:
        """Load and run each method with pools of exactly the reported sizes, then with a method pool
        one byte smaller; the first must work and the second be refused (MemoryAllocationFailed).

        Returns (and keeps in :attr:`verified`) per method: ``sufficient``, ``tight`` and what
        ExecuTorch said. Raises :class:`SizingError` when a figure is not sufficient.
        """
        from .program import _checked

        pte, _ = _checked(self.path)
        with _Session(self.path, self.data_path, sorted(
                {d for m in self.methods.values() for _, d, _ in m.planned if d != "cpu"})) as session:
            self.verified = {}
            for m in self.methods.values():
                why = session.cannot_run(pte.methods[m.method])  # registers the operators it needs
                self.verified[m.method] = session.verify(m) if why is None else {
                    "sufficient": False, "sufficient_error": why, "tight": False, "smaller_error": None,
                    "method_pool": m.method_allocator, "temp_pool": m.temp_allocator, "alignment": m.alignment}
        _raise_if_insufficient(self.verified)
        return self.verified

    def _repr_html_(self) -> str:
        from html import escape

        t = self.table()
        t["size"] = t["bytes"].map(human_bytes)
        notes = [f"{escape(n)}: not sized ({escape(why)})" for n, why in self.skipped.items()]
        for n, v in (self.verified or {}).items():
            verdict = ("pools of exactly these sizes load and run it; one byte less is refused" if v["tight"]
                       else f"not proven: {v['sufficient_error'] or v['smaller_error'] or 'not tight'}")
            notes.append(f"{escape(n)}: {escape(verdict)}")
        return (f"<div><b>Sizes</b> of {escape(os.path.basename(self.path))} (executorch "
                f"{escape(self.executorch_version)})</div>" + t.to_html(index=False)
                + "".join(f"<div>{line}</div>" for line in notes))

    def __repr__(self) -> str:
        return f"<Sizes {os.path.basename(self.path)!r}: {', '.join(self.methods)}>"


class _Session:
    """A fresh counted worker hosting an Engine (emulated devices where the file needs them and no
    real allocator is registered), for sizing and verifying one program's methods."""

    def __init__(self, path: str, data_path: str | None, devices: list[str]):
        self.path, self.data_path, self.devices = path, data_path, devices

    def __enter__(self) -> "_Session":
        from . import native

        native.library_path()  # built here, not by a compiler started inside the counted worker
        self._start()
        return self

    def _start(self) -> None:
        from .isolate import Worker

        self.engine = Worker(self.devices, self.devices)
        self.registered = set(self.engine.call("registered_backends"))

    def restart(self) -> None:
        """A fresh worker after the last one died."""
        self.engine.close()
        self._start()

    def __exit__(self, *exc) -> None:
        self.engine.close()

    def cannot_run(self, plan) -> str | None:
        """Why the runtime cannot load ``plan``'s method here (None: it can)."""
        lacking = sorted({d.backend for d in plan.delegates} - self.registered)
        if lacking:
            return f"backend {', '.join(lacking)} is not registered in this ExecuTorch build"
        got = self.engine.call("provide_operators", plan.operators)
        if got["missing"]:
            return f"operators this ExecuTorch build lacks: {', '.join(got['missing'])}"
        return None

    def run(self, name: str, method_pool: int | None, temp_pool: int | None, alignment: int, runs: int) -> dict:
        return self.engine.call("size_method", self.path, name, method_pool, temp_pool, alignment, runs,
                                self.data_path)

    def verify(self, m: MethodSizes) -> dict:
        ok = self.run(m.method, m.method_allocator, m.temp_allocator, m.alignment, 1)
        smaller = self.run(m.method, m.method_allocator - 1, m.temp_allocator, m.alignment, 0) \
            if m.method_allocator else None
        return {
            "sufficient": ok["error"] == 0,
            "sufficient_error": None if ok["error"] == 0 else f"{_named(ok['error'])} at {ok['step']}",
            "tight": smaller is not None and smaller["error"] == _MEMORY_ALLOCATION_FAILED
            and smaller["step"] == "load_method",
            "smaller_error": None if smaller is None or not smaller["error"]
            else f"{_named(smaller['error'])} at {smaller['step']}",
            "method_pool": m.method_allocator, "temp_pool": m.temp_allocator, "alignment": m.alignment,
        }


def sizes(source, methods: list[str] | None = None, *, data_path=None, runs: int = 2,
          verify: bool = False, progress=None) -> Sizes:
    """Size every method of a ``.pte`` (or those named): see :mod:`pte_lab.runtime.sizing`.

    ``source`` is a path or an opened :class:`~pte_lab.model.Pte` (its ``.ptd``
    is used when it was opened with one; else pass ``data_path``). Each method
    is loaded and run ``runs`` times (inputs of the planned shapes,
    zero-filled) in a fresh isolated worker; ``verify=True`` then proves the
    figures in the same worker (see :meth:`Sizes.verify`). Methods the runtime
    cannot run here (a backend or operators it lacks) are listed in
    :attr:`Sizes.skipped` with the reason.

    What is process-wide lands on the first method that triggers it (a
    kernel's first call creating the thread pool, say): size one method alone
    to see it without others. ``progress``: None (silent), True (a bar over the
    methods) or a callable taking one line per step (see :mod:`pte_lab.progress`).
    """
    from .info import executorch_version
    from .program import _checked

    path = getattr(source, "path", source)
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise PteLabError(f"sizes() needs a .pte file on disk; got {source!r}")
    path = os.fspath(path)
    if data_path is None and getattr(getattr(source, "data", None), "path", None):
        data_path = source.data.path
    data_path = None if data_path is None else os.fspath(data_path)
    if runs < 1:
        raise ValueError(f"runs must be at least 1 (got {runs})")
    pte, _ = _checked(path)
    if pte.bundled is not None:
        raise PteLabError(f"{path} is a bundled program (.bpte): size the .pte it carries")
    names = list(pte.methods) if methods is None else list(methods)
    for n in names:
        if n not in pte.methods:
            raise KeyError(f"no method {n!r}; the program has {list(pte.methods)}")
    devices = sorted({d for n in names for d in pte.methods[n].devices})
    out: dict[str, MethodSizes] = {}
    skipped: dict[str, str] = {}
    verified: dict[str, dict] | None = {} if verify else None
    from ..progress import reporter

    report = reporter(progress, total=len(names), desc="sizing")
    report.step("starting an isolated worker (imports ExecuTorch)")
    with report, _Session(path, data_path, devices) as session:
        for k, n in enumerate(names, 1):
            if k > 1:
                report.advance()
            report.step(f"method {n!r} ({k}/{len(names)}): load and run {runs}x" + (", then verify" if verify else ""))
            plan = pte.methods[n]
            try:
                why = session.cannot_run(plan)
                if why is None:
                    r = session.run(n, None, None, 4096, runs)
                    if r["error"]:
                        why = f"ExecuTorch refused it: {_named(r['error'])} at {r['step']}"
                if why is None:
                    out[n] = _method_sizes(r, plan, runs)
                    if verify:
                        verified[n] = session.verify(out[n])
            except RuntimeCrashedError as exc:  # the worker died on this method: the others still get sized
                why = f"the runtime crashed ({exc.signal or f'exit status {exc.exit_code}'}) while sizing it"
                out.pop(n, None)
                session.restart()
            if why is not None:
                skipped[n] = why
        report.advance()
        counted = session.engine.counted
    _raise_if_insufficient(verified or {})
    return Sizes(path, data_path, out, skipped, counted, executorch_version(), verified)


def _raise_if_insufficient(verified: dict[str, dict]) -> None:
    bad = [n for n, v in verified.items() if not v["sufficient"]]
    if bad:
        raise SizingError("pools of the reported sizes did not suffice for "
                          + ", ".join(f"{n!r} ({verified[n]['sufficient_error']})" for n in bad))


def _method_sizes(r: dict, plan, runs: int) -> MethodSizes:
    pools = r["pools"]
    steps = r["steps"]
    # Method::init resolves each kernel call's operator with TensorMeta lists taken from the temp
    # allocator when its pool is at least this large, else from the method allocator
    resolution = r["resolution_bytes_per_arg"] * max((len(i.args) for i in plan.instructions if i.kind == "KernelCall"), default=0)

    def get(label, key):
        s = steps.get(label)
        return None if s is None else s[key]

    execs = [k for k in steps if k.endswith("execute") or k.startswith("execute")]
    heap_exec = None if any(steps[k] is None for k in execs) else sum(steps[k]["heap"] for k in execs)
    heap_peak = None if any(steps[k] is None for k in execs) else max(
        (steps[k]["heap_peak"] for k in execs), default=0)
    counted = [steps.get(k) for k in ("load_program", "load_method", *execs)]
    anon = None if any(c is None for c in counted) else sum(c["anon"] for c in counted)
    return MethodSizes(
        method=r["method"],
        planned=tuple(tuple(p) for p in r["planned"]),
        method_allocator=pools["method_peak"],
        method_allocations=pools["method_calls"],
        temp_allocator=max(pools["temp_peak"], resolution),
        temp_peak=pools["temp_peak"],
        resolution_minimum=resolution,
        alignment=max(16, pools["method_max_alignment"], pools["temp_max_alignment"]),
        heap_load_method=get("load_method", "heap"),
        heap_execute=heap_exec,
        heap_execute_peak=heap_peak,
        anonymous_mapped=anon,
        file_resident=r.get("file_rss"),
        heap_load_program=get("load_program", "heap"),
        runs=runs,
        steps=steps,
    )
