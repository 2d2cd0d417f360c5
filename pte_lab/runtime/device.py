"""The emulated device: watch device placement on a machine without a GPU.

``emulate_device("cuda:0")`` registers, in ExecuTorch's DeviceAllocator
registry, an allocator for CUDA served from host memory. From then on
``Runtime.load_program`` (executorch >= 1.5) places device-planned arenas
through it, and every allocation, free and host<->device copy lands in a
ledger. Everything it reports is labelled "emulated": the bytes are exact, the
memory is host memory.

A registration lasts for the whole process (ExecuTorch's registry has no way
to remove one), and a device type that already has an allocator (a real CUDA
build, or an earlier registration by someone else) is refused with an error
instead of the process abort a second registration would cause.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable

from ..arguments import BYTES, NAME, arguments, optional
from ..devices import device_name, parse_device
from ..errors import PteLabError, UnknownDeviceError
from . import native

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["EmulatedDevice", "emulate_device", "is_emulated", "allocator_registered", "ledger_frame",
           "LEDGER_COLUMNS"]

LEDGER_COLUMNS = ["event", "device", "bytes", "alignment", "device_index", "address", "time_s"]


def ledger_frame(events: "Iterable[native.LedgerEvent]", origin_ns: int | None = None) -> "pd.DataFrame":
    """Ledger events as a DataFrame (:data:`LEDGER_COLUMNS`); times in seconds from ``origin_ns``
    (default: the first event)."""
    import pandas as pd

    events = list(events)
    if origin_ns is None:
        origin_ns = events[0].time_ns if events else 0
    rows = [
        (native.EVENT_KINDS.get(e.kind, str(e.kind)), device_name(e.device_type, e.device_index),
         int(e.bytes), int(e.alignment), int(e.device_index), f"0x{e.address:x}", (e.time_ns - origin_ns) / 1e9)
        for e in events
    ]
    df = pd.DataFrame(rows, columns=LEDGER_COLUMNS)
    df.attrs["source"] = "emulated device (host memory)"
    return df


@dataclass
class EmulatedDevice:
    """Handle on an emulated device type. Its ledger covers every index of that type."""

    kind: str
    type_code: int
    #: ledger position when this handle was made: :meth:`ledger` starts there
    _start: int = 0
    _origin_ns: int = 0

    @property
    def name(self) -> str:
        return self.kind

    @property
    def outstanding_bytes(self) -> int:
        """Bytes allocated on the emulated device and not yet freed (exact)."""
        return int(native.library().pte_lab_outstanding(self.type_code))

    def set_capacity(self, nbytes: int | None) -> None:
        """Pretend the device has ``nbytes`` in all (None: unlimited); larger requests are refused."""
        native.library().pte_lab_set_capacity(self.type_code, int(nbytes or 0))

    @property
    def capacity(self) -> int | None:
        return int(native.library().pte_lab_capacity(self.type_code)) or None

    @property
    def free_bytes(self) -> int | None:
        """Capacity minus outstanding bytes, or None when the capacity is unlimited."""
        cap = self.capacity
        return None if cap is None else max(0, cap - self.outstanding_bytes)

    def ledger(self, since: int | None = None) -> "pd.DataFrame":
        """Every allocate / free / copy on this device type since this handle was made (or ``since``)."""
        start = self._start if since is None else since
        ev = [e for e in native.read_events(start) if e.device_type == self.type_code]
        return ledger_frame(ev, self._origin_ns)

    def mark(self) -> int:
        """The current ledger position, to pass to ``ledger(since=...)``."""
        return int(native.library().pte_lab_event_count())

    def _repr_html_(self) -> str:
        from ..views.runtime.load_info_device import emulated_device_html

        return emulated_device_html(self)

    def __repr__(self) -> str:
        return f"EmulatedDevice({self.kind!r}, emulated, outstanding_bytes={self.outstanding_bytes})"


@arguments(device=NAME, capacity=optional(BYTES))
def emulate_device(device: str = "cuda:0", *, capacity: int | None = None) -> EmulatedDevice:
    """Register an emulated allocator for ``device``'s type; returns its handle.

    Calling it again for an already emulated type returns a new handle (no second registration).

    Parameters
    ----------
    device : str
        The device whose type is emulated (``"cuda:0"``: every ``cuda`` arena).
    capacity : int, optional
        The bytes the emulated device holds; an allocation beyond them fails as on a real device
        (default: no limit).

    Returns
    -------
    EmulatedDevice
        The handle: what was allocated on the device, and when.

    Raises
    ------
    PteLabError
        If a real allocator for that type is registered.
    UnknownDeviceError
        For a device type this ExecuTorch does not know.
    ValueError
        For ``"cpu"``: host arenas need no emulation.
    pte_lab.errors.NativeBuildError
        If the helper cannot be built (no C++ compiler).
    """
    d = parse_device(device)
    kind, code = d.kind, d.device_type
    if code == 0:
        raise ValueError("the CPU needs no emulation: host arenas are ordinary host memory")
    lib = native.library()
    rc = lib.pte_lab_register(code)
    if rc == -1:
        raise PteLabError(
            f"a {kind} device allocator is already registered in this process (a real {kind} build?): "
            f"registering a second one would abort the process, so pte_lab refuses. Use the real device.")
    if rc == -2:
        raise UnknownDeviceError(f"ExecuTorch has no device type {code}")
    handle = EmulatedDevice(kind, code, lib.pte_lab_event_count(), time.monotonic_ns())
    if capacity is not None:
        handle.set_capacity(capacity)
    return handle


def is_emulated(device: str) -> bool:
    code = parse_device(device).device_type
    try:
        return bool(native.library().pte_lab_is_emulated(code))
    except PteLabError:
        return False


def allocator_registered(device: str) -> bool | None:
    """Whether ExecuTorch has an allocator for ``device``'s type (None: cannot tell)."""
    code = parse_device(device).device_type
    if code == 0:
        return True
    try:
        return bool(native.library().pte_lab_has_allocator(code))
    except PteLabError:
        return None
