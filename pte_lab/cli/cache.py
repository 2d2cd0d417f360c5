"""``pte-lab cache``: what pte_lab keeps (the measurements ``sizes`` and ``what-if`` keep; the example programs
``example`` and the notebooks export; the native parts it compiles on first use): where, how many; forget them."""

from __future__ import annotations

from ..units import human_bytes


def register(subparsers) -> None:
    ca = subparsers.add_parser("cache", help="what pte_lab keeps (measurements of sizes and what-if, example "
                                             "exports, native builds): where, how many, clear them")
    ca.add_argument("action", choices=("info", "clear"), nargs="?", default="info",
                    help="info (the default): where they are kept and how much; clear: forget the measurements")
    ca.add_argument("--exports", action="store_true",
                    help="with clear: forget the kept example exports too (each costs seconds to minutes to export "
                         "again; the LLMs the longest)")
    ca.add_argument("--native", action="store_true",
                    help="with clear: forget the native builds too (the helper, the allocation counter, the probes "
                         "and the runner pte_lab compiles against this ExecuTorch install; the next use builds what "
                         "it needs again, seconds each)")
    ca.set_defaults(func=run)


def _counted(n: int, size: int, what: str) -> str:
    return f"{n:,} kept {what}{'s' if n != 1 else ''} ({human_bytes(size)})"


def run(args) -> int:
    from .. import examples_kept
    from ..runtime import kept, native

    if args.action == "clear":
        print(f"forgot {_counted(*kept.clear(), 'measurement')} in {kept.folder()}")
        if args.exports:
            print(f"forgot {_counted(*examples_kept.clear(), 'example export')} in {examples_kept.folder()}")
        if args.native:
            print(f"forgot {_counted(*native.clear_builds(), 'native build')} in {native.builds_folder()}")
    else:
        off = f"; off now ({kept.NO_CACHE_ENV} is set)" if not kept.enabled() else ""
        print(f"{_counted(*kept.summary(), 'measurement')} in {kept.folder()}{off}")
        print(f"{_counted(*examples_kept.summary(), 'example export')} in {examples_kept.folder()} (cleared only with "
              f"clear --exports)")
        print(f"{_counted(*native.builds(), 'native build')} in {native.builds_folder()} (compiled here on first "
              f"use, once per ExecuTorch install and cache folder; cleared only with clear --native)")
    return 0
