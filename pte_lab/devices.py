"""Devices as ExecuTorch numbers them, and as pte_lab names them: the one home of the mapping.

A ``.pte`` stores a device as ``(device_type, device_index)`` (``DeviceType``
in ``runtime/core/portable_type/device.h`` and ``program.fbs``: CPU = 0,
CUDA = 1). pte_lab names it ``"cpu"`` or ``"<kind>:<index>"`` (``"cuda:0"``);
a type code ExecuTorch does not define is kept visible as ``"device<code>"``.

Pure Python: the format reader and the runtime both use it.
"""

from __future__ import annotations

import re

from .errors import UnknownDeviceError

__all__ = ["DEVICE_TYPES", "DEVICE_NAMES", "device_name", "parse_device", "device_problem"]

#: pte_lab's name of a device kind -> ExecuTorch's DeviceType code
DEVICE_TYPES: dict[str, int] = {"cpu": 0, "cuda": 1}
#: ExecuTorch's DeviceType code -> pte_lab's name of the kind
DEVICE_NAMES: dict[int, str] = {v: k for k, v in DEVICE_TYPES.items()}


def device_name(device_type: int, device_index: int) -> str:
    """``(1, 0)`` -> ``"cuda:0"``; the CPU is ``"cpu"`` whatever its index."""
    kind = DEVICE_NAMES.get(device_type, f"device{device_type}")
    return "cpu" if kind == "cpu" else f"{kind}:{device_index}"


def parse_device(device: str) -> tuple[str, int, int]:
    """``"cuda:0"`` -> ``("cuda", 1, 0)`` (kind, type code, index). Unknown kinds: UnknownDeviceError
    (a ValueError and a PteLabError)."""
    m = re.fullmatch(r"([a-z]+)(?::(\d+))?", device.strip().lower())
    if not m or m.group(1) not in DEVICE_TYPES:
        raise UnknownDeviceError(f"unknown device {device!r}; ExecuTorch knows {sorted(DEVICE_TYPES)} (e.g. 'cuda:0')")
    return m.group(1), DEVICE_TYPES[m.group(1)], int(m.group(2) or 0)


def device_problem(device: str) -> str | None:
    """Why ExecuTorch cannot place memory on ``device`` (a name :func:`device_name` made), or None."""
    kind, _, index = device.partition(":")
    if kind not in DEVICE_TYPES:
        return f"device type {kind[6:] if kind.startswith('device') else kind!r} is not one ExecuTorch defines " \
               f"({', '.join(f'{k}={v}' for k, v in DEVICE_TYPES.items())})"
    if index and int(index) < 0:
        return f"device index {index} is negative"
    return None
