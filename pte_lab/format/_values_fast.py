"""A method's common values, read all at once: tensors, and values whose table is not read.

Values are most of a program's tables, and most of them are tensors. The checked reader
(:class:`~._flat.Table`) builds three ``Table`` objects per tensor and looks each field up
through a generic path; on a program of 30,000 tensors that was most of the first look. This
reader does the same checks on every table at once, with numpy gathers: every table, vtable,
field and vector inside the buffer, each vector's elements charged to the buffer's budget, no
negative dimension, strings valid UTF-8. A value it does not read (a tensor list, an unknown
kind) or one that fails a check is left as ``None``, and the caller reads it with the checked
reader, which words the error: every message keeps one home.
"""

from __future__ import annotations

import builtins

import numpy as np

from ..devices import device_name

_TENSOR = 5
_LISTS = (10, 11)  # TensorList, OptionalTensorList: their items are checked by the checked reader
_MAX_FIELDS = 64  # as the checked reader: vtables of more fields are read the slow way
#: below this many tables, every value is left to the checked reader (a metadata method has one)
FEW = 32
_STEPS = {w: np.arange(w, dtype=np.int64) for w in (2, 4, 8)}
_UINTS = {2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


class _Reader:
    """Gathers from one buffer; ``ok`` marks the rows still readable (the others read position 0)."""

    def __init__(self, buf):
        self.u8 = np.frombuffer(buf, dtype=np.uint8)
        self.n = len(self.u8)

    def uint(self, pos: np.ndarray, width: int) -> np.ndarray:
        """Little-endian unsigned integers of ``width`` bytes at ``pos`` (positions already checked)."""
        if width == 1:
            return self.u8[pos].astype(np.int64)
        # one gather of every byte, read as the little-endian integer they spell (8 bytes wrap as int64 does)
        return self.u8[pos[:, None] + _STEPS[width]].view(_UINTS[width]).reshape(-1).astype(np.int64)

    def int(self, pos: np.ndarray, width: int) -> np.ndarray:
        v = self.uint(pos, width)
        return np.where(v >= 1 << (8 * width - 1), v - (1 << (8 * width)), v)

    def table(self, pos: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(vtable position, field count) of the tables at ``pos``, as ``Table.__init__`` checks them;
        clears ``ok`` where a check fails."""
        ok &= (pos >= 0) & (pos + 4 <= self.n)
        pos = np.where(ok, pos, 0)
        vt = pos - self.int(pos, 4)
        ok &= (vt >= 0) & (vt + 4 <= self.n)
        vt = np.where(ok, vt, 0)
        vtlen, objlen = self.uint(vt, 2), self.uint(vt + 2, 2)
        ok &= (vtlen >= 4) & (vtlen % 2 == 0) & (vt + vtlen <= self.n) & (pos + objlen <= self.n)
        k = (vtlen - 4) // 2
        ok &= k < _MAX_FIELDS
        return vt, np.where(ok, k, 0)

    def field(self, pos, vt, k, slot: builtins.int, size: builtins.int, ok) -> np.ndarray:
        """Absolute position of field ``slot`` (0 where absent), checked to lie in the buffer."""
        present = ok & (slot < k)
        off = np.zeros(len(pos), dtype=np.int64)
        off[present] = self.uint(vt[present] + 4 + 2 * slot, 2)
        at = np.where(off > 0, pos + off, 0)
        ok &= (off == 0) | (at + size <= self.n)
        return np.where(ok, at, 0)

    def ref(self, at: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """Where the offsets at ``at`` (non-zero rows) point, checked; 0 elsewhere."""
        has = ok & (at > 0)
        target = np.zeros(len(at), dtype=np.int64)
        target[has] = at[has] + self.uint(at[has], 4)
        ok &= ~has | (target + 4 <= self.n)
        return np.where(ok & has, target, 0)

    def vector(self, at: np.ndarray, elem: builtins.int, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first element's position, length) of the vectors at ``at`` (length 0 where absent)."""
        start = self.ref(at, ok)
        has = start > 0
        length = np.zeros(len(at), dtype=np.int64)
        length[has] = self.uint(start[has], 4)
        ok &= ~has | (start + 4 + length * elem <= self.n)
        return np.where(ok & has, start + 4, 0), np.where(ok & has, length, 0)

    def elements(self, start: np.ndarray, length: np.ndarray, elem: builtins.int, signed: bool) -> np.ndarray:
        """Every vector's elements, one after the other."""
        total = int(length.sum())
        begin = np.repeat(start, length)
        step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(length) - length, length)
        pos = begin + elem * step
        return self.int(pos, elem) if signed else self.uint(pos, elem)


def read_values(buf, positions: np.ndarray, budget: list, kinds: dict, raw_value, raw_tensor) -> list:
    """The value at each of ``positions`` as a ``raw_value`` record, or None where the checked reader
    must read it.

    ``kinds`` maps union tags to kind names; ``raw_value`` and ``raw_tensor`` are :mod:`.program`'s
    records (passed in: that module imports this one). ``budget`` is charged for the vectors read.
    """
    pos = np.asarray(positions, dtype=np.int64)
    rows = len(pos)
    if rows < FEW:  # the checked reader is quicker on a few values than this reader's hundred array steps
        return [None] * rows
    r = _Reader(buf)
    ok = np.ones(rows, dtype=bool)
    vt, k = r.table(pos, ok)
    at0 = r.field(pos, vt, k, 0, 1, ok)
    tag = np.where(at0 > 0, r.u8[at0], 0).astype(np.int64)
    known = np.zeros(256, dtype=bool)
    known[list(kinds)] = True
    known[list(_LISTS)] = False
    ok &= known[tag]
    at1 = r.field(pos, vt, k, 1, 4, ok)
    ok &= (tag == 0) | (at1 > 0)  # a value other than None has its table
    tensor = ok & (tag == _TENSOR)

    # the tensors' tables
    t = r.ref(np.where(tensor, at1, 0), ok)
    tensor &= ok
    tvt, tk = r.table(np.where(tensor, t, 0), tensor)
    f = {slot: r.field(t, tvt, tk, slot, size, tensor)
         for slot, size in ((0, 1), (2, 4), (3, 4), (5, 4), (6, 4), (8, 1), (9, 4))}
    alloc = r.ref(f[6], tensor)
    sub = tensor & (alloc > 0)
    avt, ak = r.table(alloc, sub)
    a = [r.field(alloc, avt, ak, slot, 4, sub) for slot in (0, 1, 2)]
    tensor &= sub | (alloc == 0)
    sizes_at, sizes_n = r.vector(f[2], 4, tensor)
    order_at, order_n = r.vector(f[3], 1, tensor)
    extra = r.ref(f[9], tensor)
    sub = tensor & (extra > 0)
    evt, ek = r.table(extra, sub)
    e = {slot: r.field(extra, evt, ek, slot, size, sub) for slot, size in ((1, 4), (2, 1), (3, 1), (4, 1))}
    name_at, name_n = r.vector(e[1], 1, sub)
    tensor &= sub | (extra == 0)
    tensor &= ok  # every check above cleared both masks where it failed
    ok &= tensor | (tag != _TENSOR)

    sizes = r.elements(sizes_at * tensor, sizes_n * tensor, 4, signed=True)
    neg = np.zeros(rows, dtype=bool)
    if len(sizes):
        np.logical_or.at(neg, np.repeat(np.arange(rows), sizes_n * tensor), sizes < 0)
    tensor &= ~neg
    ok &= ~neg
    charge = int(((sizes_n + order_n + name_n) * tensor).sum())
    if budget[0] - charge < 0:
        return [None] * rows  # over the budget: the checked reader says so where it happens
    budget[0] -= charge

    def scalar(at, width, signed=False):
        return np.where(at > 0, r.int(at, width) if signed else r.uint(at, width), 0)

    mem_id = scalar(a[0], 4)
    offset = scalar(a[1], 4) + (scalar(a[2], 4) << 32)
    has_alloc = (alloc > 0).tolist()
    columns = zip(tensor.tolist(), scalar(f[0], 1, True).tolist(), sizes_n.tolist(), order_at.tolist(),
                  order_n.tolist(), scalar(f[5], 4).tolist(), has_alloc, mem_id.tolist(), offset.tolist(),
                  scalar(f[8], 1, True).tolist(), (extra > 0).tolist(), name_at.tolist(), name_n.tolist(),
                  scalar(e[2], 1, True).tolist(), scalar(e[3], 1, True).tolist(), scalar(e[4], 1, True).tolist())
    dims = sizes.tolist()
    u8 = memoryview(buf).cast("B")  # a row's few bytes sliced from here: cheaper than from the array
    out: list = []
    d = 0
    for row, (is_t, stype, nd, oat, on, dbi, al, mid, off, dyn, ex, nat, nn, loc, dt, di) in enumerate(columns):
        if not ok[row]:
            out.append(None)
            continue
        if not is_t:
            out.append(raw_value(kinds[int(tag[row])]))
            continue
        rt = raw_tensor(stype, tuple(dims[d:d + nd]), tuple(u8[oat:oat + on]), dbi,
                        mid if al else None, off if al else None, dyn)
        d += nd
        if ex:
            if nat:
                try:
                    rt.fqn = bytes(u8[nat:nat + nn]).decode("utf-8")
                except UnicodeDecodeError:
                    out.append(None)  # the checked reader words it (and charges the budget again)
                    continue
            rt.location = loc
            rt.device = device_name(dt, di)
        out.append(raw_value(kinds[_TENSOR], tensor=rt))
    return out
