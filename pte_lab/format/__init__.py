"""Bytes to records: the ``.pte`` header and flatbuffer, read lazily and checked.

This layer imports neither torch nor executorch. :func:`read` reads the
header and then only the flatbuffer region of the file (``program_size``
bytes); segment data (constants, delegate blobs, named data) is located and
sized but never read, so a 400 MB file costs what a 4 MB one does.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO, Union

from ..errors import PteFormatError
from .header import HEAD_BYTES, Header, parse_header
from .program import RawPlan, RawProgram, RawTensor, RawValue, decode_program

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]

__all__ = [
    "read", "Header", "RawProgram", "RawPlan", "RawTensor", "RawValue", "Source",
]


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise PteFormatError(f"file ended after {len(data)} of the {n} bytes of the {what}")
    return data


def read(source: Source) -> tuple[RawProgram, str | None]:
    """Read a ``.pte`` from a path, bytes-like object or binary file.

    Returns the decoded program and the path (or ``None``). Raises
    :class:`PteFormatError` for anything that is not a valid program.
    """
    path = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        mv = memoryview(source).cast("B") if isinstance(source, memoryview) else memoryview(source)
        header = parse_header(mv[:HEAD_BYTES], len(mv))
        flat = mv[: header.program_size]
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            f = open(path, "rb")
        except IsADirectoryError:
            raise PteFormatError(f"{path} is a directory, not a .pte file") from None
        with f:
            header, flat = _read_file(f)
    elif hasattr(source, "read"):
        header, flat = _read_file(source)
        path = getattr(source, "name", None)
        path = path if isinstance(path, str) else None
    else:
        raise TypeError(f"expected a path, bytes or a binary file, not {type(source).__name__}")
    return decode_program(flat, header), path


def _read_file(f: BinaryIO) -> tuple[Header, memoryview]:
    try:
        size = os.fstat(f.fileno()).st_size
        start = f.tell()
        size -= start
    except (AttributeError, OSError, io.UnsupportedOperation):
        start = f.tell()
        f.seek(0, io.SEEK_END)
        size = f.tell() - start
        f.seek(start)
    head = f.read(HEAD_BYTES)
    header = parse_header(head, size)
    if header.program_size <= len(head):
        return header, memoryview(head[: header.program_size])
    rest = _read_exact(f, header.program_size - len(head), "flatbuffer")
    return header, memoryview(head + rest)
