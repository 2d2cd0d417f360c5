"""Seeded structure-aware mutations of a file, shared by the readers' fuzz tests."""

from __future__ import annotations

import random
import struct


def mutations(data: bytes, flat: int, seed: str, n: int):
    """``n`` mutants of ``data``: truncations, byte flips, and absurd 32/64-bit values in the first ``flat`` bytes."""
    rng = random.Random(seed)
    for _ in range(n):
        buf = bytearray(data)
        r = rng.random()
        if r < 0.15:
            buf = buf[: rng.randrange(0, len(buf))]
        elif r < 0.55:
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(0, flat)] = rng.randrange(256)
        elif r < 0.85:
            pos = rng.randrange(0, flat - 4) & ~3
            buf[pos : pos + 4] = struct.pack("<I", rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, rng.randrange(2**32)]))
        else:
            pos = rng.randrange(0, flat - 8) & ~7
            buf[pos : pos + 8] = struct.pack("<q", rng.choice([-1, 2**62, rng.randrange(2**40)]))
        yield bytes(buf)
