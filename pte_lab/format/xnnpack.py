"""XNNPACK's delegate blob, as its serializer writes it (``backends/xnnpack/serialization/xnnpack_graph_serialize.py``,
``schema.fbs`` in the executorch wheel): a 30-byte header with ``XH00`` at bytes 4..8 whose uint32 at bytes 10..14
is the offset of an XNNPACK graph flatbuffer (file identifier ``XN01`` at its bytes 4..8), or that flatbuffer
alone. What a blob that is neither means is :mod:`pte_lab.model.delegates`'.

:func:`workspace_dims` finds, in the graph, the dims of the tensors XNNPACK keeps in its own workspace (the values
internal to the graph): XNNPACK allocates that workspace on the heap, each tensor at the larger of its declared size
(the export's bound) and the size it runs at (``schema.fbs``: ``XNNGraph.xvalues``, ``XNNTensorValue``)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ._flat import root_table

__all__ = ["BACKEND", "HEADER_MAGIC", "HEADER_BYTES", "GRAPH_IDENTIFIERS", "identifier", "header_graph_offset",
           "XnnpackHeader", "read_header", "INTERNAL_ID", "workspace_dims"]

#: the backend id whose blobs these are (what pte_lab knows of the backend is its registration,
#: ``pte_lab.model.backends.XNNPACK``)
BACKEND = "XnnpackBackend"
#: the header's magic, at bytes 4..8 of the blob (:func:`identifier`)
HEADER_MAGIC = b"XH00"
#: the header's size
HEADER_BYTES = 30
#: the graph flatbuffer's file identifiers, at bytes 4..8 of the graph (:func:`identifier`)
GRAPH_IDENTIFIERS = (b"XN01",)
#: the graph's offset in the header: a little-endian uint32 at byte 10
_GRAPH_OFFSET = struct.Struct("<I")
_GRAPH_OFFSET_AT = 10
#: the header after its magic (bytes 8..30): header length (uint16), the graph's offset and size (uint32 each), the
#: constant data's offset (uint32) and size (uint64)
_SPANS = struct.Struct("<HIIIQ")
_SPANS_AT = 8


@dataclass(frozen=True)
class XnnpackHeader:
    """What an ``XH00`` header says: where the graph flatbuffer and the constant data lie in the blob."""

    graph_offset: int
    graph_bytes: int
    constants_offset: int
    constants_bytes: int


def identifier(head: bytes) -> bytes:
    """Bytes 4..8 of ``head`` (a blob's or a graph's first bytes): the header's magic or a flatbuffer's file
    identifier (fewer where ``head`` is shorter)."""
    return head[4:8]


def header_graph_offset(head: bytes) -> int | None:
    """The offset of the graph flatbuffer in the blob whose first bytes are ``head``, read from XNNPACK's header;
    None where ``head`` does not start with the header (or is too short to hold the offset)."""
    if identifier(head) != HEADER_MAGIC or len(head) < _GRAPH_OFFSET_AT + _GRAPH_OFFSET.size:
        return None
    return _GRAPH_OFFSET.unpack_from(head, _GRAPH_OFFSET_AT)[0]


def read_header(head: bytes) -> XnnpackHeader | None:
    """The header at the start of a blob whose first bytes (:data:`HEADER_BYTES` or more) are ``head``; None where
    they are not an ``XH00`` header (a graph flatbuffer alone, or something else: :func:`identifier` says which)."""
    if identifier(head) != HEADER_MAGIC or len(head) < HEADER_BYTES:
        return None
    _, graph_at, graph_n, const_at, const_n = _SPANS.unpack_from(head, _SPANS_AT)
    return XnnpackHeader(graph_at, graph_n, const_at, const_n)


#: the external id of a value internal to the graph (XNNPACK's XNN_INVALID_VALUE_ID)
INTERNAL_ID = 0xFFFFFFFF
#: schema.fbs's field slots: XNNGraph.xvalues, XValue's union (type, value), XNNQuantizedTensorValue.tensor_value,
#: and XNNTensorValue's dims, constant_buffer_idx, external_id and flags
_XVALUES, _UNION_TYPE, _UNION, _QUANTIZED_BASE = 2, 0, 1, 0
_DIMS, _CONSTANT, _EXTERNAL, _FLAGS = 2, 3, 4, 5
#: XValueUnion's members
_TENSOR, _QUANTIZED = 1, 2


def workspace_dims(graph) -> tuple[tuple[int, int], ...]:
    """(offset in ``graph`` of the first dim, dims) of each tensor value of an XNNPACK graph flatbuffer that
    XNNPACK keeps in its workspace: no external id (:data:`INTERNAL_ID`), no constant data, no external flags.
    Every offset is checked against ``graph``'s bytes; raises :class:`~pte_lab.errors.PteFormatError` for a graph
    that is not one."""
    root = root_table(memoryview(graph), "XNNPACK graph")
    out = []
    for k, v in enumerate(root.tables(_XVALUES, "xvalues")):
        kind, t = v.union(_UNION_TYPE, _UNION, f"xvalue_union[{k}]")
        if kind == _QUANTIZED and t is not None:
            t = t.table(_QUANTIZED_BASE, "tensor_value")
        elif kind != _TENSOR:
            t = None
        if t is None:
            continue
        if (t.scalar(_EXTERNAL, "uint32") == INTERNAL_ID and t.scalar(_CONSTANT, "uint32") == 0
                and t.scalar(_FLAGS, "uint32") == 0):
            start, n = t.vector_span(_DIMS, "dims")
            if n:
                out.append((start, n))
    return tuple(out)
