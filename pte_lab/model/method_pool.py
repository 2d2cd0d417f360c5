"""The method pool a target needs, from the program's tables: what ExecuTorch's ``Method::init`` takes from
the method allocator, replayed allocation by allocation with the sizes and alignments of the target's ABI.

``Method::init`` (runtime/executor/method.cpp and tensor_parser, ExecuTorch 1.5) takes from the method
allocator, in this order: without a temp allocator a PlatformMemoryAllocator; the values array (one EValue
each); one bool per input; one NamedData per external constant; per value: an IntList's boxed and unboxed
arrays and its BoxedEvalueList, a Bool/Double list's or String's ArrayRef, a tensor's sizes and dim order
(only when its shape is dynamic), strides and TensorImpl, a tensor list's tensors, pointers and
BoxedEvalueList (an optional-tensor list: pointers first); the delegates array; a MergedDataMap where a .ptd
and the program's own named data are both present; per delegate its compile specs and what its backend's init
takes; the chains array; per chain its kernels and argument-list arrays, and per kernel or delegate call its
argument pointers, then (without a temp allocator, which is where kernel resolution would go) a TensorMeta
per argument and a dim order per tensor argument. The allocator is a bump allocator: each allocation is
placed at the next multiple of its alignment.

The ABI of each target (:mod:`pte_lab.model.abi`, ``pte_lab/data/abi.json``) was read from the executorch
wheel's headers compiled for it (:mod:`pte_lab.runtime.abi_probe`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from collections.abc import Mapping

from ..format import TensorDataLocation, TensorShapeDynamism
from ..format.method_tables import method_tables
from ..units import align_up
from ..vocabulary import InstructionKind, ValueKind
from .backends import BACKENDS, ETHOS_U
from .abi import TARGETS, Abi, UnknownTargetError, abi, abis


__all__ = ["Abi", "abis", "TARGETS", "MethodPool", "PoolPart", "method_pool", "UnknownTargetError",
           "BACKEND_INIT", "BACKEND_HEAP", "BACKEND_SOURCES_READ"]

#: what a backend's init() takes from the method allocator, per target: backend id -> target ->
#: ((what, bytes, alignment), ...); a target missing: not known there (the pool is not modelled). Each backend's
#: is its registration's (:attr:`pte_lab.model.backends.Backend.init`, with the source it was read from)
BACKEND_INIT: Mapping[str, Mapping[str, tuple[tuple[str, int, int], ...]]] = MappingProxyType(
    {b.id: b.init for b in BACKENDS.values() if b.init})
#: what a backend's init() allocates itself on the heap, outside ExecuTorch's allocators, one per delegate:
#: backend id -> (the type, how, its size in pointer-sized words) (:attr:`pte_lab.model.backends.Backend.heap`)
BACKEND_HEAP: Mapping[str, tuple[str, str, int]] = MappingProxyType(
    {b.id: b.heap for b in BACKENDS.values() if b.heap is not None})
#: the ExecuTorch source BACKEND_INIT and BACKEND_HEAP (and the stand-ins, pte_lab.runtime.stand_ins) follow for
#: EthosUBackend (:attr:`pte_lab.model.backends.Backend.sources_read`)
BACKEND_SOURCES_READ: str = ETHOS_U.sources_read or ""


@dataclass(frozen=True)
class PoolPart:
    """One kind of allocation of the method pool: how many, their bytes, and the padding placed before them."""

    what: str
    count: int
    bytes: int
    padding: int


@dataclass(frozen=True)
class MethodPool:
    """The method pool of one method on one target, in both configurations (bytes; None: not modelled)."""

    method: str
    target: str
    abi: str
    #: with a temp allocator ("method + temp": kernel resolution takes the temp pool)
    bytes: int | None
    #: without one ("method alone": a PlatformMemoryAllocator and kernel resolution in the method pool)
    alone: int | None
    #: the allocations of the "method + temp" configuration, by kind, in order of first allocation
    parts: tuple[PoolPart, ...] = ()
    #: why the pool is not modelled for this target (a backend whose init is not known there)
    unknown: str | None = None
    #: the temp allocator's peak while Method::init resolves kernels there (a TensorMeta per argument and a
    #: dim order per tensor argument, the allocator reset after each kernel call)
    resolution_temp: int = 0
    #: the least temp pool Method::init resolves kernels in (below it, it resolves them in the method pool):
    #: the largest kernel call's arguments times (sizeof(TensorMeta) + kTensorDimensionLimit dim-order bytes)
    resolution_minimum: int = 0
    #: the arguments of the widest kernel call (``resolution_minimum`` is that many arguments' metadata)
    widest_call_args: int = 0


class _Bump:
    """ExecuTorch's MemoryAllocator, replayed: a cursor, each allocation placed at its alignment."""

    def __init__(self, abi: Abi):
        self.abi, self.cur = abi, 0
        self.parts: dict[str, list[int]] = {}

    def raw(self, what: str, size: int, align: int) -> None:
        start = align_up(self.cur, align)
        p = self.parts.setdefault(what, [0, 0, 0])
        p[0] += 1
        p[1] += size
        p[2] += start - self.cur
        self.cur = start + size

    def list(self, t: str, n: int, what: str | None = None) -> None:
        self.raw(what or t, n * self.abi.size(t), self.abi.align(t))

    def one(self, t: str, what: str | None = None) -> None:
        self.list(t, 1, what)


def _replay(method, tables, a: Abi, *, temp: bool, external_data: bool, named_data: bool) -> _Bump:
    plan = method.raw
    pool = _Bump(a)
    if not temp:
        pool.one("PlatformMemoryAllocator")
    values = plan.values
    pool.list("EValue", len(values), "values")
    if plan.inputs:
        pool.list("Bool", len(plan.inputs), "input flags")
    external = sum(1 for v in values if v.kind == ValueKind.TENSOR and v.tensor.mem_id is None
                   and v.tensor.location == TensorDataLocation.EXTERNAL)
    if external:
        pool.list("NamedData", external, "external constants")
    for i, v in enumerate(values):
        k = v.kind
        if k == "Tensor":
            t = v.tensor
            dim = len(t.sizes)
            if t.shape_dynamism != TensorShapeDynamism.STATIC:
                pool.list("SizesType", dim, "tensor sizes")
                pool.list("DimOrderType", dim, "tensor dim orders")
            pool.list("StridesType", dim, "tensor strides")
            pool.one("TensorImpl")
        elif k == "IntList":
            n = tables.list_lengths[i]
            pool.list("EValuePointer", n, "list pointers")
            pool.list("Int64", n, "int lists")
            pool.one("BoxedIntList", "boxed lists")
        elif k == "TensorList":
            pool.list("Tensor", len(v.items), "tensor lists")
            pool.list("EValuePointer", len(v.items), "list pointers")
            pool.one("BoxedTensorList", "boxed lists")
        elif k == "OptionalTensorList":
            pool.list("EValuePointer", len(v.items), "list pointers")
            pool.list("OptionalTensor", len(v.items), "tensor lists")
            pool.one("BoxedOptionalTensorList", "boxed lists")
        elif k == "BoolList":
            pool.one("BoolArrayRef", "array refs")
        elif k == "DoubleList":
            pool.one("DoubleArrayRef", "array refs")
        elif k == "String":
            pool.one("CharArrayRef", "array refs")
    pool.list("BackendDelegate", len(plan.delegates), "delegates")
    if external_data and named_data:
        pool.one("MergedDataMap")
    for d in plan.delegates:
        pool.list("CompileSpec", len(d.compile_specs), "compile specs")
        for what, size, align in BACKEND_INIT[d.id][a.target]:
            pool.raw(f"{d.id} init ({what})", size, align)
    pool.list("Chain", len(tables.chain_lengths), "chains")
    instructions = iter(plan.instructions)
    for n in tables.chain_lengths:
        pool.list("OpFunction", n, "kernels")
        pool.list("InstructionArgs", n, "argument lists")
        for _ in range(n):
            ins = next(instructions)
            if ins.kind not in (InstructionKind.KERNEL_CALL, InstructionKind.DELEGATE_CALL):
                continue
            pool.list("EValuePointer", len(ins.args), "argument pointers")
            if ins.kind == InstructionKind.KERNEL_CALL and not temp:
                pool.list("TensorMeta", len(ins.args), "kernel resolution")
                for x in ins.args:
                    if values[x].kind == ValueKind.TENSOR:
                        pool.list("DimOrderType", len(values[x].tensor.sizes), "kernel resolution")
    return pool


#: ExecuTorch's kTensorDimensionLimit (runtime/core/portable_type/tensor_impl.h)
TENSOR_DIMENSION_LIMIT = 16


def _resolution(method, a: Abi) -> tuple[int, int, int]:
    """(the temp allocator's peak over kernel resolution, the least temp pool resolution goes to, the widest
    kernel call's arguments)."""
    values = method.raw.values
    peak = widest = 0
    for ins in method.raw.instructions:
        if ins.kind != InstructionKind.KERNEL_CALL:
            continue
        pool = _Bump(a)
        pool.list("TensorMeta", len(ins.args))
        for x in ins.args:
            if values[x].kind == ValueKind.TENSOR:
                pool.list("DimOrderType", len(values[x].tensor.sizes))
        peak, widest = max(peak, pool.cur), max(widest, len(ins.args))
    return peak, widest * (a.size("TensorMeta") + TENSOR_DIMENSION_LIMIT * a.size("DimOrderType")), widest


def method_pool(pte, name: str, target: str = "host", *, external_data: bool = False) -> MethodPool:
    """The method pool ``pte``'s method ``name`` needs on ``target`` (see the module's doc);
    ``external_data``: the method is loaded with a .ptd file (its named data map)."""
    a = abi(target)
    method = pte.methods[name]
    missing = sorted({d.id for d in method.raw.delegates if target not in BACKEND_INIT.get(d.id, {})})
    if missing:
        return MethodPool(name, target, a.name, None, None,
                          unknown=f"what {', '.join(missing)}'s init takes from the method allocator on {target} "
                                  f"is not known to pte_lab")
    tables = method_tables(pte.raw, method.index)
    kw = dict(external_data=external_data, named_data=bool(pte.raw.named_data))
    with_temp = _replay(method, tables, a, temp=True, **kw)
    alone = _replay(method, tables, a, temp=False, **kw)
    parts = tuple(PoolPart(w, *p) for w, p in with_temp.parts.items())
    return MethodPool(name, target, a.name, with_temp.cur, alone.cur, parts, None, *_resolution(method, a))
