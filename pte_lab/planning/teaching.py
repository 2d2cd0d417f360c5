"""Teaching helpers: the same module under different planners, and two plans side by side."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import Pte, open_pte
from ..plot import layout_pair
from .problem import build_problem
from .algorithms import plan_arena

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class Comparison:
    """Arena sizes of one module exported with different planners and I/O planning choices."""

    table: "pd.DataFrame"
    #: label -> the exported program (read with pte_lab)
    programs: dict[str, Pte] = field(repr=False)

    def _repr_html_(self) -> str:
        return self.table.to_html()

    def __repr__(self) -> str:
        return self.table.to_string()


def _export(module, example_inputs, algo: str, alloc_io: bool) -> bytes:
    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive
    from executorch.exir.passes import MemoryPlanningPass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            ep = torch.export.export(module.eval(), tuple(example_inputs))
        suite = MemoryPlanningAlgorithmSuite([{"greedy": greedy, "naive": naive}[algo]])
        cfg = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
            memory_planning_algo=suite, alloc_graph_input=alloc_io, alloc_graph_output=alloc_io))
        return bytes(to_edge_transform_and_lower(ep).to_executorch(cfg).buffer)


def compare(module, example_inputs, planners=("greedy", "naive"), io_planned=(True, False),
            method: str = "forward") -> Comparison:
    """Export ``module`` with each of ExecuTorch's planners and I/O planning choices; compare arenas.

    Columns: planner, inputs/outputs planned, arena bytes, peak live bytes
    (the model's), size/peak, pte_lab's lower bound, and what pte_lab's
    best_fit planner gets on the same problem.

    Returns that table (a pandas DataFrame). Raises what ``torch.export`` and ExecuTorch's lowering raise
    for a module they cannot export.
    """
    import pandas as pd


    rows, programs = [], {}
    for algo in planners:
        for io in io_planned:
            pte = open_pte(_export(module, example_inputs, algo, io))
            label = f"{algo}, I/O {'planned' if io else 'caller-provided'}"
            programs[label] = pte
            m = pte.methods[method]
            for a in m.arenas:
                prob = build_problem(m, a.mem_id)
                rows.append((algo, io, a.mem_id, a.size, a.peak_bytes, a.size_over_peak, prob.lower_bound,
                             plan_arena(prob, "best_fit")[1], len([t for t in m.planned if t.mem_id == a.mem_id])))
    df = pd.DataFrame(rows, columns=["planner", "io_planned", "mem_id", "arena_bytes", "peak_bytes", "size/peak",
                                     "lower_bound", "best_fit_bytes", "tensors"])
    return Comparison(df, programs)


def plot_plans(a, b, mem_id: int = 1, titles: tuple[str, str] = ("plan A", "plan B"), axes=None,
               color_by: str = "role"):
    """Two plans of the same method, one above the other on one byte scale; returns the Figure
    (``fig.axes``: the two panels).

    ``a`` and ``b`` are :class:`~pte_lab.model.Method` objects (e.g. the same
    method in an original and a replanned program). Each panel has its own
    legend (its size, its peak live, its waste); the shared scale makes the
    difference in height the difference in bytes (:func:`pte_lab.plot.layout_pair`).
    Raises nothing of its own: a method without that arena shows a panel saying so.
    """
    return layout_pair(a, b, mem_id, axes=axes, titles=titles, color_by=color_by, sharex=True)
