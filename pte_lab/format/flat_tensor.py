"""External data files (``.ptd``, FlatTensor, identifier ``FT01``): named tensors for a program.

Schema: ``extension/flat_tensor/serialize/flat_tensor.fbs`` of ExecuTorch::

    FlatTensor { version: uint; segments: [DataSegment]; named_data: [NamedData] }
    NamedData { key: string; segment_index: uint; tensor_layout: TensorLayout }
    TensorLayout { scalar_type: byte; sizes: [int]; dim_order: [ubyte] }
    DataSegment { offset: ulong; size: ulong }   // from segment_base_offset

Layout (little endian): the flatbuffer's root offset and ``FT01`` (bytes
0..8), then the ``FH01`` header at offset 8::

    8   char[4] "FH01"      12 uint32 header length (>= 40)
    16  uint64 flatbuffer_offset   24 uint64 flatbuffer_size
    32  uint64 segment_base_offset 40 uint64 segment_data_size

Only the flatbuffer is read; tensor data is located, never read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import PteFormatError
from ._flat import root_table

IDENTIFIER = b"FT01"
HEADER_MAGIC = b"FH01"
HEAD_BYTES = 48

__all__ = ["IDENTIFIER", "DataHeader", "RawNamedTensor", "RawData", "parse_data_header", "decode_data"]


@dataclass(frozen=True)
class DataHeader:
    """A ``.ptd`` file's header: its size, the flatbuffer's end, where the segments start and their bytes."""
    file_size: int
    #: bytes of the flatbuffer (from the start of the file)
    flatbuffer_end: int
    segment_base_offset: int
    segment_data_size: int


@dataclass(slots=True)
class RawNamedTensor:
    """A named tensor as a ``.ptd`` stores it: its key, segment, file offset, bytes, scalar type, sizes and dim
    order."""
    key: str
    segment: int
    #: absolute file offset and bytes of the segment holding it
    offset: int
    size: int
    scalar_type: int | None
    sizes: tuple[int, ...] | None
    dim_order: tuple[int, ...] | None


@dataclass(slots=True)
class RawData:
    """A ``.ptd`` data file as it stores its tables: the header, the version and the named tensors."""
    header: DataHeader
    version: int
    #: one per ``named_data`` entry; entries naming one table share one record (the same object)
    tensors: list[RawNamedTensor]


def parse_data_header(head: bytes, file_size: int) -> DataHeader:
    head = bytes(head[:HEAD_BYTES])
    if len(head) < HEAD_BYTES or head[4:8] != IDENTIFIER or head[8:12] != HEADER_MAGIC:
        raise PteFormatError(f"not a .ptd data file: expected b'FT01' at offset 4 and b'FH01' at 8, "
                             f"found {head[4:8]!r} and {head[8:12]!r}")
    length, fb_off, fb_size, base, seg_size = struct.unpack_from("<IQQQQ", head, 12)
    if length < 40:
        raise PteFormatError(f".ptd header at offset 8 declares length {length} < 40")
    end = fb_off + fb_size
    if end > file_size or end < 8 + length:
        raise PteFormatError(f".ptd header: flatbuffer [{fb_off}, {end}) does not fit a file of {file_size} bytes")
    if base and (base < end or base + seg_size > file_size):
        raise PteFormatError(f".ptd header: {seg_size} bytes of segment data at offset {base} do not fit "
                             f"between the flatbuffer's end ({end}) and the file's ({file_size}): truncated?")
    return DataHeader(file_size, end, base, seg_size)


def _named(nd, i: int, segments: list[tuple[int, int]]) -> RawNamedTensor:
    key = nd.string(0, "key", "")
    idx = nd.scalar(1, "uint32")
    if not 0 <= idx < len(segments):
        raise PteFormatError(f"flat_tensor.named_data[{i}] ({key!r}): segment {idx} out of range "
                             f"({len(segments)} segments)")
    layout = nd.table(2, "tensor_layout")
    st = sizes = dims = None
    if layout is not None:
        st = layout.scalar(0, "int8")
        sizes = layout.int_tuple(1, "int32", "sizes")
        dims = layout.int_tuple(2, "uint8", "dim_order")
        if sizes and min(sizes) < 0:
            raise PteFormatError(f"{layout.where}.sizes: negative dimension {min(sizes)}")
    return RawNamedTensor(key, idx, *segments[idx], st, sizes, dims)


def decode_data(flatbuffer: memoryview, header: DataHeader) -> RawData:
    root = root_table(flatbuffer, "flat_tensor")
    segments = []
    limit = header.segment_data_size if header.segment_base_offset else 0
    for i, s in enumerate(root.tables(1, "segments")):
        off, size = s.scalar(0, "uint64"), s.scalar(1, "uint64")
        if off + size > limit:
            raise PteFormatError(f"flat_tensor.segments[{i}]: offset {off} + size {size} runs past the "
                                 f"segment data ({limit} bytes): the file is truncated or corrupt")
        segments.append((header.segment_base_offset + off, size))
    tensors = []
    named = root.tables(2, "named_data")
    decoded: dict[int, RawNamedTensor] = {}  # by table position: entries naming one table share one record
    for i, pos in enumerate(named.positions().tolist()):
        rec = decoded.get(pos)
        if rec is None:
            rec = decoded[pos] = _named(named.table_at(i, pos), i, segments)
        tensors.append(rec)
    return RawData(header, root.scalar(0, "uint32"), tensors)
