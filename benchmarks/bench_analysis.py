"""pte_lab's full analysis of one file, best of N, in this process: for before/after comparisons.

    python benchmarks/bench_analysis.py FILE [--repeat 15]
    PYTHONPATH=<worktree of another revision> python benchmarks/bench_analysis.py FILE

Open, every method's arenas, tensor table and findings, the three load costs and
the JSON document (what ``pte-lab inspect --json`` computes), timed after one
warm-up run. Prints milliseconds of CPU time (this process's, best of N: what
other jobs on a loaded machine disturb least) and of wall time (best of N). Run
revisions alternately: single runs vary.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import pte_lab

    def full():
        pte = pte_lab.open(args.file)
        for m in pte.methods.values():
            m.arenas, m.tensors, m.findings()
        for loader in ("corrected", "legacy", "module"):
            pte.load_cost(loader)
        pte.to_dict()

    full()
    cpu = wall = float("inf")
    for _ in range(args.repeat):
        c, t = time.process_time(), time.perf_counter()
        full()
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - t)
    print(f"{cpu * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall  (best of {args.repeat}; "
          f"pte_lab from {pte_lab.__file__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
