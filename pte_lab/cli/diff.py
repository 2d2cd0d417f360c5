"""``pte-lab diff``: what changed in memory between two programs; with ``--fail-if-grows``, a memory budget for
CI (exit 1 when it is exceeded, :data:`~pte_lab.errors.TARGET_CHANGED` when the deployment changed)."""

from __future__ import annotations

import argparse
import sys

from ..errors import TARGET_CHANGED, PteLabError
from ..progress import lines
from ..views.json_text import json_text
from ..vocabulary import BUDGET_KINDS
from .common import no_cache_option, whole


def register(subparsers) -> None:
    df = subparsers.add_parser("diff", help="what changed in memory between two programs: arenas, tensors, the "
                                            "file, loaders; with --fail-if-grows, a memory budget for CI")
    df.add_argument("before", help="the first program (.pte or .bpte)")
    df.add_argument("after", help="the second program (.pte or .bpte)")
    df.add_argument("--method", "-m", help="only this method")
    df.add_argument("--json", action="store_true", help="emit the pte_lab.diff JSON document (version 2)")
    df.add_argument("--compact", action="store_true", help="with --json: no indentation")
    df.add_argument("--html", action="store_true", help="print the report as an HTML page (a notebook's view)")
    df.add_argument("--sizes", action="store_true",
                    help="also size both programs (pte-lab sizes: loads and runs each method; a program's kept sizing "
                         "where there is one, said in the report) and compare the parts")
    df.add_argument("--fail-if-grows", type=_percentage, metavar="PCT",
                    help="exit 1 when the file's bytes, the planned bytes (all methods, or any one method: at run time "
                         "its planned buffers), a delegate's scratch or, with --sizes, the method pool or temp pool "
                         "of a method (never this host's heap, which the budget lists as not budgeted) grow by "
                         "more than PCT percent (or a pool was not measured); exit "
                         f"{TARGET_CHANGED} when a delegate's backend, target or memory mode changes, its bytes "
                         f"move from flash to RAM, or a method of A is gone ({TARGET_CHANGED} wins over 1; stderr "
                         "names both)")
    df.add_argument("--budget-on", action="append", choices=tuple(BUDGET_KINDS), metavar="KIND",
                    help="with --fail-if-grows: hold only this kind (repeatable; default all): "
                         + "; ".join(f"{k}: {v}" for k, v in BUDGET_KINDS.items())
                         + ". For example --budget-on planned --budget-on scratch when the weights are meant to "
                           "change; a kind with nothing to hold here is said in the heading, and refused when no kind named "
                           "holds anything")
    df.add_argument("--allow-target-change", action="store_true",
                    help=f"with --fail-if-grows: do not fail (exit {TARGET_CHANGED}) when a delegate's backend, "
                         "target or memory mode changes, its bytes move from flash to RAM or a method is gone")
    df.add_argument("--rows", type=whole(1), default=12, help="most tensors listed per table (default 12)")
    no_cache_option(df, "with --sizes: size both programs again (by default a sizing of these same bytes, with the "
                        "same pte_lab and ExecuTorch, is kept, by pte-lab sizes too, and used at once, said in the "
                        "report); nothing is kept")
    df.set_defaults(func=run)


def run(args) -> int:
    from ..format import identify
    from ..model import open_pte
    from ..model.diff import diff_programs
    from ..views.diff import budget_failure_lines, diff_document, diff_html, diff_text, target_changes_line

    if args.json and args.html:
        raise PteLabError("diff prints --json or --html, not both")
    if args.compact and not args.json:
        raise PteLabError("--compact goes with --json")
    for f in (args.before, args.after):
        if identify(f) == "data":
            raise PteLabError(f"{f} is a .ptd data file: diff compares programs (.pte, .bpte)")
    a, b = open_pte(args.before), open_pte(args.after)
    d = diff_programs(a, b, methods=[args.method] if args.method else None)
    if args.sizes:
        from ..runtime.sizing import sized_diff

        say = lines()
        d = sized_diff(d, a, b, progress=say, announce=say, cache=False if args.no_cache else None)
    elif args.no_cache:
        raise PteLabError("--no-cache goes with --sizes: it sizes both programs again")
    limit = args.fail_if_grows
    if limit is not None:
        d = d.with_budget(limit, allow_target_change=args.allow_target_change,  # text, HTML and JSON show it
                          on=args.budget_on)
        empty = d.nothing_to_hold() if args.budget_on else {}
        if empty and len(empty) == len(d.budget_on):  # asked for by name, nothing to hold: it would pass anything
            raise PteLabError("--budget-on " + "; --budget-on ".join(f"{k} holds nothing here: {why}"
                                                                      for k, why in empty.items()))
    elif args.budget_on or args.allow_target_change:
        raise PteLabError(f"{'--budget-on' if args.budget_on else '--allow-target-change'} says what "
                          "--fail-if-grows PCT holds: give --fail-if-grows too")
    if args.json:
        sys.stdout.write(json_text(diff_document(d), args.compact))
        sys.stdout.write("\n")
    elif args.html:
        from ..views.html import html_page

        sys.stdout.write(html_page(diff_html(d), f"pte-lab diff {args.before} {args.after}") + "\n")
    else:
        sys.stdout.write(diff_text(d, rows=args.rows) + "\n")
    if limit is None:
        return 0
    over = budget_failure_lines(d)
    for line in over:
        print(f"pte-lab: {line}", file=sys.stderr)
    targets = None if args.allow_target_change else target_changes_line(d)
    if targets:
        print(f"pte-lab: {targets} (--allow-target-change accepts this)", file=sys.stderr)
    from ..model.diff_backends import exit_status
    from ..views.diff_backends import not_run_here_line

    status = exit_status(d, d.budget_result().exit_status)  # what this host cannot run is no failed budget
    here = not_run_here_line(d)
    if here:
        print(f"pte-lab: {here}", file=sys.stderr)
    return status


def _percentage(text: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (10 means 10%)") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a percentage of at least 0, not {text}")
    return v
