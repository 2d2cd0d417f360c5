"""``pte-lab sizes``: every byte each method needs at run time (the pools of a bare-metal build), measured on this
host or modelled for a target; the JSON, a C header or a runner built with exactly those pools; a board's budget."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import CHECK_FAILED, NOT_RUN_HERE, PteLabError
from ..progress import lines
from ..shell_text import sh_word, sh_words
from ..views.json_text import json_text
from .common import max_input_bytes_option, no_cache_option, one_line, byte_size, whole


def register(subparsers) -> None:
    sz = subparsers.add_parser("sizes", help="every byte each method needs at run time: pools for a "
                                             "bare-metal build, and what lies beyond the plan (loads and runs the "
                                             "methods)")
    sz.add_argument("file", help="the program (.pte) to size")
    sz.add_argument("--method", "-m", action="append", help="only this method (repeatable)")
    sz.add_argument("--data", help="the program's external data file (.ptd)")
    out = sz.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="emit the pte_lab.sizes JSON document (version 2)")
    out.add_argument("--c-header", action="store_true",
                     help="emit a C/C++ header: pools, planned buffers, inputs and outputs, heap, libraries")
    out.add_argument("--example-runner", metavar="DIR",
                     help="write DIR/pools.h, DIR/main.cpp and DIR/build.sh: a C++ runner built against the installed "
                          "executorch wheel, with static pools of exactly the verified sizes (implies --verify)")
    sz.add_argument("--verify", action="store_true",
                    help="run each method again with pools of exactly these sizes, and with a method pool one "
                         "byte smaller (which must be refused); exit 1 if a figure is not tight")
    sz.add_argument("--runs", type=whole(1, 100), default=2, help="runs per method (default 2, at most 100)")
    sz.add_argument("--target", choices=("host", "cortex-m"), default="host",
                    help="the pools for this target: host (this machine, measured; the default) or cortex-m "
                         "(32-bit Arm, Cortex-M55: the method pool modelled with its ABI, checked against this host)")
    sz.add_argument("--budget", type=byte_size, metavar="SIZE",
                    help="the board's RAM (262144, 256KiB, 1.5MiB; or decimal: 256kB): each method's bare-metal "
                         "total (planned "
                         "buffers, pools, the program's bytes where they must be in RAM) is checked against it; "
                         "exit 1 when one does not fit")
    sz.add_argument("--region", type=_region, action="append", metavar="NAME=SIZE",
                    help="a RAM region of the board (repeatable): the parts of each method's bare-metal total are "
                         "placed in them, largest first; exit 1 when one does not fit. A region named heap is the "
                         "board's heap (what delegates take with operator new goes there only; heap=0: none)")
    sz.add_argument("--npu-region", action="append", metavar="NAME",
                    help="a --region the NPU reaches (repeatable): the temp pool holding an NPU's scratch is placed "
                         "only there (with several regions and none marked, it is placed nowhere)")
    sz.add_argument("--no-heap", action="store_true",
                    help="the board has no heap (no malloc, no operator new): what the delegates ask of operator "
                         "new is served from a static operator-new pool instead, listed with the pools and counted "
                         "in the total (--example-runner's runner provides it); a method whose backend allocates "
                         "its own memory with malloc (XNNPACK) does not fit (exit 1)")
    no_cache_option(sz, "measure afresh and keep nothing (by default a program sized before, the same bytes with the same "
                  "pte_lab, ExecuTorch and options, gives its kept figures at once and says when they were "
                  "measured; pte-lab cache clear forgets them all)")
    max_input_bytes_option(sz, "the runner's inputs (each at the shape the file declares, a dynamic one at its bound) "
                         "and the buffers of its unplanned outputs")
    sz.set_defaults(func=run)


def _region(text: str) -> tuple[str, int]:
    """``NAME=SIZE`` (``SRAM=256KiB``)."""
    name, eq, size = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=SIZE (SRAM=256KiB)")
    return name.strip(), byte_size(size)


def _board_heap(args) -> bool | None:
    """Whether the board has a heap, as the options say (None: not said)."""
    from ..runtime.sizing.records import HEAP_REGION

    sizes = [b for n, b in args.region or () if n.lower() == HEAP_REGION]
    if args.no_heap or (sizes and sizes[0] == 0):
        if sizes and sizes[0] and args.no_heap:
            raise PteLabError(f"--no-heap with --region {HEAP_REGION}={sizes[0]}: say one (a board with no heap, "
                              f"or a heap of that size)")
        return False
    return True if sizes else None


def _regions(args) -> tuple[tuple[str, int], ...]:
    """The regions given, less a heap region of 0 bytes: that one says the board has no heap (``_board_heap``),
    and with no other region the budget is the board's RAM."""
    from ..runtime.sizing.records import HEAP_REGION

    return tuple((n, b) for n, b in args.region or () if b or n.lower() != HEAP_REGION)


def _check_npu_regions(args) -> tuple[str, ...]:
    names = [n for n, _ in args.region or ()]
    for n in args.npu_region or ():
        if n not in names:
            raise PteLabError(f"--npu-region {n}: not a region given with --region NAME=SIZE "
                              f"({', '.join(names) or 'none given'})")
    return tuple(args.npu_region or ())


def run(args) -> int:
    from ..runtime.sizing.kept_sizes import kept_sizes
    from ..views.runtime.sizes import c_header, sizes_text

    heap, npu_regions = _board_heap(args), _check_npu_regions(args)

    # the program read here only where its model is needed before or beside the figures (a kept answer on this
    # host needs none: the figures hold what the views show)
    pte = None
    if args.method or args.target != "host":
        from ..model import open_pte

        pte = open_pte(args.file)
    for name in args.method or []:
        if name not in pte.methods:
            raise PteLabError(f"{args.file}: no method {name!r} (methods: {', '.join(pte.methods)})")
    if args.example_runner is not None:  # said before the measurement, not after
        from ..format.regular_file import check_writable
        from ..views.runtime.bare_metal_runner import BARE_METAL_FILES
        from ..views.runtime.example_runner import FILES

        if os.path.exists(args.example_runner) and not os.path.isdir(args.example_runner):
            raise PteLabError(f"--example-runner {args.example_runner}: exists and is not a folder")
        for name in BARE_METAL_FILES if args.target != "host" else FILES:
            check_writable(os.path.join(args.example_runner, name), "a file to write")
    verify = args.verify or args.example_runner is not None
    # asked before: the kept figures, read without the measuring machinery, which is imported only to measure
    s = kept_sizes(args.file, args.method, data_path=args.data, runs=args.runs, verify=verify,
                   cache=False if args.no_cache else None)
    if s is None:
        from ..runtime.sizing import sizes

        _warn_large(args, pte)

        s = sizes(args.file, args.method, data_path=args.data, runs=args.runs, verify=verify, progress=lines(),
                  max_input_bytes=args.max_input_bytes, cache=False if args.no_cache else None)
    board = s
    if args.target != "host":
        board = _target_sizes(args, pte, s)
        if board is None:  # the bare-metal runner: its --verify fails as --verify does
            return 1 if not s.proven else 0
    elif args.example_runner is not None:
        from ..views.runtime.example_runner import left_out, write_example_runner

        for path in write_example_runner(s, args.example_runner, args.method):
            print(path)
        for name, why in left_out(s, args.method).items():
            print(f"not in the example: method {name!r}: {why}")
        _say_verified(s, args.method)
        command = [os.path.join(args.example_runner, "runner"), args.file,
                   *(["--data", args.data] if args.data else [])]
        print(f"build: {sh_word(os.path.join(args.example_runner, 'build.sh'))}; run: {sh_words(command)}")
    elif args.json:
        sys.stdout.write(json_text(s.to_dict(args.budget, _regions(args), heap=heap,
                                             npu_regions=npu_regions)))
        sys.stdout.write("\n")
    elif args.c_header:
        sys.stdout.write(c_header(s, budget=args.budget, regions=_regions(args), heap=heap,
                                  npu_regions=npu_regions))
    elif args.target == "host":
        sys.stdout.write(sizes_text(s) + "\n")
    # a budget on this host is an app's (its total with Module's FileDataLoader) unless the program is a board's;
    # regions, a board without a heap and another target are a board's
    regions = _regions(args)
    kind = "bare-metal" if regions or heap is False else board.budget_target
    said = args.budget is not None or regions or heap is False
    fits = board.fits(args.budget, regions, target=kind, heap=heap,
                      npu_regions=npu_regions) if said and s.methods else {}
    # another target's text says its total against the budget in its block; regions are placed here
    if fits and not args.json and not args.c_header and (args.target == "host" or args.region):
        from ..runtime.sizing.records import TARGET_KINDS
        from ..views.runtime.sizes import fits_lines

        # an app's total on a host is said with the bare-metal total apart
        apart = board.fits(args.budget, target="bare-metal") if TARGET_KINDS[kind].host else {}
        sys.stdout.write("\n" + "\n".join(fits_lines(fits, apart)) + "\n")
    not_here = getattr(s, "cannot_run_here", ())  # (a kept sizing of an older pte_lab has none)
    if not s.methods:  # nothing sized: say why, per method, in one line
        by_reason: dict[str, list[str]] = {}
        for n, why in s.skipped.items():
            by_reason.setdefault(why, []).append(repr(n))
        # the file was read and what it declares was printed: not bad input (2); a method that failed while
        # running is a failed check (1), one this install cannot run at all is not run here (NOT_RUN_HERE)
        only_not_here = set(s.skipped) <= set(not_here)
        lead = "not run here" if only_not_here else "error"
        print(one_line(PteLabError(f"pte-lab: {lead}: {args.file}: no method could be sized here: "
                                    + "; ".join(f"{', '.join(ns)}: {why}" for why, ns in by_reason.items())
                                    + f". What the file says is above; pte-lab inspect {sh_word(args.file)} shows "
                                      "the plan, where the file's bytes go and the delegates' blobs")),
              file=sys.stderr)
        return NOT_RUN_HERE if only_not_here else CHECK_FAILED
    if verify and not s.proven:
        return 1
    if any(not f.fits for f in fits.values()):
        from ..views.runtime.sizes import fits_lines

        for line in fits_lines({n: f for n, f in fits.items() if not f.fits}):
            print(f"pte-lab: {line}", file=sys.stderr)
        return 1
    if not_here:  # nothing failed, but a method this host cannot run was not measured
        print(f"pte-lab: not run here: {', '.join(map(repr, not_here))}: not measured on this host (what the file "
              f"declares is above); exit status {NOT_RUN_HERE}", file=sys.stderr)
        return NOT_RUN_HERE
    return 0


#: planned bytes from which a sizing is said to be slow before it starts (each run executes the method at its bound)
LARGE_PLAN = 256 * 1024 * 1024


def _warn_large(args, pte) -> None:
    """Say, before measuring, that a method planning :data:`LARGE_PLAN` or more runs at its bound many times
    (minutes, that much memory per worker), and what shortens it."""
    from ..model import open_pte
    from ..runtime.sizing.records import HEAP_RUNS
    from ..units import human_bytes

    pte = pte or open_pte(args.file)
    big = {n: m.planned_bytes for n, m in pte.methods.items()
           if (not args.method or n in args.method) and m.planned_bytes >= LARGE_PLAN}
    if not big:
        return
    names = ", ".join(f"{n!r} {human_bytes(b)}" for n, b in big.items())
    # per method: the runs with the program mapped and with a FileDataLoader, in two pool configurations, under
    # two platform layers, then the heap again in fresh workers
    print(f"pte-lab: {names} planned: sizing executes each at its bound (its dynamic inputs at their largest) "
          f"{args.runs}x per configuration and again in {HEAP_RUNS - 1} fresh workers for the heap: minutes on "
          f"portable kernels, and {human_bytes(max(big.values()))} or more of memory at a time; --runs 1 and "
          f"--method NAME shorten it (the figures are kept: a second sizing of these bytes is at once)",
          file=sys.stderr)


def _say_verified(s, methods, target: str = "host") -> None:
    """What --verify proved, one line per method: --example-runner implies it (another target's runner has that
    target's pools, which only the board checks)."""
    from ..views.runtime.sizes import verified_line

    board = (f"; the runner's {target} pools are not verified here: it checks them on the board, failing with "
             f"0x21 where one is short") if target != "host" else ""
    for name in s.methods:
        if not methods or name in methods:
            print(verified_line(s, name) + board)


def _target_sizes(args, pte, s):
    """``sizes --target`` another than this host: the bare-metal runner (returns 0), or the text, --json or
    --c-header of the modelled pools with the board's totals (returns the sizes to check the budget with)."""
    from ..views.runtime.target_pools import on_target, set_these, set_these_dict, set_these_text, target_pools_dict

    # the fit, the JSON and the header with the regions the exit status is checked with (a heap region of 0 B says
    # only that the board has no heap); the block names every region given
    budget, regions, given = args.budget, _regions(args), tuple(args.region or ())
    heap, npu_regions = _board_heap(args), tuple(args.npu_region or ())
    board = on_target(s, pte, args.target)
    if args.example_runner is not None:
        from ..runtime.sizing.records import operator_new_pool
        from ..views.runtime.bare_metal_runner import new_blocks, staging_bytes, write_bare_metal_runner

        for path in write_bare_metal_runner(s, pte, args.example_runner, args.target, args.method):
            print(path)
        staging = staging_bytes(m for n, m in s.methods.items() if not args.method or n in args.method)
        if staging:
            print(f"main.cpp: the planned inputs are copied (set_input) from one staging buffer of {staging:,} B, the "
                  f"runner's own, beyond the board's total (which has them in their planned buffers)")
        blocks = new_blocks(pte, [n for n in s.methods if not args.method or n in args.method], args.target)
        if blocks:
            print(f"main.cpp: the delegates' operator new ({', '.join(sorted({w for w, _ in blocks}))}, "
                  f"{sum(b for _, b in blocks):,} B at load_method) is served from a static pool of "
                  f"{operator_new_pool(b for _, b in blocks):,} B (pools.h): the board needs no heap; "
                  f"CXXFLAGS_EXTRA=-DPTE_LAB_USE_HEAP takes it from your C library's heap instead")
        _say_verified(s, args.method, args.target)
        print("set EXECUTORCH_CORTEX_M_LIB_DIR to your ExecuTorch libraries for the target (or build with "
              "--compile-only without them), then")
        print(f"build: {sh_word(os.path.join(args.example_runner, 'build.sh'))}")
        return None
    if args.c_header:
        from ..views.runtime.sizes import c_header

        sys.stdout.write(c_header(board, budget=budget, regions=regions, heap=heap, npu_regions=npu_regions))
        return board
    blocks = set_these(s, board, pte, args.target, budget, heap=heap, regions=given)
    if args.json:
        doc = board.to_dict(budget, regions, heap=heap, npu_regions=npu_regions) | {"target_pools": target_pools_dict(s, pte, args.target)["methods"],
                                                "set_these": set_these_dict(blocks)}
        sys.stdout.write(json_text(doc) + "\n")
    else:
        sys.stdout.write(set_these_text(s, board, blocks, pte, verify=args.verify) + "\n")
    return board
