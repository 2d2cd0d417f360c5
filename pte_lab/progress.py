"""Progress for long steps: a line per step with its elapsed time, or a bar where there is a count.

Functions that take long (exporting, sizing, verifying, measuring) accept
``progress``:

* ``None`` (the default): silent;
* ``True``: a tqdm bar (``tqdm.auto``: a widget in a notebook, text in a
  terminal) counting the units of work, the current step beside it;
* a callable: called with one line per step (the CLI passes :func:`lines`).
"""

from __future__ import annotations

import sys
import time
from typing import Callable

__all__ = ["Reporter", "reporter", "lines"]


class Reporter:
    """What a long operation tells as it goes: ``step(text)`` starts a step, ``advance()`` counts one unit."""

    def __init__(self, progress=None, total: int | None = None, desc: str = ""):
        self._say: Callable[[str], None] | None = progress if callable(progress) else None
        self._bar = None
        if progress is True:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, leave=True)

    def step(self, text: str) -> None:
        if self._say is not None:
            self._say(text)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def set_total(self, total: int) -> None:
        """The count, once it is known."""
        if self._bar is not None:
            self._bar.reset(total=total)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str("done", refresh=False)
            self._bar.close()

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def reporter(progress=None, total: int | None = None, desc: str = "") -> Reporter:
    """A :class:`Reporter` for ``progress`` (None, True or a callable taking a line)."""
    if progress is not None and progress is not True and not callable(progress):
        raise TypeError(f"progress must be None, True or a callable taking one line, not {progress!r}")
    return Reporter(progress, total, desc)


def lines(prefix: str = "pte-lab: ", stream=None) -> Callable[[str], None]:
    """A line printer: ``pte-lab: [  4.6 s] text`` on ``stream`` (default stderr), time from now."""
    start = time.monotonic()

    def say(text: str) -> None:
        print(f"{prefix}[{time.monotonic() - start:5.1f} s] {text}", file=stream or sys.stderr, flush=True)

    return say
