"""``pte-lab example``: export one of pte_lab's example programs (torch.export and ExecuTorch)."""

from __future__ import annotations

import argparse
import inspect
import shutil

from .. import examples, shipped
from ..errors import PteLabError
from ..examples import BUILDERS
from ..progress import lines
from .common import MOST_SIDE, new_file, whole


def register(subparsers) -> None:
    e = subparsers.add_parser("example", help="export one of pte_lab's example programs (needs torch + "
                                              "executorch)",
                              epilog=_examples_said(), formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("name", choices=_examples(), metavar="name", help=", ".join(_examples()))
    e.add_argument("out", type=new_file, help="the .pte to write (its folder must exist)")
    e.add_argument("--side", type=whole(1, MOST_SIDE),
                   help="for 'device' and 'three_methods': matrix side (2048 plans 48 MiB on the device)")
    e.set_defaults(func=run)


def run(args) -> int:
    kwargs = {}
    if args.side is not None:
        if "side" not in inspect.signature(BUILDERS[args.name]).parameters:
            raise PteLabError(f"argument --side: the {args.name!r} example has no side "
                              f"(it goes with device and three_methods)")
        kwargs["side"] = args.side
    say = lines()
    if not shipped.can_export():  # the light install: the copies pte_lab ships, or what to install
        if args.name in shipped.SHIPPED and {**shipped.SHIPPED[args.name], **kwargs} == shipped.SHIPPED[args.name]:
            shutil.copyfile(shipped.shipped_path(args.name), args.out)
            say(f"torch and executorch are not installed: writing the copy of {args.name!r} pte_lab ships "
                f"(exported by executorch 1.5.1 from the same builder)")
            print(args.out)
            return 0
        ready = ", ".join(f"{n}" + "".join(f" --{k} {v}" for k, v in a.items()) for n, a in shipped.SHIPPED.items())
        raise PteLabError(f"exporting {args.name!r} needs torch and executorch (the lab extra: pip install -e \".[lab]\" in a clone); "
                          f"without them pte_lab writes the programs it ships: {ready}")
    from .. import examples_kept  # here: the kept exports' keys read importlib.metadata, which --help never needs

    if examples_kept.is_kept(args.name, kwargs):
        say(f"copying {args.name!r} as exported before on this machine (pte-lab cache counts the exports)")
    else:
        say(f"exporting {args.name!r} with torch.export and ExecuTorch (importing them takes a few seconds)")
    path = examples.save(args.name, args.out, **kwargs)
    say("done")
    print(path)
    return 0


def _examples() -> list[str]:
    return sorted(BUILDERS)


def _examples_said() -> str:
    """One line per example: its name and the first sentence of its builder's docstring (``example --help``)."""
    out = ["examples:"]
    for name in sorted(BUILDERS):
        para = " ".join((BUILDERS[name].__doc__ or "").strip().split("\n\n")[0].split())
        first = para.split(". ")[0].rstrip(".").replace("``", "")
        if len(first) > 100:  # the builder's options follow: the docstring says them
            first = first[:max(first.rfind(",", 0, 100), first.rfind(":", 0, 100), 40)] + " (...)"
        out.append(f"  {name:14s} {first}")
    return "\n".join(out)
