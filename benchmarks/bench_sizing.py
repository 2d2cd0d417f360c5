"""Deployment sizing: how long ``pte_lab.sizes`` takes, and what exact counting costs.

    python benchmarks/bench_sizing.py [--repeat 15]

1. ``pte_lab.sizes(path)`` and ``pte_lab.sizes(path, verify=True)`` on each example
   program (wall time, a fresh worker each time: most of it is the worker importing
   ExecuTorch), and the time from the first method on (the runner, then the worker's exit).
2. The cost of the allocation counter: the isolated worker's load_program +
   load_method + execute, with the counter preloaded and without, alternating;
   medians and the ratio (the load test of ``bench_load.py``, run isolated).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import program  # noqa: E402


def _sizing_times() -> None:
    import pte_lab

    cases = [("portable", program("portable")), ("xnnpack", program("xnnpack")),
             ("device (emulated)", program("device", side=64)), ("transformer 12", program("transformer", layers=12)),
             ("llm (export_llm)", program("llm", quantize="8da4w"))]
    print(f"{'program':22s} {'methods':>7s} {'sizes()':>9s} {'after start':>12s} {'verify=True':>12s}")
    for label, path in cases:
        marks = []
        t = time.perf_counter()
        s = pte_lab.sizes(path, progress=lambda line: marks.append(time.perf_counter()))
        plain = time.perf_counter() - t
        inside = plain - (marks[1] - t) if len(marks) > 1 else float("nan")  # after the worker started
        t = time.perf_counter()
        pte_lab.sizes(path, verify=True)
        verified = time.perf_counter() - t
        print(f"{label:22s} {len(s.methods):7d} {plain:8.2f}s {inside:11.2f}s {verified:11.2f}s")


def _counting_overhead(repeat: int) -> None:
    import torch

    from pte_lab.runtime.isolate import Worker

    cases = [("portable MLP", program("portable"), "forward", [torch.randn(4, 32)]),
             ("transformer (12 layers)", program("transformer", layers=12), "forward", [torch.randn(1, 16, 64)]),
             ("llm (export_llm)", program("llm", quantize="8da4w"), "forward",
              [torch.zeros(1, 8, dtype=torch.long), torch.tensor([0])])]
    workers = {True: Worker([], count=True), False: Worker([], count=False)}
    try:
        workers[True].call("provide_operators", ["llama::update_cache", "llama::custom_sdpa"])
        workers[False].call("provide_operators", ["llama::update_cache", "llama::custom_sdpa"])
        print(f"\n{'isolated load+run':26s} {'uncounted':>10s} {'counted':>10s} {'ratio':>7s}")
        for label, path, name, inputs in cases:
            times = {True: [], False: []}
            for r in range(repeat):
                for counted in ((True, False) if r % 2 else (False, True)):
                    w = workers[counted]
                    t = time.perf_counter()
                    w.call("load_program", str(path), None, "internal")
                    w.call("load_method", name)
                    w.call("execute", name, inputs, True)
                    times[counted].append(time.perf_counter() - t)
                    w.call("release")
            a, b = statistics.median(times[False]), statistics.median(times[True])
            print(f"{label:26s} {a * 1000:8.2f}ms {b * 1000:8.2f}ms {b / a:6.2f}x")
    finally:
        for w in workers.values():
            w.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    _sizing_times()
    _counting_overhead(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
