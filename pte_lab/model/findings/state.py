"""Sharing between methods: the host arenas ``Runtime.load_program`` gives host-only methods in common, and
the state (a KV cache) several methods plan at one place. The runtime's
:class:`~pte_lab.runtime.SharedArenasWarning` says it with :func:`shared_arenas_message` too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable

import numpy as np

from ...units import count, first_few, human_bytes
from ...vocabulary import Role
from .base import Details, Finding, Kind

if TYPE_CHECKING:  # pragma: no cover
    from ..pte import Pte

__all__ = ["SharedState", "shared_state", "sharing_host_methods", "shared_arenas_message", "sharing_findings",
           "SharedArenasDetails", "SharedStateDetails", "StateNotSharedDetails"]


@dataclass(frozen=True)
class SharedState:
    """State tensors several methods plan at one place (same names, arena and offset)."""

    mem_id: int
    offset: int
    #: the methods planning it, in method order
    methods: tuple[str, ...]
    #: the fully qualified names of the state tensors planned there
    names: tuple[str, ...]
    bytes: int


@dataclass(frozen=True)
class SharedArenasDetails(Details):
    methods: tuple[str, ...]


@dataclass(frozen=True)
class SharedStateDetails(Details):
    mem_id: int
    methods: tuple[str, ...]
    names: tuple[str, ...]
    bytes: int


@dataclass(frozen=True)
class StateNotSharedDetails(Details):
    mem_id: int
    #: the methods with device arenas, whose state is their own
    methods: tuple[str, ...]


def shared_arenas_message(methods: Iterable[str]) -> str:
    return (f"host-only methods {', '.join(methods)} share one set of host arenas under "
            f"Runtime.load_program: running one overwrites the others' intermediate values "
            f"(outputs are copied out, so returned values stay correct)")


def sharing_host_methods(methods) -> list[str]:
    """Host-only methods with planned arenas: the ones ``Runtime.load_program`` makes share arenas.

    ``methods`` are Method-like objects (``name``, ``is_device_method``,
    ``n_arenas``); metadata methods (``get_max_seq_len``...) plan nothing and
    share nothing.
    """
    return [m.name for m in methods if not m.is_device_method and m.n_arenas > 0]


def shared_state(methods) -> list[SharedState]:
    """State planned by several methods at one place, by arena and offset.

    Two methods share a state tensor when both plan a state tensor
    (role ``mutable_buffer``) with the same fully qualified name in the same
    arena at the same offset (what ``share_mutable_buffers=True`` writes).
    """
    methods = list(methods)
    if len(methods) < 2:  # state is shared between methods: one method shares none
        return []
    where: dict[str, dict[tuple[int, int, int], list[str]]] = {}
    for m in methods:
        c = m.analysis.columns
        state = c["role"] == Role.MUTABLE_BUFFER
        if not state.any():  # most methods plan no state
            continue
        named = np.flatnonzero(state & c["name"].astype(bool))
        for name, place in zip(c["name"][named].tolist(),
                               zip(*(c[k][named].tolist() for k in ("mem_id", "offset", "nbytes")))):
            where.setdefault(name, {}).setdefault(place, []).append(m.name)
    found: dict[tuple[int, int], tuple[list[str], list[str], int]] = {}
    for name, places in where.items():
        for (mem_id, offset, nbytes), users in places.items():
            if len(users) > 1:
                found.setdefault((mem_id, offset), (users, [], nbytes))[1].append(name)
    return [SharedState(mem_id, offset, tuple(users), tuple(names), nbytes)
            for (mem_id, offset), (users, names, nbytes) in sorted(found.items())]


def _state_findings(p: "Pte") -> list[Finding]:
    by_arena: dict[tuple[int, tuple[str, ...]], list[SharedState]] = {}
    for s in shared_state(p.methods.values()):
        by_arena.setdefault((s.mem_id, s.methods), []).append(s)
    out = []
    for (mem_id, users), entries in by_arena.items():
        names = tuple(n for s in entries for n in s.names)
        nbytes = sum(s.bytes for s in entries)
        shown = first_few(names, 4)
        private = tuple(n for n in users if p.methods[n].is_device_method)
        sharing = [n for n in users if n not in private]
        out.append(Finding(
            Kind.SHARED_STATE, None,
            f"methods {', '.join(users)} plan the same state in arena mem_id {mem_id}: "
            f"{count(len(names), 'tensor')}, {human_bytes(nbytes)} ({shown}). Runtime.load_program gives "
            f"host-only methods one set of arenas, so what {' or '.join(sharing) or 'one'} writes there the "
            f"next call reads; _load_for_executorch (the C++ Module) gives every method private arenas, "
            f"where they would not share it",
            SharedStateDetails(mem_id, users, names, nbytes)))
        if private:
            out.append(Finding(
                Kind.STATE_NOT_SHARED, None,
                f"{', '.join(private)} plans state shared with {', '.join(sharing) or 'other methods'} but has "
                f"device arenas: Runtime.load_program gives it private arenas, so its state is its own, "
                f"not the host methods'", StateNotSharedDetails(mem_id, private)))
    return out


def sharing_findings(p: "Pte") -> list[Finding]:
    """Host-only methods sharing arenas, then state several methods plan at one place."""
    out = []
    host = sharing_host_methods(p.methods.values())
    if len(host) > 1:
        out.append(Finding(Kind.SHARED_ARENAS, None, shared_arenas_message(host), SharedArenasDetails(tuple(host))))
    return out + _state_findings(p)
