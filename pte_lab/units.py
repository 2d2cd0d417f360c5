"""The one vocabulary for quantities: every view, plot, CLI line and runtime message uses it.

* :func:`human_bytes` — binary units (``1.5 KiB``; exact bytes below 1 KiB); :func:`tick_bytes`
  the same for axis ticks (``16 KiB``, ``1,280 B``: no decimal that hides bytes).
* :func:`delta_bytes`, :func:`growth` — a change: ``+36 KiB``, ``-4.0 KiB``; ``+12.5%``.
* :func:`ratio` — how much bigger one size is than another (``1.02x``); used
  for an arena's ``size / peak`` (1.00x: no plan with these lifetimes could be
  smaller) and for planners against the lower bound.
* :data:`SIZE_OVER_PEAK`, :data:`PEAK_LIVE` — the words for those figures.
* :func:`parse_bytes`, :func:`parse_whole` — a size or a count as a user types it, exact, refused beyond
  :data:`INT64_MAX` (never wrapped).
* :func:`align_up` — a size or an offset rounded up to an alignment (ints or integer numpy arrays).
* :func:`count` — a number and its noun; :func:`first_few` — a long list cut to its
  first items and how many more there are (``a, b and 3 more``).

Pure Python, no imports beyond the standard library.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction
from typing import TypeVar, overload

__all__ = ["human_bytes", "exact_bytes", "capacity_bytes", "tick_bytes", "ratio", "count", "first_few", "delta_bytes", "growth",
           "SIZE_OVER_PEAK", "PEAK_LIVE", "parse_bytes", "parse_whole", "quoted", "check_int64", "INT64_MAX",
           "local_minute", "align_up"]

#: the name of ``Arena.size_over_peak`` wherever it is shown
SIZE_OVER_PEAK = "size/peak"
#: the name of ``Arena.peak_bytes`` wherever it is shown: the most bytes alive at once
PEAK_LIVE = "peak live"


def human_bytes(n: int | None) -> str:
    """1536 -> '1.5 KiB' (binary units; exact bytes below 1 KiB; ``None`` -> '-').

    Exact on any int (no float division: a figure beyond what a float holds still prints)."""
    if n is None:
        return "-"
    n = int(n)
    if abs(n) < 1024:
        return f"{n} B"
    for k, unit in enumerate(("KiB", "MiB", "GiB", "TiB", "PiB"), 1):
        den = 1 << (10 * k)  # 1024 ** k
        if abs(n) < den << 10 or unit == "PiB":
            # n / den with one decimal below 100 (none from 100), rounded half to even as _fixed rounds: in
            # integers (a figure is made for every row of every table)
            places = 1 if n < 100 * den else 0
            scaled, rest = divmod(abs(n) * 10 ** places, den)
            if 2 * rest > den or (2 * rest == den and scaled & 1):
                scaled += 1
            whole, part = divmod(scaled, 10 ** places)
            return ("-" if n < 0 and scaled else "") + str(whole) + (f".{part}" if places else "") + f" {unit}"
    return f"{n} B"  # pragma: no cover


def _fixed(v: Fraction, places: int, commas: bool = False) -> str:
    """``v`` with ``places`` decimals, rounded half to even as ``f"{x:.{places}f}"`` rounds a float's exact value
    (the same text wherever the float is exact), for any size of ``v``."""
    scaled = round(v * 10 ** places)
    whole, part = divmod(abs(scaled), 10 ** places)
    text = f"{whole:,}" if commas else str(whole)
    return ("-" if scaled < 0 else "") + text + (f".{part:0{places}d}" if places else "")


#: the units :func:`parse_bytes` reads (binary, as :func:`human_bytes` writes them)
#: the units a size may carry (any case): binary (KiB, MiB, GiB: what pte_lab prints) and decimal (kB, MB, GB:
#: what a phone's or a board's data sheet says)
_UNITS = {"b": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3}

#: the largest size or count pte_lab takes from a user or a file: what int64 holds (ExecuTorch's sizes, numpy's
#: arithmetic); beyond it a figure is refused, never wrapped
INT64_MAX = 2 ** 63 - 1


def quoted(text) -> str:
    """What a user typed, for a message: quoted (``repr``), its middle left out when long."""
    text = str(text)
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}...{text[-8:]!r} ({len(text):,} characters)"


def _int64(n: int, text) -> int:
    if not -INT64_MAX - 1 <= n <= INT64_MAX:
        raise ValueError(f"{quoted(text)} is beyond what int64 holds (at most {INT64_MAX:,})")
    return n


def check_int64(n: int, what: str) -> int:
    """``n`` (an int a caller gave: a budget, a value to predict at) when int64 holds it; else ``ValueError``
    naming ``what``, one line (a huge number said by its bits, never written out)."""
    n = int(n)
    if -INT64_MAX - 1 <= n <= INT64_MAX:
        return n
    shown = f"{n:,}" if n.bit_length() <= 128 else f"(a number of {n.bit_length():,} bits)"
    raise ValueError(f"{what} {shown} is beyond what int64 holds (at most {INT64_MAX:,})")


def parse_bytes(text: str) -> int:
    """A size as a user types it: ``262144``, ``256KiB``, ``1.5 MiB``, ``2GiB`` (binary units), ``300MB``,
    ``256kB`` (decimal units: 300,000,000 and 256,000 bytes), any case -> bytes. Raises ``ValueError`` naming
    the units it reads for anything else, a negative size, a fraction of a byte, or a size beyond what int64
    holds (:data:`INT64_MAX`)."""
    m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*([A-Za-z]*)\s*", str(text), re.ASCII)  # 0-9 only
    unit = (m.group(3) or "b").lower() if m else None
    if m is None or unit not in _UNITS or len(m.group(2) or "") > 30:
        raise ValueError(f"{quoted(text)} is not a size: a number of bytes, or one with KiB, MiB or GiB (256KiB) or "
                         f"kB, MB or GB (300MB: decimal)")
    if len(m.group(1).lstrip("0")) > 20:  # beyond int64 in any unit: not worth converting
        _int64(10 ** 20, text)
    n = (int(m.group(1)) + Fraction(int(m.group(2) or "0"), 10 ** len(m.group(2) or ""))) * _UNITS[unit]
    if n.denominator != 1:
        raise ValueError(f"{quoted(text)} is not a whole number of bytes")
    return _int64(int(n), text)


def parse_whole(text, least: int | None = None) -> int:
    """A count as a user types it (``800``, ``-3``) -> int, exact. Raises ``ValueError`` (one line) for anything
    else, a count below ``least``, or one beyond what int64 holds (:data:`INT64_MAX`): pte_lab refuses it
    rather than wrap it."""
    m = re.fullmatch(r"\s*([+-]?)(\d+)\s*", str(text), re.ASCII)  # 0-9 only
    if m is None:
        raise ValueError(f"{quoted(text)} is not a whole number")
    if len(m.group(2).lstrip("0")) > 20:
        _int64(10 ** 20, text)
    n = _int64(int(m.group(1) + m.group(2)), text)
    if least is not None and n < least:
        raise ValueError(f"must be at least {least}, not {n}")
    return n


_Sized = TypeVar("_Sized")


@overload
def align_up(n: int, alignment: int) -> int: ...
@overload
def align_up(n: _Sized, alignment: int | _Sized) -> _Sized: ...
def align_up(n, alignment):
    """``n`` rounded up to the next multiple of ``alignment`` (a positive int): ``align_up(17, 16) == 32``,
    ``align_up(32, 16) == 32``, ``align_up(0, 16) == 0``. The one home of this rounding: an int, or an integer
    numpy array (element-wise; ``alignment`` may be an array too), exact at any size (no float)."""
    return -(-n // alignment) * alignment


def exact_bytes(n: int) -> str:
    """6912 -> '6,912 B (6.8 KiB)': the exact count, and its binary size from 1 KiB on."""
    return f"{n:,} B" + (f" ({human_bytes(n)})" if abs(n) >= 1024 else "")


def capacity_bytes(n: int) -> str:
    """A budget's or a region's size: 262104 -> '262,104 B (255.96 KiB)', 262144 -> '262,144 B (256 KiB)'.

    As :func:`exact_bytes`, but the binary size never rounds across a whole number of its unit (255.96 KiB is
    not 256 KiB: that reads as another size, the one a budget is often given as): a decimal more where the
    rounding would cross one, up to three."""
    n = int(n)
    text = human_bytes(n)
    if abs(n) < 1024:
        return f"{n:,} B"
    number, unit = text.split(" ")
    den = 1024 ** (("KiB", "MiB", "GiB", "TiB", "PiB").index(unit) + 1)
    v = Fraction(abs(n), den)
    places = len(number.partition(".")[2])
    while places < 3:
        shown = Fraction(round(v * 10 ** places), 10 ** places)
        if shown == v or int(shown) == int(v):  # exact, or on the same whole number of the unit
            break
        places += 1
    if places > len(number.partition(".")[2]):
        text = ("-" if n < 0 else "") + _fixed(v, places) + f" {unit}"
    return f"{n:,} B ({text})"


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
    top = 0
    while top < len(units) - 1 and n >= 1024 ** (top + 1):
        top += 1
    for k in range(top, -1, -1):
        v = Fraction(n, 1024 ** k)
        if (v * 1000).denominator == 1:  # exact with at most three decimals
            text = _fixed(v, 3, commas=True).rstrip("0").rstrip(".")
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


def local_minute(seconds: float) -> str:
    """A time (seconds since the epoch) in local time, to the minute: ``2026-12-05 07:44``."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))
