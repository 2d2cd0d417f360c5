"""The plan and its instructions: tensors outside their arenas, overlapping live tensors, loops, unplanned
inputs and outputs, writes with no memory, control operands and kernel arguments of the wrong kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable

import numpy as np

from ...format import TENSOR_ALIGNMENT, ScalarType, TensorDataLocation, TensorShapeDynamism
from ...units import align_up, count, first_few, human_bytes
from ...vocabulary import InstructionKind, ValueKind
from ..arrays import unique
from ..lifetimes import Writes
from ..dtypes import short_shape
from ..peak import PeakCauseKind, may_hold_scores, safe_softmax_edit
from .base import Details, Finding, Kind, Prescription, ValuesDetails

if TYPE_CHECKING:  # pragma: no cover
    from ..method import Method
    from ..validate import Conflict

__all__ = ["plan_findings", "instruction_findings", "operator_findings", "ARGUMENT_KINDS", "ValueDetails",
           "PlanOverlapDetails", "OperandKindsDetails", "OperatorArgumentsDetails", "UncheckedOperatorsDetails",
           "prescription_findings", "ArenaBoundDetails", "DynamicBoundDetails",
           "AttentionScoresDetails", "SAFE_SOFTMAX_CHANGE", "FUSED_ATTENTION_CHANGE"]


@dataclass(frozen=True)
class ValueDetails(Details):
    """The value planned outside its method's arenas (``unknown_arena``, ``outside_arena``)."""

    value: int


@dataclass(frozen=True)
class PlanOverlapDetails(Details):
    mem_id: int
    #: the two values alive at once on the same bytes
    values: tuple[int, int]


@dataclass(frozen=True)
class OperandKindsDetails(Details):
    #: how many control instructions name a value of the wrong kind
    instructions: int


@dataclass(frozen=True)
class OperatorArgumentsDetails(Details):
    #: every argument of the wrong kind, in words
    problems: tuple[str, ...]


@dataclass(frozen=True)
class UncheckedOperatorsDetails(Details):
    #: operators without a schema, sorted
    operators: tuple[str, ...]


def plan_findings(method: str, columns, buffer_sizes, conflicts: "Iterable[Conflict]") -> list[Finding]:
    """Plan problems: tensors in arenas the method lacks or past their end, overlapping live tensors.

    ``columns`` are the planned tensors' value, mem_id, offset and nbytes (arrays, see
    :attr:`pte_lab.model.analysis.Analysis.columns`).
    """
    mem_id, end = columns["mem_id"], columns["offset"] + columns["nbytes"]
    known = (mem_id >= 1) & (mem_id < len(buffer_sizes))
    sizes = np.append(np.asarray(buffer_sizes, dtype=np.int64), 0)  # the last entry for unknown arenas
    out = []
    for i in np.flatnonzero(~known | (end > sizes[np.where(known, mem_id, -1)])).tolist():
        v, m, offset = (int(columns[k][i]) for k in ("value", "mem_id", "offset"))
        if not known[i]:
            out.append(Finding(Kind.UNKNOWN_ARENA, method,
                               f"value {v} is planned in mem_id {m}, which this method "
                               f"does not have (arenas 1..{len(buffer_sizes) - 1})", ValueDetails(v)))
        else:
            out.append(Finding(Kind.OUTSIDE_ARENA, method,
                               f"value {v} occupies bytes [{offset}, {int(end[i])}) "
                               f"past the end of arena {m} ({buffer_sizes[m]} bytes)", ValueDetails(v)))
    for c in conflicts:
        out.append(Finding(Kind.PLAN_OVERLAP, method, str(c), PlanOverlapDetails(c.mem_id, (c.a, c.b))))
    return out


def _unbacked_writes(m: "Method") -> list[tuple[int, int]]:
    """(value, instruction) for tensors a KernelCall or MoveCall writes that have no memory at all."""
    raw = m.raw
    io = set(raw.inputs) | set(raw.outputs)
    out, seen, done = [], set(), set()
    writes = Writes(raw)
    for i, ins in enumerate(raw.instructions):
        if ins.kind not in (InstructionKind.KERNEL_CALL, InstructionKind.MOVE_CALL) or id(ins) in done:
            continue
        done.add(id(ins))  # an instruction record named again writes the same values
        for v in writes(i):
            t = raw.values[v].tensor
            if (t is not None and v not in seen and v not in io and t.mem_id is None and t.data_buffer_idx == 0
                    and t.location != TensorDataLocation.EXTERNAL
                    and t.shape_dynamism != TensorShapeDynamism.DYNAMIC_UNBOUND):
                seen.add(v)
                out.append((v, i))
    return out


def _wrong_operands(m: "Method") -> list[str]:
    """Control instructions whose operand is of a kind the runtime cannot take."""
    raw, out = m.raw, []
    for i, ins in enumerate(raw.instructions):
        if ins.kind == InstructionKind.FREE_CALL and raw.values[ins.args[0]].kind != ValueKind.TENSOR:
            out.append(f"instruction {i} frees v{ins.args[0]}, a {raw.values[ins.args[0]].kind}, not a tensor")
        elif ins.kind == InstructionKind.JUMP_FALSE_CALL:
            v = raw.values[ins.args[0]]
            if not (v.kind == ValueKind.BOOL or (v.kind == ValueKind.TENSOR and v.tensor.scalar_type == ScalarType.BOOL)):
                out.append(f"instruction {i} branches on v{ins.args[0]}, a {v.kind}, not a boolean")
    return out


def instruction_findings(m: "Method") -> list[Finding]:
    """Loops, kernel writes with no memory, control operands of the wrong kind, unplanned inputs/outputs."""
    out = []
    if m.has_loops:
        out.append(Finding(Kind.LOOPS, m.name,
                           "the method jumps backwards (a loop): lifetimes of values used inside "
                           "the loop are extended to its last instruction"))
    unbacked = _unbacked_writes(m)
    if unbacked:
        shown = ", ".join(f"v{v} (instruction {i})" for v, i in unbacked[:5])
        out.append(Finding(Kind.UNBACKED_TENSOR, m.name,
                           f"{count(len(unbacked), 'tensor')} written by a kernel {'has' if len(unbacked) == 1 else 'have'}"
                           f" no memory: not planned, not a constant, not a method input or output ({shown}); "
                           f"ExecuTorch would write through a null pointer",
                           ValuesDetails(tuple(v for v, _ in unbacked))))
    wrong = _wrong_operands(m)
    if wrong:
        out.append(Finding(Kind.OPERAND_KINDS, m.name,
                           first_few(wrong, 4, "; ", "; and {n} more")
                           + " (ExecuTorch aborts or refuses the method)", OperandKindsDetails(len(wrong))))
    unplanned = [s for s in m.inputs + m.outputs if s.kind == ValueKind.TENSOR and not s.planned]
    if unplanned:
        out.append(Finding(Kind.UNPLANNED_IO, m.name,
                           f"{count(len(unplanned), 'input/output', 'inputs/outputs')} "
                           f"{'is' if len(unplanned) == 1 else 'are'} not planned: the caller provides their memory",
                           ValuesDetails(tuple(s.value for s in unplanned))))
    return out


#: schema argument type -> the EValue kinds ExecuTorch's kernel wrappers unbox for it (``T?`` adds None)
ARGUMENT_KINDS: dict[str, frozenset[str]] = {
    "Tensor": frozenset({"Tensor"}), "Tensor[]": frozenset({"TensorList"}),
    "Tensor?[]": frozenset({"OptionalTensorList"}),
    "int": frozenset({"Int"}), "SymInt": frozenset({"Int"}), "ScalarType": frozenset({"Int"}),
    "Layout": frozenset({"Int"}), "MemoryFormat": frozenset({"Int"}),
    "float": frozenset({"Double"}), "bool": frozenset({"Bool"}), "Scalar": frozenset({"Int", "Double", "Bool"}),
    "int[]": frozenset({"IntList"}), "SymInt[]": frozenset({"IntList"}), "float[]": frozenset({"DoubleList"}),
    "bool[]": frozenset({"BoolList"}), "str": frozenset({"String"}),
}
_NONE = frozenset({"None", "Null"})
_A = {"Int": "an Int", "Double": "a Double", "Bool": "a Bool", "Tensor": "a Tensor", "None": "None", "Null": "None",
      "String": "a String", "IntList": "an IntList", "DoubleList": "a DoubleList", "BoolList": "a BoolList",
      "TensorList": "a TensorList", "OptionalTensorList": "an OptionalTensorList"}


def _accepts(type_: str) -> frozenset[str] | None:
    """EValue kinds a schema type takes; None when pte_lab does not know the type (not checked)."""
    optional = type_.endswith("?")
    base = type_[:-1] if optional else type_
    if base.endswith("]") and "[" in base and not base.endswith("[]"):
        base = base[: base.index("[")] + "[]"  # int[2] takes what int[] takes
    kinds = ARGUMENT_KINDS.get(base)
    if kinds is None:
        return None
    return kinds | _NONE if optional else kinds


def _argument_problems(plan, ins, i: int, op: str, schema: dict) -> list[str]:
    params = list(schema["arguments"])
    returns = schema["returns"]
    if len(returns) == 1:
        params.append(("the returned value", returns[0]))
    elif len(returns) > 1:
        params.append(("the returned values", "Tensor[]"))
    else:
        params.append(("the returned value", "?"))
    if len(ins.args) != len(params):
        return [f"instruction {i} ({op}) names {count(len(ins.args), 'value')} where its schema takes "
                f"{count(len(params) - 1, 'argument')} and a return"]
    out = []
    for (name, type_), v in zip(params, ins.args):
        kinds = _accepts(type_)
        kind = plan.values[v].kind
        if kinds is not None and kind not in kinds:
            out.append(f"instruction {i} ({op}) passes v{v}, {_A.get(kind, kind)}, as {name!r}, where its schema "
                       f"takes {type_}")
    return out


def operator_findings(m: "Method", schemas: dict) -> list[Finding]:
    """Each KernelCall's arguments against its operator's schema.

    ``schemas`` maps an operator (``"aten::add.out"``) to ``{"arguments": ((name, type), ...), "returns":
    (type, ...)}`` or None when no schema is known (see :mod:`pte_lab.runtime.schemas`, which reads torch's
    registry). A KernelCall names every argument in order, then the returned value (several: one TensorList).
    """
    plan, ops = m.raw, m.operators
    problems: list[str] = []
    unknown = sorted({ops[ins.target] for ins in plan.instructions
                      if ins.kind == InstructionKind.KERNEL_CALL and schemas.get(ops[ins.target]) is None})
    done: dict[int, bool] = {}
    for i, ins in enumerate(plan.instructions):
        if ins.kind != InstructionKind.KERNEL_CALL or id(ins) in done:
            continue
        done[id(ins)] = True  # one instruction record named again passes the same values
        schema = schemas.get(ops[ins.target])
        if schema is not None:
            problems += _argument_problems(plan, ins, i, ops[ins.target], schema)
    out = []
    if problems:
        out.append(Finding(Kind.OPERATOR_ARGUMENTS, m.name,
                           "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
                           + ": ExecuTorch's kernel would abort the process reading it, so pte_lab will not load "
                           "the program", OperatorArgumentsDetails(tuple(problems))))
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        out.append(Finding(Kind.UNCHECKED_OPERATORS, m.name,
                           f"{count(len(unknown), 'operator')} without a schema pte_lab could find ({shown}): the "
                           f"kinds of {'its' if len(unknown) == 1 else 'their'} arguments are not checked before "
                           f"ExecuTorch runs {'it' if len(unknown) == 1 else 'them'}",
                           UncheckedOperatorsDetails(tuple(unknown))))
    return out


# ------------------------------------------------------------------ findings that prescribe
#: an arena above its lower bound is worth a finding from this share of the arena, and this many bytes
_BOUND_SHARE, _BOUND_BYTES = 0.10, 1024
#: a dynamic input drives an arena when its dynamic tensors hold at least this share of the arena's peak
_DYNAMIC_SHARE = 0.5


@dataclass(frozen=True)
class ArenaBoundDetails(Prescription):
    """``arena_above_bound``: ``at_stake`` is the arena's size less its lower bound."""

    mem_id: int
    size: int
    #: the most bytes alive at once (rounded to ExecuTorch's alignment) and the padding the plan keeps past
    #: its last tensor (XNNPACK programs carry 64 B): no plan with the file's lifetimes is smaller
    lower_bound: int


@dataclass(frozen=True)
class DynamicBoundDetails(Prescription):
    """``dynamic_bound``: ``at_stake`` is what the dynamic tensors hold at the arena's peak: the bytes that scale
    with the bound, an upper limit no bound reaches (a bound N keeps what N needs; ``pte-lab what-if`` gives the
    figure at N, or the largest N under a budget)."""

    mem_id: int
    #: the dynamic inputs: ``(position, shape at its upper bound)``
    inputs: tuple[tuple[int, tuple[int, ...]], ...]
    #: per input, the axis whose bound drives the plan (None where the file does not tell)
    axes: tuple[int | None, ...]
    #: the arena's peak (the bytes alive at once)
    peak_bytes: int


def _align(n: int) -> int:
    return align_up(n, TENSOR_ALIGNMENT)


def _arena_bound_findings(m: "Method") -> list[Finding]:
    if m.has_loops:  # lifetimes inside a loop are not the instruction order's: nothing to promise
        return []
    cols, out = m.analysis.columns, []
    # each arena's furthest tensor end, for all arenas at once (one mask per arena would be arenas x tensors)
    ids, at = unique(cols["mem_id"], return_inverse=True)
    ends = np.zeros(len(ids), dtype=np.int64)
    np.maximum.at(ends, at.reshape(-1), (cols["offset"] + cols["nbytes"]).astype(np.int64))
    furthest = dict(zip(ids.tolist(), ends.tolist()))
    for a in m.arenas:
        if not a.peak_bytes:
            continue
        used = _align(furthest.get(a.mem_id, 0))
        bound = min(a.size, _align(a.peak_bytes) + max(0, a.size - used))
        extra = a.size - bound
        if extra < max(_BOUND_BYTES, _BOUND_SHARE * a.size):
            continue
        change = ("replan it from the file's own lifetimes, without exporting again: `pte-lab replan IN OUT "
                  "--verify` (pte_lab.planning.replan)")
        out.append(Finding(Kind.ARENA_ABOVE_BOUND, m.name,
                           f"arena {a.mem_id} plans {human_bytes(a.size)} where its tensors need "
                           f"{human_bytes(bound)} (the most bytes alive at once: no plan with these lifetimes is "
                           f"smaller): {human_bytes(extra)} ({extra / a.size:.0%}) at stake",
                           ArenaBoundDetails(extra, change, a.mem_id, a.size, bound)))
    return out


def _dynamic_axis(m: "Method", shape: tuple[int, ...]) -> int | None:
    """The axis of a dynamic input whose bound the method's dynamic tensors carry: its only axis over 1, or the
    one whose size the most dynamic tensors have (None when two tie: the file does not say)."""
    axes = [k for k, d in enumerate(shape) if d > 1]
    if len(axes) <= 1:
        return axes[0] if axes else None
    seen = [sum(1 for t in m.planned if t.dynamic and shape[k] in t.shape) for k in axes]
    best = max(seen)
    return axes[seen.index(best)] if seen.count(best) == 1 else None


def _dynamic_findings(m: "Method") -> list[Finding]:
    if not any(s.dynamic for s in m.inputs):  # the peak is explained only where a dynamic input may drive it
        return []
    story = m.peak
    if story is None or not story.dynamic_inputs or not story.peak_bytes:
        return []
    held = sum(c.nbytes for c in story.causes if c.kind is PeakCauseKind.DYNAMIC_BOUND)
    if held < _DYNAMIC_SHARE * story.peak_bytes:
        return []
    inputs = story.dynamic_inputs
    axes = tuple(_dynamic_axis(m, shape) for _, shape in inputs)
    named = "; ".join(f"input {pos} {list(shape)}" + (f", axis {ax} at its bound {shape[ax]}" if ax is not None
                                                      else " (which axis is dynamic the file does not say)")
                      for (pos, shape), ax in zip(inputs, axes))
    known = [(pos, ax) for (pos, _), ax in zip(inputs, axes) if ax is not None]
    dim = f"{known[0][0]}:{known[0][1]}" if known else "INPUT:AXIS"
    change = ("export with a smaller bound, the longest input you run: torch.export.Dim(name, max=N) in "
              "dynamic_shapes (or export_llm's export.max_seq_length); the plan shrinks with it. What a bound N "
              f"plans: `pte-lab what-if FILE --bound {dim}=N`; the largest bound that fits: "
              f"`pte-lab what-if FILE --bound {dim} --budget SIZE`")
    return [Finding(Kind.DYNAMIC_BOUND, m.name,
                    f"{named}: ExecuTorch plans every dynamic tensor at its upper bound, whatever shape it runs "
                    f"at, and at the peak of arena {story.mem_id} they hold {human_bytes(held)} of "
                    f"{human_bytes(story.peak_bytes)} ({held / story.peak_bytes:.0%}): bytes that scale with the "
                    f"bound (linearly, or with its square in [L, L] planes), not all recoverable, since the bound "
                    f"you need keeps its own",
                    DynamicBoundDetails(held, change, story.mem_id, inputs, axes, story.peak_bytes))]


#: the change that removes the safe softmax's planes: the finding ``attention_scores`` says it (this is its wording's
#: home), and the peak's text (``views.peak``) with it
SAFE_SOFTMAX_CHANGE = ("write the attention by hand with a plain softmax, "
                       "torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v, in place of nn.MultiheadAttention "
                       "or F.scaled_dot_product_attention, whose decomposition is aten::_safe_softmax (it gives 0, "
                       "not NaN, on a row masked whole: only a fully masked row differs)")
#: the change that takes the score planes out of the plan (tiles instead of [L, L] planes)
FUSED_ATTENTION_CHANGE = ("a fused attention computes them in tiles instead: ExecuTorch's custom sdpa op "
                          "(export_llm: model.use_sdpa_with_kv_cache=true; in your own model, "
                          "torch.ops.llama.custom_sdpa from executorch.extension.llm.custom_ops, q, k and v as "
                          "[B, S, H, D], with ExecuTorch's LLM custom-ops library linked into the app)")

@dataclass(frozen=True)
class AttentionScoresDetails(Prescription):
    """``attention_scores``: with a safe softmax, ``at_stake`` is what the peak loses without its planes (a replay
    of the lifetimes), and ``edit`` the plain softmax's change (:func:`~pte_lab.model.peak.safe_softmax_edit`);
    without one, the score planes' bytes alive at the peak (what a fused attention takes out of the plan, at
    most), and no ``edit`` (the fused operator writes tensors the file has no record of)."""

    mem_id: int
    #: one score plane: dtype and shape, and its bytes
    dtype: str
    shape: tuple[int, ...]
    plane_bytes: int
    #: the square score tensors alive at the peak, and their bytes
    planes: int
    scores_bytes: int
    #: how many safe softmaxes the method has, and the bytes of their tensors alive at the peak
    safe_softmaxes: int = 0
    safe_softmax_bytes: int = 0


#: the score planes are worth a finding from this share of the arena's peak
_SCORES_SHARE = 0.25


def _attention_findings(m: "Method") -> list[Finding]:
    if not may_hold_scores(m):  # no softmax writes a square plane: the peak's story is not needed to say so
        return []
    story = m.peak
    if story is None or not story.peak_bytes:
        return []
    causes = {c.kind: c for c in story.causes}
    scores = causes.get(PeakCauseKind.ATTENTION_SCORES)
    if scores is None or scores.nbytes < _SCORES_SHARE * story.peak_bytes:
        return []
    g = story.groups[scores.groups[0]]
    planes = sum(len(story.groups[k].values) for k in scores.groups)
    safe = causes.get(PeakCauseKind.SAFE_SOFTMAX)
    what = (f"{count(planes, 'square score tensor')} of a decomposed attention ({g.dtype}{short_shape(g.shape)}, "
            f"{human_bytes(g.nbytes)} each) hold {human_bytes(scores.nbytes)} of the "
            f"{human_bytes(story.peak_bytes)} peak of arena {story.mem_id}")
    edit = None
    if safe is not None and safe.recovers:
        at_stake, edit = safe.recovers, safe_softmax_edit(m, change=SAFE_SOFTMAX_CHANGE)
        change = f"{SAFE_SOFTMAX_CHANGE}; beyond that, {FUSED_ATTENTION_CHANGE}"
        what += (f"; {human_bytes(safe.nbytes)} of them are the safe softmax's (where and full_like after the "
                 f"softmax, {count(safe.times, 'time')} in the method): without them the peak is "
                 f"{human_bytes(story.peak_bytes - at_stake)}, {human_bytes(at_stake)} at stake")
    else:
        at_stake = scores.nbytes
        change = FUSED_ATTENTION_CHANGE
        what += ", at stake (at most)"
    return [Finding(Kind.ATTENTION_SCORES, m.name, what,
                    AttentionScoresDetails(at_stake, change, story.mem_id, g.dtype, g.shape, g.nbytes, planes,
                                           scores.nbytes, safe.times if safe else 0, safe.nbytes if safe else 0,
                                           edit=edit))]


def prescription_findings(m: "Method") -> list[Finding]:
    """What to change in the plan or the export, with the bytes it recovers: arenas above their lower bound,
    dynamic inputs whose bound drives an arena, attention score planes that make the peak."""
    return _arena_bound_findings(m) + _dynamic_findings(m) + _attention_findings(m)
