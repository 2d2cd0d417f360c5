"""Opening a .pte: pte_lab against ExecuTorch's own deserializer, side by side.

    python benchmarks/bench_open.py [--layers 60] [--weights-mb 320] [--repeat 5]

Programs (exported once, cached under benchmarks/out/):
  * a portable transformer with >= 3,000 planned tensors (--layers)
  * a program carrying >= 300 MB of weights (--weights-mb)
  * an LLM from ExecuTorch's own export_llm flow: a 6-layer llama of dim 288, 32,000 tokens,
    KV caches through llama::update_cache, XNNPACK, 8da4w (LLM, below; about 3 minutes to export once)

For each it prints:
  * fresh process: `pte-lab inspect --json FILE` vs a fresh Python running
    `deserialize_pte_binary` on the file: wall time and peak RSS (best of --repeat)
  * in process: pte_lab's full analysis (open, every method's arenas, tensors,
    lifetimes, peaks, validation, findings, the three load costs, the JSON
    document) vs `deserialize_pte_binary(bytes)`: best of --repeat, and the ratio.

Targets: fresh-process inspect <= 0.5 s and <= 120 MB whatever the weights;
in-process analysis >= 5x faster than deserialize_pte_binary.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"

DESER = "import sys; from executorch.exir._serialize._program import deserialize_pte_binary as d; d(open(sys.argv[1], 'rb').read())"


def program(name: str, **kw) -> Path:
    from pte_lab import examples

    OUT.mkdir(exist_ok=True)
    tag = "_".join(f"{k}{v}" for k, v in sorted(kw.items()))
    path = OUT / f"{name}_{tag}.pte"
    if not path.exists():
        t = time.perf_counter()
        examples.save(name, path, **kw)
        print(f"  exported {path.name} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


# Peak RSS is read by a small launcher: a child forked from this (large) process
# would report this process's size as its own high-water mark.
LAUNCH = (
    "import os, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "_, status, ru = os.wait4(p.pid, 0)\n"
    "wall = time.perf_counter() - t\n"
    "sys.stderr.write(p.stderr.read().decode()[-2000:])\n"
    "print(wall, ru.ru_maxrss / 1024, status, ru.ru_utime + ru.ru_stime)\n"
)


#: the LLM of the benchmarks (and of the issue that asked for LLM support): export_llm's llama3
LLM = dict(dim=288, n_layers=6, n_heads=6, n_kv_heads=6, vocab_size=32000, max_seq_len=128, quantize="8da4w")


def fresh(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Best wall seconds and peak RSS (MiB) of a fresh process running cmd."""
    best_t, best_rss = float("inf"), float("inf")
    for _ in range(repeat):
        r = subprocess.run([sys.executable, "-c", LAUNCH, *cmd], capture_output=True, text=True)
        wall, rss, status, _cpu = r.stdout.split()
        if int(status) != 0:
            raise RuntimeError(f"{cmd} failed: {r.stderr}")
        best_t = min(best_t, float(wall))
        best_rss = min(best_rss, float(rss))
    return best_t, best_rss


def in_process(path: Path, repeat: int) -> tuple[float, float, int, int]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    data = path.read_bytes()

    from bench_crafted import analyse  # the same first look on crafted plans

    def ours():
        return analyse(path)

    def theirs():
        return deserialize_pte_binary(data)

    def best(fn):
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return min(ts)

    pte = ours()
    tensors = sum(len(m.planned) for m in pte.methods.values())
    return best(ours), best(theirs), tensors, pte.file_size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--weights-mb", type=float, default=320)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-llm", action="store_true", help="leave out the export_llm programs")
    args = ap.parse_args()
    inspect = [sys.executable, "-m", "pte_lab.cli", "inspect", "--json"]
    deser = [sys.executable, "-c", DESER]
    print("preparing programs", flush=True)
    progs = {
        f"transformer ({args.layers} layers)": program("transformer", layers=args.layers),
        f"weights ({args.weights_mb:g} MB)": program("weights", mb=args.weights_mb),
    }
    if not args.skip_llm:
        progs["llama 6x288, export_llm 8da4w"] = program("llm", **LLM)
    rows = []
    for label, path in progs.items():
        ft, frss = fresh(inspect + [str(path)], args.repeat)
        dt, drss = fresh(deser + [str(path)], max(1, min(args.repeat, 3)))
        ours, theirs, tensors, size = in_process(path, args.repeat)
        rows.append((label, size, tensors, ft, frss, dt, drss, ours, theirs))
    print()
    print(f"{'program':28s} {'file':>9s} {'tensors':>7s} | {'inspect --json':>22s} | "
          f"{'deserialize (fresh)':>22s} | {'analysis':>9s} {'deserialize':>11s} {'ratio':>6s}")
    for label, size, tensors, ft, frss, dt, drss, ours, theirs in rows:
        print(f"{label:28s} {size / 2**20:7.1f}MB {tensors:7d} | {ft:7.3f} s {frss:8.1f} MiB | "
              f"{dt:7.3f} s {drss:8.1f} MiB | {ours * 1000:7.1f}ms {theirs * 1000:9.1f}ms {theirs / ours:5.1f}x")
    ok = all(ft <= 0.5 and frss <= 120 and theirs / ours >= 5 for _, _, _, ft, frss, _, _, ours, theirs in rows)
    print("\ntargets (inspect <= 0.5 s, <= 120 MiB; analysis >= 5x faster):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
