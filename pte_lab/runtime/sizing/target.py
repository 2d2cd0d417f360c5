"""Pools for another target than this host (``pte-lab sizes FILE --target cortex-m``), as records: the method pool
replayed from the program's tables with the target's ABI (:mod:`pte_lab.model.method_pool`), trusted only where the
same replay with this host's ABI gives the sizing runner's measurement exactly (:class:`TargetPools`), and what a
board must be given, pool by pool, with each figure's basis and where it must live (:class:`SetThese`). The views
(:mod:`pte_lab.views.runtime.target_pools`) only render them.

The planned arenas are the file's, the same on every target. The temp pool holds kernel resolution's
TensorMeta lists (ABI-dependent, modelled) and what kernels and delegates take at run time (the delegates'
scratch, a kernel's ``allocate_temp``: bytes that do not depend on the ABI). The sizing runner measures the
temp allocator from the first execute on apart from kernel resolution; where no run-time allocation needed
padding on this host, its peak is the requests' own bytes and holds on the target too, and the temp pool is
exact. Else (a method that did not run, or padding that depends on where earlier requests ended) the temp pool
is given as a range: at least what the target's resolution and the delegates' scratch need, at most this
host's pool. What a delegate allocates itself with ``new`` on the target (EthosUBackend's ExecutionHandle) is the
target's heap, counted in its total (:data:`pte_lab.model.method_pool.BACKEND_HEAP`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from ...vocabulary import Configuration, MemoryPart, Word

from ...model.abi import abi as abi_of
from ...model.ethos_u import MEMORY_MODES
from ...model.method_pool import BACKEND_HEAP, BACKEND_SOURCES_READ, method_pool
from .records import TARGET_KINDS, Basis, DelegateHeap, Sizes, Total, operator_new_pool

__all__ = ["TargetPools", "TempSetBy", "target_pools", "on_target", "PoolKind", "Lives", "TargetPool", "SetThese",
           "set_these"]


class TempSetBy(Word):
    """What makes a target's temp pool (its lower figure): one home for pools.h, the text and the JSON."""

    #: the delegates' scratch (the blobs'), which they take from it at run time
    SCRATCH = MemoryPart.DELEGATE_SCRATCH.value
    #: what the kernels take from it at run time (allocate_temp), measured here
    RUN_TIME = "run time"
    #: kernel resolution's threshold: Method::init resolves in the temp pool only where the widest call fits
    RESOLUTION_THRESHOLD = "resolution threshold"
    #: kernel resolution's peak (each call's argument metadata)
    RESOLUTION_PEAK = "resolution peak"



@dataclass(frozen=True)
class TargetPools:
    """One method's pools on ``target`` (bytes; None: not known there, see ``why``)."""

    method: str
    target: str
    abi: str
    #: (mem_id, device, bytes) of every planned arena: the file's, the same on every target
    planned: tuple[tuple[int, str, int], ...]
    method_pool: int | None
    method_pool_alone: int | None
    #: the temp pool: exactly ``temp_pool`` when ``temp_low`` equals it, else somewhere in [temp_low, temp_pool]
    temp_pool: int | None
    temp_low: int | None
    #: this host's measured method pools (method + temp, alone) and the same replay with this host's ABI
    host_measured: tuple[int, int | None]
    host_model: tuple[int | None, int | None]
    #: why a figure is not given (None: every figure is the model's, checked against this host)
    why: str | None = None
    #: what sets the temp pool (its lower figure)
    temp_set_by: TempSetBy | None = None
    #: the most the temp pool holds at once there (kernel resolution's peak or run time's), where it is exact
    temp_held: int | None = None
    #: the figures behind ``temp_set_by``: the delegates' scratch, run time's use (allocate_temp), kernel
    #: resolution's peak and threshold there, the widest kernel call's arguments
    scratch: int = 0
    run_time: int = 0
    resolution_temp: int = 0
    resolution_minimum: int = 0
    widest_call_args: int = 0

    @property
    def temp_exact(self) -> bool:
        return self.temp_pool is not None and self.temp_low == self.temp_pool

    @property
    def temp_basis(self) -> Basis:
        """How the temp pool was had: the blobs' scratch is the file's, run time's use this host's measurement
        (the requests' own bytes), kernel resolution (or a range) the model's."""
        if self.why is not None:
            return Basis.MEASURED_HERE
        if self.temp_exact and self.temp_set_by is TempSetBy.SCRATCH:
            return Basis.FILE
        if self.temp_exact and self.temp_set_by is TempSetBy.RUN_TIME:
            return Basis.MEASURED_HERE
        return Basis.MODELLED


def _one(m, pte, target: str, external_data: bool) -> TargetPools:
    host = method_pool(pte, m.method, "host", external_data=external_data)
    there = method_pool(pte, m.method, target, external_data=external_data) if target != "host" else host
    measured = (m.method_allocator, m.method_pool_alone)
    modelled = (host.bytes, host.alone if m.method_pool_alone is not None else None)
    common = dict(method=m.method, target=target, abi=there.abi, planned=m.planned, host_measured=measured,
                  host_model=modelled)
    if target == "host":
        return TargetPools(method_pool=m.method_allocator, method_pool_alone=m.method_pool_alone,
                           temp_pool=m.temp_allocator, temp_low=m.temp_allocator, **common)
    why = there.unknown or host.unknown
    if why is None and modelled != measured:
        why = (f"the model gives this host {_pair(modelled)} where the sizing runner measured {_pair(measured)}: "
               f"it does not know everything this method takes, so its {target} figure is not given")
    if why is not None:
        return TargetPools(method_pool=None, method_pool_alone=None, temp_pool=None, temp_low=None, why=why,
                           **common)
    low = max(there.resolution_temp, there.resolution_minimum, m.delegate_scratch)
    run_time = 0
    if m.temp_run_peak is not None and not m.temp_run_padded:
        # measured apart from kernel resolution, each allocation at its alignment already: the requests' own
        # bytes, which the target's kernels and delegates ask the same
        run_time = m.temp_run_peak
        low = high = max(low, m.temp_run_peak)
    else:
        run_time = m.temp_peak if m.temp_peak > host.resolution_temp else 0
        high = max(low, run_time) if run_time else max(low, m.temp_allocator)
        low = max(low, run_time) if run_time else low
    return TargetPools(method_pool=there.bytes,
                       method_pool_alone=there.alone if m.method_pool_alone is not None else None,
                       temp_pool=high, temp_low=low, temp_set_by=_temp_set_by(there, m.delegate_scratch, run_time, low),
                       temp_held=max(there.resolution_temp, run_time) if low == high else None,
                       scratch=m.delegate_scratch, run_time=run_time, resolution_temp=there.resolution_temp,
                       resolution_minimum=there.resolution_minimum, widest_call_args=there.widest_call_args,
                       **common)


def _temp_set_by(there, scratch: int, run_time: int, low: int) -> TempSetBy:
    if low == scratch and scratch:
        return TempSetBy.SCRATCH
    if low == run_time and run_time > there.resolution_minimum:
        return TempSetBy.RUN_TIME
    if low == there.resolution_minimum:
        return TempSetBy.RESOLUTION_THRESHOLD
    return TempSetBy.RESOLUTION_PEAK


def _pair(p) -> str:
    return f"{p[0]:,} B" + (f" (alone: {p[1]:,} B)" if p[1] is not None else "")


def target_pools(sizes: Sizes, pte, target: str) -> dict[str, TargetPools]:
    """Every sized method's pools on ``target``, from ``sizes`` (this host's sizing of ``pte``)."""
    external = sizes.data_path is not None
    return {name: _one(m, pte, target, external) for name, m in sizes.methods.items()}


def delegate_heap(pte, method: str, target: str) -> tuple[DelegateHeap, ...]:
    """What the method's delegates allocate themselves on ``target``'s heap at load_method, one block per delegate
    (:data:`~pte_lab.model.method_pool.BACKEND_HEAP`)."""
    word = abi_of(target).size("EValuePointer")
    counts: dict[str, int] = {}
    for d in pte.methods[method].raw.delegates:
        if d.id in BACKEND_HEAP:
            counts[d.id] = counts.get(d.id, 0) + 1
    return tuple(DelegateHeap(b, BACKEND_HEAP[b][0], BACKEND_HEAP[b][1], n, BACKEND_HEAP[b][2] * word,
                              BACKEND_SOURCES_READ) for b, n in counts.items())


def on_target(sizes: Sizes, pte, target: str) -> Sizes:
    """``sizes`` (this host's) with every method's pools replaced by ``target``'s (:func:`target_pools`), so that
    its totals, fits, JSON document and header are the board's; a method whose ``target`` pools are not trusted
    keeps this host's (x86-64 LP64) pools and its total says it is not exact, and so does one whose temp pool is
    a range (the total takes its upper end). The delegates' own heap there (:func:`delegate_heap`) is in its
    totals. The verification (of this host's pools) is not carried over."""
    out = {}
    for name, p in target_pools(sizes, pte, target).items():
        m = sizes.methods[name]
        heap = delegate_heap(pte, name, target)
        if p.why is not None:
            out[name] = replace(m, abi=target, delegate_heap=heap,
                                inexact=f"the {target} pools are not known ({p.why}); this host's "
                                        f"(x86-64 LP64) pools stand in for them")
            continue
        assert p.method_pool is not None and p.temp_pool is not None  # known where why is None
        out[name] = replace(
            m, abi=target, method_allocator=p.method_pool, temp_allocator=p.temp_pool, delegate_heap=heap,
            method_pool_alone=p.method_pool_alone, temp_peak=p.temp_held if p.temp_held is not None else m.temp_peak,
            inexact=None if p.temp_exact else (f"the temp pool on {target} is {p.temp_low:,} to {p.temp_pool:,} B "
                                               f"(run time's use could not be had exactly): the total takes the upper end"))
    return replace(sizes, methods=out, verified=None, verified_alone=None)


# ------------------------------------------------------------------ "set these": one block per target
class PoolKind(Word):
    """What a board gives a method (a row of :class:`SetThese`)."""

    PLANNED = "planned buffer"
    METHOD = "method pool"
    TEMP = "temp pool"
    #: what the delegates allocate themselves (operator new, malloc): the board's heap
    HEAP = "heap"
    #: what the delegates ask of operator new, on a board without a heap: a static pool the runner gives
    #: operator new (``pte-lab sizes --example-runner`` writes one)
    NEW_POOL = "operator-new pool"
    #: the program's bytes where the delegates' memory mode needs them in RAM
    PROGRAM_IN_RAM = "program in RAM"
    #: the program's bytes read in place (flash): not in the RAM total
    PROGRAM = "program"
    #: Ethos-U's fast scratch (Dedicated_Sram): the firmware's, not in the RAM total
    FAST_SCRATCH = "NPU fast scratch"



class Lives(Word):
    """Where a pool must live on the board."""

    #: RAM the CPU reaches
    RAM = "RAM"
    #: memory the NPU reaches for its scratch (the memory mode says which: ``memory_mode``)
    NPU = "NPU-reachable RAM"
    #: the heap (operator new, malloc)
    HEAP = "heap"
    #: a device's memory (a planned buffer on a device)
    DEVICE = "device memory"
    #: read only, in place: flash, or memory the NPU reads
    FLASH = "flash"
    #: SRAM dedicated to the NPU, provided by the firmware
    NPU_DEDICATED = "NPU-dedicated SRAM"



@dataclass(frozen=True)
class TargetPool:
    """One thing a board must give a method: its bytes (None: the file does not say), its basis, where it lives,
    and whether it is part of the RAM total."""

    kind: PoolKind
    bytes: int | None
    basis: Basis
    lives: Lives
    in_total: bool = True
    #: the NPU's memory mode it follows (Vela's, from the compile specs)
    memory_mode: str | None = None
    #: PLANNED: its mem_id and device
    mem_id: int | None = None
    device: str = "cpu"
    #: TEMP: the delegates' scratch it holds, what sets it, and the lower end where it is a range
    scratch: int = 0
    set_by: TempSetBy | None = None
    low: int | None = None
    #: HEAP: a delegate's own allocation (its record), or the backends that malloc their own (measured here);
    #: NEW_POOL: the first delegate's allocation it serves, and the blocks it serves (bytes each)
    heap: DelegateHeap | None = None
    backends: tuple[str, ...] = ()
    new_blocks: tuple[int, ...] = ()


@dataclass(frozen=True)
class SetThese:
    """What one method needs on one target, pool by pool, and their total against the board's budget."""

    method: str
    target: str
    #: the ABI's name (``Arm AAPCS (ILP32), Cortex-M55``), the target kind (bare-metal) and its loader
    abi: str
    kind: str
    loader: str
    #: the pool configuration the total is of (:data:`~pte_lab.runtime.sizing.records.CONFIGURATIONS`)
    configuration: str
    pools: tuple[TargetPool, ...]
    runnable: bool
    budget: int | None = None
    #: why the target's pools are not known (this host's stand in; None: they are)
    why: str | None = None
    #: the board has a heap (None: not said; False: the user said it has none: --no-heap, --region heap=0)
    heap: bool | None = None
    #: the blocks the heap rows ask operator new for (bytes each)
    heap_blocks: tuple[int, ...] = ()
    #: the board's regions (name, bytes) the total is placed in instead of a budget (``Fit`` places it)
    regions: tuple[tuple[str, int], ...] = ()

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.pools if p.in_total and p.bytes is not None)

    @property
    def basis(self) -> Basis:
        """The total's basis: its least sure part's."""
        return Basis.weakest(p.basis for p in self.pools if p.in_total)

    @property
    def left(self) -> int | None:
        """What the budget has left (negative: over it); None without one."""
        return None if self.budget is None else self.budget - self.total

    @property
    def heap_need(self) -> int:
        """What its heap rows ask of operator new or malloc (the allocator's own overhead not included)."""
        return sum(p.bytes or 0 for p in self.pools if p.kind is PoolKind.HEAP)

    @property
    def malloc_need(self) -> int:
        """What its heap rows ask of malloc, a backend allocating its own memory (what no static pool can give)."""
        return sum(p.bytes or 0 for p in self.pools if p.kind is PoolKind.HEAP and p.heap is None)

    @property
    def new_pool_bytes(self) -> int:
        """The static operator-new pool a board without a heap gives what its heap rows ask of operator new
        (``operator_new_pool`` of :attr:`heap_blocks`; 0: they ask none)."""
        return operator_new_pool(self.heap_blocks)

    @property
    def no_heap(self) -> bool:
        """It needs a heap (malloc) and the board has none: it does not run there (what operator new asks is a
        static pool's row there, :attr:`new_pool`)."""
        return self.heap is False and self.heap_need > 0

    @property
    def new_pool(self) -> TargetPool | None:
        """The static operator-new pool's row, on a board without a heap (None: none)."""
        return next((p for p in self.pools if p.kind is PoolKind.NEW_POOL), None)

    @property
    def fits(self) -> bool | None:
        if self.no_heap:
            return False
        return None if self.budget is None else self.total <= self.budget


def set_these(sizes: Sizes, board: Sizes, pte, target: str, budget: int | None = None, *,
              heap: bool | None = None, regions: tuple[tuple[str, int], ...] = ()) -> dict[str, SetThese]:
    """Per method, what a ``target`` board must be given (:class:`SetThese`): from ``sizes`` (this host's) and
    ``board`` (:func:`on_target`'s), the same pools as the board's total (:meth:`MethodSizes.totals`); ``heap``
    False: the board has no heap (what a delegate takes with operator new then fails load_method)."""
    pools = target_pools(sizes, pte, target)
    kind = TARGET_KINDS["bare-metal"]
    file_bytes = os.path.getsize(sizes.path)
    out = {}
    for name, mb in board.methods.items():
        p = pools[name]
        t: Total = mb.totals()["bare-metal"]
        memory = [d for d in pte.methods[name].delegate_memory if d.placement is not None]
        mode = memory[0].memory_mode if memory else None
        rows: list[TargetPool] = []
        for mem_id, device, b in mb.planned:
            rows.append(TargetPool(PoolKind.PLANNED, b, Basis.FILE, Lives.RAM if device == "cpu" else Lives.DEVICE,
                                   in_total=device == "cpu", mem_id=mem_id, device=device))
        pool_basis = Basis.MODELLED if p.why is None else Basis.MEASURED_HERE
        if t.configuration == Configuration.METHOD_TEMP:
            rows.append(TargetPool(PoolKind.METHOD, mb.method_allocator, pool_basis, Lives.RAM))
            npu = bool(mb.delegate_scratch) and mode is not None
            rows.append(TargetPool(PoolKind.TEMP, mb.temp_allocator, p.temp_basis, Lives.NPU if npu else Lives.RAM,
                                   memory_mode=mode if npu else None, scratch=mb.delegate_scratch,
                                   set_by=p.temp_set_by, low=None if p.temp_exact else p.temp_low))
        else:
            rows.append(TargetPool(PoolKind.METHOD, mb.method_pool_alone, pool_basis, Lives.RAM))
        if mb.program_in_ram:
            rows.append(TargetPool(PoolKind.PROGRAM_IN_RAM, mb.program_in_ram, Basis.FILE, Lives.NPU, memory_mode=mode))
        if heap is False and mb.delegate_heap:  # no heap: operator new from a static pool in RAM
            rows.append(TargetPool(PoolKind.NEW_POOL, t.with_new_pool().new_pool, Basis.MODELLED, Lives.RAM,
                                   heap=mb.delegate_heap[0], new_blocks=t.heap_blocks))
        else:
            for h in mb.delegate_heap:
                rows.append(TargetPool(PoolKind.HEAP, h.bytes, Basis.MODELLED, Lives.HEAP, heap=h))
        own = mb.delegates_own_heap
        if own:
            rows.append(TargetPool(PoolKind.HEAP, mb.heap_peak, Basis.MEASURED_HERE, Lives.HEAP, backends=own))
        if not mb.program_in_ram:
            rows.append(TargetPool(PoolKind.PROGRAM, file_bytes, Basis.FILE, Lives.FLASH, in_total=False,
                                   memory_mode=mode))
        for d in memory:
            if MEMORY_MODES[d.placement.name].fast_scratch is not None:
                rows.append(TargetPool(PoolKind.FAST_SCRATCH, d.fast_scratch_limit, Basis.FILE, Lives.NPU_DEDICATED,
                                       in_total=False, memory_mode=d.memory_mode))
                break
        # the same parts as the board's total (records.MethodSizes.totals): its bytes, its budget check
        out[name] = SetThese(name, target, p.abi, kind.name, kind.loader, t.configuration, tuple(rows), t.runnable,
                             budget, p.why, heap, t.heap_blocks, tuple(regions))
    return out
