"""Views of a deployment sizing (:class:`pte_lab.runtime.sizing.Sizes`): text, HTML and a C header, and the
words for what a temp pool one byte short did (:class:`~pte_lab.runtime.sizing.TempProbe`).

The header is what a bare-metal build includes to write its runner: per method
the pools in two configurations (method + temp, method alone), one macro per
planned buffer, the inputs and outputs, the heap taken outside the pools and
the libraries that register its backends and kernels, and the alignment every
pool's and buffer's base must have for the figures to hold. Each section is
one small function (``METHOD_SECTIONS``).
"""

from __future__ import annotations

import os
import platform
import re
import textwrap
from html import escape
from typing import TYPE_CHECKING

from ...devices import DEVICE_TYPES, parse_device
from ...model.abi import abi
from ...model.backends import BACKENDS, backend_note
from ...printable import text_view
from ..base import backend_note_line
from ..rows import mapped_rows_line
from ...runtime.libraries import AS_NEEDED, KERNEL_LIBRARY_NOTES, libpython, link_flags
from ...runtime.sizing.records import (
    ANY_TARGET,
    HOST_ABI,
    HOST_DEPENDENT,
    HOST_ONLY,
    HOST_POOLS,
    TARGET_POOLS,
    TARGET_KINDS,
    HEAP_REGION,
    INPUT_VALUES,
    MALLOC_BLOCKS,
    MIN_POOL_ALIGNMENT,
    PLATFORM_NODE,
    PLANNED_ALIGNMENT,
    POOLS_EXACT,
    Place,
    TempProbe,
    TempShort,
    Unplaced,
    board_has_heap,
    malloc_block,
    operator_new_pool,
    part_source,
    platform_request,
)
from ...units import capacity_bytes, count, exact_bytes, human_bytes, local_minute
from ...vocabulary import Configuration, MemoryPart, ValueKind
from ..c_text import c_comment as _comment
from ..c_text import c_string
from ..base import html_repr, text_table
from .declared import declared_lines, header_declared_lines, header_stand_in_lines, stand_in_line

if TYPE_CHECKING:  # pragma: no cover
    from ...runtime.sizing import PoolVerification, Sizes
    from ...runtime.sizing.records import Fit, TargetRun, Total

__all__ = ["sizes_text", "sizes_html", "verdict", "temp_verdict", "temp_probe_words", "c_header", "c_identifiers",
           "METHOD_SECTIONS", "holds_on", "not_runnable", "part_label", "total_line", "apart_line", "verified_line", "fits_lines", "HOW_MODELLED"]

#: how a target's pools were had (one home: the text, the header and the docs say it so)
HOW_MODELLED = ("modelled, not measured on a {target}: the method pool replayed from the program's tables with "
                "{target}'s type layouts (read from the executorch headers compiled for it), trusted where the same "
                "replay gives this host's measurement exactly; the temp pool from kernel resolution replayed the same "
                "way, the delegates' scratch (the blobs') and this host's temp peak at run time (measured from the first "
                "execute on, apart from kernel resolution)")


def _runs(sizes: "Sizes") -> int:
    return max((m.heap_runs for m in sizes.methods.values()), default=0)


def _range(m, field: str) -> str:
    """``low–high`` seen over the fresh runs, or one figure where they agree."""
    seen = m.seen(field)
    if seen is None:
        return "not measured"
    low, high = seen
    return f"{high:,}" if low == high else f"{low:,}–{high:,}"


def _platform_asked(t: "TargetRun", scratch: int = 0, target: str | None = None) -> str:
    """The requests to et_pal_allocate, and what the largest is made of: the delegates' scratch (``scratch``),
    PlatformMemoryAllocator's node and the room it adds to align the bytes asked; with ``target`` (a board's, the
    run being this host's), the largest as that target makes it: its node in place of this host's."""
    align = platform_request(t.platform_largest, scratch)
    board = abi(target) if target is not None else None
    if board is not None and align is not None:
        largest = t.platform_largest - PLATFORM_NODE + board.platform_node
        return (f"{count(t.platform_calls, 'request')} to et_pal_allocate (the largest {largest:,} B on the board, "
                f"{t.platform_largest:,} B in this host's run: the delegates' scratch, {scratch:,} B, + "
                f"{board.platform_node} B of PlatformMemoryAllocator's node (two pointers on {board.name}; "
                f"{PLATFORM_NODE} B on {HOST_ABI}) + {align - 1} B of room to align the scratch to {align} B)")
    made_of = (f": the delegates' scratch, {scratch:,} B, + {PLATFORM_NODE} B of PlatformMemoryAllocator's node (two "
               f"pointers on {HOST_ABI}) + {align - 1} B of room to align the scratch to {align} B"
               if align is not None else f", PlatformMemoryAllocator's node ({PLATFORM_NODE} B here) and its room to "
               f"align what was asked included")
    here = " in this host's run" if board is not None else ""
    return (f"{count(t.platform_calls, 'request')} to et_pal_allocate (the largest {t.platform_largest:,} B{here}"
            f"{made_of})")


def not_runnable(t: "TargetRun", scratch: int = 0, target: str | None = None) -> str:
    """Why a configuration does not hold on a target kind, in one phrase (``scratch``: the delegates', which
    the largest request to et_pal_allocate may be made of; ``target``: the board it is said of, whose node the
    request is given with)."""
    if t.platform_refused:
        return (f"its platform layer refused {_platform_asked(t, scratch, target)}, which a method with no temp "
                f"allocator takes "
                f"its temp memory from" + (f" ({t.error})" if t.error else ""))
    if t.temp_failures:
        return f"{count(t.temp_failures, 'temp allocation')} refused during execute"
    return t.error or "it did not run"


def holds_on(runs: "dict[str, TargetRun]", lead: str = "holds on", scratch: int = 0) -> str:
    """Which target kinds a configuration holds on (:data:`TARGET_KINDS`), and why not where it does not:
    ``holds on: this host, bare-metal`` or ``holds on: this host; not runnable on bare-metal: ...``."""
    ok = [k for k, t in runs.items() if t.runnable]
    said = []
    for k in ok:
        t = runs[k]
        if k == "bare-metal":
            said.append("a bare-metal platform layer, emulated here (et_pal_allocate refuses every request, as "
                        "Arm's does)")
        else:
            said.append(_TARGET_WORDS[k] + (f" (with {_platform_asked(t, scratch)}, malloc on this host, beyond its "
                                            f"pools)" if t.platform_calls else ""))
    words = f"{lead}: {' and '.join(said) or 'none'}"
    if "bare-metal" in ok:
        words += (f", {'both ' if len(ok) > 1 else ''}with this host's pools ({HOST_ABI}); a 32-bit board's pools "
                  f"differ: pte-lab sizes FILE --target cortex-m")
    for k, t in runs.items():
        if not t.runnable:
            words += f"; not runnable on {_TARGET_WORDS[k]}: {not_runnable(t, scratch)}"
    return words


#: how an unverified configuration's target kinds are said: where the sizing ran it, not where it holds
UNVERIFIED_LEAD = "the sizing ran it, with counting pools (not a verification), on"

#: how a target kind is named in a sentence
_TARGET_WORDS = {"host": "this host", "bare-metal": "a bare-metal target"}


def verdict(v: "PoolVerification | None", scratch: int = 0) -> str:
    """What a method's verification proved, in one sentence (text, HTML and notebooks say it so): on which
    target kinds' platform layers the pools load and run it, and whether they are tight."""
    if v is None:
        return "not verified (--verify proves the pool sizes)"
    if not v.sufficient:
        return f"NOT SUFFICIENT: {v.sufficient_error}"
    tight = (f"tight: one byte less is refused ({v.smaller_error})" if v.tight
             else f"not tight: one byte less gave {v.smaller_error or 'no error'}")
    runs = v.holds_on()
    if v.bare_metal is None:  # a record made before the target kinds
        return f"verified: these pools load and run it; {tight}"
    where = "verified" if all(t.runnable for t in runs.values()) else "verified on this host only"
    return f"{where}: these pools load and run it; {tight}; {holds_on(runs, scratch=scratch)}"


def verified_line(sizes: "Sizes", name: str) -> str:
    """What ``--verify`` proved for one method, in one line (``--example-runner`` implies it and says this line):
    where it ran, with which pools, and the verdict; the method pool alone's too where it did not hold."""
    m, v = sizes.methods[name], (sizes.verified or {}).get(name)
    if v is None:
        return f"method {name!r}: {verdict(None)}"
    where = f"on this host, with pte_lab's stand-ins for {', '.join(m.stand_ins)}" if m.stand_ins else "on this host"
    line = (f"verified {where}: method {name!r}, this host's pools ({v.method_pool:,} B method, {v.temp_pool or 0:,} B "
            f"temp): {verdict(v, m.delegate_scratch)}")
    alone = (sizes.verified_alone or {}).get(name)
    if alone is not None and not (alone.sufficient and alone.tight):
        line += f"; the method pool alone ({alone.method_pool:,} B): {verdict(alone, m.delegate_scratch)}"
    return line


def _silent(p: TempProbe) -> str:
    return f"{p.failed} temp allocations failed during execute, which returned Ok"


def temp_probe_words(p: TempProbe) -> str:
    """A temp probe as the JSON document gives it: ``refused: <error> at <step>``, ``silent: <what failed>`` or
    ``ran``."""
    if p.outcome is TempShort.REFUSED:
        return f"refused: {p.error}"
    if p.outcome is TempShort.SILENT:
        return f"silent: {_silent(p)}"
    return "ran"


def temp_verdict(v: "PoolVerification") -> str:
    """What a temp pool one byte smaller did, in one sentence."""
    p = v.smaller_temp
    if p is None:
        return "not tried"
    if p.outcome is TempShort.SILENT:
        return (f"NOT refused: {_silent(p)} (ExecuTorch logs \"Failed to allocate temp memory\"); a short "
                f"temp pool is silent for this method")
    if p.outcome is TempShort.REFUSED:
        return f"refused ({p.error})"
    return "ran: nothing failed (the temp figure is not tight)"


def kept_line(sizes) -> list[str]:
    """The line that says a sizing's figures were kept (when they were measured), or none: every view of a
    :class:`~pte_lab.runtime.sizing.Sizes` says it."""
    if sizes.kept is None:
        return []
    return [f"(kept: measured here {local_minute(sizes.kept)} from these same bytes with this pte_lab and ExecuTorch; "
            "--no-cache measures again)"]


def _backend_lines(sizes: "Sizes") -> list[str]:
    """One line per backend the methods call: what is known of its memory, what is not, how to measure it."""
    backends = [b for m in sizes.methods.values() for b in m.backends]
    backends += [b for d in sizes.declared.values() for _, b, _, _ in d.delegates]
    return [f"backend {backend_note_line(backend_note(b))}" for b in dict.fromkeys(backends)]


@text_view
def sizes_text(sizes: "Sizes") -> str:
    """Per method: the pools it needs, what lies beyond them, and where each figure comes from."""
    ran = (f"each method loaded and run {next(iter(sizes.methods.values())).runs}x in an isolated worker"
           if sizes.methods else "no method could run here: each says why below, with what its file declares")
    out = [f"{os.path.basename(sizes.path)}: run-time memory per method (executorch {sizes.executorch_version}; "
           f"{ran})"]
    if sizes.methods and not sizes.counted:
        out.append("(the allocation counter could not be preloaded here: heap and mapping figures are missing)")
    out += kept_line(sizes)
    host_label = _host_label()
    for m in sizes.methods.values():
        anywhere, here = [], []
        for mem_id, device, b in m.planned:
            anywhere.append([f"planned arena {mem_id}", device, f"{b:,}", human_bytes(b), "exact", "file"])
        for part, b in m.parts().items():
            if part is MemoryPart.PLANNED_ARENAS or b is None:
                continue
            if part is MemoryPart.DELEGATE_SCRATCH and not b:
                continue
            seen = _range(m, part) if part.measured_here else "exact"
            (here if part.measured_here else anywhere).append(
                [part_label(part, m), "cpu", f"{b:,}", human_bytes(b), seen, part_source(part, m)])
        head = ["part", "device", "bytes", "", f"seen over {m.heap_runs} runs", "from"]
        out += ["", f"method {m.method!r}", f"-- {any_target_label(m.abi)}:", text_table(head, anywhere)]
        out.append(f"pools, method + temp: method {m.method_allocator:,} B ({count(m.method_allocations, 'allocation')}), "
                   f"temp {m.temp_allocator:,} B (peak {m.temp_peak:,}; kernel resolution needs "
                   f"{m.resolution_minimum:,}), bases aligned to {m.alignment} B")
        out += [line for line in [stand_in_line(m)] if line]
        out.append(("  with stand-ins: " if m.stand_ins else "  ") + verdict((sizes.verified or {}).get(m.method), m.delegate_scratch))
        if sizes.verified is None and m.targets:
            out.append("  " + holds_on(m.holds_on(Configuration.METHOD_TEMP), UNVERIFIED_LEAD, m.delegate_scratch))
        if m.method_pool_alone is not None:
            out.append(f"pools, method alone (no temp allocator): method {m.method_pool_alone:,} B")
            if sizes.verified is not None:
                out.append("  " + verdict((sizes.verified_alone or {}).get(m.method), m.delegate_scratch))
            elif m.targets:
                out.append("  " + holds_on(m.holds_on(Configuration.METHOD_ALONE), UNVERIFIED_LEAD, m.delegate_scratch))
        else:
            out.append(f"pools, method alone (no temp allocator): not possible ({m.alone_error})")
        out.append(f"planned buffers' bases aligned to {m.planned_alignment} B")
        v = (sizes.verified or {}).get(m.method)
        if v is not None and v.smaller_temp is not None:
            out.append(f"  a temp pool one byte smaller: {temp_verdict(v)}")
        out += _io_lines(m)
        totals = m.totals()
        # an app's program (the model's budget target: this host) leads with the app's total, the bare-metal one
        # apart after it; a board's with the bare-metal total, here among what holds on any target
        app = TARGET_KINDS[sizes.budget_target].host
        out += [total_line(t) for k, t in totals.items() if not TARGET_KINDS[k].host and not app]
        out += [f"-- {host_label}:"]
        if here:
            out.append(mapped_rows_line())
            out.append(text_table(head, here))
        if m.file_heap_peak is not None:
            out.append(f"heap outside the pools (the counter), FileDataLoader({m.file_loader_alignment}): peak "
                       f"{m.file_heap_peak:,} B from the loader's creation through the runs, {m.file_heap_kept:,} B "
                       f"still held after them (the highest of {m.heap_runs} fresh runs; seen: peak "
                       f"{_range(m, 'file_heap_peak')}, held {_range(m, 'file_heap_kept')})")
        if m.heap_peak is not None:
            out.append(f"heap outside the pools (the counter), program mapped (MmapDataLoader): peak "
                       f"{m.heap_peak:,} B, {m.heap_kept:,} B still held"
                       + (f" (both include {m.heap_once:,} B the process allocates once)" if m.heap_once else "")
                       + f" (the highest of {m.heap_runs} fresh runs; seen: peak {_range(m, 'heap_peak')}, held "
                         f"{_range(m, 'heap_kept')})")
        if m.libraries:
            out.append("libraries of this executorch wheel that register them (keep them: --no-as-needed): "
                       + "; ".join(f"{lib.name} ({', '.join(lib.provides) or 'the runtime'})" for lib in m.libraries))
            out += [f"  {lib.name}: {KERNEL_LIBRARY_NOTES[lib.name]}" for lib in m.libraries
                    if lib.name in KERNEL_LIBRARY_NOTES]
        out += [total_line(t) for k, t in totals.items() if TARGET_KINDS[k].host]
        out += [apart_line(t) for k, t in totals.items() if not TARGET_KINDS[k].host and app]
    for name, why in sizes.skipped.items():
        out += ["", f"method {name!r}: not sized: {why}"]
        out += declared_lines(sizes.declared[name]) if name in sizes.declared else []
    backends = _backend_lines(sizes)
    if backends:
        out += [""] + backends
    if sizes.methods:
        host, exact = HOST_DEPENDENT, POOLS_EXACT
        out += ["", f"{exact}; {host}: each heap figure is the highest seen over {_runs(sizes)} fresh runs "
                    "(\"seen\" gives the lowest too)"]
    out += ["", "from: file = the program's own tables; delegate blob = what the delegates' blobs declare; "
                "runner = pte_lab's sizing runner (ExecuTorch's allocators, counted); counter = every malloc/mmap of the worker, counted; kernel = the "
                "kernel's resident-page count"]
    return "\n".join(out)


def any_target_label(abi: str = "host") -> str:
    """The label of what holds on any target, with whose pools they are (this host's ABI, or ``abi``'s)."""
    return ANY_TARGET.format(pools=HOST_POOLS if abi == "host" else TARGET_POOLS.format(target=abi))


def part_holds_on(part: MemoryPart, target: str = "host") -> str:
    """Where one part's figure holds, for the table's "holds on" column: a heap or page figure on this host;
    a pool (its allocations hold pointers and vectors) on this ABI, or the modelled target's; what the file
    and the delegates' blobs fix, on any target."""
    if part.measured_here:
        return "this host"
    if part.abi_dependent:
        return f"this ABI ({HOST_ABI})" if target == "host" else f"{target} (modelled)"
    return "any target"


def board_words(t: "Total") -> str:
    """Where a total holds, in a sentence: ``this host``, ``a bare-metal target with this ABI's (x86-64 LP64)
    pools`` or ``a cortex-m board (bare-metal)``."""
    if TARGET_KINDS[t.target].host:
        return _TARGET_WORDS[t.target]
    if t.abi == "host":
        return f"{_TARGET_WORDS[t.target]} with this ABI's ({HOST_ABI}) pools"
    return f"a {t.abi} board ({t.target})"


def _host_label() -> str:
    return HOST_ONLY.format(host=f"{platform.system()} {platform.machine()}")


#: what a heap part holds where the method's backends say it: (backend, part) -> the cause (each backend's
#: registration's, :attr:`pte_lab.model.backends.Backend.heap_causes`)
HEAP_CAUSES = {(b.id, part): cause for b in BACKENDS.values() for part, cause in b.heap_causes.items()}


def part_label(part: MemoryPart, m) -> str:
    """A part (:data:`PARTS`) as a table row names it: the temp allocator's row, beside a delegate's scratch,
    is what the temp pool holds beyond that scratch; a heap part says what it holds where a backend of the
    method is known to take it (:data:`HEAP_CAUSES`)."""
    if part is MemoryPart.TEMP_ALLOCATOR and m.delegate_scratch:
        return "temp allocator beyond the delegates' scratch"
    causes = [HEAP_CAUSES[(b, part)] for b in m.backends if (b, part) in HEAP_CAUSES]
    return f"{part} (of it {', '.join(causes)})" if causes else part


def total_line(t: "Total") -> str:
    """One target kind's total for a method, in one line: ``total on a cortex-m board (bare-metal) (method +
    temp, ...): 22,452 B (21.9 KiB) = planned buffer 1 10,240 + ...``. A bare-metal total of this host's pools
    says it is this ABI's and points to ``--target cortex-m``; only another target's, modelled and trusted, is
    the board's exact total."""
    kind = TARGET_KINDS[t.target]
    parts = " + ".join(f"{name} {b:,}" for name, b in t.parts)
    note = "" if t.runnable else f" (NOT RUNNABLE there: no configuration holds on {_TARGET_WORDS[t.target]})"
    left = "".join(f"; not in RAM: {name} {b:,} B" for name, b in t.left_out)
    if kind.host:
        exact = "a host figure: its heap is the highest seen"
    elif t.inexact is not None:
        exact = f"NOT EXACT: {t.inexact}"
    elif t.abi == "host":
        exact = f"exact for {HOST_ABI} pools; a 32-bit board's pools differ: --target cortex-m"
    else:  # another target's: one word for how it was had, as its set-these block says
        exact = f"basis: {t.basis}, {t.abi}'s pools"
    firmware = "" if kind.host else "; the firmware's own static data and stack are beyond it"
    return (f"total on {board_words(t)} ({t.configuration}, {kind.loader}): {exact_bytes(t.bytes)} = {parts}{left} "
            f"({exact}{firmware}){note}")


def apart_line(t: "Total", fit: "Fit | None" = None) -> str:
    """A bare-metal total said apart, an aside under an app's total (an app's program: ``Sizes.budget_target``),
    in one indented line: its bytes, what ``fit`` leaves of a budget, and why it is not the app's."""
    said = []
    if fit is not None and fit.left is not None:
        said.append(f"{fit.left:,} B left" if fit.fits else f"over by {-fit.left:,} B")
    said.append("the program read in place: no loader's copy on the heap")
    if t.inexact is not None:
        said.append(f"NOT EXACT: {t.inexact}")
    elif t.abi == "host":
        said.append("exact for these pools; a 32-bit board's: --target cortex-m")
    return f"  apart, on {board_words(t)}: {t.bytes:,} B ({'; '.join(said)})"


def heap_need_words(need: int, blocks: tuple[int, ...]) -> str:
    """What a board's heap must give (operator new at load_method), in a phrase: the bytes asked and what
    newlib's allocators make of them on a 32-bit target (:func:`~pte_lab.runtime.sizing.records.malloc_block`)."""
    if not blocks:
        return f"needs a heap of at least {need:,} B plus the allocator's per-block overhead"
    return (f"needs a heap (operator new) of at least {need:,} B plus the allocator's per-block overhead "
            f"({malloc_overhead_words(blocks)})")


def malloc_overhead_words(blocks: tuple[int, ...]) -> str:
    """What newlib's two mallocs make of ``blocks`` on a 32-bit target, in a phrase."""
    nano = sum(malloc_block("newlib-nano", b) for b in blocks)
    full = sum(malloc_block("newlib", b) for b in blocks)
    return (f"newlib-nano's malloc adds 8 B to each block, rounded up to 4 B: {nano:,} B for "
            f"{count(len(blocks), 'block')}; newlib's full malloc 4 B, rounded up to 8 B: {full:,} B")


def no_heap_words(need: int) -> str:
    """Why a method whose backends malloc their own memory does not fit a board without a heap, in a phrase
    (what operator new asks is given from a static pool there: :func:`new_pool_words`)."""
    return (f"DOES NOT FIT: the backends allocate {need:,} B with malloc (this host's figure) and the board has no "
            f"heap: give it a heap of at least that much (--region heap=N checks one)")


def new_pool_words(pool: int, blocks: tuple[int, ...]) -> str:
    """The static operator-new pool of a board without a heap, and why it is there, in a phrase."""
    return (f"operator new served from a static pool of {pool:,} B ({count(len(blocks), 'block')}, each 8-byte "
            f"aligned) in place of the heap the board lacks: the delegates ask operator new for it at load_method, "
            f"and without the pool load_method fails with MemoryAllocationFailed (pte-lab sizes FILE --target "
            f"cortex-m --example-runner DIR writes a runner that provides it)")


def heap_region_words(t: "Total", region: str, size: int) -> str:
    """What a heap region was checked against (``Total.heap_allocated``): the bytes the delegates ask, as the
    larger of newlib's two mallocs takes them, in a phrase."""
    alloc, need = t.heap_allocated
    if not alloc:
        return f"{region} {size:,} B checked against the {need:,} B asked of it"
    others = ", ".join(f"{_MALLOC_NAMES[a]}: {t.heap_with(a):,} B" for a in MALLOC_BLOCKS if a != alloc)
    return (f"{region} {size:,} B checked against {need:,} B: the {t.heap_need:,} B asked of it "
            f"({count(len(t.heap_blocks), 'block')}) as {_MALLOC_NAMES[alloc]} takes them, the larger of newlib's "
            f"two ({others})")


#: newlib's mallocs (:data:`MALLOC_BLOCKS`), in words
_MALLOC_NAMES = {"newlib-nano": "newlib-nano's malloc", "newlib": "newlib's full malloc"}


#: why a part was placed in no region, in words
_UNPLACED_WORDS = {
    Unplaced.NO_ROOM: "no region it may go in has room for it",
    Unplaced.NO_HEAP: "it comes from operator new and the board has no heap",
    Unplaced.NO_NPU_REGION: ("it must be in memory the NPU reaches and no region is marked so: name one with "
                             "--npu-region NAME"),
}


def fits_lines(fits: "dict[str, Fit]", apart: "dict[str, Fit] | None" = None) -> list[str]:
    """Each method's total against the budget (or the regions): fits or not, and the largest parts; on a board,
    the heap it needs (or that the board has none) and where the NPU's memory went; on this host (an app's total
    with its loader), ``apart``: the bare-metal total with this ABI's pools, said after it."""
    out = []
    for name, f in fits.items():
        t = f.total
        largest = ", ".join(f"{p} {b:,} B" for p, b in t.largest())
        heap = (no_heap_words(t.heap_need) if f.no_heap
                else heap_need_words(t.heap_need, t.heap_blocks) if t.heap_need else None)
        pool = f"; {new_pool_words(t.new_pool, t.heap_blocks)}" if t.new_pool else ""
        if f.budget is not None or not f.regions:
            budget = f" against a budget of {capacity_bytes(f.budget)}" if f.budget is not None else ""
            if f.no_heap:
                verdict_ = heap
            elif f.fits:
                left = f", {capacity_bytes(f.left)} left" if f.left is not None else ""
                verdict_ = "fits" + left + (f"; it {heap}" if heap else "") + pool
            else:
                verdict_ = f"DOES NOT FIT (over by {t.bytes - (f.budget or 0):,} B; the largest parts: {largest})"
            where = (f"an app (the heap as measured on this host; a phone's CPU may differ: measure it there), with "
                     f"{TARGET_KINDS[t.target].loader} as an app's Module reads by default (LoadMode File)"
                     if TARGET_KINDS[t.target].host else board_words(t))
            out.append(f"method {name!r} on {where} ({t.configuration}): {t.bytes:,} B{budget}: {verdict_}")
            b = (apart or {}).get(name)
            if b is not None:
                out.append(apart_line(b.total, b))
        else:
            regions = ", ".join(f"{n} {capacity_bytes(b)}" for n, b in f.regions)
            heap_region = next(((n, b) for n, b in f.regions if n.lower() == HEAP_REGION), None)
            checked = (heap_region_words(t, *heap_region)
                       if heap_region is not None and heap_region[1] and t.heap_need else None)
            # a part named for its region (heap: ...) is not named so twice
            placed = "; ".join(f"{n}: {', '.join(x.removeprefix(f'{n}: ') for x in p) or 'nothing'}" for n, p in f.placed)
            heap_parts = {p for i, (p, _) in enumerate(t.parts) if t.place_of(i) in (Place.HEAP, Place.NEW)}
            if f.fits:
                npu = [p for i, (p, _) in enumerate(t.parts) if t.place_of(i) is Place.NPU]
                marked = [n for n, _ in f.regions if n in f.npu_regions]
                where = ("" if not npu else f"; {', '.join(npu)} in {', '.join(marked)}, marked as memory the NPU "
                         f"reaches" if marked else f"; {', '.join(npu)} in the only RAM region given, taken to be "
                         f"memory the NPU reaches (--npu-region NAME marks one)")
                left = ", ".join(f"{capacity_bytes(b)} left in {n}" for n, b in f.left_in)
                verdict_ = ("fits" + (f", {left}" if left else "")
                            + (f"; the heap region: {checked}" if checked else f"; it {heap}" if heap else "")
                            + pool + where)
            else:
                others = [f"{p}: {_UNPLACED_WORDS[w]}" + (f" ({checked})" if checked and p in heap_parts else "")
                          for p, w in zip(f.unplaced, f.why_unplaced) if w is not Unplaced.NO_HEAP]
                verdict_ = ((heap or "") + ("; and " if others else "") if f.no_heap else "DOES NOT FIT: ") + \
                    "; ".join(others) + (f" (the largest parts: {largest})" if others else "")
            out.append(f"method {name!r} on {board_words(t)} ({t.configuration}): {t.bytes:,} B in the "
                       f"regions {regions}: {verdict_} ({placed})")
    return out


def _io_line(io, inputs: bool) -> str:
    if io.kind != ValueKind.TENSOR:
        held = "" if io.value is None else f" = {io.value!r}"
        return f"  {io.index}: {io.kind}{held}" + (f", set to {INPUT_VALUES['other']}" if inputs else "")
    shape = "[" + ", ".join(map(str, io.shape)) + "]"
    where = "planned" if io.planned else "caller-provided"
    bound = " (upper bound)" if io.dynamic else ""
    return (f"  {io.index}: {io.dtype}{shape}{bound} {io.nbytes:,} B, {where}"
            + (", zeros" if inputs else ""))


def _io_lines(m) -> list[str]:
    """The inputs the runner set before every execute, and the outputs."""
    out = []
    if m.inputs:
        out.append(f"inputs, set before {'the one execute' if m.runs == 1 else f'each of the {m.runs:,} executes'}:")
        out += [_io_line(io, True) for io in m.inputs]
    if m.outputs:
        out.append("outputs:")
        out += [_io_line(io, False) for io in m.outputs]
    return out


def sizes_html(sizes: "Sizes") -> str:
    """The table of parts, then per method what could not be sized and what the verification proved."""
    t = sizes.table()
    t["size"] = t["bytes"].map(human_bytes)
    t["part"] = [part_label(p, sizes.methods[n]) if n in sizes.methods else p for n, p in zip(t["method"], t["part"])]
    t["holds on"] = [part_holds_on(p, sizes.target) for p in sizes.table()["part"]]
    host, exact = HOST_DEPENDENT, POOLS_EXACT
    notes = [escape(f"bytes: the highest seen over {_runs(sizes)} fresh runs, lowest: the lowest; {exact}; {host}")
             for _ in [0] if sizes.methods]
    notes += [f"{escape(n)}: not sized ({escape(why)})" for n, why in sizes.skipped.items()]
    notes += [f"{escape(n)}: {escape(line.strip())}" for n, d in sizes.declared.items() for line in declared_lines(d)]
    notes += [f"{escape(n)}: {escape(stand_in_line(m))}" for n, m in sizes.methods.items() if m.stand_ins]
    notes += [f"{escape(n)}: {escape(verdict(v))}" for n, v in (sizes.verified or {}).items()]
    notes += [f"{escape(n)} (method pool alone, no temp allocator): {escape(verdict(v))}"
              for n, v in (sizes.verified_alone or {}).items()]
    notes += [f"{escape(n)}: a temp pool one byte smaller: {escape(temp_verdict(v))}"
              for n, v in (sizes.verified or {}).items() if v.smaller_temp is not None]
    notes += [escape(f"{n}, {label}: {holds_on(m.holds_on(label), UNVERIFIED_LEAD, m.delegate_scratch)}")
              for n, m in sizes.methods.items() if sizes.verified is None and m.targets
              for label in (Configuration.METHOD_TEMP, Configuration.METHOD_ALONE) if m.holds_on(label)]
    app = TARGET_KINDS[sizes.budget_target].host  # as the text: an app's program has its bare-metal total apart
    notes += [escape(f"{n}: {total_line(t)}") for n, m in sizes.methods.items() for t in m.totals().values()
              if TARGET_KINDS[t.target].host or not app]
    notes += [escape(f"{n}: {apart_line(t).strip()}") for n, m in sizes.methods.items() for t in m.totals().values()
              if app and not TARGET_KINDS[t.target].host]
    notes += [escape(f"the 'holds on' column: {any_target_label(sizes.target)}; {_host_label()}") for _ in [0] if sizes.methods]
    notes += [escape(f"this host's heap {mapped_rows_line()}") for _ in [0] if sizes.methods]
    notes += [escape(line) for line in _backend_lines(sizes)]
    notes += [f"{escape(m.method)}: inputs set before every execute: "
              + escape(", ".join(_io_line(io, True).strip() for io in m.inputs)) for m in sizes.methods.values()
              if m.inputs]
    return html_repr(f"<div><b>Sizes</b> of {escape(os.path.basename(sizes.path))} (executorch "
                     f"{escape(sizes.executorch_version)})</div>" + t.to_html(index=False)
                     + "".join(f"<div>{line}</div>" for line in notes), sizes_text(sizes))


_NOT_IDENT = re.compile(r"[^0-9A-Za-z]+")


def c_identifiers(names) -> dict[str, str]:
    """Method name -> a C identifier part, unique (``forward`` -> ``forward``, ``a-b`` -> ``a_b``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        base = _NOT_IDENT.sub("_", n).strip("_").lower() or "method"
        ident, k = base, 2
        while ident in used:
            ident, k = f"{base}_{k}", k + 1
        used.add(ident)
        out[n] = ident
    return out


def _stem(sizes: "Sizes") -> str:
    return _NOT_IDENT.sub("_", os.path.splitext(os.path.basename(sizes.path))[0]).upper().strip("_") or "PROGRAM"


def _planned_alignment(sizes: "Sizes") -> int:
    return max([PLANNED_ALIGNMENT] + [m.planned_alignment for m in sizes.methods.values()])


def _pool_alignment(sizes: "Sizes") -> int:
    return max([MIN_POOL_ALIGNMENT] + [m.alignment for m in sizes.methods.values()])


def _inputs_used(sizes: "Sizes") -> str:
    runs = max((m.runs for m in sizes.methods.values()), default=0)
    return (f"executed {count(runs, 'time')}, every input set before every execute (tensors: "
            f"{INPUT_VALUES['Tensor']}, as listed below; other inputs: {INPUT_VALUES['other']})")


def _verified_words(sizes: "Sizes") -> str:
    if sizes.proven:
        return ("verified: pools of exactly these sizes, bases aligned to exactly the alignments below, load and "
                "run every method in both configurations, and a method pool one byte smaller is refused "
                "(MemoryAllocationFailed, 0x21, at load_method)")
    return "not verified (pte-lab sizes --verify proves them)"


def _preamble(sizes: "Sizes") -> list[str]:
    """The header's opening comment: where the figures come from and how a runner uses them."""
    text = [
        f"Memory for {os.path.basename(sizes.path)}, measured by pte_lab with executorch {sizes.executorch_version} "
        f"({platform.system()} {platform.machine()}).",
        *([f"The pools are {sizes.target}'s, {HOW_MODELLED.format(target=sizes.target)}; everything labelled "
           "this host's holds on this host only."] if sizes.target != "host" else []),
        "Each method was loaded with ExecuTorch's MemoryAllocator, HierarchicalAllocator and MemoryManager and "
        + _inputs_used(sizes) + "; figures " + _verified_words(sizes) + ".",
        *([f"Its external data, {os.path.basename(sizes.data_path)}, was given to load_method as a "
           "FlatTensorDataMap."] if sizes.data_path else []),
        POOLS_EXACT[0].upper() + POOLS_EXACT[1:] + " (verified where the header says so), and so are the "
        f"planned buffers (the file's); the HEAP_* figures are the highest seen over {_runs(sizes)} fresh runs: "
        f"{HOST_DEPENDENT}, so give the heap headroom and measure it again on the target.",
        "Each part of this header is labelled with where it holds: on any target (planned buffers, pools, the "
        "delegates' scratch, inputs and outputs, alignments; the pools are "
        + (f"this ABI's, {HOST_ABI} here" if sizes.target == "host" else f"{sizes.target}'s, modelled") + "), or on "
        "this host only (the HEAP_* figures, PTE_LAB_HEAP_ONCE_BYTES, PTE_LAB_FILE_LOADER_ALIGNMENT, the "
        "libraries and link line). Each configuration was also run under a bare-metal platform layer, whose "
        "et_pal_allocate returns nullptr as Arm's does (a method with no temp allocator takes its temp memory "
        "from et_pal_allocate): <M>_METHOD_TEMP_RUNS_ON_BARE_METAL and <M>_METHOD_ALONE_RUNS_ON_BARE_METAL say "
        "whether it runs there. <M>_TOTAL_BYTES_BARE_METAL is what a bare-metal build must have in RAM, exact: "
        "the planned buffers, the pools of a configuration that runs there, and the program's bytes where the "
        "delegates' memory mode needs them in RAM (read from flash through a BufferDataLoader otherwise); "
        "the firmware's own static data (ExecuTorch's kernel registry among it) and its stack are the link's, "
        "beyond it: read them in the link map. "
        "<M>_TOTAL_BYTES_HOST is a Linux runner's instead (a FileDataLoader; its heap is a host figure).",
        "",
        "A runner, per method (<M> below stands for PTE_LAB_ and the method's name in capitals). Names are per "
        "method, not per program (two programs' headers both define PTE_LAB_FORWARD_... and "
        "PTE_LAB_POOL_ALIGNMENT): include each program's header in a translation unit of its own (a .c/.cpp "
        "that defines that program's pools and exports them under names of yours).",
        "1. Pools (MemoryAllocator), bases aligned to PTE_LAB_POOL_ALIGNMENT, in one of two configurations: a "
        "method pool of <M>_METHOD_POOL_BYTES and a temp pool of <M>_TEMP_POOL_BYTES (the temp figure is tight "
        "only with this method pool: with a smaller temp pool Method::init resolves kernels in the method pool); "
        "or a method pool of <M>_METHOD_POOL_ALONE_BYTES and no temp allocator (MemoryManager's temp_allocator "
        "nullptr; the temp memory then comes from et_pal_allocate: only where <M>_METHOD_ALONE_RUNS_ON_BARE_METAL "
        "is 1 does that configuration hold on a board whose platform layer has no heap). A pool of 0 bytes is a MemoryAllocator of size 0 (verified over a non-null base; C and C++ "
        "have no zero-length arrays: declare none, or one byte, and tell the allocator 0), not nullptr for the "
        "temp allocator: that is the other configuration. <M>_TEMP_POOL_BYTES is the larger of what kernel "
        "resolution needs for Method::init to use the temp pool (a threshold: it need not fill) and the temp "
        "allocator's peak over the executes (<M>_TEMP_PEAK_BYTES).",
        "2. Temp allocations at execute: some kernels (a custom SDPA, say) take scratch from the temp allocator "
        "during execute. If the temp pool is short, ExecuTorch logs \"Failed to allocate temp memory\" and "
        "execute() may still return Error::Ok: a short temp pool is not always refused. `pte-lab sizes "
        "--verify` tries a temp pool one byte smaller and says per method whether it is refused at load_method "
        "or fails silently at execute (<M>_TEMP_SHORT_IS_SILENT 1); size the temp pool exactly.",
        "3. Planned buffers: one buffer of <M>_PLANNED_BUFFER_<i>_BYTES per index i (the method's planned buffer "
        "i, the file's mem_id i + 1), base aligned to PTE_LAB_PLANNED_BUFFER_ALIGNMENT, given to a "
        "HierarchicalAllocator in index order; <M>_PLANNED_BUFFER_<i>_DEVICE_TYPE other than 0 (CPU) comes from "
        "that device's allocator. <M>_NUM_PLANNED_BUFFERS 0: an empty HierarchicalAllocator (a Span of no "
        "spans; verified), and no pte_lab_<m>_planned_buffer_* arrays are defined.",
        "4. Inputs: set every input before every execute: the plan may give a planned input's bytes to other "
        "tensors once it is read, so an execute without them reads the last one's results. Each tensor input "
        "needs a caller buffer of <M>_INPUT_<i>_BYTES (verified with bases aligned to "
        "PTE_LAB_PLANNED_BUFFER_ALIGNMENT) and a TensorImpl of <M>_INPUT_<i>_SCALAR_TYPE (ExecuTorch's ScalarType) "
        "over mutable copies of the pte_lab_<m>_input_<i>_sizes/_dim_order/_strides arrays (TensorImpl takes "
        "non-const pointers). <M>_INPUT_<i>_PLANNED 1: set_input copies the tensor into its planned buffer; 0: "
        "the method reads the caller's memory during execute, which must stay alive and unchanged until execute "
        "returns. An input marked an upper bound (dynamic) may be given a smaller shape: set_input accepts any "
        "shape of the same rank with at most the bound's elements (else NotSupported, 0x10), and the program "
        "decides which of those it computes (its exported dynamic dimensions); the figures were measured at the "
        "bound. An output with <M>_OUTPUT_<i>_PLANNED 0 needs set_output_data_ptr with a buffer of "
        "<M>_OUTPUT_<i>_BYTES before execute.",
        "5. Heap: what the method takes outside these pools, measured by pte_lab's allocation counter (every "
        "malloc of the process from the data loader's creation through Program::load, load_method and the "
        "executes), not by ExecuTorch. It is this host's figure (this CPU, its C library's malloc, ExecuTorch's "
        "POSIX platform layer): another target's heap differs, and a bare-metal build without a heap needs "
        "these bytes to come from its pools instead. It depends on the data loader. "
        "<M>_HEAP_PEAK_BYTES is for a FileDataLoader of alignment PTE_LAB_FILE_LOADER_ALIGNMENT (what the "
        "example runner uses: it mallocs what it reads, the program's flatbuffer at Program::load, the constant "
        "segment, delegate blobs while load_method reads them), the larger of the two pool configurations. "
        "<M>_HEAP_PEAK_MMAP_BYTES is for the program mapped (MmapDataLoader; a BufferDataLoader over the program "
        "in flash reads nothing either and should be near it, not measured). Both are per method, Program "
        "loaded for it alone, and include what the process allocates once (PTE_LAB_HEAP_ONCE_BYTES); the "
        "loader's copy of the file's path is in them, for a path as long as the one measured.",
        "6. Link the backends and operator libraries listed per method: " + AS_NEEDED + ". Each library's "
        "folder needs -L at link time and -Wl,-rpath (or LD_LIBRARY_PATH) at run time; the link line per "
        "method below is the one that was built and run here.",
        "7. Build (the executorch wheel): C++17, include folders <executorch>/include and "
        "<executorch>/include/executorch/runtime/core/portable_type/c10, -DC10_USING_CUSTOM_GENERATED_MACROS; "
        "call executorch::runtime::runtime_init() once before loading. `pte-lab sizes FILE --example-runner DIR` "
        "writes a runner built this way.",
    ]
    out = []
    for line in text:
        out += _wrap_comment(line)
    out[0] = "/* " + out[0][3:]
    out[-1] += " */"
    return out


def _wrap_comment(text: str, width: int = 108) -> list[str]:
    if not text:
        return [" *"]
    hanging = "   " if text[:2] in {f"{k}." for k in range(10)} else "  " if text.startswith("- ") else ""
    return [" * " + _comment(line)
            for line in textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False,
                                                         subsequent_indent=hanging)]


def target_guard(target: str) -> list[str]:
    """The target the header's pools are for, as a macro, and an #error where it is compiled for another word
    size (a host header dropped onto a 32-bit board, or a board's header onto this host)."""
    word = abi(target).size("EValuePointer")
    return [f"/* the pools below are {_comment(target)}'s ({_comment(abi(target).name)}): compile for it only */",
            f"#define PTE_LAB_TARGET \"{target}\"",
            f"#define PTE_LAB_TARGET_POINTER_BYTES {word}u",
            f"#if defined(__SIZEOF_POINTER__) && __SIZEOF_POINTER__ != {word}",
            f"#error \"these pools are {target}'s ({word}-byte pointers): this build's pointers differ; regenerate "
            f"with pte-lab sizes --target\"",
            "#endif"]


def _globals(sizes: "Sizes") -> list[str]:
    kinds = sorted({parse_device(d).kind for m in sizes.methods.values() for _, d, _ in m.planned} | {"cpu"},
                   key=lambda k: DEVICE_TYPES[k])
    codes = ", ".join(f"{DEVICE_TYPES[k]} = {k}" for k in kinds)
    lines = [*target_guard(sizes.target),
        f"/* every pool's base: the largest alignment any allocation asked (at least {_pool_alignment(sizes)}) */",
        f"#define PTE_LAB_POOL_ALIGNMENT {_pool_alignment(sizes)}u",
        "/* every planned buffer's base (exir plans each tensor at a multiple of it) */",
        f"#define PTE_LAB_PLANNED_BUFFER_ALIGNMENT {_planned_alignment(sizes)}u",
        f"/* device types (ExecuTorch's DeviceType): {codes} */",
    ]
    host = []
    file_loader = max((m.file_loader_alignment for m in sizes.methods.values()), default=0)
    if file_loader:
        host += ["/* FileDataLoader::from(path, alignment): the alignment the heap figures and the verification "
                  "used (its default,", " * alignof(std::max_align_t)); a larger one pads each buffer it reads. "
                  "The pools do not depend on it. */",
                  f"#define PTE_LAB_FILE_LOADER_ALIGNMENT {file_loader}u"]
    once = [m.heap_once for m in sizes.methods.values() if m.heap_once is not None]
    if once:
        host += ["/* heap the process allocates once, included in every method's HEAP figures: ExecuTorch's thread "
                  "pool and cpuinfo's", " * tables on a kernel's first parallel_for (measured in a fresh process), "
                  "or what the first method's first run", " * held beyond a repeat, the larger, rounded up to "
                  "256 B (malloc's usable sizes vary by a chunk with the heap's layout) */",
                  f"#define PTE_LAB_HEAP_ONCE_BYTES {max(once)}u"]
    return [_label(any_target_label(sizes.target)), *lines] + ([_label(_host_label()), *host] if host else [])


def block_comment(text: str) -> list[str]:
    """``text`` as one wrapped C comment."""
    out = _wrap_comment(text)
    out[0] = "/* " + out[0][3:]
    out[-1] += " */"
    return out


def _label(words: str) -> str:
    """The comment that opens a part of the header: what holds on any target, or on this host only."""
    return f"/* ==== {_comment(words)} ==== */"


def _pools(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    """The method's pools in both configurations, and what verified each."""
    lines = [
        f"#define PTE_LAB_{up}_METHOD_POOL_BYTES {m.method_allocator}u",
        f"#define PTE_LAB_{up}_TEMP_POOL_BYTES {m.temp_allocator}u",
    ] + ([f"/* NOT EXACT: {_comment(m.inexact)} */"] if m.inexact else [])
    if m.method_pool_alone is not None:
        lines.append(f"#define PTE_LAB_{up}_METHOD_POOL_ALONE_BYTES {m.method_pool_alone}u")
    else:
        lines.append(f"/* no temp allocator: not possible ({_comment(m.alone_error or 'unknown')}) */")
    lines.append(f"#define PTE_LAB_{up}_TEMP_PEAK_BYTES {m.temp_peak}u /* "
                 + ("the temp allocator's measured peak" if m.abi == "host" else
                    f"the most the temp pool holds at once on {m.abi}, modelled"
                    if not m.inexact else f"this host's ({HOST_ABI}) measured peak: {m.abi}'s is not known") + " */")
    for label, v in ((Configuration.METHOD_TEMP, (sizes.verified or {}).get(m.method)),
                     (Configuration.METHOD_ALONE, (sizes.verified_alone or {}).get(m.method))):
        if v is not None:
            lines.append(f"/* {label}: {_comment(verdict(v, m.delegate_scratch))} */")
    v = (sizes.verified or {}).get(m.method)
    if v is not None and v.smaller_temp is not None:
        lines.append(f"/* a temp pool one byte smaller: {_comment(temp_verdict(v))} */")
        lines.append(f"#define PTE_LAB_{up}_TEMP_SHORT_IS_SILENT {int(v.temp_short_is_silent)}")
    for label, macro, v in ((Configuration.METHOD_TEMP, "METHOD_TEMP", (sizes.verified or {}).get(m.method)),
                            (Configuration.METHOD_ALONE, "METHOD_ALONE", (sizes.verified_alone or {}).get(m.method))):
        runs = v.holds_on() if v is not None and v.bare_metal is not None else m.holds_on(label)
        bare = runs.get("bare-metal")
        if bare is not None:
            board = None if m.abi == "host" else m.abi
            why = ("runs there" if bare.runnable else
                   f"not runnable there: {not_runnable(bare, m.delegate_scratch, board)}")
            lines.append(f"#define PTE_LAB_{up}_{macro}_RUNS_ON_BARE_METAL {int(bare.runnable)} /* {label}, a "
                         f"bare-metal platform layer (et_pal_allocate fails): {_comment(why)} */")
    return lines


def _totals(sizes: "Sizes", m, up: str, low: str, heap: bool | None = None) -> list[str]:
    """What the method must have in RAM on a bare-metal target: one total (exact), and its parts; on a board
    without a heap (``heap`` False), the total the text and the JSON give for it: what the delegates ask of
    operator new as the static pool that serves it."""
    lines = []
    plain = m.totals()
    for kind, t in m.totals(heap=heap).items():
        if TARGET_KINDS[kind].host:
            continue
        lines += [*block_comment(total_line(t)),
                  f"#define PTE_LAB_{up}_TOTAL_BYTES_{_NOT_IDENT.sub('_', kind).upper()} {t.bytes}u"]
        if m.abi != "host":
            lines += _board_heap(plain[kind], m, up)
    return lines


def _board_heap(t: "Total", m, up: str) -> list[str]:
    """The board's own heap need (what the delegates take with operator new there) and where the temp pool
    holding an NPU's scratch must live: a header for another target than this host."""
    lines = []
    if m.delegate_scratch and any(t.place_of(i) is Place.NPU for i in range(len(t.parts))):
        lines += block_comment(f"the temp pool (<M>_TEMP_POOL_BYTES) holds the NPU's scratch ({m.delegate_scratch:,} "
                               f"B): place it in memory the NPU reaches (pte-lab sizes --target {m.abi} says which, "
                               f"by the memory mode), not in a TCM the NPU cannot read")
    what = ", ".join(f"{h.backend}'s {h.what} x{h.count} ({h.each} B each, {h.how} at load_method)"
                     for h in m.delegate_heap)
    lines += block_comment(
        f"the board's heap ({m.abi}, modelled from ExecuTorch's source, not this host's): what the delegates take "
        f"with operator new, " + (f"{what}: a heap or operator new of at least <M>_BOARD_HEAP_BYTES plus the "
                                  f"allocator's per-block overhead ({malloc_overhead_words(t.heap_blocks)}), or "
                                  f"operator new served from a static pool of <M>_OPERATOR_NEW_POOL_BYTES (8-byte "
                                  f"blocks); without either, load_method fails with MemoryAllocationFailed"
                                  if t.heap_need else "nothing: the board needs no heap for them"))
    lines.append(f"#define PTE_LAB_{up}_BOARD_HEAP_BYTES {t.heap_need}u")
    lines.append(f"#define PTE_LAB_{up}_OPERATOR_NEW_POOL_BYTES {operator_new_pool(t.heap_blocks)}u")
    return lines


def _host_total(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    """The method's total on this host (a Linux runner with a FileDataLoader: its heap is a host figure)."""
    t = m.totals()["host"]
    return [*block_comment(total_line(t)), f"#define PTE_LAB_{up}_TOTAL_BYTES_HOST {t.bytes}u"]


def _budget_lines(fit: "Fit", up: str) -> list[str]:
    """The budget (or regions) the board's total was checked against, and the outcome."""
    lines = block_comment(fits_lines({fit.total.method: fit})[0])
    if fit.budget is not None:
        lines.append(f"#define PTE_LAB_{up}_BUDGET_BYTES {fit.budget}u")
    for name, b in fit.regions:
        lines.append(f"#define PTE_LAB_{up}_REGION_{_NOT_IDENT.sub('_', name).upper().strip('_')}_BYTES {b}u")
    lines.append(f"#define PTE_LAB_{up}_FITS {int(fit.fits)}")
    return lines


def _planned_buffers(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    n = len(m.planned)
    lines = [f"#define PTE_LAB_{up}_NUM_PLANNED_BUFFERS {n}u"]
    for i, (_, dev, b) in enumerate(m.planned):
        d = parse_device(dev)
        code, index = d.device_type, d.device_index
        lines += [f"#define PTE_LAB_{up}_PLANNED_BUFFER_{i}_BYTES {b}u",
                  f"#define PTE_LAB_{up}_PLANNED_BUFFER_{i}_DEVICE_TYPE {code}",
                  f"#define PTE_LAB_{up}_PLANNED_BUFFER_{i}_DEVICE_INDEX {index}"]
    if n:  # the same, as arrays (C has no zero-length arrays)
        lines += [
            f"static const size_t pte_lab_{low}_planned_buffer_sizes[{n}] = "
            f"{{{', '.join(f'PTE_LAB_{up}_PLANNED_BUFFER_{i}_BYTES' for i in range(n))}}};",
            f"static const int pte_lab_{low}_planned_buffer_device_types[{n}] = "
            f"{{{', '.join(f'PTE_LAB_{up}_PLANNED_BUFFER_{i}_DEVICE_TYPE' for i in range(n))}}};",
            f"static const int pte_lab_{low}_planned_buffer_device_indices[{n}] = "
            f"{{{', '.join(f'PTE_LAB_{up}_PLANNED_BUFFER_{i}_DEVICE_INDEX' for i in range(n))}}};",
        ]
    return lines


def _strides(shape, dim_order) -> list[int]:
    """Strides of a tensor laid out in ``dim_order`` (the innermost dimension last)."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(dim_order):
        strides[d] = step
        step *= max(1, shape[d])
    return strides


def _io(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    """Every input and output: kind, dtype, shape at the planned upper bound, bytes, planned or not."""
    lines = []
    for what, ios in (("INPUT", m.inputs), ("OUTPUT", m.outputs)):
        lines.append(f"#define PTE_LAB_{up}_NUM_{what}S {len(ios)}u")
        for io in ios:
            p, q = f"PTE_LAB_{up}_{what}_{io.index}", f"pte_lab_{low}_{what.lower()}_{io.index}"
            lines.append(f"#define {p}_TAG {io.tag} /* {io.kind} */")
            if io.kind != ValueKind.TENSOR:
                if io.value is not None and what == "INPUT":
                    macro = {ValueKind.BOOL: "BOOL", ValueKind.DOUBLE: "DOUBLE"}.get(io.kind, "INT")
                    value = int(io.value) if macro == "BOOL" else repr(io.value) if macro == "DOUBLE" else io.value
                    lines.append(f"#define {p}_{macro}_VALUE {value} /* {INPUT_VALUES['other']} */")
                continue
            shape = "x".join(map(str, io.shape)) or "scalar"
            bound = ", an upper bound (dynamic)" if io.dynamic else ""
            lines += [
                f"#define {p}_SCALAR_TYPE {io.scalar_type} /* {io.dtype}; shape {shape}{bound} */",
                f"#define {p}_DIM {len(io.shape)}u",
                f"#define {p}_BYTES {io.nbytes}u",
                f"#define {p}_PLANNED {int(io.planned)} /* "
                + ("in a planned buffer */" if io.planned else "the caller provides its memory */"),
            ]
            if io.shape:
                n = len(io.shape)
                lines += [
                    f"static const int32_t {q}_sizes[{n}] = {{{', '.join(map(str, io.shape))}}};",
                    f"static const uint8_t {q}_dim_order[{n}] = {{{', '.join(map(str, io.dim_order))}}};",
                    f"static const int32_t {q}_strides[{n}] = "
                    f"{{{', '.join(map(str, _strides(io.shape, io.dim_order)))}}};",
                ]
    return lines


def _heap(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    if m.heap_peak is None:
        return ["/* heap outside the pools: not measured (the allocation counter could not be preloaded) */"]
    lines = [
        "/* heap outside the pools, measured by pte_lab's allocation counter (not ExecuTorch's allocators): the",
        " * most held at once from the data loader's creation through the executes, and what stays held until the",
        " * Method, Program and loader are freed; PTE_LAB_HEAP_ONCE_BYTES included. Each is the highest seen over",
        f" * {m.heap_runs} fresh runs (the lowest beside it): these figures can change with the CPU and the run. */",
    ]

    def macro(name: str, field: str) -> str:
        low = m.seen(field)[0]
        return f"#define PTE_LAB_{up}_{name} {getattr(m, field)}u /* lowest seen: {low} */"

    if m.file_heap_peak is not None:
        lines += [
            "/* FileDataLoader (alignment PTE_LAB_FILE_LOADER_ALIGNMENT), as the example runner: */",
            macro("HEAP_PEAK_BYTES", "file_heap_peak"),
            macro("HEAP_KEPT_BYTES", "file_heap_kept"),
        ]
    lines += [
        "/* the program mapped (MmapDataLoader): */",
        macro("HEAP_PEAK_MMAP_BYTES", "heap_peak"),
        macro("HEAP_KEPT_MMAP_BYTES", "heap_kept"),
    ]
    return lines


def _libraries(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    """The backends and operators the method needs, and the wheel's libraries that register them."""
    et = os.path.dirname(os.path.dirname(m.libraries[0].path)) if m.libraries else None
    lines = [f"#define PTE_LAB_{up}_BACKENDS {c_string(' '.join(m.backends))}",
             f"#define PTE_LAB_{up}_NUM_OPERATORS {len(m.operators)}u"]
    text = [f"operators (a source build selects these kernels): {', '.join(m.operators) or 'none'}."]
    if m.libraries:
        text.append(f"In the executorch {sizes.executorch_version} wheel ({et}), link inside -Wl,--no-as-needed:")
        for lib in m.libraries:
            provides = ", ".join(lib.provides) or "the runtime"
            extra = (f"; it links ExecuTorch's Python extension and libtorch, so link {libpython() or 'libpython'} "
                     "too, also inside --no-as-needed (else its Python symbols are undefined): not for a board, "
                     "where a source build compiles these kernels without Python"
                     if lib.needs_python else "")
            text.append(f"- {lib.relative(et)}: {provides}{extra}")
        text.append("Their own dependencies (libexecutorch_threadpool, ...) are found through their rpath. Link "
                    "line (this machine's folders): " + " ".join(link_flags(m.libraries)))
    out = []
    for t in text:
        out += _wrap_comment(t)
    out[0] = "/* " + out[0][3:]
    out[-1] += " */"
    return lines + out


def _stand_ins(sizes: "Sizes", m, up: str, low: str) -> list[str]:
    """What pte_lab's stand-ins replaced while measuring (nothing when the method ran as it is)."""
    return header_stand_in_lines(m, up)


#: the sections of one method, in order: each (sizes, method, MACRO_PART, ident_part) -> lines; those of
#: :data:`HOST_SECTIONS` hold on this host only, the others on any target
METHOD_SECTIONS = (_pools, _stand_ins, _planned_buffers, _io, _totals, _heap, _libraries, _host_total)
HOST_SECTIONS = (_heap, _libraries, _host_total)


def c_header(sizes: "Sizes", guard: str | None = None, *, budget: int | None = None,
             regions: tuple[tuple[str, int], ...] = (), heap: bool | None = None,
             npu_regions: tuple[str, ...] = ()) -> str:
    """A C/C++ header with each method's pools, planned buffers, inputs and outputs, heap and libraries:
    per method what holds on any target first, then what holds on this host only, each labelled; with a
    ``budget`` (bytes) or ``regions`` ((name, bytes)), the board's total checked against them.

    Every size is a macro (a constant expression: static arrays can be declared with it); arrays repeat
    them for loops. C99 and C++.
    """
    guard = guard or f"PTE_LAB_{_stem(sizes)}_POOLS_H"
    idents = c_identifiers(sizes.methods)
    fits = (sizes.fits(budget, regions, heap=heap, npu_regions=npu_regions)
            if budget is not None or regions or heap is False else {})
    heap = board_has_heap(heap, tuple(regions))  # the board's total, as its fit has it
    lines = [*_preamble(sizes), f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>",
             "#include <stdint.h>", "", *_globals(sizes)]
    for name, m in sizes.methods.items():
        up, low = idents[name].upper(), idents[name]
        lines += ["", f"/* ---- method \"{_comment(name)}\" ---- */", _label(any_target_label(m.abi))]
        for section in METHOD_SECTIONS:
            if section is _host_total and m.abi != "host":  # another ABI's pools: no host total
                continue
            if section is HOST_SECTIONS[0]:
                lines += (_budget_lines(fits[name], up) if name in fits else []) + [_label(_host_label())]
            lines += _totals(sizes, m, up, low, heap) if section is _totals else section(sizes, m, up, low)
    for name, why in sizes.skipped.items():
        if name in sizes.declared:
            ident = c_identifiers(list(sizes.methods) + [name])[name]
            lines += [""] + header_declared_lines(sizes.declared[name], ident.upper(), ident)
        else:
            lines += ["", f"/* method \"{_comment(name)}\" not sized: {_comment(why)} */"]
    lines += ["", f"#endif /* {guard} */", ""]
    text = "\n".join(lines)
    if sizes.target != "host":  # this host's heap figures beside the board's: named as this host's
        text = _HOST_HEAP_MACRO.sub(r"\1_HOST", text).replace("the HEAP_* figures", "the HEAP_*_HOST figures")
    return text


#: this host's heap macros (and their names in the preamble), which a header for another target names _HOST
_HOST_HEAP_MACRO = re.compile(r"(?<!\w)((?:PTE_LAB|<M>)\w*_HEAP_(?:PEAK|KEPT|ONCE)(?:_MMAP)?_BYTES)\b")
