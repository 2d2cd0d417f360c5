"""ETRecords of about 1 MB, crafted and real: every path that reads one, in a fresh process each.

    python benchmarks/bench_etrecord.py [--only NAME] [--paths read,sources] [--scale 1.0] [--no-real]
    python benchmarks/bench_etrecord.py --code DIR --timeout 60 ...   # another pte_lab (DIR/pte_lab): before
    python benchmarks/bench_etrecord.py --scaling    # the tests' generators at 1x and 4x: work ratios

Each crafted ETRecord (tests/crafting.py) is written near 1 MB (``--scale`` multiplies the sizes) beside a
program it fits, under benchmarks/out/etrecord/; the real one is the 8-layer portable transformer's
(benchmarks/bench_first_look.py exports it once). Paths:

  read      pte_lab.format.etrecord.read_etrecord(path), alone
  sources   pte_lab.open(program, etrecord=path): every method's sources and tensors table
  modules   the same, then by_module() of every method
  inspect   pte-lab inspect PROGRAM --etrecord PATH (its text to /dev/null)

Prints, per path, CPU and wall seconds of the path (after the imports), the process's peak RSS, and the
outcome: "ok" or the ETRecordError's first words. The target: within 2 s and 1 GiB for an ETRecord of 1 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
if os.environ.get("PTE_LAB_BENCH_CODE"):  # --one under --code: that checkout's pte_lab
    sys.path.insert(0, os.environ["PTE_LAB_BENCH_CODE"])

OUT = ROOT / "benchmarks" / "out" / "etrecord"
PATHS = ("read", "sources", "modules", "inspect")
MB = 1_000_000


def _padded(entries: list, size: int) -> bytes:
    """An archive of ``entries`` and a pickled state dict (never read) that brings it to about ``size`` bytes."""
    from tests.crafting import zip_archive

    pad = max(0, size - len(zip_archive(entries)) - 200)
    return zip_archive(entries + [("edge_dialect_exported_program/forward_state_dict", os.urandom(pad))])


def crafted(scale: float) -> dict[str, tuple[bytes, bytes, str]]:
    """name -> (program, ETRecord, what it is)."""
    from pte_lab.format.etrecord import EXPANSION_SLACK, MAX_EXPANSION
    from tests import crafting as c

    size = int(MB * scale)
    budget = MAX_EXPANSION * size + EXPANSION_SLACK - 4096
    small, _ = c.etr_stored_nodes(1, instructions=4)
    wide, _ = c.etr_stored_nodes(1, instructions=600)
    out = {
        "handle bomb": (small, c.etr_handle_bomb(int(50_000_000 * scale)),
                        "50 M handles of one instruction, deflated at 100x (the old bound)"),
        "node bomb": (small, c.etr_node_bomb(int(7_500_000 * scale)), "7.5 M nodes, deflated at 100x"),
        "many entries": (small, c.etr_many_entries(int(270 * scale)),
                         "270 edge programs of 1 MiB JSON each, deflated (~3.6 KB stored each)"),
    }
    n = int(13_400 * scale)  # minimal nodes (~74 B of JSON each) a stored MB holds
    program, etr = c.etr_stored_nodes(n, instructions=600)
    out["stored nodes"] = (program, etr, f"{n:,} nodes under the one handle of 600 instructions, stored")
    k = budget // 76  # ~74 B a node
    nodes = c.etr_minimal_nodes(k)
    assert len(nodes) < budget
    handles = b'{"forward":{' + b",".join(b'"%d":1' % i for i in range(600)) + b"}}"
    deflated = {"deflate": True}
    at_bound = _padded([("ETRECORD_V0", b""), ("debug_handle_map", handles),
                        ("edge_dialect_exported_program/forward", nodes, deflated)], size)
    out["nodes at the bound"] = (wide, at_bound,
                                 f"{k:,} nodes under one handle of 600 instructions, deflated to "
                                 f"{MAX_EXPANSION}x the file")
    many = budget // 2 - 64
    handle_list = b'{"forward":{"0":[' + b"1," * (many - 1) + b'1],"1":1,"2":1,"3":1}}'
    one = c.etr_minimal_nodes(1)
    at_bound = _padded([("ETRECORD_V0", b""), ("debug_handle_map", handle_list, deflated),
                        ("edge_dialect_exported_program/forward", one)], size)
    out["handles at the bound"] = (small, at_bound,
                                   f"{many:,} handles of one instruction, deflated to {MAX_EXPANSION}x the file")
    n = int(4_300 * scale)
    program, etr = c.delegates_sharing_a_handle(600, n)
    out["delegates sharing nodes"] = (program, etr, f"600 delegate calls listing one handle of {n:,} nodes")
    return out


def files(args) -> dict[str, tuple[Path, Path, str]]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = {}
    if not args.no_real and (args.only is None or args.only == "real"):
        from bench_first_look import with_etrecord

        pte, etr = with_etrecord(8)
        out["real"] = (pte, etr, "the 8-layer portable transformer's own ETRecord")
    for name, (program, etr, what) in crafted(args.scale).items():
        if args.only not in (None, name):
            continue
        stem = OUT / name.replace(" ", "_")
        pte_path, etr_path = stem.with_suffix(".pte"), stem.with_suffix(".etrecord")
        pte_path.write_bytes(program)
        etr_path.write_bytes(etr)
        out[name] = (pte_path, etr_path, what)
    return out


def one(path: str, pte: str, etr: str) -> dict:
    """Run one path in this (fresh) process: its CPU and wall seconds, peak RSS and outcome."""
    import pte_lab
    from pte_lab.cli import main as cli
    from pte_lab.errors import PteLabError
    from pte_lab.format.etrecord import read_etrecord

    def run():
        if path == "read":
            return read_etrecord(etr)
        if path == "inspect":
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                code = cli(["inspect", pte, "--etrecord", etr])
            if code:
                raise PteLabError(f"exit {code}: {err.getvalue().strip()}")
            return
        p = pte_lab.open(pte, etrecord=etr)
        for m in p.methods.values():
            m.sources, m.tensors
            if path == "modules":
                m.by_module()

    c, w = time.process_time(), time.perf_counter()
    try:
        run()
        outcome = "ok"
    except PteLabError as e:
        outcome = str(e).removeprefix("exit 2: pte-lab: error: ").removeprefix(f"{etr}: ")[:90]
    return {"cpu": time.process_time() - c, "wall": time.perf_counter() - w, "rss": _peak_rss(), "outcome": outcome}


def _peak_rss() -> int:
    """This process's peak resident bytes (VmHWM: ru_maxrss would keep the parent's peak across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def scaling() -> None:
    """Each crafted class of tests/test_etrecord_bounds.py at two sizes, 4x apart: the ratio of Python lines
    executed and of the traced peak (test_scaling's counts; linear is 4, quadratic 16, a refusal ~1)."""
    import pte_lab
    from pte_lab.errors import ETRecordError
    from pte_lab.format.etrecord import read_etrecord
    from tests import crafting as c
    from tests.test_scaling import _work

    def refused(data):
        return lambda: _expect(ETRecordError, lambda: read_etrecord(data))

    def attributed(pair, method="forward"):
        def run():
            m = pte_lab.open(pair[0], etrecord=pair[1]).methods[method]
            m.sources, m.tensors, m.by_module()
        return run

    def refused_sources(pair):
        return lambda: _expect(ETRecordError,
                               lambda: pte_lab.open(pair[0], etrecord=pair[1]).methods["forward"].sources)

    cases = {
        "handle bomb (1 M, 4 M handles)": [refused(c.etr_handle_bomb(n)) for n in (1_000_000, 4_000_000)],
        "node bomb (100,000, 400,000 nodes)": [refused(c.etr_node_bomb(n)) for n in (100_000, 400_000)],
        "many entries (40, 160)": [refused(c.etr_many_entries(k)) for k in (40, 160)],
        "stored nodes (2,000, 8,000)": [attributed(c.etr_stored_nodes(n)) for n in (2_000, 8_000)],
        "one handle (150 x 1,500, 600 x 6,000)": [attributed(c.program_and_etrecord(i, n))
                                                  for i, n in ((150, 1_500), (600, 6_000))],
        "shared by delegates (100 x 2,000, 400 x 8,000)": [refused_sources(c.delegates_sharing_a_handle(k, n))
                                                           for k, n in ((100, 2_000), (400, 8_000))],
    }
    print(f"{'crafted class':48} {'lines 1x':>10} {'lines 4x':>10} {'ratio':>6}  "
          f"{'peak 1x':>9} {'peak 4x':>9} {'ratio':>6}")
    for name, (small, large) in cases.items():
        small(), large()  # the first run pays for imports and caches
        (l1, p1), (l2, p2) = _work(small), _work(large)
        print(f"{name:48} {l1:>10,} {l2:>10,} {l2 / l1:>6.2f}  "
              f"{p1 / 2**20:>7.1f}Mi {p2 / 2**20:>7.1f}Mi {p2 / p1:>6.2f}")


def _expect(kind, fn) -> None:
    try:
        fn()
    except kind:
        return
    raise AssertionError(f"no {kind.__name__}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="one ETRecord by name (real, handle bomb, ...)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the crafted sizes (1.0: about 1 MB)")
    ap.add_argument("--no-real", action="store_true", help="leave the real ETRecord out (no torch export)")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    ap.add_argument("--code", help="the root of another pte_lab checkout to run the paths with (e.g. before a fix)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a path may run before it is stopped")
    ap.add_argument("--scaling", action="store_true", help="the tests' crafted classes at 1x and 4x: work ratios")
    ap.add_argument("--one", nargs=3, metavar=("PATH", "PTE", "ETRECORD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    if args.scaling:
        scaling()
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if args.code:
        env["PTE_LAB_BENCH_CODE"] = str(Path(args.code).resolve())
    print(f"pte_lab: {args.code or ROOT}")
    print(f"{'etrecord':24} {'bytes':>11}  {'path':8} {'cpu s':>6} {'wall s':>6} {'peak RSS':>9}  outcome")
    for name, (pte, etr, what) in files(args).items():
        print(f"# {name}: {what}")
        for path in args.paths.split(","):
            try:
                r = subprocess.run([sys.executable, __file__, "--one", path, str(pte), str(etr)], env=env,
                                   capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{name:24} {etr.stat().st_size:>11,}  {path:8} stopped past {args.timeout:g} s")
                continue
            if r.returncode:
                print(f"{name:24} {etr.stat().st_size:>11,}  {path:8} failed: "
                      f"{(r.stderr.strip().splitlines() or [''])[-1][:100]}")
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"{name:24} {etr.stat().st_size:>11,}  {path:8} {d['cpu']:6.3f} {d['wall']:6.3f} "
                  f"{d['rss'] / 2**20:>5.0f} MiB  {d['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
