"""The errors pte_lab raises. Every one is a :class:`PteLabError`."""

from __future__ import annotations

__all__ = ["PteLabError", "PteFormatError"]


class PteLabError(Exception):
    """Base class of every error pte_lab raises on purpose."""


class PteFormatError(PteLabError, ValueError):
    """The bytes are not a valid ``.pte`` program.

    The message names what is wrong and where (a byte offset or a field path
    such as ``program.execution_plan[0].values[12]``).
    """
