"""Delegates: blobs several delegates read, blobs that are not their backend's, and what Ethos-U blobs
declare (scratch outside the plan, descriptors that do not match the calls' tensors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import ETRecordError
from ...units import count, first_few, human_bytes
from ...vocabulary import RUNTIME_OPS, InstructionKind, OperatorTarget, Role
from ..backends import BACKENDS
from ..delegates import blob_problem, blob_uses
from ..ethos_u import TEMP_ALLOCATOR, Blobs, io_checks
from ..peak import peak_point
from .base import Details, Finding, Kind, Prescription

if TYPE_CHECKING:  # pragma: no cover
    from ..method import Method
    from ..pte import Pte

__all__ = ["delegate_findings", "delegate_memory_findings", "SharedDelegateBlobDetails",
           "DelegateBlobFormatDetails", "DelegateScratchDetails", "DelegateIODetails", "inline_delegate_findings",
           "delegate_split_findings", "InlineDelegateDetails", "DelegateSplitDetails",
           "outside_delegate_findings", "OutsideDelegateDetails", "OutsideOperator", "OUTSIDE_WHERE"]


@dataclass(frozen=True)
class SharedDelegateBlobDetails(Details):
    #: the blob, in words (``segment 2``, ``inline blob 0``)
    blob: str
    #: (method, delegate index) of each delegate reading it
    delegates: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DelegateBlobFormatDetails(Details):
    delegate: int
    blob: str


@dataclass(frozen=True)
class DelegateScratchDetails(Details):
    delegate: int
    bytes: int
    #: where the scratch comes from (the temp allocator, or the program's bytes before ExecuTorch 0.7)
    allocator: str
    memory_mode: str | None


@dataclass(frozen=True)
class DelegateIODetails(Details):
    delegate: int
    #: (direction, position) of each argument whose descriptor does not match
    arguments: tuple[tuple[str, int], ...]


def delegate_findings(p: "Pte") -> list[Finding]:
    """Blobs read by delegates called with different arguments, and blobs that are not their backend's."""
    if getattr(p, "raw", None) is None:  # a program-like object without its file's records
        return []
    uses = blob_uses(p)
    out = []
    by_blob: dict[tuple[str, int], list] = {}
    for u in uses:
        by_blob.setdefault((u.location, u.index), []).append(u)
    for users in by_blob.values():
        if len(users) < 2:
            continue
        if len({u.backend for u in users}) > 1 or len({u.signature for u in users if u.signature}) > 1:
            out.append(Finding(
                Kind.SHARED_DELEGATE_BLOB, None,
                f"{' and '.join(u.where for u in users[:3])}{' and more' if len(users) > 3 else ''} read one "
                f"blob ({users[0].blob}, {human_bytes(users[0].size)}) but are called with different arguments: "
                f"ExecuTorch's serializer stores a blob once only when delegates are identical, so one names "
                f"another's blob and its backend would compile the wrong graph (XNNPACK aborts the process in "
                f"load_method); pte_lab.load runs such a program in a worker",
                SharedDelegateBlobDetails(users[0].blob, tuple((u.method, u.delegate) for u in users))))
    blobs = getattr(p, "_blobs", None)  # the program's own: each blob read once, for this and its memory
    if blobs is None:
        blobs = Blobs(p.raw, p.path)
    if blobs.read is not None:  # else the bytes are not available (an opened file object): blobs are not checked
        with blobs.held():  # one open for every blob's first bytes
            for users in by_blob.values():
                u = users[0]
                try:
                    problem = blob_problem(u, blobs)
                except OSError:  # the file went away or changed since it was opened: nothing to check
                    continue
                if problem:
                    out.append(Finding(
                        Kind.DELEGATE_BLOB_FORMAT, u.method,
                        f"delegate {u.delegate} ({u.backend}, {u.blob}, {human_bytes(u.size)}) is not what its "
                        f"backend reads: {problem}; the backend refuses or misreads it at load_method (pte_lab.load "
                        f"runs such a program in a worker)", DelegateBlobFormatDetails(u.delegate, u.blob)))
    return out


def _delegate_label(d) -> str:
    what = d.settings
    return f"delegate {d.index} ({d.backend}{', ' + what if what else ''})"


def delegate_memory_findings(m: "Method") -> list[Finding]:
    """What delegates' blobs declare: scratch outside the plan, descriptors that do not match the calls' tensors
    (a malformed blob is :func:`delegate_findings`'s ``delegate_blob_format``)."""
    out = []
    for d in getattr(m, "delegate_memory", ()):
        s = d.stream
        if s is None:
            continue
        if d.scratch_bytes:
            mode = d.placement
            where = f", in {mode.scratch}" if mode is not None else ""
            from_ = ("from the temp allocator at every execute" if d.scratch_from == TEMP_ALLOCATOR
                     else f"from {d.scratch_from}")
            extra = (f"; the NPU also uses a fast scratch the firmware provides ({mode.fast_scratch}), whose size "
                     f"the file does not give" + (f" (Vela's limit in this mode: {human_bytes(d.fast_scratch_limit)})"
                                                  if d.fast_scratch_limit else "")
                     ) if mode is not None and mode.fast_scratch is not None else ""
            out.append(Finding(Kind.DELEGATE_SCRATCH, m.name,
                               f"{_delegate_label(d)} takes {human_bytes(d.scratch_bytes)} ({d.scratch_bytes:,} bytes) "
                               f"of scratch {from_}{where}: the planned arenas ({human_bytes(m.planned_bytes)}) do "
                               f"not include it{extra}",
                               DelegateScratchDetails(d.index, d.scratch_bytes, d.scratch_from, d.memory_mode)))
        bad = [c for c in io_checks(m.raw, d) if c.refusal]
        if bad:
            shown = first_few((f"{c.direction} {c.position}" + (f" (v{c.value} {c.dtype}, {human_bytes(c.nbytes)})"
                                                                if c.value is not None and c.dtype else "")
                               + f": {c.refusal}" for c in bad), 3, "; ", "; and {n} more")
            out.append(Finding(Kind.DELEGATE_IO, m.name,
                               f"{_delegate_label(d)}: Vela's descriptors do not match the tensors the call passes: "
                               f"{shown} (ExecuTorch's {d.backend} refuses it at execute: InvalidProgram, or "
                               f"copies outside the scratch)",
                               DelegateIODetails(d.index, tuple((c.direction, c.position) for c in bad))))
    return out


# ------------------------------------------------------------------ findings that prescribe
#: inline delegate data is worth a finding from this many bytes
_INLINE_BYTES = 1024


#: where a backend holds what is alive inside one of its calls (a delegate split's advice says it per backend):
#: each backend's registration's (:attr:`pte_lab.model.backends.Backend.call_workspace`)
CALL_WORKSPACE = {b.id: b.call_workspace for b in BACKENDS.values() if b.call_workspace is not None}


@dataclass(frozen=True)
class InlineDelegateDetails(Prescription):
    """``inline_delegate_data``: ``at_stake`` is the inline blobs' bytes, kept in the heap with the program."""

    #: (method, delegate index) of every delegate whose blob is inline
    delegates: tuple[tuple[str, int], ...]
    #: the flatbuffer's bytes: what a FileDataLoader reads into the heap at load_program
    flatbuffer: int


@dataclass(frozen=True)
class DelegateSplitDetails(Prescription):
    """``delegate_split``: ``at_stake`` is the planned bytes crossing between the delegate calls and the
    operators left between them (tensors that would stay inside one delegate call) alive at the peak of the
    method's largest arena: what leaves the plan, an upper limit on what the process saves, since inside one
    delegate call the backend still needs memory for what is alive there (XNNPACK: its workspace, in the heap)."""

    backend: str
    #: how many calls of that backend the method makes
    calls: int
    #: each operator left between delegate calls and the instructions calling it, in instruction order
    operators: tuple[tuple[str, tuple[int, ...]], ...]
    #: where they come from in the model (``operator in module (Type) at file:line code``), with an ETRecord
    #: or stack traces
    sources: tuple[str, ...] = ()


def inline_delegate_findings(p: "Pte") -> list[Finding]:
    """Delegate blobs stored inside the flatbuffer (``extract_delegate_segments=False``)."""
    raw = getattr(p, "raw", None)
    if raw is None:
        return []
    inline = raw.inline_delegate_bytes
    if inline < _INLINE_BYTES:
        return []
    users = tuple((m.name, d.index) for m in p.methods.values() for d in m.delegates if d.location == "inline")
    flat = p.flatbuffer_size
    blobs = len({span for span in raw.inline_delegate_spans if span[1]})  # the blobs stored, however often named
    change = ("export with segments: ExecutorchBackendConfig(extract_delegate_segments=True) (the default) puts "
              "each blob in its own segment, read when its method loads and freed by the backend once it has "
              "initialised (XNNPACK frees it)")
    return [Finding(Kind.INLINE_DELEGATE_DATA, None,
                    f"{count(blobs, 'delegate blob')} ({human_bytes(inline)}) "
                    f"{'is' if blobs == 1 else 'are'} stored inline in the program's flatbuffer: ExecuTorch's "
                    f"FileDataLoader reads the whole flatbuffer ({human_bytes(flat)}) into the heap at load_program "
                    f"and keeps it until the program is freed, the blobs with it after their delegates have "
                    f"compiled them", InlineDelegateDetails(inline, change, users, flat))]


def _split_sources(m: "Method", between: list[int]) -> tuple[str, ...]:
    """Where the operators left between delegates come from, from the tensors they write (ETRecord or stack
    traces): ``operator in module (Type), ... at file:line code``, one per operator and line."""
    try:
        sources = m.sources
    except ETRecordError:  # another export's ETRecord: the tensors' table says so; the operators are still named
        return ()
    if not sources:
        return ()
    wanted: set[int] = set(between)
    by: dict[tuple[str, str], list[str]] = {}  # (operator, source line) -> the modules calling it there
    for t in sources:
        if t.instruction in wanted and (t.module is not None or t.source is not None):
            mods = by.setdefault((m.instructions[t.instruction].target, str(t.source) if t.source else ""), [])
            if t.module is not None and f"{t.module} ({t.module_type})" not in mods:
                mods.append(f"{t.module} ({t.module_type})")
    return tuple(" ".join(x for x in (op, mods and "in " + ", ".join(mods), line and f"at {line}") if x)
                 for (op, line), mods in by.items())


def delegate_split_findings(m: "Method") -> list[Finding]:
    """Kernel calls between a method's first and last delegate call: the partitioner left them out, so the
    graph runs as several delegate calls and the tensors crossing between them are planned."""
    instructions = m.instructions
    calls = [i.index for i in instructions if i.kind == InstructionKind.DELEGATE_CALL]
    if len(calls) < 2:
        return []
    between = [i.index for i in instructions[calls[0]:calls[-1]]
               if i.kind == InstructionKind.KERNEL_CALL and not i.target.startswith(RUNTIME_OPS)]
    if not between:
        return []
    backends = [b for i in calls if (b := instructions[i].backend) is not None]
    backend = max(dict.fromkeys(backends), key=backends.count)
    ops: dict[str, list[int]] = {}
    for i in between:
        ops.setdefault(instructions[i].target, []).append(i)
    # the planned tensors crossing: what those operators write, and what delegate calls write that they read,
    # counted where they are alive at the peak of the method's largest arena
    inside, delegated = set(between), set(calls)
    read = {v for i in between for v in instructions[i].args}
    point = peak_point(m)  # (arena, instruction) of the peak: all this needs
    crossing = 0 if point is None else sum(
        t.nbytes for t in m.planned if t.role != Role.VIEW and t.producer is not None and t.mem_id == point[0]
        and t.first is not None and t.first <= point[1] <= t.last
        and (t.producer in inside or (t.producer in delegated and t.value in read)))
    sources = _split_sources(m, between)
    named = first_few((f"{op} x{len(ix)}" if len(ix) > 1 else op for op, ix in ops.items()), 6)
    custom = [op for op in ops if not op.startswith("aten::")]
    change = (f"{backend}'s partitioner left {'it' if len(ops) == 1 else 'them'} out: write that part of the model "
              f"with operators {backend} takes (or give {backend} a kernel for "
              f"{'it' if len(ops) == 1 else 'them'}); lowered together, the graph is one delegate call and these "
              f"tensors leave the plan, but not the process: inside the call {backend} still holds what is alive at "
              f"once in {CALL_WORKSPACE.get(backend, 'memory of its own')}, so the plan shrinks by up "
              f"to this and the process by less")
    if custom:
        it = "it" if len(custom) == 1 else "them"
        change += (f" ({first_few(custom, 3)} {'is a custom operator' if len(custom) == 1 else 'are custom operators'}"
                   f", which no partitioner takes: the split around {it} is by design)")
    where = f" (from {first_few(sources, 3, '; ', '; and {n} more')})" if sources else ""
    return [Finding(Kind.DELEGATE_SPLIT, m.name,
                    f"{count(len(between), 'operator call')} left between {backend} delegate calls ({named}){where}: "
                    f"one graph runs as {count(len(calls), 'delegate call')}, and tensors crossing between them "
                    f"are planned: {human_bytes(crossing)} of them alive at the peak of arena "
                    f"{point[0] if point else 1}",
                    DelegateSplitDetails(crossing, change, backend, len(calls),
                                         tuple((op, tuple(ix)) for op, ix in ops.items()), sources))]


#: where an operator left outside the delegates runs, relative to the method's delegate calls
OUTSIDE_WHERE = ("before the first delegate call", "between delegate calls", "after the last delegate call")
#: operators that convert between float and a quantized type (at a program's edges: its float input and output)
IO_CONVERSIONS = frozenset({"quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
                            "dequantize_per_channel"})
#: operators that only move an input's elements (a Focus layer's strided slices, a concatenation of them)
RESHUFFLES = frozenset({"slice_copy", "slice", "cat", "permute_copy", "split_copy", "split_with_sizes_copy",
                        "pixel_unshuffle", "pixel_shuffle"})


@dataclass(frozen=True)
class OutsideOperator:
    """One operator a delegated method runs on ExecuTorch's own kernels, where it runs, and the bytes of the
    planned tensors it writes (views left out: they are their base's)."""

    operator: OperatorTarget
    #: one of :data:`OUTSIDE_WHERE`
    where: str
    instructions: tuple[int, ...]
    #: planned bytes of the tensors it writes
    planned: int
    #: of those, the bytes alive at the peak of the method's largest arena
    at_peak: int


@dataclass(frozen=True)
class OutsideDelegateDetails(Prescription):
    """``outside_delegate``: ``at_stake`` is the bytes the operators left outside the delegates write that are
    alive at the peak of the method's largest arena (what the peak loses at most were a delegate to take them);
    ``planned`` all the planned bytes they write."""

    backends: tuple[str, ...]
    operators: tuple[OutsideOperator, ...]
    planned: int
    #: the arena whose peak ``at_stake`` is of (None: the method plans nothing)
    mem_id: int | None


def outside_delegate_findings(m: "Method") -> list[Finding]:
    """Every operator a method that calls delegates runs on ExecuTorch's own kernels (the partitioner did not
    take it), before, between or after the delegate calls, with the planned bytes it writes and those alive at
    the peak: one finding per method."""
    instructions = m.instructions
    calls = [i.index for i in instructions if i.kind == InstructionKind.DELEGATE_CALL]
    if not calls:
        return []
    outside = {i.index: op for i in instructions if (op := i.operator) is not None and not op.startswith(RUNTIME_OPS)}
    if not outside:
        return []
    backends = tuple(dict.fromkeys(b for i in calls if (b := instructions[i].backend) is not None))
    point = peak_point(m)  # (arena, instruction) of the peak: all this needs
    written: dict[int, list] = {}
    for t in m.planned:
        if t.role != Role.VIEW and t.producer is not None:
            written.setdefault(t.producer, []).append(t)
    by: dict[tuple[OperatorTarget, str], list[int]] = {}
    for i, op in outside.items():
        where = OUTSIDE_WHERE[0 if i < calls[0] else 2 if i > calls[-1] else 1]
        by.setdefault((op, where), []).append(i)
    ops = []
    for (op, where), ix in by.items():
        ts = [t for i in ix for t in written.get(i, ())]
        alive = 0 if point is None else sum(
            t.nbytes for t in ts if t.mem_id == point[0] and t.first is not None and t.first <= point[1] <= t.last)
        ops.append(OutsideOperator(op, where, tuple(ix), sum(t.nbytes for t in ts), alive))
    at_peak, planned = sum(o.at_peak for o in ops), sum(o.planned for o in ops)
    if not planned:
        return []
    named = first_few((f"{o.operator} x{len(o.instructions)} {o.where} ({human_bytes(o.planned)} planned, "
                       f"{human_bytes(o.at_peak)} alive at the peak)" for o in sorted(ops, key=lambda o: -o.at_peak)),
                      3, "; ", "; and {n} more")
    who = " and ".join(backends)
    edges = [o for o in ops if o.operator.name in IO_CONVERSIONS and o.where != OUTSIDE_WHERE[1]]
    rest = [o for o in ops if o not in edges]
    change = ""
    if rest:
        reshuffle = (" such as a Focus layer's strided slices" if any(o.operator.name in RESHUFFLES for o in rest)
                     else "")
        change = (f"{who}'s partitioner did not take {'it' if len(rest) == 1 else 'them'}: write that part of the "
                  f"model with operators {who} takes, or do it before the program (in the app, on its input) where "
                  f"it is a reshuffle of the input{reshuffle}; taken into the delegate, these tensors leave the plan "
                  f"(the peak falls by up to {human_bytes(sum(o.at_peak for o in rest))}), though the backend then "
                  f"holds what is alive at once in memory of its own")
    if edges:
        what = " and ".join(dict.fromkeys(
            "the quantize converts the float input to int8 before the first delegate call"
            if not o.operator.name.startswith("de") else "the dequantize converts the int8 output back to float after "
            "the last" for o in edges))
        change += ("; " if change else "") + (
            f"{what}: export the program with int8 inputs and outputs (quantized I/O: exir.passes.quantize_io_pass's "
            f"QuantizeInputs and QuantizeOutputs, which keep each one's scale and zero point in the program), so "
            f"that the firmware or app passes int8 and reads int8; {'these conversions' if len(edges) > 1 else 'the conversion'} "
            f"and the float {'input and output' if len({o.where for o in edges}) > 1 else 'tensor'} then leave the "
            f"program (the peak falls by up to {human_bytes(sum(o.at_peak for o in edges))}, and an int8 tensor "
            f"has a quarter of a float32's bytes)")
    peak = f"arena {point[0]}'s peak" if point is not None else "the peak"
    return [Finding(Kind.OUTSIDE_DELEGATE, m.name,
                    f"{count(len(outside), 'operator call')} of a method delegated to {who} run on ExecuTorch's "
                    f"CPU kernels, outside the delegate: {named}; together {human_bytes(planned)} of planned tensors, "
                    f"{human_bytes(at_peak)} of them alive at {peak}",
                    OutsideDelegateDetails(at_peak, change, backends, tuple(ops), planned,
                                           point[0] if point is not None else None))]
