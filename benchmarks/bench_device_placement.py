"""The loader fix's before/after measurement at the published size (side 2048: 48 MiB on the device).

    python benchmarks/bench_device_placement.py [--side 2048] [--json FILE] [--bundle DIR]

Creates the executorch 1.4.1 environment first if needed (`pte-lab legacy-env`), then runs both
runtimes in fresh processes and prints the report as Markdown. With --bundle it also writes the
bundle (`pte-lab measure --bundle DIR`), runs its run.sh with no Python on PATH, prints that report
and the differences between the two (`device_placement.disagreements`; none expected on the emulated
device), with each side's wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_bundle(folder: Path, out: Path) -> float:
    """run.sh with only `dirname` on PATH (no Python); returns its wall time."""
    with tempfile.TemporaryDirectory() as tools:
        os.symlink(shutil.which("dirname"), Path(tools) / "dirname")
        t = time.perf_counter()
        proc = subprocess.run([str(folder / "run.sh"), "--json", str(out)], env={"PATH": tools},
                              capture_output=True, text=True)
        wall = time.perf_counter() - t
    print(proc.stdout.splitlines()[0] if proc.stdout else proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"run.sh failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--json")
    ap.add_argument("--bundle", help="also write the bundle here and run it")
    args = ap.parse_args()
    from pte_lab.experiments import device_placement as dp

    legacy = dp.create_legacy_env(progress=lambda line: print("  " + line, flush=True))
    t = time.perf_counter()
    report = dp.run(side=args.side, legacy_python=str(legacy))
    wall = time.perf_counter() - t
    print(report.to_markdown())
    print(f"\n(wall {wall:.1f} s, both runtimes)")
    if args.json:
        report.to_json(args.json)
    if args.bundle:
        from pte_lab.experiments.bundle import write_bundle

        t = time.perf_counter()
        bundle = write_bundle(args.bundle, side=args.side)
        print(f"\n{bundle.summary()}\n(bundle written in {time.perf_counter() - t:.1f} s)\n")
        out = Path(args.bundle).resolve().parent / f"{Path(args.bundle).name}.before_after.json"
        bwall = run_bundle(Path(args.bundle), out)
        native = dp.Report.load(out)
        print(native.to_markdown())
        print(f"\n(wall {bwall:.1f} s, run.sh: both loaders)")
        diffs = dp.disagreements(report, native)
        print("\npte-lab measure vs the bundle (dp.disagreements): " + ("no difference" if not diffs else ""))
        for d in diffs:
            print("  " + d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
