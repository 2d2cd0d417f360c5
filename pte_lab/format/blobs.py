"""Reading a program's blobs on demand: delegate blobs and named data, a span at a time.

:func:`pte_lab.format.read` never reads segment data. What needs a blob's
bytes (hashing them, reading a delegate's declared memory) asks for the spans
it needs through :func:`program_reader`: the file again for a path, the
buffer for bytes, never more than asked for.
"""

from __future__ import annotations

from contextlib import contextmanager
from collections.abc import Callable, Iterator

from ..errors import PteLabError
from .program_tables import RawDelegate, RawProgram
from .regular_file import open_regular

__all__ = ["program_reader", "held_open", "blob_reader", "WHOLE_BLOB_BYTES", "delegate_span", "named_data_span"]

Reader = Callable[[int, int], bytes]

#: a blob up to this size is read whole, in one read, by :func:`blob_reader` (a larger one a span at a time)
WHOLE_BLOB_BYTES = 1 << 16


def program_reader(raw: RawProgram, path: str | None) -> Reader | None:
    """``read(offset, n)``: ``n`` bytes at ``offset`` of the program (a file offset; inside a bundled
    program, an offset in the program it carries). None when the bytes are not available (the program
    was read from a stream that is gone)."""
    base = raw.program_span[0] if raw.program_span else 0
    if raw.container is not None:
        mv = raw.container
        return lambda off, n: bytes(mv[base + off : base + off + n])
    if path is None:
        return None
    return _FileReader(path)


class _FileReader:
    """``read(offset, n)`` of a program file: opened for each read, or once for all the reads inside
    :func:`held_open` (at the first of them)."""

    __slots__ = ("path", "file", "held")

    def __init__(self, path: str):
        self.path = path
        self.file = None
        self.held = False

    def __call__(self, off: int, n: int) -> bytes:
        try:
            f = self.file
            if f is None:
                if not self.held:
                    with open_regular(self.path, "a program") as f:
                        f.seek(off)
                        return f.read(n)
                f = self.file = open_regular(self.path, "a program")
            f.seek(off)
            return f.read(n)
        except OSError as exc:
            raise PteLabError(f"{self.path}: cannot read its blobs again ({exc.strerror or exc})") from None


@contextmanager
def held_open(read: Reader | None) -> Iterator[Reader | None]:
    """``read`` (from :func:`program_reader`), its file opened once for every read inside the block, at the first
    read (a check of each of many blobs' first bytes would open it for each; a block that reads nothing opens
    nothing); a file that does not open is left to each read, which says why as it did. Blocks nest: the
    outermost closes the file."""
    if not isinstance(read, _FileReader) or read.held:
        yield read
        return
    read.held = True
    try:
        yield read
    finally:
        read.held = False
        f, read.file = read.file, None
        if f is not None:
            f.close()


def blob_reader(read: Reader, offset: int, size: int) -> Reader:
    """``read(off, n)`` within the ``size``-byte blob at ``offset`` of the program (``read`` from
    :func:`program_reader`): a blob of up to :data:`WHOLE_BLOB_BYTES` is read whole at the first read, in one read,
    and the later reads are slices of it; a larger one is read a span at a time. A read past the file's end gives
    the bytes there are, as ``read`` does."""
    if size > WHOLE_BLOB_BYTES:
        return lambda off, n: read(offset + off, n)
    whole: list[bytes] = []

    def get(off: int, n: int) -> bytes:
        if not whole:
            whole.append(read(offset, size))
        return whole[0][off : off + n]

    return get


def delegate_span(raw: RawProgram, d: RawDelegate) -> tuple[int, int]:
    """(offset in the program, bytes) of a delegate's blob, inline or in a segment (both checked by the reader)."""
    if d.location == "inline":
        return raw.inline_delegate_spans[d.index]
    seg = raw.segments[d.index]
    return seg.offset, seg.size


def named_data_span(raw: RawProgram, key: str) -> tuple[int, int] | None:
    """(offset, bytes) of the program's own named data ``key`` (None: the program has no such key)."""
    for k, idx in raw.named_data:
        if k == key:
            seg = raw.segments[idx]
            return seg.offset, seg.size
    return None
