"""``pte-lab what-if``: a dynamic method as if exported at another bound, the largest bound under a budget, the
bytes at one shape, or a parameter's effect from two exports."""

from __future__ import annotations

import sys

from ..errors import PteLabError
from ..progress import lines
from ..units import parse_whole, quoted
from ..views.json_text import json_text
from .common import max_input_bytes_option, no_cache_option, whole


def register(subparsers) -> None:
    wi = subparsers.add_parser("what-if", help="a dynamic method as if exported at another bound, or the largest "
                                               "bound under a budget (runs the method at a few small sizes; the "
                                               "budget's first ask sizes the program too)")
    wi.add_argument("file", help="the program (.pte) with a dynamic input")
    wi.add_argument("other", nargs="?", help="a second export of the same model at another value of one "
                                             "parameter (with --values and --at)")
    wi.add_argument("--values", help="with two files: the parameter's value in each, e.g. 64,128")
    wi.add_argument("--at", type=whole(None), help="with two files: the value to predict at")
    wi.add_argument("--bound", "-b", action="append", metavar="INPUT:AXIS[=N]",
                    help="a dynamic dim and the bound to predict at (repeatable); with --budget, the dim to search")
    wi.add_argument("--at-shape", action="append", metavar="INPUT=D0,D1,...",
                    help="instead of --bound: run the method once with input INPUT of this shape (repeatable): the "
                         "bytes each planned tensor uses there, what a plan for that shape needs, and the gap to "
                         "the plan at the bound")
    wi.add_argument("--method", "-m", help="the method (default: the one with a dynamic input)")
    wi.add_argument("--budget", help="the largest bound whose app memory fits this (bytes; KiB, MiB, GiB; or decimal "
                                     "kB, MB, GB: 300MB): the planned arenas, the method and temp pools and the heap "
                                     "of an app's Module with its default FileDataLoader, from a sizing of these "
                                     "bytes: a kept one, else one made now (the first ask sizes every method as "
                                     "`pte-lab sizes FILE` does, in fresh workers: seconds to minutes, and keeps it "
                                     "for both), the heap measured again at the bounds the search tries (kernels and "
                                     "XNNPACK malloc by the shapes: a fresh worker each, kept); the file's figures "
                                     "where it cannot run here; said in the output")
    wi.add_argument("--planned-only", action="store_true",
                    help="with --budget: the budget is the planned arenas' alone (the pools and heap on top; nothing "
                         "is sized)")
    wi.add_argument("--need", type=whole(1), metavar="N",
                    help="with --budget: the longest input the app runs; where the largest bound under the budget "
                         "is below it, say so and what plans N under the budget instead (the findings' changes, "
                         "predicted)")
    wi.add_argument("--apply", action="append", metavar="FINDING",
                    help="make a finding's change before replanning (its kind, e.g. attention_scores: the safe "
                         "softmax's planes removed; repeatable): a prediction of the program with the model edited")
    wi.add_argument("--json", action="store_true", help="emit the prediction as JSON")
    no_cache_option(wi, "run the method again, and with --budget size it again (by default the shapes learnt from "
                        "runs of these same bytes, and their sizing, with the same pte_lab and ExecuTorch, are kept "
                        "and used at once, said in the output); nothing is kept")
    max_input_bytes_option(wi, "one run's inputs (at the small sizes sampled, or --at-shape's) and ETDump's buffer")
    wi.set_defaults(func=run)


def run(args) -> int:
    from ..planning.at_bound import largest_bound, usage_at, what_if

    cache = False if args.no_cache else None
    if args.other is not None or args.values is not None or args.at is not None:
        if args.at_shape:
            raise PteLabError("--at-shape runs one program at one shape: give it without a second file")
        return _what_if_from(args)
    if args.planned_only and args.budget is None:
        raise PteLabError("--planned-only goes with --budget SIZE: it makes the budget the planned arenas' alone")
    if args.need is not None and args.budget is None:
        raise PteLabError("--need N goes with --budget SIZE: it says whether the largest bound under the budget "
                          "runs inputs of N, and what else does")
    if args.at_shape:
        if args.bound or args.budget is not None or args.apply:
            raise PteLabError("--at-shape runs the method at one shape: give it without --bound, --budget or --apply")
        r = usage_at(args.file, _at_shape(args), method=args.method, max_input_bytes=args.max_input_bytes)
        sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
        return 0
    if not args.bound and args.budget is not None:  # the method's one dynamic dim (several: listed)
        r = largest_bound(args.file, args.budget, None, method=args.method, max_input_bytes=args.max_input_bytes,
                          cache=cache, progress=lines(), need=args.need, apply=args.apply,
                          whole=not args.planned_only)
        sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
        return _need_status(r)
    if not args.bound:
        raise PteLabError("what-if FILE needs --bound INPUT:AXIS=N, --bound INPUT:AXIS --budget SIZE or "
                          "--at-shape INPUT=D0,D1,... (or two files with --values A,B --at N)")
    bounds = {}
    for b in args.bound:
        dim, _, n = b.partition("=")
        example = "INPUT:AXIS=N, e.g. 0:1=800"
        key = _wholes(dim, ":", "--bound", b, example)
        if len(key) != 2:
            raise PteLabError(f"--bound {quoted(b)}: write {example}")
        bounds[key] = _wholes(n, None, "--bound", b, example)[0] if n else None
    if args.budget is not None:
        if len(bounds) != 1:
            raise PteLabError("--budget searches one dim: give one --bound INPUT:AXIS")
        r = largest_bound(args.file, args.budget, next(iter(bounds)), method=args.method,
                          max_input_bytes=args.max_input_bytes, cache=cache, progress=lines(), need=args.need,
                          apply=args.apply, whole=not args.planned_only)
    else:
        if any(n is None for n in bounds.values()):
            raise PteLabError("--bound INPUT:AXIS=N: the bound N to predict at is missing (or give --budget)")
        r = what_if(args.file, bounds, method=args.method, max_input_bytes=args.max_input_bytes, cache=cache,
                    progress=lines(), apply=args.apply)
    if args.json:
        sys.stdout.write(json_text(r.to_dict()) + "\n")
    else:
        sys.stdout.write(str(r) + "\n")
    return _need_status(r) if args.budget is not None else 0


def _need_status(r) -> int:
    """1 (a failed check) where the answer refuses the app's longest input (``--need``), said on stderr."""
    if r.covers_need is not False:
        return 0
    print(f"pte-lab: the largest bound under the budget, {r.bound:,}, refuses the longest input you run, "
          f"{r.need:,}" + (f"; the fewest changes that plan {r.need:,} under it: {' and '.join(r.fitting[0].kinds) or 'a replan'}"
                           if r.fitting else f"; no change pte_lab predicts plans {r.need:,} under it"),
          file=sys.stderr)
    return 1


def _what_if_from(args) -> int:
    from ..planning.from_two_exports import what_if_from

    if args.other is None or args.values is None or args.at is None or args.bound or args.budget or args.apply:
        raise PteLabError("what-if A.pte B.pte takes --values A,B and --at N (not --bound, --budget or --apply)")
    values = _wholes(args.values, ",", "--values", args.values, "the two exports' values as A,B, e.g. 64,128")
    r = what_if_from(args.file, args.other, values, args.at, method=args.method)
    sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
    return 0


def _at_shape(args) -> dict:
    """``--at-shape 0=1,800,258`` -> {(0, 1): 800}: the axes whose size differs from the exported shape."""
    from ..planning.at_bound import what_if_method, program_and_path

    wanted = {}
    for a in args.at_shape:
        pos, _, dims = a.partition("=")
        example = "INPUT=D0,D1,..., e.g. 0=1,800,258"
        (pos,) = _wholes(pos, None, "--at-shape", a, example)
        wanted[pos] = _wholes(dims, ",", "--at-shape", a, example)
    by_pos = {s.position: s for s in what_if_method(program_and_path(args.file)[0], args.method).inputs}
    shape = {}
    for pos, dims in wanted.items():
        exported = by_pos[pos].shape if pos in by_pos and by_pos[pos].shape is not None else None
        if exported is None or len(exported) != len(dims):
            raise PteLabError(f"--at-shape {pos}={','.join(map(str, dims))}: input {pos} is "
                              + ("no tensor input" if exported is None else f"exported with {len(exported)} axes "
                                 f"{list(exported)}"))
        shape.update({(pos, axis): n for axis, (n, e) in enumerate(zip(dims, exported)) if n != e})
    if not shape:
        raise PteLabError("--at-shape: that is the exported shape, the one the plan at the bound is made for "
                          "(no gap); give a smaller size on a dynamic axis")
    return shape


def _wholes(text: str, sep: str | None, option: str, arg: str, example: str) -> tuple[int, ...]:
    """``text`` (part of ``option``'s argument ``arg``) split at ``sep`` (None: one number), each a whole number
    (:func:`pte_lab.units.parse_whole`); else one line naming the option and how to write it."""
    try:
        return tuple(parse_whole(x) for x in (text.split(sep) if sep else [text]))
    except ValueError as exc:
        raise PteLabError(f"{option} {quoted(arg)}: write {example} ({exc})") from None
