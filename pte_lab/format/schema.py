"""The numbers of ExecuTorch's program format, named once, as ExecuTorch names them.

Enums follow ``executorch/exir/_serialize/program.fbs`` (and ``exir/schema.py``,
its Python mirror); scalar types follow ``exir/scalar_type.py`` and, for the
codes exir does not list, ``runtime/core/portable_type/scalar_type.h``. The
reader keeps the file's integers as they are (an unknown code stays visible);
everything above it compares them with these names, never with bare numbers.
Device types live in :mod:`pte_lab.devices`.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ScalarType", "TensorShapeDynamism", "TensorDataLocation", "DataLocation", "TENSOR_ALIGNMENT",
           "runtime_index_of"]


class ScalarType(IntEnum):
    """``Tensor.scalar_type``: c10's numbering (exir's names; ``BITS*`` from the runtime's header)."""

    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4x2 = 16
    QUINT2x4 = 17
    BITS1x8 = 18
    BITS2x4 = 19
    BITS4x2 = 20
    BITS8 = 21
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


class TensorShapeDynamism(IntEnum):
    """``Tensor.shape_dynamism``: whether ``sizes`` is the shape, an upper bound, or neither."""

    #: static shape; memory planned by the compiler
    STATIC = 0
    #: dynamic with an upper bound (``sizes``); memory planned by the compiler at that bound
    DYNAMIC_BOUND = 1
    #: dynamic without a bound; the runtime allocates (never planned)
    DYNAMIC_UNBOUND = 2


class TensorDataLocation(IntEnum):
    """``ExtraTensorInfo.location``: where a tensor's constant data is stored."""

    #: in a segment of the ``.pte`` file
    SEGMENT = 0
    #: outside it, in a ``.ptd`` data file (``data_buffer_idx`` is ignored)
    EXTERNAL = 1


class DataLocation(IntEnum):
    """``BackendDelegateDataReference.location``: where a delegate's blob is stored."""

    #: in the flatbuffer (``Program.backend_delegate_data``)
    INLINE = 0
    #: in a segment (``Program.segments``)
    SEGMENT = 1


#: bytes every planned allocation is rounded up to by exir's memory planning (``exir/tensor.py``
#: ``ALIGNMENT``); arenas and offsets are multiples of it unless a pass asked for another
TENSOR_ALIGNMENT = 16


def runtime_index_of(mem_id: int) -> int:
    """What ExecuTorch's runtime (its planned buffers, its error messages) calls arena ``mem_id``.

    ``allocation_info.memory_id`` 0 is reserved, so the runtime's buffer 0 is mem_id 1.
    """
    return mem_id - 1


def mem_id_of(runtime_index: int) -> int:
    """The file's ``memory_id`` of the runtime's planned buffer ``runtime_index`` (inverse of
    :func:`runtime_index_of`)."""
    return runtime_index + 1
