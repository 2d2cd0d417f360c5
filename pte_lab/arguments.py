"""The public functions' arguments, checked where they enter: one home for what each kind of argument may be.

A notebook passes what it has at hand; a wrong type must end in one line naming the argument and what it
takes (:class:`~pte_lab.errors.ArgumentTypeError`), not in a ``TypeError`` from deep inside a reader or in
an answer computed from the wrong thing. A function declares its arguments' kinds once::

    @arguments(source=SOURCE, data=optional(SOURCE), etrecord=optional(PATH_OR_BYTES))
    def open(source, data=None, *, etrecord=None): ...

Each is an :class:`Accepts` (a test and the words the message uses). Pure Python, standard library only:
``import pte_lab`` stays light, and a kind that names a class of pte_lab's (an opened program) names it by
its module and class, so the check imports nothing.
"""

from __future__ import annotations

import functools
import io
import os
import reprlib
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING

from .errors import ArgumentTypeError, ArgumentValueError
from .printable import printable

if TYPE_CHECKING:
    from typing import Any
    from collections.abc import Callable

__all__ = ["Accepts", "arguments", "optional", "either", "instance", "SOURCE", "PATH", "PATH_OR_BYTES", "NAME",
           "NAMES", "BOOL", "COUNT", "PTE", "PROGRAM", "PROGRAM_FILE", "TWO_NAMES", "DIM",
           "SIZE", "AT_LEAST_ONE", "BYTES", "PROGRESS", "TWO", "DIM_SIZES"]


class Accepts:
    """What an argument may be: ``test(value)`` is True for its kind, ``words`` say it (``a path or bytes``);
    ``valid(value)``, where given, is True for the values of that kind it takes (``valid_words``: which)."""

    __slots__ = ("test", "words", "valid", "valid_words")

    def __init__(self, test: "Callable[[Any], bool]", words: str, valid: "Callable[[Any], bool] | None" = None,
                 valid_words: str = ""):
        self.test, self.words, self.valid, self.valid_words = test, words, valid, valid_words


def optional(kind: Accepts) -> Accepts:
    """``kind``, or None."""
    return Accepts(lambda v: v is None or kind.test(v), f"{kind.words}, or None",
                   None if kind.valid is None else (lambda v: v is None or kind.valid(v)), kind.valid_words)


def _is_path(v) -> bool:
    return isinstance(v, (str, os.PathLike)) and not isinstance(v, bool)


def _is_bytes(v) -> bool:
    return isinstance(v, (bytes, bytearray, memoryview))


def _is_binary_file(v) -> bool:
    return hasattr(v, "read") and hasattr(v, "seek") and not isinstance(v, (str, bytes, io.TextIOBase))


PATH = Accepts(_is_path, "a path (str or os.PathLike)")
PATH_OR_BYTES = Accepts(lambda v: _is_path(v) or _is_bytes(v), "a path (str or os.PathLike) or bytes")
#: what the readers open: a path, the file's bytes, or a binary file opened for reading
SOURCE = Accepts(lambda v: _is_path(v) or _is_bytes(v) or _is_binary_file(v),
                 "a path (str or os.PathLike), bytes or a binary file")
NAME = Accepts(lambda v: isinstance(v, str), "a name (str)")
#: names: a collection of str (each checked), or an iterator (its items are the function's to check: reading
#: them here would consume them)
NAMES = Accepts(lambda v: not isinstance(v, (str, bytes, bytearray)) and (
    isinstance(v, Iterator) or (isinstance(v, Collection) and all(isinstance(x, str) for x in v))),
    "a list of names (str)")
BOOL = Accepts(lambda v: isinstance(v, bool), "True or False")
COUNT = Accepts(lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
#: a count of runs, of calls...: from 1 (beyond int64 nothing can count it)
AT_LEAST_ONE = Accepts(COUNT.test, "an integer", lambda v: v >= 1 and v.bit_length() < 64, "from 1 to 2**63 - 1")
#: a number of bytes: from 0
BYTES = Accepts(COUNT.test, "an integer", lambda v: v >= 0 and v.bit_length() < 64,
                "a number of bytes, from 0 to 2**63 - 1")
#: what pte_lab.progress takes: None (silent), True (a bar) or a callable taking one line
PROGRESS = Accepts(lambda v: v is None or v is True or callable(v), "None, True or a callable taking one line")
#: values in order (a set has none; how many, the function says)
TWO = Accepts(lambda v: isinstance(v, (tuple, list)), "values in order (a tuple or a list)")


def instance(module: str, name: str, words: str) -> Accepts:
    """An instance of ``module.name`` (or of a subclass), tested without importing ``module``: the value's
    class's MRO is read by name."""
    return Accepts(lambda v: any(c.__module__ == module and c.__qualname__ == name for c in type(v).__mro__), words)


def either(*kinds: Accepts) -> Accepts:
    """Any of ``kinds``."""
    return Accepts(lambda v: any(k.test(v) for k in kinds), ", or ".join(k.words for k in kinds))


#: a size: bytes, or a text with its unit
SIZE = Accepts(lambda v: COUNT.test(v) or isinstance(v, str), "a number of bytes (int) or a size (str: '300MiB')")
#: bounds or a shape: ``{(input, axis): size}``, each size a whole number
DIM_SIZES = Accepts(
    lambda v: isinstance(v, Mapping) and all(
        isinstance(k, tuple) and len(k) == 2 and all(COUNT.test(x) for x in k) and COUNT.test(n)
        for k, n in v.items()),
    "a dict {(input, axis): size} of integers")
#: a dynamic dim: ``(input, axis)``
DIM = Accepts(lambda v: isinstance(v, tuple) and len(v) == 2 and all(COUNT.test(x) for x in v),
              "(input, axis): two integers")
#: a program opened by pte_lab.open
PTE = instance("pte_lab.model.pte", "Pte", "a program opened by pte_lab.open")
#: a program: what the readers open, or one already opened
PROGRAM = either(SOURCE, PTE)
#: a program on disk: a path, or one opened from a path
PROGRAM_FILE = either(PATH, PTE)
#: two labels, one per side
TWO_NAMES = Accepts(lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, str) for x in v),
                 "two names (str)")


def _shown(value) -> str:
    """A short repr (reprlib's: bounded work, whatever the value's size), terminal-safe."""
    return printable(reprlib.repr(value))


#: ``inspect.CO_VARARGS | inspect.CO_VARKEYWORDS`` (a function taking ``*args`` or ``**kwargs``), without importing
#: inspect with pte_lab
_STAR_ARGUMENTS = 0x04 | 0x08


def arguments(**kinds: Accepts):
    """Decorate a public function: each argument named in ``kinds`` is checked before the function runs, and
    a value of another kind raises :class:`~pte_lab.errors.ArgumentTypeError` naming the function, the
    argument, what it takes and what it got. Arguments not named are the function's own to check."""

    def decorate(fn):
        code = fn.__code__
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        unknown = set(kinds) - set(names)
        if unknown:  # a slip in the declaration, found at import
            raise AssertionError(f"{fn.__qualname__} has no argument {', '.join(sorted(unknown))}")
        where = f"pte_lab.{fn.__name__}"

        @functools.cache
        def signature():
            import inspect  # at the first call, not with ``import pte_lab``

            return inspect.signature(fn)

        positional = code.co_varnames[: code.co_argcount]
        required = code.co_argcount - len(fn.__defaults__ or ())
        # positional arguments alone need no binding where the function takes no *args, **kwargs or keyword-only
        # argument without a default: each is the parameter at its place (what bind would give, and no more)
        simple = (not code.co_flags & _STAR_ARGUMENTS
                  and set(names[code.co_argcount:]) <= set(fn.__kwdefaults__ or ()))

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            if simple and not kwargs and required <= len(args) <= len(positional):
                given = zip(positional, args)
            else:
                try:
                    given = signature().bind(*args, **kwargs).arguments.items()
                except TypeError as exc:  # a missing or unexpected argument: the same words, the project's error
                    raise ArgumentTypeError(f"{where}(): {exc}") from None
            for name, value in given:
                kind = kinds.get(name)
                if kind is None:
                    continue
                if not kind.test(value):
                    raise ArgumentTypeError(f"{where}(): argument {name!r} takes {kind.words}; got "
                                            f"{type(value).__name__} {_shown(value)}")
                if kind.valid is not None and not kind.valid(value):
                    raise ArgumentValueError(f"{where}(): argument {name!r} takes {kind.valid_words}; got "
                                             f"{_shown(value)}")
            return fn(*args, **kwargs)

        return checked

    return decorate
