"""Where a file's bytes go: header, tables, each constant, delegate blobs, named data, padding.

``file_regions`` lists regions in file order; their ``bytes`` add up to the
file size. Blobs (each constant buffer, delegate blob, named-data and
mutable-data segment) are hashed so that identical ones stored twice are found
(an XNNPACK export whose identical weights stopped being shared grows by their
size). Hashing reads those bytes: the file again for a path, the buffer for
bytes, never more than the file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..errors import PteLabError
from ..format import TensorDataLocation
from ..format.blobs import program_reader
from ..vocabulary import DelegateSegment, Region, SegmentKind
from .arrays import unique
from .dtypes import SCALAR_TYPES

if TYPE_CHECKING:  # pragma: no cover
    from .pte import Pte

__all__ = ["LAYOUT_COLUMNS", "Layout", "LayoutRow", "file_regions", "flatbuffer_regions",
           "PREFIX_REGIONS"]

#: the columns of ``Pte.file_layout`` (the fields of :class:`LayoutRow` but its ``backend``)
LAYOUT_COLUMNS = ("region", "name", "owner", "offset", "bytes", "sha256", "duplicate_of")
#: the regions of the program's bytes before its segments (``Pte.flatbuffer_size``): ``Region.FLATBUFFER`` is the
#: program's tables alone; inline constants and inline delegate data are their own
PREFIX_REGIONS = (Region.HEADER, Region.FLATBUFFER, Region.INLINE_CONSTANT, Region.INLINE_DELEGATE)
#: regions whose bytes are blobs worth comparing
BLOB_REGIONS = (Region.CONSTANT, Region.INLINE_CONSTANT, Region.DELEGATE, Region.INLINE_DELEGATE, Region.NAMED_DATA,
                Region.MUTABLE_DATA)
_BLOBS = frozenset(BLOB_REGIONS)


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """One region of the file: its kind, name, owning methods, place and bytes, and its blob's digest."""

    region: Region
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


class Layout(Sequence[LayoutRow]):
    """The file's regions (``file_regions``) as columns: a :class:`LayoutRow` is made when a row is read.

    A file may hold 110,000 constants: totals, duplicates and diffs read the columns (``region``, ``bytes``,
    ...: lists, one item a row) and make records of the rows they show only.
    """

    __slots__ = ("region", "name", "owner", "offset", "bytes", "sha256", "duplicate_of", "backend")

    def __init__(self, region: list, name: list, owner: list, offset: list, bytes: list, sha256: list,
                 duplicate_of: list, backend: list):
        self.region, self.name, self.owner, self.offset, self.bytes = region, name, owner, offset, bytes
        self.sha256, self.duplicate_of, self.backend = sha256, duplicate_of, backend

    @classmethod
    def of(cls, rows) -> "Layout":
        """A :class:`Layout` of ``rows`` (a Layout itself, or :class:`LayoutRow` records)."""
        if isinstance(rows, Layout):
            return rows
        rows = tuple(rows)
        return cls(*([getattr(r, f) for r in rows] for f in cls.__slots__))

    def __len__(self) -> int:
        return len(self.region)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.rows(range(*i.indices(len(self))))
        return LayoutRow(*(getattr(self, f)[i] for f in self.__slots__))

    def __iter__(self) -> Iterator[LayoutRow]:
        return map(LayoutRow, *self._columns())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self._columns() == other._columns()

    def __hash__(self) -> int:
        return hash(tuple(map(tuple, self._columns())))

    def _columns(self) -> tuple[list, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def rows(self, indices) -> tuple[LayoutRow, ...]:
        """The records of the rows at ``indices``."""
        return tuple(self.take(indices))

    def take(self, indices) -> "Layout":
        """The rows at ``indices``, as a :class:`Layout` (no record made)."""
        indices = list(indices)
        return Layout(*([col[i] for i in indices] for col in self._columns()))

    def __repr__(self) -> str:
        return f"Layout({len(self)} regions, {sum(self.bytes):,} bytes)"


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
        firsts = unique(raw.record_of, return_index=True)[1]  # records are numbered 0.. in order of first use
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


#: ``file_regions(pte, hashes=DUPLICATES)``: hash only the blobs that may have a copy (another blob of their size)
DUPLICATES = "duplicates"


def file_regions(pte: "Pte", hashes: bool | str = True) -> Layout:
    """The file's regions in file order, gaps included as ``Region.PADDING`` (``Pte.layout`` keeps them). ``hashes``:
    every blob's digest (True), none (False), or only those of blobs another blob has the size of
    (:data:`DUPLICATES`: what finding the copies needs; a blob of a size no other has is no copy)."""
    raw, h = pte.raw, pte.header
    read = byte_reader(pte, bool(hashes))
    cols: tuple[list, ...] = ([], [], [], [], [], [])  # region, name, owner, offset, bytes, backend

    def add(region, name, owner, offset, n, backend=""):
        if n:
            for col, v in zip(cols, (region, name, owner, offset, n, backend)):
                col.append(v)

    head_end = h.header_end
    add(Region.HEADER, "flatbuffer prelude and extended header" if h.extended else "flatbuffer prelude", "", 0,
        head_end)
    names = _constant_names(pte)
    for i, (off, n) in enumerate(raw.inline_constant_spans):
        add(Region.INLINE_CONSTANT, _label(names.get(i), f"constant_buffer[{i}]"), _owners(names.get(i)), off, n)
    delegate_owner: dict[tuple[str, int], tuple[str, str]] = {}
    for m in pte.methods.values():
        for d in m.raw.delegates:
            delegate_owner.setdefault((d.location, d.index), (d.id, m.name))
    for i, (off, n) in enumerate(raw.inline_delegate_spans):
        backend, owner = delegate_owner.get(("inline", i), ("delegate", ""))
        add(Region.INLINE_DELEGATE, f"{backend} blob {i}", owner, off, n, backend)
    for off, n in _table_spans(raw, h):
        add(Region.FLATBUFFER, "program tables", "", off, n)
    named = {idx: key for key, idx in raw.named_data}
    for s in raw.segments:
        if s.kind == SegmentKind.CONSTANTS:
            _constant_rows(raw.constant_offsets, s, names, cols)
        elif isinstance(s.kind, DelegateSegment):
            backend, owner = delegate_owner.get(("segment", s.index), (s.kind.backend, ""))
            add(Region.DELEGATE, f"{backend} blob (segment {s.index})", owner, s.offset, s.size, backend)
        elif s.kind == SegmentKind.NAMED_DATA:
            add(Region.NAMED_DATA, named.get(s.index, f"segment {s.index}"), "", s.offset, s.size)
        elif s.kind == SegmentKind.MUTABLE_DATA:
            add(Region.MUTABLE_DATA, f"segment {s.index}", "", s.offset, s.size)
        else:
            add(Region.UNUSED_SEGMENT, f"segment {s.index}", "", s.offset, s.size)
    region, name, owner, offset, nbytes, backend = _in_file_order(cols, h.file_size)
    if read is None:
        return Layout(region, name, owner, offset, nbytes, [None] * len(region), [None] * len(region), backend)
    blobs = np.flatnonzero(np.fromiter((r in _BLOBS for r in region), dtype=bool, count=len(region)))
    digests = _digests(np.asarray(offset, dtype=np.int64)[blobs], np.asarray(nbytes, dtype=np.int64)[blobs], read,
                       shared_sizes_only=hashes == DUPLICATES)
    sha, dup = [None] * len(region), [None] * len(region)
    first_seen: dict[str, str] = {}
    for i, digest in zip(blobs.tolist(), digests):
        sha[i] = digest
        if digest is not None:
            first = first_seen.setdefault(digest, name[i])
            if first != name[i]:
                dup[i] = first
    return Layout(region, name, owner, offset, nbytes, sha, dup, backend)


def _in_file_order(cols, file_size: int) -> tuple[list, ...]:
    """The regions' columns in file order, the larger of two regions at one offset first (then the order they
    were added), a ``padding`` row in each gap and after the last region up to ``file_size``: sorted and
    padded for every row at once (a file may hold 110,000 constants)."""
    region, name, owner, offset, nbytes, backend = cols
    if not region:
        return ([Region.PADDING], [""], [""], [0], [file_size], [""]) if file_size else cols
    off, n = np.asarray(offset, dtype=np.int64), np.asarray(nbytes, dtype=np.int64)
    order = np.lexsort((-n, off))  # stable: equal keys keep the order they were added in
    off, n = off[order], n[order]
    reached = np.maximum.accumulate(off + n)  # where the regions so far end
    cursor = np.concatenate(([0], np.maximum(reached[:-1], 0)))
    gap = off > cursor
    tail = int(max(reached[-1], 0)) < file_size
    total = len(off) + int(gap.sum()) + tail
    at = np.arange(len(off)) + np.cumsum(gap)  # each region's row: after the paddings before it
    pad = at[gap] - 1

    def column(values, padding, last=None):
        out = np.empty(total, dtype=object if last is None else np.int64)
        out[at] = np.asarray(values, dtype=object)[order] if last is None else values
        out[pad] = padding
        if tail:
            out[-1] = padding if last is None else last
        return out.tolist()

    text = [column(c, v) for c, v in ((region, Region.PADDING), (name, ""), (owner, ""), (backend, ""))]
    end = int(max(reached[-1], 0))
    return (text[0], text[1], text[2], column(off, cursor[gap], end),
            column(n, off[gap] - cursor[gap], file_size - end), text[3])


def _constant_rows(offsets, segment, names, cols) -> None:
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
    kept = np.flatnonzero(sizes) + 1  # the buffers with bytes
    starts, sizes = (offs[kept] + segment.offset).tolist(), sizes[kept - 1].tolist()
    kept = kept.tolist()
    region, name, owner, offset, nbytes, backend = cols
    region += [Region.CONSTANT] * len(kept)
    name += [f"buffer {b}" if b not in names else _label(names[b], f"buffer {b}") for b in kept]
    owner += ["" if b not in names else _owners(names[b]) for b in kept]
    offset += starts
    nbytes += sizes
    backend += [""] * len(kept)


def _table_spans(raw, h) -> list[tuple[int, int]]:
    """(offset, bytes) of the program's tables: what the inline data leaves of the bytes before the segments
    (each distinct span once: a flatbuffer may name one vector from many tables)."""
    inline = sorted({(off, off + n) for off, n in raw.inline_constant_spans + raw.inline_delegate_spans if n})
    out, cursor = [], h.header_end
    for a, b in inline + [(h.program_size, h.program_size)]:
        out.append((cursor, max(0, a - cursor)))
        cursor = max(cursor, b)
    return out


def flatbuffer_regions(pte: "Pte") -> dict[Region, int]:
    """Bytes of each of :data:`PREFIX_REGIONS` (those present) in the program's bytes before its segments,
    as ``file_regions`` counts them (no bytes read): what ``inspect`` and ``diff`` call the flatbuffer (the
    tables) and the inline data beside it."""
    raw, h = pte.raw, pte.header
    got = {Region.HEADER: h.header_end, Region.FLATBUFFER: sum(n for _, n in _table_spans(raw, h)),
           Region.INLINE_CONSTANT: raw.inline_constant_bytes, Region.INLINE_DELEGATE: raw.inline_delegate_bytes}
    return {k: v for k, v in got.items() if v}


#: blobs closer together than this are read in one piece (a file of 100,000 small constants: one read, not
#: one per constant)
_READ_TOGETHER = 1 << 20
#: blobs this small are hashed once per distinct content (100,000 constants of a few bytes share few contents)
_SMALL_BLOB = 64
#: a small blob's row: its bytes, its length, zeros to a whole number of 8-byte words
_ROW_BYTES = 72
#: odd 64-bit multipliers, one per word of a row
_MIX = np.array([0x9E3779B97F4A7C15 ^ (k * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF) | 1
                 for k in range(_ROW_BYTES // 8)], dtype=np.uint64)


def _digests(offs, ns, read, shared_sizes_only: bool = False) -> list[str | None]:
    """The digest of each blob span (``offs``, ``ns``: arrays in file order, a span repeated next to itself),
    each distinct span hashed once however many rows name it; with ``shared_sizes_only``, only spans whose
    size another distinct span has (the others are None: no copy of them is stored).

    A blob that overlaps one already hashed is not a copy stored apart: it is not hashed (None), so the
    bytes hashed never exceed the file's however the file's tables overlap their spans. Spans are read in
    groups of neighbours (disjoint ranges of the file, so never more than the file is read).
    """
    if not len(offs):
        return []
    new = np.ones(len(offs), dtype=bool)
    new[1:] = (offs[1:] != offs[:-1]) | (ns[1:] != ns[:-1])
    d_off, d_n = offs[new], ns[new]  # the distinct spans
    d_end = d_off + d_n
    hashed = np.ones(len(d_off), dtype=bool)
    if np.any(d_off[1:] < np.maximum.accumulate(d_end)[:-1]):  # overlapping spans: the first of each is hashed
        hashed_to = 0
        for k, (off, end) in enumerate(zip(d_off.tolist(), d_end.tolist())):
            hashed[k] = off >= hashed_to
            if hashed[k]:
                hashed_to = end
    if shared_sizes_only:
        sizes, at, counts = np.unique(d_n[hashed], return_inverse=True, return_counts=True)
        hashed[np.flatnonzero(hashed)[counts[at.reshape(-1)] < 2]] = False
    todo = np.flatnonzero(hashed)
    h_off, h_end = d_off[todo], d_end[todo]  # disjoint, in file order: their ends increase
    out = np.full(len(d_off), None, dtype=object)
    small: dict[bytes, str] = {}  # a small blob's bytes -> its digest: hashed once per distinct content
    i = 0
    while i < len(todo):
        start = int(h_off[i])
        j = max(i + 1, int(np.searchsorted(h_end, start + _READ_TOGETHER, side="right")))
        chunk = memoryview(read(start, int(h_end[j - 1]) - start))
        few = np.flatnonzero(h_end[i:j] - h_off[i:j] <= _SMALL_BLOB) + i
        for k in np.flatnonzero(h_end[i:j] - h_off[i:j] > _SMALL_BLOB).tolist():
            a, b = int(h_off[i + k]) - start, int(h_end[i + k]) - start
            out[todo[i + k]] = hashlib.sha256(chunk[a:b]).hexdigest()[:16]
        if len(few):
            out[todo[few]] = _small_digests(chunk, h_off[few] - start, h_end[few] - h_off[few], small)
        i = j
    return out[np.cumsum(new) - 1].tolist()


def _small_digests(chunk, offs, ns, small: dict[bytes, str]) -> list[str]:
    """The digests of small blobs (at ``offs`` in ``chunk``, ``ns`` bytes each), hashed once per distinct
    content: the blobs are set side by side in rows of a byte matrix (their length in the last column) and the
    distinct rows found by one sort (a file may hold 110,000 constants of a few bytes)."""
    firsts = np.cumsum(ns) - ns
    rows = np.repeat(np.arange(len(ns)), ns)
    cols = np.arange(int(ns.sum())) - np.repeat(firsts, ns)
    matrix = np.zeros((len(ns), _ROW_BYTES), dtype=np.uint8)
    matrix[rows, cols] = np.frombuffer(chunk, dtype=np.uint8)[np.repeat(offs, ns) + cols]
    matrix[:, _SMALL_BLOB] = ns
    # rows sorted by a 64-bit mix of their words (an integer sort), then checked equal to their group's first
    mixed = (matrix.view(np.uint64) * _MIX).sum(axis=1, dtype=np.uint64)
    _, firsts, which = np.unique(mixed, return_index=True, return_inverse=True)
    if not np.array_equal(matrix, matrix[firsts[which.ravel()]]):  # two contents mixed alike: sort the bytes
        _, firsts, which = np.unique(matrix.view(np.dtype((np.void, _ROW_BYTES))).ravel(), return_index=True,
                                     return_inverse=True)
    digests = []
    for row in matrix[firsts]:
        content = row.tobytes()
        content = content[:content[_SMALL_BLOB]]
        digest = small.get(content)
        if digest is None:
            digest = small[content] = hashlib.sha256(content).hexdigest()[:16]
        digests.append(digest)
    return [digests[k] for k in which.ravel().tolist()]


def _dtype(code: int) -> str:
    return SCALAR_TYPES.get(code, (f"type{code}", 0))[0]


def _label(names, default: str) -> str:
    if not names:
        return default
    first, uses = names[0], names[1]
    return first if uses <= 1 else f"{first} (+{uses - 1} more)"


def _owners(names) -> str:
    return ", ".join(names[2]) if names else ""
