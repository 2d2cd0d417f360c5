"""Crafted plans of up to 1 MB, analysed in full: the target is under 2 s each.

    python benchmarks/bench_crafted.py [--repeat 3] [--only NAME] [--profile NAME]
    python benchmarks/bench_crafted.py --scaling [--only NAME]     # issue 29's generators, two sizes
    python benchmarks/bench_crafted.py --paths [--only NAME]       # ... near 1 MB, every public path
    python benchmarks/bench_crafted.py --instances [--code DIR]    # issue 29's instances (DIR: another pte_lab's root)

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

from tests.crafting import build_program

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


#: issue 29's generators near 1 MB: name -> n
NEAR_1MB = {"many arenas": 16_000, "long jump chain": 10_000, "one table named often": 30_000,
            "ptd entry named often": 250_000, "many Ethos-U descriptors": 25_000, "long offset vector": 110_000,
            "many suites": 7_500, "one suite named often": 250_000}


def scaling(only=None) -> int:
    """Each generator of tests/crafting.py SCALING at n and 2n: Python lines executed and traced peak per path
    (what tests/test_scaling.py asserts), and the worst ratio."""
    import tempfile

    from tests.crafting import SCALING
    from tests.test_scaling import _paths, _work

    from pte_lab.model import occupancy

    occupancy._GRID_CELLS = 1 << 10  # as the test: past the grid's cap
    print(f"{'generator':26} {'n':>6} {'bytes':>9} {'2n bytes':>9}  worst path (lines ratio, peak ratio)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, n) in SCALING.items():
            if only and only not in name:
                continue
            small, large = make(n), make(2 * n)
            ps, pl = _paths(name, small, Path(tmp) / "s"), _paths(name, large, Path(tmp) / "l")
            worst = (0.0, 0.0, "")
            for path in ps:
                (l1, m1), (l2, m2) = _work(ps[path]), _work(pl[path])
                worst = max(worst, (l2 / l1, m2 / m1, path))
            print(f"{name:26} {n:6,} {len(small):9,} {len(large):9,}  {worst[2]} ({worst[0]:.2f}x, {worst[1]:.2f}x)")
    return 0


def paths_near_1mb(only=None) -> int:
    """Every public path on each generator's file near 1 MB: CPU and wall seconds of the path and the process's
    peak RSS, one fresh process per path (CPU time is the target: a loaded machine inflates wall time)."""
    import json
    import subprocess
    import tempfile

    child = ("import sys, json, time, resource, contextlib, io\nsys.path.insert(0, sys.argv[1])\n"
             "from tests.crafting import SCALING\nfrom tests.test_scaling import _paths\nfrom pathlib import Path\n"
             "name, n, path, tmp = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]\n"
             "data = SCALING[name][0](n)\nps = _paths(name, data, Path(tmp) / 'f')\n"
             "c, t = time.process_time(), time.perf_counter()\nwith contextlib.redirect_stdout(io.StringIO()):\n"
             "    ps[path]()\nprint(json.dumps([len(data), time.process_time() - c, time.perf_counter() - t, "
             "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))\n")
    root = str(Path(__file__).resolve().parents[1])
    from tests.crafting import SCALING
    from tests.test_scaling import _paths

    worst_t = worst_m = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, n in NEAR_1MB.items():
            if only and only not in name:
                continue
            names = list(_paths(name, SCALING[name][0](2), Path(tmp) / "probe"))
            for path in names:
                out = subprocess.run([sys.executable, "-c", child, root, name, str(n), path, tmp],
                                     capture_output=True, text=True, cwd=root)
                if out.returncode:
                    print(f"{name:26} {path:18} FAILED: {out.stderr.strip().splitlines()[-1:]}")
                    continue
                size, secs, wall, rss = json.loads(out.stdout.strip().splitlines()[-1])
                worst_t, worst_m = max(worst_t, secs), max(worst_m, rss)
                print(f"{name:26} {path:18} {size:9,} B {secs:7.3f} cpu s {wall:7.3f} wall s {rss / 2**20:6.0f} MiB",
                      flush=True)
    print(f"worst {worst_t:.3f} CPU s, {worst_m / 2**20:.0f} MiB peak RSS (targets: 2 s, 1 GiB)")
    return 0


def instances() -> int:
    """Issue 29's instances on whichever ``pte_lab`` is imported (``--code``: another checkout's, e.g. main)."""
    import pte_lab
    from pte_lab.model.ethos_u import io_checks
    from pte_lab.model.layout import file_regions

    from tests.crafting import jump_chain, long_offsets, many_descriptors

    def checks():
        m = pte_lab.open(many_descriptors(2000)).methods["forward"]
        return [io_checks(m.raw, d) for d in m.delegate_memory]

    cases = {"jump chain 2,000: Method.tensors": lambda: pte_lab.open(jump_chain(2000)).methods["forward"].tensors,
             "offsets 20,000: file_layout": lambda: file_regions(pte_lab.open(long_offsets(20000))),
             "descriptors 2,000 x 2,000 calls: io_checks": checks}
    for name, f in cases.items():
        c = time.process_time()
        f()
        print(f"{name:45} {time.process_time() - c:7.3f} CPU s", flush=True)
    print(f"(pte_lab from {pte_lab.__file__})")
    return 0


def main() -> int:
    if "--code" in sys.argv:  # another checkout's pte_lab first (the generators stay this one's)
        sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--profile")
    ap.add_argument("--scaling", action="store_true", help="issue 29's generators at two sizes (work counted)")
    ap.add_argument("--paths", action="store_true", help="issue 29's generators near 1 MB, every public path")
    ap.add_argument("--instances", action="store_true", help="issue 29's instances, CPU s")
    ap.add_argument("--code", help="with --instances: the root of another pte_lab checkout to time")
    args = ap.parse_args()
    if args.instances:
        return instances()
    if args.scaling:
        return scaling(args.only)
    if args.paths:
        return paths_near_1mb(args.only)
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
