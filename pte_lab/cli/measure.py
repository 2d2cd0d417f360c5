"""``pte-lab measure``: the loader fix's before/after device-memory measurements, here or as a bundle that runs
without Python."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import PteLabError
from ..progress import lines
from .common import MOST_SIDE, new_file, whole


def register(subparsers) -> None:
    m = subparsers.add_parser("measure", help="reproduce the loader fix's before/after device-memory measurements")
    m.add_argument("--side", type=whole(1, MOST_SIDE), default=2048,
                   help=f"matrix side; 2048 plans 48 MiB on the device (at most {MOST_SIDE:,})")
    m.add_argument("--legacy-python", type=_executable,
                   help="interpreter with executorch 1.4.1 (default: the `legacy-env` one)")
    m.add_argument("--json", type=new_file, help="also write the report as JSON to this file")
    m.add_argument("--bundle", metavar="DIR",
                   help="instead, write a folder that measures both loaders without Python (a native runner, "
                        "ExecuTorch's libraries, the program, run.sh): real CUDA memory where a driver is present, "
                        "the emulated device elsewhere")
    m.set_defaults(func=run)


def run(args) -> int:
    from ..experiments import device_placement as dp

    if args.bundle:
        from ..experiments.bundle import write_bundle

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
