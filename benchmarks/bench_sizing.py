"""Deployment sizing: how long ``pte_lab.sizes`` takes, and what exact counting costs.

    python benchmarks/bench_sizing.py [--repeat 15]
    python benchmarks/bench_sizing.py --base main [--repeat 3]

1. ``pte_lab.sizes(path)`` and ``pte_lab.sizes(path, verify=True)`` on each example
   program (wall time, a fresh worker each time: most of it is the worker importing
   ExecuTorch), and the time from the first method on (the runner, then the worker's exit).
2. The cost of the allocation counter: the isolated worker's load_program +
   load_method + execute, with the counter preloaded and without, alternating;
   medians and the ratio (the load test of ``bench_load.py``, run isolated).

``--base REV``: instead, ``pte_lab.sizes(path)`` per example with the pte_lab of
git revision REV (a temporary worktree) and with this tree, alternating back to
back in fresh interpreters (the same programs, the same venv); medians of the
time inside ``sizes()``, the ratio, and what each sized.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import program


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


ROOT = Path(__file__).resolve().parents[1]
_TIMED = (  # PYTHONPATH names the tree: the isolated worker it starts imports the same pte_lab
    "import json, sys, time\n"
    "import pte_lab\n"
    "assert pte_lab.__file__.startswith(sys.argv[1]), pte_lab.__file__\n"
    "marks = []\n"
    "t = time.perf_counter()\n"
    "s = pte_lab.sizes(sys.argv[2], progress=lambda line: marks.append(time.perf_counter()))\n"
    "total = time.perf_counter() - t\n"
    "print(json.dumps([total, total - (marks[1] - t), len(s.methods), len(s.skipped)]))\n"
)


def _before_after(base: str, repeat: int) -> None:
    cases = [("portable", program("portable")), ("xnnpack", program("xnnpack")), ("gpt (XNNPACK, tokens)", program("gpt")),
             ("device (emulated)", program("device", side=64)), ("transformer 12", program("transformer", layers=12)),
             ("llm (export_llm)", program("llm", quantize="8da4w"))]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(src), base], check=True,
                       capture_output=True)
        try:
            trees = {"before": str(src), "after": str(ROOT)}
            print(f"{'':24s} {'sizes()':>27s} {'after the worker started':>29s}")
            print(f"{'program':24s} {'before':>9s} {'after':>9s} {'ratio':>6s}  {'before':>8s} {'after':>8s} "
                  f"{'ratio':>6s}  sized before / after (methods, skipped)")
            for label, path in cases:
                times: dict[str, list[float]] = {"before": [], "after": []}
                inside: dict[str, list[float]] = {"before": [], "after": []}
                sized = {}
                for r in range(repeat):
                    for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                        env = dict(os.environ, PYTHONPATH=trees[side])
                        r = subprocess.run([sys.executable, "-c", _TIMED, trees[side], str(path)],
                                           capture_output=True, text=True, env=env, cwd=tmp)
                        if r.returncode:
                            raise SystemExit(f"{side} {label}: {r.stderr.strip()[-1500:]}")
                        out = r.stdout
                        t, t_in, n, skipped = json.loads(out.strip().splitlines()[-1])
                        times[side].append(t)
                        inside[side].append(t_in)
                        sized[side] = (n, skipped)
                a, b = statistics.median(times["before"]), statistics.median(times["after"])
                c, d = statistics.median(inside["before"]), statistics.median(inside["after"])
                print(f"{label:24s} {a:8.2f}s {b:8.2f}s {b / a:5.2f}x  {c:7.2f}s {d:7.2f}s {d / c:5.2f}x  "
                      f"{sized['before']} / {sized['after']}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(src)], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--base", help="git revision: sizes() per example before (REV) and after (this tree)")
    args = ap.parse_args()
    if args.base:
        _before_after(args.base, args.repeat)
        return 0
    _sizing_times()
    _counting_overhead(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
