"""Views of another target's pools (``pte-lab sizes FILE --target cortex-m``): per method one block, "set these",
each pool with its bytes, its basis and where it must live, then one total against the budget; this host's figures
apart, under "this host". The records and their computation are :mod:`pte_lab.runtime.sizing.target`'s: these
functions only render them (text, HTML, the JSON document's ``set_these``)."""

from __future__ import annotations

import os
from dataclasses import asdict
from html import escape

from ...model.ethos_u import MEMORY_MODES
from ...runtime.sizing.records import HOST_ABI, Basis
from ...runtime.sizing.target import (
    Lives,
    PoolKind,
    SetThese,
    TargetPool,
    TargetPools,
    TempSetBy,
    on_target,
    set_these,
    target_pools,
)
from ...units import capacity_bytes, human_bytes
from ...vocabulary import Configuration
from ..base import html_repr, text_table
from .declared import stand_in_line
from .sizes import (
    HOW_MODELLED,
    heap_need_words,
    kept_line,
    new_pool_words,
    no_heap_words,
    not_runnable,
    verified_line,
)

__all__ = ["TargetPools", "target_pools", "on_target", "set_these", "target_pools_text", "target_pools_dict",
           "set_these_text", "set_these_html", "set_these_dict", "temp_set_by_words", "BASIS_WORDS", "HOW_MODELLED"]

#: what each basis means, as every view says it (the legend under a block)
BASIS_WORDS = {
    Basis.FILE: "read from the program's bytes (its tables, the delegates' blobs): the same on every target",
    Basis.MEASURED_ON_TARGET: "measured on the board itself",
    Basis.MODELLED: "computed for the target from the program's tables with its type layouts (read from the "
                    "executorch headers compiled for it) and from ExecuTorch's source; the same computation for this "
                    "host gives this host's measured pools exactly",
    Basis.MEASURED_HERE: "measured on this host and taken to hold there (bytes the requests ask, not an ABI's)",
}


def temp_set_by_words(p: TargetPools) -> str:
    """What makes the temp pool's (lower) figure, in words (the text and pools.h say it so)."""
    if p.temp_set_by is TempSetBy.SCRATCH:
        return f"the delegates' scratch ({p.scratch:,} B), which they take from it at run time"
    if p.temp_set_by is TempSetBy.RUN_TIME:
        return f"what the kernels take from it at run time (allocate_temp: {p.run_time:,} B at once)"
    if p.temp_set_by is TempSetBy.RESOLUTION_THRESHOLD:
        per = p.resolution_minimum // max(p.widest_call_args, 1)
        return (f"a threshold, not bytes held at once: Method::init resolves kernels in the temp pool only where "
                f"the widest kernel call's {p.widest_call_args} arguments' metadata fits ({per} B each on "
                f"{p.abi}), else in the method pool, which then overflows (MemoryAllocationFailed at load_method); "
                f"resolution itself holds at most {p.resolution_temp:,} B, and this method's kernels take "
                f"{p.run_time:,} B at run time")
    if p.temp_set_by is TempSetBy.RESOLUTION_PEAK:
        return f"kernel resolution's peak ({p.resolution_temp:,} B: each call's argument metadata)"
    return f"see pte-lab sizes --target {p.target}"


def _name(r: TargetPool) -> str:
    if r.kind is PoolKind.PLANNED:
        return f"planned buffer {r.mem_id}" + ("" if r.device == "cpu" else f" ({r.device})")
    return str(r.kind)


def _lives(r: TargetPool) -> str:
    """Where a pool must live, in a phrase: the memory mode's place where the NPU reaches it."""
    family = _family(r.memory_mode)
    mode = MEMORY_MODES.get(family) if family is not None else None
    if r.lives is Lives.NPU and mode is not None:
        return f"memory the NPU reaches: {mode.scratch} ({r.memory_mode})"
    if r.lives is Lives.FLASH:
        return f"flash (read in place): {mode.program} ({r.memory_mode})" if mode is not None else \
            "flash (read in place)"
    if r.lives is Lives.NPU_DEDICATED and mode is not None:
        return f"{mode.fast_scratch}, {mode.fast_scratch_from} ({r.memory_mode})"
    if r.lives is Lives.HEAP:
        return "the heap"
    if r.lives is Lives.DEVICE:
        return f"{r.device}'s memory (not in the RAM total)"
    return "RAM"


def _family(mode: str | None) -> str | None:
    return None if mode is None else next((k for k in MEMORY_MODES if mode.startswith(k)), None)


def _note(r: TargetPool, p: TargetPools) -> str | None:
    """What a row holds or why, in a sentence (None: nothing to add)."""
    if r.kind is PoolKind.TEMP:
        held = f"it holds the NPU's scratch ({r.scratch:,} B, the blob's); " if r.scratch else ""
        rng = (f"somewhere in {r.low:,} to {r.bytes:,} B: what the kernels take at run time could not be had exactly "
               f"on this host (the method did not run, or its run-time allocations were padded), so the total takes "
               f"the upper end; " if r.low is not None else "")
        return f"{held}{rng}set by {temp_set_by_words(p)}" if p.temp_set_by is not None else (held.rstrip("; ") or None)
    if r.kind is PoolKind.NEW_POOL and r.heap is not None:
        h = r.heap
        return (f"{new_pool_words(r.bytes or 0, r.new_blocks)}; it holds {h.backend}'s {h.what}, {h.count} x {h.each} B "
                f"({h.how} at load_method, one per delegate), as read in {h.source}")
    if r.kind is PoolKind.HEAP and r.heap is not None:
        h = r.heap
        return (f"{h.backend}'s {h.what}, {h.count} x {h.each} B ({h.how} at load_method, one per delegate), as "
                f"read in {h.source}")
    if r.kind is PoolKind.HEAP:
        return (f"{', '.join(r.backends)} allocate their own memory with malloc (this host's figure, the program "
                f"mapped): a board needs a heap of that much")
    if r.kind is PoolKind.PROGRAM_IN_RAM:
        return "the program's bytes, in RAM: the NPU writes its scratch inside them"
    if r.kind is PoolKind.PROGRAM:
        return "the .pte itself, read in place by a BufferDataLoader: not in the RAM total"
    if r.kind is PoolKind.FAST_SCRATCH:
        return ("the most Vela may use (its memory mode's name); the firmware provides it (ethosu_fast_scratch): "
                "not in the RAM total" if r.bytes is not None else
                "its size is not in the file (Vela prints it): not in the RAM total")
    return None


def _budget_words(b: SetThese) -> str:
    if b.no_heap:
        return ("" if b.budget is None else f"against a budget of {capacity_bytes(b.budget)}: ") + \
            "DOES NOT FIT on a board without a heap (below)"
    if b.regions and b.budget is None:
        return (f"placed in the regions {', '.join(f'{n} {capacity_bytes(size)}' for n, size in b.regions)}: "
                f"the last line says where each pool goes and whether it fits")
    if b.budget is None or b.left is None:
        return "no budget given (--budget 256KiB checks it)"
    if b.fits:
        return (f"against a budget of {capacity_bytes(b.budget)}: fits, {capacity_bytes(b.left)} left"
                + (", with a heap (below)" if b.heap_need else ""))
    return f"against a budget of {capacity_bytes(b.budget)}: DOES NOT FIT, over by {capacity_bytes(-b.left)}"


def _heap_verdict(b: SetThese) -> str | None:
    """The block's line on the heap: the board has none (does not fit, and the fix), or what it must give."""
    if not b.heap_need:
        return None
    if b.no_heap:
        return f"  {no_heap_words(b.heap_need)}"
    said = ("" if b.heap is not None else " (--no-heap says the board has none: then it does not fit)" if b.malloc_need
            else f" (--no-heap says the board has none: operator new is then served from a static pool of "
                 f"{b.new_pool_bytes:,} B, counted in the total)")
    return f"  the board {heap_need_words(b.heap_need, b.heap_blocks)}{said}"


def set_these_text(sizes, board, blocks: dict[str, SetThese], pte, *, verify: bool = False) -> str:
    """One block per method on the target, "set these"; the basis legend; what was verified and where; then this
    host's figures apart."""
    first = next(iter(blocks.values()), None)
    target = first.target if first else board.target
    head = (f"{os.path.basename(sizes.path)} on {target} ({first.abi if first else target}, {first.kind if first else ''}"
            f"), executorch {sizes.executorch_version}")
    out = [head, *kept_line(sizes)]
    pools = target_pools(sizes, pte, target)
    used: set[Basis] = set()
    for b in blocks.values():
        p = pools[b.method]
        out += ["", f"method {b.method!r}: set these ({b.configuration}; the program read by a {b.loader})"]
        if b.why is not None:
            out.append(f"  the {target} pools are not known ({b.why}): this host's ({HOST_ABI}) pools stand in for "
                       f"them, basis measured-here")
        rows, notes = [], []
        for r in b.pools:
            if not r.in_total:
                continue
            rows.append([_name(r), f"{r.bytes:,}", str(r.basis), _lives(r)])
            used.add(r.basis)
            note = _note(r, p)
            if note:
                notes.append(f"  {_name(r)}: {note}")
        rows.append(["total", f"{b.total:,}", str(b.basis), _budget_words(b)])
        table = text_table(["pool", "bytes", "basis", "lives in"], rows)
        out += ["  " + line for line in table.split("\n")]
        heap = _heap_verdict(b)
        if heap:
            out.append(heap)
        out += notes
        for r in b.pools:
            if not r.in_total:
                size = "size not in the file" if r.bytes is None else f"{r.bytes:,} B ({human_bytes(r.bytes)})"
                out.append(f"  beside the total: {_name(r)}, {size}, {r.basis}, {_lives(r)}; {_note(r, p)}")
                used.add(r.basis)
        if not b.runnable:
            out.append(f"  NOT RUNNABLE on a bare-metal {target}: no pool configuration ran there")
        m = sizes.methods[b.method]
        if p.method_pool_alone is not None and b.configuration == Configuration.METHOD_TEMP:
            bare = m.holds_on(Configuration.METHOD_ALONE).get("bare-metal")
            there = ("" if bare is None else "; it runs on a heap-less board" if bare.runnable else
                     f"; not on a heap-less {target}: {not_runnable(bare, m.delegate_scratch, target)}")
            out.append(f"  (or: a method pool alone of {p.method_pool_alone:,} B and no temp allocator: temp memory then "
                       f"comes from et_pal_allocate{there})")
    out += ["", "basis: " + "; ".join(f"{k} = {BASIS_WORDS[k]}" for k in Basis if k in used)]
    out += ["", *_verified_lines(sizes, target, verify)]
    out += ["", f"this host ({HOST_ABI}, measured here; not the board's figures):"]
    for b in blocks.values():
        p, m = pools[b.method], sizes.methods[b.method]
        measured, modelled = p.host_measured, p.host_model
        out.append(f"  method {b.method!r}: method pool {measured[0]:,} B measured ({modelled[0]:,} B by the same "
                   f"model), temp pool {m.temp_allocator:,} B"
                   + (f", method pool alone {measured[1]:,} B" if measured[1] is not None else ""))
        said = next((r.heap.source for blk in blocks.values() for r in blk.pools if r.heap is not None), None)
        line = stand_in_line(m, said)
        if line:
            out.append(f"  {line}")
        if m.heap_peak is not None:
            out.append(f"  heap outside the pools here: {m.heap_peak:,} B at the peak with the program mapped "
                       f"(`pte-lab sizes FILE` without --target gives this host's figures)")
    return "\n".join(out)


def _verified_lines(sizes, target: str, verify: bool) -> list[str]:
    """What was verified, where, and what was not."""
    if not verify or not sizes.verified:
        return [f"verified: nothing. --verify runs each method on this host again in pools of exactly this host's "
                f"sizes (and one byte less); the {target} pools above only a runner on the board checks (pte-lab "
                f"sizes FILE --target {target} --example-runner DIR writes one; it fails with 0x21 where a pool is "
                f"short)."]
    out = [verified_line(sizes, name) for name in sizes.verified]
    out.append(f"not verified: the {target} pools above (basis modelled or file: no {target} ran them). A runner on "
               f"the board checks them: pte-lab sizes FILE --target {target} --example-runner DIR writes one, which "
               f"prints each pool's use there and fails with 0x21 where one is short.")
    return out


def set_these_dict(blocks: dict[str, SetThese]) -> dict:
    """The blocks as the JSON document's ``set_these``: per method each pool (kind, bytes, basis, lives, in_total),
    the total, its basis, the budget and what is left: the same words as the text."""
    def pool(r: TargetPool) -> dict:
        return {"pool": _name(r), "kind": r.kind, "bytes": r.bytes, "basis": r.basis, "lives": r.lives,
                "lives_in": _lives(r), "in_total": r.in_total, "memory_mode": r.memory_mode,
                **({"scratch": r.scratch, "set_by": r.set_by, "low": r.low} if r.kind is PoolKind.TEMP else {}),
                **({"backend": r.heap.backend, "what": r.heap.what, "count": r.heap.count, "each": r.heap.each,
                    "source": r.heap.source} if r.heap is not None else {})}

    return {n: {"target": b.target, "abi": b.abi, "kind": b.kind, "loader": b.loader, "configuration": b.configuration,
                "pools": [pool(r) for r in b.pools], "total": b.total, "basis": b.basis, "budget": b.budget,
                "left": b.left, "fits": b.fits, "runnable": b.runnable, "why": b.why, "heap": b.heap,
                "heap_need": b.heap_need, "heap_blocks": list(b.heap_blocks), "no_heap": b.no_heap,
                "new_pool": None if b.new_pool is None else b.new_pool.bytes}
            for n, b in blocks.items()}


def set_these_html(blocks: dict[str, SetThese], text: str) -> str:
    """The blocks as HTML tables (the same rows and basis words as the text)."""
    parts = []
    for b in blocks.values():
        rows = "".join(f"<tr><td>{escape(_name(r))}</td><td>{'' if r.bytes is None else f'{r.bytes:,}'}</td>"
                       f"<td>{escape(str(r.basis))}</td><td>{escape(_lives(r))}</td>"
                       f"<td>{'' if r.in_total else 'beside the total'}</td></tr>" for r in b.pools)
        rows += (f"<tr><td><b>total</b></td><td><b>{b.total:,}</b></td><td>{escape(str(b.basis))}</td>"
                 f"<td>{escape(_budget_words(b))}</td><td></td></tr>")
        parts.append(f"<div><b>Set these</b>: method {escape(b.method)!s} on {escape(b.target)} ({escape(b.abi)}), "
                     f"{escape(b.configuration)}</div><table><tr><th>pool</th><th>bytes</th><th>basis</th>"
                     f"<th>lives in</th><th></th></tr>{rows}</table>")
    return html_repr("".join(parts), text)


def target_pools_text(sizes, pte, target: str, *, budget: int | None = None, verify: bool = False) -> str:
    """The pools each method needs on ``target`` ("set these"), then this host's figures apart."""
    board = on_target(sizes, pte, target)
    return set_these_text(sizes, board, set_these(sizes, board, pte, target, budget), pte, verify=verify)


def target_pools_dict(sizes, pte, target: str) -> dict:
    """The modelled pools per method as a JSON-ready document (the ``target_pools`` key of ``sizes --json``)."""
    return {"target": target, "path": sizes.path, "executorch": sizes.executorch_version,
            "methods": {n: {**asdict(p), "temp_exact": p.temp_exact, "temp_basis": p.temp_basis}
                        for n, p in target_pools(sizes, pte, target).items()}}
