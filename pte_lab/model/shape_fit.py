"""How a dynamic method's tensors scale with its dynamic dimensions: learnt from runs, fitted exactly.

A dynamic method is planned at the export's upper bound. To say what it would plan at another bound,
every planned tensor's dims must be known as functions of the dynamic dims. They are learnt, not guessed:
the method is run at a few sizes (:mod:`pte_lab.runtime.shapes` records the shape each instruction wrote),
and each dim is fitted as an exact affine function ``(a + b1*N1 + ... ) / q`` (integers: ``L - 1``,
``L // 2`` at even L, ``2 * L``, ``258 * L``), then checked at one more size and against the upper bound the
file plans. A dim that is not affine over the sizes sampled (``L * L``, a clamp, a data-dependent size)
fails a check and is refused, naming the tensor: nothing is extrapolated beyond what was seen.

Pure: records in, records out (no torch, no runtime). :mod:`pte_lab.planning.at_bound` samples and replans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

import numpy as np

from ..errors import PteLabError
from ..format.schema import TensorShapeDynamism
from ..units import check_int64
from ..vocabulary import InstructionKind, ValueKind
from .dtypes import MAX_BYTES, scalar_type, short_shape

__all__ = ["WhatIfError", "TWO_EXPORTS", "DimKey", "AffineDim", "ShapeFit", "dynamic_inputs", "check_bounds", "sample_points",
           "value_shapes", "fit_shapes", "logged_values", "unrecorded", "dim_text", "dim_name", "export_change", "point_text"]

#: a dynamic dimension: (method input position, axis)
DimKey = tuple[int, int]


#: what a static program needs instead of a bound (said wherever a static export is refused one)
TWO_EXPORTS = "two static exports predict a third: pte-lab what-if A.pte B.pte --values V1,V2 --at V3"


class WhatIfError(PteLabError, ValueError):
    """Raised when a what-if cannot be answered exactly (the message says which input, bound or tensor)."""


@dataclass(frozen=True)
class AffineDim:
    """One dim as ``(const + sum(coeffs[k] * N_k)) / den``, integers (``den`` > 0)."""

    const: int
    coeffs: tuple[int, ...]
    den: int = 1

    def at(self, point) -> Fraction:
        return Fraction(self.const + sum(c * n for c, n in zip(self.coeffs, point)), self.den)

    @property
    def static(self) -> bool:
        return not any(self.coeffs)


def dim_text(d: AffineDim, names) -> str:
    """``2*seq - 1``, ``seq/2``, ``16``: a dim as a reader writes it (``names``: one per dynamic dim)."""
    terms = []
    for c, name in zip(d.coeffs, names):
        if c:
            terms.append(name if c == 1 else f"-{name}" if c == -1 else f"{c}*{name}")
    if d.const or not terms:
        terms.append(str(d.const))
    s = " + ".join(terms).replace("+ -", "- ")
    return s if d.den == 1 else f"({s})/{d.den}" if len(terms) > 1 else f"{s}/{d.den}"


def dim_name(key) -> str:
    """The name the export change gives a dynamic dim: ``batch`` on axis 0, else ``seq``."""
    return "batch" if key[1] == 0 else "seq"


def export_change(keys, point) -> str:
    """``Dim("seq", max=800) for input 0, axis 1``: the re-export that plans what the prediction says."""
    return "; ".join(f'Dim("{dim_name(k)}", max={n}) for input {k[0]}, axis {k[1]}' for k, n in zip(keys, point))


def dynamic_inputs(method) -> list:
    """The method's dynamic tensor inputs (IOSpecs)."""
    return [s for s in method.inputs if s.kind == ValueKind.TENSOR and s.dynamic and s.shape is not None]


def read_axes(method, ints: dict[int, int]) -> dict[int, frozenset[int]]:
    """Input position -> the axes of that dynamic input the method reads as sizes (``sym_size`` on the input
    itself; ``ints``: the method's Int values), where it reads any: the axes the export made symbolic."""
    pos = {s.value: s for s in dynamic_inputs(method)}
    out: dict[int, set[int]] = {}
    for ins in method.instructions:
        a = ins.args
        if ins.target == "aten::sym_size.int" and len(a) == 3 and a[0] in pos and a[1] in ints:
            s = pos[a[0]]
            out.setdefault(s.position, set()).add(ints[a[1]] % max(1, len(s.shape)))
    return {p: frozenset(axes) for p, axes in out.items()}


def check_axes(method, keys, axes: dict[int, frozenset[int]]) -> None:
    """Refuse (one line, before any run) a key whose axis the method never reads as a size while it reads
    other axes of that input: a static axis, which ExecuTorch refuses to resize."""
    for pos, axis in keys:
        known = axes.get(pos)
        if known and axis not in known:
            dims = ", ".join(f"input {p} axis {a}" for p in sorted(axes) for a in sorted(axes[p]))
            raise WhatIfError(f"input {pos} axis {axis} is static (exported at one size, which ExecuTorch will "
                              f"not resize); the dynamic axes method {method.name!r} reads are {dims}")


def check_bounds(method, bounds: dict) -> tuple[tuple[DimKey, ...], tuple[int, ...], tuple[int, ...]]:
    """``bounds`` ({(input, axis): N}) checked against ``method``: (keys, the asked bounds, the exported ones).

    Raises :class:`WhatIfError` (one line) for a method with no dynamic input, an input that is not a dynamic
    tensor, an axis out of range, or a bound below 1 or above the exported one."""
    dyn = dynamic_inputs(method)
    if not dyn:
        raise WhatIfError(f"method {method.name!r} has no dynamic input: every tensor is planned at its one shape, "
                          f"so another bound changes nothing (export with dynamic_shapes=... first; {TWO_EXPORTS})")
    if not bounds:
        raise WhatIfError(f"no bound given: method {method.name!r}'s dynamic inputs are "
                          f"{', '.join(f'{s.position} {short_shape(s.shape)}' for s in dyn)}")
    keys, asked, exported = [], [], []
    by_pos = {s.position: s for s in method.inputs}
    for (pos, axis), n in bounds.items():
        s = by_pos.get(pos)
        if s is None or s not in dyn:
            raise WhatIfError(f"method {method.name!r} input {pos} is not a dynamic tensor; its dynamic inputs: "
                              f"{', '.join(f'{x.position} {short_shape(x.shape)}' for x in dyn)}")
        if not 0 <= axis < len(s.shape):
            raise WhatIfError(f"input {pos} has {len(s.shape)} axes ({short_shape(s.shape)}); axis {axis} is none of them")
        try:
            n = check_int64(n, f"bound for input {pos} axis {axis}:")
        except ValueError as exc:
            raise WhatIfError(str(exc)) from None
        if n < 1:
            raise WhatIfError(f"bound {n} for input {pos} axis {axis}: a bound is at least 1")
        if n > s.shape[axis]:
            raise WhatIfError(f"bound {n:,} for input {pos} axis {axis} is above the exported one "
                              f"({s.shape[axis]:,}): the program never ran a larger size, so pte_lab will not "
                              f"extrapolate; re-export with the larger bound")
        keys.append((pos, axis))
        asked.append(n)
        exported.append(s.shape[axis])
    return tuple(keys), tuple(asked), tuple(exported)


def _three(bound: int) -> tuple[int, int, int] | None:
    """Three distinct sizes in [2, bound] to run at (small: a run logs every tensor), the last one odd."""
    picks = [s for s in (8, 16, 13) if s <= bound]
    if len(picks) == 3:
        return tuple(picks)
    cands = sorted({s for s in (2, 3, bound // 2, bound - 1, bound) if 2 <= s <= bound})
    if len(cands) < 3:
        return None
    return cands[0], cands[-1], cands[1]


def sample_points(keys, exported) -> list[tuple[int, ...]]:
    """Where to run the method: a base point, one point per dynamic dim changing only that dim, and a check
    point changing them all. Raises :class:`WhatIfError` for a bound too small to fit (below 3)."""
    picks = []
    for key, b in zip(keys, exported):
        p = _three(b)
        if p is None:
            raise WhatIfError(f"input {key[0]} axis {key[1]} is exported with bound {b}: too few sizes to learn "
                              f"how the tensors scale with it (three are needed)")
        picks.append(p)
    base = tuple(p[0] for p in picks)
    points = [base]
    for k in range(len(keys)):
        points.append(tuple(p[1] if j == k else p[0] for j, p in enumerate(picks)))
    points.append(tuple(p[2] for p in picks))
    return points


def logged_values(method) -> list[tuple[int, tuple[int, ...]]]:
    """Per instruction, the values ETDump logs for it, in order: a kernel call's returned value (a tensor
    list as its items), a delegate call's arguments; other instructions log nothing."""
    vals = method.raw.values
    out = []
    for ins in method.instructions:
        if ins.kind == InstructionKind.KERNEL_CALL and ins.args:
            v = vals[ins.args[-1]]
            out.append((ins.index, tuple(i for i in v.items if i >= 0) if v.kind in _TENSOR_LISTS
                        else (ins.args[-1],)))
        elif ins.kind == InstructionKind.DELEGATE_CALL:
            out.append((ins.index, tuple(ins.args)))
    return out


#: the kinds of value that hold a list of tensors (ETDump logs a kernel's returned list as its items)
_TENSOR_LISTS = (ValueKind.TENSOR_LIST, ValueKind.OPTIONAL_TENSOR_LIST)

#: the size arithmetic ExecuTorch emits between kernels (prim ops: ETDump does not trace them)
_INT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "sym_max": max, "sym_min": min,
}


def _prim(ins, vals, shapes: dict, ints: dict, lists: dict) -> None:
    """Evaluate one prim op on known sizes: ``sym_size``, ``sym_numel``, integer arithmetic, ``et_view``
    (what it cannot evaluate stays unknown)."""
    op, a = ins.target, ins.args
    if op == "aten::sym_size.int" and len(a) == 3 and a[0] in shapes and a[1] in ints:
        shape = shapes[a[0]]
        if shape:
            ints[a[2]] = shape[ints[a[1]] % len(shape)]
    elif op == "aten::sym_numel.default" and len(a) == 2 and a[0] in shapes:
        ints[a[1]] = int(np.prod(shapes[a[0]], dtype=np.int64))
    elif op.startswith("executorch_prim::et_view") and len(a) == 3 and a[0] in shapes and a[1] in lists:
        dims = [ints.get(i) for i in lists[a[1]]]
        if any(d is None for d in dims):
            return
        if -1 in dims:
            known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
            numel = int(np.prod(shapes[a[0]], dtype=np.int64))
            if known == 0:
                return
            dims[dims.index(-1)] = numel // known
        shapes[a[2]] = tuple(dims)
    elif op.startswith("executorch_prim::"):
        name = op.split("::", 1)[1].split(".", 1)[0]
        fn = _INT_OPS.get(name)
        if name == "neg" and len(a) == 2 and a[0] in ints:
            ints[a[1]] = -ints[a[0]]
        elif fn is not None and len(a) == 3 and a[0] in ints and a[1] in ints:
            try:
                ints[a[2]] = fn(ints[a[0]], ints[a[1]])
            except ZeroDivisionError:
                pass


def value_shapes(method, logged, point, keys, scalars=None) -> dict[int, tuple[int, ...]]:
    """Value -> shape for one run: the method's inputs at ``point``, every value ETDump logged (``logged``:
    :func:`pte_lab.runtime.shapes.record_shapes`'s pairs), and, instruction by instruction, what the prim ops
    ETDump does not trace compute from them (``scalars``: the method's Int values and IntList items, from
    :func:`pte_lab.runtime.shapes.program_scalars`). An instruction whose logged count does not match what
    it should log is skipped (its values stay unknown)."""
    shapes: dict[int, tuple[int, ...]] = {}
    for s in method.inputs:
        if s.kind == ValueKind.TENSOR and s.shape is not None:
            shape = list(s.shape)
            for (pos, axis), n in zip(keys, point):
                if pos == s.position:
                    shape[axis] = n
            shapes[s.value] = tuple(shape)
    ints, lists = (dict(scalars[0]), scalars[1]) if scalars is not None else ({}, {})
    by_ins: dict[int, list] = {}
    for ins, sizes in logged:
        by_ins.setdefault(ins, []).append(sizes)
    expected = dict(logged_values(method))
    vals = method.raw.values
    for ins in method.instructions:
        values = expected.get(ins.index)
        got = by_ins.get(ins.index)
        if values is not None and got is not None:
            if len(got) == len(values):
                for v, sizes in zip(values, got):
                    if sizes is not None and vals[v].tensor is not None:
                        shapes[v] = sizes
        elif ins.kind == InstructionKind.KERNEL_CALL:
            _prim(ins, vals, shapes, ints, lists)
    return shapes


def describe_tensor(method, value: int) -> str:
    """``tensor v12 (its name)``, or written by its operator, or its role: a planned value in a message."""
    t = next((p for p in method.planned if p.value == value), None)
    if t is None:
        return f"value {value}"
    what = f" ({t.name})" if t.name else f" (written by {t.op})" if t.op else f" ({t.role})"
    return f"tensor v{value}{what}"


def unrecorded(method, value: int, keys, point) -> WhatIfError:
    """The refusal for a dynamic tensor whose shape no run recorded at ``point``: which tensor and operator,
    why (nothing logs it, or its instruction's log did not match), and what to do instead."""
    logs = next(((ins, values) for ins, values in logged_values(method) if value in values), None)
    why = ("ETDump traces a kernel call's output and a delegate call's arguments, and no such instruction "
           "writes it" if logs is None else
           f"instruction {logs[0]} logged it, but not as the {len(logs[1])} tensors it writes")
    return WhatIfError(f"{method.name}: no shape was recorded for {describe_tensor(method, value)} at "
                       f"{point_text(keys, point)} ({why}), so how it scales is unknown; pte_lab refuses to "
                       f"guess: re-export at the bound you want and read its plan")


@dataclass(frozen=True)
class ShapeFit:
    """Every planned tensor's dims as exact affine functions of the dynamic dims (see the module)."""

    method: str
    keys: tuple[DimKey, ...]
    exported: tuple[int, ...]
    #: planned value indices, in value order, and each one's element size and dims
    values: tuple[int, ...]
    element_sizes: tuple[int, ...]
    dims: tuple[tuple[AffineDim, ...], ...]
    #: the points the method ran at
    points: tuple[tuple[int, ...], ...]
    #: when the runs were made (seconds since the epoch) where this fit is a kept one
    #: (:mod:`pte_lab.runtime.kept`); None: learnt by this call
    kept: float | None = None

    def _arrays(self):
        arr = self.__dict__.get("_arr")
        if arr is None:
            rank = max((len(d) for d in self.dims), default=0)
            n, k = len(self.dims), len(self.keys)
            a = np.ones((n, rank), np.int64)  # padding dims are 1
            b = np.zeros((n, rank, k), np.int64)
            q = np.ones((n, rank), np.int64)
            for i, ds in enumerate(self.dims):
                for j, d in enumerate(ds):
                    a[i, j], q[i, j] = d.const, d.den
                    b[i, j, :] = d.coeffs
            arr = (a, b, q, np.array(self.element_sizes, np.int64))
            object.__setattr__(self, "_arr", arr)
        return arr

    def shapes_at(self, point, round_up: bool = False) -> np.ndarray:
        """(tensors x max rank) dims at ``point`` (padded with 1), exact in int64. Raises :class:`WhatIfError`
        naming the first tensor whose dim is not a whole non-negative number there (``round_up``: such a dim is
        rounded up, and 0 below it, instead), or is :data:`~.dtypes.MAX_BYTES` or more: refused, never wrapped."""
        a, b, q, _ = self._arrays()
        point = tuple(int(n) for n in point)
        if any(abs(n) >= MAX_BYTES for n in point):  # no dim that depends on it is exact in int64
            k = next(k for k, n in enumerate(point) if abs(n) >= MAX_BYTES)
            raise WhatIfError(f"{self.method}: {point_text(self.keys[k:k + 1], point[k:k + 1])} is 2**62 or "
                              f"more: beyond what pte_lab computes exactly in int64")
        if b.shape[2]:
            with np.errstate(over="ignore"):  # an upper bound on |a + b.point|: exact arithmetic below 2**62
                most = np.abs(a).astype(float) + np.abs(b).astype(float) @ np.abs(np.array(point, float))
            if (most >= MAX_BYTES).any():  # exactly, in Python ints: refused where it is that large
                exact = [[d.const + sum(c * n for c, n in zip(d.coeffs, point)) for d in row]
                         + [1] * (a.shape[1] - len(row)) for row in self.dims]
                for i, j in map(tuple, np.argwhere(most >= MAX_BYTES).tolist()):
                    if abs(exact[i][j]) >= MAX_BYTES:
                        raise WhatIfError(
                            f"{self.method}: {_value_name(self, i)} dim {j} would be "
                            f"{_big(Fraction(exact[i][j], int(q[i, j])))} at {point_text(self.keys, point)}: its "
                            f"arithmetic reaches 2**62 or more, beyond what pte_lab computes exactly in int64; "
                            f"pte_lab refuses it rather than wrap")
                num = np.array(exact, np.int64).reshape(a.shape)
            else:
                num = a + b @ np.asarray(point, np.int64)
        else:
            num = a.copy()
        if round_up:
            return -(-np.maximum(num, 0) // q)
        bad = (num % q != 0) | (num < 0)
        if bad.any():
            i, j = map(int, np.argwhere(bad)[0])
            raise WhatIfError(f"{self.method}: {_value_name(self, i)} dim {j} would be {num[i, j]}/{q[i, j]} at "
                              f"{point_text(self.keys, point)}: not a whole size, so its shape there is not "
                              f"affine in the sizes sampled; pte_lab refuses to guess")
        return num // q

    def nbytes_at(self, point, round_up: bool = False) -> np.ndarray:
        """Bytes of every planned tensor (in :attr:`values` order) at ``point`` (``round_up``: see
        :meth:`shapes_at`). Raises :class:`WhatIfError` where :meth:`shapes_at` does, and naming the first tensor
        of :data:`~.dtypes.MAX_BYTES` bytes or more, or a total that is: int64 would wrap them."""
        return self.bytes_of(self.shapes_at(point, round_up), point)

    def bytes_of(self, dims: np.ndarray, point) -> np.ndarray:
        """Bytes of every planned tensor of ``dims`` (:meth:`shapes_at` at ``point``), exact in int64: a tensor or
        a total of :data:`~.dtypes.MAX_BYTES` or more is refused (:class:`WhatIfError`, naming it), never
        wrapped."""
        elem = self._arrays()[3]
        with np.errstate(over="ignore", invalid="ignore"):  # within a few ulps: exact where it is below 2**61
            most = np.where((dims == 0).any(axis=1), 0.0, np.prod(dims.astype(float), axis=1) * elem)
        if most.size and (most.max() >= MAX_BYTES // 2 or most.sum() >= MAX_BYTES // 2):
            exact = [math.prod(int(x) for x in row) * int(e) for row, e in zip(dims.tolist(), elem.tolist())]
            big = next((i for i, n in enumerate(exact) if n >= MAX_BYTES), None)
            if big is not None:
                shape = ", ".join(f"{int(x):,}" for x in dims[big][:len(self.dims[big])])
                raise WhatIfError(f"{self.method}: {_value_name(self, big)} would be [{shape}], {_big(exact[big])} "
                                  f"bytes, at {point_text(self.keys, point)}: 2**62 bytes or more, beyond what "
                                  f"pte_lab plans exactly in int64; pte_lab refuses it rather than wrap")
            if sum(exact) >= MAX_BYTES:
                raise WhatIfError(f"{self.method}: the planned tensors would be {_big(sum(exact))} bytes together "
                                  f"at {point_text(self.keys, point)}: 2**62 bytes or more, beyond what pte_lab "
                                  f"plans exactly in int64; pte_lab refuses it rather than wrap")
        return dims.prod(axis=1) * elem


def _big(n) -> str:
    """An exact figure for a message (``1,234``, ``3/2``), or its size in bits where it is too long to write."""
    n = Fraction(n)
    if n.denominator != 1:
        return str(n) if max(n.numerator.bit_length(), n.denominator.bit_length()) <= 256 else "a fraction"
    n = n.numerator
    return f"{n:,}" if n.bit_length() <= 256 else f"a number of {n.bit_length():,} bits"


def _value_name(fit: ShapeFit, i: int) -> str:
    return f"tensor v{fit.values[i]}"


def point_text(keys, point) -> str:
    """``input 0 axis 1 = 800``; a static prediction's key is its parameter's name: ``max_seq_len = 256``."""
    return ", ".join(f"{k} = {n:,}" if isinstance(k, str) else f"input {k[0]} axis {k[1]} = {n:,}"
                     for k, n in zip(keys, point))


def fit_shapes(method, keys, exported, runs: list[tuple[tuple[int, ...], dict]]) -> ShapeFit:
    """Fit every planned tensor's dims from ``runs`` (``(point, value -> shape)``, at :func:`sample_points`),
    checked at the last run's point and against the file's upper bound at the exported point.

    Returns the :class:`ShapeFit`. Raises :class:`WhatIfError` naming the first tensor that no run recorded,
    whose rank changes, or whose dims are not affine in the sizes sampled."""
    k = len(keys)
    base_point, base = runs[0]
    steps = runs[1:1 + k]
    checks = [(tuple(p), s) for p, s in runs[1 + k:]]
    values, sizes, dims = [], [], []
    for t in method.planned:
        raw = method.raw.values[t.value].tensor
        _, elem = scalar_type(raw.scalar_type, f"{method.name} v{t.value}")
        values.append(t.value)
        sizes.append(elem)
        static = raw.shape_dynamism == TensorShapeDynamism.STATIC
        if static:
            dims.append(tuple(AffineDim(int(s), (0,) * k) for s in raw.sizes))
            continue
        seen = [s.get(t.value) for _, s in runs]
        if any(x is None for x in seen):
            raise unrecorded(method, t.value, keys, next(p for (p, s) in runs if s.get(t.value) is None))
        if len({len(x) for x in seen} | {len(raw.sizes)}) != 1:
            raise WhatIfError(f"{method.name}: {describe_tensor(method, t.value)} changes rank between runs "
                              f"({', '.join(short_shape(x) for x in seen)}); pte_lab refuses to guess")
        row = []
        for j in range(len(raw.sizes)):
            coeffs = []
            for kk, (p, s) in enumerate(steps):
                coeffs.append(Fraction(s[t.value][j] - base[t.value][j], p[kk] - base_point[kk]))
            const = Fraction(base[t.value][j]) - sum(c * n for c, n in zip(coeffs, base_point))
            den = lcm(const.denominator, *(c.denominator for c in coeffs))
            row.append(AffineDim(int(const * den), tuple(int(c * den) for c in coeffs), den))
        row = tuple(row)
        for p, s in checks + [(tuple(exported), {t.value: tuple(raw.sizes)})]:
            want = s[t.value]
            got = [d.at(p) for d in row]
            if any(g != w for g, w in zip(got, want)):
                what = ("the upper bound the file plans" if p == tuple(exported) and s.get(t.value) == tuple(raw.sizes)
                        and (p, s) not in checks else "the check run")
                names = [f"N{i}" for i in range(k)] if k > 1 else ["N"]
                raise WhatIfError(
                    f"{method.name}: {describe_tensor(method, t.value)} is not affine in the sizes sampled: "
                    f"{short_shape(want)} at {point_text(keys, p)} ({what}), where the fit "
                    f"[{', '.join(dim_text(d, names) for d in row)}] gives "
                    f"{short_shape([str(g) for g in got])}; pte_lab refuses to guess")
        dims.append(row)
    return ShapeFit(method.name, tuple(keys), tuple(exported), tuple(values), tuple(sizes), tuple(dims),
                    tuple(tuple(p) for p, _ in runs))
