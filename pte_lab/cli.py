"""``pte-lab``: inspect a ``.pte`` from the shell, or export an example program.

    pte-lab inspect FILE [--data PTD] [--etrecord E] [--method M] [--json [--compact]] [--layout] [--width N] [--rows N]
    pte-lab example NAME OUT [--side N]
    pte-lab measure [--side N] [--legacy-python PATH] [--json FILE]
    pte-lab measure --bundle DIR [--side N]
    pte-lab legacy-env [--dir DIR]
    pte-lab replan IN OUT [--algorithm A] [--verify] [--data PTD]
    pte-lab sizes FILE [--method M] [--data PTD] [--json | --c-header | --example-runner DIR] [--verify] [--runs N]
                   [--target host|cortex-m] [--budget SIZE] [--region NAME=SIZE ...] [--max-input-bytes SIZE]
    pte-lab diff A B [--method M] [--json [--compact] | --html] [--sizes] [--fail-if-grows PCT [--budget-on KIND ...]]
                     [--allow-target-change] [--rows N]
    pte-lab what-if FILE --bound INPUT:AXIS=N [--method M] [--json] | --bound INPUT:AXIS --budget SIZE
    pte-lab what-if FILE --at-shape INPUT=D0,D1,... [--method M] [--json]
    (what-if FILE and sizes take --max-input-bytes SIZE: the most built at sizes the file declares, default 1 GiB)
    pte-lab what-if A.pte B.pte --values 64,128 --at 256 [--method M] [--json]
    pte-lab cache [info | clear]      (what sizes and what-if keep; both take --no-cache)

Bad input prints one line to stderr and exits 2; no traceback. ``diff --fail-if-grows`` exits 1
when a budget is exceeded (or a budgeted figure was not measured), and 4 (:data:`TARGET_CHANGED`) when the
deployment changed: a delegate's backend, target or memory mode, its bytes from flash to RAM, or a method
gone (unless ``--allow-target-change``); when both happen the status is 4 and stderr names both. Any other exception is a bug in pte_lab: one line says so and the exit
status is 3 (``--debug`` anywhere on the line, or ``PTE_LAB_DEBUG=1``, prints its traceback too).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import traceback
import warnings

from .errors import TARGET_CHANGED, PteLabError
from .views.json_text import json_text
from .progress import lines
from .shell_text import sh_word, sh_words
from .vocabulary import BUDGET_KINDS, DEFAULT_INPUT_LIMIT, INPUT_LIMIT_ENV, PLANNER_NAMES



#: the widest arena picture ``inspect --width`` draws (a wider one only costs memory: a terminal shows fewer)
MOST_COLUMNS = 10_000
#: the largest matrix side an example is exported at (``--side``): 16,384 float32s square are 1 GiB
MOST_SIDE = 16_384
#: the most arena pictures ``inspect`` draws per method (the largest arenas)
MAX_PICTURES = 32


def _inspect(args) -> int:
    from .format import identify
    from .model import open_data, open_pte
    from .views.json_doc import data_document, document
    from .views.text import arena_picture, data_text, method_text, pte_text

    if identify(args.file) == "data":
        if args.data or args.method or args.etrecord:
            raise PteLabError(f"{args.file} is a .ptd data file: --data, --etrecord and --method go with a program")
        d = open_data(args.file)
        if args.json:
            sys.stdout.write(json_text(data_document(d), args.compact))
            sys.stdout.write("\n")
        else:
            sys.stdout.write(data_text(d) + "\n")
        return 0
    pte = open_pte(args.file, data=args.data, etrecord=args.etrecord)
    names = list(pte.methods)
    if args.method is not None:
        if args.method not in pte.methods:
            raise PteLabError(f"{args.file}: no method {args.method!r} (methods: {', '.join(names)})")
        names = [args.method]
    if args.json:
        sys.stdout.write(json_text(document(pte, names), args.compact))
        sys.stdout.write("\n")
        return 0
    if args.layout:
        from .views.text import layout_text

        sys.stdout.write(layout_text(pte.layout(), pte.duplicate_blobs(), name=pte.path or "<bytes>", top=args.rows)
                         + "\n")
        return 0
    out = [pte_text(pte, methods_below=True)] + [f"  {f}" for f in pte.duplicate_blobs()]  # the blobs are read here, not in a repr
    for n in names:
        m = pte.methods[n]
        out.append("")
        out.append(method_text(m))
        arenas = m.arenas
        if len(arenas) > MAX_PICTURES:  # a file may list 100,000 arenas: picture the largest, in order
            arenas = sorted(sorted(arenas, key=lambda a: (-a.size, a.mem_id))[:MAX_PICTURES], key=lambda a: a.mem_id)
        for a in arenas:
            out.append("")
            out.append(arena_picture(m, a.mem_id, width=args.width, max_rows=args.rows))
        if len(arenas) < len(m.arenas):
            out.append("")
            out.append(f"({len(m.arenas) - len(arenas):,} more arenas not pictured: the {MAX_PICTURES} largest are; "
                       f"the table above lists every arena)")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _example(args) -> int:
    from . import examples
    from .examples import BUILDERS

    kwargs = {}
    if args.side is not None:
        if "side" not in inspect.signature(BUILDERS[args.name]).parameters:
            raise PteLabError(f"argument --side: the {args.name!r} example has no side "
                              f"(it goes with device and three_methods)")
        kwargs["side"] = args.side
    say = lines()
    say(f"exporting {args.name!r} with torch.export and ExecuTorch (importing them takes a few seconds)")
    path = examples.save(args.name, args.out, **kwargs)
    say("done")
    print(path)
    return 0


def _measure(args) -> int:
    from .experiments import device_placement as dp

    if args.bundle:
        from .experiments.bundle import write_bundle

        if args.json or args.legacy_python:
            raise PteLabError("argument --bundle: the bundle runs both loaders itself, without Python; "
                              "--json and --legacy-python go with a measurement here (run.sh takes --json)")
        bundle = write_bundle(args.bundle, side=args.side, progress=lines())
        print(bundle.summary())
        return 0

    legacy = args.legacy_python or dp.find_legacy_python()
    if legacy is None:
        print("pte-lab: note: no pre-fix runtime: run `pte-lab legacy-env` first (or pass --legacy-python) "
              "to measure the 'before' column", file=sys.stderr)
    report = dp.run(side=args.side, legacy_python=legacy, progress=lines())
    print(report.to_markdown())
    if args.json:
        report.to_json(args.json)
        print(f"\nJSON written to {args.json}")
    return 0


def _legacy_env(args) -> int:
    from .experiments import device_placement as dp

    py = dp.create_legacy_env(args.dir, progress=lambda line: print(line, flush=True))
    print(f"pre-fix runtime ready: {py}")
    return 0


def _replan(args) -> int:
    from .planning import replan, verify
    from .views.text import replan_text

    if os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        raise PteLabError(f"argument output: {args.output!r} is the input file; write the replanned program "
                          f"elsewhere")

    say = lines()
    say(f"planning every arena with {args.algorithm}")
    r = replan(args.input, algorithm=args.algorithm)
    say(f"writing {args.output} with ExecuTorch's serializer (importing it takes a few seconds)")
    r.write(args.output)
    say("written and read back: only offsets and arena sizes changed")
    print(f"replanned with {args.algorithm}: {args.input} -> {args.output}")
    print(replan_text(r))
    if r.original.expects_external_data:
        print(f"its external data is not rewritten: load {args.output} with the same .ptd"
              + (f" ({args.data})" if args.data else ""))
    if args.verify:
        results = verify(args.input, args.output, runs=args.runs, progress=say, data_path=args.data)
        for v in results:
            print(f"verify {v.method}: {'bit-identical' if v.identical else 'DIFFERENT: ' + v.detail} "
                  f"over {v.runs} calls in a row (state carried; dtype, shape and bytes compared)"
                  + (f"; outputs not finite: {v.not_finite}" if v.not_finite else ""))
        if not all(v.identical for v in results):
            return 1
    return 0


class _Parser(argparse.ArgumentParser):
    """Bad values are one line naming the argument; a missing or unknown one prints the usage too."""

    def error(self, message):
        if "unrecognized arguments" in message or "required" in message or "invalid choice" in message:
            super().error(message)
        self.exit(2, f"pte-lab: error: {message}\n")


class _Deprecated(argparse.Action):
    """An old flag kept as an alias of ``new``: it sets the same destination and says so, once, on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stderr.write(f"pte-lab: {option_string} is deprecated, use {self.new}\n")
        setattr(namespace, self.dest, True)


def _target_sizes(args, pte, s):
    """``sizes --target`` another than this host: the bare-metal runner (returns 0), or the text, --json or
    --c-header of the modelled pools with the board's totals (returns the sizes to check the budget with)."""
    from .views.run.target_pools import on_target, target_pools_dict, target_pools_text

    budget, regions = args.budget, tuple(args.region or ())
    board = on_target(s, pte, args.target)
    if args.example_runner is not None:
        from .views.run.bare_metal_runner import staging_bytes, write_bare_metal_runner

        for path in write_bare_metal_runner(s, pte, args.example_runner, args.target, args.method):
            print(path)
        staging = staging_bytes(m for n, m in s.methods.items() if not args.method or n in args.method)
        if staging:
            print(f"main.cpp: the planned inputs are copied (set_input) from one staging buffer of {staging:,} B, the "
                  f"runner's own, beyond the board's total (which has them in their planned buffers)")
        print("set EXECUTORCH_CORTEX_M_LIB_DIR to your ExecuTorch libraries for the target (or build with "
              "--compile-only without them), then")
        print(f"build: {sh_word(os.path.join(args.example_runner, 'build.sh'))}")
        return None
    if args.c_header:
        from .views.run.sizes import c_header

        sys.stdout.write(c_header(board, budget=budget, regions=regions))
    elif args.json:
        doc = board.to_dict(budget, regions) | {"target_pools": target_pools_dict(s, pte, args.target)["methods"]}
        sys.stdout.write(json_text(doc) + "\n")
    else:
        from .views.run.sizes import total_line

        text = target_pools_text(s, pte, args.target).split("\n")
        for m in board.methods.values():  # each method's board total after its pools
            at = text.index(f"method {m.method!r}") + 1
            while at < len(text) and text[at].startswith("  "):
                at += 1
            text[at:at] = ["  " + total_line(t) for t in m.totals().values()]
        sys.stdout.write("\n".join(text) + "\n")
    return board


def _sizes(args) -> int:
    from .runtime.sizing import sizes
    from .views.run.sizes import c_header, sizes_text

    # the program read here only where its model is needed before or beside the figures (a kept answer on this
    # host needs none: the figures hold what the views show)
    pte = None
    if args.method or args.target != "host":
        from .model import open_pte

        pte = open_pte(args.file)
    for name in args.method or []:
        if name not in pte.methods:
            raise PteLabError(f"{args.file}: no method {name!r} (methods: {', '.join(pte.methods)})")
    if args.example_runner is not None:  # said before the measurement, not after
        from .format.regular_file import check_writable
        from .views.run.bare_metal_runner import BARE_METAL_FILES
        from .views.run.example_runner import FILES

        if os.path.exists(args.example_runner) and not os.path.isdir(args.example_runner):
            raise PteLabError(f"--example-runner {args.example_runner}: exists and is not a folder")
        for name in BARE_METAL_FILES if args.target != "host" else FILES:
            check_writable(os.path.join(args.example_runner, name), "a file to write")
    verify = args.verify or args.example_runner is not None
    s = sizes(args.file, args.method, data_path=args.data, runs=args.runs, verify=verify, progress=lines(),
              max_input_bytes=args.max_input_bytes, cache=False if args.no_cache else None)
    board = s
    if args.target != "host":
        board = _target_sizes(args, pte, s)
        if board is None:
            return 0
    elif args.example_runner is not None:
        from .views.run.example_runner import left_out, write_example_runner

        for path in write_example_runner(s, args.example_runner, args.method):
            print(path)
        for name, why in left_out(s, args.method).items():
            print(f"not in the example: method {name!r}: {why}")
        run = [os.path.join(args.example_runner, "runner"), args.file, *(["--data", args.data] if args.data else [])]
        print(f"build: {sh_word(os.path.join(args.example_runner, 'build.sh'))}; run: {sh_words(run)}")
    elif args.json:
        sys.stdout.write(json_text(s.to_dict(args.budget, tuple(args.region or ()))))
        sys.stdout.write("\n")
    elif args.c_header:
        sys.stdout.write(c_header(s, budget=args.budget, regions=tuple(args.region or ())))
    elif args.target == "host":
        sys.stdout.write(sizes_text(s) + "\n")
    fits = board.fits(args.budget, tuple(args.region or ())) if (args.budget is not None or args.region) and s.methods else {}
    if fits and not args.json and not args.c_header:
        from .views.run.sizes import fits_lines

        sys.stdout.write("\n" + "\n".join(fits_lines(fits)) + "\n")
    if not s.methods:  # nothing sized: say why, per method, in one line
        by_reason: dict[str, list[str]] = {}
        for n, why in s.skipped.items():
            by_reason.setdefault(why, []).append(repr(n))
        # the file was read and what it declares was printed: a check that failed (1), not bad input (2)
        print(_one_line(PteLabError(f"pte-lab: error: {args.file}: no method could be sized: "
                                    + "; ".join(f"{', '.join(ns)}: {why}" for why, ns in by_reason.items())
                                    + f". What the file says is above; pte-lab inspect {sh_word(args.file)} shows "
                                      "the plan, where the file's bytes go and the delegates' blobs")),
              file=sys.stderr)
        return 1
    if verify and not s.proven:
        return 1
    if any(not f.fits for f in fits.values()):
        from .views.run.sizes import fits_lines

        for line in fits_lines({n: f for n, f in fits.items() if not f.fits}):
            print(f"pte-lab: {line}", file=sys.stderr)
        return 1
    return 0


def _cache(args) -> int:
    from .runtime import kept
    from .units import human_bytes

    if args.action == "clear":
        n, size = kept.clear()
        print(f"forgot {n:,} kept measurement{'s' if n != 1 else ''} ({human_bytes(size)}) in {kept.folder()}")
    else:
        n, size = kept.summary()
        off = f"; off now ({kept.NO_CACHE_ENV} is set)" if not kept.enabled() else ""
        print(f"{n:,} kept measurement{'s' if n != 1 else ''} ({human_bytes(size)}) in {kept.folder()}{off}")
    return 0


def _diff(args) -> int:
    from .format import identify
    from .model import open_pte
    from .model.diff import diff_programs
    from .views.diff import (budget_exit_status, budget_failure_lines, diff_document, diff_html, diff_text,
                             target_changes_line)

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
        from .runtime.sizing import sized_diff

        say = lines()
        d = sized_diff(d, a, b, progress=say, announce=say)
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
        from .views.html import html_page

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
    return budget_exit_status(d)


def _percentage(text: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (10 means 10%)") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a percentage of at least 0, not {text}")
    return v


def _whole(least: int | None, most: int | None = None):
    """A count (``--runs``, ``--at``...): exact, at least ``least``, at most ``most`` (where a larger one would
    only cost memory: a picture's columns, an example's matrix side), refused beyond what int64 holds."""
    from .units import parse_whole

    def parse(text: str) -> int:
        try:
            n = parse_whole(text, least)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if most is not None and n > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:,}, not {n:,}")
        return n

    return parse


def _wholes(text: str, sep: str | None, option: str, arg: str, example: str) -> tuple[int, ...]:
    """``text`` (part of ``option``'s argument ``arg``) split at ``sep`` (None: one number), each a whole number
    (:func:`pte_lab.units.parse_whole`); else one line naming the option and how to write it."""
    from .units import parse_whole, quoted

    try:
        return tuple(parse_whole(x) for x in (text.split(sep) if sep else [text]))
    except ValueError as exc:
        raise PteLabError(f"{option} {quoted(arg)}: write {example} ({exc})") from None


def _size(text: str) -> int:
    from .units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _region(text: str) -> tuple[str, int]:
    """``NAME=SIZE`` (``SRAM=256KiB``)."""
    name, eq, size = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=SIZE (SRAM=256KiB)")
    return name.strip(), _size(size)


def _max_input_bytes(parser, what: str) -> None:
    """``--max-input-bytes``: the most pte_lab builds at sizes the file declares (:func:`pte_lab.runtime.inputs.input_limit`)."""
    from .units import human_bytes

    parser.add_argument("--max-input-bytes", type=_size, metavar="SIZE",
                        help=f"the most bytes pte_lab builds at sizes the file declares: {what}; more is refused, "
                             f"nothing built, exit 2 (default {human_bytes(DEFAULT_INPUT_LIMIT)}, or ${INPUT_LIMIT_ENV}; "
                             f"never more than the memory free)")


def _new_file(text: str) -> str:
    """A file to write: its folder must exist, and the path names a regular file or nothing (checked before any
    work: a FIFO would block, a device or a link would be replaced)."""
    from .errors import NotARegularFileError
    from .format.regular_file import check_writable

    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file to write")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"the folder {folder!r} does not exist")
    try:
        check_writable(text, "a file to write")
    except NotARegularFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _executable(text: str) -> str:
    """An interpreter: an executable file that is a program (ELF) or a script (#!)."""
    magic = b""
    if os.path.isfile(text):  # first: opening a FIFO would block
        try:
            with open(text, "rb") as f:
                magic = f.read(4)
        except OSError:
            pass
    if not (os.path.isfile(text) and os.access(text, os.X_OK) and (magic == b"\x7fELF" or magic[:2] == b"#!")):
        raise argparse.ArgumentTypeError(f"{text!r} is not an executable Python interpreter")
    return text


def _examples() -> list[str]:
    from .examples import BUILDERS

    return sorted(BUILDERS)


def _examples_said() -> str:
    """One line per example: its name and the first sentence of its builder's docstring (``example --help``)."""
    from .examples import BUILDERS

    out = ["examples:"]
    for name in sorted(BUILDERS):
        para = " ".join((BUILDERS[name].__doc__ or "").strip().split("\n\n")[0].split())
        first = para.split(". ")[0].rstrip(".").replace("``", "")
        if len(first) > 100:  # the builder's options follow: the docstring says them
            first = first[:max(first.rfind(",", 0, 100), first.rfind(":", 0, 100), 40)] + " (...)"
        out.append(f"  {name:14s} {first}")
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pte-lab", description="The lab bench for ExecuTorch memory.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p.commands = sub.choices  # name -> its parser, for usage on an unknown option
    i = sub.add_parser("inspect", help="the memory story of a .pte (or .bpte): methods, arenas, tensors, "
                                       "load costs; or the named tensors of a .ptd")
    i.add_argument("file")
    i.add_argument("--data", help="the program's external data file (.ptd): are all its keys there?")
    i.add_argument("--etrecord", help="the ETRecord exported with the program (generate_etrecord=True): each "
                                      "tensor's FX node, module and source line")
    i.add_argument("--layout", action="store_true",
                   help="where the file's bytes go: regions, the largest blobs, identical blobs stored twice")
    i.add_argument("--sizes", action=_Deprecated, dest="layout",
                   new="--layout (the file's layout; run-time pools are pte-lab sizes)", help=argparse.SUPPRESS)
    i.add_argument("--method", "-m", help="only this method")
    i.add_argument("--json", action="store_true", help="emit the pte_lab.inspect JSON document (version 1)")
    i.add_argument("--compact", action="store_true", help="with --json: no indentation")
    i.add_argument("--width", type=_whole(8, MOST_COLUMNS), default=64,
                   help=f"columns of the arena pictures (default 64, at most {MOST_COLUMNS:,})")
    i.add_argument("--rows", type=_whole(3), default=48,
                   help="most rows per arena picture, or blobs with --layout (default 48)")
    i.set_defaults(func=_inspect)
    e = sub.add_parser("example", help="export one of pte_lab's example programs (needs torch + executorch)",
                       epilog=_examples_said(), formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("name", choices=_examples(), metavar="name", help=", ".join(_examples()))
    e.add_argument("out", type=_new_file)
    e.add_argument("--side", type=_whole(1, MOST_SIDE),
                   help="for 'device' and 'three_methods': matrix side (2048 plans 48 MiB on the device)")
    e.set_defaults(func=_example)
    m = sub.add_parser("measure", help="reproduce the loader fix's before/after device-memory measurements")
    m.add_argument("--side", type=_whole(1, MOST_SIDE), default=2048,
                   help=f"matrix side; 2048 plans 48 MiB on the device (at most {MOST_SIDE:,})")
    m.add_argument("--legacy-python", type=_executable,
                   help="interpreter with executorch 1.4.1 (default: the `legacy-env` one)")
    m.add_argument("--json", type=_new_file, help="also write the report as JSON to this file")
    m.add_argument("--bundle", metavar="DIR",
                   help="instead, write a folder that measures both loaders without Python (a native runner, "
                        "ExecuTorch's libraries, the program, run.sh): real CUDA memory where a driver is present, "
                        "the emulated device elsewhere")
    m.set_defaults(func=_measure)
    le = sub.add_parser("legacy-env", help="create a venv with executorch 1.4.1 (the pre-fix loader)")
    le.add_argument("--dir", help="where (default: the pte_lab cache)")
    le.set_defaults(func=_legacy_env)
    rp = sub.add_parser("replan", help="replan every arena, write a new .pte, optionally verify it")
    rp.add_argument("input")
    rp.add_argument("output", type=_new_file)
    rp.add_argument("--algorithm", "-a", default="best_fit", choices=sorted(PLANNER_NAMES))
    rp.add_argument("--verify", action="store_true",
                    help="run both with ExecuTorch, each method called --runs times in a row with its state "
                         "carried (an LLM: prefill, then decode steps); every output must be bit-identical")
    rp.add_argument("--runs", type=_whole(1), default=4, help="calls per method when verifying (default 4)")
    rp.add_argument("--data", help="the .ptd the program takes external data from (for --verify)")
    rp.set_defaults(func=_replan)
    sz = sub.add_parser("sizes", help="every byte each method needs at run time: pools for a bare-metal "
                                      "build, and what lies beyond the plan (loads and runs the methods)")
    sz.add_argument("file", help="the program (.pte) to size")
    sz.add_argument("--method", "-m", action="append", help="only this method (repeatable)")
    sz.add_argument("--data", help="the program's external data file (.ptd)")
    out = sz.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="emit the pte_lab.sizes JSON document (version 1)")
    out.add_argument("--c-header", action="store_true",
                     help="emit a C/C++ header: pools, planned buffers, inputs and outputs, heap, libraries")
    out.add_argument("--example-runner", metavar="DIR",
                     help="write DIR/pools.h, DIR/main.cpp and DIR/build.sh: a C++ runner built against the installed "
                          "executorch wheel, with static pools of exactly the verified sizes (implies --verify)")
    sz.add_argument("--verify", action="store_true",
                    help="run each method again with pools of exactly these sizes, and with a method pool one "
                         "byte smaller (which must be refused); exit 1 if a figure is not tight")
    sz.add_argument("--runs", type=_whole(1, 100), default=2, help="runs per method (default 2, at most 100)")
    sz.add_argument("--target", choices=("host", "cortex-m"), default="host",
                    help="the pools for this target: host (this machine, measured; the default) or cortex-m "
                         "(32-bit Arm, Cortex-M55: the method pool modelled with its ABI, checked against this host)")
    sz.add_argument("--budget", type=_size, metavar="SIZE",
                    help="the board's RAM (262144, 256KiB, 1.5MiB; or decimal: 256kB): each method's bare-metal "
                         "total (planned "
                         "buffers, pools, the program's bytes where they must be in RAM) is checked against it; "
                         "exit 1 when one does not fit")
    sz.add_argument("--region", type=_region, action="append", metavar="NAME=SIZE",
                    help="a RAM region of the board (repeatable): the parts of each method's bare-metal total are "
                         "placed in them, largest first; exit 1 when one does not fit")
    sz.add_argument("--no-cache", action="store_true",
                    help="measure afresh and keep nothing (by default a program sized before, the same bytes with "
                         "the same pte_lab, ExecuTorch and options, gives its kept figures at once and says when "
                         "they were measured; pte-lab cache clear forgets them all)")
    _max_input_bytes(sz, "the runner's inputs (each at the shape the file declares, a dynamic one at its bound) "
                         "and the buffers of its unplanned outputs")
    sz.set_defaults(func=_sizes)
    df = sub.add_parser("diff", help="what changed in memory between two programs: arenas, tensors, the file, "
                                     "loaders; with --fail-if-grows, a memory budget for CI")
    df.add_argument("before", help="the first program (.pte or .bpte)")
    df.add_argument("after", help="the second program (.pte or .bpte)")
    df.add_argument("--method", "-m", help="only this method")
    df.add_argument("--json", action="store_true", help="emit the pte_lab.diff JSON document (version 2)")
    df.add_argument("--compact", action="store_true", help="with --json: no indentation")
    df.add_argument("--html", action="store_true", help="print the report as an HTML page (a notebook's view)")
    df.add_argument("--sizes", action="store_true",
                    help="also size both programs (pte-lab sizes: loads and runs each method) and compare the parts")
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
    df.add_argument("--rows", type=_whole(1), default=12, help="most tensors listed per table (default 12)")
    df.set_defaults(func=_diff)
    wi = sub.add_parser("what-if", help="a dynamic method as if exported at another bound, or the largest bound "
                                        "under a budget (runs the method at a few small sizes)")
    wi.add_argument("file", help="the program (.pte) with a dynamic input")
    wi.add_argument("other", nargs="?", help="a second export of the same model at another value of one "
                                             "parameter (with --values and --at)")
    wi.add_argument("--values", help="with two files: the parameter's value in each, e.g. 64,128")
    wi.add_argument("--at", type=_whole(None), help="with two files: the value to predict at")
    wi.add_argument("--bound", "-b", action="append", metavar="INPUT:AXIS[=N]",
                    help="a dynamic dim and the bound to predict at (repeatable); with --budget, the dim to search")
    wi.add_argument("--at-shape", action="append", metavar="INPUT=D0,D1,...",
                    help="instead of --bound: run the method once with input INPUT of this shape (repeatable): the "
                         "bytes each planned tensor uses there, what a plan for that shape needs, and the gap to "
                         "the plan at the bound")
    wi.add_argument("--method", "-m", help="the method (default: the one with a dynamic input)")
    wi.add_argument("--budget", help="the largest bound whose planned bytes fit this (bytes; KiB, MiB, GiB; or "
                                     "decimal kB, MB, GB: 300MB)")
    wi.add_argument("--json", action="store_true", help="emit the prediction as JSON")
    wi.add_argument("--no-cache", action="store_true",
                    help="run the method again (by default the shapes learnt from runs of these same bytes, with the "
                         "same pte_lab and ExecuTorch, are kept and used at once, said in the output)")
    _max_input_bytes(wi, "one run's inputs (at the small sizes sampled, or --at-shape's) and ETDump's buffer")
    wi.set_defaults(func=_what_if)
    ca = sub.add_parser("cache", help="the measurements pte_lab keeps (sizes, what-if): where, how many, clear them")
    ca.add_argument("action", choices=("info", "clear"), nargs="?", default="info",
                    help="info (the default): where they are kept and how much; clear: forget them all")
    ca.set_defaults(func=_cache)
    return p


def _at_shape(args) -> dict:
    """``--at-shape 0=1,800,258`` -> {(0, 1): 800}: the axes whose size differs from the exported shape."""
    from .planning.what_if import _method, _program

    wanted = {}
    for a in args.at_shape:
        pos, _, dims = a.partition("=")
        example = "INPUT=D0,D1,..., e.g. 0=1,800,258"
        (pos,) = _wholes(pos, None, "--at-shape", a, example)
        wanted[pos] = _wholes(dims, ",", "--at-shape", a, example)
    by_pos = {s.position: s for s in _method(_program(args.file)[0], args.method).inputs}
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


def _what_if(args) -> int:
    from .planning.what_if import largest_bound, usage_at, what_if
    from .units import quoted

    cache = False if args.no_cache else None
    if args.other is not None or args.values is not None or args.at is not None:
        if args.at_shape:
            raise PteLabError("--at-shape runs one program at one shape: give it without a second file")
        return _what_if_from(args)
    if args.at_shape:
        if args.bound or args.budget is not None:
            raise PteLabError("--at-shape runs the method at one shape: give it without --bound or --budget")
        r = usage_at(args.file, _at_shape(args), method=args.method, max_input_bytes=args.max_input_bytes)
        sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
        return 0
    if not args.bound and args.budget is not None:  # the method's one dynamic dim (several: listed)
        r = largest_bound(args.file, args.budget, None, method=args.method, max_input_bytes=args.max_input_bytes,
                          cache=cache, progress=lines())
        sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
        return 0
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
                          max_input_bytes=args.max_input_bytes, cache=cache, progress=lines())
    else:
        if any(n is None for n in bounds.values()):
            raise PteLabError("--bound INPUT:AXIS=N: the bound N to predict at is missing (or give --budget)")
        r = what_if(args.file, bounds, method=args.method, max_input_bytes=args.max_input_bytes, cache=cache,
                    progress=lines())
    if args.json:
        sys.stdout.write(json_text(r.to_dict()) + "\n")
    else:
        sys.stdout.write(str(r) + "\n")
    return 0


def _what_if_from(args) -> int:
    from .planning.what_if_from import what_if_from

    if args.other is None or args.values is None or args.at is None or args.bound or args.budget:
        raise PteLabError("what-if A.pte B.pte takes --values A,B and --at N (not --bound or --budget)")
    values = _wholes(args.values, ",", "--values", args.values, "the two exports' values as A,B, e.g. 64,128")
    r = what_if_from(args.file, args.other, values, args.at, method=args.method)
    sys.stdout.write((json_text(r.to_dict()) if args.json else str(r)) + "\n")
    return 0


#: the longest error line the CLI prints: a name from a file can be any length, a line should be read
MOST_ERROR_CHARACTERS = 2_000


def _one_line(exc: BaseException) -> str:
    """A PteLabError as one line (its first), every name from the file in it shown escaped, its middle left out
    past :data:`MOST_ERROR_CHARACTERS`."""
    from .printable import printable

    text = str(exc).strip()
    line = printable(text.split("\n")[0] if text else type(exc).__name__)
    if len(line) <= MOST_ERROR_CHARACTERS:
        return line
    half = MOST_ERROR_CHARACTERS // 2
    return f"{line[:half]} ...({len(line) - 2 * half:,} characters left out)... {line[-half:]}"


class _Printable:
    """A text stream whose writes go through :func:`pte_lab.printable.printable_text`: a name from the file
    never writes a control character or an escape sequence to the terminal."""

    def __init__(self, stream):
        from .printable import printable_text

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

    0 ok, 1 a check failed (verification, a budget, no method could be sized), 2 bad input (one line naming it), 3 a bug in
    pte_lab (any exception that is not a :class:`PteLabError`: one line saying so; ``--debug`` or
    ``PTE_LAB_DEBUG=1`` shows the traceback too).
    """
    from .errors import BUG_EXIT_CODE, bug_line

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
        print(f"pte-lab: error: {_one_line(exc) if isinstance(exc, PteLabError) else _os_line(exc)}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - anything else is a bug in pte_lab: one line says so
        from .printable import printable

        if debug:
            traceback.print_exc(file=sys.stderr)
        print(f"pte-lab: error: {printable(bug_line(exc))}", file=sys.stderr)
        return BUG_EXIT_CODE
    finally:
        sys.stdout, sys.stderr = out, err


def _os_line(exc: OSError) -> str:
    """A file the system refused (missing, unreadable, a full disk): its type, what and where, one line."""
    from .printable import printable

    text = str(exc).strip()
    return printable(f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": "))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
