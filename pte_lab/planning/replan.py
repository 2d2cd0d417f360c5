"""Replan a program's arenas, check the result, and write it as a new ``.pte``."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import Pte, open_pte
from ..model.findings import Kind
from ..model.validate import find_conflicts
from ..units import count
from .algorithms import PLANNERS
from .problem import PlanningError, Problem, align_up, build_problem

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class ArenaPlan:
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
        """The original size over the lower bound (1.0: no plan is smaller); None without a bound."""
        return self.before / self.lower_bound if self.lower_bound else None

    @property
    def after_over_bound(self) -> float | None:
        """The new size over the lower bound; None without a bound."""
        return self.after / self.lower_bound if self.lower_bound else None


#: the columns of :meth:`Replan.table`, one row per arena: (column, :class:`ArenaPlan` attribute)
REPLAN_TABLE = (("method", "method"), ("mem_id", "mem_id"), ("device", "device"), ("before", "before"),
                ("after", "after"), ("lower_bound", "lower_bound"), ("before/bound", "before_over_bound"),
                ("after/bound", "after_over_bound"), ("saved", "saved"), ("kept_original", "kept"),
                ("seconds", "seconds"))


def plan_arena(problem: Problem, algorithm: str = "best_fit") -> tuple[dict[int, int], int]:
    """(value -> offset, arena size) for one arena's problem."""
    try:
        fn = PLANNERS[algorithm]
    except KeyError:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {sorted(PLANNERS)}") from None
    starts = fn(problem)
    offsets: dict[int, int] = {}
    end = 0
    for g in problem.groups:
        base = starts[g.id]
        if base % problem.alignment:
            raise PlanningError(f"{algorithm} placed group {g.id} at unaligned offset {base}")
        for value, rel, _ in g.members:
            offsets[value] = base + rel
        end = max(end, base + g.size)
    for value, nbytes in problem.idle:  # never alive: any in-bounds offset will do
        offsets[value] = 0
        end = max(end, align_up(nbytes, problem.alignment))
    return offsets, align_up(end, problem.alignment) + problem.padding


@dataclass
class Replan:
    """New offsets and arena sizes for every arena of every method."""

    original: Pte
    algorithm: str
    arenas: list[ArenaPlan]
    _source: bytes | None = field(default=None, repr=False)

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

        ``allow_overlaps=True`` writes a plan whose live tensors overlap (the
        validator's conflicts), to watch what goes wrong (``verify`` catches it;
        ``pte_lab.load`` runs such a file in a worker process): an experiment,
        never a program to deploy. Everything else is still checked.
        """
        from ..quiet import quiet

        with quiet():  # importing the serializer imports torch and torchao, which print as they load
            from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

        conflicts = self.conflicts()
        if conflicts and not allow_overlaps:
            raise PlanningError(f"the new plan has {count(len(conflicts), 'overlapping live tensor pair')} "
                                f"(first: {conflicts[0]}); refusing to write it")
        data = self._bytes()
        try:  # ExecuTorch's own (Python) reader and writer: what they raise on a file is named here
            pf = deserialize_pte_binary(data)
        except Exception as exc:  # noqa: BLE001
            raise PlanningError(f"ExecuTorch's serializer cannot read this program back in: "
                                f"{type(exc).__name__}: {exc}") from exc
        by_method = {}
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
            out = bytes(serialize_pte_binary(pf, extract_delegate_segments=True))
        except Exception as exc:  # noqa: BLE001
            raise PlanningError(f"ExecuTorch's serializer cannot write this program: {type(exc).__name__}: "
                                f"{exc}") from exc
        try:
            self._check_written(out, allow_overlaps)
        except PlanningError as exc:
            raise PlanningError(f"refusing to write {os.fspath(path)}: the re-read program failed its check: "
                                f"{exc}") from None
        path = os.fspath(path)
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
        if old_segs != [(s.kind, s.size) for s in new.segments]:
            raise PlanningError("segments changed")

    def __repr__(self) -> str:
        before, after = sum(a.before for a in self.arenas), sum(a.after for a in self.arenas)
        moved = sum(not a.kept for a in self.arenas)
        return (f"<Replan with {self.algorithm}: {count(len(self.arenas), 'arena')}, {before:,} -> {after:,} bytes, "
                f"{moved} replanned, {len(self.arenas) - moved} kept; .table() per arena>")

    def _repr_html_(self) -> str:
        return (f"<b>Replan with {self.algorithm}</b>" + self.table().to_html(index=False)
                + "<b>per method</b>" + self.by_method().to_html())


def replan(source, algorithm: str = "best_fit", methods: list[str] | None = None,
           alignment: int | None = None, smaller_only: bool = True) -> Replan:
    """Replan every arena of every method (or of ``methods``) of a program.

    ``source`` is a path, bytes or an opened :class:`~pte_lab.Pte`. An arena whose
    new plan is not smaller keeps its original plan, unless ``smaller_only=False``
    (then every arena takes the new plan: other offsets, to see that a program
    still computes the same wherever its tensors sit). A method with backward
    jumps (a loop) raises :class:`PlanningError`.
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
            offsets, size = plan_arena(problem, algorithm)
            seconds = time.perf_counter() - t
            kept = smaller_only and size >= ar.size
            if kept:
                offsets = {x.value: x.offset for x in m.planned if x.mem_id == ar.mem_id}
                size = ar.size
            arenas.append(ArenaPlan(name, ar.mem_id, ar.device, ar.size, size, problem.lower_bound,
                                    problem.alignment, problem.padding, offsets, seconds, kept))
    return Replan(pte, algorithm, arenas, raw)


def lower_bounds(method) -> dict[int, int]:
    """mem_id -> lower bound (aligned group bytes) for a method's arenas."""
    return {a.mem_id: build_problem(method, a.mem_id).lower_bound for a in method.arenas}
