"""``pte-lab cache``: the measurements ``sizes`` and ``what-if`` keep: where, how many; forget them."""

from __future__ import annotations

from ..units import human_bytes


def register(subparsers) -> None:
    ca = subparsers.add_parser("cache", help="the measurements pte_lab keeps (sizes, what-if): where, how many, "
                                             "clear them")
    ca.add_argument("action", choices=("info", "clear"), nargs="?", default="info",
                    help="info (the default): where they are kept and how much; clear: forget them all")
    ca.set_defaults(func=run)


def run(args) -> int:
    from ..runtime import kept

    if args.action == "clear":
        n, size = kept.clear()
        print(f"forgot {n:,} kept measurement{'s' if n != 1 else ''} ({human_bytes(size)}) in {kept.folder()}")
    else:
        n, size = kept.summary()
        off = f"; off now ({kept.NO_CACHE_ENV} is set)" if not kept.enabled() else ""
        print(f"{n:,} kept measurement{'s' if n != 1 else ''} ({human_bytes(size)}) in {kept.folder()}{off}")
    return 0
