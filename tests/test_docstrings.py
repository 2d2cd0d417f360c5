"""The docstrings are the API reference (docs/api.md): every public name of ``pte_lab``, ``pte_lab.plot``,
``pte_lab.runtime`` and ``pte_lab.planning`` says what it is, and a callable says what it returns and what it
raises. The test lists the names whose docstring does not."""

from __future__ import annotations

import importlib
import inspect
import re

MODULES = ["pte_lab", "pte_lab.plot", "pte_lab.runtime", "pte_lab.planning"]


def public_names(module_name: str) -> list[tuple[str, object]]:
    """``(qualified name, object)`` for each public name: the module's ``__all__``, else what it defines."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)
                 and (getattr(v, "__module__", None) or "").startswith(module_name)]
    return [(f"{module_name}.{n}", getattr(module, n)) for n in names if not n.startswith("__")]


def missing(obj) -> str | None:
    """What the docstring of ``obj`` lacks, or None. Constants (no docstring of their own) are left out."""
    if not (inspect.isclass(obj) or callable(obj)) or inspect.ismodule(obj):
        return None
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):  # a dataclass's signature
        return "no docstring"
    if inspect.isclass(obj):
        if issubclass(obj, Warning):
            return None if re.search(r"\bwarn", doc, re.I) else "does not say when it is warned"
        if issubclass(obj, BaseException):
            return None if re.search(r"\brais(e|es|ed)\b", doc, re.I) else "does not say when it is raised"
        return None
    lacks = [what for what, word in (("returns", r"\breturns?\b|\byields?\b"), ("raises", r"\brais(es|e|ed)\b"))
             if not re.search(word, doc, re.I)]
    return f"does not say what it {' or '.join(lacks)}" if lacks else None


def test_every_public_name_says_what_it_returns_and_raises():
    bad = [f"{name}: {why}" for module in MODULES for name, obj in public_names(module)
           if (why := missing(obj))]
    assert not bad, "\n".join(bad)


def test_the_check_finds_what_a_docstring_lacks():
    def quiet():
        """The answer. Returns 42; raises nothing."""

    def vague():
        """Does a thing."""

    class Refused(Exception):
        """A file was refused."""

    assert missing(quiet) is None
    assert missing(vague) == "does not say what it returns or raises"
    assert missing(Refused) == "does not say when it is raised"
    assert missing(42) is None
