"""``pte-lab inspect``: the memory story of a program (methods, arenas, tensors, load costs), its file's layout,
the named tensors of a ``.ptd``, or what a ``.ptn`` package holds (methods, tensors at their bounds, constants,
state; no plan)."""

from __future__ import annotations

import argparse
import sys

from ..errors import NotAProgramError, PteLabError
from ..views.json_text import json_text
from .common import Deprecated, whole

#: the widest arena picture ``inspect --width`` draws (a wider one only costs memory: a terminal shows fewer)
MOST_COLUMNS = 10_000
#: the most arena pictures ``inspect`` draws per method (the largest arenas)
MAX_PICTURES = 32


def register(subparsers) -> None:
    i = subparsers.add_parser("inspect", help="the memory story of a .pte (or .bpte): methods, arenas, "
                                              "tensors, load costs; the named tensors of a .ptd; what a .ptn "
                                              "package holds")
    i.add_argument("file", help="the program (.pte, .bpte), data file (.ptd) or native package (.ptn) to read")
    i.add_argument("--data", help="the program's external data file (.ptd): are all its keys there?")
    i.add_argument("--etrecord", help="the ETRecord exported with the program (generate_etrecord=True): each "
                                      "tensor's FX node, module and source line")
    i.add_argument("--layout", action="store_true",
                   help="where the file's bytes go: regions, the largest blobs, identical blobs stored twice")
    i.add_argument("--sizes", action=Deprecated, dest="layout",
                   new="--layout (the file's layout; run-time pools are pte-lab sizes)", help=argparse.SUPPRESS)
    i.add_argument("--method", "-m", help="only this method")
    i.add_argument("--json", action="store_true", help="emit the pte_lab.inspect JSON document (version 1)")
    i.add_argument("--compact", action="store_true", help="with --json: no indentation")
    i.add_argument("--width", type=whole(8, MOST_COLUMNS), default=64,
                   help=f"columns of the arena pictures (default 64, at most {MOST_COLUMNS:,})")
    i.add_argument("--rows", type=whole(3), default=48,
                   help="most rows per arena picture, or blobs with --layout (default 48)")
    i.set_defaults(func=run)


def _package(args) -> int:
    """A .ptn package (or a bare program.ptg): what it holds; it has no plan to picture or lay out."""
    from ..model import open_package
    from ..views.package import package_document, package_text

    if args.data or args.etrecord or args.layout:
        raise PteLabError(f"{args.file} is a .ptn package: --data, --etrecord and --layout go with a .pte program "
                          f"(the package holds its own constants and no plan)")
    p = open_package(args.file)
    names = _chosen(args, list(p.methods))
    if args.json:
        sys.stdout.write(json_text(package_document(p, names), args.compact) + "\n")
    else:
        sys.stdout.write(package_text(p, names) + "\n")
    return 0


def _chosen(args, names: list[str]) -> list[str]:
    """The methods to show: ``--method``'s one (refused in one line, naming the others, where the file has no
    such method), else every method in the file's order."""
    if args.method is None:
        return names
    if args.method not in names:
        raise PteLabError(f"{args.file}: no method {args.method!r} (methods: {', '.join(names)})")
    return [args.method]


def run(args) -> int:
    from ..format import identify
    from ..format.mixups import MixupKind
    from ..vocabulary import FileKind
    from ..model import open_data, open_pte
    from ..views.json_doc import data_document, document
    from ..views.text import arena_picture, data_text, method_text, pte_text

    if identify(args.file) is FileKind.DATA:
        if args.data or args.method or args.etrecord:
            raise PteLabError(f"{args.file} is a .ptd data file: --data, --etrecord and --method go with a program")
        d = open_data(args.file)
        if args.json:
            sys.stdout.write(json_text(data_document(d), args.compact))
            sys.stdout.write("\n")
        else:
            sys.stdout.write(data_text(d) + "\n")
        return 0
    try:
        pte = open_pte(args.file, data=args.data, etrecord=args.etrecord)
    except NotAProgramError as exc:
        if exc.kind not in (MixupKind.PTN, MixupKind.PTG):
            raise
        return _package(args)
    names = _chosen(args, list(pte.methods))
    if args.json:
        sys.stdout.write(json_text(document(pte, names), args.compact))
        sys.stdout.write("\n")
        return 0
    if args.layout:
        from ..views.text import layout_text

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
