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

from dataclasses import dataclass
from enum import Enum
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


# ------------------------------------------------------------------- the mobile APIs, against these loaders
class DataLoaderKind(str, Enum):
    """How ExecuTorch reads a program's bytes (``extension/data_loader``): where they sit while it runs."""

    #: reads what is asked into buffers it mallocs: the flatbuffer (kept while the program lives), each
    #: delegate blob while its load_method runs, the constants' segment: all in the heap, dirty memory
    FILE = "FileDataLoader"
    #: maps the file: pages come in as they are touched, clean and file-backed (the OS can drop and reread
    #: them; iOS does not count them in the app's footprint)
    MMAP = "MmapDataLoader"
    #: reads from memory the caller already holds (a bare-metal board's flash, a buffer in the app)
    BUFFER = "BufferDataLoader"


@dataclass(frozen=True)
class LoadMode:
    """One of ExecuTorch's C++ ``Module::LoadMode`` values (``extension/module/module.h``): the data loader it
    makes, and its names in the iOS and Android APIs (None: that API does not offer it)."""

    name: str
    data_loader: DataLoaderKind
    #: MmapDataLoader's ``MlockConfig`` (None for a FileDataLoader)
    mlock: str | None
    #: what the mode does with the pages, in a phrase
    pages: str
    ios: str | None
    android: str | None
    #: the mode every constructor takes when none is given (C++, Objective-C/Swift and Kotlin alike)
    default: bool = False


#: ``Module::LoadMode`` in ExecuTorch 1.5.1 (the wheel's ``include/executorch/extension/module/module.h``); the
#: iOS (``ExecuTorchModuleLoadMode``, Swift ``ModuleLoadMode``) and Android (``Module.LOAD_MODE_*``) names from
#: ExecuTorch's main of 2026-08-22 (``extension/apple``, ``extension/android``), the nearest source read here
MODULE_LOAD_MODES: tuple[LoadMode, ...] = (
    LoadMode("File", DataLoaderKind.FILE, None, "reads the program's bytes into the heap as they are asked for",
             ".file", "LOAD_MODE_FILE", default=True),
    LoadMode("Mmap", DataLoaderKind.MMAP, "NoMlock", "maps the file, its pages come and go with the OS",
             ".mmap", "LOAD_MODE_MMAP"),
    LoadMode("MmapUseMlock", DataLoaderKind.MMAP, "UseMlock",
             "maps the file and locks each segment's pages in RAM as it is read, failing where mlock fails",
             ".mmapUseMlock", "LOAD_MODE_MMAP_USE_MLOCK"),
    LoadMode("MmapUseMlockIgnoreErrors", DataLoaderKind.MMAP, "UseMlockIgnoreErrors",
             "maps the file and locks pages where the OS lets it", ".mmapUseMlockIgnoreErrors",
             "LOAD_MODE_MMAP_USE_MLOCK_IGNORE_ERRORS"),
    LoadMode("MmapUseMadvise", DataLoaderKind.MMAP, "UseMadvise",
             "maps the file and asks the OS to read it ahead (MADV_WILLNEED | MADV_SEQUENTIAL)", None, None),
)


@dataclass(frozen=True)
class ProgramApi:
    """An API that loads a program, and which of :data:`LOADERS` its planned arenas follow, with the data
    loader it reads the program's bytes with."""

    api: str
    #: one of :data:`LOADERS`
    arenas_as: str
    #: the data loader, or None where the caller picks it with a :class:`LoadMode`
    data_loader: DataLoaderKind | None
    #: MmapDataLoader's ``MlockConfig`` where the API fixes it
    mlock: str | None
    note: str


#: Python's three entry points and the mobile ones, against :data:`LOADERS` (read from ExecuTorch 1.5.1's
#: pybindings and module.h): the C++ ``Module`` the iOS and Android APIs wrap allocates arenas as
#: ``_load_for_executorch`` does (that is a ``Module`` too), with the data loader its ``LoadMode`` picks
PROGRAM_APIS: tuple[ProgramApi, ...] = (
    ProgramApi("Python executorch.runtime.Runtime.load_program", "corrected", DataLoaderKind.MMAP,
               "UseMlockIgnoreErrors", "executorch >= 1.5"),
    ProgramApi("Python executorch.runtime.Runtime.load_program before executorch 1.5", "legacy", DataLoaderKind.MMAP,
               "UseMlockIgnoreErrors", "every arena on the host"),
    ProgramApi("Python _load_for_executorch", "module", DataLoaderKind.MMAP, "UseMlockIgnoreErrors",
               "a C++ Module over a MmapDataLoader"),
    ProgramApi("C++ Module (extension/module)", "module", None, None,
               "private arenas per method at load_method (execute loads the method first when the app did "
               "not); share_memory_arenas=true shares arenas 1 and 2 between methods, each the largest"),
    ProgramApi("iOS ExecuTorchModule (Swift Module)", "module", None, None,
               "the C++ Module; loadMode picks the data loader (default .file)"),
    ProgramApi("Android org.pytorch.executorch.Module.load", "module", None, None,
               "the C++ Module through JNI; loadMode picks the data loader (default LOAD_MODE_FILE)"),
)
