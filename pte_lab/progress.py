"""Progress for long steps: a line per step with its elapsed time, or a bar where there is a count.

Functions that take long (exporting, sizing, verifying, measuring) accept
``progress``:

* ``None`` (the default): silent;
* ``True``: a bar counting the units of work, the current step beside it. In a
  notebook it is one output that is redrawn in place (an HTML ``<progress>`` with
  a text line for saved notebooks and plain viewers) and ends as one finished
  line, ``sizing: done, 1/1 in 12.3 s``; elsewhere it is a tqdm text bar;
* a callable: called with one line per step (the CLI passes ``lines``).

Code deep inside a long operation that has no reporter of its own to hand (a native part compiled on first use,
torch imported to check operators' schemas, the install's registry probed) says its step with ``tell``;
whoever runs the operation hears it inside ``telling``, so that a first answer's wait is never silent.
"""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html import escape

__all__ = ["Reporter", "reporter", "lines", "telling", "tell"]


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (where a display can be redrawn in place)."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _DisplayBar:
    """A bar drawn as one display output and replaced as it goes (``update_display``): what a saved
    notebook keeps is its last state, so a finished bar reads finished, in HTML and in text."""

    def __init__(self, total: int | None, desc: str):
        from IPython.display import display

        self.total, self.desc, self.n, self.text = total, desc or "progress", 0, ""
        self.start = time.monotonic()
        self._handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self, end: str | None = None) -> dict:
        seconds = time.monotonic() - self.start
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        if end is None:
            line = f"{self.desc}: {count} after {seconds:.1f} s" + (f" · {self.text}" if self.text else "")
        else:
            line = f"{self.desc}: {end}, {count} in {seconds:.1f} s"
        bar = (f"<progress value='{self.n}' max='{self.total}' style='width:12em'></progress> "
               if self.total else "")
        return {"text/plain": line, "text/html": f"<div style='font-size:12px'>{bar}{escape(line)}</div>"}

    def _draw(self, end: str | None = None) -> None:
        self._handle.update(self._bundle(end), raw=True)

    def step(self, text: str) -> None:
        self.text = text
        self._draw()

    def reset(self, total: int) -> None:
        self.total, self.n = total, 0
        self._draw()

    def update(self, n: int) -> None:
        self.n += n
        self._draw()

    def close(self, failed: bool = False) -> None:
        self._draw("stopped" if failed else "done")


class Reporter:
    """What a long operation tells as it goes: ``step(text)`` starts a step, ``advance()`` counts one unit."""

    def __init__(self, progress=None, total: int | None = None, desc: str = ""):
        self._say: Callable[[str], None] | None = progress if callable(progress) else None
        self._bar = None
        self._display = None
        if progress is True:
            if _in_notebook():
                self._display = _DisplayBar(total, desc)
            else:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, desc=desc, leave=True)

    def step(self, text: str) -> None:
        if self._say is not None:
            self._say(text)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)
        if self._display is not None:
            self._display.step(text)

    def set_total(self, total: int) -> None:
        """The count, once it is known."""
        if self._bar is not None:
            self._bar.reset(total=total)
        if self._display is not None:
            self._display.reset(total)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)
        if self._display is not None:
            self._display.update(n)

    def close(self, failed: bool = False) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str("stopped" if failed else "done", refresh=False)
            self._bar.close()
            self._bar = None
        if self._display is not None:
            self._display.close(failed)
            self._display = None

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(failed=exc_type is not None)


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


#: who hears a step said with :func:`tell` (:func:`telling`): a front's progress report, or nobody
_TELL: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("pte_lab_tell", default=None)


@contextmanager
def telling(say) -> Iterator[None]:
    """Inside the block, each step said with :func:`tell` goes to ``say``: a :class:`Reporter`'s ``step`` (a
    line, or a bar's text), or a callable taking one line; None or True (a bar not made yet) hear nothing."""
    token = _TELL.set(say if callable(say) else None)
    try:
        yield
    finally:
        _TELL.reset(token)


def tell(text: str) -> None:
    """Say a step that takes seconds (a native part built, torch imported) to whoever is :func:`telling`."""
    say = _TELL.get()
    if say is not None:
        say(text)
