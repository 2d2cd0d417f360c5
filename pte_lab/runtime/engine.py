"""The part that touches ExecuTorch: runs steps and measures memory around them.

An :class:`Engine` lives where the runtime runs: in the caller's process, or
in an isolated worker (``pte_lab.runtime.worker``). Every step returns what
it measured as plain data, so the two cases look the same to the caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..devices import DEVICE_TYPES, parse_device
from ..quiet import quiet_import
from . import device as devmod
from . import memory
from .native_engine import NativeOps
from .operators import provide
from .raw import to_raw, to_torch
from .shapes import program_scalars, record_shapes

if TYPE_CHECKING:  # pragma: no cover
    from .operators import Provision


@dataclass(frozen=True)
class StepMeasure:
    """What one step took, per device: bytes (None: not measurable there), how each was measured, and its
    seconds. Plain data: it crosses the worker's pipe as it is."""

    seconds: float
    #: device -> bytes taken during the step (negative: given back; None: not measurable)
    bytes: dict[str, int | None] = field(default_factory=dict)
    #: device -> how its bytes were measured
    how: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MethodMeta:
    """ExecuTorch's ``MethodMeta`` of one method, summarised: plain data, it crosses the worker's pipe."""

    name: str
    num_inputs: int
    num_outputs: int
    #: ExecuTorch's own ``repr`` of it
    text: str


class Engine(NativeOps):
    """The Python runtime's engine: programs loaded as ``Runtime.load_program`` loads them, torch tensors in and
    out, and the native operations of :class:`~pte_lab.runtime.native_engine.NativeOps`."""

    def __init__(self, devices: list[str] = (), emulate: list[str] = ()):
        Runtime = quiet_import("executorch.runtime").Runtime
        for d in emulate:  # a device with a real allocator registered is used as it is
            if not devmod.allocator_registered(d):
                devmod.emulate_device(d)
        self.runtime = Runtime.get()
        self.devices = list(devices)
        self.program = None
        self.methods: dict[str, Any] = {}

    # ------------------------------------------------------------ measuring
    def _device_probe(self, device: str) -> tuple[int | None, str]:
        """(bytes taken on ``device`` so far, how it is measured)."""
        d = parse_device(device)
        if devmod.is_emulated(device):
            return int(devmod.native.library().pte_lab_outstanding(d.device_type)), "exact (emulated device ledger)"
        if d.device_type == DEVICE_TYPES["cuda"] and memory.CudaProbe.available():
            return -memory.CudaProbe.free(d.device_index), "torch.cuda.mem_get_info"
        return None, "not measurable (no allocator)"

    def snapshot(self) -> dict:
        host, how = memory.host_in_use()
        snap = {"cpu": (host, how)}
        for d in self.devices:
            snap[d] = self._device_probe(d)
        return snap

    def _measured(self, before: dict, after: dict, seconds: float) -> StepMeasure:
        taken: dict[str, int | None] = {}
        how_of: dict[str, str] = {}
        for dev, (b, how) in after.items():
            a = before.get(dev, (None, how))[0]
            taken[dev] = None if (a is None or b is None) else b - a
            how_of[dev] = how
        return StepMeasure(seconds, taken, how_of)

    def _step(self, fn):
        # No gc.collect() here: with torch loaded it costs ~0.2 s, and ExecuTorch's
        # program and method objects are freed by reference counting alone.
        before = self.snapshot()
        t = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t
        after = self.snapshot()
        return result, self._measured(before, after, seconds)

    # ---------------------------------------------------------------- steps
    def load_program(self, path: str, data_path: str | None = None, verification: str = "internal") -> StepMeasure:
        from executorch.runtime import Verification

        ver = {"internal": Verification.InternalConsistency, "minimal": Verification.Minimal}[verification]

        def go():
            self.program = self.runtime.load_program(path, verification=ver, data_path=data_path)

        return self._step(go)[1]

    def load_method(self, name: str) -> StepMeasure:
        def go():
            self.methods[name] = self.program.load_method(name)

        return self._step(go)[1]

    def execute(self, name: str, inputs: list, measure: bool = True) -> tuple[list, StepMeasure | None]:
        method = self.methods[name]
        if not measure:  # later runs: no accounting on the hot path
            return list(method.execute(list(inputs))), None
        return self._step(lambda: list(method.execute(list(inputs))))

    def execute_raw(self, name: str, inputs: list, measure: bool = True) -> tuple[list, StepMeasure | None]:
        """:meth:`execute` on raw values (:mod:`pte_lab.runtime.raw`): a bundled case, its outputs as bytes."""
        outputs, measured = self.execute(name, [to_torch(v) for v in inputs], measure)
        return [to_raw(o) for o in outputs], measured

    def release(self) -> StepMeasure:
        def go():
            self.methods.clear()
            self.program = None

        return self._step(go)[1]

    def record_shapes(self, path: str, name: str, inputs: list, debug_buffer: int, data_path: str | None = None):
        """Run ``name`` once with ETDump on: the values its instructions wrote (see :mod:`.shapes`)."""
        return record_shapes(path, name, inputs, debug_buffer, data_path)

    def program_scalars(self, path: str, name: str):
        """``name``'s Int values and IntList items (see :func:`.shapes.program_scalars`)."""
        return program_scalars(path, name)

    # ---------------------------------------------------------------- facts
    def provide_operators(self, operators: list[str]) -> "Provision":
        """Register ExecuTorch's own libraries for missing operators; what is still missing."""
        return provide(operators)

    def registered_backends(self) -> list[str]:
        """The backends this runtime can use: registered, and available when asked (``is_available``).

        A wheel can register a backend whose own library is missing here (ExecuTorch 1.5's
        ``OpenvinoBackend`` without OpenVINO's runtime): ``load_method`` would then fail with
        ``NotFound (0x20)``; such a backend is listed by :meth:`unavailable_backends` instead.
        """
        return [n for n in self.runtime.backend_registry.registered_backend_names if self._available(n)]

    def unavailable_backends(self) -> list[str]:
        """Backends registered in this build that report themselves unavailable (their library is missing)."""
        return [n for n in self.runtime.backend_registry.registered_backend_names if not self._available(n)]

    def _available(self, name: str) -> bool:
        known = self.__dict__.setdefault("_backend_available", {})
        if name not in known:  # asked once: a missing library's warning is written once
            try:
                known[name] = bool(self.runtime.backend_registry.is_available(name))
            except Exception:  # noqa: BLE001 - a build without is_available: registered means usable
                known[name] = True
        return known[name]

    def available(self, device: str) -> int | None:
        """Free bytes on ``device`` where they can be read, else None."""
        d = parse_device(device)
        if d.device_type == DEVICE_TYPES["cpu"]:
            return memory.host_available()
        if devmod.is_emulated(device):
            cap = devmod.native.library().pte_lab_capacity(d.device_type)
            return None if not cap else max(0, int(cap) - int(devmod.native.library().pte_lab_outstanding(d.device_type)))
        if d.device_type == DEVICE_TYPES["cuda"] and memory.CudaProbe.available():
            return memory.CudaProbe.free(d.device_index)
        return None

    def meta(self, name: str) -> MethodMeta:
        m = self.program.metadata(name)
        return MethodMeta(m.name(), m.num_inputs(), m.num_outputs(), str(m))
