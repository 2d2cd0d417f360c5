"""pte_lab.load + load_method + one execute, against the same steps on bare executorch.runtime.

    python benchmarks/bench_load.py [--repeat 30]

Programs (exported once, cached under benchmarks/out/): a small portable MLP,
a 12-layer portable transformer, and the fix's device program (side 512) on the
emulated device. Each round runs both sides in alternating order; the table
shows medians and pte_lab's overhead. Target: <= 5 % (isolate=False).

"warm" is what repeated loads of an unchanged file cost (each load reads its own
plan; pte_lab remembers only that the file, keyed by path, inode, size and
mtime, passed the full check); "cold" forgets that every round, so pte_lab
checks every table of the file first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import program


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    import torch
    from executorch.runtime import Runtime

    import os
    import tempfile

    import pte_lab
    from pte_lab.runtime import native

    with tempfile.TemporaryDirectory() as cache:  # the emulated device's first use: a fresh build
        os.environ["PTE_LAB_CACHE"] = cache
        t = time.perf_counter()
        native.library_path()
        first = time.perf_counter() - t
        t = time.perf_counter()
        native.library_path()
        again = time.perf_counter() - t
        del os.environ["PTE_LAB_CACHE"]
    print(f"emulated-device helper: first build {first:.2f} s, cached lookup {again * 1000:.2f} ms\n")
    pte_lab.emulate_device("cuda:0")
    rt = Runtime.get()
    cases = [
        ("portable MLP", program("portable"), "forward", (torch.randn(4, 32),)),
        ("transformer (12 layers)", program("transformer", layers=12), "forward", (torch.randn(1, 16, 64),)),
        ("device, side 512 (emulated)", program("device", side=512), "forward2",
         (torch.randn(512, 512), torch.randn(512, 512))),
    ]

    def bare(path, name, inputs):
        t = time.perf_counter()
        prog = rt.load_program(str(path))
        m = prog.load_method(name)
        m.execute(list(inputs))
        return time.perf_counter() - t

    from pte_lab.runtime import checked

    def ours(path, name, inputs, cold=False):
        if cold:
            checked._checked_records.cache_clear()
        t = time.perf_counter()
        prog = pte_lab.load(path)
        m = prog.load_method(name)
        m(*inputs)
        return time.perf_counter() - t

    print(f"{'program':30s} {'executorch':>12s} {'pte_lab warm':>13s} {'overhead':>9s} "
          f"{'pte_lab cold':>13s} {'overhead':>9s}")
    for label, path, name, inputs in cases:
        bare(path, name, inputs), ours(path, name, inputs)  # warm up
        b, o, c = [], [], []
        for i in range(args.repeat):
            if i % 2:
                b.append(bare(path, name, inputs))
                o.append(ours(path, name, inputs))
                c.append(ours(path, name, inputs, cold=True))
            else:
                c.append(ours(path, name, inputs, cold=True))
                o.append(ours(path, name, inputs))
                b.append(bare(path, name, inputs))
        mb, mo, mc = statistics.median(b), statistics.median(o), statistics.median(c)
        print(f"{label:30s} {mb * 1000:9.2f} ms {mo * 1000:10.2f} ms {100 * (mo / mb - 1):+8.1f}% "
              f"{mc * 1000:10.2f} ms {100 * (mc / mb - 1):+8.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
