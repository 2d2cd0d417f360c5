"""Loop extension of lifetimes: pte_lab's range-maximum fixed point against the definition, side by side.

    python benchmarks/bench_loops.py [--sizes 1000 2000 4000 8000 50000]

For n values and n backward jumps (each value alive before the loops start and used inside them,
the shape issue 15 reported), the time of ``_extend_over_loops`` and of repeating every loop over every
value until nothing moves (skipped above 8,000: it grows with n squared).
"""

from __future__ import annotations

import argparse
import time


def shape(n):
    first = {v: v % 97 for v in range(n)}
    last = {v: first[v] + 50 for v in range(n)}
    jumps = [(200 + k, 60 + k % 100) for k in range(n)]
    return first, last, jumps


def naive(first, last, jumps):
    changed = True
    while changed:
        changed = False
        for src, dst in jumps:
            for v, f in first.items():
                if f < dst <= last[v] < src:
                    last[v], changed = src, True


def main() -> int:
    from pte_lab.model.lifetimes import _extend_over_loops

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 50000])
    args = ap.parse_args()
    print(f"{'values = loops':>14s} {'pte_lab':>10s} {'definition':>12s}")
    for n in args.sizes:
        f, last, j = shape(n)
        t = time.perf_counter()
        _extend_over_loops(f, last, j)
        ours = time.perf_counter() - t
        theirs = "skipped"
        if n <= 8000:
            f, last2, j = shape(n)
            t = time.perf_counter()
            naive(f, last2, j)
            theirs = f"{time.perf_counter() - t:9.2f} s"
            assert last2 == last
        print(f"{n:14,d} {ours:8.3f} s {theirs:>12s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
