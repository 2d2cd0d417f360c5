"""``pte-lab cache``: what pte_lab keeps (the measurements ``sizes`` and ``what-if`` keep; the example programs
``example`` and the notebooks export): where, how many; forget them."""

from __future__ import annotations

from ..units import human_bytes


def register(subparsers) -> None:
    ca = subparsers.add_parser("cache", help="what pte_lab keeps (measurements of sizes and what-if, example "
                                             "exports): where, how many, clear them")
    ca.add_argument("action", choices=("info", "clear"), nargs="?", default="info",
                    help="info (the default): where they are kept and how much; clear: forget the measurements")
    ca.add_argument("--exports", action="store_true",
                    help="with clear: forget the kept example exports too (each costs seconds to minutes to export "
                         "again; the LLMs the longest)")
    ca.set_defaults(func=run)


def _counted(n: int, size: int, what: str) -> str:
    return f"{n:,} kept {what}{'s' if n != 1 else ''} ({human_bytes(size)})"


def run(args) -> int:
    from .. import examples_kept
    from ..runtime import kept

    if args.action == "clear":
        print(f"forgot {_counted(*kept.clear(), 'measurement')} in {kept.folder()}")
        if args.exports:
            print(f"forgot {_counted(*examples_kept.clear(), 'example export')} in {examples_kept.folder()}")
    else:
        off = f"; off now ({kept.NO_CACHE_ENV} is set)" if not kept.enabled() else ""
        print(f"{_counted(*kept.summary(), 'measurement')} in {kept.folder()}{off}")
        print(f"{_counted(*examples_kept.summary(), 'example export')} in {examples_kept.folder()} (cleared only with "
              f"clear --exports)")
    return 0
