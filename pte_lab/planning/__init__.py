"""Memory planning lab: the planning problem of an arena, its lower bound, better plans,
a replanned ``.pte`` written and verified, and teaching helpers.

>>> r = pte_lab.planning.replan("model.pte", algorithm="best_fit")
>>> r.table()                 # per arena: before, after, lower bound
>>> r.write("model.replanned.pte")
>>> pte_lab.planning.verify("model.pte", "model.replanned.pte")

Its names are loaded when first used (``pte_lab.lazy_names``): ``what-if`` asked again loads the planners, not
the verification's runtime, and the lessons' helpers (``compare``, ``plot_plans``) load matplotlib only when
asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

#: each public name -> the submodule that defines it
_LAZY = {
    "ALGORITHMS": "algorithms", "PLANNERS": "algorithms", "plan_arena": "algorithms",
    "Group": "problem", "PlanningError": "problem", "Problem": "problem", "build_problem": "problem",
    "ArenaPlan": "replan", "Replan": "replan", "InputReuse": "replan", "WrittenLayout": "replan", "lower_bounds": "replan",
    "replan": "replan", "written_layout": "replan",
    "Verification": "verify", "verify": "verify",
    "compare": "teaching", "plot_plans": "teaching",
}

__all__ = ["replan", "Replan", "ArenaPlan", "InputReuse", "verify", "Verification", "build_problem", "Problem", "Group",
           "PlanningError", "WrittenLayout", "written_layout", "ALGORITHMS", "PLANNERS", "plan_arena", "lower_bounds",
           "compare", "plot_plans"]

if TYPE_CHECKING:  # pragma: no cover
    from .algorithms import ALGORITHMS, PLANNERS, plan_arena
    from .problem import Group, PlanningError, Problem, build_problem
    from .replan import ArenaPlan, InputReuse, Replan, WrittenLayout, lower_bounds, replan, written_layout
    from .teaching import compare, plot_plans
    from .verify import Verification, verify

_names, __dir__ = lazy_names(__name__, _LAZY)


def __getattr__(name: str):
    if name == "teaching":  # the module itself, as pte_lab.planning.teaching
        return importlib.import_module(f"{__name__}.teaching")
    return _names(name)
