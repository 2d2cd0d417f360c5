"""``cached_property`` without the lock Python 3.10 and 3.11 take on every first computation.

functools' ``cached_property`` before Python 3.12 holds one lock per property (shared by every instance of the
class) around each first computation: about 0.8 us more per computation here, paid by each of the two dozen
properties a first look asks for, and two threads computing the properties of two different programs wait for
each other. Python 3.12 dropped the lock (a computation may then run twice in two threads, and the second
result is kept: each of pte_lab's properties is a pure function of a read-only file, so either result is the
same). This subclass does what 3.12 does on every Python pte_lab supports; being a subclass, type checkers and
Sphinx treat it as functools' own.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["cached_property"]


class cached_property(functools.cached_property):
    """:func:`functools.cached_property` as Python 3.12 has it: computed on first access, kept in the instance's
    ``__dict__`` (which later accesses read without calling this), no lock."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value
