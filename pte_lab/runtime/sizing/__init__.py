"""Deployment sizing: every byte a method needs, measured, and proven sufficient and tight.

``pte_lab.sizes("model.pte")`` loads and runs each method the way a bare-metal
build would, with pools it owns (``native/sizing.cpp``): a method allocator,
the planned arenas at their planned sizes, a temp allocator; every input set
before every execute (zeros at the planned shapes), as an application does.
The runner records each pool's high-water mark, in two configurations
(:data:`CONFIGURATIONS`: method + temp pools, and the method pool alone, with no
temp allocator); the allocation counter preloaded into the worker that hosts it
counts what lies outside ExecuTorch's allocators (what delegates and kernels
``malloc``, anonymous mappings) and the kernel says how much of the program file
is mapped in. The heap depends on the data loader (the pools do not): the parts
are measured with the program mapped (MmapDataLoader, as ``Runtime.load_program``
does), and each method is also run with a FileDataLoader (what a plain C++ runner
and ``--example-runner`` use; it mallocs the program's flatbuffer, constant
segments and delegate blobs it reads), in both configurations, for the heap such
a runner needs (:attr:`MethodSizes.file_heap_peak`).
:meth:`Sizes.verify` then loads and runs every method again, with a FileDataLoader,
in both configurations, with pools of exactly the reported sizes and planned
buffers aligned to exactly :data:`PLANNED_ALIGNMENT`, and with a method pool one
byte smaller, which ExecuTorch must refuse; a temp allocation refused during an
execute (ExecuTorch logs it and the execute still returns Ok) makes a pool
insufficient, and a temp pool one byte smaller is tried to say whether a short
temp pool is refused at load_method or only fails silently at execute.

Each configuration is also run under a bare-metal platform layer (``runner.run_method(bare_metal=True)``: an
``et_pal_allocate`` that refuses every request, as Arm's bare-metal one does): a method with no temp allocator
takes its temp memory from ``et_pal_allocate``, malloc on this host, nothing on such a board. Per configuration
:meth:`MethodSizes.holds_on` and :meth:`PoolVerification.holds_on` say which target kinds
(:data:`TARGET_KINDS`) it holds on; :meth:`MethodSizes.totals` gives one total per target kind
(:class:`Total`: a board's exact, of what holds on any target; this host's with its heap), and
:meth:`Sizes.fits` checks a board's against a budget or named regions (:class:`Fit`).

Runs always happen in an isolated worker (a fresh process: clean counts, and a
crash cannot take the caller down).

The pools are exact: ExecuTorch's own allocators' high-water marks, the same
on every run (and proven by :meth:`Sizes.verify`). The heap figures are not:
XNNPACK picks its kernels, packing and workspaces per instruction set, and
malloc's layout, the thread pool's threads and the address space's layout vary
from one run to the next. Each method's heap is therefore measured in
:data:`HEAP_RUNS` fresh workers (``heap_runs``), and the lowest and highest
seen are kept (:attr:`MethodSizes.heap_low`, :attr:`MethodSizes.heap_high`);
the scalar heap fields and the C header's ``HEAP_*`` macros are the highest.

The package has one job per module: ``measure`` runs the methods in a fresh worker and hands back the raw
runs; ``results`` sums them up into the records a user reads, which ``records`` defines (:class:`MethodSizes`,
:class:`PoolVerification`, :class:`Sizes` with its table, pools and JSON) and a kept sizing holds: they import
none of the measuring machinery. Their views are in :mod:`pte_lab.views.runtime.sizes`. Importing the package
imports none of its modules: each name is loaded when first used (``pte_lab.lazy_names``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy_names import lazy_names

#: each public name -> the submodule that defines it (or, for the runner's records, re-exports it)
_LAZY = {
    "COUNTING_RESERVATION": "measure",
    "HEAP_ONCE_ROUNDING": "measure",
    "Session": "measure",
    "address_space_limit": "measure",
    "sized_diff": "results",
    "sizes": "results",
    "heap_at": "results",
    "HeapAt": "records",
    "ANY_TARGET": "records",
    "CONFIGURATIONS": "records",
    "HEAP_FIELDS": "records",
    "HEAP_RUNS": "records",
    "HOST_ABI": "records",
    "HOST_DEPENDENT": "records",
    "HOST_ONLY": "records",
    "HOST_POOLS": "records",
    "INPUT_VALUES": "records",
    "MEASURED_PARTS": "records",
    "MIN_POOL_ALIGNMENT": "records",
    "PARTS": "records",
    "PLANNED_ALIGNMENT": "records",
    "POOLS": "records",
    "POOLS_EXACT": "records",
    "SIZES_COLUMNS": "records",
    "TARGET_KINDS": "records",
    "TARGET_POOLS": "records",
    "Fit": "records",
    "HeapFigures": "records",
    "Library": "records",
    "MethodIO": "records",
    "MethodSizes": "records",
    "PoolVerification": "records",
    "Sizes": "records",
    "SizingError": "records",
    "TargetKind": "records",
    "TargetRun": "records",
    "TempProbe": "records",
    "TempShort": "records",
    "Total": "records",
    "part_source": "records",
}

__all__ = ["sizes", "Sizes", "MethodSizes", "PoolVerification", "TempProbe", "TempShort", "SIZES_COLUMNS", "PARTS",
           "POOLS", "SizingError", "CONFIGURATIONS", "INPUT_VALUES", "MethodIO", "Library", "PLANNED_ALIGNMENT",
           "MIN_POOL_ALIGNMENT", "HEAP_ONCE_ROUNDING", "HeapFigures", "HEAP_RUNS", "HEAP_FIELDS", "HOST_DEPENDENT",
           "POOLS_EXACT", "MEASURED_PARTS", "part_source", "sized_diff", "Session", "COUNTING_RESERVATION",
           "address_space_limit", "TargetKind", "TARGET_KINDS", "TargetRun", "Total", "Fit", "ANY_TARGET", "HOST_ONLY", "HOST_ABI", "HOST_POOLS",
           "TARGET_POOLS", "heap_at", "HeapAt"]

if TYPE_CHECKING:  # pragma: no cover
    from .measure import COUNTING_RESERVATION, HEAP_ONCE_ROUNDING, Session, address_space_limit
    from .records import (ANY_TARGET, CONFIGURATIONS, HEAP_FIELDS, HEAP_RUNS, HOST_ABI, HOST_DEPENDENT, HOST_ONLY,
                          HOST_POOLS, INPUT_VALUES, MEASURED_PARTS, MIN_POOL_ALIGNMENT, PARTS, PLANNED_ALIGNMENT,
                          POOLS, POOLS_EXACT, SIZES_COLUMNS, TARGET_KINDS, TARGET_POOLS, Fit, HeapAt, HeapFigures, Library,
                          MethodIO, MethodSizes, PoolVerification, Sizes, SizingError, TargetKind, TargetRun,
                          TempProbe, TempShort, Total, part_source)
    from .results import heap_at, sized_diff, sizes


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
