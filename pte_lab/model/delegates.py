"""Delegate blobs: which ones several delegates read, and whether a blob is what its backend reads.

A delegate's processed data is a blob (inline in the flatbuffer, or a segment)
its backend compiles at ``load_method``. ExecuTorch's serializer stores
identical blobs once, so two delegates may name one segment; a reference
retargeted at another delegate's blob makes the backend compile the wrong
graph for its call (seen: XNNPACK aborts the process in ``load_method``).

Backends' blob formats (read from their serializers in the executorch wheel):

* ``XnnpackBackend``: a header naming where an XNNPACK graph flatbuffer starts,
  or that flatbuffer alone (:mod:`pte_lab.format.xnnpack` reads it).

* ``EthosUBackend``: a Vela bin stream (:mod:`pte_lab.format.vela`), checked as ExecuTorch's reader
  checks it. ``ArmBackend`` (ExecuTorch 0.2 to 0.5) is the same backend under its older id, with the older
  layout: the scratch is a ``scratch_data`` block of the blob, and the NPU works in it, in the program's
  bytes (so the program must be in memory the NPU can write); its compile specs name the target and, where
  the flow passed them, the system config and memory mode (ExecuTorch 0.2's example passed neither).

What a blob declares about memory (Ethos-U) is :mod:`pte_lab.model.ethos_u`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format import xnnpack
from ..format.vela import BACKEND, LEGACY_BACKEND
from ..vocabulary import InstructionKind

if TYPE_CHECKING:  # pragma: no cover
    from .ethos_u import Blobs
    from .pte import Pte

__all__ = ["BlobUse", "blob_uses", "blob_problem", "BLOB_CHECKS"]


def _xnnpack_problem(blobs: "Blobs", offset: int, size: int) -> str | None:
    read = blobs.read
    if read is None:  # opened from a stream that is gone: the bytes cannot be checked
        return None
    head = read(offset, min(size, xnnpack.HEADER_BYTES))
    fb = xnnpack.header_graph_offset(head)
    if fb is not None:
        if fb + 8 > size:
            return f"its XNNPACK header puts the graph at byte {fb}, past the blob's {size} bytes"
        ident = xnnpack.identifier(read(offset + fb, 8))
        if ident in xnnpack.GRAPH_IDENTIFIERS:
            return None
        return f"its XNNPACK header points at a graph whose identifier is {ident!r}, not {xnnpack.GRAPH_IDENTIFIERS[0]!r}"
    if xnnpack.identifier(head) in xnnpack.GRAPH_IDENTIFIERS:
        return None
    return (f"it starts with {head[:8]!r}: neither XNNPACK's header ({xnnpack.HEADER_MAGIC!r} at bytes 4..8) "
            f"nor an XNNPACK graph ({xnnpack.GRAPH_IDENTIFIERS[0]!r})")


def _vela_problem(blobs: "Blobs", offset: int, size: int, backend: str = BACKEND) -> str | None:
    stream = blobs.vela(offset, size, backend)  # read once, for this check and for the delegate's memory
    if stream.ok:
        return None
    more = len(stream.problems) - 1
    return stream.problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


#: backend id -> the check of a blob's first bytes, ``check(blobs, offset, size)`` (``blobs``: the program's
#: :class:`~pte_lab.model.ethos_u.Blobs`; backends not listed are not checked)
BLOB_CHECKS = {xnnpack.BACKEND: _xnnpack_problem, BACKEND: _vela_problem,
               LEGACY_BACKEND: lambda blobs, offset, size: _vela_problem(blobs, offset, size, LEGACY_BACKEND)}


class BlobUse:
    """One delegate of one method and the blob it names."""

    __slots__ = ("method", "delegate", "backend", "location", "index", "offset", "size", "signature")

    def __init__(self, method, delegate, backend, location, index, offset, size, signature):
        self.method, self.delegate, self.backend = method, delegate, backend
        self.location, self.index, self.offset, self.size = location, index, offset, size
        #: (kind, dtype code, shape) of each argument of the first DelegateCall of it; None when uncalled
        self.signature = signature

    @property
    def where(self) -> str:
        return f"{self.method!r} delegate {self.delegate} ({self.backend})"

    @property
    def blob(self) -> str:
        return f"segment {self.index}" if self.location == "segment" else f"inline blob {self.index}"


def blob_uses(p: "Pte") -> list[BlobUse]:
    """Every delegate of every method, with its blob's place in the program (offsets from its start)."""
    raw = p.raw
    out = []
    for m in p.methods.values():
        plan = m.raw
        signatures: dict[int, tuple] = {}
        for ins in plan.instructions:
            if ins.kind == InstructionKind.DELEGATE_CALL and ins.target not in signatures:
                sig = []
                for a in ins.args:
                    v = plan.values[a]
                    t = v.tensor
                    sig.append((v.kind, t.scalar_type, t.sizes) if t is not None else (v.kind,))
                signatures[ins.target] = tuple(sig)
        for j, d in enumerate(plan.delegates):
            if d.location == "segment":
                offset = raw.segments[d.index].offset
            else:
                offset = raw.inline_delegate_spans[d.index][0]
            out.append(BlobUse(m.name, j, d.id, d.location, d.index, offset, d.size, signatures.get(j)))
    return out


def blob_problem(use: BlobUse, blobs: "Blobs") -> str | None:
    """Why ``use``'s blob is not what its backend reads, or None (also for backends pte_lab cannot check).
    ``blobs``: the program's :class:`~pte_lab.model.ethos_u.Blobs`, whose bytes are available (``blobs.read``)."""
    check = BLOB_CHECKS.get(use.backend)
    if check is None or use.size == 0:
        return None
    return check(blobs, use.offset, use.size)


# What a blob declares about memory moved to .ethos_u; its names stay importable from here for code (and
# notebooks) written before the split.
from .ethos_u import (DELEGATE_COLUMNS, IN_BLOB, IO_TYPES, MEMORY_MODES, NOT_RECORDED,  # noqa: E402,F401
                      SCRATCH_ALIGNMENT, TEMP_ALLOCATOR, Blobs, DelegateMemory, DelegatePart, IOCheck,
                      MemoryMode, delegate_memory, describe_io, io_checks, io_refusal, memory_mode_of)
