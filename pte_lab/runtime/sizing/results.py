"""How a sizing is made (see :mod:`pte_lab.runtime.sizing`): :func:`sizes`, which measures each method in the
measuring session (:mod:`.measure`) and sums its raw runs up into the records of :mod:`.records` (their names are
exported here too) and :func:`sized_diff`.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import tempfile
from dataclasses import replace

from ...arguments import AT_LEAST_ONE, BOOL, NAMES, PATH, PROGRAM_FILE, PROGRESS, arguments, optional
from ...errors import NotFoundError, PteLabError, RuntimeCrashedError
from ...format.regular_file import check_regular
from ...format import xnnpack
from ...model import open_pte
from ...model.delegates import blob_uses
from ...progress import reporter, telling
from ...vocabulary import Configuration, InstructionKind
from .. import kept
from ..checked import checked
from ..declared import DeclaredSizes, declared_sizes
from ..inputs import check_build, input_parts
from ..libraries import Library, needed
from ..native import executorch_version
from ..sizing_runner_records import INPUT_VALUES, MethodIO, RunnerResult, Step, StepKind, failure
from .kept_sizes import KIND, kept_sizes, options
from .measure import HEAP_ONCE_ROUNDING, Measurement, Session, cannot_run_here, held
from .records import (ABI_POOLS, ANY_TARGET, CONFIGURATIONS, HEAP_FIELDS, HEAP_RUNS, HOST_ABI, HOST_DEPENDENT,
                      HOST_ONLY, HOST_POOLS, MEASURED_PARTS, MIN_POOL_ALIGNMENT, PARTS, PLANNED_ALIGNMENT, POOLS,
                      POOLS_EXACT, SIZES_COLUMNS, TARGET_KINDS, TARGET_POOLS, Fit, HeapAt, HeapFigures, MethodSizes,
                      PoolVerification, Sizes, SizingError, TargetKind, TargetRun, TempProbe, TempShort, Total,
                      raise_if_insufficient, verify_pools, part_source)

__all__ = ["sizes", "Sizes", "MethodSizes", "PoolVerification", "TempProbe", "TempShort", "SIZES_COLUMNS", "PARTS",
           "POOLS", "SizingError", "CONFIGURATIONS", "INPUT_VALUES", "MethodIO", "Library", "PLANNED_ALIGNMENT",
           "MIN_POOL_ALIGNMENT", "HEAP_ONCE_ROUNDING", "HeapFigures", "HEAP_RUNS", "HEAP_FIELDS", "HOST_DEPENDENT",
           "POOLS_EXACT", "MEASURED_PARTS", "part_source", "sized_diff", "TargetKind", "TARGET_KINDS", "TargetRun",
           "Total", "Fit", "ANY_TARGET", "HOST_ONLY", "HOST_ABI", "HOST_POOLS", "TARGET_POOLS", "ABI_POOLS",
           "heap_at", "HeapAt", "HEAP_AT_KIND"]

#: the kind of measurement a heap at smaller input shapes is kept as (:func:`heap_at`)
HEAP_AT_KIND = "heap-at"


@arguments(source=PROGRAM_FILE, methods=optional(NAMES), data_path=optional(PATH), runs=AT_LEAST_ONE, verify=BOOL,
           heap_runs=AT_LEAST_ONE, cache=optional(BOOL), progress=PROGRESS)
def sizes(source, methods: list[str] | None = None, *, data_path=None, runs: int = 2,
          verify: bool = False, progress=None, heap_runs: int = HEAP_RUNS, max_input_bytes=None,
          cache: bool | None = None) -> Sizes:
    """Size every method of a ``.pte`` (or those named): see :mod:`pte_lab.runtime.sizing`.

    Each method is loaded and run ``runs`` times, every input set before every execute
    (:data:`INPUT_VALUES`: tensors zeros at their planned shapes), in each of the
    :data:`CONFIGURATIONS`, in a fresh isolated worker; ``verify=True`` then
    proves the figures in the same worker (see :meth:`Sizes.verify`). Methods
    the runtime cannot run here (a backend or operators it lacks) are listed
    in :attr:`Sizes.skipped` with the reason.

    What the process allocates once (a kernel's first call creating its
    state, say) is measured on the first method sized (its first run less a
    repeat) and added to every method's heap figures, so that each bounds a
    process that runs that method alone (:attr:`MethodSizes.heap_once`).

    The heap figures depend on the CPU and vary between runs: each method's are measured in ``heap_runs``
    fresh workers (the first also measures the pools), and the lowest and highest seen are kept
    (:attr:`MethodSizes.heap_low`, :attr:`MethodSizes.heap_high`; the scalar fields are the highest).

    The figures are kept (:mod:`pte_lab.runtime.kept`): asked again for the same bytes of the program (and
    its ``.ptd``), the same pte_lab, ExecuTorch and options, on this machine, they come back at once, with
    :attr:`Sizes.kept` saying when they were measured.

    The runner builds every tensor input at the shape the file declares (a dynamic one at its bound), and a
    buffer for each output it is given no planned memory for: before any worker starts, those bytes are checked
    against ``max_input_bytes`` and the memory free.

    Parameters
    ----------
    source : str or os.PathLike or pte_lab.Pte
        The program on disk: a path, or an opened :class:`~pte_lab.model.Pte` (its ``.ptd`` is used when it
        was opened with one).
    methods : list of str, optional
        Only these methods (default: every method).
    data_path : str or os.PathLike, optional
        The program's external ``.ptd``, when ``source`` is a path.
    runs : int
        Runs of each method per configuration (at least 1).
    verify : bool
        Prove the figures: run each method again with pools of exactly these sizes, and with pools one byte
        smaller, which must be refused.
    progress : bool or collections.abc.Callable, optional
        None (silent), True (a bar) or a callable taking one line per step (:mod:`pte_lab.progress`).
    heap_runs : int
        Fresh workers each method's heap is measured in (at least 1).
    max_input_bytes : int or str, optional
        The most bytes built at sizes the file declares (``"2GiB"``; default 1 GiB, or
        ``$PTE_LAB_MAX_INPUT_BYTES``; ``pte_lab.runtime.inputs.input_limit``).
    cache : bool, optional
        ``False`` (or ``$PTE_LAB_NO_CACHE=1``) measures afresh and keeps nothing; default: use and keep.

    Returns
    -------
    Sizes
        ``table()``, ``pools()``, ``methods``, ``verified``, ``skipped``, ``kept``.

    Raises
    ------
    PteFormatError
        For a file that is not a program.
    NotFoundError
        For a method it lacks.
    ValueError
        For ``runs`` or ``heap_runs`` under 1.
    PteLabError
        For a source that is not a ``.pte`` on disk.
    pte_lab.errors.DeclaredSizeError
        For a method whose inputs would be over the limit (their bytes in the message; nothing run). A method
        the runtime refuses is listed in :attr:`Sizes.skipped`, not raised.

    Examples
    --------
    ``pte_lab.sizes("model.pte").table()``
    """
    path = getattr(source, "path", source)
    if not isinstance(path, (str, os.PathLike)):
        raise PteLabError(f"sizes() needs a .pte file on disk; got {source!r}")
    path = os.fspath(path)
    check_regular(path, "a program")
    if data_path is None and getattr(getattr(source, "data", None), "path", None):
        data_path = source.data.path
    data_path = None if data_path is None else os.fspath(data_path)
    if runs < 1:
        raise ValueError(f"runs must be at least 1 (got {runs})")
    if heap_runs < 1:
        raise ValueError(f"heap_runs must be at least 1 (got {heap_runs})")
    if data_path is not None:
        check_regular(data_path, "a data file (.ptd)")
    if kept.enabled(cache):  # asked before: the kept figures (the file's bytes, pte_lab, ExecuTorch, the options)
        got = kept.kept_or(KIND, [path, data_path], options(methods, runs, verify, heap_runs),
                           lambda: sizes(path, methods, data_path=data_path, runs=runs, verify=verify,
                                         progress=progress, heap_runs=heap_runs, max_input_bytes=max_input_bytes,
                                         cache=False),
                           # a method not sized here may be sized once a backend or kernel is installed
                           keep=lambda s: not s.skipped, cache=cache)
        # the same bytes, perhaps under another name: the figures are this file's
        return dataclasses.replace(got, path=path, data_path=data_path)
    return _measured(path, methods, data_path=data_path, runs=runs, verify=verify, progress=progress,
                     heap_runs=heap_runs, max_input_bytes=max_input_bytes)


def _measured(path: str, methods, *, data_path, runs: int, verify: bool, progress, heap_runs: int,
              max_input_bytes) -> Sizes:
    """:func:`sizes` of a checked path, measured (never from the kept figures)."""
    # the file read (light: no torch), what the runner would build at the file's shapes checked, and what the
    # file and this install's registry already rule out, said before anything heavier (the reader's checks
    # import torch) and before any worker starts; then every table the runtime reads checked
    pte = open_pte(path, data_path)
    for n in pte.methods if methods is None else [n for n in methods if n in pte.methods]:
        check_build(input_parts(pte.methods[n], unplanned_outputs=True), method=n, limit=max_input_bytes,
                    doing="the sizing runner's inputs and unplanned outputs at the shapes the file declares")
    if pte.bundled is not None:
        raise PteLabError(f"{path} is a bundled program (.bpte): size the .pte it carries")
    names = list(pte.methods) if methods is None else list(methods)
    for n in names:
        if n not in pte.methods:
            raise NotFoundError(f"no method {n!r}; the program has {list(pte.methods)}")
    devices = sorted({d for n in names for d in pte.methods[n].devices})
    out: dict[str, MethodSizes] = {}
    skipped: dict[str, str] = {}
    declared: dict[str, DeclaredSizes] = {}
    verified: dict[str, PoolVerification] | None = {} if verify else None
    verified_alone: dict[str, PoolVerification] | None = {} if verify else None
    # what takes seconds before the first worker (the install's registry probed, torch's schemas looked up, a
    # native part built: each the first time only) is said as it starts, so that no wait is silent
    with telling(progress):  # a bar is made below, once something runs
        for n in names:
            why = cannot_run_here(pte.methods[n])
            if why is not None:
                skipped[n] = why
                declared[n] = declared_sizes(pte.methods[n], why)
    names = [n for n in names if n not in skipped]
    cannot = tuple(skipped)  # what this install cannot run: no failure
    if not names:  # no worker: nothing here can run
        return Sizes(path, data_path, out, skipped, False, executorch_version(), verified, verified_alone, declared,
                     cannot_run_here=cannot)
    report = reporter(progress, total=len(names), desc="sizing")
    with report, telling(report.step):
        pte = checked(path, data_path).pte
        report.step("starting an isolated worker")
        with Session(path, data_path, devices) as session:
            for k, n in enumerate(names, 1):
                if k > 1:
                    report.advance()
                report.step(f"method {n!r} ({k}/{len(names)}): load and run {runs}x"
                            + (", then verify" if verify else ""))
                plan = pte.methods[n]
                try:
                    got = session.measure(plan, runs)
                    why = got if isinstance(got, str) else None
                    if why is None:
                        out[n] = _method_sizes(got, plan=plan, runs=runs, path=path)
                        if verify:
                            verified[n], v_alone = verify_pools(session, out[n])
                            if v_alone is not None:
                                verified_alone[n] = v_alone
                except RuntimeCrashedError as exc:  # the worker died on this method: the others still get sized
                    why = f"the runtime crashed ({exc.signal or f'exit status {exc.exit_code}'}) while sizing it"
                    out.pop(n, None)
                    session.restart()
                if why is not None:
                    skipped[n] = why
                    declared[n] = declared_sizes(plan, why)
            counted = session.engine.counted
            rounds = {n: [m] for n, m in out.items()}
            for k in range(2, heap_runs + 1 if counted and out else 0):
                report.step(f"the heap again, in a fresh worker ({k}/{heap_runs})")
                for n, m in _heap_round(path, data_path, devices=devices, pte=pte, names=list(out),
                                        runs=runs).items():
                    rounds[n].append(m)
            report.advance()
    out = {n: _over_runs(rounds[n]) for n in out}
    raise_if_insufficient(verified or {}, verified_alone or {})
    return Sizes(path, data_path, out, skipped, counted, executorch_version(), verified, verified_alone,
                 declared, cannot_run_here=cannot)


def heap_at(path, method: str, shapes: dict[int, tuple[int, ...]], *, data_path=None, runs: int = 2,
            max_input_bytes=None, cache: bool | None = None, progress=None, announce=None) -> HeapAt:
    """``method``'s heap peak as a program exported with its dynamic inputs bounded at ``shapes`` has it (input
    position -> shape, a dynamic input's smaller one; the others at the file's): measured as :func:`sizes`
    measures ``file_heap_peak`` (the counter, a FileDataLoader, what the process allocates once) in one fresh
    worker, every run setting those inputs at those shapes, so that kernels malloc by them. XNNPACK sizes the
    tensors it keeps in its workspace by the larger of their declared shapes (the export's bound) and the shapes
    it runs at: the runs are made on a copy of the program whose XNNPACK graphs declare those tensors at the least
    size (:func:`~pte_lab.format.xnnpack.workspace_dims`), as an export at ``shapes`` declares them no larger
    than the runs need (:class:`HeapAt`). Kept (:mod:`pte_lab.runtime.kept`) by the file's bytes and the shapes;
    ``announce``, a callable, is called (no argument) just before a measurement is made, not for a kept one.
    Raises :class:`SizingError` where the method cannot run here or at those shapes, and
    :class:`~pte_lab.errors.DeclaredSizeError` for inputs over ``max_input_bytes``."""
    path = os.fspath(path)
    check_regular(path, "a program")
    data_path = None if data_path is None else os.fspath(data_path)
    if data_path is not None:
        check_regular(data_path, "a data file (.ptd)")
    asked = tuple(sorted((int(p), tuple(int(d) for d in shape)) for p, shape in shapes.items()))
    def measured() -> HeapAt:
        if announce is not None:
            announce()
        return _heap_at(path, method, dict(asked), data_path=data_path, runs=runs, max_input_bytes=max_input_bytes,
                        progress=progress)

    return kept.kept_or(HEAP_AT_KIND, [path, data_path], {"method": method, "shapes": asked, "runs": runs},
                        measured, keep=lambda h: h.file_heap_peak is not None, cache=cache)


def _heap_at(path: str, method: str, shapes: dict, *, data_path, runs: int, max_input_bytes, progress) -> HeapAt:
    pte = open_pte(path, data_path)
    if method not in pte.methods:
        raise NotFoundError(f"no method {method!r}; the program has {list(pte.methods)}")
    check_build(input_parts(pte.methods[method], shapes, unplanned_outputs=True), method=method,
                limit=max_input_bytes, doing="the sizing runner's inputs at the shapes asked and unplanned outputs")
    why = cannot_run_here(pte.methods[method])
    if why is not None:
        raise SizingError(f"{method}: {why}")
    # pte_lab's reader, not the checked one (its operator schemas import torch, seconds): the runs are in an
    # isolated worker, as what-if's sample runs are, and a budget search measures the bytes its sizing checked
    plan = pte.methods[method]
    copy, resized = _workspace_declared_least(pte, method)
    got: Measurement | str = ""
    for program, n in ((copy, resized), (None, 0)) if copy is not None else ((None, 0),):
        # the copy refused or crashed (a graph that needs its declared shapes): the program as it is, whose
        # XNNPACK workspace is the export's bound's, no smaller
        got, resized = _measured_at(path, program, plan, shapes, data_path=data_path, runs=runs,
                                    progress=progress), n
        if isinstance(got, Measurement):
            break
    if isinstance(got, str):
        raise SizingError(f"{method}: {got}")
    peak, _ = _file_heap(got.read, got.alone)
    once = got.once.bytes
    return HeapAt(method, tuple(sorted(shapes.items())), None if peak is None or once is None else peak + once,
                  xnnpack_resized=resized)


def _measured_at(path: str, program: bytes | None, plan, shapes: dict, *, data_path, runs: int, progress
                 ) -> Measurement | str:
    """``plan``'s method measured in a fresh worker with its inputs at ``shapes`` (:meth:`.Session.measure`), from
    ``program`` (the bytes to run, written to a file of their own; None: the program at ``path``); else why not."""
    run_path = path
    try:
        if program is not None:
            fd, run_path = tempfile.mkstemp(suffix=".pte", prefix="pte_lab_heap_at_")
            with os.fdopen(fd, "wb") as f:
                f.write(program)
        with telling(progress), Session(run_path, data_path, sorted(plan.devices)) as session:
            return session.measure(plan, runs, targets=False, input_shapes=shapes)
    except RuntimeCrashedError as exc:
        return f"the runtime crashed ({exc.signal or f'exit status {exc.exit_code}'}) at those shapes"
    finally:
        if run_path != path:
            os.unlink(run_path)


def _workspace_declared_least(pte, method: str) -> tuple[bytes | None, int]:
    """The program's bytes with each XNNPACK graph ``method`` calls declaring the tensors XNNPACK keeps in its
    workspace at the least size (each dim 1, the rank kept: XNNPACK then sizes them by the shapes it runs at), and
    how many tensors that changed; (None, 0) where it calls no such graph. Only those dims change: the copy has
    the program's size, its other bytes the same."""
    uses = [u for u in blob_uses(pte) if u.method == method and u.backend == xnnpack.BACKEND and u.size]
    if not uses:
        return None, 0
    with open(pte.path, "rb") as f:
        buf = bytearray(f.read())
    resized, done = 0, set()
    for u in uses:
        if u.offset in done:  # one blob for several calls
            continue
        done.add(u.offset)
        head = xnnpack.read_header(bytes(buf[u.offset:u.offset + xnnpack.HEADER_BYTES]))
        start = u.offset + (head.graph_offset if head is not None else 0)
        end = start + head.graph_bytes if head is not None else u.offset + u.size
        for at, n in xnnpack.workspace_dims(bytes(buf[start:end])):
            struct.pack_into(f"<{n}I", buf, start + at, *([1] * n))
            resized += 1
    return (bytes(buf), resized) if resized else (None, 0)


def sized_diff(d, before, after, *, progress=None, announce=None, cache: bool | None = None):
    """``d``, a :class:`~pte_lab.model.diff.Diff` of the programs ``before`` and ``after`` (opened, from files),
    with both sized (:func:`sizes`: the methods ``d`` compares, adds or removes, each side its own; a side's kept
    sizing where there is one, which the diff's ``sizes.kept`` then says), the parts side by side. ``announce``: a
    callable told, before a side is measured (not where its figures are kept), which program is being sized.
    ``cache``: as for :func:`sizes`."""
    names = [*d.methods, *d.removed, *d.added]
    measured = []
    for label, p in (("first", before), ("second", after)):
        asked = [n for n in names if n in p.methods]
        # every method: asked as `sizes FILE` asks, so that the figures kept by one answer the other
        methods = None if set(asked) == set(p.methods) else asked
        s = kept_sizes(p.path, methods, data_path=getattr(getattr(p, "data", None), "path", None), cache=cache)
        if s is None:
            if announce is not None:
                announce(f"sizing the {label} program ({p.path})")
            s = sizes(p, methods, progress=progress, cache=cache)
        measured.append(s)
    return d.with_sizes(*measured, host_dependent=MEASURED_PARTS)


def _heap_round(path: str, data_path: str | None, *, devices: list[str], pte, names: list[str],
                runs: int) -> dict[str, MethodSizes]:
    """One more fresh worker measuring the heap of each of ``names`` as :func:`sizes` does (what the process
    allocates once on the first; the pools it measures are not used). A method that fails or crashes here
    gives no figures in this round."""
    out: dict[str, MethodSizes] = {}
    with Session(path, data_path, devices) as session:
        for n in names:
            plan = pte.methods[n]
            try:
                got = session.measure(plan, runs, targets=False)
                if isinstance(got, Measurement):
                    out[n] = _method_sizes(got, plan=plan, runs=runs)
            except RuntimeCrashedError:
                session.restart()
    return out


def _over_runs(seen: list[MethodSizes]) -> MethodSizes:
    """The first run's sizes (its pools, its steps) with each heap field the highest over the runs, and the
    lowest and highest kept as :class:`HeapFigures`."""
    first = seen[0]
    if not any(getattr(first, f) is not None for f in HEAP_FIELDS):
        return replace(first, heap_runs=len(seen))
    low, high = {}, {}
    for name, short in HEAP_FIELDS.items():
        got = [getattr(m, name) for m in seen]
        known = [v for v in got if v is not None]
        if getattr(first, name) is None or not known:
            low[short] = high[short] = None
        else:
            low[short], high[short] = min(known), max(known)
    return replace(first, heap_runs=len(seen), heap_low=HeapFigures(**low), heap_high=HeapFigures(**high),
                   **{name: high[short] for name, short in HEAP_FIELDS.items()})


def _with_dynamism(ios: tuple[MethodIO, ...], specs) -> tuple[MethodIO, ...]:
    """The runner's inputs or outputs, marked dynamic where the file's plan says the shape is a bound."""
    dynamic = {s.position for s in specs if s.dynamic}
    return tuple(replace(io, dynamic=io.index in dynamic) for io in ios)


def _file_heap(*results: RunnerResult) -> tuple[int | None, int | None]:
    """The largest (peak, kept) over FileDataLoader runs that worked (None: a run was not counted)."""
    got = [held(r.steps) for r in results if r.ok]
    if not got or any(p is None for p, _ in got):
        return None, None
    return max(p for p, _ in got), max(k for _, k in got)


def _targets(measured: Measurement) -> tuple[TargetRun, ...]:
    """Both configurations under both target kinds' platform layers (host: the counting runs; none where the
    bare-metal runs were not made)."""
    runs = [(measured.first, Configuration.METHOD_TEMP), (measured.alone, Configuration.METHOD_ALONE),
            (measured.bare, Configuration.METHOD_TEMP), (measured.bare_alone, Configuration.METHOD_ALONE)]
    return tuple(TargetRun.of(r, c) for r, c in runs if r is not None)


def _program_in_ram(plan, path: str | None) -> tuple[int, str | None]:
    """The program's bytes a board must hold in RAM for ``plan``'s delegates (0: none), and why."""
    why = next((w for d in plan.delegate_memory if (w := d.program_in_ram_why)), None)
    if why is None or path is None:
        return 0, None
    return os.path.getsize(path), why


def _method_sizes(measured: Measurement, *, plan, runs: int, path: str | None = None) -> MethodSizes:
    """One method's figures from its runs. What the process allocates once is added to the heap figures (less,
    to the mapped ones of the first method the worker ran, what that run already holds)."""
    r, alone, read, file_loader = measured.first, measured.alone, measured.read, measured.file_loader
    once = measured.once.bytes
    once_seen = measured.once.seen if measured.first_in_worker else 0
    pools, steps = r.pools, r.steps
    # Method::init resolves each kernel call's operator with TensorMeta lists taken from the temp
    # allocator when its pool is at least this large, else from the method allocator
    resolution = r.resolution_bytes_per_arg * max(
        (len(i.args) for i in plan.instructions if i.kind == InstructionKind.KERNEL_CALL), default=0)
    execs = [k for k in steps if k.kind is StepKind.EXECUTE]
    runs_counted = all(steps[k] is not None for k in execs)
    load_program, load_method = steps.get(Step(StepKind.LOAD_PROGRAM)), steps.get(Step(StepKind.LOAD_METHOD))
    counted = [load_program, load_method, *(steps[k] for k in execs)]
    heap_peak, heap_kept = held(steps)
    file_heap_peak, file_heap_kept = _file_heap(read, alone)
    if once is None:  # not measured: figures without it would not bound a fresh process
        heap_peak = heap_kept = file_heap_peak = file_heap_kept = None
    else:
        if heap_peak is not None:
            heap_peak, heap_kept = heap_peak + once - once_seen, heap_kept + once - once_seen
        if file_heap_peak is not None:
            file_heap_peak, file_heap_kept = file_heap_peak + once, file_heap_kept + once
    backends = tuple(sorted({d.backend for d in plan.delegates}))
    operators = tuple(sorted(set(plan.operators)))
    try:
        libraries = needed(operators, backends)[0]
    except PteLabError:  # no compiler or no probe here: the sizes stand without the libraries
        libraries = ()
    in_ram, in_ram_why = _program_in_ram(plan, path)
    return MethodSizes(
        method=r.method,
        planned=r.planned,
        method_allocator=pools.method_peak,
        method_allocations=pools.method_calls,
        temp_allocator=max(pools.temp_peak, resolution, plan.delegate_temp_bytes),
        temp_peak=pools.temp_peak,
        resolution_minimum=resolution,
        alignment=max(MIN_POOL_ALIGNMENT, pools.method_max_alignment, pools.temp_max_alignment,
                      alone.pools.method_max_alignment if alone.pools else 0),
        heap_load_method=None if load_method is None else load_method.heap,
        heap_execute=sum(steps[k].heap for k in execs) if runs_counted else None,
        heap_execute_peak=max((steps[k].heap_peak for k in execs), default=0) if runs_counted else None,
        anonymous_mapped=None if any(c is None for c in counted) else sum(c.anon for c in counted),
        file_resident=r.file_rss,
        heap_load_program=None if load_program is None else load_program.heap,
        runs=runs,
        steps=steps,
        stand_ins=measured.stand_ins,
        delegate_scratch=plan.delegate_temp_bytes,
        method_pool_alone=alone.pools.method_peak if alone.ok else None,
        alone_error=None if alone.ok else failure(alone),
        heap_peak=heap_peak,
        heap_kept=heap_kept,
        file_heap_peak=file_heap_peak if file_loader else None,
        file_heap_kept=file_heap_kept if file_loader else None,
        file_loader_alignment=file_loader,
        heap_once=once,
        inputs=_with_dynamism(r.inputs, plan.inputs),
        outputs=_with_dynamism(r.outputs, plan.outputs),
        backends=backends,
        operators=operators,
        libraries=libraries,
        targets=_targets(measured),
        program_in_ram=in_ram,
        program_in_ram_why=in_ram_why,
        temp_run_peak=pools.temp_run_peak if execs and r.ok else None,
        temp_run_padded=pools.temp_run_padded,
    )
