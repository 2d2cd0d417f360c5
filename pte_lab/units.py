"""The one vocabulary for quantities: every view, plot, CLI line and runtime message uses it.

* :func:`human_bytes` — binary units (``1.5 KiB``; exact bytes below 1 KiB); :func:`tick_bytes`
  the same for axis ticks (``16 KiB``, ``1,280 B``: no decimal that hides bytes).
* :func:`delta_bytes`, :func:`growth` — a change: ``+36 KiB``, ``-4.0 KiB``; ``+12.5%``.
* :func:`ratio` — how much bigger one size is than another (``1.02x``); used
  for an arena's ``size / peak`` (1.00x: no plan with these lifetimes could be
  smaller) and for planners against the lower bound.
* :data:`SIZE_OVER_PEAK`, :data:`PEAK_LIVE` — the words for those figures.
* :func:`count` — a number and its noun; :func:`first_few` — a long list cut to its
  first items and how many more there are (``a, b and 3 more``).

Pure Python, no imports beyond the standard library.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["human_bytes", "exact_bytes", "tick_bytes", "ratio", "count", "first_few", "delta_bytes", "growth",
           "SIZE_OVER_PEAK", "PEAK_LIVE", "parse_bytes"]

#: the name of ``Arena.size_over_peak`` wherever it is shown
SIZE_OVER_PEAK = "size/peak"
#: the name of ``Arena.peak_bytes`` wherever it is shown: the most bytes alive at once
PEAK_LIVE = "peak live"


def human_bytes(n: int | None) -> str:
    """1536 -> '1.5 KiB' (binary units; exact bytes below 1 KiB; ``None`` -> '-')."""
    if n is None:
        return "-"
    n = int(n)
    if abs(n) < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024.0
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if n < 100 else f"{n:.0f} {unit}"
    return f"{n} B"  # pragma: no cover


#: the units :func:`parse_bytes` reads (binary, as :func:`human_bytes` writes them)
_UNITS = {"b": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


def parse_bytes(text: str) -> int:
    """A size as a user types it: ``262144``, ``256KiB``, ``1.5 MiB``, ``2GiB`` (binary units, any case) ->
    bytes. Raises ``ValueError`` naming the units it reads for anything else (``256KB``: say KiB), a negative
    size, or a fraction of a byte."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = (m.group(2) or "b").lower() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: a number of bytes, or one with KiB, MiB or GiB (256KiB)")
    n = Fraction(m.group(1)) * _UNITS[unit]
    if n.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(n)


def exact_bytes(n: int) -> str:
    """6912 -> '6,912 B (6.8 KiB)': the exact count, and its binary size from 1 KiB on."""
    return f"{n:,} B" + (f" ({human_bytes(n)})" if abs(n) >= 1024 else "")


def tick_bytes(n: int) -> str:
    """A byte tick, always exact: 16 KiB, 1.5 MiB, 1.25 MiB, 1,280 B.

    A tick marks one exact value, so its label never rounds: up to three decimals
    in the largest unit that shows the value exactly (1.125 MiB), else the next
    unit down (1,088 KiB), and bytes below 16 KiB that are not whole KiB (1,280 B).
    """
    n = int(n)
    if 1024 < n < 16384 and n % 1024:  # 1,280 B reads better than 1.25 KiB
        return f"{n:,} B"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    k = 0
    while k < len(units) - 1 and n >= 1024 ** (k + 1):
        k += 1
    for k in range(k, -1, -1):
        v = n / 1024 ** k
        if round(v, 3) * 1024 ** k == n:  # exact with at most three decimals
            text = f"{v:,.3f}".rstrip("0").rstrip(".")
            return f"{text} {units[k]}"
    return f"{n:,} B"  # pragma: no cover - k = 0 is always exact


def ratio(r: float | None, times: str = "x") -> str:
    """2.0 -> '2.00x' (``times="×"`` for typeset output); ``None`` (nothing to compare) -> '-'."""
    return "-" if r is None else f"{r:.2f}{times}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """(1, "tensor") -> '1 tensor'; (3, "tensor") -> '3 tensors'."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def first_few(items, limit: int, sep: str = ", ", more: str = " and {n} more") -> str:
    """The first ``limit`` of ``items`` joined by ``sep``, then ``more`` with ``{n}`` the number left out.

    ``(["a", "b", "c"], 2)`` -> ``'a, b and 1 more'``; nothing is added when every item is shown.
    """
    items = list(items)
    shown = sep.join(map(str, items[:limit]))
    return shown + more.format(n=len(items) - limit) if len(items) > limit else shown


def delta_bytes(n: int | None) -> str:
    """A change in bytes, signed: '+36 KiB', '-1.5 KiB', '0 B' (``None`` -> '-')."""
    if n is None:
        return "-"
    return "0 B" if n == 0 else ("+" if n > 0 else "-") + human_bytes(abs(int(n)))


def growth(g: float | None) -> str:
    """A relative change: 0.125 -> '+12.5%', -0.5 -> '-50.0%'; from nothing: 'new'; ``None`` -> '-'."""
    if g is None:
        return "-"
    if g == float("inf"):
        return "new"
    if g == 0:
        return "0%"
    pct = abs(g) * 100
    return f"{'+' if g > 0 else '-'}{pct:.1f}%" if pct >= 0.1 else f"{'+' if g > 0 else '-'}{pct:.2g}%"
