"""Text from a file made safe inside C source: the one home of it for the header and the example runner.

A file's writer chose its names (methods, backends, operators): a newline must not end a ``//`` comment and
start code, ``*/`` must not end a block comment, and a quote must not end a string literal.
"""

from __future__ import annotations

from ..printable import printable

__all__ = ["c_comment", "c_string"]


def c_comment(text: str) -> str:
    """Text safe inside a C comment (``/* */`` or ``//``): control characters escaped (a newline from a
    file's name must not end a ``//`` comment and start code), ``*/`` broken."""
    return printable(text).replace("*/", "* /")


def c_string(text: str) -> str:
    """A C string literal with ``text``'s UTF-8 bytes (a name from the file: quotes, backslashes and
    control characters escaped, so that no name can end the literal)."""
    out = []
    for b in str(text).encode("utf-8"):
        c = chr(b)
        out.append("\\" + c if c in '"\\' else c if 32 <= b < 127 and c != "?" else f"\\{b:03o}")
    return '"' + "".join(out) + '"'
