"""The loader fix's before/after measurement at the published size (side 2048: 48 MiB on the device).

    python benchmarks/bench_device_placement.py [--side 2048] [--json FILE]

Creates the executorch 1.4.1 environment first if needed (`pte-lab legacy-env`), then runs both
runtimes in fresh processes and prints the report as Markdown.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--json")
    args = ap.parse_args()
    from pte_lab.experiments import device_placement as dp

    legacy = dp.create_legacy_env(progress=lambda line: print("  " + line, flush=True))
    t = time.perf_counter()
    report = dp.run(side=args.side, legacy_python=str(legacy))
    print(report.to_markdown())
    print(f"\n(wall {time.perf_counter() - t:.1f} s, both runtimes)")
    if args.json:
        report.to_json(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
