"""Devices as ExecuTorch numbers them, and as pte_lab names them: the one home of the mapping.

A ``.pte`` stores a device as ``(device_type, device_index)`` (``DeviceType``
in ``runtime/core/portable_type/device.h`` and ``program.fbs``: CPU = 0,
CUDA = 1). pte_lab names it ``"cpu"`` or ``"<kind>:<index>"`` (``"cuda:0"``);
a type code ExecuTorch does not define is kept visible as ``"device<code>"``.

Pure Python: the format reader and the runtime both use it.
"""

from __future__ import annotations

import re
from functools import cache

from .errors import UnknownDeviceError

__all__ = ["DEVICE_TYPES", "DEVICE_NAMES", "Device", "CPU", "device_name", "parse_device", "device_problem"]

#: pte_lab's name of a device kind -> ExecuTorch's DeviceType code
DEVICE_TYPES: dict[str, int] = {"cpu": 0, "cuda": 1}
#: ExecuTorch's DeviceType code -> pte_lab's name of the kind
DEVICE_NAMES: dict[int, str] = {v: k for k, v in DEVICE_TYPES.items()}


class Device(str):
    """A device as ExecuTorch numbers it: its ``device_type`` (``DeviceType`` code) and ``device_index`` (named as
    ``program.fbs`` names them; ``index`` would hide ``str.index``), read once where the
    file's bytes (``device_name``) or a name (:meth:`of`, ``parse_device``) enter. It is also the
    ``str`` pte_lab names it by (``"cpu"``, ``"cuda:0"``; a type ExecuTorch does not define ``"device7:0"``),
    so every document, table and repr reads as the name did, and it compares equal to that name. Ask it
    :attr:`kind`, :attr:`device_type` and :attr:`device_index`; never split its name."""

    device_type: int
    device_index: int

    def __new__(cls, device_type: int, device_index: int = 0) -> "Device":
        kind = DEVICE_NAMES.get(device_type, f"device{device_type}")
        host = int(device_type) == DEVICE_TYPES["cpu"]
        self = super().__new__(cls, kind if host else f"{kind}:{device_index}")
        # the CPU is one device whatever index the file gives it, as its name says
        self.device_type, self.device_index = int(device_type), 0 if host else int(device_index)
        return self

    @property
    def kind(self) -> str:
        """pte_lab's name of its type (``"cuda"``), ``"device<code>"`` for a code ExecuTorch does not define."""
        return DEVICE_NAMES.get(self.device_type, f"device{self.device_type}")

    @property
    def known(self) -> bool:
        """ExecuTorch defines its type (``DEVICE_TYPES``)."""
        return self.device_type in DEVICE_NAMES

    def __reduce__(self):
        return Device, (self.device_type, self.device_index)

    @classmethod
    def of(cls, name: "str | Device") -> "Device":
        """The device a name pte_lab wrote names (``"cuda:0"``, ``"device7:0"``; a device as it is), for a name
        read back from a document. Raises UnknownDeviceError (a ValueError) for a name pte_lab does not write."""
        if isinstance(name, Device):
            return name
        m = re.fullmatch(r"([a-z]+?)(\d*)(?::(-?\d+))?", name)
        code = DEVICE_TYPES.get(m.group(1)) if m and not m.group(2) else (
            int(m.group(2)) if m and m.group(1) == "device" else None)
        if m is None or code is None:
            raise UnknownDeviceError(f"{name!r} is not a device name (e.g. 'cpu', 'cuda:0')")
        return device_name(code, int(m.group(3) or 0))


#: the host
CPU = Device(0, 0)


@cache
def device_name(device_type: int, device_index: int) -> Device:
    """``(1, 0)`` -> ``Device(1, 0)``, named ``"cuda:0"``; the CPU is ``"cpu"`` whatever its index. One record
    per pair (a file may tag 100,000 tensors)."""
    return Device(int(device_type), int(device_index))


def parse_device(device: "str | Device") -> Device:
    """``"cuda:0"`` -> ``Device(1, 0)`` (a name a user gives: any case, the index 0 when left out). Unknown
    kinds: UnknownDeviceError (a ValueError and a PteLabError)."""
    if isinstance(device, Device) and device.known:
        return device
    m = re.fullmatch(r"([a-z]+)(?::(\d+))?", device.strip().lower())
    if not m or m.group(1) not in DEVICE_TYPES:
        raise UnknownDeviceError(f"unknown device {device!r}; ExecuTorch knows {sorted(DEVICE_TYPES)} (e.g. 'cuda:0')")
    return device_name(DEVICE_TYPES[m.group(1)], int(m.group(2) or 0))


def device_problem(device: "str | Device") -> str | None:
    """Why ExecuTorch cannot place memory on ``device`` (a name :func:`device_name` made), or None."""
    d = Device.of(device)
    if not d.known:
        return f"device type {d.device_type!r} is not one ExecuTorch defines " \
               f"({', '.join(f'{k}={v}' for k, v in DEVICE_TYPES.items())})"
    if d.device_index < 0:
        return f"device index {d.device_index} is negative"
    return None
