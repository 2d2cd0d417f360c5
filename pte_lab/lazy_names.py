"""A package's public names loaded when first used (PEP 562), so that importing the package imports nothing
heavy: the one home of the pattern :mod:`pte_lab.model`, :mod:`pte_lab.runtime`, ``pte_lab.format`` and
``pte_lab.runtime.sizing`` use."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``) whose public names are ``names``
    (name -> the submodule defining it, relative to the package): each is imported on first access and kept
    in the package's namespace.

    A public name that is also its submodule's name (``pte_lab.runtime.run_all``, a function in the module
    ``run_all``) stays the function: importing the submodule binds it on the package, as Python does for every
    submodule, and the package's module type declines that one binding (an eager ``from .run_all import
    run_all`` rebound it the same way)."""

    def __getattr__(name: str):
        if name in names:
            module = importlib.import_module(f"{package}.{names[name]}")
            value = getattr(module, name)
            setattr(importlib.import_module(package), name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(names))

    shadowed = {n for n, where in names.items() if n == where}
    if shadowed:
        sys.modules[package].__class__ = _declining(shadowed)
    return __getattr__, __dir__


def _declining(shadowed: set[str]) -> type[types.ModuleType]:
    class Package(types.ModuleType):
        def __setattr__(self, name: str, value) -> None:
            if (name in shadowed and isinstance(value, types.ModuleType)
                    and value.__name__ == f"{self.__name__}.{name}"):
                return  # the submodule of a public name of the same name: the name stays what the package gives
            super().__setattr__(name, value)

    return Package
