"""The measuring session: a fresh counted worker that loads and runs one program's methods with the sizing runner.

What it hands back is raw: each run's :class:`~pte_lab.runtime.sizing_runner.RunnerResult`, grouped per method
(:class:`Measurement`) or per verified configuration (:class:`PoolTrial`). :mod:`.results` sums them up
into the figures a user reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import MEMORY_ALLOCATION_FAILED, error_name
from ...units import align_up, human_bytes
from .. import native
from ..isolate import Worker
from ..libraries import registry
from ..native import executorch_version
from ..sizing_runner import NO_TEMP
from ..sizing_runner_records import RunnerResult, StepUse, failure
from ..stand_ins import stand_ins_for

__all__ = ["Session", "Measurement", "PoolTrial", "OnceHeap", "HEAP_ONCE_ROUNDING", "COUNTING_RESERVATION",
           "address_space_limit", "failure", "refused", "held"]

#: what the process allocates once is rounded up to a multiple of this: malloc's usable sizes vary by a
#: chunk (16 B) with the heap's layout (a buffer grown in place), which a fresh runner's layout differs in
HEAP_ONCE_ROUNDING = 256

#: address space the sizing runner reserves for each counting pool (sizing.cpp's kCountingReservation)
COUNTING_RESERVATION = 0xFFFFF000


@dataclass(frozen=True)
class OnceHeap:
    """What a worker's process allocates once (:attr:`MethodSizes.heap_once`), learnt on the first method it
    runs: ``bytes`` rounded up to :data:`HEAP_ONCE_ROUNDING` (None: not counted), and ``seen`` the part of it
    that first method's run held (its peak and kept heap less a repeat's)."""

    bytes: int | None
    seen: int = 0


@dataclass(frozen=True)
class Measurement:
    """One method's runs in a session: counting pools with the program mapped (``first``), then with a
    FileDataLoader with no temp allocator (``alone``) and with one (``read``)."""

    first: RunnerResult
    alone: RunnerResult
    read: RunnerResult
    #: the stand-ins the method ran with, FileDataLoader's alignment, what the process allocates once
    stand_ins: tuple[str, ...]
    file_loader: int
    once: OnceHeap
    #: True: this method was the first the worker ran (its mapped heap holds ``once.seen`` already)
    first_in_worker: bool
    #: the program mapped, under a bare-metal platform layer (et_pal_allocate refuses): counting pools
    #: (``bare``) and no temp allocator (``bare_alone``); None: not run (a heap round)
    bare: RunnerResult | None = None
    bare_alone: RunnerResult | None = None


@dataclass(frozen=True)
class PoolTrial:
    """The runs that verify one configuration: pools of exactly ``method_pool`` and ``temp_pool`` (None: no
    temp allocator), a method pool one byte smaller (None: a pool of 0), and (method + temp, temp pool > 0) a
    temp pool one byte smaller (None: not tried)."""

    method_pool: int
    temp_pool: int | None
    exact: RunnerResult
    smaller: RunnerResult | None
    smaller_temp: RunnerResult | None
    #: FileDataLoader's alignment the runs used
    file_loader: int
    #: the exact pools again under a bare-metal platform layer (et_pal_allocate refuses), the program mapped
    bare: RunnerResult | None = None


def address_space_limit() -> int | None:
    """The address-space limit (RLIMIT_AS, ``ulimit -v``) this process, and the workers it starts, run under."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def refused(r: RunnerResult) -> str:
    """Why a method's first (unbounded) run failed: ExecuTorch's error, or the worker's memory limit."""
    limit = address_space_limit()
    if r.error == MEMORY_ALLOCATION_FAILED and limit is not None:
        return (f"the sizing worker ran out of the memory it was allowed: it runs under an address-space limit "
                f"(RLIMIT_AS, `ulimit -v`) of {human_bytes(limit)} and reserves "
                f"{human_bytes(2 * COUNTING_RESERVATION)} of address space for its counting pools, so "
                f"{error_name(r.error)} at {r.step} is that limit, not the program; lift it "
                f"(`ulimit -v unlimited`) or raise it")
    return f"ExecuTorch refused it: {failure(r)}"


def held(steps: dict) -> tuple[int | None, int | None]:
    """(the most heap held at once over the steps, the heap still held after them), above the level
    before the first step; None where a step was not counted."""
    if not steps or any(u is None for u in steps.values()):
        return None, None
    level = peak = 0
    use: StepUse
    for use in steps.values():  # in the order the steps ran
        peak = max(peak, level + use.heap_peak, level + use.heap)
        level += use.heap
    return peak, level


def _once(first: RunnerResult, again: RunnerResult) -> OnceHeap:
    """Heap a process allocates once, and the part of it the first run holds (the first run's peak and kept
    heap less a repeat's)."""
    a, b = held(first.steps), held(again.steps)
    if not (first.ok and again.ok) or None in (*a, *b):
        return OnceHeap(None)
    seen = max(0, a[0] - b[0], a[1] - b[1])
    once = max(seen, native.once_heap() or 0)
    return OnceHeap(align_up(once, HEAP_ONCE_ROUNDING), seen)


def _no_backend(names) -> str:
    return (f"backend {', '.join(names)} is not registered in this ExecuTorch build, and pte_lab has no stand-in "
            f"for it")


def cannot_run_here(plan) -> str | None:
    """Why the runtime cannot load ``plan``'s method here, known from the file and this install's registry
    (:func:`~pte_lab.runtime.libraries.registry`, probed once per install and cache folder) before any worker starts: a
    delegate's backend that no library of the install registers, or that says it is unavailable here,
    and for which pte_lab has no stand-in. None: nothing known stops it (the worker checks the rest)."""
    called = {d.backend for d in plan.delegates}
    if not called:
        return None
    reg = registry()
    lacking = sorted(called - set(reg.backends))
    unavailable = sorted(called & reg.unavailable)
    stand_ins, _ = stand_ins_for(lacking + unavailable, [], executorch_version())
    lacking = [b for b in lacking if b not in stand_ins]
    unavailable = [b for b in unavailable if b not in stand_ins]
    if lacking:
        return _no_backend(lacking)
    if unavailable:
        return (f"backend {', '.join(unavailable)} is registered in this ExecuTorch build but unavailable here "
                f"(its own runtime library is missing), and pte_lab has no stand-in for it")
    return None


class Session:
    """A fresh counted worker hosting a :class:`~pte_lab.runtime.native_engine.NativeEngine` (emulated devices
    where the file needs them and no real allocator is registered), for sizing and verifying one program's
    methods: ExecuTorch's libraries loaded directly, its Python package never imported."""

    def __init__(self, path: str, data_path: str | None, devices: list[str]):
        self.path, self.data_path, self.devices = path, data_path, devices

    def __enter__(self) -> "Session":
        native.library_path()  # built here, not by a compiler started inside the counted worker
        self._start()
        return self

    def _start(self) -> None:
        self.engine = Worker(self.devices, self.devices, native=True, known=registry())
        self.registered = set(self.engine.call("registered_backends"))
        #: FileDataLoader::from(path)'s default alignment: what the file-loader runs and the verification use
        self.file_loader = int(self.engine.call("file_loader_default_alignment"))
        #: heap the process allocates once (None: not measured yet in this worker)
        self.once: OnceHeap | None = None
        self.stand_ins: set[str] = set()

    def restart(self) -> None:
        """A fresh worker after the last one died."""
        self.engine.close()
        self._start()

    def __exit__(self, *exc) -> None:
        self.engine.close()

    def cannot_run(self, plan) -> str | None:
        """Why the runtime cannot load ``plan``'s method here (None: it can, with stand-ins where the wheel
        lacks a backend or kernels pte_lab has them for; see :meth:`uses`)."""
        version = executorch_version()
        lacking = sorted({d.backend for d in plan.delegates} - self.registered - self.stand_ins)
        backends, _ = stand_ins_for(lacking, [], version)
        if set(lacking) - set(backends):
            return _no_backend(b for b in lacking if b not in backends)
        got = self.engine.call("provide_operators", [o for o in plan.operators if o not in self.stand_ins])
        _, kernels = stand_ins_for([], list(got.missing), version)
        if set(got.missing) - set(kernels):
            return f"operators this ExecuTorch build lacks: {', '.join(o for o in got.missing if o not in kernels)}"
        if backends or kernels:
            self.stand_ins.update(self.engine.call("register_stand_ins", backends, kernels))
        return None

    def uses(self, plan) -> tuple[str, ...]:
        """The stand-ins ``plan``'s method runs with in this session."""
        return tuple([b for b in dict.fromkeys(d.backend for d in plan.delegates) if b in self.stand_ins]
                     + [o for o in plan.operators if o in self.stand_ins])

    def run(self, name: str, *, method_pool: int | None = None, temp_pool: int | None = None,
            alignment: int = 4096, runs: int, planned_alignment: int = 0, file_loader: bool = False,
            bare_metal: bool = False, input_shapes: dict[int, tuple[int, ...]] | None = None) -> RunnerResult:
        """One run of the sizing runner (pools None: counting); ``file_loader``: read the program with a
        FileDataLoader (its default alignment) instead of mapping it; ``bare_metal``: under a platform layer
        whose et_pal_allocate refuses every request, as a bare-metal one's; ``input_shapes``: a dynamic input's
        smaller shape (input position -> shape; the others at their planned shapes)."""
        return self.engine.call("size_method", self.path, name, method_pool=method_pool, temp_pool=temp_pool,
                                alignment=alignment, runs=runs, data_path=self.data_path,
                                planned_alignment=planned_alignment,
                                file_loader=self.file_loader if file_loader else 0, bare_metal=bare_metal,
                                **({"input_shapes": input_shapes} if input_shapes else {}))

    def measure(self, plan, runs: int, targets: bool = True,
                input_shapes: dict[int, tuple[int, ...]] | None = None) -> Measurement | str:
        """Load and run ``plan``'s method ``runs`` times with counting pools, as :func:`~.results.sizes` sizes
        it; else why the runtime cannot run it here. The first method a worker runs is run twice more: what
        the process allocates once is its heap less a repeat's. ``targets``: also run both configurations
        under a bare-metal platform layer (the program mapped). ``input_shapes``: every run with a dynamic
        input at a smaller shape (input position -> shape; :func:`~.results.heap_at`)."""
        why = self.cannot_run(plan)
        if why is not None:
            return why
        shaped = {"input_shapes": input_shapes} if input_shapes else {}
        r = self.run(plan.name, runs=runs, **shaped)
        if not r.ok:
            return refused(r)
        first_in_worker = self.once is None
        if first_in_worker:  # once per worker, even where nothing was counted
            self.once = _once(r, self.run(plan.name, runs=runs, **shaped))
        # the heap a runner reading the file needs, in both configurations (the pools do not depend on the
        # loader: the method alone's pool comes from its FileDataLoader run)
        alone = self.run(plan.name, temp_pool=NO_TEMP, runs=runs, file_loader=True, **shaped)
        read = self.run(plan.name, runs=runs, file_loader=True, **shaped)
        bare = bare_alone = None
        if targets:
            bare = self.run(plan.name, runs=runs, bare_metal=True, **shaped)
            bare_alone = self.run(plan.name, temp_pool=NO_TEMP, runs=runs, bare_metal=True, **shaped)
        return Measurement(r, alone, read, self.uses(plan), self.file_loader, self.once, first_in_worker,
                           bare, bare_alone)

    def trial(self, name: str, *, method_pool: int, temp_pool: int | None, alignment: int, runs: int,
              planned_alignment: int) -> PoolTrial:
        """Exact pools (temp None: no temp allocator) run the method ``runs`` times, inputs set before each,
        with a FileDataLoader as a runner has; then a method pool one byte smaller, and (method + temp) a temp
        pool one byte smaller, run through the executes; then the exact pools under a bare-metal platform
        layer (et_pal_allocate refuses), the program mapped as a board's BufferDataLoader over flash reads it."""
        temp = NO_TEMP if temp_pool is None else temp_pool
        pools = dict(alignment=alignment, planned_alignment=planned_alignment, file_loader=True)
        exact = self.run(name, method_pool=method_pool, temp_pool=temp, runs=runs, **pools)
        smaller = self.run(name, method_pool=method_pool - 1, temp_pool=temp, runs=0, **pools) \
            if method_pool else None
        smaller_temp = self.run(name, method_pool=method_pool, temp_pool=temp_pool - 1, runs=runs, **pools) \
            if temp_pool else None
        bare = self.run(name, method_pool=method_pool, temp_pool=temp, runs=runs, alignment=alignment,
                        planned_alignment=planned_alignment, bare_metal=True)
        return PoolTrial(method_pool, temp_pool, exact, smaller, smaller_temp, self.file_loader, bare)
