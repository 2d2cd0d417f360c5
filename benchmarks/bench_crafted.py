"""Crafted plans of up to 1 MB, analysed in full: the target is under 2 s each.

    python benchmarks/bench_crafted.py [--repeat 3] [--only NAME] [--profile NAME]

Each plan is built with tests/crafting.py, then opened and analysed as
benchmarks/bench_analysis.py does (arenas, tensor table, findings, the three load
costs, the JSON document). Prints CPU seconds of this process (best of --repeat;
the target is CPU time, as a loaded machine inflates wall time), wall seconds
(best of --repeat), the ratio of CPU time to the 2 s target, and the outcome
(analysed, or the PteFormatError a file is refused with).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.crafting import build_program  # noqa: E402

TARGET_S = 2.0


def one_call_many_values(n):
    """The issue's shape: n values sharing one tensor table, all named by one KernelCall."""
    shared = ("tensor", 1, 0, 4)
    values = [("tensor", 1, 16, 4)] + [shared] * n + [("tensor", 1, 32, 4)]
    return build_program(values, [list(range(1, n + 1)) + [n + 1, n + 1]])


def values_read_one_per_call(n):
    """n values sharing one tensor table, one written, then each read by its own call (candidate views)."""
    shared = ("tensor", 1, 0, 4)
    values = [("tensor", 1, 16, 4)] + [shared] * n + [("tensor", 1, 32, 4)]
    return build_program(values, [[0, 1, 1]] + [[v, n + 1, n + 1] for v in range(2, n + 1)])


def long_list_named_often(items, calls):
    """One TensorList of ``items`` values, named by ``calls`` calls that share one Instruction table."""
    shared = ("tensor", 1, 0, 4)
    values = [("tensor", 1, 16, 4), shared, ("list", [1] * items), ("tensor", 1, 32, 4)]
    ins = [2, 3, 3]
    return build_program(values, [[0, 1, 1]] + [ins] * calls)


def many_calls_many_args(calls, args):
    """``calls`` calls sharing one Instruction table with ``args`` arguments each."""
    values = [("tensor", 1, 16 * i, 4) for i in range(args)]
    ins = list(range(args - 1)) + [args - 1, args - 1]
    return build_program(values, [ins] * calls, sizes=(0, 16 * args))


def many_distinct_calls(calls):
    """``calls`` distinct calls, each reading the previous output: a long chain of activations."""
    values = [("tensor", 1, 16 * (i % 2), 4) for i in range(calls + 1)]
    return build_program(values, [[i, i + 1, i + 1] for i in range(calls)])


def many_views_chained(n):
    """n views of one base, each read once after the base is written (every one shares its bytes)."""
    values = [("tensor", 1, 16, 4)] + [("tensor", 1, 0, 4) for _ in range(n + 1)] + [("tensor", 1, 32, 4)]
    return build_program(values, [[0, 1, 1]] + [[v, n + 2, n + 2] for v in range(2, n + 2)])


def bytes_or_time_only(k, m):
    """k tensors sharing bytes one after another (one tensor table, each written by its own call) and m alive
    together over the whole method in bytes of their own: k*k/2 pairs overlap in bytes only, m*(m/2 + k) in
    time only, none in both (no conflict)."""
    shared = ("tensor", 1, 0, 4)
    values = [("tensor", 1, 16, 4)] + [shared] * k + [("tensor", 1, 32 + 16 * j, 4) for j in range(m)]
    together = [v for j in range(m) for v in (k + 1 + j, k + 1 + j)]  # one call writes them, the last reads them
    return build_program(values, [together] + [[v, v] for v in range(1, k + 1)] + [together],
                         sizes=(0, 32 + 16 * m))


def many_arenas(n):
    """n planned arenas (8 bytes each in non_const_buffer_sizes), three tensors in the first two."""
    values = [("tensor", 1, 0, 4), ("tensor", 2, 0, 4), ("tensor", 1, 16, 4)]
    return build_program(values, [[0, 1, 1], [1, 2, 2]], sizes=(0,) + (64,) * n)


CASES = {
    "one call, 20,000 values (issue)": lambda: one_call_many_values(20_000),
    "one call, values to 1 MB": lambda: one_call_many_values(125_000),
    "values read one per call": lambda: values_read_one_per_call(20_000),
    "long list named often": lambda: long_list_named_often(60_000, 100_000),
    "many calls x many args": lambda: many_calls_many_args(100_000, 90),
    "many calls x args, to the budget": lambda: many_calls_many_args(170_000, 36),
    "distinct calls to 1 MB": lambda: many_distinct_calls(11_000),
    "views of one base": lambda: many_views_chained(14_000),
    "bytes only or time only": lambda: bytes_or_time_only(13_500, 7_500),
    "arenas to 1 MB": lambda: many_arenas(124_900),
}


def analyse(source):
    """What a user's first look computes: open, arenas, tensors, findings, every loader's load cost, the JSON
    document (bench_open.py times the same on real programs)."""
    import pte_lab
    from pte_lab.model.load_cost import LOADERS

    pte = pte_lab.open(source)
    for m in pte.methods.values():
        m.arenas, m.tensors, m.findings()
    for loader in LOADERS:
        pte.load_cost(loader)
    pte.to_dict()
    return pte


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--profile")
    args = ap.parse_args()
    import pte_lab
    from pte_lab import PteFormatError

    print(f"{'plan':34} {'bytes':>9} {'cpu s':>7} {'wall s':>7} {'/ 2 s':>6}  outcome")
    worst = 0.0
    for name, make in CASES.items():
        if args.only and args.only not in name:
            continue
        data = make()
        if args.profile and args.profile in name:
            import cProfile
            import pstats

            cProfile.runctx("try:\n analyse(data)\nexcept PteFormatError: pass", globals(),
                            {"analyse": analyse, "data": data, "PteFormatError": PteFormatError}, "/tmp/crafted.prof")
            pstats.Stats("/tmp/crafted.prof").sort_stats("cumulative").print_stats(25)
        best = wall = float("inf")
        outcome = ""
        for _ in range(args.repeat):
            c, t = time.process_time(), time.perf_counter()
            try:
                analyse(data)
                outcome = "analysed"
            except PteFormatError as exc:
                outcome = f"PteFormatError: {str(exc)[:70]}"
            best = min(best, time.process_time() - c)
            wall = min(wall, time.perf_counter() - t)
        worst = max(worst, best)
        print(f"{name:34} {len(data):9,} {best:7.3f} {wall:7.3f} {best / TARGET_S:6.2f}  {outcome}")
    print(f"worst {worst:.3f} CPU s = {worst / TARGET_S:.2f} of the 2 s target (pte_lab from {pte_lab.__file__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
