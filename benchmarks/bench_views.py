"""Pictures and the explorer on a big method: render times and slider-step times.

    python benchmarks/bench_views.py [--layers 60] [--steps 40]

Targets: a layout of 3,000+ tensors renders (draw + PNG) in under a second;
an explorer slider step (highlight + list + image) in under 150 ms.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    import matplotlib.pyplot as plt

    import pte_lab
    from pte_lab import plot

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from bench_open import program

    path = program("transformer", layers=args.layers)
    pte = pte_lab.open(path)
    m = pte.methods["forward"]
    m.arenas
    print(f"{path.name}: {len(m.planned)} planned tensors, {m.n_instructions} instructions\n")

    def timed(label, fn, repeat=5):
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            ax = fn()
            buf = io.BytesIO()
            ax.figure.savefig(buf, format="png", dpi=100)
            ts.append(time.perf_counter() - t)
            plt.close("all")
        print(f"{label:44s} {min(ts) * 1000:8.1f} ms (best of {repeat})")

    timed("arena_layout, color_by=role", lambda: plot.arena_layout(m, 1))
    timed("arena_layout, color_by=operator", lambda: plot.arena_layout(m, 1, color_by="operator"))
    timed("occupancy", lambda: plot.occupancy(m))
    timed("placement, all loaders", lambda: plot.placement(pte, "all"))

    t = time.perf_counter()
    e = pte_lab.explore(pte)
    print(f"{'explorer: first view (draws the layout)':44s} {(time.perf_counter() - t) * 1000:8.1f} ms")
    steps = []
    n = m.n_instructions
    for i in range(args.steps):
        t = time.perf_counter()
        e.slider.value = (i * 97) % (n + 1)
        steps.append(time.perf_counter() - t)
    print(f"{'explorer: slider step':44s} {statistics.median(steps) * 1000:8.1f} ms median, "
          f"{max(steps) * 1000:.1f} ms max ({args.steps} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
