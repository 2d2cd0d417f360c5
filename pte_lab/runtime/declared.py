"""What a method needs that the file itself says, for methods pte_lab cannot run here.

When neither the backend nor a stand-in for it can run a method
(:mod:`pte_lab.runtime.stand_ins`), :func:`pte_lab.sizes` still reports what the
program declares: its planned arenas (``non_const_buffer_sizes``) and the temp
pool its delegates need at least (the largest scratch one delegate call takes,
from the delegates' blobs). The method pool is what only running can tell: it
is reported as not measured, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DeclaredSizes", "declared_sizes"]


@dataclass(frozen=True)
class DeclaredSizes:
    """One method's memory as the file declares it (nothing measured)."""

    method: str
    #: (mem_id, device, bytes) of every planned arena, from the file
    planned: tuple[tuple[int, str, int], ...]
    #: the largest scratch one delegate call takes from the temp allocator (from the blobs; 0: none declared)
    delegate_scratch: int
    #: (delegate index, backend, scratch bytes or None where the blob does not say, where the scratch is: the
    #: temp allocator, or the program's bytes for an older Ethos-U layout) per delegate
    delegates: tuple[tuple[int, str, int | None, str | None], ...]
    #: why the method pool (and what else only running tells) is not measured
    not_measured: str

    @property
    def temp_pool_at_least(self) -> int:
        """The temp pool must hold the largest scratch: at a 16-byte aligned base, exactly that many bytes."""
        return self.delegate_scratch


def declared_sizes(method, why: str) -> DeclaredSizes:
    """From a :class:`~pte_lab.model.Method`: its planned arenas and its delegates' declared scratch."""
    planned = tuple((a.mem_id, a.device, a.size) for a in method.arenas)
    delegates = tuple((d.index, d.backend, d.scratch_bytes, d.scratch_from) for d in method.delegate_memory)
    return DeclaredSizes(method.name, planned, method.delegate_temp_bytes, delegates, why)
