"""What a sizing says (see :mod:`pte_lab.runtime.sizing`), as records: per method the pools and the heap
(:class:`MethodSizes`), what a verification proved (:class:`PoolVerification`, :class:`TempProbe`: the temp-pool
verdict is decided here), the whole program's (:class:`Sizes`: its table, pools, JSON), and the facts every view
of them names (:data:`PARTS`, :data:`TARGET_KINDS`...).

A kept sizing (:mod:`pte_lab.runtime.kept`) is these records, read back and shown by
:mod:`pte_lab.views.runtime.sizes`: this module imports nothing of the measuring machinery (the worker, the engines,
the native library, the program's model), which :mod:`.results` holds with :func:`~.results.sizes`, the function
that measures and sums up into them.
"""

from __future__ import annotations

import os
import platform
import struct
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING

from ...errors import MEMORY_ALLOCATION_FAILED, PteLabError
from ...format import TENSOR_ALIGNMENT
from ...model.backends import BACKENDS, MICROCONTROLLER_BACKENDS
from ...printable import printable
from ...vocabulary import Configuration, MemoryPart, Pool, ValueKind, Word
from ...units import align_up
from ..declared import DeclaredSizes
from ..libraries import Library
from ..sizing_runner_records import INPUT_VALUES, MethodIO, RunnerResult, Step, StepKind, StepUse, failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .measure import PoolTrial, Session

__all__ = ["SIZES_VERSION", "Sizes", "MethodSizes", "PoolVerification", "TempProbe", "TempShort", "SIZES_COLUMNS", "PARTS",
           "POOLS", "SizingError", "CONFIGURATIONS", "Loader", "INPUT_VALUES", "MethodIO", "Library", "PLANNED_ALIGNMENT",
           "MIN_POOL_ALIGNMENT", "HeapFigures", "HEAP_RUNS", "HEAP_FIELDS", "HOST_DEPENDENT",
           "POOLS_EXACT", "MEASURED_PARTS", "part_source", "TargetKind", "TARGET_KINDS", "TargetRun",
           "Total", "Fit", "board_has_heap", "Place", "Unplaced", "HEAP_REGION", "MALLOC_BLOCKS", "malloc_block", "operator_new_pool", "PLATFORM_NODE", "platform_request",
           "NEW_ALIGNMENT", "NEW_POOL_PART", "ANY_TARGET", "HOST_ONLY", "HOST_ABI", "HOST_POOLS", "TARGET_POOLS", "ABI_POOLS", "Basis",
           "RunPools", "DelegateHeap", "HeapAt"]

#: one row per (method, part, device) in :meth:`Sizes.table`: ``bytes`` is the highest seen, ``lowest`` the
#: lowest over the fresh runs (the same for the file's figures and the pools, which are exact)
SIZES_COLUMNS = ["method", "part", "device", "bytes", "lowest", "source"]

#: the parts of a method's run-time memory (:class:`~pte_lab.vocabulary.MemoryPart`), in the order a stacked bar
#: draws them: part -> (who measured it: "file", "runner", "counter" or "kernel"; what it is)
PARTS: dict[MemoryPart, tuple[str, str]] = {
    MemoryPart.PLANNED_ARENAS: ("file", "non_const_buffer_sizes, as ExecuTorch's MethodMeta reads them; "
                               "the runner allocates exactly these"),
    MemoryPart.METHOD_ALLOCATOR: ("runner", "high-water mark of the method allocator during load_method"),
    MemoryPart.DELEGATE_SCRATCH: ("delegate blob", "the largest scratch one delegate call takes from the temp allocator, "
                                          "as the delegates' blobs declare it (Ethos-U: scratch_size); part of "
                                          "the temp pool"),
    MemoryPart.TEMP_ALLOCATOR: ("runner", "peak of the temp allocator over load_method and the runs, at least what "
                                 "kernel resolution needs, beyond the delegates' scratch"),
    MemoryPart.HEAP_LOAD_PROGRAM: ("counter", "malloc'd by Program::load and still held"),
    MemoryPart.HEAP_LOAD_METHOD: ("counter", "malloc'd during load_method and still held (delegates' state, "
                                            "packed weights, kernels)"),
    MemoryPart.HEAP_EXECUTE: ("counter", "malloc'd during the runs and still held (workspaces, thread pools)"),
    MemoryPart.ANONYMOUS_MAPPINGS: ("counter", "mmap'd outside malloc during the steps and still held"),
    MemoryPart.FILE_RESIDENT: ("kernel", "pages of the program file (and .ptd) mapped in and resident "
                                        "(Rss in /proc/self/smaps); the loader mlocks them where the "
                                        "memlock limit allows, as Runtime.load_program does"),
}

#: the least base alignment a pool is reported with: ExecuTorch's planned tensors are 16-byte aligned
#: (exir's TENSOR_ALIGNMENT), and pool bases aligned to 16 were seen to suffice where 4 mod 16 failed
MIN_POOL_ALIGNMENT = TENSOR_ALIGNMENT

#: the base alignment planned buffers are given (and verified with, to exactly this): exir plans every
#: tensor at an offset that is a multiple of it
PLANNED_ALIGNMENT = TENSOR_ALIGNMENT

#: sizes of pools a method needs to be given (what a bare-metal build sizes by hand)
POOLS = (MemoryPart.PLANNED_ARENAS, MemoryPart.METHOD_ALLOCATOR, MemoryPart.TEMP_ALLOCATOR)
#: the pools whose size depends on the ABI (their allocations hold pointers and vectors of them); the planned
#: arenas are the file's
ABI_POOLS = tuple(p for p in MemoryPart if p.abi_dependent)

#: how many fresh workers measure each method's heap (the lowest and highest seen are kept)
HEAP_RUNS = 3

#: what every view says of the heap figures, and of the pools (one home for the wording)
HOST_DEPENDENT = ("the heap figures can change with the CPU (a kernel library or backend may pick its code and "
                  "workspaces per instruction set, as XNNPACK does), the allocator and the run")
POOLS_EXACT = "the pools are exact: ExecuTorch's own allocators, the same on every run"

#: MethodSizes' heap fields -> the HeapFigures field that holds the same figure
HEAP_FIELDS = {"heap_load_program": "load_program", "heap_load_method": "load_method", "heap_execute": "execute",
               "heap_execute_peak": "execute_peak", "anonymous_mapped": "anonymous_mapped",
               "file_resident": "file_resident", "heap_peak": "peak", "heap_kept": "kept",
               "file_heap_peak": "file_peak", "file_heap_kept": "file_kept", "heap_once": "once"}

#: the parts (:data:`PARTS`) that are host-dependent measurements (``MemoryPart.measured_here``)
MEASURED_PARTS = tuple(p for p in MemoryPart if p.measured_here)

#: backends that allocate their own memory with malloc, outside ExecuTorch's allocators -> what the heap they need
#: holds (a board's total counts it: without a heap that size they do not run): each backend's registration's
#: (:attr:`pte_lab.model.backends.Backend.own_heap`)
SELF_ALLOCATING = {b.id: b.own_heap for b in BACKENDS.values() if b.own_heap is not None}


def _its(backends) -> str:
    return "its" if len(backends) == 1 else "their"


#: the pool configurations every method is sized and verified in: name -> what it is
CONFIGURATIONS = {
    Configuration.METHOD_TEMP: "a method pool and a temp pool (the temp figure is tight only together with this method "
                     "pool: with a smaller temp pool, Method::init resolves kernels in the method pool)",
    Configuration.METHOD_ALONE: "a method pool and no temp allocator (MemoryManager's temp_allocator nullptr, as many runners "
                    "pass): kernel resolution then takes the method pool",
}


class Loader(str):
    """The data loader a target's total assumes: a ``str`` that documents write as the loader and what it does
    (``words``: "FileDataLoader (it mallocs the program's bytes it reads)"); :attr:`name` is the loader as a heading
    names it, without what it does in parentheses ("FileDataLoader", "BufferDataLoader over the program in
    flash"), which the words start with."""

    name: str

    def __new__(cls, words: str, name: str) -> "Loader":
        if not words.startswith(name):
            raise ValueError(f"{words!r} does not start with the loader's name {name!r}")
        self = super().__new__(cls, words)
        self.name = name
        return self

    def __reduce__(self):
        return Loader, (str(self), self.name)


@dataclass(frozen=True)
class TargetKind:
    """A kind of target the figures are said to hold on: what its platform layer's allocator does, and whether
    what was measured on this machine beyond the pools (heap, mappings, link line) holds there. A target of
    another ABI (a 32-bit Cortex-M) is a target of one of these kinds with pools of its own."""

    name: str
    #: its platform layer (et_pal_allocate: where a method with no temp allocator takes its temp memory)
    platform: str
    #: et_pal_allocate serves requests there
    platform_allocates: bool
    #: the heap, mapping and library figures measured here hold there
    host: bool
    #: the data loader its total assumes, and whether the program's bytes are in RAM with it
    loader: Loader
    program_in_ram: bool


#: the target kinds every configuration is run under (the first is this host)
TARGET_KINDS = {k.name: k for k in (
    TargetKind("host", "this host's platform layer (ExecuTorch's POSIX one: et_pal_allocate is malloc)", True,
               True, Loader("FileDataLoader (it mallocs the program's bytes it reads)", "FileDataLoader"), True),
    TargetKind("bare-metal", "a bare-metal platform layer whose et_pal_allocate returns nullptr (as Arm's does)",
               False, False, Loader("BufferDataLoader over the program in flash", "BufferDataLoader over the program in flash"), False),
)}

#: the pte_lab.sizes document's version: 2 since a total and a fit say their ``basis`` (file, modelled,
#: measured-here, measured-on-target) and each method its ``set_these`` block, where version 1 had ``exact``
SIZES_VERSION = 2

#: what a header or report says holds on any target, and what holds on this host only (one home for the labels)
ANY_TARGET = ("holds on any target: planned buffers, delegates' scratch, inputs and outputs, alignments; "
              "the pools are {pools}")
#: this machine's ABI, as the figures name it
HOST_ABI = "x86-64 LP64" if platform.machine() in ("x86_64", "AMD64") else f"{platform.machine()}"
#: how the pools of ANY_TARGET are said for this host's ABI, and for another target's
HOST_POOLS = f"this ABI's ({HOST_ABI}): for a 32-bit board, see --target cortex-m"
TARGET_POOLS = "{target}'s (modelled: see the note on how)"
HOST_ONLY = ("holds on this host only ({host}: its C library's malloc, ExecuTorch's POSIX platform layer): heap, "
             "mappings, what the process allocates once, the thread pool, the libraries and link line")


class Basis(Word):
    """How a figure was had, one word everywhere (the text, the HTML, the JSON and the header say it so). A
    ``str`` enum: a basis equals its value, and JSON writes the value. In the order of :meth:`weakest`: a figure
    read from the file is the firmest; one measured on this host and taken to hold on another target the least
    sure."""

    #: read from the program's bytes (its tables, the delegates' blobs): the same on every target
    FILE = "file"
    #: measured on the target itself (a runner on the board)
    MEASURED_ON_TARGET = "measured-on-target"
    #: computed for the target from the file and ExecuTorch's source (its ABI's type sizes, checked where the same
    #: computation gives this host's measurement)
    MODELLED = "modelled"
    #: measured on this host (ExecuTorch's allocators or the allocation counter)
    MEASURED_HERE = "measured-here"


    @classmethod
    def weakest(cls, bases) -> "Basis":
        """The least sure of ``bases`` (a total's basis is its least sure part's); FILE for none."""
        order = list(cls)
        return max(bases, key=order.index, default=cls.FILE)


#: backends that run on a microcontroller's NPU: a program that delegates to one is a board's (its budget bare-metal)
BOARD_BACKENDS = MICROCONTROLLER_BACKENDS


class RunPools(Word):
    """The pools a configuration was run with (:class:`TargetRun`): counting ones (the sizing measures with
    them), or exactly the reported sizes (a verification)."""

    COUNTING = "counting"
    REPORTED = "reported"



class SizingError(PteLabError):
    """A method could not be sized (the runtime refused it at some step); raised inside the sizing
    worker, and recorded as the method's reason in :attr:`Sizes.skipped`."""


@dataclass(frozen=True)
class HeapAt:
    """One method's heap with its dynamic inputs at smaller shapes than the file declares
    (``pte_lab.runtime.sizing.heap_at``): what :attr:`MethodSizes.file_heap_peak` is at the bound, measured the same way (the
    allocation counter, a FileDataLoader of its default alignment, with and without a temp allocator, what the
    process allocates once added) in one fresh worker whose every run sets those inputs at ``shapes``. Kernels and
    delegates malloc by the shapes they run at (XNNPACK's workspace), so this is the heap of a program exported
    with its bound at those shapes, as near as one run of the exported one says."""

    method: str
    #: (input position, the shape every run set it at), by position
    shapes: tuple[tuple[int, tuple[int, ...]], ...]
    #: the heap peak from the loader's creation through the runs, FileDataLoader (None: the counter is not
    #: preloaded here)
    file_heap_peak: int | None
    #: the tensors XNNPACK keeps in its workspace that the runs' copy of the program declared at the least size
    #: (0: the method calls no XNNPACK graph with such tensors; the program ran as it is)
    xnnpack_resized: int = 0
    #: when it was measured (seconds since the epoch), where it was kept (:mod:`pte_lab.runtime.kept`); None: now
    kept: float | None = None


# ------------------------------------------------------------------ results
@dataclass(frozen=True)
class TargetRun:
    """One pool configuration (:data:`CONFIGURATIONS`) run under one target kind's platform layer
    (:data:`TARGET_KINDS`): whether it ran, and what it asked of the platform layer's allocator."""

    configuration: str
    target: str
    #: every step worked (else ``error``: what ExecuTorch said, and at which step)
    ran: bool
    error: str | None = None
    #: requests to et_pal_allocate (the largest in bytes, PlatformMemoryAllocator's node and padding included),
    #: and those refused; temp allocations refused during execute (ExecuTorch logs them)
    platform_calls: int = 0
    platform_largest: int = 0
    platform_refused: int = 0
    temp_failures: int = 0
    #: pools of exactly the reported sizes (a verification); False: counting pools (the sizing)
    exact: bool = False

    @property
    def runnable(self) -> bool:
        """It ran with nothing refused: the configuration holds on this kind of target."""
        return self.ran and not self.platform_refused and not self.temp_failures

    def to_dict(self) -> dict:
        """As the JSON document gives it: the pools it ran with in one word (``pools``: counting or reported)."""
        return ({f: v for f, v in asdict(self).items() if f != "exact"}
                | {"pools": RunPools.REPORTED if self.exact else RunPools.COUNTING})

    @classmethod
    def of(cls, r: RunnerResult, configuration: str, *, exact: bool = False) -> "TargetRun":
        return cls(configuration, "bare-metal" if r.bare_metal else "host", r.ok, None if r.ok else failure(r),
                   r.platform_calls, r.platform_largest, r.platform_refused,
                   r.pools.temp_failed if r.pools else 0, exact)


#: PlatformMemoryAllocator's node on this host (runtime/executor/platform_memory_allocator.h: two pointers, a
#: data pointer and the next node), which each request to et_pal_allocate carries before the bytes asked
PLATFORM_NODE = 2 * struct.calcsize("P")


def platform_request(largest: int, asked: int) -> int | None:
    """The alignment a request to et_pal_allocate of ``largest`` bytes was made at, where it is
    PlatformMemoryAllocator's wrapping of ``asked`` bytes (its node, :data:`PLATFORM_NODE`, then ``asked`` and
    ``alignment - 1`` bytes of room to align them); None where ``largest`` is not that."""
    room = largest - PLATFORM_NODE - asked
    return room + 1 if asked and room >= 0 and (room + 1) & room == 0 else None


@dataclass(frozen=True)
class DelegateHeap:
    """What one backend allocates itself on a target's heap at load_method, outside ExecuTorch's pools (EthosUBackend:
    its ExecutionHandle, with operator new), as its source reads: ``count`` blocks of ``each`` bytes there."""

    backend: str
    #: the C++ type it allocates, and how (``operator new``)
    what: str
    how: str
    #: one per delegate of the method (each init allocates one); bytes of one on the target's ABI
    count: int
    each: int
    #: the ExecuTorch source read for it (a version and file)
    source: str

    @property
    def bytes(self) -> int:
        return self.count * self.each


class Place(Word):
    """Where one part of a board's total (:class:`Total`) may be placed in the board's regions."""

    #: any RAM region the CPU reaches
    RAM = "RAM"
    #: the heap: the part comes from malloc at run time, not from a static pool
    HEAP = "heap"
    #: operator new at run time: the heap, or on a board without one a static pool the runner gives operator new
    #: (:meth:`Total.with_new_pool`)
    NEW = "operator new"
    #: memory the NPU reaches (the temp pool holding its scratch, the program where the NPU writes in it)
    NPU = "NPU-reachable"



class Unplaced(Word):
    """Why a part of a board's total was placed nowhere (:class:`Fit`)."""

    #: no region it may go in has room for it
    NO_ROOM = "no room"
    #: it comes from malloc and the board has no heap
    NO_HEAP = "no heap"
    #: it must be in memory the NPU reaches and no region is marked as such (--npu-region NAME)
    NO_NPU_REGION = "no NPU region"



#: the part of a board's total that is the static operator-new pool (:meth:`Total.with_new_pool`)
NEW_POOL_PART = "operator-new pool (a static pool: the board has no heap)"

#: a region of this name (any case) is the board's heap: ``--region heap=0`` says it has none
HEAP_REGION = "heap"


#: what a C library's malloc adds to each block on a 32-bit target, as its source reads: name -> (the request
#: rounded up to, bytes added, the block's minimum). newlib-nano (newlib/libc/stdlib/nano-mallocr.c, the Arm
#: GNU toolchain's --specs=nano.specs): the request rounded up to 4 B, plus a 4 B size field and 4 B of padding
#: to align to 8; newlib's full malloc (mallocr.c, Doug Lea's 2.6): the request plus a 4 B size field, rounded
#: up to 8 B, at least 16 B
MALLOC_BLOCKS: dict[str, tuple[int, int, int]] = {"newlib-nano": (4, 8, 12), "newlib": (8, 4, 16)}


def malloc_block(allocator: str, request: int) -> int:
    """The bytes one block of ``request`` bytes takes from ``allocator``'s heap (``MALLOC_BLOCKS``)."""
    to, added, least = MALLOC_BLOCKS[allocator]
    if allocator == "newlib":
        return max(least, align_up(request + added, to))
    return max(least, align_up(request, to) + added)


#: the alignment a static pool behind operator new gives each block (alignof(max_align_t) on a 32-bit Arm target)
NEW_ALIGNMENT = 8


def operator_new_pool(blocks) -> int:
    """The bytes of a static pool that serves ``blocks`` (bytes each) from operator new, one after another, each
    at :data:`NEW_ALIGNMENT`."""
    return sum(align_up(b, NEW_ALIGNMENT) for b in blocks)


def board_has_heap(heap: bool | None, regions: tuple[tuple[str, int], ...] = ()) -> bool | None:
    """Whether a board has a heap, as ``heap`` (None: not said) and its regions say it: a region named
    :data:`HEAP_REGION` of 0 bytes says it has none, one of more bytes that it has one."""
    size = next((b for n, b in regions if n.lower() == HEAP_REGION), None)
    if size == 0:
        return False
    return True if size is not None and heap is None else heap


@dataclass(frozen=True)
class Total:
    """What one method must have in RAM on one kind of target (:data:`TARGET_KINDS`), in one configuration:
    ``parts`` (name, bytes) and their sum. ``exact``: every part is exact (no host heap figure in it)."""

    method: str
    target: str
    configuration: str
    parts: tuple[tuple[str, int], ...]
    exact: bool
    #: the configuration holds on that target (False: the total is of one that is not runnable there)
    runnable: bool = True
    #: planned buffers on a device (not in RAM), left out: (name, bytes)
    left_out: tuple[tuple[str, int], ...] = ()
    #: whose pools the total holds ("host": this machine's ABI, x86-64 LP64 here; "cortex-m": modelled), and
    #: why it is not exact (None: it is, or it holds a host heap figure)
    abi: str = "host"
    inexact: str | None = None
    #: how its least sure part was had (:class:`Basis`): the total is no surer than that
    basis: Basis = Basis.MEASURED_HERE
    #: where each part (in the order of ``parts``) may be placed; () or a part past its end: any RAM
    part_places: tuple[Place, ...] = ()
    #: the blocks the parts of Place.NEW ask operator new for (bytes each), in the order of those parts
    heap_blocks: tuple[int, ...] = ()
    #: the bytes of the static operator-new pool among the parts, in place of the operator-new parts a board without
    #: a heap cannot have (:meth:`with_new_pool`); 0: none
    new_pool: int = 0

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.parts)

    @property
    def loader(self) -> str:
        """The data loader the total assumes on its target (``TargetKind.loader``)."""
        return TARGET_KINDS[self.target].loader

    def place_of(self, i: int) -> Place:
        return self.part_places[i] if i < len(self.part_places) else Place.RAM

    @property
    def heap_need(self) -> int:
        """The bytes its parts ask of the heap (operator new, malloc), the allocator's overhead not included."""
        return sum(b for i, (_, b) in enumerate(self.parts) if self.place_of(i) in (Place.HEAP, Place.NEW))

    @property
    def new_need(self) -> int:
        """The bytes its parts ask of operator new (Place.NEW), the allocator's overhead not included."""
        return sum(b for i, (_, b) in enumerate(self.parts) if self.place_of(i) is Place.NEW)

    def with_new_pool(self) -> "Total":
        """This total on a board without a heap: its operator-new parts as one static pool in RAM
        (``operator_new_pool`` of :attr:`heap_blocks`), which the runner gives operator new; itself where no part
        comes from operator new. A part from malloc stays in the heap: such a board cannot give it."""
        if not self.new_need:
            return self
        kept = [i for i in range(len(self.parts)) if self.place_of(i) is not Place.NEW]
        pool = operator_new_pool(self.heap_blocks) if self.heap_blocks else self.new_need
        return replace(self, parts=(*(self.parts[i] for i in kept), (NEW_POOL_PART, pool)),
                       part_places=(*(self.place_of(i) for i in kept), Place.RAM), new_pool=pool)

    def heap_with(self, allocator: str) -> int:
        """The heap ``allocator`` needs for the blocks of ``heap_blocks`` (``malloc_block``)."""
        return sum(malloc_block(allocator, b) for b in self.heap_blocks)

    @property
    def heap_allocated(self) -> tuple[str, int]:
        """The allocator of ``MALLOC_BLOCKS`` whose heap the blocks of ``heap_blocks`` take most of, and those
        bytes: what a heap region must have for them whichever of newlib's mallocs serves it (``heap_need`` where
        no blocks are known)."""
        if not self.heap_blocks:
            return "", self.heap_need
        return max(((a, self.heap_with(a)) for a in MALLOC_BLOCKS), key=lambda p: p[1])

    def largest(self, n: int = 3) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self.parts, key=lambda p: -p[1])[:n])


@dataclass(frozen=True)
class Fit:
    """A board total (:class:`Total`) checked against a budget, or placed in named regions (first fit,
    largest part first; a part is never split). A part the heap gives (``Place.HEAP``) goes only in a region
    named ``heap`` where one is given, and nowhere on a board without a heap (``heap`` False); a part the NPU
    must reach (``Place.NPU``) only in a region marked so (``npu_regions``), or in the one region given."""

    total: Total
    #: the budget (bytes; None: regions), or the regions (name, bytes)
    budget: int | None
    regions: tuple[tuple[str, int], ...] = ()
    #: region -> the parts placed there; the parts that fit nowhere
    placed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unplaced: tuple[str, ...] = ()
    #: why each part of ``unplaced`` is (the same order)
    why_unplaced: tuple[Unplaced, ...] = ()
    #: the board has a heap (None: not said; False: --no-heap or a region heap=0); the regions the NPU reaches
    heap: bool | None = None
    npu_regions: tuple[str, ...] = ()
    #: with regions: each region's bytes left after the parts placed in it (a heap region's after what its
    #: allocator adds to each block), in the order given
    left_in: tuple[tuple[str, int], ...] = ()

    @property
    def fits(self) -> bool:
        if self.unplaced:
            return False
        if self.budget is not None:
            return self.total.bytes <= self.budget
        return True

    @property
    def left(self) -> int | None:
        """What the budget has left beyond the total (negative: over it); None with regions."""
        return None if self.budget is None else self.budget - self.total.bytes

    @property
    def no_heap(self) -> bool:
        """It does not fit because the board has no heap and a part comes from malloc (what operator new asks is
        given from a static pool there: :meth:`Total.with_new_pool`)."""
        return Unplaced.NO_HEAP in self.why_unplaced

    @classmethod
    def check(cls, total: Total, budget: int | None = None, regions: tuple[tuple[str, int], ...] = (), *,
              heap: bool | None = None, npu_regions: tuple[str, ...] = ()) -> "Fit":
        regions = tuple(regions)
        heap_region = next((n for n, _ in regions if n.lower() == HEAP_REGION), None)
        heap = board_has_heap(heap, regions)
        if heap is False:  # operator new from a static pool: what a board without a heap is given
            total = total.with_new_pool()
        unplaced: list[str] = []
        why: list[Unplaced] = []
        order = sorted(range(len(total.parts)), key=lambda i: -total.parts[i][1])
        if not regions:
            for i in order:
                if total.place_of(i) is Place.HEAP and heap is False and total.parts[i][1]:
                    unplaced.append(total.parts[i][0])
                    why.append(Unplaced.NO_HEAP)
            return cls(total, budget, (), (), tuple(unplaced), tuple(why), heap, tuple(npu_regions))
        free = {name: size for name, size in regions}
        placed: dict[str, list[str]] = {name: [] for name, _ in regions}
        # a heap region gives its parts through malloc: each block with the allocator's overhead, the larger of
        # newlib's two (:attr:`Total.heap_allocated`), charged with the first heap part placed there
        overhead = total.heap_allocated[1] - total.heap_need
        ram = [n for n, _ in regions if n != heap_region]
        npu = [n for n in ram if n in npu_regions] or (ram if len(ram) == 1 else [])
        # the parts the NPU must reach first, so that RAM parts do not take their room
        for i in sorted(order, key=lambda i: total.place_of(i) is not Place.NPU):
            part, b = total.parts[i]
            from_heap = total.place_of(i) in (Place.HEAP, Place.NEW)
            where_ok = ([heap_region] if heap_region is not None else ram) if from_heap else \
                {Place.NPU: npu, Place.RAM: ram}[total.place_of(i)]
            if total.place_of(i) is Place.HEAP and heap is False:
                unplaced.append(part)
                why.append(Unplaced.NO_HEAP)
                continue
            if total.place_of(i) is Place.NPU and not npu:
                unplaced.append(part)
                why.append(Unplaced.NO_NPU_REGION)
                continue
            need = {n: b + (overhead if n == heap_region and from_heap else 0) for n in where_ok}
            where = next((n for n in where_ok if free[n] >= need[n]), None)
            if where is None:
                unplaced.append(part)
                why.append(Unplaced.NO_ROOM)
            else:
                free[where] -= need[where]
                placed[where].append(part)
                if where == heap_region and from_heap:
                    overhead = 0
        return cls(total, None, regions, tuple((n, tuple(p)) for n, p in placed.items()), tuple(unplaced),
                   tuple(why), heap, tuple(npu_regions), tuple(free.items()))

    def to_dict(self) -> dict:
        return {"method": self.total.method, "target": self.total.target,
                "configuration": self.total.configuration, "total": self.total.bytes, "budget": self.budget,
                "regions": dict(self.regions), "placed": {n: list(p) for n, p in self.placed},
                "unplaced": list(self.unplaced), "why_unplaced": list(self.why_unplaced), "fits": self.fits,
                "heap": self.heap, "heap_need": self.total.heap_need, "npu_regions": list(self.npu_regions),
                "new_pool": self.total.new_pool, "heap_blocks": list(self.total.heap_blocks),
                "heap_allocated": ({"allocator": self.total.heap_allocated[0], "bytes": self.total.heap_allocated[1]}
                                   if self.total.heap_blocks and not self.total.new_pool else None),
                "abi": self.total.abi, "basis": self.total.basis, "inexact": self.total.inexact, "left": self.left,
                "left_in_regions": dict(self.left_in), "largest": [list(p) for p in self.total.largest()]}


@dataclass(frozen=True)
class HeapFigures:
    """One method's heap figures (bytes; None: not counted), as :class:`MethodSizes` names them: the lowest or
    the highest seen over the fresh runs that measured them."""

    load_program: int | None = None
    load_method: int | None = None
    execute: int | None = None
    execute_peak: int | None = None
    anonymous_mapped: int | None = None
    file_resident: int | None = None
    peak: int | None = None
    kept: int | None = None
    file_peak: int | None = None
    file_kept: int | None = None
    once: int | None = None

    @classmethod
    def of(cls, m: "MethodSizes") -> "HeapFigures":
        return cls(**{short: getattr(m, name) for name, short in HEAP_FIELDS.items()})

    def parts(self) -> dict[MemoryPart, int | None]:
        """The measured parts (:data:`MEASURED_PARTS`) these figures hold, as :meth:`MethodSizes.parts` keys them."""
        return {MemoryPart.HEAP_LOAD_PROGRAM: self.load_program, MemoryPart.HEAP_LOAD_METHOD: self.load_method,
                MemoryPart.HEAP_EXECUTE: self.execute, MemoryPart.ANONYMOUS_MAPPINGS: self.anonymous_mapped,
                MemoryPart.FILE_RESIDENT: self.file_resident}


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
    #: the raw per-step measurements (None: the counter was not preloaded)
    steps: dict[Step, StepUse | None] = field(default_factory=dict, compare=False, repr=False)
    #: the backends and kernels pte_lab's stand-ins replaced while measuring (see runtime.stand_ins)
    stand_ins: tuple[str, ...] = ()
    #: the largest scratch one delegate call takes from the temp allocator, from the blobs (the temp pool covers it)
    delegate_scratch: int = 0
    #: "method alone": the method pool with no temp allocator (None: the method cannot run without one,
    #: see ``alone_error``); ``alignment`` covers its allocations too
    method_pool_alone: int | None = None
    alone_error: str | None = None
    #: the planned buffers' base alignment (verified to exactly this)
    planned_alignment: int = PLANNED_ALIGNMENT
    #: the most heap held at once from load_program through the runs, above what was held before
    #: (the counter: XNNPACK's packed weights, workspaces; None without the counter), and what is still
    #: held after the runs, with the program mapped (MmapDataLoader: the file is not in the heap)
    heap_peak: int | None = None
    heap_kept: int | None = None
    #: the same with a FileDataLoader of alignment ``file_loader_alignment`` (it mallocs the program's
    #: flatbuffer at Program::load, the constant segment, delegate blobs while load_method reads them),
    #: the larger of the two configurations: the heap a runner that reads the file needs
    file_heap_peak: int | None = None
    file_heap_kept: int | None = None
    file_loader_alignment: int = 0
    #: what the process allocates once, on the first load and execute of any method (ExecuTorch's thread
    #: pool and cpuinfo's tables, a backend's process-wide state): the larger of the first method's first
    #: run less a repeat (in the worker) and a fresh native process's first parallel_for (the probe: the
    #: worker may hold part of it already), rounded up to :data:`HEAP_ONCE_ROUNDING`; part of every method's
    #: heap_peak/heap_kept and file_heap_peak/file_heap_kept (a process that runs only this method pays it
    #: too), not of the per-step parts
    heap_once: int | None = None
    #: inputs and outputs as ExecuTorch's MethodMeta reads them; every input was set before every
    #: execute (:data:`INPUT_VALUES`)
    inputs: tuple[MethodIO, ...] = ()
    outputs: tuple[MethodIO, ...] = ()
    #: the heap figures over ``heap_runs`` fresh workers: the lowest and the highest seen (the scalar heap
    #: fields above are the highest); None where the heap was not counted
    heap_runs: int = 1
    heap_low: HeapFigures | None = None
    heap_high: HeapFigures | None = None
    #: the backends the method delegates to, and the libraries of the executorch install that register
    #: its backends and operators (libexecutorch.so first)
    backends: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()
    libraries: tuple[Library, ...] = ()
    #: each configuration run under each target kind's platform layer, with counting pools (the sizing)
    targets: tuple[TargetRun, ...] = ()
    #: the program's bytes where a board must hold them in RAM (0: they may stay in flash), and why
    program_in_ram: int = 0
    program_in_ram_why: str | None = None
    #: the target whose ABI the pools are for ("host": measured here; "cortex-m": modelled, see
    #: pte_lab.views.runtime.target_pools), and why its board total is not exact there (None: it is)
    abi: str = "host"
    inexact: str | None = None
    #: the temp allocator's peak from the first execute on (what kernels and delegates take at run time; None:
    #: the method did not run), and how many of those allocations found the pool's cursor off their alignment
    #: (0: the run-time bytes are the requests' own sizes, the same on a target whose default alignment is
    #: smaller, as pte_lab.views.runtime.target_pools takes them)
    temp_run_peak: int | None = None
    temp_run_padded: int = 0
    #: what the delegates allocate themselves on the target's heap (operator new), per their source; set for
    #: another target's pools (pte_lab.runtime.sizing.target.on_target), where the stand-ins' heap is this host's
    delegate_heap: tuple["DelegateHeap", ...] = ()

    def holds_on(self, configuration: str) -> dict[str, TargetRun]:
        """Target kind -> how ``configuration`` ran under its platform layer (with counting pools)."""
        return {t.target: t for t in self.targets if t.configuration == configuration}

    def totals(self, *, heap: bool | None = None) -> dict[str, Total]:
        """Target kind -> what the method must have in RAM there (:class:`Total`): the planned buffers, the
        pools of the configuration it holds in (the smaller where both do), and the program's bytes where that
        target's loader or the delegates' memory mode needs them in RAM; on this host, the heap a runner with
        a FileDataLoader needs (the highest seen; it holds the loader's copy of the program). ``heap`` False:
        the board has no heap (--no-heap, a region heap=0): a board's total has what the delegates ask of
        operator new as the static pool the runner gives it (:meth:`Total.with_new_pool`), as its fit has."""
        out = self._totals()
        if heap is False:
            out = {k: t if TARGET_KINDS[k].host else t.with_new_pool() for k, t in out.items()}
        return out

    def _totals(self) -> dict[str, Total]:
        host_planned = tuple((f"planned buffer {mem_id}", b) for mem_id, dev, b in self.planned if dev == "cpu")
        devices = tuple((f"planned buffer {mem_id} ({dev})", b) for mem_id, dev, b in self.planned if dev != "cpu")
        pools = {Configuration.METHOD_TEMP: (("method pool", self.method_allocator),
                                   (f"temp pool (covers the delegates' scratch, {self.delegate_scratch:,} B)"
                                    if self.delegate_scratch else "temp pool", self.temp_allocator))}
        if self.method_pool_alone is not None:
            pools[Configuration.METHOD_ALONE] = (("method pool", self.method_pool_alone),)
        out = {}
        for kind in TARGET_KINDS.values():
            if kind.host and self.abi != "host":  # another ABI's pools with this host's heap: no one's total
                continue
            runs = {c: self.holds_on(c).get(kind.name) for c in pools}
            holding = [c for c in pools if runs[c] is not None and runs[c].runnable]
            if kind.host:  # a Linux runner: the pools with a temp allocator, and the heap it needs beyond them
                config = Configuration.METHOD_TEMP
            else:
                config = min(holding or [Configuration.METHOD_TEMP], key=lambda c: sum(b for _, b in pools[c]))
            parts = list(host_planned) + list(pools[config])
            # where each part may go on the board: the temp pool holding the NPU's scratch and the program the
            # NPU writes in, in memory the NPU reaches; what operator new and malloc give, in the heap
            places = [Place.RAM] * len(parts)
            if not kind.host and config == Configuration.METHOD_TEMP and self.delegate_scratch:
                places[-1] = Place.NPU
            if kind.host:
                if self.file_heap_peak is not None:
                    parts.append((f"heap peak, FileDataLoader({self.file_loader_alignment}) (this host, the highest "
                                  f"seen; holds the loader's copy of the program)", self.file_heap_peak))
                    places.append(Place.RAM)
            elif self.program_in_ram:
                parts.append((f"the program's bytes ({self.program_in_ram_why})", self.program_in_ram))
                places.append(Place.NPU)
            inexact = self.inexact
            own = self.delegates_own_heap
            bases = [Basis.FILE, Basis.MEASURED_HERE if kind.host or self.abi == "host" else Basis.MODELLED]
            blocks: list[int] = []
            if not kind.host:
                for h in self.delegate_heap:  # what the delegates take with operator new there (their source's)
                    parts.append((f"heap: {h.backend}'s {h.what} x{h.count} ({h.how})", h.bytes))
                    places.append(Place.NEW)
                    blocks += [h.each] * h.count
                    bases.append(Basis.MODELLED)
            if not kind.host and own:  # a board runs them only with a heap of this much, beyond every pool
                parts.append((f"heap {' and '.join(SELF_ALLOCATING[b] for b in own)} (this host's figure, the "
                              f"program mapped)", self.heap_peak))
                places.append(Place.HEAP)
                bases.append(Basis.MEASURED_HERE)
                inexact = inexact or (f"{', '.join(own)} allocate{'s' if len(own) == 1 else ''} {_its(own)} own "
                                      f"memory with malloc, outside ExecuTorch's pools: a board needs a heap of "
                                      f"that much, measured on this host")
            out[kind.name] = Total(self.method, kind.name, config, tuple(parts),
                                   exact=not kind.host and inexact is None, abi=self.abi, inexact=inexact,
                                   runnable=config in holding or not self.targets, left_out=devices,
                                   basis=Basis.weakest(bases), part_places=tuple(places), heap_blocks=tuple(blocks))
        return out

    @property
    def delegates_own_heap(self) -> tuple[str, ...]:
        """The backends of this method that allocate their own memory with malloc, outside ExecuTorch's pools
        (``SELF_ALLOCATING``), where the heap was measured; () where none does or nothing was counted."""
        if self.heap_peak is None:
            return ()
        return tuple(b for b in self.backends if b in SELF_ALLOCATING)

    def planned_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, dev, b in self.planned:
            out[dev] = out.get(dev, 0) + b
        return out

    def seen(self, field_name: str) -> tuple[int, int] | None:
        """(lowest, highest) seen over the fresh runs of a heap field (:data:`HEAP_FIELDS`, or a part of
        :data:`MEASURED_PARTS`, the member or its words); None: not measured."""
        if field_name not in HEAP_FIELDS:  # a part: read as its member (a MemoryPart is its words)
            part = MemoryPart(field_name)
            low = None if self.heap_low is None else self.heap_low.parts()[part]
            high = self.parts()[part]
        else:
            low = None if self.heap_low is None else getattr(self.heap_low, HEAP_FIELDS[field_name])
            high = getattr(self, field_name)
        if high is None:
            return None
        return (high if low is None else low), high

    def parts(self) -> dict[MemoryPart, int | None]:
        """The run-time bytes by part (:data:`PARTS`); planned arenas summed over devices; the measured parts
        (:data:`MEASURED_PARTS`) are the highest seen (:meth:`seen` has the lowest)."""
        return {
            MemoryPart.PLANNED_ARENAS: sum(b for _, _, b in self.planned),
            MemoryPart.HEAP_LOAD_PROGRAM: self.heap_load_program,
            MemoryPart.METHOD_ALLOCATOR: self.method_allocator,
            MemoryPart.DELEGATE_SCRATCH: self.delegate_scratch,
            MemoryPart.TEMP_ALLOCATOR: self.temp_allocator - self.delegate_scratch,
            MemoryPart.HEAP_LOAD_METHOD: self.heap_load_method,
            MemoryPart.HEAP_EXECUTE: self.heap_execute,
            MemoryPart.ANONYMOUS_MAPPINGS: self.anonymous_mapped,
            MemoryPart.FILE_RESIDENT: self.file_resident,
        }

    def part_sources(self) -> dict[MemoryPart, str]:
        """Each of :meth:`parts`' basis, as the sizes table's ``from`` column says it (``part_source``)."""
        return {part: part_source(part, self) for part in self.parts()}


class TempShort(Enum):
    """What a temp pool one byte smaller than reported did, with exactly the reported method pool."""

    #: ExecuTorch refused it: a step failed (load_method, or an execute returning an error)
    REFUSED = "refused"
    #: temp allocations failed during execute, which still returned Ok (ExecuTorch only logs them)
    SILENT = "silent"
    #: nothing failed: the temp figure is not tight
    RAN = "ran"


@dataclass(frozen=True)
class TempProbe:
    """A temp pool one byte short, tried: the verdict (decided here, by :meth:`of`; worded by
    :mod:`pte_lab.views.runtime.sizes`) and its detail."""

    outcome: TempShort
    #: REFUSED: what ExecuTorch said, and at which step
    error: str | None = None
    #: SILENT: the temp allocations that failed during execute
    failed: int = 0

    @classmethod
    def of(cls, run: RunnerResult) -> "TempProbe":
        failed = run.pools.temp_failed if run.pools else 0
        if not run.ok:
            return cls(TempShort.REFUSED, error=failure(run))
        return cls(TempShort.SILENT, failed=failed) if failed else cls(TempShort.RAN)


@dataclass(frozen=True)
class PoolVerification:
    """One method run with pools of exactly its reported sizes, then with a method pool one byte smaller."""

    #: the pools tried (bytes; temp None: no temp allocator) and their bases' alignment
    method_pool: int
    temp_pool: int | None
    alignment: int
    #: the method loaded and ran with exactly these pools; else what ExecuTorch said, and at which step
    sufficient: bool
    sufficient_error: str | None
    #: ExecuTorch refused a method pool one byte smaller at load_method (MemoryAllocationFailed)
    tight: bool
    #: what ExecuTorch said to the smaller pool (None: nothing, or not tried)
    smaller_error: str | None
    #: the configuration (:data:`CONFIGURATIONS`), executes run, the planned buffers' base alignment
    configuration: str = Configuration.METHOD_TEMP
    runs: int = 1
    planned_alignment: int = PLANNED_ALIGNMENT
    #: the data loader the runs used ("FileDataLoader(16)", "MmapDataLoader")
    loader: str = "MmapDataLoader"
    #: temp allocations refused during the runs with exactly these pools (a kernel's execute-time temp
    #: allocation failing is logged by ExecuTorch, and execute may still return Ok): any makes it insufficient
    temp_failures: int = 0
    #: what a temp pool one byte smaller did (method + temp, temp pool > 0; None: not tried)
    smaller_temp: TempProbe | None = None
    #: the exact pools' run on this host (``host``: what it asked of et_pal_allocate, malloc here) and again
    #: under a bare-metal platform layer whose et_pal_allocate refuses (``bare_metal``; None: not run)
    host: TargetRun | None = None
    bare_metal: TargetRun | None = None

    def holds_on(self) -> dict[str, TargetRun]:
        """Target kind -> how exactly these pools ran under its platform layer."""
        return {t.target: t for t in (self.host, self.bare_metal) if t is not None}

    @property
    def temp_short_is_silent(self) -> bool:
        """A temp pool one byte short is not refused: a kernel's temp allocation fails during execute, which
        still returns Ok (ExecuTorch only logs "Failed to allocate temp memory")."""
        return self.smaller_temp is not None and self.smaller_temp.outcome is TempShort.SILENT

    @classmethod
    def of(cls, trial: PoolTrial, m: "MethodSizes") -> "PoolVerification":
        """What ``trial``'s runs proved of ``m``'s pools."""
        ok, smaller = trial.exact, trial.smaller
        configuration = Configuration.METHOD_TEMP if trial.temp_pool is not None else Configuration.METHOD_ALONE
        temp_failures = ok.pools.temp_failed if ok.pools else 0
        sufficient = ok.ok and not temp_failures
        why = None if sufficient else failure(ok) if not ok.ok else (
            f"{temp_failures} temp allocations refused during execute (ExecuTorch logged them; execute "
            f"returned Ok)")
        return cls(
            trial.method_pool, trial.temp_pool, m.alignment,
            sufficient=sufficient, sufficient_error=why,
            tight=smaller is not None and smaller.error == MEMORY_ALLOCATION_FAILED
            and smaller.step is not None and smaller.step.kind is StepKind.LOAD_METHOD,
            smaller_error=None if smaller is None or smaller.ok else failure(smaller),
            configuration=configuration, runs=m.runs,
            planned_alignment=m.planned_alignment, loader=f"FileDataLoader({trial.file_loader})",
            temp_failures=temp_failures,
            smaller_temp=None if trial.smaller_temp is None else TempProbe.of(trial.smaller_temp),
            host=TargetRun.of(ok, configuration, exact=True),
            bare_metal=None if trial.bare is None else TargetRun.of(trial.bare, configuration, exact=True))

    def to_dict(self) -> dict:
        from ...views.runtime.sizes import temp_probe_words

        return asdict(self) | {"smaller_temp": None if self.smaller_temp is None
                               else temp_probe_words(self.smaller_temp),
                               **{k: None if r is None else r.to_dict()
                                  for k, r in (("host", self.host), ("bare_metal", self.bare_metal))}}


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
    #: per method: the verification's outcome, method + temp pools (None until :meth:`verify` ran)
    verified: dict[str, PoolVerification] | None = None
    #: per method: the verification's outcome with the method pool alone (no temp allocator); absent for
    #: methods that cannot run without one
    verified_alone: dict[str, PoolVerification] | None = None
    #: what the file declares for each method not sized (planned arenas, delegates' scratch)
    declared: dict[str, DeclaredSizes] = field(default_factory=dict)
    #: when these figures were measured (seconds since the epoch) where they come from pte_lab's kept
    #: measurements (:mod:`pte_lab.runtime.kept`); None: measured by this call
    kept: float | None = None
    #: the methods of :attr:`skipped` this install cannot run at all (a delegate's backend is not in this
    #: ExecuTorch build, and pte_lab has no stand-in): known from the file and the registry, not a failure
    #: (``pte-lab`` exits ``pte_lab.errors.NOT_RUN_HERE`` (5)); the others failed while running
    cannot_run_here: tuple[str, ...] = ()

    def table(self) -> "pd.DataFrame":
        """One row per method, part and device (:data:`SIZES_COLUMNS`)."""
        import pandas as pd

        rows = []
        for m in self.methods.values():
            for mem_dev, b in sorted(m.planned_by_device().items(), key=lambda kv: (kv[0] != "cpu", kv[0])):
                rows.append((m.method, MemoryPart.PLANNED_ARENAS, mem_dev, b, b, PARTS[MemoryPart.PLANNED_ARENAS][0]))
            for part, b in m.parts().items():
                if part is MemoryPart.PLANNED_ARENAS or b is None or (part is MemoryPart.DELEGATE_SCRATCH and not b):
                    continue
                seen = m.seen(part) if part.measured_here else None
                low = b if seen is None else seen[0]
                rows.append((m.method, part, "cpu", b, low, part_source(part, m)))
        for d in self.declared.values():
            for _, dev, b in d.planned:
                rows.append((d.method, MemoryPart.PLANNED_ARENAS, dev, b, b, PARTS[MemoryPart.PLANNED_ARENAS][0]))
            if d.delegate_scratch:
                rows.append((d.method, MemoryPart.DELEGATE_SCRATCH, "cpu", d.delegate_scratch, d.delegate_scratch,
                             PARTS[MemoryPart.DELEGATE_SCRATCH][0]))
        df = pd.DataFrame(rows, columns=SIZES_COLUMNS)
        df.attrs.update(path=self.path, counted=self.counted, executorch=self.executorch_version,
                        heap_runs=max((m.heap_runs for m in self.methods.values()), default=0))
        return df

    def pools(self) -> "pd.DataFrame":
        """One row per method: the pool sizes a bare-metal build gives it (method + temp pools, or the method
        pool alone with no temp allocator), their bases' alignment, and the planned buffers'."""
        import pandas as pd

        rows = [(m.method, m.method_allocator, m.temp_allocator, m.method_pool_alone, m.alignment,
                 tuple(b for _, _, b in m.planned), tuple(d for _, d, _ in m.planned), m.planned_alignment)
                for m in self.methods.values()]
        return pd.DataFrame(rows, columns=["method", Pool.METHOD_POOL, Pool.TEMP_POOL, "method_pool_alone", "alignment",
                                           Pool.PLANNED_BUFFERS, "planned_devices", "planned_alignment"])

    def totals(self, *, heap: bool | None = None) -> dict[str, dict[str, Total]]:
        """Method -> target kind (:data:`TARGET_KINDS`) -> what it must have in RAM there
        (:meth:`MethodSizes.totals`; ``heap`` False: on a board without a heap)."""
        return {n: m.totals(heap=heap) for n, m in self.methods.items()}

    @property
    def target(self) -> str:
        """The target whose ABI the pools are for ("host" unless ``pte_lab.views.runtime.target_pools.on_target``
        made these sizes for another)."""
        return next((m.abi for m in self.methods.values()), "host")

    def fits(self, budget: int | None = None, regions: tuple[tuple[str, int], ...] = (),
             target: str = "bare-metal", *, heap: bool | None = None,
             npu_regions: tuple[str, ...] = ()) -> dict[str, Fit]:
        """Method -> its ``target`` total checked against ``budget`` bytes, or placed in ``regions`` ((name,
        bytes), first fit, largest part first; :meth:`Fit.check`), on a board with a heap or not (``heap``
        False: what the delegates ask of operator new is a static pool in RAM, :meth:`Total.with_new_pool`; what
        a backend takes with malloc itself fits nowhere). Raises ``ValueError`` with none of them."""
        if budget is None and not regions and heap is not False:
            raise ValueError("fits() needs a budget, regions or heap=False")
        return {n: Fit.check(t[target], budget, tuple(regions), heap=heap, npu_regions=tuple(npu_regions))
                for n, t in self.totals().items()}

    @property
    def budget_target(self) -> str:
        """The target kind a ``--budget`` is for (:data:`TARGET_KINDS`), and so the total a report leads with: a
        program for a microcontroller's delegate (``BOARD_BACKENDS``) or another target's pools is a board's,
        checked bare-metal; any other is an app's on a host or phone, checked against the total it pays with its
        loader there (Module's default FileDataLoader), its bare-metal total said apart, an aside."""
        board = any(b in BOARD_BACKENDS or m.abi != "host" for m in self.methods.values() for b in (*m.backends, ""))
        return "bare-metal" if board else "host"

    @property
    def proven(self) -> bool:
        """Every sized method verified in both configurations: sufficient, and its method pool tight."""
        checks = [*(self.verified or {}).values(), *(self.verified_alone or {}).values()]
        return bool(self.verified) and all(v.sufficient and v.tight for v in checks)

    def to_dict(self, budget: int | None = None, regions: tuple[tuple[str, int], ...] = (), *,
                heap: bool | None = None, npu_regions: tuple[str, ...] = ()) -> dict:
        """The pte_lab.sizes document; ``totals`` per method and target kind, ``fits`` (None without a
        ``budget`` or ``regions``) the board's totals checked against them (:meth:`fits`)."""
        def method(m: MethodSizes) -> dict:
            # the steps (keyed by Step records) are not in the document
            d = {k: v for k, v in asdict(replace(m, steps={})).items()
                 if k not in ("steps", "inputs", "outputs", "libraries", "targets")}
            return d | {"parts": m.parts(),
                        "inputs": [asdict(i) | {"dtype": i.dtype, "set_to": _set_to(i)} for i in m.inputs],
                        "outputs": [asdict(o) | {"dtype": o.dtype} for o in m.outputs],
                        "libraries": [asdict(lib) for lib in m.libraries],
                        # each run's pools: counting ones (the sizing) or the reported sizes (a verification)
                        "targets": [t.to_dict() for t in m.targets]}

        return {
            "schema": "pte_lab.sizes", "version": SIZES_VERSION, "target": self.target, "path": self.path, "executorch": self.executorch_version,
            "counted": self.counted, "kept": self.kept, "heap_runs": max((m.heap_runs for m in self.methods.values()), default=0),
            "heap_figures": HOST_DEPENDENT + "; each is the highest seen over heap_runs fresh workers, heap_low the "
                            "lowest", "pools": POOLS_EXACT,
            "parts": {p: {"source": how, "what": what} for p, (how, what) in PARTS.items()},
            "configurations": CONFIGURATIONS, "inputs_set_to": INPUT_VALUES,
            "methods": {n: method(m) for n, m in self.methods.items()},
            "skipped": self.skipped,
            "declared": {n: asdict(d) for n, d in self.declared.items()},
            "verified": None if self.verified is None else {n: v.to_dict() for n, v in self.verified.items()},
            "verified_alone": None if self.verified_alone is None else {
                n: v.to_dict() for n, v in self.verified_alone.items()},
            "targets": {k: asdict(t) for k, t in TARGET_KINDS.items()},
            # one word per basis: a total says how its least sure part was had (``basis``), not "exact"
            "totals": {n: {k: {f: v for f, v in asdict(t).items() if f != "exact"} | {"bytes": t.bytes}
                           for k, t in ts.items()} for n, ts in self.totals(heap=heap).items()},
            "fits": None if budget is None and not regions and heap is not False else {
                n: f.to_dict() for n, f in self.fits(budget, regions, "bare-metal" if regions or heap is False
                                                     else self.budget_target, heap=heap,
                                                     npu_regions=npu_regions).items()},
        }

    def verify(self) -> dict[str, PoolVerification]:
        """Load and run each method with pools of exactly the reported sizes, then with a method pool
        one byte smaller; the first must work and the second be refused (MemoryAllocationFailed).

        Returns (and keeps in :attr:`verified`) per method a :class:`PoolVerification`. Raises
        :class:`SizingError` when a figure is not sufficient.
        """
        # the measuring machinery, imported when a sizing is verified: a kept one is read without it
        from ..checked import checked
        from .measure import Session

        pte = checked(self.path).pte
        with Session(self.path, self.data_path, sorted(
                {d for m in self.methods.values() for _, d, _ in m.planned if d != "cpu"})) as session:
            self.verified, self.verified_alone = {}, {}
            for m in self.methods.values():
                why = session.cannot_run(pte.methods[m.method])  # registers the operators it needs
                if why is None:
                    self.verified[m.method], alone = verify_pools(session, m)
                    if alone is not None:
                        self.verified_alone[m.method] = alone
                else:
                    self.verified[m.method] = PoolVerification(
                        m.method_allocator, m.temp_allocator, m.alignment, sufficient=False, sufficient_error=why,
                        tight=False, smaller_error=None)
        raise_if_insufficient(self.verified, self.verified_alone)
        return self.verified

    def _repr_html_(self) -> str:
        from ...views.runtime.sizes import sizes_html

        return sizes_html(self)

    def __repr__(self) -> str:
        return f"<Sizes {os.path.basename(self.path)!r}: {', '.join(map(printable, self.methods))}>"


def part_source(part: MemoryPart, m: MethodSizes) -> str:
    """Who measured ``part`` (:data:`PARTS`), and "with stand-ins" where stand-ins ran in the measurement."""
    how = PARTS[part][0]
    return f"{how}, with stand-ins" if m.stand_ins and how in ("runner", "counter") else how


def _set_to(io: MethodIO) -> str:
    """What the sizing runner set an input to before every execute."""
    if io.kind == ValueKind.TENSOR:
        return INPUT_VALUES["Tensor"]
    return INPUT_VALUES["other"] + ("" if io.value is None else f": {io.value!r}")


def verify_pools(session: "Session", m: MethodSizes) -> tuple[PoolVerification, PoolVerification | None]:
    """Both configurations (the second None where the method cannot run without a temp allocator)."""
    def check(method_pool: int, temp_pool: int | None) -> PoolVerification:
        return PoolVerification.of(session.trial(m.method, method_pool=method_pool, temp_pool=temp_pool,
                                                 alignment=m.alignment, runs=m.runs,
                                                 planned_alignment=m.planned_alignment), m)

    both = check(m.method_allocator, m.temp_allocator)
    return both, None if m.method_pool_alone is None else check(m.method_pool_alone, None)


def raise_if_insufficient(verified: dict[str, PoolVerification],
                          alone: dict[str, PoolVerification] | None = None) -> None:
    """:class:`SizingError` naming each method whose pools of the reported sizes did not suffice."""
    bad = [(n, v) for n, v in verified.items() if not v.sufficient]
    bad += [(n, v) for n, v in (alone or {}).items() if not v.sufficient]
    if bad:
        raise SizingError("pools of the reported sizes did not suffice for "
                          + ", ".join(f"{n!r} ({v.configuration}: {v.sufficient_error})" for n, v in bad))
