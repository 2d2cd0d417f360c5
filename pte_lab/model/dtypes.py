"""ExecuTorch scalar types: name and element size in bytes (c10's numbering)."""

from __future__ import annotations

from ..errors import PteFormatError
from ..format import ScalarType as S

#: ScalarType -> (torch-style name, bytes per element)
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    S.BYTE: ("uint8", 1), S.CHAR: ("int8", 1), S.SHORT: ("int16", 2), S.INT: ("int32", 4), S.LONG: ("int64", 8),
    S.HALF: ("float16", 2), S.FLOAT: ("float32", 4), S.DOUBLE: ("float64", 8), S.COMPLEX32: ("complex32", 4),
    S.COMPLEX64: ("complex64", 8), S.COMPLEX128: ("complex128", 16), S.BOOL: ("bool", 1), S.QINT8: ("qint8", 1),
    S.QUINT8: ("quint8", 1), S.QINT32: ("qint32", 4), S.BFLOAT16: ("bfloat16", 2), S.QUINT4x2: ("quint4x2", 1),
    S.QUINT2x4: ("quint2x4", 1), S.BITS1x8: ("bits1x8", 1), S.BITS2x4: ("bits2x4", 1), S.BITS4x2: ("bits4x2", 1),
    S.BITS8: ("bits8", 1), S.BITS16: ("bits16", 2), S.FLOAT8E5M2: ("float8_e5m2", 1),
    S.FLOAT8E4M3FN: ("float8_e4m3fn", 1), S.FLOAT8E5M2FNUZ: ("float8_e5m2fnuz", 1),
    S.FLOAT8E4M3FNUZ: ("float8_e4m3fnuz", 1), S.UINT16: ("uint16", 2), S.UINT32: ("uint32", 4),
    S.UINT64: ("uint64", 8),
}


def scalar_type(code: int, where: str) -> tuple[str, int]:
    try:
        return SCALAR_TYPES[code]
    except KeyError:
        raise PteFormatError(f"{where}: unknown scalar type {code}") from None


#: no tensor can reach this many bytes (int64 arithmetic stays exact below it)
MAX_BYTES = 2**62


def nbytes(sizes: tuple[int, ...], element_size: int) -> int:
    """Bytes of a tensor; :data:`MAX_BYTES` stands for "that many or more" (never a huge integer)."""
    if 0 in sizes:
        return 0
    n = element_size
    for s in sizes:
        n *= s
        if n >= MAX_BYTES:
            return MAX_BYTES
    return n


def short_shape(sizes) -> str:
    """A shape for a message: ``[2, 3]``, or its first dimensions and its rank when long."""
    sizes = list(sizes)
    return str(sizes) if len(sizes) <= 8 else f"[{', '.join(map(str, sizes[:6]))}, ...] ({len(sizes)} dims)"
