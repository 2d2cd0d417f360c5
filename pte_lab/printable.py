"""Names from a file, safe to show: the one home of escaping for text output.

A file names many things (methods, tensors, backends, operators, named-data
keys), and its writer chose the bytes: an escape sequence (``\\x1b[2J``), a
carriage return or a bell in a name must not reach the terminal. Text output
shows each such character as Python's ``repr`` of it does (``\\x1b``, ``\\r``,
``\\u202e``); everything else is kept as it is. The CLI, the text views and the
reprs use it; the HTML escapes for itself, JSON for itself.

Pure Python, standard library only.
"""

from __future__ import annotations

import functools
import re

__all__ = ["printable", "printable_text"]

# C0 and C1 controls, DEL, and the invisible or direction-changing format characters
# (and lone surrogates: a file name's bytes that are not UTF-8, which no UTF-8 stream can write)
_UNSAFE = ("\x00-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff"
           "\ufff9-\ufffb")
_NAME = re.compile(f"[{_UNSAFE}]")
_TEXT = re.compile(f"[{_UNSAFE.replace(chr(0) + '-' + chr(0x1f), chr(0) + '-' + chr(8) + chr(11) + '-' + chr(0x1f))}]")


def _escape(m: re.Match) -> str:
    return repr(m.group())[1:-1]


def printable(name) -> str:
    """One name on one line: every control character escaped as Python writes it (``\\x1b``, ``\\n``)."""
    s = str(name)
    return _NAME.sub(_escape, s) if _NAME.search(s) else s


def printable_text(text: str) -> str:
    """Lines of text: control characters escaped, the newlines (and tabs) that lay the text out kept."""
    return _TEXT.sub(_escape, text) if _TEXT.search(text) else text


def text_view(fn):
    """Decorate a function that returns text for the terminal: its result goes through :func:`printable_text`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return printable_text(fn(*args, **kwargs))

    return wrapper
