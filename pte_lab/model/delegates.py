"""Delegate blobs: which ones several delegates read, and whether a blob is what its backend reads.

A delegate's processed data is a blob (inline in the flatbuffer, or a segment)
its backend compiles at ``load_method``. ExecuTorch's serializer stores
identical blobs once, so two delegates may name one segment; a reference
retargeted at another delegate's blob makes the backend compile the wrong
graph for its call (seen: XNNPACK aborts the process in ``load_method``).

Backends' blob formats (read from their serializers in the executorch wheel; each backend's check is its
registration's, :mod:`pte_lab.model.backends`):

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

from types import MappingProxyType
from typing import TYPE_CHECKING
from collections.abc import Callable, Mapping

from ..vocabulary import InstructionKind
from .backends import BACKENDS

if TYPE_CHECKING:  # pragma: no cover
    from .ethos_u import Blobs
    from .pte import Pte

__all__ = ["BlobUse", "blob_uses", "blob_problem", "BLOB_CHECKS"]


#: backend id -> the check of a blob's first bytes, ``check(blobs, offset, size)`` (``blobs``: the program's
#: :class:`~pte_lab.model.ethos_u.Blobs`; backends not listed are not checked): each backend's registration's
#: (:attr:`pte_lab.model.backends.Backend.check_blob`)
BLOB_CHECKS: Mapping[str, Callable[["Blobs", int, int], str | None]] = MappingProxyType(
    {b.id: b.check_blob for b in BACKENDS.values() if b.check_blob is not None})


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
