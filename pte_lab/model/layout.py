"""Where a file's bytes go: header, tables, each constant, delegate blobs, named data, padding.

:func:`file_layout` lists regions in file order; their ``bytes`` add up to the
file size. Blobs (each constant buffer, delegate blob, named-data and
mutable-data segment) are hashed so that identical ones stored twice are found
(an XNNPACK export whose identical weights stopped being shared grows by their
size). Hashing reads those bytes: the file again for a path, the buffer for
bytes, never more than the file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..errors import PteLabError
from ..format import TensorDataLocation
from ..format.blobs import program_reader
from ..units import human_bytes
from .dtypes import SCALAR_TYPES

if TYPE_CHECKING:  # pragma: no cover
    from .pte import Pte

__all__ = ["LAYOUT_COLUMNS", "LayoutRow", "file_layout", "duplicate_phrase", "flatbuffer_regions", "PREFIX_REGIONS"]

#: the columns of ``Pte.file_layout`` (the fields of :class:`LayoutRow` but its ``backend``)
LAYOUT_COLUMNS = ("region", "name", "owner", "offset", "bytes", "sha256", "duplicate_of")
#: the regions of the program's bytes before its segments (``Pte.flatbuffer_size``), in the words every view
#: uses: "flatbuffer" is the program's tables alone; inline constants and inline delegate data are their own
PREFIX_REGIONS = ("header", "flatbuffer", "inline constant", "inline delegate")
#: regions whose bytes are blobs worth comparing
BLOB_REGIONS = ("constant", "inline constant", "delegate", "inline delegate", "named data", "mutable data")
_BLOBS = frozenset(BLOB_REGIONS)


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """One region of the file: its kind, name, owning methods, place and bytes, and its blob's digest."""

    region: str
    name: str
    #: the methods using it, comma-separated ("" for the file's own regions)
    owner: str
    offset: int
    bytes: int
    #: the first 16 hex digits of the blob's sha256 (None: not a blob, or not hashed)
    sha256: str | None = None
    #: the name of the first identical blob stored earlier in the file (None: none)
    duplicate_of: str | None = None
    #: the backend of a delegate blob (what diffs compare delegate blobs under), "" for every other region
    backend: str = ""

    @property
    def is_blob(self) -> bool:
        """A hashed blob: a constant, delegate blob, named data or mutable data with a digest."""
        return self.sha256 is not None


def byte_reader(pte: "Pte", hashes: bool = True) -> Callable[[int, int], bytes] | None:
    if not hashes:
        return None
    read = program_reader(pte.raw, pte.path)
    if read is None:
        raise PteLabError("the file's bytes are not available to hash: open it from a path or bytes, "
                          "or pass hashes=False")
    return read


def _constant_names(pte: "Pte") -> dict[int, list]:
    """constant buffer index -> [first tensor name, how many tensors name it, {method: None}].

    Worked out per distinct tensor record (values sharing one table share one record): a file may name one
    constant from 100,000 values, and only the first name is shown.
    """
    out: dict[int, list] = {}
    for m in pte.methods.values():
        raw = m.raw
        if not raw.records:
            continue
        uses = np.bincount(raw.record_of, minlength=len(raw.records))
        firsts = np.unique(raw.record_of, return_index=True)[1]  # records are numbered 0.. in order of first use
        for r, rec in enumerate(raw.records):
            t = rec.tensor
            if t is not None and t.data_buffer_idx > 0 and t.location != TensorDataLocation.EXTERNAL:
                got = out.get(t.data_buffer_idx)
                if got is None:
                    got = out[t.data_buffer_idx] = [None, 0, {}]
                if got[0] is None:  # records come in order of first use: this is the first value naming it
                    got[0] = t.fqn or f"{m.name} v{int(firsts[r])} {_dtype(t.scalar_type)}{list(t.sizes)}"
                got[1] += int(uses[r])
                got[2][m.name] = None
    return out


def file_layout(pte: "Pte", hashes: bool = True) -> list[LayoutRow]:
    """The file's regions in file order, gaps included as ``padding`` (``Pte.layout`` keeps them)."""
    raw, h = pte.raw, pte.header
    read = byte_reader(pte, hashes)
    items: list[tuple] = []  # region, name, owner, offset, bytes, backend

    def add(region, name, owner, offset, n, backend=""):
        if n:
            items.append((region, name, owner, offset, n, backend))

    head_end = h.header_end
    add("header", "flatbuffer prelude and extended header" if h.extended else "flatbuffer prelude", "", 0,
        head_end)
    names = _constant_names(pte)
    for i, (off, n) in enumerate(raw.inline_constant_spans):
        add("inline constant", _label(names.get(i), f"constant_buffer[{i}]"), _owners(names.get(i)), off, n)
    delegate_owner: dict[tuple[str, int], tuple[str, str]] = {}
    for m in pte.methods.values():
        for d in m.raw.delegates:
            delegate_owner.setdefault((d.location, d.index), (d.id, m.name))
    for i, (off, n) in enumerate(raw.inline_delegate_spans):
        backend, owner = delegate_owner.get(("inline", i), ("delegate", ""))
        add("inline delegate", f"{backend} blob {i}", owner, off, n, backend)
    for off, n in _table_spans(raw, h):
        add("flatbuffer", "program tables", "", off, n)
    named = {idx: key for key, idx in raw.named_data}
    for s in raw.segments:
        if s.kind == "constants":
            _constant_rows(raw.constant_offsets, s, names, items)
        elif s.kind.startswith("delegate:"):
            backend, owner = delegate_owner.get(("segment", s.index), (s.kind.removeprefix("delegate:"), ""))
            add("delegate", f"{backend} blob (segment {s.index})", owner, s.offset, s.size, backend)
        elif s.kind == "named_data":
            add("named data", named.get(s.index, f"segment {s.index}"), "", s.offset, s.size)
        elif s.kind == "mutable_data":
            add("mutable data", f"segment {s.index}", "", s.offset, s.size)
        else:
            add("unused segment", f"segment {s.index}", "", s.offset, s.size)
    # file order, the larger of two regions at one offset first: a key in the tuple sorts in C, not per item
    keyed = sorted([(item[3], -item[4], i) for i, item in enumerate(items)])
    rows, cursor = [], 0
    for off, neg, i in keyed:
        if off > cursor:
            rows.append(("padding", "", "", cursor, off - cursor, ""))
        rows.append(items[i])
        cursor = max(cursor, off - neg)
    if cursor < h.file_size:
        rows.append(("padding", "", "", cursor, h.file_size - cursor, ""))
    if read is None:
        return [LayoutRow(r, name, owner, off, n, None, None, backend) for r, name, owner, off, n, backend in rows]
    digests = _digests(rows, read)
    first_seen: dict[str, str] = {}
    out = []
    for region, name, owner, off, n, backend in rows:
        digest = dup = None
        if region in _BLOBS:
            digest = digests.get((off, n))
            if digest is not None:
                dup = first_seen.setdefault(digest, name)
                dup = None if dup == name else dup
        out.append(LayoutRow(region, name, owner, off, n, digest, dup, backend))
    return out


def _constant_rows(offsets, segment, names, items: list) -> None:
    """One row per constant buffer of the constant segment (index 0 is the placeholder for "no data"): each
    runs to the next larger offset, or to the segment's end. The spans are worked out for all of them at
    once, and the loop does no more than name each (a file may hold 100,000 small constants)."""
    if len(offsets) < 2:
        return
    offs = np.asarray(offsets, dtype=np.int64)
    ends = np.sort(np.append(offs, segment.size))  # sorted, then repeats dropped (np.unique hashes: slower)
    ends = ends[np.append(True, ends[1:] != ends[:-1])]
    nxt = ends[np.minimum(np.searchsorted(ends, offs[1:], side="right"), len(ends) - 1)]
    sizes = np.where(nxt > offs[1:], nxt, segment.size) - offs[1:]
    starts = (offs[1:] + segment.offset).tolist()
    for b, off, n in zip(range(1, len(offs)), starts, sizes.tolist()):
        if n:
            got = names.get(b)
            items.append(("constant", f"buffer {b}", "", off, n, "") if got is None else
                         ("constant", _label(got, f"buffer {b}"), _owners(got), off, n, ""))


def _table_spans(raw, h) -> list[tuple[int, int]]:
    """(offset, bytes) of the program's tables: what the inline data leaves of the bytes before the segments."""
    inline = sorted((off, off + n) for off, n in raw.inline_constant_spans + raw.inline_delegate_spans if n)
    out, cursor = [], h.header_end
    for a, b in inline + [(h.program_size, h.program_size)]:
        out.append((cursor, max(0, a - cursor)))
        cursor = max(cursor, b)
    return out


def flatbuffer_regions(pte: "Pte") -> dict[str, int]:
    """Bytes of each of :data:`PREFIX_REGIONS` (those present) in the program's bytes before its segments,
    as :func:`file_layout` counts them (no bytes read): what ``inspect`` and ``diff`` call the flatbuffer (the
    tables) and the inline data beside it."""
    raw, h = pte.raw, pte.header
    got = {"header": h.header_end, "flatbuffer": sum(n for _, n in _table_spans(raw, h)),
           "inline constant": sum(n for _, n in raw.inline_constant_spans),
           "inline delegate": sum(n for _, n in raw.inline_delegate_spans)}
    return {k: v for k, v in got.items() if v}


#: blobs closer together than this are read in one piece (a file of 100,000 small constants: one read, not
#: one per constant)
_READ_TOGETHER = 1 << 20
#: blobs this small are hashed once per distinct content (100,000 constants of a few bytes share few contents)
_SMALL_BLOB = 64


def _digests(rows, read) -> dict[tuple[int, int], str | None]:
    """``(offset, bytes)`` -> digest of each distinct blob span, hashed once however many rows name it.

    A blob that overlaps one already hashed is not a copy stored apart: it is not hashed (None), so the
    bytes hashed never exceed the file's however the file's tables overlap their spans. Spans are read in
    groups of neighbours (disjoint ranges of the file, so never more than the file is read).
    """
    spans, hashed_to = [], 0  # rows come in file order
    seen: set[tuple[int, int]] = set()
    for region, _name, _owner, off, n, _backend in rows:
        if region in _BLOBS and (off, n) not in seen:
            seen.add((off, n))
            if off >= hashed_to:
                spans.append((off, n))
                hashed_to = off + n
    out: dict[tuple[int, int], str | None] = dict.fromkeys(seen)
    small: dict[bytes, str] = {}  # a small blob's bytes -> its digest: hashed once per distinct content
    i = 0
    while i < len(spans):
        start = spans[i][0]
        j = i + 1
        while j < len(spans) and spans[j][0] + spans[j][1] - start <= _READ_TOGETHER:
            j += 1
        end = spans[j - 1][0] + spans[j - 1][1]
        chunk = memoryview(read(start, end - start))
        for off, n in spans[i:j]:
            piece = chunk[off - start : off - start + n]
            if n <= _SMALL_BLOB:
                key = piece.tobytes()
                digest = small.get(key)
                if digest is None:
                    digest = small[key] = hashlib.sha256(key).hexdigest()[:16]
            else:
                digest = hashlib.sha256(piece).hexdigest()[:16]
            out[(off, n)] = digest
        i = j
    return out


def duplicate_phrase(name: str, region: str, nbytes: int, first: str) -> str:
    """A blob whose bytes repeat an earlier one, in words (findings and diffs): ``name (region, 1.0 KiB) = first``."""
    return f"{name} ({region}, {human_bytes(nbytes)}) = {first}"


def _dtype(code: int) -> str:
    return SCALAR_TYPES.get(code, (f"type{code}", 0))[0]


def _label(names, default: str) -> str:
    if not names:
        return default
    first, uses = names[0], names[1]
    return first if uses <= 1 else f"{first} (+{uses - 1} more)"


def _owners(names) -> str:
    return ", ".join(names[2]) if names else ""
