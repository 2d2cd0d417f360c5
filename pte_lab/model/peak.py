"""What makes a method's peak: the tensors alive there, grouped, and the export choices behind them.

:func:`explain_peak` looks at a method's largest arena at the instruction where its live bytes peak
(the arena's lower bound: no plan with these lifetimes is smaller). The tensors alive there are
grouped by dtype and shape, largest group first, each with the operators that write it (in
instruction order), the modules that call them when an ETRecord is given, and the group's share of
the peak. Then the causes a model author can act on, each with the bytes at stake:

- ``dynamic_bound``: tensors planned at the upper bound of a dynamic shape (every planned tensor of
  a dynamic method is planned at its bound, whatever shape it is run at);
- ``attention_scores``: square ``[..., L, L]`` tensors of the planes a softmax writes (the scores
  before and after it, and their neighbours), an attention decomposed into portable kernels;
- ``state_fp32``: state kept between calls (a KV cache) in float32;
- ``weight_copies``: weights copied into the arena by ``permute_copy`` (a portable ``Linear``
  transposes its weight at every call);
- ``outside_delegate``: tensors written by portable kernels in a method that has delegate calls.

The record holds facts; :mod:`pte_lab.views.text` words them (the one home of each cause's prose).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["PeakGroup", "PeakCause", "PeakCauseKind", "PeakStory", "explain_peak", "CAUSES"]


class PeakCauseKind(str, Enum):
    """The export choices :func:`explain_peak` recognises behind a peak (each worded in ``views/peak.py``).
    A ``str`` enum: a kind equals its value, and JSON writes the value."""

    ATTENTION_SCORES = "attention_scores"  # decomposed attention: [L, L] score planes alive together
    DYNAMIC_BOUND = "dynamic_bound"  # tensors planned at a dynamic dimension's upper bound
    STATE_FP32 = "state_fp32"  # mutable buffers (caches) kept in float32
    WEIGHT_COPIES = "weight_copies"  # permute_copy of weights the portable Linear makes at every run
    OUTSIDE_DELEGATE = "outside_delegate"  # operators the delegate left out, their tensors planned

    __str__ = str.__str__
    __format__ = str.__format__


#: the causes :func:`explain_peak` recognises, in the order a reader gets them
CAUSES = tuple(PeakCauseKind)

#: a group smaller than this share of the peak is left out of the story's groups (the table has it)
_SMALL = 0.02
_SOFTMAX = ("softmax",)
#: operators the runtime itself inserts (views, device copies): no delegate takes them
_RUNTIME_OPS = ("et_copy::", "executorch_prim::")


@dataclass(frozen=True)
class PeakGroup:
    """Tensors of one dtype and shape alive at the peak."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[int, ...]
    nbytes: int  # each
    #: the operators that write them, in instruction order (consecutive repeats once)
    ops: tuple[str, ...]
    #: innermost modules that write them, ``(path, type)``, when an ETRecord names them
    modules: tuple[tuple[str, str], ...]
    roles: tuple[str, ...]
    dynamic: bool

    @property
    def total(self) -> int:
        return self.nbytes * len(self.values)


@dataclass(frozen=True)
class PeakCause:
    """An export choice behind the peak: its kind (:data:`CAUSES`), the bytes at stake at the peak, the
    groups it covers (indices into :attr:`PeakStory.groups`) and what it names (operators, inputs)."""

    kind: PeakCauseKind
    nbytes: int
    groups: tuple[int, ...]
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PeakStory:
    """The peak of a method's largest arena, and what makes it."""

    method: str
    mem_id: int
    device: str
    arena_size: int
    peak_bytes: int
    #: the instruction where the live bytes peak (-1: as the inputs are written; n: as outputs are read)
    at: int
    at_target: str
    n_instructions: int
    #: every group alive there, largest total first
    groups: tuple[PeakGroup, ...]
    causes: tuple[PeakCause, ...]
    #: the method's dynamic inputs: ``(position, shape as exported)``
    dynamic_inputs: tuple[tuple[int, tuple[int, ...]], ...]

    @property
    def shown(self) -> tuple[PeakGroup, ...]:
        """The groups that matter (each at least 2% of the peak, and always the largest)."""
        return tuple(g for k, g in enumerate(self.groups) if k == 0 or g.total >= _SMALL * self.peak_bytes)


def _chain(ops: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for op in ops:
        if not out or out[-1] != op:
            out.append(op)
    return tuple(out)


def explain_peak(m) -> PeakStory | None:
    """The story of ``m``'s (a :class:`~pte_lab.model.Method`) largest arena's peak; None without planned
    tensors alive in any arena."""
    arenas = [a for a in m.arenas if a.peak_bytes]
    if not arenas:
        return None
    arena = max(arenas, key=lambda a: (a.size, a.peak_bytes, -a.mem_id))
    occ = m.analysis.occupancy(arena.mem_id)
    at = int(occ.argmax()) - 1
    n = m.n_instructions
    live = [t for t in m.planned if t.mem_id == arena.mem_id and t.role != "view" and t.first is not None
            and t.first <= at <= t.last and t.nbytes]
    by: dict[tuple, list] = {}
    for t in sorted(live, key=lambda t: (t.producer if t.producer is not None else -1, t.value)):
        by.setdefault((t.dtype, t.shape), []).append(t)
    groups = []
    for (dtype, shape), ts in by.items():
        srcs = [m.source_of(t.value) for t in ts] if m.sources is not None else []
        mods = tuple(dict.fromkeys((s.module, s.module_type) for s in srcs if s is not None and s.module is not None))
        groups.append(PeakGroup(dtype, shape, tuple(t.value for t in ts), ts[0].nbytes,
                                _chain([t.op or t.role for t in ts]), mods,
                                tuple(dict.fromkeys(t.role for t in ts)), any(t.dynamic for t in ts)))
    groups.sort(key=lambda g: (-g.total, g.dtype, g.shape))
    target = ("the inputs written" if at == -1 else "the outputs read" if at >= n else m.instructions[at].target)
    dyn_inputs = tuple((s.position, s.shape) for s in m.inputs if s.dynamic and s.shape is not None)
    return PeakStory(m.name, arena.mem_id, arena.device, arena.size, arena.peak_bytes, at, target, n,
                     tuple(groups), _causes(m, groups, {t.value: t for t in live}), dyn_inputs)


def _causes(m, groups: list[PeakGroup], live: dict) -> tuple[PeakCause, ...]:
    found: dict[str, list[int]] = {k: [] for k in CAUSES}
    names: dict[str, set[str]] = {k: set() for k in CAUSES}
    extra = {PeakCauseKind.OUTSIDE_DELEGATE: 0}  # bytes of the tensors themselves where a group is only partly the cause
    delegated = any(i.kind == "DelegateCall" for i in m.instructions)
    # the [L, L] planes a softmax writes anywhere in the method: the scores before it and after it have them
    softmax_shapes = {t.shape[-2:] for t in m.planned
                      if t.op is not None and any(s in t.op for s in _SOFTMAX) and len(t.shape) >= 2}
    for k, g in enumerate(groups):
        square = len(g.shape) >= 2 and g.shape[-1] == g.shape[-2] and g.shape[-1] > 1
        if square and g.shape[-2:] in softmax_shapes:
            found[PeakCauseKind.ATTENTION_SCORES].append(k)
            names[PeakCauseKind.ATTENTION_SCORES].update(g.ops)
        if g.dynamic:
            found[PeakCauseKind.DYNAMIC_BOUND].append(k)
        if "mutable_buffer" in g.roles and g.dtype == "float32":
            found[PeakCauseKind.STATE_FP32].append(k)
        if g.ops and all(op.startswith("aten::permute_copy") for op in g.ops) and _copies_weights(m, g, live):
            found[PeakCauseKind.WEIGHT_COPIES].append(k)
        outside = [live[v] for v in g.values if delegated and live[v].role == "intermediate"
                   and live[v].op is not None and "::" in live[v].op and not live[v].op.startswith(_RUNTIME_OPS)]
        if outside:
            found[PeakCauseKind.OUTSIDE_DELEGATE].append(k)
            names[PeakCauseKind.OUTSIDE_DELEGATE].update(t.op for t in outside)
            extra[PeakCauseKind.OUTSIDE_DELEGATE] += sum(t.nbytes for t in outside)
    return tuple(PeakCause(kind, extra[kind] if kind in extra else sum(groups[k].total for k in ks), tuple(ks),
                           tuple(sorted(names[kind])))
                 for kind, ks in found.items() if ks)


def _copies_weights(m, g: PeakGroup, live: dict) -> bool:
    """Whether every tensor of the group is a copy of a weight: its producer reads a tensor that is neither
    planned nor a method input (the file holds it)."""
    values, inputs = m.raw.values, set(m.raw.inputs)

    def held_by_file(v: int) -> bool:
        t = values[v].tensor if 0 <= v < len(values) else None
        return t is not None and t.mem_id is None and v not in inputs

    for v in g.values:
        p = live[v].producer
        if p is None or not any(held_by_file(a) for a in m.instructions[p].args):
            return False
    return True
