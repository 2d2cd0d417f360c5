"""pte_lab's planner against ExecuTorch's own plans, both over the lower bound.

    python benchmarks/bench_planning.py [--runs 3]

For each program (exported once, cached under benchmarks/out/) and arena:
ExecuTorch's arena / lower bound, pte_lab best_fit / lower bound, planning
time, and whether the replanned program's outputs are bit-identical to the
original's (ExecuTorch runtime, --runs random inputs per method).
Targets: best_fit <= 1.05x the bound everywhere; a 3,000-tensor method
planned in under a second; every replanned program verified.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import LLM, program


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-llm", action="store_true", help="leave out the export_llm programs")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import pte_lab
    from pte_lab import planning

    cases = [
        ("MLP, portable, 1 method", program("portable")),
        ("MLP + attention, XNNPACK, 2 methods", program("xnnpack")),
        ("host + device method (XNNPACK)", program("device", side=512)),
        ("transformer 12 layers, portable", program("transformer", layers=12)),
        ("transformer 12 layers, XNNPACK", program("transformer", layers=12, backend="xnnpack")),
        ("transformer 60 layers, portable", program("transformer", layers=60)),
    ]
    if not args.skip_llm:
        cases += [("llama 6x288, export_llm, XNNPACK 8da4w", program("llm", **LLM)),
                  ("llama 2x64, export_llm, index_put_", program("llm", custom_sdpa=False, xnnpack=False))]
    print(f"{'program':38s} {'method':10s} {'arena':>5s} {'tensors':>7s} {'ET/bound':>9s} {'ours/bound':>10s} "
          f"{'plan time':>9s} {'verified':>9s}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in cases:
            r = planning.replan(path, "best_fit")  # per-arena planning times are in r.arenas
            out = r.write(Path(tmp) / path.name)
            ver = {v.method: v.identical for v in planning.verify(path, out, runs=args.runs)}
            pte = pte_lab.open(path)
            for a in r.arenas:
                n = len([x for x in pte.methods[a.method].planned if x.mem_id == a.mem_id])
                worst = max(worst, a.after / a.lower_bound)
                print(f"{label:38s} {a.method:10s} {a.mem_id:5d} {n:7d} {a.before / a.lower_bound:8.3f}x "
                      f"{a.after / a.lower_bound:9.3f}x {a.seconds * 1000:7.0f}ms "
                      f"{'yes' if ver[a.method] else 'NO':>9s}")
    print(f"\nworst ours/bound: {worst:.3f}x (target <= 1.05x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
