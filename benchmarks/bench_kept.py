"""Answers that run the program, asked once and asked again (issue 45's targets): the CLI in a fresh process,
CPU of the whole process tree (the workers included), best of N.

    python benchmarks/bench_kept.py [--repeat 5] [--cold-repeat 3] [--base REV] [--only-what-if]

``--base REV`` runs each question with pte_lab at git revision REV as well (an archive of it on PYTHONPATH, its
native parts built once before the timing), and prints it beside this tree: the baseline in the same run.

- ``sizes FILE`` on the small portable example: measured (``--no-cache``, what a first question costs: the
  native parts already built) beside kept (the same question again);
- ``sizes FILE --target cortex-m`` and ``sizes FILE --verify``, likewise;
- ``what-if FILE --bound 0:0 --budget 100KiB`` on the dynamic example, likewise;
- ``sizes FILE`` on a program whose delegate's backend this ExecuTorch lacks (the Ethos-U example with its
  backend renamed): the message, beside what it cost before any worker was skipped (``--base`` shows that
  only with an older checkout, so the baseline printed is the measured sizes of the runnable program).

Each line prints pte_lab's figure, its baseline and the ratio. Host figures: record them with the machine.

Both trees are byte-compiled first (``compileall``), as ``pip install`` leaves an installed package: where
``PYTHONDONTWRITEBYTECODE`` is set (as on this project's machines) Python would otherwise compile every module
of pte_lab again in each call, about 0.1 s of CPU that no installed user pays.
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
from bench_open import program

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "pte_lab" / "data" / "ethos_u"


#: targets of issue 45, CPU seconds: (measured, kept)
TARGETS = {"sizes (small program)": (3.0, 0.3), "sizes --target cortex-m": (6.0, 0.6), "sizes --verify": (6.0, 0.6),
           "what-if --budget (dynamic)": (2.0, 0.3)}


def _cli(*argv: str, tree: str | None = None) -> tuple[float, float, int]:
    """(CPU seconds of the process and its children, wall seconds, exit status) of one CLI call, with pte_lab's
    tree ``tree`` first on PYTHONPATH (None: this checkout's)."""
    env = {k: v for k, v in os.environ.items() if k != "PTE_LAB_NO_CACHE"}
    # this checkout's own pte_lab by absolute path: the call runs from another folder, where a relative
    # PYTHONPATH would miss it and an installed (editable) pte_lab elsewhere would be timed instead
    env["PYTHONPATH"] = tree if tree is not None else str(ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # run from a folder of no pte_lab: ``-m`` puts the working folder first on sys.path, before PYTHONPATH
    r = subprocess.run([sys.executable, "-m", "pte_lab.cli", *argv], capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, r.returncode


def _best(n: int, *argv: str, tree: str | None = None) -> tuple[float, float, int]:
    runs = [_cli(*argv, tree=tree) for _ in range(n)]
    return min(runs)


def _archive(rev: str) -> str:
    """pte_lab at git revision ``rev``, unpacked in a temporary folder (its path)."""
    out = tempfile.mkdtemp(prefix="bench_kept_base_")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "pte_lab"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", out], input=archive.stdout, check=True)
    return out


def _compile(tree: Path) -> None:
    """Byte-compile pte_lab's modules under ``tree`` (what an install leaves; Python still checks each source's
    time and size, so a stale one is never used)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "pte_lab")], check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kept question (best kept)")
    ap.add_argument("--cold-repeat", type=int, default=3, help="runs of each measured question (best kept)")
    ap.add_argument("--base", metavar="REV", help="also run pte_lab at this git revision, printed beside")
    ap.add_argument("--only-what-if", action="store_true", help="the what-if question alone")
    a = ap.parse_args()
    base = _archive(a.base) if a.base else None
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
    trees = [("this tree", None)] + ([(a.base, base)] if base else [])
    for _, tree in trees:
        _compile(Path(tree) if tree else ROOT)
    for _, tree in trees:  # native parts built (and operator schemas looked up) before any timing
        for _, argv in questions:
            _cli(*argv, "--no-cache", tree=tree)
    print(f"{'question':30} {'tree':>10} {'measured CPU':>13} {'kept CPU':>9} {'ratio':>7} {'target':>12}"
          f"   (wall: measured, kept; exit)")
    for label, argv in questions:
        for name, tree in trees:
            cold = _best(a.cold_repeat, *argv, "--no-cache", tree=tree)
            _cli(*argv, tree=tree)  # keeps it
            warm = _best(a.repeat, *argv, tree=tree)
            target = "" if tree else "{:.1f}s, {:.1f}s".format(*TARGETS[label])
            print(f"{label:30} {name[:10]:>10} {cold[0]:12.2f}s {warm[0]:8.2f}s {cold[0] / warm[0]:6.1f}x "
                  f"{target:>12}   ({cold[1]:.2f} s, {warm[1]:.2f} s; {cold[2]}, {warm[2]})")
    if a.only_what_if:
        return
    no_run = _best(a.repeat, "sizes", str(foreign))
    measured = _best(a.cold_repeat, "sizes", str(portable), "--no-cache")
    print(f"{'cannot run here: the message':30} {no_run[0]:12.2f}s   (wall {no_run[1]:.2f} s, exit {no_run[2]}); "
          f"a runnable program measured: {measured[0]:.2f} s CPU")


if __name__ == "__main__":
    main()
