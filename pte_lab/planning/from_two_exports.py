"""What a static export would plan at a third value of the one parameter two exports differ in.

``pte_lab.what_if_from("llm64.pte", "llm128.pte", values=(64, 128), at=256)``: two exports of one model that
differ only in one parameter (an LLM's ``max_seq_length`` / ``max_context_length``: the KV caches, the
masks, the rotary tables all scale with it) predict a third export, tensor by tensor. Tensors are paired by
place in the instruction order (the same instructions, the same operators, each planned tensor used at the
same places), each dim is fitted as an exact affine function of the parameter from its two sizes, and the
arenas are replanned with ExecuTorch's greedy exactly as :func:`~pte_lab.planning.at_bound.what_if` does
(:class:`~pte_lab.planning.at_bound.Predictor`; lifetimes and aliases are the file's).

Refused, with one line naming the first mismatch (:class:`ExportsMismatch`): a pair whose methods,
instructions or planned tensors do not match one to one, or that differs in a second parameter (export_llm's
metadata methods, ``get_vocab_size``..., other than the ones that carry the values). A dim that is not a
whole size at ``at`` is refused, naming the tensor (:class:`~pte_lab.model.shape_fit.WhatIfError`).
"""

from __future__ import annotations

import dataclasses
import operator
import os
from fractions import Fraction
from math import lcm

from ..arguments import COUNT, NAME, PROGRAM, TWO, arguments, optional
from ..model import Pte, open_pte
from ..model.dtypes import scalar_type, short_shape
from ..model.shape_fit import AffineDim, ShapeFit, WhatIfError, TWO_EXPORTS, describe_tensor, dynamic_inputs
from ..units import check_int64
from ..vocabulary import ValueKind
from .at_bound import FromExports, Predictor, WhatIf

__all__ = ["what_if_from", "pair_tensors", "fit_pair", "ExportsMismatch", "check_values"]


class ExportsMismatch(WhatIfError):
    """Raised when two exports are not one model at two values of one parameter (the message names the first
    mismatch)."""


def check_values(values, at) -> tuple[int, int, int]:
    """``values`` (two distinct ints) and ``at`` (an int above 0), each within int64, checked: ``(v0, v1, at)``.
    Raises :class:`WhatIfError` (one line) otherwise."""
    try:
        v0, v1 = values
    except (TypeError, ValueError):
        raise WhatIfError(f"values {values!r}: give the parameter's two values, one per export, "
                          f"e.g. (64, 128)") from None
    for what, x in (("values", v0), ("values", v1), ("at", at)):
        try:
            if isinstance(x, bool):
                raise TypeError
            operator.index(x)
        except TypeError:
            raise WhatIfError(f"{what} {x!r} is not a whole number: the parameter's values are ints") from None
    try:
        v0, v1, at = check_int64(v0, "values"), check_int64(v1, "values"), check_int64(at, "at")
    except ValueError as exc:
        raise WhatIfError(str(exc)) from None
    if v0 == v1:
        raise WhatIfError(f"values ({v0}, {v1}): the two exports' values must differ (two points fit a line, "
                          f"one does not)")
    if at <= 0:
        raise WhatIfError(f"at {at}: the value to predict at is more than 0")
    return v0, v1, at


def _open(source) -> tuple[Pte, str | None]:
    if isinstance(source, Pte):
        return source, source.path
    if isinstance(source, (bytes, bytearray, memoryview)):
        return open_pte(source), None
    return open_pte(source), os.fspath(source)


def _metadata(pte: Pte) -> list[str]:
    """The methods that only return one constant Int (export_llm's ``get_max_seq_len``...)."""
    return [name for name, m in pte.methods.items()
            if not m.instructions and len(m.outputs) == 1 and m.outputs[0].kind == ValueKind.INT]


def _metadata_values(pte: Pte, names) -> dict[str, int]:
    """name -> the Int each metadata method in ``names`` returns, read from the file (the method's one output
    value: no instructions run to make it)."""
    return {n: int(v) for n in names if (v := pte.methods[n].outputs[0].scalar) is not None}


def _parameter(pa: Pte, pb: Pte, values) -> tuple[str, ...]:
    """The names of the metadata methods that return ``values`` (``get_`` left off); refuses a pair whose
    other metadata differ (a second parameter, or values that are not the exports')."""
    in_b = set(_metadata(pb))
    names = [n for n in _metadata(pa) if n in in_b]
    if not names:
        return ()
    xa, xb = _metadata_values(pa, names), _metadata_values(pb, names)
    carried = []
    for n in names:
        x, y = xa.get(n), xb.get(n)
        if x == y:
            continue
        if (x, y) == tuple(values):
            carried.append(n.removeprefix("get_"))
            continue
        raise ExportsMismatch(f"{n} returns {x} in the first export and {y} in the second, not the values given "
                              f"({values[0]}, {values[1]}): the exports differ in more than one parameter, or the "
                              f"values are not theirs")
    return tuple(carried)


def _pick_method(pa: Pte, pb: Pte, method: str | None) -> str:
    only_a = [n for n in pa.methods if n not in pb.methods]
    only_b = [n for n in pb.methods if n not in pa.methods]
    if only_a or only_b:
        n, where = (only_a[0], "first") if only_a else (only_b[0], "second")
        raise ExportsMismatch(f"the exports do not have the same methods: {n!r} is only in the {where}")
    if method is not None:
        if method not in pa.methods:
            raise WhatIfError(f"no method {method!r} (methods: {', '.join(pa.methods)})")
        return method
    planned = [n for n, m in pa.methods.items() if m.planned or pb.methods[n].planned]
    if len(planned) == 1:
        return planned[0]
    changed = [n for n in planned if [a.size for a in pa.methods[n].arenas] != [a.size for a in pb.methods[n].arenas]]
    if len(changed) == 1:
        return changed[0]
    if not planned:
        raise WhatIfError("no method of these programs plans a tensor: there is nothing to predict")
    raise WhatIfError(f"methods {', '.join(changed or planned)} plan tensors: name one (method=...)")


def _places(m) -> list[tuple[str, list[int]]]:
    """Where each value is used, in order: the method's inputs, each instruction's arguments (a tensor list as
    its items), its outputs; each place with what it is (for the mismatch message)."""
    vals = m.raw.values

    def expand(args):
        out = []
        for v in args:
            raw = vals[v] if 0 <= v < len(vals) else None
            out.extend([i for i in raw.items] if raw is not None and raw.kind.endswith("TensorList") else [v])
        return out

    places = [("the inputs", [s.value for s in m.inputs])]
    places += [(f"instruction {ins.index} ({ins.target})", expand(ins.args)) for ins in m.instructions]
    places.append(("the outputs", [s.value for s in m.outputs]))
    return places


def pair_tensors(ma, mb) -> dict[int, int]:
    """Method ``mb``'s planned value -> ``ma``'s, paired by place in the instruction order (the inputs, each
    instruction's arguments, the outputs), then the planned tensors no place names, in value order.

    Raises :class:`ExportsMismatch` naming the first instruction that differs (kind, operator, argument count)
    or the first tensor that does not match one to one (planned in one export only, paired with two, another
    dtype, rank or arena)."""
    text = _instruction_mismatch(ma, mb)
    if text is not None:
        raise ExportsMismatch(f"{ma.name}: {text}")
    pa = {t.value: t for t in ma.planned}
    pb = {t.value: t for t in mb.planned}
    b2a: dict[int, int] = {}
    a2b: dict[int, int] = {}
    for (where, xs), (_, ys) in zip(_places(ma), _places(mb)):
        if len(xs) != len(ys):
            raise ExportsMismatch(f"{ma.name}: {where} names {len(xs)} values in the first export, {len(ys)} in the "
                                  f"second")
        for k, (x, y) in enumerate(zip(xs, ys)):
            if (x in pa) != (y in pb):
                first, second = describe_tensor(ma, x), describe_tensor(mb, y)
                raise ExportsMismatch(f"{ma.name}: {where}, argument {k}: " + (
                    f"{first} is planned in the first export, {second} not in the second" if x in pa else
                    f"{first} is not planned in the first export, {second} is in the second"))
            if x not in pa:
                continue
            if a2b.get(x, y) != y or b2a.get(y, x) != x:
                raise ExportsMismatch(f"{ma.name}: {where}, argument {k}: the tensors do not match one to one "
                                      f"(first export {describe_tensor(ma, x)}, second {describe_tensor(mb, y)})")
            a2b[x], b2a[y] = y, x
    rest_a = sorted(set(pa) - set(a2b))
    rest_b = sorted(set(pb) - set(b2a))
    if len(rest_a) != len(rest_b):
        raise ExportsMismatch(f"{ma.name}: the first export plans {len(pa):,} tensors, the second {len(pb):,}")
    b2a.update(zip(rest_b, rest_a))
    for y in sorted(b2a):
        x = b2a[y]
        ta, tb = pa[x], pb[y]
        for what, u, w in (("dtype", ta.dtype, tb.dtype), ("rank", len(ta.shape), len(tb.shape)),
                           ("arena", ta.mem_id, tb.mem_id)):
            if u != w:
                raise ExportsMismatch(f"{ma.name}: {describe_tensor(mb, y)} has {what} {u} in the first export and {w} "
                                      f"in the second: not the same tensor at another size")
    return b2a


def _instruction_mismatch(ma, mb) -> str | None:
    """The first difference between the two methods' instructions (kind and operator), or None; first of all,
    one export with a dynamic input and the other none (its instructions differ from the first: ``sym_size``)."""
    dyn = [bool(dynamic_inputs(ma)), bool(dynamic_inputs(mb))]
    if dyn[0] != dyn[1]:
        which, other = ("first", "second") if dyn[0] else ("second", "first")
        return (f"the {which} export has a dynamic input and the {other} none: {TWO_EXPORTS}; a dynamic one alone predicts another bound "
                f"(pte-lab what-if FILE --bound INPUT:AXIS=N)")
    for ia, ib in zip(ma.instructions, mb.instructions):
        if (ia.kind, ia.target) != (ib.kind, ib.target):
            return (f"the instructions differ first at instruction {ia.index}: {ia.target} in the first export, "
                    f"{ib.target} in the second")
    if len(ma.instructions) != len(mb.instructions):
        return (f"the first export has {len(ma.instructions):,} instructions, the second "
                f"{len(mb.instructions):,}")
    return None


def fit_pair(ma, mb, pairs: dict[int, int], values, key: str = "parameter", at: int | None = None) -> ShapeFit:
    """Every planned tensor of ``mb`` (at ``values[1]``) with its dims as exact affine functions of the parameter,
    from its pair in ``ma`` (at ``values[0]``). With ``at``, refuses (:class:`WhatIfError`, naming the tensor)
    a dim that is not a whole size there."""
    v0, v1 = values
    sa = {t.value: t.shape for t in ma.planned}
    vals, sizes, dims = [], [], []
    for t in mb.planned:
        raw = mb.raw.values[t.value].tensor
        x = pairs[t.value]
        row = []
        for j, (d0, d1) in enumerate(zip(sa[x], t.shape)):
            c = Fraction(d1 - d0, v1 - v0)
            const = d0 - c * v0
            den = lcm(c.denominator, const.denominator)
            row.append(AffineDim(int(const * den), (int(c * den),), den))
            if at is not None:
                n = row[-1].at((at,))
                if n.denominator != 1 or n < 0:
                    raise WhatIfError(
                        f"{mb.name}: {describe_tensor(mb, t.value)} dim {j} is {d0:,} at {key} = {v0:,} and {d1:,} at "
                        f"{v1:,}: at {at:,} that line gives {n}, not a whole size, so the dim is not affine in "
                        f"{key}; pte_lab refuses to guess ({short_shape(sa[x])} and {short_shape(t.shape)})")
        vals.append(t.value)
        sizes.append(scalar_type(raw.scalar_type, f"{mb.name} v{t.value}")[1])
        dims.append(tuple(row))
    return ShapeFit(mb.name, (key,), (v1,), tuple(vals), tuple(sizes), tuple(dims), ((v0,), (v1,)))


@arguments(a=PROGRAM, b=PROGRAM, values=TWO, at=COUNT, method=optional(NAME))
def what_if_from(a, b, values, at: int, method: str | None = None) -> WhatIf:
    """The method as if exported at ``at`` of the one parameter exports ``a`` (at ``values[0]``) and ``b`` (at
    ``values[1]``) differ in: every planned tensor's shape and bytes, each arena as ExecuTorch's greedy plans it
    (and pte_lab's best fit, the lower bound), the peak (see the module). Nothing is run.

    Parameters
    ----------
    a, b : str or os.PathLike or bytes or pte_lab.Pte
        One model exported at two values of one parameter.
    values : tuple of int
        The parameter's value in ``a`` and in ``b`` (two distinct ints).
    at : int
        The value to predict the method at (above 0).
    method : str, optional
        The method (default: their one method with planned tensors).

    Returns
    -------
    pte_lab.planning.at_bound.WhatIf
        The prediction (its ``exports`` says where it comes from).

    Raises
    ------
    ExportsMismatch
        For a pair that is not one model at two values of one parameter (naming the first mismatch).
    pte_lab.model.shape_fit.WhatIfError
        For values that are not two distinct ints, ``at`` not above 0, or a dim not whole at ``at``.
    """
    v0, v1, at = check_values(values, at)
    (pa, path_a), (pb, path_b) = _open(a), _open(b)
    name = _pick_method(pa, pb, method)
    ma, mb = pa.methods[name], pb.methods[name]
    pairs = pair_tensors(ma, mb)
    names = _parameter(pa, pb, (v0, v1))
    key = names[0] if names else "parameter"
    fit = fit_pair(ma, mb, pairs, (v0, v1), key, at)
    w = Predictor(mb, fit).predict((at,), path_b)
    return dataclasses.replace(w, exports=FromExports((path_a, path_b), (v0, v1), names))
