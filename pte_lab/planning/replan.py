"""Replan a program's arenas, check the result, and write it as a new ``.pte``."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..format.regular_file import check_writable
from ..model import Pte, open_pte
from ..model.findings import Kind
from ..model.validate import find_conflicts
from ..quiet import quiet
from ..units import count
from ..vocabulary import ValueKind
from .algorithms import plan_arena
from .problem import PlanningError, build_problem

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class ArenaPlan:
    """One arena replanned: its size before and after, its lower bound, the new offsets."""
    method: str
    mem_id: int
    device: str
    before: int
    after: int
    lower_bound: int
    alignment: int
    padding: int
    #: value index -> new offset
    offsets: dict[int, int]
    seconds: float
    #: True when the new plan was not smaller and the original is kept
    kept: bool = False

    def moved(self, method) -> list[int]:
        """Values whose offset this plan changes (``method``: the original :class:`~pte_lab.model.Method`)."""
        return [t.value for t in method.planned if t.mem_id == self.mem_id and t.value in self.offsets
                and self.offsets[t.value] != t.offset]

    @property
    def saved(self) -> int:
        return self.before - self.after

    @property
    def before_over_bound(self) -> float | None:
        """The original size over the lower bound (1.0: no plan can be smaller); None without a bound."""
        return self.before / self.lower_bound if self.lower_bound else None

    @property
    def after_over_bound(self) -> float | None:
        """The new size over the lower bound; None without a bound."""
        return self.after / self.lower_bound if self.lower_bound else None


@dataclass(frozen=True)
class InputReuse:
    """A planned method input whose bytes a tensor alive after the input's last use takes (an output over the
    input, say): an application that executes again without setting the input reads that tensor's bytes as
    its input. Every input is still read before it is overwritten (the plan is valid); the bytes are what a
    second ``execute`` finds there."""

    method: str
    mem_id: int
    #: the input's position among the method's inputs, and its value
    position: int
    value: int
    #: the tensor over it: its value, role ("output", "intermediate"...) and the instruction that first uses it
    over: int
    over_role: str
    over_first: int
    #: the original plan put the same tensor over the input too
    original_too: bool


#: the columns of :meth:`Replan.table`, one row per arena: (column, :class:`ArenaPlan` attribute)
REPLAN_TABLE = (("method", "method"), ("mem_id", "mem_id"), ("device", "device"), ("before", "before"),
                ("after", "after"), ("lower_bound", "lower_bound"), ("before/bound", "before_over_bound"),
                ("after/bound", "after_over_bound"), ("saved", "saved"), ("kept_original", "kept"),
                ("seconds", "seconds"))


@dataclass
class Replan:
    """New offsets and arena sizes for every arena of every method."""

    original: Pte
    algorithm: str
    arenas: list[ArenaPlan]
    _source: bytes | None = field(default=None, repr=False)
    #: planned inputs and outputs were kept apart from every other tensor (``keep_io``)
    keep_io: bool = False

    def input_reuses(self) -> tuple[InputReuse, ...]:
        """Every planned input whose bytes the new plan gives to a tensor alive after it (see
        :class:`InputReuse`), each input once, with the first such tensor; empty with ``keep_io``."""
        out = []
        for a in self.arenas:
            m = self.original.methods[a.method]
            # (tensor, first, last) of each tensor alive in the arena
            ts = [(t, t.first, t.last) for t in m.planned if t.mem_id == a.mem_id and t.first is not None
                  and t.last is not None and t.nbytes > 0]
            inputs = {s.value: s.position for s in m.inputs if s.kind == ValueKind.TENSOR and s.planned}
            for t, _, last in ts:
                if t.value not in inputs:
                    continue
                root = m.storage_of(t.value)
                lo = a.offsets.get(t.value, t.offset)
                hi = lo + t.nbytes
                after = sorted(((u, first) for u, first, _ in ts if first > last and m.storage_of(u.value) != root
                                and a.offsets.get(u.value, u.offset) < hi
                                and lo < a.offsets.get(u.value, u.offset) + u.nbytes), key=lambda x: x[1])
                if after:
                    u, first = after[0]
                    before = t.offset < u.offset + u.nbytes and u.offset < t.offset + t.nbytes
                    out.append(InputReuse(a.method, a.mem_id, inputs[t.value], t.value, u.value, u.role, first,
                                          before))
        return tuple(out)

    def table(self) -> "pd.DataFrame":
        """One row per arena (:data:`REPLAN_TABLE`): sizes before and after, the bound, what was saved."""
        import pandas as pd

        rows = [tuple(getattr(a, attr) for _, attr in REPLAN_TABLE) for a in self.arenas]
        return pd.DataFrame(rows, columns=[c for c, _ in REPLAN_TABLE])

    def by_method(self) -> "pd.DataFrame":
        """Per method: planned bytes before and after, and each over the summed lower bounds."""
        df = self.table()
        g = df.groupby("method", sort=False)[["before", "after", "lower_bound"]].sum()
        g["before/bound"] = g.before / g.lower_bound
        g["after/bound"] = g.after / g.lower_bound
        return g

    def conflicts(self) -> list:
        """The plan validator on the new offsets (must be empty)."""
        out = []
        for a in self.arenas:
            m = self.original.methods[a.method]
            ts = [t for t in m.planned if t.mem_id == a.mem_id and t.first is not None]
            if not ts:
                continue
            out += find_conflicts([t.value for t in ts], [a.mem_id] * len(ts),
                                  [a.offsets[t.value] for t in ts], [t.nbytes for t in ts],
                                  [t.first for t in ts], [t.last for t in ts],
                                  storage=[m.storage_of(t.value) for t in ts])
            for t in ts:
                if a.offsets[t.value] + t.nbytes > a.after:
                    raise PlanningError(f"{a.method} v{t.value} past the end of arena {a.mem_id}")
        return out

    def _bytes(self) -> bytes:
        if self._source is not None:
            return self._source
        if self.original.path:
            return Path(self.original.path).read_bytes()
        raise PlanningError("the original program's bytes are not available: replan a path or bytes")

    def write(self, path: str | os.PathLike, *, allow_overlaps: bool = False) -> str:
        """Write the replanned program: only allocation offsets and arena sizes change.

        Uses ExecuTorch's own serializer, then reads the result back and checks
        that everything but offsets and sizes is unchanged and that the plan
        validator passes; raises otherwise (nothing is left at ``path``).

        The program keeps its layout (:func:`written_layout`): delegate data
        inline or in segments, the flatbuffer alone when it had no extended
        header, constants inline or in their segment, named data; a ``.ptd`` it
        reads is not rewritten; a bundled program is written back bundled, with
        its test suites. A layout ExecuTorch's serializer cannot reproduce is
        refused, naming the part.

        ``allow_overlaps=True`` writes a plan whose live tensors overlap (the
        validator's conflicts), to watch what goes wrong (``verify`` catches it;
        ``pte_lab.load`` runs such a file in a worker process): an experiment,
        never a program to deploy. Everything else is still checked.
        """
        with quiet():  # importing the serializer imports torch and torchao, which print as they load
            # ExecuTorch's .pte (de)serializer is public only under exir._serialize
            from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: PLC2701

        conflicts = self.conflicts()
        if conflicts and not allow_overlaps:
            raise PlanningError(f"the new plan has {count(len(conflicts), 'overlapping live tensor pair')} "
                                f"(first: {conflicts[0]}); refusing to write it")
        data = self._bytes()
        layout = written_layout(self.original)
        if layout.unwritable:
            raise PlanningError(f"cannot write {os.fspath(path)}: {layout.unwritable}; nothing was written")
        span = self.original.raw.program_span if self.original.raw.bundled is not None else None
        try:
            pf = deserialize_pte_binary(data[span[0]:span[0] + span[1]] if span else data)
        # a file pte_lab reads but ExecuTorch's serializer cannot: say so, in one line
        except Exception as exc:  # noqa: BLE001 - whatever the serializer raises becomes one PlanningError
            raise PlanningError(f"cannot write {os.fspath(path)}: ExecuTorch's serializer cannot read the "
                                f"program back ({_one_line(exc)}); nothing was written") from None
        by_method: dict[str, list[ArenaPlan]] = {}
        for a in self.arenas:
            by_method.setdefault(a.method, []).append(a)
        for plan in pf.program.execution_plan:
            for a in by_method.get(plan.name, []):
                for value, off in a.offsets.items():
                    info = plan.values[value].val.allocation_info
                    if info is None or info.memory_id != a.mem_id:
                        raise PlanningError(f"{plan.name} value {value} is not planned in arena {a.mem_id}")
                    info.memory_offset_low = off & 0xFFFFFFFF
                    info.memory_offset_high = off >> 32
                plan.non_const_buffer_sizes[a.mem_id] = a.after
        try:
            out = _serialize(pf, layout)
            if span:  # the program goes back into its bundled program, the test suites as they were
                out = _rebundle(data, out)
        except Exception as exc:  # noqa: BLE001 - whatever the serializer raises becomes one PlanningError
            raise PlanningError(f"cannot write {os.fspath(path)}: ExecuTorch's serializer failed "
                                f"({_one_line(exc)}); nothing was written") from None
        try:
            self._check_written(out, allow_overlaps)
        except PlanningError as exc:
            raise PlanningError(f"refusing to write {os.fspath(path)}: the re-read program failed its check: "
                                f"{exc}") from None
        path = os.fspath(path)
        check_writable(path, "a program to write")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
        return path

    def _check_written(self, out: bytes, allow_overlaps: bool = False) -> None:
        new = open_pte(out)
        old = self.original
        plans = {(a.method, a.mem_id): a for a in self.arenas}
        for name, m in old.methods.items():
            n = new.methods[name]
            if [x.kind for x in m.instructions] != [x.kind for x in n.instructions] or \
                    [x.args for x in m.instructions] != [x.args for x in n.instructions]:
                raise PlanningError(f"{name}: instructions changed")
            for t_old, t_new in zip(m.planned, n.planned):
                a = plans.get((name, t_old.mem_id))
                want = a.offsets.get(t_old.value, t_old.offset) if a else t_old.offset
                if (t_old.value, t_old.shape, t_old.dtype, t_old.mem_id, t_old.device) != \
                        (t_new.value, t_new.shape, t_new.dtype, t_new.mem_id, t_new.device) or t_new.offset != want:
                    raise PlanningError(f"{name}: value {t_old.value} changed beyond its offset")
            for ar in n.arenas:
                a = plans.get((name, ar.mem_id))
                if ar.size != (a.after if a else m.arena(ar.mem_id).size):
                    raise PlanningError(f"{name}: arena {ar.mem_id} has the wrong size")
            problems = [f for f in n.validate() if not (allow_overlaps and f.kind == Kind.PLAN_OVERLAP)]
            if problems:
                raise PlanningError(f"{name}: the written plan does not validate: {problems[0]}")
        old_segs = [(s.kind, s.size) for s in old.segments]
        new_segs = [(s.kind, s.size) for s in new.segments]
        if old_segs != new_segs:
            raise PlanningError(f"segments changed: {_segments_change(old_segs, new_segs)}")

    def __repr__(self) -> str:
        before, after = sum(a.before for a in self.arenas), sum(a.after for a in self.arenas)
        moved = sum(not a.kept for a in self.arenas)
        return (f"<Replan with {self.algorithm}: {count(len(self.arenas), 'arena')}, {before:,} -> {after:,} bytes, "
                f"{moved} replanned, {len(self.arenas) - moved} kept; .table() per arena>")

    def _repr_html_(self) -> str:
        return (f"<b>Replan with {self.algorithm}</b>" + self.table().to_html(index=False)
                + "<b>per method</b>" + self.by_method().to_html())


def _one_line(exc: BaseException) -> str:
    """An exception from ExecuTorch's serializer as a short line: its type and first 300 characters."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _segments_change(old: list, new: list) -> str:
    """The first segments that differ, in words."""
    def say(seg):
        return f"{seg[0]} ({seg[1]:,} bytes)" if seg is not None else "none"

    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(old + [None] * len(new), new + [None] * len(old)))
             if a != b and (a is not None or b is not None)]
    shown = "; ".join(f"segment {i} was {say(a)}, written {say(b)}" for i, a, b in diffs[:3])
    more = f"; and {len(diffs) - 3} more" if len(diffs) > 3 else ""
    return f"{len(old)} segments before, {len(new)} written: {shown}{more}"


def _pow2_dividing(xs, cap: int = 65536) -> int | None:
    """The largest power of two (at most ``cap``) dividing every nonzero x; None without one."""
    out = cap
    seen = False
    for x in xs:
        if x:
            seen = True
            out = min(out, x & -x)
    return out if seen else None


@dataclass(frozen=True)
class WrittenLayout:
    """Where the original program keeps its data, for ExecuTorch's serializer to write it back the same way.

    ExecuTorch loads a program whose delegate data and constants sit inline in the flatbuffer or in segments
    after it, with or without an extended header. Its serializer (1.5) writes constants as a segment whenever
    it writes segments, and every delegate's data one way (``extract_delegate_segments``): a program that
    mixes them cannot be written back as it was, and :attr:`unwritable` says which part.
    """

    #: no extended header and no segment data: the file is the flatbuffer alone, written back alone
    flat: bool
    #: delegate data goes to segments (False: stays inline in the flatbuffer)
    delegate_segments: bool
    #: the alignments the original's offsets show (None: ExecuTorch's default)
    segment_alignment: int | None
    constant_alignment: int | None
    delegate_alignment: int | None
    #: why the program cannot be written back with its layout (None: it can)
    unwritable: str | None = None


def written_layout(pte: Pte) -> WrittenLayout:
    """The layout replan writes ``pte`` back in (see :class:`WrittenLayout`).

    Returns the :class:`WrittenLayout`; a layout that cannot be written back is named in its ``unwritable``
    rather than raised."""
    raw = pte.raw
    inline, segment = [], []
    for m in pte.methods.values():
        for j, d in enumerate(m.raw.delegates):
            if d.location == "segment":
                segment.append(f"{m.name!r} delegate {j} ({d.id})")
            elif d.size:
                inline.append(f"{m.name!r} delegate {j} ({d.id})")
    flat = not raw.header.extended or raw.header.segment_base_offset == 0
    base = raw.header.segment_base_offset
    seg_align = None if flat else _pow2_dividing([base] + [s.offset - base for s in raw.segments])
    if flat:
        const_align = _pow2_dividing([o for o, n in raw.inline_constant_spans if n], 4096)
    else:
        const_align = _pow2_dividing(list(raw.constant_offsets) + (
            [raw.segments[raw.constant_segment].size] if raw.constant_segment is not None
            and raw.constant_segment < len(raw.segments) else []), 4096)
    del_align = _pow2_dividing([o for o, n in raw.inline_delegate_spans if n], 4096)
    unwritable = None
    if not flat and inline and segment:
        unwritable = (f"{inline[0]} keeps its data inline in the flatbuffer and {segment[0]} in a segment: "
                      f"ExecuTorch's serializer writes every delegate's data one way, so this mix cannot be "
                      f"written back as it was")
    elif not flat and raw.inline_constant_bytes:
        unwritable = (f"its constants ({raw.inline_constant_bytes:,} bytes) sit inline in the flatbuffer while "
                      f"other data is in segments: ExecuTorch's serializer writes constants as a segment whenever "
                      f"it writes segments, so the constants cannot be written back where they were")
    return WrittenLayout(flat, not inline, seg_align, const_align, del_align, unwritable)


def _serialize(pf, layout: WrittenLayout) -> bytes:
    """The program in ``pf`` (ExecuTorch's PTEFile), written in ``layout``."""
    # ExecuTorch's .pte (de)serializer is public only under exir._serialize
    from executorch.exir._serialize._program import _program_to_flatbuffer, serialize_pte_binary  # noqa: PLC2701

    if layout.flat:  # everything inline: the flatbuffer alone, as the original was
        return bytes(_program_to_flatbuffer(pf.program, constant_tensor_alignment=layout.constant_alignment,
                                            delegate_alignment=layout.delegate_alignment).data)
    kw = {"segment_alignment": layout.segment_alignment} if layout.segment_alignment else {}
    return bytes(serialize_pte_binary(pf, extract_delegate_segments=layout.delegate_segments,
                                      constant_tensor_alignment=layout.constant_alignment,
                                      delegate_alignment=layout.delegate_alignment, **kw))


def _rebundle(bundled: bytes, program: bytes) -> bytes:
    """The bundled program ``bundled`` with ``program`` in place of its own (ExecuTorch's devtools serializer)."""
    # the bundled program's schema-to-flatbuffer step has no public name in ExecuTorch's devtools
    from executorch.devtools.bundled_program.serialize import (
        _bundled_program_schema_to_flatbuffer,  # noqa: PLC2701
        deserialize_from_flatbuffer_to_bundled_program)

    bp = deserialize_from_flatbuffer_to_bundled_program(bundled)
    bp.program = program
    return _bundled_program_schema_to_flatbuffer(bp)


def _keep_io_apart(problem, method) -> None:
    """Planned inputs and outputs alive over the whole method: no other tensor takes their bytes, so an app
    that executes again without setting an input reads the input it set before (and an output stays readable
    until the next execute)."""
    io = {s.value for s in (*method.inputs, *method.outputs) if s.kind == ValueKind.TENSOR and s.planned}
    for g in problem.groups:
        if any(v in io for v, _, _ in g.members):
            g.first, g.last = -1, problem.n_instructions


def replan(source, algorithm: str = "best_fit", methods: list[str] | None = None,
           alignment: int | None = None, smaller_only: bool = True, keep_io: bool = False) -> Replan:
    """Replan every arena of every method (or of ``methods``) of a program.

    ``source`` is a path, bytes or an opened :class:`~pte_lab.Pte`. An arena whose
    new plan is not smaller keeps its original plan, unless ``smaller_only=False``
    (then every arena takes the new plan: other offsets, to see that a program
    still computes the same wherever its tensors sit). A method with backward
    jumps (a loop) raises :class:`PlanningError`. ``keep_io=True`` keeps planned inputs and outputs apart from
    every other tensor (each holds its bytes over the whole method): without it a plan may put an output or an
    intermediate over an input once the input is read (:meth:`Replan.input_reuses` says where), and an app that
    executes again without setting that input reads garbage.

    Returns a :class:`Replan` (``table()``, ``write(path)``). Raises :class:`PlanningError` as above, and
    :class:`~pte_lab.PteFormatError` for a file that is not a program. Example:
    ``replan("model.pte", algorithm="best_fit").write("model.small.pte")``.
    """
    raw = None
    if isinstance(source, Pte):
        pte = source
    else:
        if isinstance(source, (bytes, bytearray, memoryview)):
            raw = bytes(source)
        pte = open_pte(raw if raw is not None else source)
    names = list(pte.methods) if methods is None else methods
    arenas = []
    for name in names:
        m = pte.methods[name]
        for ar in m.arenas:
            t = time.perf_counter()
            problem = build_problem(m, ar.mem_id, alignment)
            if keep_io:
                _keep_io_apart(problem, m)
            offsets, size = plan_arena(problem, algorithm)
            seconds = time.perf_counter() - t
            kept = smaller_only and size >= ar.size and not (keep_io and _io_reused(m, ar.mem_id))
            if kept:
                offsets = {x.value: x.offset for x in m.planned if x.mem_id == ar.mem_id}
                size = ar.size
            arenas.append(ArenaPlan(name, ar.mem_id, ar.device, ar.size, size, problem.lower_bound,
                                    problem.alignment, problem.padding, offsets, seconds, kept))
    return Replan(pte, algorithm, arenas, raw, keep_io)


def _io_reused(m, mem_id: int) -> bool:
    """The original plan of arena ``mem_id`` gives a planned input's or output's bytes to another tensor (then
    ``keep_io`` takes the new plan even where it is not smaller)."""
    io = {s.value for s in (*m.inputs, *m.outputs) if s.kind == ValueKind.TENSOR and s.planned}
    ts = [t for t in m.planned if t.mem_id == mem_id and t.first is not None and t.nbytes > 0]
    for t in ts:
        if t.value in io:
            root = m.storage_of(t.value)
            if any(m.storage_of(u.value) != root and u.offset < t.offset + t.nbytes and t.offset < u.offset + u.nbytes
                   for u in ts if u.value != t.value):
                return True
    return False


def lower_bounds(method) -> dict[int, int]:
    """mem_id -> lower bound (aligned group bytes) for a method's arenas.

    Returns the dict. Raises :class:`PlanningError` where :func:`build_problem` does."""
    return {a.mem_id: build_problem(method, a.mem_id).lower_bound for a in method.arenas}
