"""A package's public names loaded when first used (PEP 562), so that importing the package imports nothing
heavy: the one home of the pattern :mod:`pte_lab.model` and :mod:`pte_lab.runtime` use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``) whose public names are ``names``
    (name -> the submodule defining it, relative to the package): each is imported on first access and kept
    in the package's namespace."""

    def __getattr__(name: str):
        if name in names:
            module = importlib.import_module(f"{package}.{names[name]}")
            value = getattr(module, name)
            setattr(importlib.import_module(package), name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(names))

    return __getattr__, __dir__
