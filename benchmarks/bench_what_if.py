"""What-if speed once the samples are taken: one prediction, and a budget search, on a 3,000-tensor program.

    python benchmarks/bench_what_if.py [--layers 60] [--runs 5]

Exports (once, cached under benchmarks/out/) pte_lab's transformer example with ``layers`` blocks and a
dynamic sequence of at most 64, learns its tensors' dims (three runs of the method in an isolated worker:
timed, but not part of the targets), then times, median of ``--runs``:

* one prediction (``Predictor.predict``: every tensor's shape and bytes, ExecuTorch's greedy per arena, the
  lower bound and the peak) -- target <= 100 ms; and the same with pte_lab's best fit (untargeted);
* a budget search (``search_budget``: bisection over the bound, the answer predicted) -- target <= 1 s; and
  the same with the curve its plot draws (untargeted).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

OUT = Path(__file__).parent / "out"


def export(layers: int, bound: int) -> Path:
    path = OUT / f"transformer_layers{layers}_seq{bound}.pte"
    if not path.exists():
        import torch

        from pte_lab import examples as ex

        OUT.mkdir(exist_ok=True)
        torch.manual_seed(0)
        m = ex._modules()["Transformer"](layers, d=64)
        seq = torch.export.Dim("seq", min=2, max=bound)
        t = time.perf_counter()
        path.write_bytes(ex._lower(ex._export(m, (torch.randn(1, 8, 64),), dynamic_shapes=({1: seq},))))
        print(f"  exported {path.name} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--bound", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--program", help="a program already exported (input 0 axis 1 dynamic)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import pte_lab
    from pte_lab.planning.what_if import Predictor, learn, search_budget

    path = Path(args.program) if args.program else export(args.layers, args.bound)
    m = pte_lab.open(path).methods["forward"]
    t = time.perf_counter()
    fit = learn(str(path), [(0, 1)])
    print(f"{path.name}: {len(m.planned):,} planned tensors; samples taken in {time.perf_counter() - t:.1f} s "
          f"(a worker start and {len(fit.points)} runs)")
    pred = Predictor(m, fit)
    n = args.bound // 2
    one = median_seconds(lambda: pred.predict((n,), best_fit=False), args.runs)
    with_best = median_seconds(lambda: pred.predict((n,)), args.runs)
    budget = pred.predict((n,)).planned
    search = median_seconds(lambda: search_budget(pred, budget), args.runs)
    found = search_budget(pred, budget)
    print(f"one prediction (at {n}; ExecuTorch's greedy, lower bound, peak): {one * 1e3:.1f} ms (target <= 100 ms); "
          f"with pte_lab's best fit too: {with_best * 1e3:.1f} ms")
    curve = median_seconds(lambda: search_budget(pred, budget).curve, 1)
    print(f"budget search ({budget:,} B -> bound {found.bound}): {search * 1e3:.0f} ms (target <= 1 s); "
          f"the search and its plotted curve ({len(found.curve)} bounds): {curve * 1e3:.0f} ms")
    return 0 if one <= 0.1 and search <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
