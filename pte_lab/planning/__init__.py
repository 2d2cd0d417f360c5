"""Memory planning lab: the planning problem of an arena, its lower bound, better plans,
a replanned ``.pte`` written and verified, and teaching helpers.

>>> r = pte_lab.planning.replan("model.pte", algorithm="best_fit")
>>> r.table()                 # per arena: before, after, lower bound
>>> r.write("model.replanned.pte")
>>> pte_lab.planning.verify("model.pte", "model.replanned.pte")
"""

import importlib

from .algorithms import ALGORITHMS, PLANNERS
from .problem import Group, PlanningError, Problem, build_problem
from .replan import ArenaPlan, Replan, WrittenLayout, lower_bounds, plan_arena, replan, written_layout
from .verify import Verification, verify

__all__ = ["replan", "Replan", "ArenaPlan", "verify", "Verification", "build_problem", "Problem", "Group",
           "PlanningError", "WrittenLayout", "written_layout", "ALGORITHMS", "PLANNERS", "plan_arena", "lower_bounds", "compare", "plot_plans"]


def __getattr__(name):
    # the lessons' helpers draw: plot and matplotlib load when one is asked for, not with the planners (the
    # CLI's parser imports the planners to list them)
    if name in ("compare", "plot_plans", "teaching"):
        # not "from . import teaching": that asks this __getattr__ for it again, forever
        teaching = importlib.import_module(f"{__name__}.teaching")
        return teaching if name == "teaching" else getattr(teaching, name)
    raise AttributeError(name)
