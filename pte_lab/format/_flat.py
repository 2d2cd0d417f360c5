"""Bounds-checked access to flatbuffer tables.

The ``flatbuffers`` Python runtime's ``Table`` reads whatever an offset points
at: it checks nothing, and ``struct.unpack_from`` silently counts a negative
offset from the end of the buffer. A ``.pte`` may come from anywhere, so this
reader checks every offset before reading it with the runtime's little-endian
packers (``flatbuffers.number_types``), and checks every vector's claimed
length against the bytes that are really there before anything is allocated
for it. A violation raises
:class:`~pte_lab.errors.PteFormatError` naming the field path.

Flatbuffer references (``uoffset``) only point forward, so a chain of tables
cannot cycle; the readers above this module follow a fixed schema, so nesting
depth is bounded by the schema, not by the file. A vector may still be
referenced by many tables and decoded once per reference: every buffer has a
budget of elements to decode (:data:`BUDGET_PER_BYTE` per byte, plus
:data:`BUDGET_BASE`); a file that needs more is refused, so the work and memory
of reading stay proportional to the file.
"""

from __future__ import annotations

import struct

import numpy as np
from flatbuffers import number_types as N

from ..errors import PteFormatError

#: elements a reader may decode per byte of flatbuffer (each element stored once takes at least a byte)
BUDGET_PER_BYTE = 8
BUDGET_BASE = 1 << 20

_U8 = struct.Struct("<B")
_HH = struct.Struct("<HH")
_VT = [struct.Struct(f"<{k}H") for k in range(64)]  # vtable field lists, by length
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")

_SCALARS = {
    # name: (flatbuffers' little-endian packer, size, numpy dtype)
    "bool": (N.BoolFlags.packer_type, 1, np.dtype("<u1")),
    "int8": (N.Int8Flags.packer_type, 1, np.dtype("<i1")),
    "uint8": (N.Uint8Flags.packer_type, 1, np.dtype("<u1")),
    "int16": (N.Int16Flags.packer_type, 2, np.dtype("<i2")),
    "uint16": (N.Uint16Flags.packer_type, 2, np.dtype("<u2")),
    "int32": (N.Int32Flags.packer_type, 4, np.dtype("<i4")),
    "uint32": (N.Uint32Flags.packer_type, 4, np.dtype("<u4")),
    "int64": (N.Int64Flags.packer_type, 8, np.dtype("<i8")),
    "uint64": (N.Uint64Flags.packer_type, 8, np.dtype("<u8")),
    "float64": (N.Float64Flags.packer_type, 8, np.dtype("<f8")),
}


class Table:
    """One flatbuffer table at ``pos`` in ``buf``, read with checks.

    ``where`` is a human path ("program.execution_plan[1].values[7]") used in
    error messages.
    """

    __slots__ = ("_buf", "_n", "_pos", "_fields", "_parent", "_label", "_budget")

    def __init__(self, buf: memoryview, pos: int, where, label: str | int = "", budget: list | None = None,
                 n: int = -1):
        if n < 0:
            n = len(buf)
        self._buf = buf
        self._n = n
        self._budget = budget if budget is not None else [BUDGET_BASE + BUDGET_PER_BYTE * n]
        # the path is built only when an error message needs it
        self._parent = where
        self._label = label
        if pos < 0 or pos + 4 > n:
            raise PteFormatError(f"{self.where}: table offset {pos} is outside the flatbuffer ({n} bytes)")
        vt = pos - _I32.unpack_from(buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            raise PteFormatError(f"{self.where}: vtable offset {vt} is outside the flatbuffer ({n} bytes)")
        vtlen, objlen = _HH.unpack_from(buf, vt)
        if vtlen < 4 or vtlen % 2 or vt + vtlen > n:
            raise PteFormatError(f"{self.where}: malformed vtable (length {vtlen} at offset {vt})")
        if pos + objlen > n:
            raise PteFormatError(f"{self.where}: table of {objlen} bytes at {pos} runs past the flatbuffer")
        self._pos = pos
        # every field's offset in one read (vtables are a few entries long)
        k = (vtlen - 4) // 2
        self._fields = (_VT[k] if k < len(_VT) else struct.Struct(f"<{k}H")).unpack_from(buf, vt + 4)

    @property
    def where(self) -> str:
        p, label = self._parent, self._label
        return (p if isinstance(p, str) else p.where) + (f"[{label}]" if isinstance(label, int) else label)

    # -- raw field location ---------------------------------------------------
    def _field(self, slot: int, size: int) -> int:
        """Absolute position of field ``slot`` (0-based), or 0 when absent.

        As the flatbuffers verifier (and so ExecuTorch) checks it: the field
        must lie inside the buffer. The object size the vtable states is not a
        bound: some writers state one smaller than the end of their last field
        (a ``DataSegment`` of 8 bytes whose 8-byte ``size`` sits at offset 4),
        and ExecuTorch reads those files.
        """
        fields = self._fields
        if slot >= len(fields):
            return 0
        off = fields[slot]
        if off == 0:
            return 0
        at = self._pos + off
        if at + size > self._n:
            raise PteFormatError(f"{self.where}: field {slot} at offset {off} lies outside the flatbuffer")
        return at

    def _deref(self, at: int, what: str) -> int:
        target = at + _U32.unpack_from(self._buf, at)[0]
        if target + 4 > self._n:
            raise PteFormatError(f"{self.where}.{what}: reference to offset {target} is outside the flatbuffer")
        return target

    # -- scalars ----------------------------------------------------------------
    def scalar(self, slot: int, kind: str, default=0):
        packer, size, _ = _SCALARS[kind]
        fields = self._fields  # _field, inlined: a look reads thousands of scalars
        off = fields[slot] if slot < len(fields) else 0
        if not off:
            return default
        at = self._pos + off
        if at + size > self._n:
            raise PteFormatError(f"{self.where}: field {slot} at offset {off} lies outside the flatbuffer")
        v = packer.unpack_from(self._buf, at)[0]
        return bool(v) if kind == "bool" else v

    def has(self, slot: int) -> bool:
        return bool(self._field(slot, 1))

    # -- references ---------------------------------------------------------------
    def table(self, slot: int, what: str) -> "Table | None":
        at = self._field(slot, 4)
        if not at:
            return None
        return Table(self._buf, self._deref(at, what), self, "." + what, self._budget, self._n)

    def string(self, slot: int, what: str, default: str | None = None) -> str | None:
        at = self._field(slot, 4)
        if not at:
            return default
        start, length = self._vector_at(at, 1, what)
        try:
            return bytes(self._buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            # the flatbuffers spec requires UTF-8; ExecuTorch's Python bindings abort the
            # process on an operator name that is not (seen with executorch 1.5.1)
            raise PteFormatError(f"{self.where}.{what}: string is not valid UTF-8 ({exc.reason} "
                                 f"at byte {exc.start})") from None

    def strings(self, slot: int, what: str) -> tuple[str, ...]:
        """A vector of strings (empty when absent); each string's bytes count against the budget."""
        at = self._field(slot, 4)
        if not at:
            return ()
        start, length = self._vector_at(at, 4, what)
        buf, n, out = self._buf, self._n, []
        for i in range(length):
            pos = start + 4 * i
            target = pos + _U32.unpack_from(buf, pos)[0]
            if target + 4 > n:
                raise PteFormatError(f"{self.where}.{what}[{i}]: reference to offset {target} is outside the "
                                     f"flatbuffer")
            size = _U32.unpack_from(buf, target)[0]
            if target + 4 + size > n:
                raise PteFormatError(f"{self.where}.{what}[{i}]: string of {size} bytes runs past the flatbuffer")
            self.charge(size, f".{what}[{i}]")
            try:
                out.append(bytes(buf[target + 4 : target + 4 + size]).decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise PteFormatError(f"{self.where}.{what}[{i}]: string is not valid UTF-8 ({exc.reason} "
                                     f"at byte {exc.start})") from None
        return tuple(out)

    def _vector_at(self, at: int, elem_size: int, what: str, charge: bool = True) -> tuple[int, int]:
        start = self._deref(at, what)
        length = _U32.unpack_from(self._buf, start)[0]
        if start + 4 + length * elem_size > self._n:
            raise PteFormatError(
                f"{self.where}.{what}: vector claims {length} elements of {elem_size} bytes, "
                f"but only {max(0, self._n - start - 4)} bytes remain"
            )
        if charge:
            self.charge(length, "." + what)
        return start + 4, length

    def charge(self, n: int, what: str = "") -> None:
        """Count ``n`` more elements against the buffer's budget (PteFormatError past it, naming
        this table's path followed by ``what``)."""
        self._budget[0] -= n
        if self._budget[0] < 0:
            raise PteFormatError(
                f"{self.where}{what}: the file's tables reference their vectors so many times over that "
                f"reading them would decode more than {BUDGET_PER_BYTE} elements per byte of the "
                f"{self._n}-byte flatbuffer; refusing (vectors shared by many references?)")

    def vector_len(self, slot: int, what: str, elem_size: int = 4) -> int:
        at = self._field(slot, 4)
        return self._vector_at(at, elem_size, what)[1] if at else 0

    def scalars(self, slot: int, kind: str, what: str) -> np.ndarray:
        """A vector of scalars as a numpy array (empty when absent)."""
        _, size, dtype = _SCALARS[kind]
        at = self._field(slot, 4)
        if not at:
            return np.zeros(0, dtype=dtype)
        start, length = self._vector_at(at, size, what)
        return np.frombuffer(self._buf, dtype=dtype, count=length, offset=start)

    def int_tuple(self, slot: int, kind: str, what: str) -> tuple[int, ...]:
        """A (small) vector of integers as a tuple (empty when absent)."""
        packer, size, _ = _SCALARS[kind]
        at = self._field(slot, 4)
        if not at:
            return ()
        start, length = self._vector_at(at, size, what)
        return struct.unpack_from(f"<{length}{packer.format[-1]}", self._buf, start)

    def bytes_vector(self, slot: int, what: str) -> bytes:
        at = self._field(slot, 4)
        if not at:
            return b""
        start, length = self._vector_at(at, 1, what)
        return bytes(self._buf[start : start + length])

    def vector_span(self, slot: int, what: str, elem_size: int = 4) -> tuple[int, int]:
        """(offset of the first element, elements) of a vector inside the flatbuffer ((0, 0) when absent), checked
        against the bytes there and charged against the budget, without reading it."""
        at = self._field(slot, 4)
        return self._vector_at(at, elem_size, what) if at else (0, 0)

    def bytes_vector_span(self, slot: int, what: str) -> tuple[int, int]:
        """(offset, length) of a byte vector inside the flatbuffer, without copying it."""
        at = self._field(slot, 4)
        if not at:
            return (0, 0)
        return self._vector_at(at, 1, what, charge=False)

    def tables(self, slot: int, what: str) -> "TableVector":
        at = self._field(slot, 4)
        if not at:
            return TableVector(self._buf, 0, 0, self, "." + what)
        start, length = self._vector_at(at, 4, what)
        return TableVector(self._buf, start, length, self, "." + what, self._budget)

    def union(self, type_slot: int, value_slot: int, what: str) -> "tuple[int, Table | None]":
        kind = self.scalar(type_slot, "uint8", 0)
        if kind == 0:
            return 0, None
        return kind, self.table(value_slot, what)


class TableVector:
    """A lazily read vector of tables; ``vec[i]`` checks and reads element ``i``."""

    __slots__ = ("_buf", "_start", "_len", "_parent", "_label", "_budget")

    def __init__(self, buf: memoryview, start: int, length: int, parent, label: str = "", budget=None):
        self._buf = buf
        self._start = start
        self._len = length
        self._parent = parent
        self._label = label
        self._budget = budget

    @property
    def where(self) -> str:
        p = self._parent
        return (p if isinstance(p, str) else p.where) + self._label

    def __len__(self) -> int:
        return self._len

    @property
    def buffer(self) -> memoryview:
        """The flatbuffer this vector lies in."""
        return self._buf

    @property
    def budget(self) -> list:
        """The buffer's budget of elements to decode (one list, shared by every table read from it)."""
        return self._budget

    def position(self, i: int) -> int:
        """Where element ``i``'s table starts (elements referencing one table share it); checked on reading."""
        if not 0 <= i < self._len:
            raise IndexError(i)
        at = self._start + 4 * i
        return at + _U32.unpack_from(self._buf, at)[0]

    def positions(self) -> np.ndarray:
        """Where every element's table starts (int64), all at once; checked on reading each table."""
        offsets = np.frombuffer(self._buf, dtype="<u4", count=self._len, offset=self._start).astype(np.int64)
        return offsets + (self._start + 4 * np.arange(self._len, dtype=np.int64))

    def __getitem__(self, i: int) -> Table:
        return self.table_at(i, self.position(i))

    def table_at(self, i: int, position: int) -> Table:
        """Element ``i``, whose :meth:`position` the caller has."""
        return Table(self._buf, position, self, i, self._budget)

    def __iter__(self):
        for i in range(self._len):
            yield self[i]


def root_table(buf: memoryview, name: str = "program") -> Table:
    """The root table of a flatbuffer (the ``Program``, or ``name`` in error messages)."""
    if len(buf) < 8:
        raise PteFormatError(f"flatbuffer of {len(buf)} bytes is too small to hold a root table")
    return Table(buf, _U32.unpack_from(buf, 0)[0], name)
