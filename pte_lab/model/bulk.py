"""Many small objects made at once, with the cyclic garbage collector paused meanwhile.

A method's decoded records, its tensor table and the JSON document's rows are
hundreds of thousands of tuples, lists and dicts for a 1 MB plan. They hold
no reference cycles, so the collector has nothing to free among them; yet
while they are made it walks every object the process holds (a notebook holds
millions) each time a few hundred more exist: a third of the time of such a
plan's analysis. :func:`paused_gc` stops it for the length of one such step
(the collector is process-wide: other threads see it paused too, for as long).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block (as it was before, after it)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
