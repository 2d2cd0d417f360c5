"""Devices: arenas that live on a device (and need its allocator), devices ExecuTorch cannot name, tensors
tagged for a device in host arenas and host tensors in device arenas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...devices import Device, device_problem
from ...units import count
from ..arrays import unique
from .base import Details, Finding, Kind, ValuesDetails

if TYPE_CHECKING:  # pragma: no cover
    from ..method import Method

__all__ = ["device_findings", "DeviceAllocatorDetails", "UnknownDeviceDetails"]


@dataclass(frozen=True)
class DeviceAllocatorDetails(Details):
    mem_id: int
    device: str
    #: the arena's size
    bytes: int


@dataclass(frozen=True)
class UnknownDeviceDetails(Details):
    mem_id: int
    #: the tag as the file gives it
    device: str


def _misplaced(m: "Method"):
    """Rows of the planned tensors tagged for a device in host arenas, and of host tensors in device arenas
    (tensors in arenas the method lacks are neither)."""
    c = m.analysis.columns
    if not m.raw.buffer_devices and all(d == "cpu" for d in c["device"].tolist()):  # host tensors, host arenas
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    arenas, row = unique(c["mem_id"], return_inverse=True)  # a few arenas, however many tensors
    arena_dev = {a.mem_id: a.device for a in m.arenas}
    dev = np.array([arena_dev.get(k) for k in arenas.tolist()], dtype=object)[row]
    host_tensor = c["device"] == "cpu"
    return (np.flatnonzero(~host_tensor & (dev == "cpu")),
            np.flatnonzero(host_tensor & (dev != "cpu") & (dev != None)))  # noqa: E711 (elementwise)


def device_findings(m: "Method") -> list[Finding]:
    """Misplaced tensors, then each arena off the host: a device ExecuTorch cannot name, or its allocator."""
    out = []
    in_host, on_dev = _misplaced(m)
    values = m.analysis.columns["value"]
    if len(in_host):
        devs = sorted(set(m.analysis.columns["device"][in_host].tolist()))
        out.append(Finding(
            Kind.DEVICE_TAG_IN_HOST_ARENA, m.name,
            f"{count(len(in_host), 'tensor')} tagged for {', '.join(devs)} {'is' if len(in_host) == 1 else 'are'} "
            f"planned in host arenas "
            f"(what enable_non_cpu_memory_planning=False produces): a device backend receives "
            f"host pointers for them", ValuesDetails(tuple(values[in_host].tolist()))))
    if len(on_dev):
        out.append(Finding(Kind.HOST_TENSOR_IN_DEVICE_ARENA, m.name,
                           f"{len(on_dev)} host tensors are planned in device arenas",
                           ValuesDetails(tuple(values[on_dev].tolist()))))
    for a in m.arenas:
        if a.device == "cpu":  # the usual place, and a file may list 100,000 arenas
            continue
        problem = device_problem(a.device)
        if problem:
            out.append(Finding(Kind.UNKNOWN_DEVICE, m.name,
                               f"arena mem_id {a.mem_id} is tagged {a.device!r}: {problem}, so no runtime can "
                               f"place it", UnknownDeviceDetails(a.mem_id, a.device)))
            continue
        out.append(Finding(
            Kind.DEVICE_ALLOCATOR, m.name,
            f"arena mem_id {a.mem_id} (runtime buffer {a.runtime_index}, {a.size} bytes) lives on "
            f"{a.device}: loading this method needs a {Device.of(a.device).kind} device allocator",
            DeviceAllocatorDetails(a.mem_id, a.device, a.size)))
    return out
