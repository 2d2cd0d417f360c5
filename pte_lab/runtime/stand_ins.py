"""Stand-ins for what a bare-metal build has and the executorch wheel lacks, for sizing only.

A microcontroller program for an Ethos-U NPU calls ``EthosUBackend`` and
``cortex_m::`` kernels; neither is in the wheel, so ExecuTorch cannot load the
method here and nothing it allocates could be measured. Inside the sizing
worker (never in your process) pte_lab registers stand-ins under the real names
(``native/stand_ins.cpp``): ExecuTorch's own ``load_method`` and ``execute`` then
run as on the target, and each stand-in takes from ExecuTorch's allocators what
the real one takes, per ExecuTorch's source (:data:`STAND_INS`). They compute
nothing, so a run's outputs are meaningless, and every figure measured with
them is labelled "stand-in". Where no stand-in follows the installed
ExecuTorch, nothing is registered and the method is reported as not measured.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

from ..model.backends import BACKENDS, ETHOS_U, registration
from ..vocabulary import OperatorTarget
from . import native

__all__ = ["STAND_INS", "KERNEL_NAMESPACES", "stand_ins_for", "register", "stats", "follows"]

#: what a stand-in replaces -> (the ExecuTorch versions whose source it follows, what the real one takes from
#: ExecuTorch's allocators and the heap, as the stand-in does): a backend's is its registration's
#: (:attr:`pte_lab.model.backends.Backend.stand_in`)
STAND_INS = {
    **{b.id: (b.stand_in.versions, b.stand_in.takes) for b in BACKENDS.values() if b.stand_in is not None},
    "cortex_m::": (("1.2", "1.5"), "nothing from ExecuTorch's allocators (a kernel's scratch is a planned tensor "
                                   "argument); the stand-in leaves its output as it is"),
}
#: the sources the stand-ins were read from (the versions above are those they are used under: 1.5.1's wheel
#: ships no Arm runtime source, and its Arm runtime is taken to be that of main of 2026-08-22: one home, the model's)
SOURCES_READ = ETHOS_U.sources_read or ""
#: operator namespaces whose kernels get stand-ins
KERNEL_NAMESPACES = tuple(k[:-2] for k in STAND_INS if k.endswith("::"))


def follows(what: str, version: str) -> bool:
    """Whether pte_lab's stand-in for ``what`` follows ExecuTorch ``version``'s source (``"1.5.1+cpu"``)."""
    key = what if what in STAND_INS else f"{OperatorTarget.parse(what).namespace}::"
    if key not in STAND_INS:
        return False
    lo, hi = STAND_INS[key][0]
    major_minor = tuple(int(x) for x in version.split("+")[0].split(".")[:2])
    return tuple(map(int, lo.split("."))) <= major_minor <= tuple(map(int, hi.split(".")))


def stand_ins_for(backends, operators, version: str) -> tuple[list[str], list[str]]:
    """(backends, operators) among those missing that pte_lab has stand-ins for under ExecuTorch ``version``."""
    b = [x for x in backends if x in STAND_INS and follows(x, version)]
    ops = [x for x in operators if OperatorTarget.parse(x).namespace in KERNEL_NAMESPACES and follows(x, version)]
    return b, ops


@lru_cache(maxsize=1)
def _lib():
    lib = native.library()
    for b in BACKENDS.values():
        if b.stand_in is not None:
            getattr(lib, b.stand_in.symbol).restype = ctypes.c_int32
    lib.pte_lab_stand_in_kernel.argtypes = [ctypes.c_char_p]
    lib.pte_lab_stand_in_kernel.restype = ctypes.c_int32
    lib.pte_lab_stand_in_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    lib.pte_lab_stand_in_stats.restype = None
    return lib


def register(backends: list[str], operators: list[str]) -> list[str]:
    """Register stand-ins for ``backends`` and ``operators`` in this process (the sizing worker); what was
    registered. ``operators`` must not be registered already (ExecuTorch aborts on a second registration)."""
    lib = _lib()
    done = []
    for b in backends:
        stand_in = registration(b).stand_in
        if stand_in is not None and getattr(lib, stand_in.symbol)() == 0:
            done.append(b)
    for op in operators:
        if lib.pte_lab_stand_in_kernel(op.encode()) == 0:
            done.append(op)
    return done


def stats() -> dict[str, int]:
    """What the EthosUBackend stand-in did in this process: inits, executes, inits refused, the largest scratch it
    took from the temp allocator, and its handle's bytes."""
    out = (ctypes.c_uint64 * 5)()
    _lib().pte_lab_stand_in_stats(out)
    return dict(zip(("inits", "executes", "refused", "scratch_peak", "handle_bytes"), map(int, out)))
