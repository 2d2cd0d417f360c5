"""What a sizing says beyond what it measured: the stand-ins it ran with, and what the file declares for
methods it could not run (:class:`~pte_lab.runtime.declared.DeclaredSizes`). Text lines, HTML notes and C
header lines that :mod:`pte_lab.views.runtime.sizes` includes."""

from __future__ import annotations

from ...devices import parse_device
from ...model.ethos_u import TEMP_ALLOCATOR
from ...runtime.stand_ins import SOURCES_READ
from ...units import exact_bytes
from ..c_text import c_comment as _c

__all__ = ["stand_in_line", "declared_lines", "header_stand_in_lines", "header_declared_lines"]


def stand_in_line(m, said: str | None = None) -> str | None:
    """One sentence for a method measured with stand-ins (None: it ran with the real backend and kernels);
    ``said``: the ExecuTorch source the output named already (where it is the stand-ins', it is not said again)."""
    if not m.stand_ins:
        return None
    read = "the same ExecuTorch source as the heap's, above" if said == SOURCES_READ else SOURCES_READ
    return (f"measured with stand-ins for {', '.join(m.stand_ins)}: pte_lab's, registered in the sizing worker "
            f"under the real names, taking from ExecuTorch's allocators what the real ones take (as read in "
            f"{read}) and computing nothing")


def declared_lines(d) -> list[str]:
    """What the file declares for a method not sized: planned arenas, the temp pool's least size, and what is
    not measured."""
    out = [f"  planned arena {mem_id} ({dev}): {exact_bytes(b)} (file)" for mem_id, dev, b in d.planned]
    for index, backend, scratch, where in d.delegates:
        if scratch is not None:
            out.append(f"  delegate {index} ({backend}) scratch: {exact_bytes(scratch)} "
                       + ("from the temp allocator at every execute" if where == TEMP_ALLOCATOR else
                          f"in {where}, outside the temp pool") + " (delegate blob)")
    if d.delegate_scratch:
        out.append(f"  temp pool: at least {exact_bytes(d.temp_pool_at_least)} (the largest scratch, at a 16-byte "
                   f"aligned base)")
    out.append("  method pool: not measured (only running tells it)")
    return out


def header_stand_in_lines(m, up: str) -> list[str]:
    """Header lines for a method measured with stand-ins: what replaced what, and the delegates' scratch."""
    out = []
    line = stand_in_line(m)
    if line:
        out.append(f"/* {_c(line)}. */")
    if m.delegate_scratch:
        out.append(f"#define PTE_LAB_{up}_DELEGATE_SCRATCH_BYTES {m.delegate_scratch}u "
                   f"/* in the temp pool: the largest scratch one delegate call takes (delegate blob) */")
    return out


def header_declared_lines(d, up: str, low: str) -> list[str]:
    """Header lines for a method not sized: what the file declares, the method pool marked not measured."""
    n = len(d.planned)
    out = [f"/* method \"{_c(d.method)}\": only what the file declares; its method pool is not measured "
           f"({_c(d.not_measured)}) */",
           f"#define PTE_LAB_{up}_NUM_PLANNED_BUFFERS {n}u"]
    if n:
        out += [f"static const size_t pte_lab_{low}_planned_buffer_sizes[{n}] = "
                f"{{{', '.join(f'{b}u' for _, _, b in d.planned)}}};",
                f"static const int pte_lab_{low}_planned_buffer_device_types[{n}] = "
                f"{{{', '.join(str(parse_device(dev).device_type) for _, dev, _ in d.planned)}}};",
                f"static const int pte_lab_{low}_planned_buffer_device_indices[{n}] = "
                f"{{{', '.join(str(parse_device(dev).device_index) for _, dev, _ in d.planned)}}};"]
    if d.delegate_scratch:
        out.append(f"#define PTE_LAB_{up}_DELEGATE_SCRATCH_BYTES {d.delegate_scratch}u "
                   f"/* the least temp pool, at a 16-byte aligned base (delegate blob) */")
    return out
