"""``pte_lab.diff`` on a big method: in process, and ``pte-lab diff`` end to end.

    python benchmarks/bench_diff.py [--layers 60] [--repeat 7] [--skip-xnnpack]

Pairs: the N-layer portable transformer against a copy replanned with best fit (every tensor
matched, most offsets changed: the target is under 0.5 s in process), and against the same
transformer lowered to XNNPACK (the matcher aligns two different instruction streams: its
worst case here). In process: a fresh ``pte_lab.diff`` (open both, analyse, match, hash the
file regions) and then the text, HTML and JSON views, best of ``--repeat`` after a warm-up.
End to end: a fresh ``pte-lab diff`` process (text, and ``--json``), best of 3, and the child's
peak RSS. Every time is shown as wall / CPU seconds: on a machine other jobs keep busy, the
CPU time is what the work itself cost.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import LAUNCH, OUT, program

TARGET_S = 0.5


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) of ``repeat`` calls after a warm-up: on a
    machine other jobs keep busy, CPU time is what the call itself cost."""
    fn()
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def _replanned(src: Path) -> Path:
    out = OUT / f"{src.stem}.best_fit.pte"
    if not out.exists():
        from pte_lab import planning

        planning.replan(src, "best_fit").write(out)
    return out


def _cli(args: list[str]) -> tuple[float, float, float]:
    """(best wall seconds of 3, best CPU seconds (user + system) of 3, peak RSS MiB) of a fresh
    ``pte-lab`` process."""
    best, cpu, rss = float("inf"), float("inf"), 0.0
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-m", "pte_lab.cli", *args],
                           capture_output=True, text=True)
        wall, peak, status, used = r.stdout.split()
        if int(status) != 0:
            raise SystemExit(f"pte-lab {' '.join(args)} failed: {r.stderr[-500:]}")
        best, cpu, rss = min(best, float(wall)), min(cpu, float(used)), max(rss, float(peak))
    return best, cpu, rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-xnnpack", action="store_true",
                    help="only the replanned pair (the XNNPACK export of 60 layers takes minutes)")
    args = ap.parse_args()
    import pte_lab

    src = program("transformer", layers=args.layers)
    pairs = [("replanned (best fit)", src, _replanned(src))]
    if not args.skip_xnnpack:
        pairs.append(("XNNPACK", src, program("transformer", layers=args.layers, backend="xnnpack")))
    m = pte_lab.open(src).methods["forward"]
    # the reference on this machine, now: one program opened and analysed (what each side of a diff costs)
    one_wall, one_cpu = _best(lambda: pte_lab.open(src).methods["forward"].arenas, args.repeat)
    print(f"{src.name}: {len(m.planned)} planned tensors, {m.n_instructions} instructions; opening and "
          f"analysing it takes {one_wall:.3f} s here ({one_cpu:.3f} s CPU)\n")
    print("each cell: wall / CPU seconds (best of each)")
    print(f"{'against':22s} {'matched':>7s} {'unmatched':>9s} | {'diff()':>13s} {'/ 0.5 s':>13s} {'/ one':>11s} | "
          f"{'text':>13s} {'HTML':>13s} {'JSON':>13s} | {'CLI text':>13s} {'CLI --json':>13s} {'peak RSS':>9s}")

    def cell(wall, cpu, f="{:.3f}"):
        return f"{f.format(wall)} / {f.format(cpu)}".rjust(13)

    for label, a, b in pairs:
        d = pte_lab.diff(a, b)
        md = d.methods["forward"]
        t_diff = _best(lambda: pte_lab.diff(a, b), args.repeat)
        t_text = _best(lambda: repr(d), args.repeat)
        t_html = _best(lambda: d._repr_html_(), args.repeat)
        t_json = _best(lambda: d.to_dict(), args.repeat)
        *cli_text, rss_text = _cli(["diff", str(a), str(b)])
        *cli_json, rss_json = _cli(["diff", str(a), str(b), "--json"])
        print(f"{label:22s} {len(md.matched):7d} {len(md.only_before) + len(md.only_after):9d} | "
              f"{cell(*t_diff)} {cell(*(t / TARGET_S for t in t_diff), '{:.2f}x')} "
              f"{cell(t_diff[0] / one_wall, t_diff[1] / one_cpu, '{:.1f}x')[2:]} | "
              f"{cell(*t_text)} {cell(*t_html)} {cell(*t_json)} | {cell(*cli_text)} {cell(*cli_json)} "
              f"{max(rss_text, rss_json):5.1f} MiB")
    print(f"\n/ 0.5 s = diff() / the target ({TARGET_S} s, in process); below 1.00x meets it. / one = diff() / one "
          f"program's open and analysis (two of them are the floor). CLI: a fresh process (its CPU: user + "
          f"system); peak RSS of the two. pte_lab from {pte_lab.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
