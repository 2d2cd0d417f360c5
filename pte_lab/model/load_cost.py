"""What each ExecuTorch loader allocates for a program's planned arenas, and when.

Three loaders, as measured on executorch 1.4.1 and 1.5.1:

``corrected``  ``executorch.runtime.Runtime.load_program`` in executorch >= 1.5.0.
               Host-only methods share one set of host arenas, sized per
               index by the max over those methods, allocated at
               ``load_program``. A method with any device-tagged arena gets
               private arenas (every index: device ones on their device, the
               others in host memory) allocated at ``load_method``, device
               arenas first.
``legacy``     ``Runtime.load_program`` before 1.5.0: per index, the max over
               *all* methods, all in host memory, at ``load_program``; device
               tags are ignored.
``module``     ``_load_for_executorch`` (the C++ Module): private arenas per
               method, on their tagged devices, at the method's first run.

Arena sizes are the file's ``non_const_buffer_sizes``; runtime index = mem_id - 1.
"""

from __future__ import annotations

from itertools import repeat
from typing import NamedTuple
from collections.abc import Iterable

from ..errors import ArgumentValueError
from ..format import runtime_index_of
from ..printable import printable

LOADERS = ("corrected", "legacy", "module")
STEPS = ("load_program", "load_method", "first_execute")


class Allocation(NamedTuple):
    """One allocation a loader makes while loading the program (:meth:`Pte.load_cost`): the step, the method,
    shared or private, the arena, its device and its bytes."""
    loader: str
    step: str
    method: str | None  # None: shared by every method that uses it
    sharing: str  # "shared" | "private"
    mem_id: int
    runtime_index: int
    device: str
    bytes: int
    #: the methods whose plans use this arena
    used_by: tuple[str, ...] = ()


#: columns of ``Pte.load_cost`` (and keys of ``load_cost_records``)
LOAD_COST_COLUMNS = Allocation._fields


class PlanArenas(NamedTuple):
    method: str
    sizes: tuple[int, ...]  # non_const_buffer_sizes (index 0 reserved)
    devices: dict[int, str]  # mem_id -> non-CPU device


#: the integer columns (a table makes them int64 arrays at once)
INT_COLUMNS = ("mem_id", "runtime_index", "bytes")


class _Columns:
    """Allocations collected as one list per column of :data:`LOAD_COST_COLUMNS` (a plan may have 100,000
    arenas: a table and the JSON rows are made from columns, records only when asked for)."""

    def __init__(self, loader: str):
        self.loader = loader
        self.lists: dict[str, list] = {k: [] for k in LOAD_COST_COLUMNS}

    def add(self, step, method, sharing, ids, devices, sizes, users) -> None:
        """Arenas ``ids`` with their devices and sizes; the other fields the same for each."""
        c, n = self.lists, len(ids)
        for k, same in (("loader", self.loader), ("step", step), ("method", method), ("sharing", sharing),
                        ("used_by", users)):
            c[k] += [same] * n
        c["mem_id"] += ids
        c["runtime_index"] += map(runtime_index_of, ids)
        c["device"] += devices
        c["bytes"] += sizes


def _shared(out: _Columns, plans: list[PlanArenas]) -> None:
    """One host arena per index, sized by the largest plan's, used by the plans that have that index."""
    widths = sorted({len(p.sizes) for p in plans})
    size = [0] * (widths[-1] if widths else 0)
    for p in plans:
        size[: len(p.sizes)] = map(max, size, p.sizes)
    for lo, hi in zip([1] + widths, widths):  # the users change only where a plan's arenas end
        ids = range(max(lo, 1), hi)
        out.add("load_program", None, "shared", ids, ["cpu"] * len(ids), size[ids.start:ids.stop],
                tuple(p.method for p in plans if len(p.sizes) >= hi))


def _private(out: _Columns, step: str, p: PlanArenas, device_first: bool) -> None:
    ids = range(1, len(p.sizes))
    on_device = sorted(m for m in p.devices if m in ids and p.devices[m] != "cpu")  # a few, at most
    if device_first and on_device:  # device arenas first, each group in index order
        ids = on_device + sorted(set(ids).difference(on_device))
    out.add(step, p.method, "private", ids, list(map(p.devices.get, ids, repeat("cpu"))),
            list(map(p.sizes.__getitem__, ids)), (p.method,))


def allocation_columns(plans: Iterable[PlanArenas], loader: str) -> dict[str, list]:
    """Every planned-arena allocation ``loader`` makes for these plans, in order: one list per column of
    :data:`LOAD_COST_COLUMNS`."""
    plans = list(plans)
    out = _Columns(loader)
    if loader == "legacy":
        _shared(out, plans)
    elif loader == "corrected":
        host = [p for p in plans if not p.devices]
        if host:
            _shared(out, host)
        for p in plans:
            if p.devices:
                _private(out, "load_method", p, device_first=True)
    elif loader == "module":
        for p in plans:
            _private(out, "first_execute", p, device_first=True)
    else:  # (a loader that is no str, too)
        raise ArgumentValueError(f"unknown loader {printable(repr(loader))}; choose one of {', '.join(LOADERS)}")
    return out.lists
