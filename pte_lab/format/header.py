"""The ``.pte`` header: flatbuffer prelude and ExecuTorch's extended header.

Layout (little endian)::

    0   uint32  offset of the flatbuffer root table
    4   char[4] file identifier, "ET12" for the current schema
    8   char[4] extended header magic "eh00"          (optional block)
    12  uint32  extended header length (>= 24)
    16  uint64  program_size: bytes of the flatbuffer
    24  uint64  segment_base_offset: where segment data starts (0: no segments)
    32  uint64  segment_data_size (present when length >= 32; 0: unknown)

Reading ``program_size`` bytes from the start of the file is enough for the
whole memory story; segment data (constants, delegate blobs, named data) is
never read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import NotAProgramError, PteFormatError
from .mixups import MixupKind

#: bytes to read from the start of a file to parse the header
HEAD_BYTES = 64
#: the flatbuffer prelude (root table offset, file identifier); the extended header follows it
PRELUDE_BYTES = 8
SUPPORTED_IDENTIFIERS = (b"ET12",)
_EH_MAGIC = b"eh00"
_EH_MIN_LEN = 24


@dataclass(frozen=True)
class Header:
    """The file's header: its size, identifier, the flatbuffer's bytes and where the segments start."""
    file_size: int
    identifier: str
    #: True when the file has ExecuTorch's extended header (all current files do)
    extended: bool
    #: bytes of the flatbuffer (the program tables) at the start of the file
    program_size: int
    #: file offset of the first segment byte (0 when there are no segments)
    segment_base_offset: int
    #: bytes of segment data the header declares (0 when not recorded)
    segment_data_size: int
    #: length of the extended header at offset 8 (0 without one)
    extended_length: int = 0

    @property
    def header_end(self) -> int:
        """Where the prelude and the extended header end (the flatbuffer's tables follow)."""
        return min(PRELUDE_BYTES + self.extended_length, self.program_size)


def parse_header(head: bytes | memoryview, file_size: int) -> Header:
    """Parse and check the header from the first bytes of a file of ``file_size`` bytes."""
    head = bytes(head[:HEAD_BYTES])
    if file_size < 8 or len(head) < 8:
        raise PteFormatError(f"file is {file_size} bytes: too short to be a .pte (needs at least 8)")
    ident = head[4:8]
    if ident not in SUPPORTED_IDENTIFIERS:
        if ident[:2] == b"ET" and ident[2:].isdigit():
            raise PteFormatError(
                f"unsupported .pte schema version {ident.decode()!r} at offset 4 "
                f"(pte_lab reads {', '.join(i.decode() for i in SUPPORTED_IDENTIFIERS)})"
            )
        raise NotAProgramError(f"not a .pte file: bytes 4..8 are {ident!r}, expected b'ET12'", kind=MixupKind.UNKNOWN)
    if len(head) >= 8 + _EH_MIN_LEN and head[8:12] == _EH_MAGIC:
        length, program_size, base = struct.unpack_from("<IQQ", head, 12)
        if length < _EH_MIN_LEN:
            raise PteFormatError(f"extended header at offset 8 declares length {length} < {_EH_MIN_LEN}")
        seg_size = struct.unpack_from("<Q", head, 32)[0] if length >= 32 and len(head) >= 40 else 0
        if program_size < 8 + length or program_size > file_size:
            raise PteFormatError(
                f"extended header: program_size {program_size} does not fit a file of {file_size} bytes"
            )
        if base:
            if base < program_size or base > file_size:
                raise PteFormatError(
                    f"extended header: segment_base_offset {base} is outside "
                    f"[{program_size}, {file_size}] (program ends at {program_size}, file at {file_size})"
                )
            if base + seg_size > file_size:
                raise PteFormatError(
                    f"extended header: {seg_size} bytes of segment data from offset {base} "
                    f"run past the end of the file ({file_size} bytes): the file is truncated"
                )
        elif seg_size:
            raise PteFormatError(f"extended header: {seg_size} bytes of segment data but no segment base offset")
        return Header(file_size, ident.decode(), True, program_size, base, seg_size, length)
    return Header(file_size, ident.decode(), False, file_size, 0, 0)
