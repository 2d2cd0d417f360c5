"""``pte-lab``: inspect a ``.pte`` from the shell, or export an example program.

    pte-lab inspect FILE [--data PTD] [--etrecord E] [--method M] [--json [--compact]] [--layout] [--width N] [--rows N]
    pte-lab example NAME OUT [--side N]
    pte-lab measure [--side N] [--legacy-python PATH] [--json FILE]
    pte-lab measure --bundle DIR [--side N]
    pte-lab legacy-env [--dir DIR]
    pte-lab replan IN OUT [--algorithm A] [--keep-io] [--verify] [--data PTD]
    pte-lab sizes FILE [--method M] [--data PTD] [--json | --c-header | --example-runner DIR] [--verify] [--runs N]
                   [--target host|cortex-m] [--budget SIZE] [--region NAME=SIZE ...] [--max-input-bytes SIZE]
    pte-lab diff A B [--method M] [--json [--compact] | --html] [--sizes] [--fail-if-grows PCT [--budget-on KIND ...]]
                     [--allow-target-change] [--rows N]
    pte-lab what-if FILE --bound INPUT:AXIS=N [--method M] [--json] | --bound INPUT:AXIS --budget SIZE
    pte-lab what-if FILE --at-shape INPUT=D0,D1,... [--method M] [--json]
    (what-if FILE and sizes take --max-input-bytes SIZE: the most built at sizes the file declares, default 1 GiB)
    pte-lab what-if A.pte B.pte --values 64,128 --at 256 [--method M] [--json]
    pte-lab cache [info | clear [--exports]]  (what sizes and what-if keep, and the example exports)

Exit statuses:

* 0: all is well.
* 1 (:data:`~pte_lab.errors.CHECK_FAILED`): a check failed: ``diff --fail-if-grows``'s budget exceeded (or a
  budgeted figure a side measured and the other failed to), ``sizes --budget`` or ``--region`` not met,
  ``--verify`` not proven, a method whose run failed or crashed.
* 2: bad input, one line on stderr naming it; no traceback.
* 3: a bug in pte_lab: one line says so (``--debug`` anywhere on the line, or ``PTE_LAB_DEBUG=1``, prints its
  traceback too).
* 4 (:data:`TARGET_CHANGED`): ``diff --fail-if-grows`` saw the deployment change: a delegate's backend, target
  or memory mode, its bytes from flash to RAM, or a method gone (unless ``--allow-target-change``).
* 5 (:data:`~pte_lab.errors.NOT_RUN_HERE`): not run here. Nothing failed, but a method cannot run on this
  host (its backend, such as Core ML, is not in this ExecuTorch build and pte_lab has no stand-in): the
  figures the file gives were printed, with their basis, and what only running tells (the pools, the heap) was
  not measured, so no budget was checked against it. ``sizes`` and ``diff --sizes --fail-if-grows`` say so.

When several apply the status is the first of 4, 1, 5, and stderr names each.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings

from ..errors import BUG_EXIT_CODE, NOT_RUN_HERE, TARGET_CHANGED, PteLabError, bug_line
from ..printable import printable, printable_text
from . import cache, diff, example, inspect, legacy_env, measure, replan, sizes, what_if
from .common import MOST_ERROR_CHARACTERS, one_line, os_line, Parser

#: what notebooks, scripts and tests import from here: the entry point, the parser, the exit statuses of a changed
#: target and of a method not run here, and the error line's bound (its home, with ``one_line``, is :mod:`pte_lab.cli.common`)
__all__ = ["main", "build_parser", "TARGET_CHANGED", "NOT_RUN_HERE", "MOST_ERROR_CHARACTERS"]

#: the commands, in the order ``pte-lab --help`` lists them: each module's ``register(subparsers)`` adds its
#: parser (which sets ``func`` to its ``run(args) -> int``); its top imports are light, its ``run`` imports the
#: layer it drives, so ``--help`` loads none of them
COMMANDS = (inspect, example, measure, legacy_env, replan, sizes, diff, what_if, cache)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; a parsed command line's ``func`` runs it (and returns the exit status)."""
    p = Parser(prog="pte-lab", description="The lab bench for ExecuTorch memory.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    p.commands = sub.choices  # name -> its parser, for usage on an unknown option
    for command in COMMANDS:
        command.register(sub)
    return p


class _Printable:
    """A text stream whose writes go through :func:`pte_lab.printable.printable_text`: a name from the file
    never writes a control character or an escape sequence to the terminal."""

    def __init__(self, stream):
        self._stream = stream
        self._clean = printable_text

    def write(self, text: str) -> int:
        return self._stream.write(self._clean(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


#: set to show the traceback of a bug in pte_lab (as ``--debug`` does)
DEBUG_ENV = "PTE_LAB_DEBUG"


def _numpy_one_thread() -> None:
    """Load numpy with its BLAS on one thread: pte_lab's arrays are integer bookkeeping, and OpenBLAS's threads,
    started at import, cost a short command a tenth of a second of CPU spinning. The setting is this process's
    alone: the environment the workers inherit is given back as it was."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401 - loaded now, with the setting
    except ImportError:  # pragma: no cover - numpy is a dependency; the command says what is missing
        pass
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    0 ok, 1 a check failed (verification, a budget, a method whose run failed), 2 bad input (one line naming it),
    3 a bug in pte_lab (any exception that is not a :class:`PteLabError`: one line saying so; ``--debug`` or
    ``PTE_LAB_DEBUG=1`` shows the traceback too), 4 a deployment change (``diff --fail-if-grows``), 5 not run
    here (a method this host cannot run; the module's docstring has them all).
    """
    if sys.stdout is None or sys.stderr is None:  # started with a standard stream closed (`... >&-`)
        if sys.stderr is not None:
            print("pte-lab: error: standard output is closed: nowhere to write the answer", file=sys.stderr)
        return 2
    _numpy_one_thread()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # an unknown option: the subcommand's own usage says what it takes
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")

    def note(message, category, filename, lineno, file=None, line=None):  # one line, no source location
        print(f"pte-lab: note: {message}", file=sys.stderr)

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Printable(out), _Printable(err)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = note
            return args.func(args)
    except BrokenPipeError:  # `pte-lab inspect x | head`: the reader left; not an error
        try:  # keep the interpreter's final flush from failing on the closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        print("pte-lab: interrupted", file=sys.stderr)
        return 130
    except (PteLabError, OSError) as exc:  # bad input (or a file that cannot be read): one line, no traceback
        print(f"pte-lab: error: {one_line(exc) if isinstance(exc, PteLabError) else os_line(exc)}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - anything else is a bug in pte_lab: one line says so
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(f"pte-lab: error: {printable(bug_line(exc))}", file=sys.stderr)
        return BUG_EXIT_CODE
    finally:
        sys.stdout, sys.stderr = out, err
