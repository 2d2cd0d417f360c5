"""Reading a source: a ``.pte`` (or the program a bundled ``.bpte`` carries) or a ``.ptd`` from a path, bytes or a
binary file, header first, then only the flatbuffer region (:func:`read`, :func:`read_data`, :func:`identify`)."""

from __future__ import annotations

import io
import os
from typing import BinaryIO, Union

from ..errors import PteFormatError
from ..vocabulary import FileKind
from . import bundled as _bundled
from . import flat_tensor as _flat_tensor
from . import mixups
from .bundled import decode_bundled
from .flat_tensor import RawData, decode_data, parse_data_header
from .header import HEAD_BYTES, SUPPORTED_IDENTIFIERS, parse_header
from .mixups import MIXUPS, MixupKind
from .program_tables import RawProgram, decode_program
from .regular_file import open_regular

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]

__all__ = ["read", "read_data", "identify", "Source", "KINDS"]

#: a program file up to this size is read whole at once (one read; its segments' bytes kept with it), a larger
#: one only up to its flatbuffer's end (its segments are read when asked for)
WHOLE_BYTES = 1 << 20

#: what the identifier at bytes 4..8 says a file is
KINDS = {_bundled.IDENTIFIER: FileKind.BUNDLED, _flat_tensor.IDENTIFIER: FileKind.DATA}


def _read_exact(f: BinaryIO, n: int, what: str, head: bytes = b"") -> memoryview:
    """``head`` followed by the next ``n - len(head)`` bytes of ``f``, in one buffer (never a second copy)."""
    buf = bytearray(n)
    buf[: len(head)] = head
    view = memoryview(buf)
    got = len(head)
    readinto = getattr(f, "readinto", None)
    while got < n:
        if readinto is not None:
            k = readinto(view[got:])
        else:
            chunk = f.read(n - got)
            k = len(chunk)
            view[got : got + k] = chunk
        if not k:
            raise PteFormatError(f"file ended after {got} of the {n} bytes of the {what}")
        got += k
    return view


class _Opened:
    """A source as a binary file positioned at its start, its size, and its path (closed on exit)."""

    def __init__(self, source: Source):
        self.path = None
        self.own = False
        self.mv = None
        self._head = b""  # bytes read from the start so far
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.mv = memoryview(source).cast("B") if isinstance(source, memoryview) else memoryview(source)
            self.size = len(self.mv)
            return
        if isinstance(source, (str, os.PathLike)):
            self.path = os.fspath(source)
            self.f = open_regular(self.path, "a program or data file")
            self.own = True
        elif hasattr(source, "read"):
            self.f = source
            name = getattr(source, "name", None)
            self.path = name if isinstance(name, str) else None
        else:
            raise TypeError(f"expected a path, bytes or a binary file, not {type(source).__name__}")
        try:
            self.start = self.f.tell()
            self.size = os.fstat(self.f.fileno()).st_size - self.start
        except (AttributeError, OSError, io.UnsupportedOperation):
            self.start = self.f.tell()
            self.f.seek(0, io.SEEK_END)
            self.size = self.f.tell() - self.start
            self.f.seek(self.start)

    def head(self, n: int) -> bytes:
        """The first ``n`` bytes (fewer when the source is shorter); each byte is read once."""
        if self.mv is not None:
            return bytes(self.mv[:n])
        if len(self._head) < n:
            self._head += self.f.read(n - len(self._head))
        return self._head[:n]

    def prefix(self, n: int, what: str) -> memoryview:
        """The first ``n`` bytes (only those are read)."""
        if self.mv is not None:
            return self.mv[:n]
        if n <= len(self._head):
            return memoryview(self._head[:n])
        return _read_exact(self.f, n, what, self._head)

    def whole(self) -> memoryview:
        """Every byte (read, not memory-mapped: a file truncated under a mapping kills the process)."""
        if self.mv is not None:
            return self.mv
        return _read_exact(self.f, self.size, "file", self._head)

    def check_is(self, identifiers: tuple[bytes, ...], expected: str) -> None:
        """Raise :class:`~pte_lab.NotAProgramError` naming what the file is when bytes 4..8 are none of
        ``identifiers`` and it is a file often given by mistake (:mod:`pte_lab.format.mixups`)."""
        head = self.head(8)
        if head[4:8] in identifiers or (head[4:6] == b"ET" and head[6:8].isdigit()):
            return  # the file's own kind (or another schema version: the header names it)
        found = mixups.recognise(self.head(mixups.HEAD_BYTES), self.size,
                                 mixups.zip_source(self.path, self.mv, getattr(self, "f", None)))
        if found is not None and not (expected == ".ptd" and found.kind == MixupKind.PTD):
            raise found.error(expected)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.own:
            self.f.close()


def identify(source: Source) -> FileKind:
    """``"program"`` (.pte), ``"bundled"`` (.bpte) or ``"data"`` (.ptd), from bytes 4..8 only: a
    :class:`~pte_lab.vocabulary.FileKind`, which equals its string."""
    with _Opened(source) as o:
        return KINDS.get(o.head(8)[4:8], FileKind.PROGRAM)


def read(source: Source) -> tuple[RawProgram, str | None]:
    """Read a ``.pte`` (or the program a bundled ``.bpte`` carries) from a path, bytes or binary file.

    Returns the decoded program and the path (or ``None``). Raises
    :class:`PteFormatError` for anything that is not a valid program.
    """
    with _Opened(source) as o:
        kind = KINDS.get(o.head(8)[4:8], FileKind.PROGRAM)
        if kind == FileKind.PROGRAM:
            o.check_is(SUPPORTED_IDENTIFIERS, ".pte")
        elif kind == FileKind.DATA:
            raise MIXUPS[MixupKind.PTD].error()
        if kind == FileKind.BUNDLED:
            whole = o.whole()
            bundle = decode_bundled(whole)
            start, length = bundle.program
            carried = whole[start : start + length]
            header = parse_header(carried[:HEAD_BYTES], length)
            raw = decode_program(carried[: header.program_size], header)
            raw.bundled, raw.container = bundle, whole
            raw.program_span = (start, length)
            return raw, o.path
        if o.mv is None and o.size <= WHOLE_BYTES:
            o.mv = o.whole()  # a small file in one read: its blobs are then read from memory, not opened again
        header = parse_header(o.head(HEAD_BYTES), o.size)
        raw = decode_program(o.prefix(header.program_size, "flatbuffer"), header)
        if o.mv is not None:
            raw.container = o.mv  # bytes in memory already: segment data can be read without a copy
        return raw, o.path


def read_data(source: Source) -> tuple[RawData, str | None]:
    """Read a ``.ptd`` data file's header and tables (never its tensor bytes)."""
    with _Opened(source) as o:
        o.check_is((_flat_tensor.IDENTIFIER,), ".ptd")
        header = parse_data_header(o.head(_flat_tensor.HEAD_BYTES), o.size)
        return decode_data(o.prefix(header.flatbuffer_end, "flatbuffer"), header), o.path
