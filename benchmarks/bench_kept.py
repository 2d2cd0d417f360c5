"""Answers that run the program, asked once and asked again (issue 45's targets): the CLI in a fresh process,
CPU of the whole process tree (the workers included), best of N.

    python benchmarks/bench_kept.py [--repeat 5] [--cold-repeat 3] [--base REV] [--only-what-if]

- ``sizes FILE`` on the small portable example: measured (``--no-cache``, what a first question costs: the
  native parts already built) beside kept (the same question again);
- ``sizes FILE --target cortex-m`` and ``sizes FILE --verify``, likewise;
- ``what-if FILE --bound 0:0 --budget 100KiB`` on the dynamic example, likewise; with ``--base REV``, its
  measured CPU beside that of pte_lab at git revision REV (extracted with ``git archive`` into a temporary
  folder and run from there: the old path, e.g. a worker that imports ExecuTorch's Python package);
  ``--only-what-if`` asks that question alone;
- ``sizes FILE`` on a program whose delegate's backend this ExecuTorch lacks (the Ethos-U example with its
  backend renamed): the message, beside what it cost before any worker was skipped (``--base`` shows that
  only with an older checkout, so the baseline printed is the measured sizes of the runnable program).

Each line prints pte_lab's figure, its baseline and the ratio. Host figures: record them with the machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_open import program  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "pte_lab" / "data" / "ethos_u"


def _cli(*argv: str, root: Path | None = None) -> tuple[float, float, int]:
    """(CPU seconds of the process and its children, wall seconds, exit status) of one CLI call (``root``: the
    pte_lab checkout to run, first on PYTHONPATH; None: whatever the environment gives)."""
    env = {k: v for k, v in os.environ.items() if k != "PTE_LAB_NO_CACHE"}
    if root is not None:
        env["PYTHONPATH"] = str(root)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # run from the checkout's own folder: ``python -m`` puts the current folder first on sys.path
    r = subprocess.run([sys.executable, "-m", "pte_lab.cli", *argv], capture_output=True, text=True, env=env,
                       cwd=None if root is None else str(root))
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, r.returncode


def _best(n: int, *argv: str, root: Path | None = None) -> tuple[float, float, int]:
    runs = [_cli(*argv, root=root) for _ in range(n)]
    return min(runs)


def _checkout(rev: str, into: Path) -> Path:
    """pte_lab's files at git revision ``rev`` (``git archive``), extracted under ``into``."""
    out = into / f"base_{rev.replace('/', '_')}"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kept question (best kept)")
    ap.add_argument("--cold-repeat", type=int, default=3, help="runs of each measured question (best kept)")
    ap.add_argument("--base", help="a git revision: what-if's measured CPU there too, beside this checkout's")
    ap.add_argument("--only-what-if", action="store_true", help="the what-if question alone")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_kept_"))
    portable = work / "portable.pte"
    portable.write_bytes(Path(program("portable")).read_bytes())
    dynamic = work / "dynamic.pte"
    dynamic.write_bytes(Path(program("dynamic")).read_bytes())
    foreign = work / "vendor.pte"
    foreign.write_bytes((DATA / "u55_128_shared_sram.pte").read_bytes().replace(b"EthosUBackend", b"VendorBackend"))
    questions = [
        ("sizes (small program)", ["sizes", str(portable)]),
        ("sizes --target cortex-m", ["sizes", str(portable), "--target", "cortex-m"]),
        ("sizes --verify", ["sizes", str(portable), "--verify"]),
        ("what-if --budget (dynamic)", ["what-if", str(dynamic), "--bound", "0:0", "--budget", "100KiB"]),
    ]
    if a.only_what_if:
        questions = [q for q in questions if q[1][0] == "what-if"]
    print(f"{'question':30} {'measured CPU':>13} {'kept CPU':>9} {'ratio':>7}   (wall: measured, kept; exit)")
    for label, argv in questions:
        cold = _best(a.cold_repeat, *argv, "--no-cache")
        _cli(*argv)  # keeps it
        warm = _best(a.repeat, *argv)
        print(f"{label:30} {cold[0]:12.2f}s {warm[0]:8.2f}s {cold[0] / warm[0]:6.1f}x   "
              f"({cold[1]:.2f} s, {warm[1]:.2f} s; {cold[2]}, {warm[2]})")
        if a.base and argv[0] == "what-if":
            base = _checkout(a.base, work)
            _cli(*argv, "--no-cache", root=base)  # builds the base's native helper, if its sources differ
            old = _best(a.cold_repeat, *argv, "--no-cache", root=base)
            print(f"{'  the same at ' + a.base:30} {old[0]:12.2f}s {'':9} {old[0] / cold[0]:6.1f}x   "
                  f"(wall {old[1]:.2f} s; exit {old[2]}): measured CPU there, and how many times this checkout's")
    if a.only_what_if:
        return
    no_run = _best(a.repeat, "sizes", str(foreign))
    measured = _best(a.cold_repeat, "sizes", str(portable), "--no-cache")
    print(f"{'cannot run here: the message':30} {no_run[0]:12.2f}s   (wall {no_run[1]:.2f} s, exit {no_run[2]}); "
          f"a runnable program measured: {measured[0]:.2f} s CPU")


if __name__ == "__main__":
    main()
