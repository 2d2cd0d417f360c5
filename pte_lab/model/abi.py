"""Each target's ABI: the sizes and alignments of ExecuTorch's runtime objects there (``pte_lab/data/abi.json``,
read from the executorch wheel's headers compiled for it by :mod:`pte_lab.runtime.abi_probe`). The method pool
a target needs is replayed with it (:mod:`pte_lab.model.method_pool`); a header names the target's pointer size
from it (:mod:`pte_lab.views.runtime.sizes`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import PteLabError

__all__ = ["Abi", "abis", "abi", "TARGETS", "UnknownTargetError"]

_RESOURCE = Path(__file__).resolve().parents[1] / "data" / "abi.json"

#: the targets a pool can be modelled for, in the order the CLI lists them
TARGETS = ("host", "cortex-m")


class UnknownTargetError(PteLabError):
    """A target the ABI resource does not describe."""


@dataclass(frozen=True)
class Abi:
    """One target's layout of ExecuTorch's runtime objects: type name -> (sizeof, alignof)."""

    target: str
    name: str
    types: dict[str, tuple[int, int]]

    def size(self, t: str) -> int:
        return self.types[t][0]

    def align(self, t: str) -> int:
        return self.types[t][1]

    @property
    def platform_node(self) -> int:
        """PlatformMemoryAllocator's node on this target (runtime/executor/platform_memory_allocator.h: two
        pointers, the data and the next node), carried by each request to et_pal_allocate before the bytes asked."""
        return 2 * self.size("EValuePointer")


@lru_cache(maxsize=1)
def abis() -> dict[str, Abi]:
    """Every target's ABI, as the probe found it (pte_lab/data/abi.json)."""
    doc = json.loads(_RESOURCE.read_text())
    return {name: Abi(name, t["abi"], {k: (int(v[0]), int(v[1])) for k, v in t["types"].items()})
            for name, t in doc["targets"].items()}


def abi(target: str) -> Abi:
    try:
        return abis()[target]
    except KeyError:
        raise UnknownTargetError(f"unknown target {target!r}: pte_lab knows {', '.join(TARGETS)}") from None
