"""Views of a deployment sizing (:class:`pte_lab.runtime.sizing.Sizes`): text, HTML and a C header.

The header is what a bare-metal build includes to size its pools: per method
the method-allocator and temp-allocator pool sizes and the planned buffers'
sizes and devices, and the alignment every pool's base must have for the
figures to hold.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..devices import DEVICE_TYPES, parse_device
from ..units import human_bytes
from .declared import declared_lines, header_declared_lines, header_stand_in_lines, stand_in_line
from .text import _table

if TYPE_CHECKING:  # pragma: no cover
    from ..runtime.sizing import Sizes, PoolVerification

__all__ = ["sizes_text", "sizes_html", "verdict", "c_header", "c_identifiers"]


def _parts():
    from ..runtime.sizing import PARTS

    return PARTS


def part_source(part: str, m) -> str:
    from ..runtime.sizing import part_source as source

    return source(part, m)


def verdict(v: "PoolVerification | None") -> str:
    """What a method's verification proved, in one sentence (text, HTML and notebooks say it so)."""
    if v is None:
        return "not verified (--verify proves the pool sizes)"
    if not v.sufficient:
        return f"NOT SUFFICIENT: {v.sufficient_error}"
    tight = (f"tight: one byte less is refused ({v.smaller_error})" if v.tight
             else f"not tight: one byte less gave {v.smaller_error or 'no error'}")
    return f"verified: these pools load and run it; {tight}"


def sizes_text(sizes: "Sizes") -> str:
    """Per method: the pools it needs, what lies beyond them, and where each figure comes from."""
    out = [f"{os.path.basename(sizes.path)}: run-time memory per method (executorch {sizes.executorch_version}; "
           f"each method loaded and run {next(iter(sizes.methods.values())).runs if sizes.methods else 0}x "
           f"in an isolated worker)"]
    if not sizes.counted:
        out.append("(the allocation counter could not be preloaded here: heap and mapping figures are missing)")
    for m in sizes.methods.values():
        rows = []
        for mem_id, device, b in m.planned:
            rows.append([f"planned arena {mem_id}", device, f"{b:,}", human_bytes(b), "file"])
        for part, b in m.parts().items():
            if part == "planned arenas" or b is None:
                continue
            if part == "delegate scratch" and not b:
                continue
            rows.append([part, "cpu", f"{b:,}", human_bytes(b), part_source(part, m)])
        out += ["", f"method {m.method!r}", _table(["part", "device", "bytes", "", "from"], rows)]
        out.append(f"pools: method {m.method_allocator:,} B ({m.method_allocations} allocations), temp "
                   f"{m.temp_allocator:,} B (peak {m.temp_peak:,}; kernel resolution needs "
                   f"{m.resolution_minimum:,}), bases aligned to {m.alignment} B")
        if m.heap_execute_peak:
            out.append(f"heap peak during a run: {m.heap_execute_peak:,} B above what was held before it")
        out += [line for line in [stand_in_line(m)] if line]
        out.append(("with stand-ins: " if m.stand_ins else "") + verdict((sizes.verified or {}).get(m.method)))
    for name, why in sizes.skipped.items():
        out += ["", f"method {name!r}: not sized: {why}"]
        out += declared_lines(sizes.declared[name]) if name in sizes.declared else []
    out += ["", "from: file = the program's own tables; delegate blob = what the delegates' blobs declare; "
                "runner = pte_lab's sizing runner (ExecuTorch's allocators, counted); counter = every malloc/mmap of the worker, counted; kernel = the "
                "kernel's resident-page count"]
    return "\n".join(out)


def sizes_html(sizes: "Sizes") -> str:
    """The table of parts, then per method what could not be sized and what the verification proved."""
    from html import escape

    t = sizes.table()
    t["size"] = t["bytes"].map(human_bytes)
    notes = [f"{escape(n)}: not sized ({escape(why)})" for n, why in sizes.skipped.items()]
    notes += [f"{escape(n)}: {escape(line.strip())}" for n, d in sizes.declared.items() for line in declared_lines(d)]
    notes += [f"{escape(n)}: {escape(stand_in_line(m))}" for n, m in sizes.methods.items() if m.stand_ins]
    notes += [f"{escape(n)}: {escape(verdict(v))}" for n, v in (sizes.verified or {}).items()]
    return (f"<div><b>Sizes</b> of {escape(os.path.basename(sizes.path))} (executorch "
            f"{escape(sizes.executorch_version)})</div>" + t.to_html(index=False)
            + "".join(f"<div>{line}</div>" for line in notes))


_NOT_IDENT = re.compile(r"[^0-9A-Za-z]+")


def _comment(text: str) -> str:
    """Text safe inside a C comment."""
    return text.replace("*/", "* /")


def c_identifiers(names) -> dict[str, str]:
    """Method name -> a C identifier part, unique (``forward`` -> ``forward``, ``a-b`` -> ``a_b``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        base = _NOT_IDENT.sub("_", n).strip("_").lower() or "method"
        ident, k = base, 2
        while ident in used:
            ident, k = f"{base}_{k}", k + 1
        used.add(ident)
        out[n] = ident
    return out


def c_header(sizes: "Sizes", guard: str | None = None) -> str:
    """A C header with each method's pool sizes (C89-compatible: macros and const arrays)."""
    stem = _NOT_IDENT.sub("_", os.path.splitext(os.path.basename(sizes.path))[0]).upper().strip("_") or "PROGRAM"
    guard = guard or f"PTE_LAB_{stem}_POOLS_H"
    from ..runtime.sizing import MIN_POOL_ALIGNMENT

    align = max([MIN_POOL_ALIGNMENT] + [m.alignment for m in sizes.methods.values()])
    idents = c_identifiers(sizes.methods)
    kinds = sorted({parse_device(d)[0] for m in sizes.methods.values() for _, d, _ in m.planned} | {"cpu"},
                   key=lambda k: DEVICE_TYPES[k])
    codes = ", ".join(f"{DEVICE_TYPES[k]} = {k}" for k in kinds)
    proven = ("verified (sufficient, and the method pool tight)" if sizes.proven
              else "not verified (pte-lab sizes --verify)")
    lines = [
        f"/* Memory pools for {_comment(os.path.basename(sizes.path))}, measured by pte_lab with executorch "
        f"{sizes.executorch_version}.",
        " * Each method was loaded and run with ExecuTorch's MemoryAllocator, HierarchicalAllocator and",
        f" * MemoryManager; figures {proven}.",
        " * Give each pool a base aligned to PTE_LAB_POOL_ALIGNMENT bytes, the planned buffers their sizes",
        " * here (index i is the method's planned buffer i, the file's mem_id i + 1), and a temp pool of at",
        " * least the size here: a smaller one makes ExecuTorch resolve kernels in the method pool.",
        f" * Device type codes (ExecuTorch's DeviceType): {codes}. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stddef.h>",
        "",
        f"#define PTE_LAB_POOL_ALIGNMENT {align}u",
    ]
    for name, m in sizes.methods.items():
        up, low = idents[name].upper(), idents[name]
        n = len(m.planned)
        lines += [
            "",
            f"/* method \"{_comment(name)}\" */",
            f"#define PTE_LAB_{up}_METHOD_POOL_BYTES {m.method_allocator}u",
            f"#define PTE_LAB_{up}_TEMP_POOL_BYTES {m.temp_allocator}u",
            f"#define PTE_LAB_{up}_NUM_PLANNED_BUFFERS {n}u",
        ] + header_stand_in_lines(m, up)
        if n:  # C has no zero-length arrays
            lines += [
                f"static const size_t pte_lab_{low}_planned_buffer_sizes[{n}] = "
                f"{{{', '.join(f'{b}u' for _, _, b in m.planned)}}};",
                f"static const int pte_lab_{low}_planned_buffer_device_types[{n}] = "
                f"{{{', '.join(str(parse_device(d)[1]) for _, d, _ in m.planned)}}};",
                f"static const int pte_lab_{low}_planned_buffer_device_indices[{n}] = "
                f"{{{', '.join(str(parse_device(d)[2]) for _, d, _ in m.planned)}}};",
            ]
    for name, why in sizes.skipped.items():
        if name in sizes.declared:
            ident = c_identifiers(list(sizes.methods) + [name])[name]
            lines += [""] + header_declared_lines(sizes.declared[name], ident.upper(), ident)
        else:
            lines += ["", f"/* method \"{_comment(name)}\" not sized: {_comment(why)} */"]
    lines += ["", f"#endif /* {guard} */", ""]
    return "\n".join(lines)
