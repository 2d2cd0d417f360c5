"""A long fuzzing campaign against pte_lab.open and the full analysis.

    python benchmarks/fuzz_open.py [--cases N] [--seconds S] [--seed K] [--out DIR]

Exports the example programs (once), then applies seeded mutations
(byte flips, 32/64-bit word overwrites with edge values, truncations, splices
of one program into another) and runs everything a user can ask of the
result. Any outcome other than success or PteFormatError is a bug: the input
is saved under --out and the script exits 1. Prints cases per second and the
slowest case.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import traceback
from pathlib import Path

import pte_lab
from pte_lab import PteFormatError

NAMES = ["portable", "xnnpack", "device", "kv_cache", "dynamic", "cond", "unplanned_io"]


def analyse(pte):
    if isinstance(pte, pte_lab.DataFile):  # a .ptd
        repr(pte), pte._repr_html_(), pte.table()
        return
    for k, s in enumerate(pte.bundled.suites if pte.bundled else ()):
        for i in range(s.cases):
            pte.bundled.case(k, i)
    for m in pte.methods.values():
        m.arenas, m.planned, m.inputs, m.outputs, m.instructions, m.delegates, m.findings()
    pte.warnings()
    pte.to_dict()
    repr(pte)
    pte._repr_html_()


def mutate(rng: random.Random, data: bytes, flat: int, other: bytes) -> bytes:
    buf = bytearray(data)
    r = rng.random()
    if r < 0.1:
        return bytes(buf[: rng.randrange(0, len(buf))])
    if r < 0.2:
        a = rng.randrange(0, flat)
        b = rng.randrange(0, len(other))
        n = rng.randint(1, 256)
        buf[a : a + n] = other[b : b + n]
        return bytes(buf)
    for _ in range(rng.randint(1, 6)):
        k = rng.random()
        if k < 0.4:
            buf[rng.randrange(0, flat)] = rng.randrange(256)
        elif k < 0.8:
            pos = rng.randrange(0, max(1, flat - 4))
            buf[pos : pos + 4] = struct.pack(
                "<I", rng.choice([0, 1, 2, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, rng.randrange(2**32)]))
        else:
            pos = rng.randrange(0, max(1, flat - 8))
            buf[pos : pos + 8] = struct.pack("<q", rng.choice([-1, 0, 2**62, 2**63 - 1, rng.randrange(2**40)]))
    return bytes(buf)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/out/fuzz")
    args = ap.parse_args()
    from pte_lab import examples

    import tempfile

    programs = {n: examples.build(n) for n in NAMES}
    flats = {n: pte_lab.open(b).flatbuffer_size for n, b in programs.items()}
    # a bundled program (one flatbuffer around the carried program) and an external data file
    programs["bundled"] = examples.build("bundled")
    flats["bundled"] = len(programs["bundled"])
    with tempfile.TemporaryDirectory() as tmp:
        examples.save("external", Path(tmp) / "external.pte")
        (ptd,) = Path(tmp).glob("*.ptd")
        programs["ptd"] = ptd.read_bytes()
    flats["ptd"] = pte_lab.open(programs["ptd"])._raw.header.flatbuffer_end
    names = list(programs)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    stats = {"ok": 0, "PteFormatError": 0}
    by_kind = {n: 0 for n in names}
    slowest = (0.0, None)
    i = 0
    while i < args.cases and time.perf_counter() - t0 < args.seconds:
        name = rng.choice(names)
        data = mutate(rng, programs[name], flats[name], programs[rng.choice(names)])
        by_kind[name] += 1
        t = time.perf_counter()
        try:
            analyse(pte_lab.open(data))
            stats["ok"] += 1
        except PteFormatError:
            stats["PteFormatError"] += 1
        except Exception:  # noqa: BLE001 - any other outcome is a bug
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"crash-{args.seed}-{i}.pte"
            path.write_bytes(data)
            traceback.print_exc()
            print(f"BUG: case {i} ({name}) raised a non-PteFormatError; input saved to {path}")
            return 1
        dt = time.perf_counter() - t
        if dt > slowest[0]:
            slowest = (dt, i)
        i += 1
    wall = time.perf_counter() - t0
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{i} cases in {wall:.1f} s ({i / wall:.0f}/s): {stats}; slowest case {slowest[0] * 1000:.1f} ms "
          f"(#{slowest[1]}); peak RSS {rss:.0f} MiB; cases per file: {by_kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
