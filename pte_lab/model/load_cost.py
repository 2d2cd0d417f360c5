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

from typing import Iterable, NamedTuple

from ..format import runtime_index_of

LOADERS = ("corrected", "legacy", "module")
STEPS = ("load_program", "load_method", "first_execute")


class Allocation(NamedTuple):
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


def _shared(loader: str, plans: list[PlanArenas]) -> list[Allocation]:
    width = max((len(p.sizes) for p in plans), default=0)
    out = []
    for mem_id in range(1, width):
        size = max(p.sizes[mem_id] if mem_id < len(p.sizes) else 0 for p in plans)
        users = tuple(p.method for p in plans if mem_id < len(p.sizes))
        out.append(Allocation(loader, "load_program", None, "shared", mem_id, runtime_index_of(mem_id), "cpu", size,
                              users))
    return out


def _private(loader: str, step: str, p: PlanArenas, device_first: bool) -> list[Allocation]:
    ids = range(1, len(p.sizes))
    if device_first:
        ids = sorted(ids, key=lambda m: (p.devices.get(m, "cpu") == "cpu", m))
    return [
        Allocation(loader, step, p.method, "private", m, runtime_index_of(m), p.devices.get(m, "cpu"), p.sizes[m],
                   (p.method,))
        for m in ids
    ]


def allocations(plans: Iterable[PlanArenas], loader: str) -> list[Allocation]:
    """Every planned-arena allocation ``loader`` makes for these plans, in order."""
    plans = list(plans)
    if loader == "legacy":
        return _shared(loader, plans)
    if loader == "corrected":
        host = [p for p in plans if not p.devices]
        out = _shared(loader, host) if host else []
        for p in plans:
            if p.devices:
                out += _private(loader, "load_method", p, device_first=True)
        return out
    if loader == "module":
        out = []
        for p in plans:
            out += _private(loader, "first_execute", p, device_first=True)
        return out
    raise ValueError(f"unknown loader {loader!r}; choose one of {LOADERS}")
