"""The first look (``pte_lab.open`` + ``repr``) against ExecuTorch's ``deserialize_pte_binary`` on every program
given: CPU ms of each, best of N, one process; the ratio (deserialize / first look: above 1, the look is faster).

    PYTHONPATH=<tree> .venv/bin/python benchmarks/sweep_first_look.py 30 pte_lab/data/ethos_u/*.pte \\
        ~/.cache/pte_lab/examples/*/*/*.pte

Run it once per tree (``PYTHONPATH`` names the tree) to compare two versions of pte_lab: each run times the
deserializer beside it, so the ratios of two runs compare even when the machine's speed moved between them.
Issue 45's target: at least 1x on every file. Byte-compile the tree first (``python -m compileall -q pte_lab``)
where ``PYTHONDONTWRITEBYTECODE`` is set, or each first import compiles it (outside the timed calls, but slower).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path


def best(f, n: int) -> float:
    """The least CPU seconds of ``n`` calls of ``f`` (after one call not counted)."""
    f()
    times = []
    for _ in range(n):
        t = time.process_time()
        f()
        times.append(time.process_time() - t)
    return min(times)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print(__doc__)
        return 2
    warnings.simplefilter("ignore")
    import pte_lab
    from executorch.exir._serialize._program import deserialize_pte_binary

    n, lowest = int(argv[0]), None
    print(f"pte_lab from {Path(pte_lab.__file__).parent.parent}; best of {n}, CPU ms")
    for path in argv[1:]:
        data = Path(path).read_bytes()
        try:
            d = best(lambda: deserialize_pte_binary(data), n)
        except Exception as exc:  # noqa: BLE001 (a file ExecuTorch refuses: no baseline to compare)
            print(f"{Path(path).name:34} deserializer refuses it: {type(exc).__name__}")
            continue
        a = best(lambda: repr(pte_lab.open(path)), n)
        lowest = d / a if lowest is None else min(lowest, d / a)
        print(f"{Path(path).name:34} {len(data):>10,} B  deserialize {d * 1e3:8.3f}  first look {a * 1e3:8.3f}  "
              f"{d / a:5.2f}x  {path}")
    if lowest is not None:
        print(f"lowest ratio {lowest:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
