"""Load every method of a program and run it once on made-up inputs: what the explorer's button does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..devices import device_problem
from ..errors import PteLabBug, PteLabError, bug_line
from ..model import open_pte
from .device import emulate_device
from .inputs import defaulted_inputs, example_inputs
from .loaded import load

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["run_all", "RunAll", "MethodRun"]


@dataclass(frozen=True)
class MethodRun:
    """One method's load and run in :func:`run_all`: whether it worked, its outputs' shapes or its error."""
    method: str
    ok: bool
    #: shapes of the tensor outputs when it ran
    output_shapes: tuple[tuple[int, ...], ...] = ()
    #: "ErrorName: message" when loading or running it failed
    error: str | None = None
    #: the scalar inputs given a value of pte_lab's own ("input 1 (Double) = 0.0"; see
    #: ``defaulted_inputs``)
    defaulted: tuple[str, ...] = ()


@dataclass
class RunAll:
    """What :func:`run_all` returns: the devices emulated, each method's run, the memory report."""
    #: device -> "emulated (host memory)", or why it could not be emulated
    devices: dict[str, str]
    runs: list[MethodRun]
    #: :meth:`LabProgram.memory_report` after every method ran once
    report: "pd.DataFrame | None" = field(default=None, repr=False)


def run_all(path, emulate: bool = True) -> RunAll:
    """Load ``path`` with :func:`pte_lab.runtime.load`, then load and run each method once.

    Inputs come from :func:`~pte_lab.runtime.example_inputs` (scalar inputs get the file's value, else 0,
    0.0, false: each run's ``defaulted`` says which). With ``emulate``,
    every device the program plans on is emulated first (where no real
    allocator is registered; a device ExecuTorch does not define is recorded
    with why, never emulated). A method that fails is recorded, not raised; the
    program is released whatever happens. Anything that is not a
    :class:`PteLabError` is a bug in pte_lab: a method's run records it as such,
    and elsewhere it is raised as :class:`~pte_lab.errors.PteLabBug` (one line,
    the original chained).

    Returns a :class:`RunAll`. Raises what :func:`pte_lab.load` raises for the program itself.
    """
    try:
        return _run_all(path, emulate)
    except PteLabError:
        raise
    except Exception as exc:  # not meant: a bug, said so in one line
        raise PteLabBug(exc) from exc


def _run_all(path, emulate: bool) -> RunAll:
    pte = open_pte(path)
    devices: dict[str, str] = {}
    if emulate:
        for d in sorted({d for m in pte.methods.values() for d in m.devices}):
            problem = device_problem(d)
            if problem:
                devices[d] = f"not emulated: {problem}"
                continue
            try:
                emulate_device(d)
                devices[d] = "emulated (host memory)"
            except PteLabError as exc:
                devices[d] = str(exc)
    runs = []
    with load(path) as prog:
        for name in prog.method_names:
            defaulted = defaulted_inputs(prog.plan.methods[name])
            try:
                outs = prog.load_method(name)(*example_inputs(prog.plan.methods[name]))
                runs.append(MethodRun(name, True, tuple(tuple(o.shape) for o in outs if hasattr(o, "shape")),
                                      defaulted=defaulted))
            except (PteLabError, ValueError) as exc:
                runs.append(MethodRun(name, False, error=f"{type(exc).__name__}: {exc}", defaulted=defaulted))
            except Exception as exc:  # noqa: BLE001 - a bug in pte_lab: recorded as one, the others still run
                runs.append(MethodRun(name, False, error=bug_line(exc), defaulted=defaulted))
        report = prog.memory_report()
    return RunAll(devices, runs, report)
