"""What makes a method's peak: the tensors alive there, grouped, and the export choices behind them.

``explain_peak`` looks at a method's largest arena at the instruction where its live bytes peak
(the arena's lower bound: no plan with these lifetimes is smaller). The tensors alive there are
grouped by dtype and shape, largest group first, each with the operators that write it (in
instruction order), the modules that call them when an ETRecord is given, and the group's share of
the peak. Then the causes a model author can act on, each with the bytes at stake:

- ``dynamic_bound``: tensors planned at the upper bound of a dynamic shape (every planned tensor of
  a dynamic method is planned at its bound, whatever shape it is run at);
- ``attention_scores``: square ``[..., L, L]`` tensors of the planes a softmax writes (the scores
  before and after it, and their neighbours), an attention decomposed into separate kernels (its softmax
  may run inside a delegate: the planes the safe softmax writes after it say so);
- ``safe_softmax``: the planes the "safe softmax" of a decomposed ``scaled_dot_product_attention`` adds
  after its softmax ``s`` (``where(logical_not(any(logical_not(eq(x, -inf)))), s, full_like(s, 0))``,
  as ``nn.MultiheadAttention`` exports), with the bytes the peak loses without them (a replay of the
  lifetimes where the softmax output is read in place of ``where``'s);
- ``state_fp32``: state kept between calls (a KV cache) in float32;
- ``weight_copies``: weights copied into the arena by ``permute_copy`` (a portable ``Linear``
  transposes its weight at every call);
- ``outside_delegate``: tensors written by the operators left outside the delegates (kernels the runtime
  links: portable, optimized or custom, such as ``llama::update_cache``) in a method that has delegate calls.

The record holds facts; ``pte_lab.views.text`` words them (the one home of each cause's prose).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..vocabulary import RUNTIME_OPS, Role, InstructionKind
from .plan_edit import PlanEdit

__all__ = ["peak_point", "PeakGroup", "PeakCause", "PeakCauseKind", "PeakStory", "PeakAfter", "SafeSoftmax", "explain_peak",
           "may_hold_scores", "safe_softmaxes", "safe_softmax_edit", "CAUSES"]


class PeakCauseKind(str, Enum):
    """The export choices ``explain_peak`` recognises behind a peak (each worded in ``views/peak.py``).
    A ``str`` enum: a kind equals its value, and JSON writes the value."""

    ATTENTION_SCORES = "attention_scores"  # decomposed attention: [L, L] score planes alive together
    SAFE_SOFTMAX = "safe_softmax"  # the extra [L, L] planes the decomposition's safe softmax writes
    DYNAMIC_BOUND = "dynamic_bound"  # tensors planned at a dynamic dimension's upper bound
    STATE_FP32 = "state_fp32"  # mutable buffers (caches) kept in float32
    WEIGHT_COPIES = "weight_copies"  # permute_copy of weights the portable Linear makes at every run
    OUTSIDE_DELEGATE = "outside_delegate"  # operators the delegate left out, their tensors planned

    __str__ = str.__str__
    __format__ = str.__format__


#: the causes ``explain_peak`` recognises, in the order a reader gets them
CAUSES = tuple(PeakCauseKind)

#: a group smaller than this share of the peak is left out of the story's groups (the table has it)
_SMALL = 0.02
_SOFTMAX = ("softmax",)
#: the operators of the safe softmax's mask: logical_not(any(logical_not(eq(x, -inf))))
_MASK_OPS = ("aten::logical_not", "aten::any", "aten::eq")


@dataclass(frozen=True)
class SafeSoftmax:
    """One safe softmax of a decomposed attention: ``where(mask, s, full_like(s, 0))`` after a softmax ``s``
    (in a portable kernel, or inside a delegate call whose output ``s`` is)."""

    #: the ``where`` instruction
    at: int
    #: the softmax's output (value), which ``where`` passes on where a row is not all masked
    scores: int
    #: the planned tensors it adds, in instruction order: the mask's (eq, logical_not, any), full_like's, where's
    values: tuple[int, ...]


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
class PeakAfter:
    """Where the peak goes once a cause's tensors are gone (a replay of the file's lifetimes): the
    instruction, the bytes alive there and the groups of tensors that make them, largest first."""

    at: int
    #: the operator of instruction ``at`` (None where ``at`` is -1 or the method's length: no instruction)
    at_target: str | None
    peak_bytes: int
    groups: tuple[PeakGroup, ...]


@dataclass(frozen=True)
class PeakCause:
    """An export choice behind the peak: its kind (:data:`CAUSES`), the bytes at stake at the peak, the
    groups it covers (indices into :attr:`PeakStory.groups`) and what it names (operators, inputs)."""

    kind: PeakCauseKind
    nbytes: int
    groups: tuple[int, ...]
    names: tuple[str, ...] = ()
    #: the tensors it concerns alive at the peak (``safe_softmax``: the planes it adds)
    values: tuple[int, ...] = ()
    #: bytes the peak loses without them, where a replay of the lifetimes tells (``safe_softmax``)
    recovers: int | None = None
    #: how many times the method does it (``safe_softmax``: one per attention)
    times: int = 0
    #: where the peak goes without them (``safe_softmax``)
    after: PeakAfter | None = None


@dataclass(frozen=True, repr=False)  # printed as its paragraph (views.peak)
class PeakStory:
    """The peak of a method's largest arena, and what makes it."""

    method: str
    mem_id: int
    device: str
    arena_size: int
    peak_bytes: int
    #: the instruction where the live bytes peak (-1: as the inputs are written; n: as outputs are read)
    at: int
    #: the operator of instruction ``at`` (None at -1 and n: no instruction runs there)
    at_target: str | None
    n_instructions: int
    #: every group alive there, largest total first
    groups: tuple[PeakGroup, ...]
    causes: tuple[PeakCause, ...]
    #: the method's dynamic inputs: ``(position, shape as exported)``
    dynamic_inputs: tuple[tuple[int, tuple[int, ...]], ...]
    #: the backends the method delegates to (advice about a delegate names only these)
    backends: tuple[str, ...] = ()

    def __repr__(self) -> str:
        from ..views.peak import peak_text

        return peak_text(self)

    def overlaps(self) -> tuple[tuple[PeakCauseKind, PeakCauseKind], ...]:
        """Pairs of causes that count some of the same tensors (a dynamic [L, L] score plane is both a dynamic
        tensor and an attention score): their bytes are not to be added up."""
        out = []
        for i, a in enumerate(self.causes):
            for b in self.causes[i + 1:]:
                if set(a.groups) & set(b.groups):
                    out.append((a.kind, b.kind))
        return tuple(out)

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


def _group(m, live) -> list[PeakGroup]:
    """The tensors ``live`` grouped by dtype and shape, largest total first."""
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
    return groups


def _target(m, at: int) -> str | None:
    """The operator of instruction ``at``; None as the inputs are written (-1) or the outputs read (n)."""
    return m.instructions[at].target if 0 <= at < m.n_instructions else None


def peak_point(m) -> tuple[int, int] | None:
    """(arena, instruction) of the peak :func:`explain_peak` tells: the largest arena's (by size, then peak
    live bytes, then the lower id) first instruction where the most bytes are alive (-1: the inputs written);
    None without planned tensors alive in any arena. Cheap: what needs only where the peak is asks this."""
    arenas = [a for a in m.arenas if a.peak_bytes]
    if not arenas:
        return None
    arena = max(arenas, key=lambda a: (a.size, a.peak_bytes, -a.mem_id))
    return arena.mem_id, m.analysis.peak_time(arena.mem_id)


def explain_peak(m) -> PeakStory | None:
    """The story of ``m``'s (a :class:`~pte_lab.model.Method`) largest arena's peak; None without planned
    tensors alive in any arena."""
    point = peak_point(m)
    if point is None:
        return None
    arena, at = m.arena(point[0]), point[1]
    n = m.n_instructions
    live = [t for t in m.planned if t.mem_id == arena.mem_id and t.role != Role.VIEW and t.first is not None
            and t.first <= at <= t.last and t.nbytes]
    groups = _group(m, live)
    target = _target(m, at)
    dyn_inputs = tuple((s.position, s.shape) for s in m.inputs if s.dynamic and s.shape is not None)
    return PeakStory(m.name, arena.mem_id, arena.device, arena.size, arena.peak_bytes, at, target, n,
                     tuple(groups), _causes(m, groups, {t.value: t for t in live}, arena.mem_id), dyn_inputs,
                     tuple(dict.fromkeys(d.id for d in m.raw.delegates)))


def safe_softmaxes(m) -> tuple[SafeSoftmax, ...]:
    """Every safe softmax of ``m``: a ``where`` kernel choosing between a tensor ``s`` and ``full_like(s)``
    under a mask that ``logical_not``, ``any`` and ``eq`` write (one pass over the instructions)."""
    planned = {t.value: t for t in m.planned}
    instructions, out = m.instructions, []
    written: dict[int, list] = {}
    for t in planned.values():
        if t.producer is not None and t.role != Role.VIEW:
            written.setdefault(t.producer, []).append(t)

    def reads(i: int) -> list:
        return [planned[v] for v in dict.fromkeys(instructions[i].args) if v in planned
                and planned[v].producer is not None and planned[v].producer < i]

    for i in m.instructions:
        if i.kind != InstructionKind.KERNEL_CALL or not i.target.startswith("aten::where"):
            continue
        ins = reads(i.index)
        full = [t for t in ins if instructions[t.producer].target.startswith("aten::full_like")]
        mask = [t for t in ins if t.dtype == "bool" and instructions[t.producer].target.startswith(_MASK_OPS)]
        if not full or not mask:
            continue
        f = full[0]
        scores = [t for t in ins if t is not f and t.dtype == f.dtype and t.shape == f.shape
                  and t.value in {s.value for s in reads(f.producer)}]
        if not scores:
            continue
        added, todo, seen = [f], [mask[0]], set()
        while todo:  # the mask's chain back to eq
            t = todo.pop()
            if t.value in seen or not instructions[t.producer].target.startswith(_MASK_OPS):
                continue
            seen.add(t.value)
            added.append(t)
            todo.extend(x for x in reads(t.producer) if x.dtype == "bool")
        added += written.get(i.index, [])
        out.append(SafeSoftmax(i.index, scores[0].value,
                               tuple(t.value for t in sorted(added, key=lambda t: (t.producer, t.value)))))
    return tuple(out)


def _live_peak(rows: list[tuple[int, int, int]], n: int) -> tuple[int, int]:
    """(the most bytes alive at once (summed, no offsets) of ``(nbytes, first, last)`` rows over -1..n, the
    first instruction where they are alive)."""
    if not rows:
        return 0, -1
    delta = np.zeros(n + 3, dtype=np.int64)
    for nbytes, first, last in rows:
        delta[first + 1] += nbytes
        delta[last + 2] -= nbytes
    live = np.cumsum(delta)
    return int(live.max()), int(live.argmax()) - 1


def safe_softmax_edit(m, safes: tuple[SafeSoftmax, ...] | None = None, change: str = "") -> PlanEdit | None:
    """The plain softmax's change as the planned tensors it touches: every safe softmax's tensors removed, and
    its softmax output read where ``where``'s output was (None: ``m`` has no safe softmax). ``change``: the
    change in words (the finding that carries the edit words it: ``findings.plan.SAFE_SOFTMAX_CHANGE``)."""
    safes = safe_softmaxes(m) if safes is None else safes
    if not safes:
        return None
    planned = {t.value: t for t in m.planned}
    swaps = tuple((v, s.scores) for s in safes for v in s.values if planned[v].producer == s.at)
    return PlanEdit(tuple(v for s in safes for v in s.values), swaps, change)


def _without_safe_softmax(m, mem_id: int, safes: tuple[SafeSoftmax, ...]) -> tuple[int, PeakAfter | None]:
    """What the peak of arena ``mem_id`` loses when every safe softmax is gone (its tensors unplanned and each
    softmax output read where ``where``'s was, kept alive to ``where``'s last use), and where the peak goes."""
    planned = {t.value: t for t in m.planned}
    gone = {v for s in safes for v in s.values}
    last = {s.scores: max(planned[s.scores].last, *(planned[v].last for v in s.values)) for s in safes}
    rows = [t for t in planned.values() if t.mem_id == mem_id and t.role != Role.VIEW and t.first is not None
            and t.nbytes]
    n = m.n_instructions
    before, _ = _live_peak([(t.nbytes, t.first, t.last) for t in rows], n)
    kept = [t for t in rows if t.value not in gone]
    after, at = _live_peak([(t.nbytes, t.first, last.get(t.value, t.last)) for t in kept], n)
    if not kept:
        return before, None
    alive = [t for t in kept if t.first <= at <= last.get(t.value, t.last)]
    return max(0, before - after), PeakAfter(at, _target(m, at), after, tuple(_group(m, alive)))


def may_hold_scores(m) -> bool:
    """Whether a peak of ``m`` can have attention score planes (:attr:`PeakCauseKind.ATTENTION_SCORES`) at all,
    without telling its story: a square [L, L] plane (L > 1) that a softmax writes, or a ``where`` kernel (a safe
    softmax, whose scores' planes count too). False means no story of ``m`` names that cause."""
    if any(i.kind == InstructionKind.KERNEL_CALL and i.target.startswith("aten::where") for i in m.instructions):
        return True
    return any(t.op is not None and len(t.shape) >= 2 and t.shape[-1] == t.shape[-2] > 1
               and any(s in t.op for s in _SOFTMAX) for t in m.planned)


def _causes(m, groups: list[PeakGroup], live: dict, mem_id: int) -> tuple[PeakCause, ...]:
    found: dict[str, list[int]] = {k: [] for k in CAUSES}
    names: dict[str, set[str]] = {k: set() for k in CAUSES}
    extra = {PeakCauseKind.OUTSIDE_DELEGATE: 0,  # bytes of the tensors themselves where a group is only partly it
             PeakCauseKind.SAFE_SOFTMAX: 0}
    delegated = any(i.kind == InstructionKind.DELEGATE_CALL for i in m.instructions)
    safes = safe_softmaxes(m)
    planned = {t.value: t for t in m.planned}
    # the [L, L] planes a softmax writes anywhere in the method: the scores before it and after it have them
    # (a softmax inside a delegate call is seen by the safe softmax that reads its output)
    softmax_shapes = {t.shape[-2:] for t in m.planned
                      if t.op is not None and any(s in t.op for s in _SOFTMAX) and len(t.shape) >= 2}
    softmax_shapes |= {planned[s.scores].shape[-2:] for s in safes if len(planned[s.scores].shape) >= 2}
    added = {v for s in safes for v in s.values}
    safe_live = tuple(v for v in live if v in added)
    for k, g in enumerate(groups):
        square = len(g.shape) >= 2 and g.shape[-1] == g.shape[-2] and g.shape[-1] > 1
        if square and g.shape[-2:] in softmax_shapes:
            found[PeakCauseKind.ATTENTION_SCORES].append(k)
            names[PeakCauseKind.ATTENTION_SCORES].update(g.ops)
        mine = [live[v] for v in g.values if v in added]
        if mine:
            found[PeakCauseKind.SAFE_SOFTMAX].append(k)
            names[PeakCauseKind.SAFE_SOFTMAX].update(t.op for t in mine if t.op)
            extra[PeakCauseKind.SAFE_SOFTMAX] += sum(t.nbytes for t in mine)
        if g.dynamic:
            found[PeakCauseKind.DYNAMIC_BOUND].append(k)
        if Role.MUTABLE_BUFFER in g.roles and g.dtype == "float32":
            found[PeakCauseKind.STATE_FP32].append(k)
        if g.ops and all(op.startswith("aten::permute_copy") for op in g.ops) and _copies_weights(m, g, live):
            found[PeakCauseKind.WEIGHT_COPIES].append(k)
        outside = [live[v] for v in g.values if delegated and live[v].role == Role.INTERMEDIATE
                   and live[v].op is not None and "::" in live[v].op and not live[v].op.startswith(RUNTIME_OPS)]
        if outside:
            found[PeakCauseKind.OUTSIDE_DELEGATE].append(k)
            names[PeakCauseKind.OUTSIDE_DELEGATE].update(t.op for t in outside)
            extra[PeakCauseKind.OUTSIDE_DELEGATE] += sum(t.nbytes for t in outside)
    out = []
    for kind, ks in found.items():
        if not ks:
            continue
        nbytes = extra[kind] if kind in extra else sum(groups[k].total for k in ks)
        if kind is PeakCauseKind.SAFE_SOFTMAX:
            recovers, after = _without_safe_softmax(m, mem_id, safes)
            out.append(PeakCause(kind, nbytes, tuple(ks), tuple(sorted(names[kind])), safe_live, recovers,
                                 len(safes), after))
        else:
            out.append(PeakCause(kind, nbytes, tuple(ks), tuple(sorted(names[kind]))))
    return tuple(out)


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
