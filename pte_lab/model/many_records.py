"""Many small records made at once: a 1 MB plan may have 125,000 planned tensors or arenas.

* :func:`paused_gc`: a method's decoded records, its tensor table and the JSON
  document's rows are hundreds of thousands of tuples, lists and dicts. They
  hold no reference cycles, so the cyclic collector has nothing to free among
  them; yet while they are made it walks every object the process holds (a
  notebook holds millions) each time a few hundred more exist: a third of the
  time of such a plan's analysis. It is paused for the length of one such step
  (the collector is process-wide: other threads see it paused too, as long).
* :func:`dict_maker`: a dict display (``{"a": a, "b": b}``) is the fastest dict
  Python builds, twice as fast as ``dict(zip(keys, row))``.
* :func:`frozen_records`: a frozen dataclass's ``__init__`` sets each field
  through ``object.__setattr__``; setting its ``__dict__`` at once takes half as
  long and makes the same record.
"""

from __future__ import annotations

import dataclasses
from contextlib import ContextDecorator
import gc
from functools import lru_cache
from collections.abc import Callable


class paused_gc(ContextDecorator):
    """No cyclic garbage collection inside the block (as it was before, after it); as a decorator, inside each
    call. A class, not a generator: a first look enters a few of these, and a generator's context manager costs
    several times more."""

    def _recreate_cm(self) -> "paused_gc":
        return paused_gc()  # each decorated call its own (calls may nest)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was:
            gc.enable()


@lru_cache(maxsize=64)  # compiled once per record type, not once per method
def dict_maker(fields: tuple[str, ...], keys: tuple[str, ...] | None = None) -> Callable[..., dict]:
    """``f(*values) -> {key: value}``, one value per field (identifiers), the ``keys`` among them kept
    (default all), as one dict display."""
    shown = ", ".join(f"{k!r}: {k}" for k in (fields if keys is None else keys))
    return eval(f"lambda {', '.join(fields)}: {{{shown}}}")


@lru_cache(maxsize=64)
def _fields_of(cls) -> Callable[..., dict]:
    """:func:`dict_maker` of a record type's fields (looked up once per type, not once per method)."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__: make its records with {cls.__name__}(...)")
    return dict_maker(tuple(f.name for f in dataclasses.fields(cls)))


def frozen_records(cls, *columns) -> list:
    """``[cls(*fields) for fields in zip(*columns)]`` for a dataclass without ``__post_init__``."""
    values_of = _fields_of(cls)
    new, set_ = object.__new__, object.__setattr__
    out = []
    for values in map(values_of, *columns):
        record = new(cls)
        set_(record, "__dict__", values)
        out.append(record)
    return out
