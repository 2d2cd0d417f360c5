"""What-if speed once the samples are taken: one prediction, and a budget search, on a 3,000-tensor program.

    python benchmarks/bench_what_if.py [--tensors 3000] [--runs 5]
    python benchmarks/bench_what_if.py --layers 60 | --program FILE [--runs 5]

By default the program is generated (tests/crafting.py): one method of ``--tensors`` planned float tensors in
transformer-like blocks of 17 (activations ``[1, L, 64]``, heads ``[1, 4, L, 16]``, attention scores
``[1, 4, L, L]``, a feed-forward ``[1, L, 256]``), each written by one instruction and read by the next, a
residual read across each block, a sequence bound of 64; its shape fit (each dim an exact affine function of
L) is written down, as learning it would find it, so no run is needed. ``--layers N`` exports pte_lab's
transformer example with N blocks and a dynamic sequence instead (cached under benchmarks/out/; 60 blocks
plan over 3,000 tensors but take many minutes to export), and learns its dims (three runs of the method in
an isolated worker: timed, but not part of the targets); ``--program`` takes one already exported. Then,
median of ``--runs``:

* one prediction (``Predictor.predict``: every tensor's shape and bytes, ExecuTorch's greedy per arena, the
  lower bound and the peak) -- target <= 100 ms; and the same with pte_lab's best fit (untargeted);
* a budget search (``search_budget``: bisection over the bound, the answer predicted) -- target <= 1 s; and
  the same with the curve its plot draws (untargeted).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

OUT = Path(__file__).parent / "out"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: one generated block: each tensor's dims, "L" the sequence (the dynamic dim), and which earlier tensor of
#: the block (by position) the instruction that writes it also reads (a residual), if any
BLOCK = [((1, "L", 64), None), ((1, "L", 64), None), ((1, "L", 64), None), ((1, "L", 64), None),
         ((1, 4, "L", 16), None), ((1, 4, 16, "L"), None), ((1, 4, "L", "L"), None), ((1, 4, "L", "L"), None),
         ((1, 4, "L", 16), None), ((1, "L", 64), None), ((1, "L", 64), None), ((1, "L", 64), 0),
         ((1, "L", 64), None), ((1, "L", 256), None), ((1, "L", 256), None), ((1, "L", 64), None),
         ((1, "L", 64), 11)]


def generated(tensors: int, bound: int):
    """(the method, its shape fit) of a generated program of ``tensors`` planned tensors (see the module)."""
    import pte_lab
    from pte_lab.model.shape_fit import AffineDim, ShapeFit
    from tests.crafting import build_program

    dims = [BLOCK[i % len(BLOCK)][0] for i in range(tensors)]
    at_bound = [[bound if d == "L" else d for d in ds] for ds in dims]
    values, offset = [], 0
    for sizes in at_bound:
        values.append(("tensor", 1, offset, sizes))
        offset += -(-4 * math.prod(sizes) // 16) * 16
    instructions = []
    for i in range(1, tensors):
        skip = BLOCK[i % len(BLOCK)][1]
        reads = [i - 1] + ([i - i % len(BLOCK) + skip] if skip is not None else [])
        instructions.append(reads + [i])
    m = pte_lab.open(build_program(values, instructions, sizes=(0, offset))).methods["forward"]
    affine = {"L": AffineDim(0, (1,))}
    fit = ShapeFit("forward", ((0, 1),), (bound,), tuple(t.value for t in m.planned), (4,) * len(m.planned),
                   tuple(tuple(affine.get(d) or AffineDim(d, (0,)) for d in dims[t.value]) for t in m.planned),
                   ((8,), (16,), (13,)))
    return m, fit


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


def median_seconds(fn, runs: int) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn()``, each the median of ``runs``: on a shared machine the CPU time is the
    figure to read (the wall clock counts the other processes' turns too)."""
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def ms(figure: tuple[float, float]) -> str:
    return f"{figure[0] * 1e3:.1f} ms (CPU {figure[1] * 1e3:.1f} ms)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensors", type=int, default=3000, help="planned tensors of the generated program")
    ap.add_argument("--layers", type=int, help="export pte_lab's transformer with this many blocks instead")
    ap.add_argument("--bound", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--program", help="a program already exported (input 0 axis 1 dynamic)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import pte_lab
    from pte_lab.planning.at_bound import Predictor, learn, search_budget

    if args.program or args.layers:
        path = Path(args.program) if args.program else export(args.layers, args.bound)
        m = pte_lab.open(path).methods["forward"]
        t = time.perf_counter()
        fit = learn(str(path), [(0, 1)])
        print(f"{path.name}: {len(m.planned):,} planned tensors; samples taken in {time.perf_counter() - t:.1f} s "
              f"(a worker start and {len(fit.points)} runs)")
    else:
        t = time.perf_counter()
        m, fit = generated(args.tensors, args.bound)
        print(f"generated: {len(m.planned):,} planned tensors, {m.n_instructions:,} instructions, sequence bound "
              f"{args.bound}; built and opened in {time.perf_counter() - t:.1f} s (its fit written down: no run)")
    pred = Predictor(m, fit)
    n = args.bound // 2
    one = median_seconds(lambda: pred.predict((n,), best_fit=False), args.runs)
    with_best = median_seconds(lambda: pred.predict((n,)), args.runs)
    budget = pred.predict((n,)).planned
    # a Predictor remembers what it planned at each bound: every search starts from a fresh one (built here,
    # outside the timing, as the samples are)
    fresh = iter([Predictor(m, fit) for _ in range(args.runs + 2)])
    search = median_seconds(lambda: search_budget(next(fresh), budget), args.runs)
    found = search_budget(next(fresh), budget)
    print(f"one prediction (at {n}; ExecuTorch's greedy, lower bound, peak): {ms(one)} (target <= 100 ms); "
          f"with pte_lab's best fit too: {ms(with_best)}")
    curve = median_seconds(lambda: search_budget(next(fresh), budget).curve, 1)
    print(f"budget search ({budget:,} B -> bound {found.bound}): {ms(search)} (target <= 1 s); "
          f"the search and its plotted curve ({len(found.curve)} bounds): {ms(curve)}")
    return 0 if one[1] <= 0.1 and search[1] <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
