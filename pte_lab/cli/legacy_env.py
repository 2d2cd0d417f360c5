"""``pte-lab legacy-env``: a virtual environment with executorch 1.4.1, the loader before the fix (``measure``'s
"before" column)."""

from __future__ import annotations


def register(subparsers) -> None:
    le = subparsers.add_parser("legacy-env", help="create a venv with executorch 1.4.1 (the pre-fix loader)")
    le.add_argument("--dir", help="where (default: the pte_lab cache)")
    le.set_defaults(func=run)


def run(args) -> int:
    from ..experiments import device_placement as dp

    py = dp.create_legacy_env(args.dir, progress=lambda line: print(line, flush=True))
    print(f"pre-fix runtime ready: {py}")
    return 0
