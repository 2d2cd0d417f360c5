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
from .program import RawDelegate, RawProgram
from .regular_file import open_regular

__all__ = ["program_reader", "held_open", "delegate_span", "named_data_span"]

Reader = Callable[[int, int], bytes]


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
    :func:`held_open`."""

    __slots__ = ("path", "file")

    def __init__(self, path: str):
        self.path = path
        self.file = None

    def __call__(self, off: int, n: int) -> bytes:
        try:
            if self.file is not None:
                self.file.seek(off)
                return self.file.read(n)
            with open_regular(self.path, "a program") as f:
                f.seek(off)
                return f.read(n)
        except OSError as exc:
            raise PteLabError(f"{self.path}: cannot read its blobs again ({exc.strerror or exc})") from None


@contextmanager
def held_open(read: Reader | None) -> Iterator[Reader | None]:
    """``read`` (from :func:`program_reader`), its file opened once for every read inside the block (a check of
    each of many blobs' first bytes would open it for each); a file that does not open is left to each read, which
    says why as it did."""
    if not isinstance(read, _FileReader) or read.file is not None:
        yield read
        return
    try:
        f = open_regular(read.path, "a program")
    except (OSError, PteLabError):
        yield read
        return
    read.file = f
    try:
        yield read
    finally:
        read.file = None
        f.close()


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
