"""``pte_lab.load``: ExecuTorch's loader with its memory accounted and its errors named."""

from __future__ import annotations

import os
import re
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..arguments import BOOL, PATH, arguments, optional
from ..devices import device_name
from ..errors import (
    BackendUnavailableError,
    DeviceAllocationError,
    ExecuTorchError,
    InputError,
    MemoryBudgetError,
    NotFoundError,
    OperatorMissingError,
    PteLabError,
    error_name,
)
from ..format import mem_id_of
from ..model import Pte
from ..model.bundled import compare_outputs, unplain
from ..model.findings import REFUSED_BY_RUNTIME, shared_arenas_message, sharing_host_methods
from ..units import first_few, human_bytes
from .checked import checked
from .device import is_emulated, ledger_frame
from .info import honours_device_plans
from .inputs import input_problem
from .isolate import LocalEngine, RemoteError, Worker
from .operators import missing_message
from .schemas import program_schemas
from .sizing import sizes

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..model import Method
    from .engine import MethodMeta, StepMeasure
    from .sizing import Sizes

__all__ = ["load", "LabProgram", "LabMethod", "SharedArenasWarning", "OperatorLibraryWarning"]

_CODE_RE = re.compile(r"error:? 0x:?([0-9a-fA-F]+)")
_ALLOC_RE = re.compile(r"Failed to allocate (\d+) bytes for buffer (\d+) on device (\d+):(\d+)")
REPORT_COLUMNS = ["step", "method", "device", "predicted_bytes", "measured_bytes", "measured_by", "seconds"]
#: the method column of steps that belong to the whole program (load_program, release)
PROGRAM = "(program)"
#: why measured host bytes exceed the prediction (the prediction counts planned arenas only)
HOST_BYTES_NOTE = ("Predicted bytes are the planned arenas. Measured host bytes also hold ExecuTorch's method "
                   "allocator, what kernels and delegates allocate themselves (XNNPACK's packed weights...) and "
                   "the outputs handed to Python, so they exceed the prediction. With isolate=True they are exact "
                   "(every malloc and anonymous mapping of the worker counted) and exclude the emulated device's "
                   "bytes; in this process they are glibc's statistics, which count the emulated device's bytes "
                   "too (it is host memory). pte_lab.sizes() splits them by part.")


class SharedArenasWarning(UserWarning):
    """Two host-only methods of one program share arenas: running one overwrites the other's intermediates.

    Warned once per program, when a second host-only method is loaded."""


class OperatorLibraryWarning(UserWarning):
    """pte_lab registered one of ExecuTorch's own operator libraries because a method calls its operators.

    Warned at ``load_method`` when the library is registered (``llama::``, ``quantized_decomposed::``)."""


@dataclass
class _Record:
    step: str
    method: str | None
    predicted: dict[str, int]
    measured: StepMeasure


def _exc_parts(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, RemoteError):
        return exc.type_name, exc.message
    return type(exc).__name__, str(exc)


def _loader_for_version() -> str:
    return "corrected" if honours_device_plans() else "legacy"


def _carried_program_file(pte: Pte) -> str:
    """The program a bundled ``.bpte`` carries, written to a temporary ``.pte`` for the runtime."""
    start, length = pte.raw.bundled.program
    fd, tmp = tempfile.mkstemp(suffix=".pte", prefix="pte_lab_bundled_")
    with os.fdopen(fd, "wb") as f:
        f.write(pte.raw.container[start : start + length])
    return tmp


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


#: ExecuTorch's own tolerances for bundled outputs (verify_result_with_bundled_expected_output)
BUNDLED_RTOL, BUNDLED_ATOL = 1e-5, 1e-8


class LabMethod:
    """A loaded method: call it like a function; its memory is in the program's report."""

    def __init__(self, program: "LabProgram", name: str):
        self.program = program
        self.name = name
        self._executed = False

    @property
    def plan(self) -> "Method":
        """The reader's view of this method (arenas, tensors, lifetimes)."""
        return self.program.plan.methods[self.name]

    @property
    def meta(self) -> "MethodMeta":
        """ExecuTorch's MethodMeta, summarised (a :class:`~pte_lab.runtime.engine.MethodMeta`: name,
        input/output counts, ExecuTorch's own text)."""
        return self.program._engine.call("meta", self.name)

    def execute(self, inputs) -> list:
        """Run the method on ``inputs`` (tensors and scalars, in order); returns its outputs.

        Raises :class:`~pte_lab.InputError` naming the input when they are not what the method takes
        (their number, a tensor's dtype or shape, a scalar other than the one exported), and
        :class:`~pte_lab.ExecuTorchError` when ExecuTorch fails the run.
        """
        inputs = list(inputs)
        problem = input_problem(self.plan, inputs)
        if problem is not None:
            raise InputError(problem[1], method=self.name, position=problem[0])
        return self.program._execute(self, inputs)

    def __call__(self, *inputs) -> list:
        return self.execute(inputs)

    def __repr__(self) -> str:
        p = self.plan
        devs = ", ".join(f"{d} {human_bytes(b)}" for d, b in sorted(p.planned_bytes_by_device().items()))
        return f"<LabMethod {self.name!r}: planned {devs or 'nothing'}>"


class LabProgram:
    """A program loaded by ExecuTorch's runtime, with every step's memory accounted."""

    def __init__(self, path: str, *, data_path: str | None, isolate: bool, force: bool):
        self.path = path
        self.data_path = data_path
        self.isolated = isolate
        self.force = force
        c = checked(path, data_path)
        #: the reader's model of the file, and the errors it found that do not stop a load
        self.plan, self.suspicious = c.pte, list(c.suspicious)
        self._cleanup = None
        self._load_path = load_path = path
        if self.plan.bundled is not None:  # the runtime loads the program the .bpte carries
            self._load_path = load_path = _carried_program_file(self.plan)
            self._cleanup = weakref.finalize(self, _remove, load_path)
        self.loader = _loader_for_version()
        self._costs = self.plan.allocations(self.loader)
        devices = sorted({d for m in self.plan.methods.values() for d in m.devices})
        self._records: list[_Record] = []
        self._methods: dict[str, LabMethod] = {}
        self._warned_shared = False
        self._released = False
        self._engine = None
        try:
            if isolate:
                self._engine = Worker(devices, [d for d in devices if is_emulated(d)])
            else:
                self._engine = LocalEngine(devices)
            self._ledger_start = self._engine.call("ledger_mark")
            self._check_budget("load_program", None, self._predicted("load_program", None))
            measured = self._engine.call("load_program", load_path, data_path, "internal")
        except BaseException as exc:  # noqa: BLE001 - a failed load (Ctrl-C too) leaves no engine; raised translated
            if self._engine is not None:
                self._engine.close()  # nothing of a failed load stays behind (no worker, no engine)
            raise self._translate(exc, "load_program", None) from None
        self._records.append(_Record("load_program", None, self._predicted("load_program", None), measured))

    # ----------------------------------------------------------- predictions
    def _predicted(self, step: str, method: str | None) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._costs:
            if r.step == step and (step == "load_program" or r.method == method):
                out[r.device] = out.get(r.device, 0) + r.bytes
        return out

    def _check_budget(self, step: str, method: str | None, predicted: dict[str, int]) -> None:
        if self.force:
            return
        for device, need in predicted.items():
            if not need:
                continue
            avail = self._engine.call("available", device)
            if avail is not None and need > avail:
                what = f"method {method!r}" if method else "the program"
                raise MemoryBudgetError(
                    f"{step} of {what} would allocate {need:,} bytes ({human_bytes(need)}) on {device}, "
                    f"but only {avail:,} bytes ({human_bytes(avail)}) are free; nothing was allocated. "
                    f"Pass force=True to try anyway.",
                    step=step, method=method, device=device, needed=need, available=avail)

    # ---------------------------------------------------------------- public
    @property
    def method_names(self) -> list[str]:
        return list(self.plan.methods)

    @property
    def loaded_methods(self) -> list[str]:
        """The methods loaded so far, in the order they were loaded."""
        return list(self._methods)

    def findings(self) -> list:
        """The program's findings (``pte_lab.open(path).warnings()``), kernel arguments checked against
        their operators' schemas from torch's registry too (:mod:`pte_lab.runtime.schemas`)."""
        return self.plan.warnings(program_schemas(self.plan))

    def metadata(self, name: str) -> "MethodMeta":
        """ExecuTorch's MethodMeta of method ``name``, summarised (:class:`~pte_lab.runtime.engine.MethodMeta`)."""
        return self._engine.call("meta", name)

    def load_method(self, name: str) -> LabMethod:
        """Load ``name`` (once; later calls return the same LabMethod)."""
        if self._released:
            raise PteLabError("this program was released; load it again with pte_lab.load")
        if name in self._methods:
            return self._methods[name]
        if name not in self.plan.methods:
            raise NotFoundError(f"no method {name!r}; the program has {self.method_names}")
        plan = self.plan.methods[name]
        self._check_backends(name, plan)
        got = self._engine.call("provide_operators", plan.operators)
        for module, what in got.loaded.items():
            warnings.warn(OperatorLibraryWarning(
                f"method {name!r} calls operators of {what}: pte_lab registered them (import {module})"),
                stacklevel=2)
        if got.missing:
            raise OperatorMissingError(missing_message(name, list(got.missing)), method=name,
                                       operators=list(got.missing))
        predicted = self._predicted("load_method", name)
        self._check_budget("load_method", name, predicted)
        try:
            measured = self._engine.call("load_method", name)
        except Exception as exc:  # noqa: BLE001 - raised again, as its named pte_lab error
            raise self._translate(exc, "load_method", name) from None
        self._records.append(_Record("load_method", name, predicted, measured))
        lm = self._methods[name] = LabMethod(self, name)
        self._maybe_warn_shared()
        return lm

    def _check_backends(self, name: str, plan) -> None:
        """BackendUnavailableError, before load_method, for a delegate id this runtime cannot use: not
        registered, or registered but unavailable here (ExecuTorch would answer ``NotFound (0x20)``)."""
        needed = list(dict.fromkeys(d.backend for d in plan.delegates))
        if not needed:
            return
        registered = self._engine.call("registered_backends")
        lacking = [b for b in needed if b not in registered]
        if not lacking:
            return
        backend = lacking[0]
        unavailable = self._engine.call("unavailable_backends")
        usable = f"usable here: {', '.join(registered) or 'none'}"
        if backend in unavailable:
            said = [ln.strip() for ln in self._native_tail(50) if backend in ln][-1:]
            why = f" (ExecuTorch: {said[0]})" if said else ""
            message = (f"method {name!r} delegates to backend {backend!r}, which this ExecuTorch build registers "
                       f"but cannot use on this machine: it reports itself unavailable{why}. Install what the "
                       f"backend needs, or export the method for a backend that is {usable}.")
        else:
            message = (f"method {name!r} delegates to backend {backend!r}, which this ExecuTorch build does "
                       f"not register ({usable}). Install a build with that backend, or export the method "
                       f"for one of these.")
        raise BackendUnavailableError(message, method=name, backend=backend, registered=registered)

    def _host_only_loaded(self) -> list[str]:
        return sharing_host_methods(self.plan.methods[n] for n in self._methods)

    def _maybe_warn_shared(self) -> None:
        host = self._host_only_loaded()
        if self.loader == "corrected" and len(host) > 1 and not self._warned_shared:
            self._warned_shared = True
            warnings.warn(SharedArenasWarning(shared_arenas_message(host)), stacklevel=3)

    def _execute(self, method: LabMethod, inputs: list, op: str = "execute") -> list:
        try:
            outputs, measured = self._engine.call(op, method.name, inputs, not method._executed)
        except Exception as exc:  # noqa: BLE001 - raised again, as its named pte_lab error
            raise self._translate(exc, "execute", method.name) from None
        if not method._executed:
            method._executed = True
            self._records.append(_Record("first_execute", method.name,
                                         self._predicted("first_execute", method.name), measured))
        self._maybe_warn_shared()
        return outputs

    def _translate(self, exc: BaseException, step: str, method: str | None) -> BaseException:
        """A named error for what the runtime raised (the same in-process and isolated)."""
        if isinstance(exc, PteLabError) and not isinstance(exc, RemoteError):
            return exc
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt and the like pass through
        type_name, message = _exc_parts(exc)
        m = _ALLOC_RE.search(message)
        if m and method is not None:
            nbytes, index, dtype, didx = (int(g) for g in m.groups())
            mem_id = mem_id_of(index)
            device = device_name(dtype, didx)
            kind = device.kind
            return DeviceAllocationError(
                f"method {method!r}: could not allocate arena mem_id {mem_id} (runtime buffer {index}, "
                f"{nbytes:,} bytes = {human_bytes(nbytes)}) on {device}: no {kind} device "
                f"allocator is registered or it refused. On a machine without that device, call "
                f"pte_lab.emulate_device({device!r}) first (emulated, host memory); otherwise use an "
                f"ExecuTorch build with the {kind} backend. The program's other methods keep working.",
                method=method, mem_id=mem_id, runtime_index=index, device=device, nbytes=nbytes,
                runtime_message=message)
        what = f"method {method!r}" if method else f"program {os.fspath(self.path)!r}"
        c = _CODE_RE.search(message)
        code = int(c.group(1), 16) if c else None
        named = f"{error_name(code)}: " if c else ""
        why = ""
        if step == "load_program":  # what the reader already knew ExecuTorch would refuse
            why = "".join(f"; pte_lab: {f.message}" for f in self.plan.warnings() if f.kind in REFUSED_BY_RUNTIME)
        err = ExecuTorchError(f"ExecuTorch failed at {step} of {what}: {named}{type_name}: {message}{why}",
                              step=step, method=method, runtime_type=type_name, runtime_message=message,
                              code=code)
        err.native_output = self._native_tail()
        return err

    def _native_tail(self, n: int = 20) -> list[str]:
        """ExecuTorch's last native output lines (kept out of the notebook; shown with errors)."""
        engine = self._engine
        try:
            return engine.native_tail(n) if engine is not None else []
        except Exception:  # noqa: BLE001 - a dead worker's log may be gone
            return []

    def run_bundled_tests(self, rtol: float = BUNDLED_RTOL, atol: float = BUNDLED_ATOL) -> "pd.DataFrame":
        """Run every test case a bundled program (``.bpte``) carries through ExecuTorch.

        Each method is loaded once and its cases run in order (as ExecuTorch's
        bundled runner does); a method given two suites has both run (column
        ``suite``: the suite's position in the file). Outputs are compared as
        ExecuTorch's ``verify_result_with_bundled_expected_output`` does (dtype
        and shape equal; floating outputs pass when ``|actual - expected| <= atol
        + rtol * |expected|`` everywhere, its defaults; other dtypes when equal),
        on raw bytes with numpy: torch never builds a tensor from the file in
        this process. A case that cannot be run or compared (a method the
        program lacks, a packed dtype such as ``quint4x2``) fails with the reason
        in ``error``. Columns: method, suite, case, passed (a bool), max_abs_error, error.
        """
        import pandas as pd


        if self.plan.bundled is None:
            raise PteLabError(f"{os.fspath(self.path)} is not a bundled program: it carries no test cases")
        rows = []
        for k, suite in enumerate(self.plan.bundled.suites):
            def fail(i, why):  # B023: called only within this suite's iteration
                rows.append((suite.method, k, i, False, None, why))  # noqa: B023

            if suite.method not in self.plan.methods:
                why = (f"the program has no method {suite.method!r} (methods: "
                       f"{first_few((repr(m) for m in self.plan.methods), 8)})")
                for i in range(suite.cases):
                    fail(i, why)
                continue
            try:
                method = self.load_method(suite.method)
            except PteLabError as exc:
                for i in range(suite.cases):
                    fail(i, f"{type(exc).__name__}: {exc}")
                continue
            for i in range(suite.cases):
                try:
                    inputs, expected = self.plan.bundled.case(k, i)
                except PteLabError as exc:
                    fail(i, f"{type(exc).__name__}: {exc}")
                    continue
                why = unplain(inputs)
                if why:
                    fail(i, why)
                    continue
                try:
                    outs = self._execute(method, inputs, op="execute_raw")
                except PteLabError as exc:
                    fail(i, f"{type(exc).__name__}: {exc}")
                    continue
                v = compare_outputs(outs, expected, rtol, atol)
                rows.append((suite.method, k, i, bool(v.passed), v.max_abs_error, v.why))
        df = pd.DataFrame(rows, columns=["method", "suite", "case", "passed", "max_abs_error", "error"])
        df["passed"] = df["passed"].astype(bool)
        df.attrs.update(rtol=rtol, atol=atol)
        return df

    def sizes(self, methods: list[str] | None = None, *, runs: int = 2, verify: bool = False,
              progress=None, max_input_bytes=None) -> "Sizes":
        """Every byte each method needs at run time, measured in a fresh worker: see :func:`pte_lab.sizes`.

        This program's own loads are not disturbed (the sizing runner uses its own process).
        """
        return sizes(self._load_path, methods, data_path=self.data_path, runs=runs, verify=verify,
                     progress=progress, max_input_bytes=max_input_bytes)

    def release(self) -> None:
        """Drop the runtime's program and methods; the memory they held is given back (and measured)."""
        if self._released:
            return
        held: dict[str, int] = {}
        for r in self._records:
            for d, b in r.predicted.items():
                held[d] = held.get(d, 0) + b
        measured = self._engine.call("release")
        self._records.append(_Record("release", None, {d: -b for d, b in held.items()}, measured))
        self._methods.clear()
        self._released = True

    def close(self) -> None:
        """Release and, when isolated, stop the worker."""
        if self._engine.alive:
            self.release()
        self._engine.close()
        if self._cleanup is not None:
            self._cleanup()  # the carried program's temporary file

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ----------------------------------------------------------------- report
    def memory_report(self) -> "pd.DataFrame":
        """Predicted vs measured bytes per step and device (method ``(program)`` for whole-program steps).

        Device bytes are exact where the emulated device serves them (and say
        so), or read from ``torch.cuda.mem_get_info`` on a CUDA build; host
        bytes come from the C allocator's statistics and are approximate.
        """
        import pandas as pd

        rows = []
        for r in self._records:
            m = r.measured
            devices = sorted(set(r.predicted) | set(m.bytes), key=lambda d: (d != "cpu", d))
            for d in devices:
                measured = m.bytes.get(d)
                if d not in r.predicted and not measured:
                    continue
                rows.append((r.step, r.method or PROGRAM, d, r.predicted.get(d, 0), measured,
                             m.how.get(d, ""), m.seconds))
        df = pd.DataFrame(rows, columns=REPORT_COLUMNS)
        df.attrs["loader"] = self.loader
        df.attrs["note"] = HOST_BYTES_NOTE
        return df

    def ledger(self) -> "pd.DataFrame":
        """The emulated device's events since this program was loaded (empty without one)."""
        return ledger_frame(self._engine.call("ledger_events", self._ledger_start))

    def _repr_html_(self) -> str:
        from ..views.runtime.load_info_device import lab_program_html

        return lab_program_html(self)

    def __repr__(self) -> str:
        iso = ", isolated" if self.isolated else ""
        return f"<LabProgram {self.path!r}{iso}: loader {self.loader}, loaded {self.loaded_methods}>"


@arguments(path=PATH, data_path=optional(PATH), isolate=optional(BOOL), force=BOOL)
def load(path, *, data_path=None, isolate: bool | None = None, force: bool = False) -> LabProgram:
    """Load a ``.pte`` with ExecuTorch's ``Runtime.load_program``, accounted.

    The file is checked by pte_lab's reader first (a bad file raises
    :class:`~pte_lab.PteFormatError` and never reaches native code), then
    loaded with ExecuTorch's full verification. The reader checks every
    offset, size and index against the file, every planned tensor against its
    arena, the devices arenas are tagged for, that every tensor a kernel writes
    has memory, that no segment is read as two kinds of data, and the kind of
    every kernel argument against its operator's schema in torch's registry (a
    mismatch is a PteFormatError: the kernel would abort the process). What it
    cannot check is an argument's shape or what a delegate makes of its blob:
    a file crafted against those can still crash the runtime. For files you do
    not trust, pass ``isolate=True``: a crash then ends a worker process, not
    your session.

    Parameters
    ----------
    path : str or os.PathLike
        The program (``.pte`` or ``.bpte``) on disk.
    data_path : str or os.PathLike, optional
        The program's external ``.ptd`` (its named data), when it has one.
    isolate : bool, optional
        ``True`` runs the runtime in a worker process: a native crash there raises
        :class:`~pte_lab.errors.RuntimeCrashedError` here. The default, ``None``, runs in this process unless
        the reader found an error it does not refuse outright (overlapping live tensors, a blob read by
        delegates called differently, a blob that is not its backend's); such a file runs in a worker.
    force : bool
        Skip the check that planned bytes fit in free memory.

    Returns
    -------
    LabProgram
        The loaded program: ``load_method``, ``memory_report``, ``sizes``.

    Raises
    ------
    PteFormatError
        For a file the reader refuses.
    MemoryBudgetError
        When the planned bytes do not fit in free memory (unless ``force``).
    ExecuTorchError
        When the runtime refused the program.
    RuntimeCrashedError
        Isolated, when the runtime crashed in the worker. Every one a :class:`~pte_lab.PteLabError`.
    """
    path = os.fspath(path)
    if isolate is None:
        isolate = bool(checked(path).suspicious)
    return LabProgram(path, data_path=None if data_path is None else os.fspath(data_path),
                      isolate=isolate, force=force)
