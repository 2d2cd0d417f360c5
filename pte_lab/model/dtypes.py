"""ExecuTorch scalar types: name and element size in bytes (c10's numbering)."""

from __future__ import annotations

from ..errors import PteFormatError

#: ScalarType code -> (torch-style name, bytes per element)
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8),
    5: ("float16", 2), 6: ("float32", 4), 7: ("float64", 8), 8: ("complex32", 4),
    9: ("complex64", 8), 10: ("complex128", 16), 11: ("bool", 1), 12: ("qint8", 1),
    13: ("quint8", 1), 14: ("qint32", 4), 15: ("bfloat16", 2), 16: ("quint4x2", 1),
    17: ("quint2x4", 1), 18: ("bits1x8", 1), 19: ("bits2x4", 1), 20: ("bits4x2", 1),
    21: ("bits8", 1), 22: ("bits16", 2), 23: ("float8_e5m2", 1), 24: ("float8_e4m3fn", 1),
    25: ("float8_e5m2fnuz", 1), 26: ("float8_e4m3fnuz", 1), 27: ("uint16", 2),
    28: ("uint32", 4), 29: ("uint64", 8),
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
