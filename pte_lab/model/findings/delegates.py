"""Delegates: blobs several delegates read, blobs that are not their backend's, and what Ethos-U blobs
declare (scratch outside the plan, descriptors that do not match the calls' tensors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import PteLabError
from ...units import first_few, human_bytes
from ..delegates import blob_problem, blob_uses
from ..ethos_u import io_checks
from ..layout import byte_reader
from .base import Details, Finding, Kind

if TYPE_CHECKING:  # pragma: no cover
    from ..method import Method
    from ..pte import Pte

__all__ = ["delegate_findings", "delegate_memory_findings", "SharedDelegateBlobDetails",
           "DelegateBlobFormatDetails", "DelegateScratchDetails", "DelegateIODetails"]


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
    try:
        read = byte_reader(p)
    except PteLabError:  # bytes not available (an opened file object): blobs are not checked
        read = None
    if read is not None:
        for users in by_blob.values():
            u = users[0]
            try:
                problem = blob_problem(u, read)
            except OSError:  # the file went away or changed since it was opened: nothing to check
                continue
            if problem:
                out.append(Finding(
                    Kind.DELEGATE_BLOB_FORMAT, u.method,
                    f"delegate {u.delegate} ({u.backend}, {u.blob}, {human_bytes(u.size)}) is not what its backend "
                    f"reads: {problem}; the backend refuses or misreads it at load_method (pte_lab.load runs "
                    f"such a program in a worker)", DelegateBlobFormatDetails(u.delegate, u.blob)))
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
            from_ = ("from the temp allocator at every execute" if d.scratch_from == "temp allocator"
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
