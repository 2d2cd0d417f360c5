"""Pools for another target than this host (``pte-lab sizes FILE --target cortex-m``): the method pool
replayed from the program's tables with the target's ABI (:mod:`pte_lab.model.method_pool`), trusted only
where the same replay with this host's ABI gives the sizing runner's measurement exactly.

The planned arenas are the file's, the same on every target. The temp pool holds kernel resolution's
TensorMeta lists (ABI-dependent, modelled) and what kernels and delegates take at run time (the delegates'
scratch, a kernel's ``allocate_temp``: bytes that do not depend on the ABI). The sizing runner measures the
temp allocator from the first execute on apart from kernel resolution; where no run-time allocation needed
padding on this host, its peak is the requests' own bytes and holds on the target too, and the temp pool is
exact. Else (a method that did not run, or padding that depends on where earlier requests ended) the temp pool
is given as a range: at least what the target's resolution and the delegates' scratch need, at most this
host's pool.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

from ...model.method_pool import method_pool
from ...units import human_bytes
from .sizes import HOW_MODELLED, kept_line

__all__ = ["TargetPools", "target_pools", "target_pools_text", "target_pools_dict", "on_target", "HOW_MODELLED"]


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
    #: what sets the temp pool, in words (a threshold of kernel resolution, a delegate's scratch, run time's use)
    temp_set_by: str | None = None
    #: the most the temp pool holds at once there (kernel resolution's peak or run time's), where it is exact
    temp_held: int | None = None

    @property
    def temp_exact(self) -> bool:
        return self.temp_pool is not None and self.temp_low == self.temp_pool


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
                       **common)


def _temp_set_by(there, scratch: int, run_time: int, low: int) -> str:
    """What makes the temp pool's (lower) figure, in words: one home for pools.h, the text and the JSON."""
    if low == scratch and scratch:
        return f"the delegates' scratch ({scratch:,} B), which they take from it at run time"
    if low == run_time and run_time > there.resolution_minimum:
        return f"what the kernels take from it at run time (allocate_temp: {run_time:,} B at once)"
    if low == there.resolution_minimum:
        per = there.resolution_minimum // max(there.widest_call_args, 1)
        return (f"a threshold, not bytes held at once: Method::init resolves kernels in the temp pool only where "
                f"the widest kernel call's {there.widest_call_args} arguments' metadata fits ({per} B each on "
                f"{there.abi}), else in the method pool, which then overflows (MemoryAllocationFailed at load_method); "
                f"resolution itself holds at most {there.resolution_temp:,} B, and this method's kernels take "
                f"{run_time:,} B at run time")
    return f"kernel resolution's peak ({there.resolution_temp:,} B: each call's argument metadata)"


def _pair(p) -> str:
    return f"{p[0]:,} B" + (f" (alone: {p[1]:,} B)" if p[1] is not None else "")


def on_target(sizes, pte, target: str):
    """``sizes`` (this host's) with every method's pools replaced by ``target``'s (:func:`target_pools`), so that
    its totals, fits, JSON document and header are the board's; a method whose ``target`` pools are not trusted
    keeps this host's (x86-64 LP64) pools and its total says it is not exact, and so does one whose temp pool is
    a range (the total takes its upper end). The verification (of this host's pools) is not carried over."""
    out = {}
    for name, p in target_pools(sizes, pte, target).items():
        m = sizes.methods[name]
        if p.why is not None:
            out[name] = replace(m, abi=target, inexact=f"the {target} pools are not known ({p.why}); this host's "
                                                       f"(x86-64 LP64) pools stand in for them")
            continue
        out[name] = replace(
            m, abi=target, method_allocator=p.method_pool, temp_allocator=p.temp_pool,
            method_pool_alone=p.method_pool_alone, temp_peak=p.temp_held if p.temp_held is not None else m.temp_peak,
            inexact=None if p.temp_exact else (f"the temp pool on {target} is {p.temp_low:,} to {p.temp_pool:,} B "
                                               f"(run time's use could not be had exactly): the total takes the upper end"))
    return replace(sizes, methods=out, verified=None, verified_alone=None)


def target_pools(sizes, pte, target: str) -> dict[str, TargetPools]:
    """Every sized method's pools on ``target``, from ``sizes`` (this host's sizing of ``pte``)."""
    external = sizes.data_path is not None
    return {name: _one(m, pte, target, external) for name, m in sizes.methods.items()}


def _temp_words(p: TargetPools) -> str:
    if p.temp_exact:
        return f"{p.temp_pool:,} B"
    return (f"{p.temp_low:,} to {p.temp_pool:,} B (what the kernels take at run time could not be had exactly on "
            f"this host: the method did not run, or its run-time allocations were padded to their alignment: at "
            f"least the {p.target} resolution's and the delegates' scratch, at most this host's pool)")


def target_pools_text(sizes, pte, target: str) -> str:
    """The pools each method needs on ``target``, every figure labelled with its target."""
    pools = target_pools(sizes, pte, target)
    abi = next((p.abi for p in pools.values()), target)
    out = [f"{os.path.basename(sizes.path)}: pools on {target} ({abi}), executorch {sizes.executorch_version}: "
           + HOW_MODELLED.format(target=target),
           f"Not verified on a {target} here (--verify checks this host's pools): the runner "
           f"--example-runner DIR --target {target} writes prints each pool's use on the board, and fails with "
           f"0x21 where one is short.", *kept_line(sizes)]
    for p in pools.values():
        out += ["", f"method {p.method!r}"]
        for mem_id, device, b in p.planned:
            out.append(f"  planned arena {mem_id} ({device}): {b:,} B ({human_bytes(b)}), any target (the file's)")
        if p.why is not None:
            out.append(f"  pools on {target}: not given: {p.why}")
            continue
        out.append(f"  method pool, method + temp, on {target}: {p.method_pool:,} B "
                   f"(this host: {p.host_measured[0]:,} B measured, {p.host_model[0]:,} B modelled)")
        out.append(f"  temp pool, method + temp, on {target}: {_temp_words(p)}; set by {p.temp_set_by}")
        m = sizes.methods[p.method]
        if m.stand_ins:
            out.append(f"  this host's run used stand-ins for {', '.join(m.stand_ins)} (pte_lab's, taking from "
                       f"ExecuTorch's allocators what the real ones take): the pools checked against it are theirs")
        if p.method_pool_alone is not None:
            bare = m.holds_on("method alone").get("bare-metal")
            there = ("whether it runs there was not measured" if bare is None else
                     "runs there: run on this host under a platform layer whose et_pal_allocate fails, nothing was "
                     "refused" if bare.runnable else
                     f"not runnable on a heap-less {target}: run on this host under a platform layer whose "
                     f"et_pal_allocate fails, {bare.platform_refused or bare.temp_failures} request(s) were refused"
                     + (f" (the delegates' {m.delegate_scratch:,} B of scratch would come from there)"
                        if m.delegate_scratch else ""))
            out.append(f"  method pool, method alone (no temp allocator), on {target}: {p.method_pool_alone:,} B "
                       f"(this host: {p.host_measured[1]:,} B measured, {p.host_model[1]:,} B modelled); temp "
                       f"memory then comes from et_pal_allocate, which returns nullptr on a bare-metal platform "
                       f"layer: {there}")
        else:
            out.append("  method pool, method alone: not possible (it was not possible on this host)")
    return "\n".join(out)


def target_pools_dict(sizes, pte, target: str) -> dict:
    """The same as a JSON-ready document."""
    return {"target": target, "path": sizes.path, "executorch": sizes.executorch_version,
            "methods": {n: {**asdict(p), "temp_exact": p.temp_exact}
                        for n, p in target_pools(sizes, pte, target).items()}}
