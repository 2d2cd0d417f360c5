"""``pte_lab.diff`` on a big method: in process, and ``pte-lab diff`` end to end.

    python benchmarks/bench_diff.py [--layers 60] [--repeat 7]

Pairs: the N-layer portable transformer against a copy replanned with best fit (every tensor
matched, most offsets changed: the target is under 0.5 s in process), and against the same
transformer lowered to XNNPACK (the matcher aligns two different instruction streams: its
worst case here). In process: a fresh ``pte_lab.diff`` (open both, analyse, match, hash the
file regions) and then the text, HTML and JSON views, best of ``--repeat`` after a warm-up.
End to end: a fresh ``pte-lab diff`` process (text, and ``--json``), best of 3 wall times and
the child's peak RSS.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import LAUNCH, OUT, program  # noqa: E402

TARGET_S = 0.5


def _best(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _replanned(src: Path) -> Path:
    out = OUT / f"{src.stem}.best_fit.pte"
    if not out.exists():
        from pte_lab import planning

        planning.replan(src, "best_fit").write(out)
    return out


def _cli(args: list[str]) -> tuple[float, float]:
    """(best wall seconds of 3, peak RSS MiB) of a fresh ``pte-lab`` process."""
    best, rss = float("inf"), 0.0
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-m", "pte_lab.cli", *args],
                           capture_output=True, text=True)
        wall, peak, status = r.stdout.split()
        if int(status) != 0:
            raise SystemExit(f"pte-lab {' '.join(args)} failed: {r.stderr[-500:]}")
        best, rss = min(best, float(wall)), max(rss, float(peak))
    return best, rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    import pte_lab

    src = program("transformer", layers=args.layers)
    pairs = [("replanned (best fit)", src, _replanned(src)),
             ("XNNPACK", src, program("transformer", layers=args.layers, backend="xnnpack"))]
    m = pte_lab.open(src).methods["forward"]
    # the reference on this machine, now: one program opened and analysed (what each side of a diff costs)
    one = _best(lambda: pte_lab.open(src).methods["forward"].arenas, args.repeat)
    print(f"{src.name}: {len(m.planned)} planned tensors, {m.n_instructions} instructions; opening and "
          f"analysing it takes {one:.3f} s here\n")
    print(f"{'against':22s} {'matched':>8s} {'unmatched':>9s} | {'diff()':>8s} {'target':>7s} {'ratio':>6s} "
          f"{'/ one':>6s} | "
          f"{'text':>7s} {'HTML':>7s} {'JSON':>7s} | {'CLI text':>9s} {'CLI --json':>10s} {'peak RSS':>9s}")
    for label, a, b in pairs:
        d = pte_lab.diff(a, b)
        md = d.methods["forward"]
        t_diff = _best(lambda: pte_lab.diff(a, b), args.repeat)
        t_text = _best(lambda: repr(d), args.repeat)
        t_html = _best(lambda: d._repr_html_(), args.repeat)
        t_json = _best(lambda: d.to_dict(), args.repeat)
        cli_text, rss_text = _cli(["diff", str(a), str(b)])
        cli_json, rss_json = _cli(["diff", str(a), str(b), "--json"])
        print(f"{label:22s} {len(md.matched):8d} {len(md.only_before) + len(md.only_after):9d} | "
              f"{t_diff:7.3f}s {TARGET_S:6.1f}s {t_diff / TARGET_S:5.2f}x {t_diff / one:5.1f}x | "
              f"{t_text:6.3f}s {t_html:6.3f}s "
              f"{t_json:6.3f}s | {cli_text:8.3f}s {cli_json:9.3f}s {max(rss_text, rss_json):6.1f} MiB")
    print(f"\nratio = diff() / target ({TARGET_S} s, in process); below 1.00x meets it. / one = diff() / one "
          f"program's open and analysis (two of them are the floor). pte_lab from {pte_lab.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
