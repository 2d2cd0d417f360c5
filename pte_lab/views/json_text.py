"""JSON as the command line prints it: containers indented, one row per line.

A container whose members are all scalars, or lists of scalars (a tensor row, an arena row, a shape), is
written on one line by Python's C encoder; every other container is indented one space per level, as
``json.dumps(doc, indent=1)`` indents it. Python's indenting encoder runs in Python: on a crafted program of
16,000 arenas it took 1.9 s for an 18 MB document that the C encoder writes in 0.4 s
(``benchmarks/RESULTS.md``). One row per line also reads as a table, and ``grep`` finds a row whole.
The text parses to the same document as ``json.dumps`` gives (``tests/test_cli.py``).
"""

from __future__ import annotations

import json

__all__ = ["json_text"]

_SCALARS = frozenset((str, int, float, bool, type(None)))


def json_text(doc, compact: bool = False) -> str:
    """``doc`` as JSON text: compact (``--compact``: one line), else indented with one row per line."""
    if compact:
        return json.dumps(doc)
    out: list[str] = []
    _emit(doc, 0, out)
    return "".join(out)


def _scalar(v) -> bool:
    """A JSON scalar: a string (a ``str`` enum too, such as a tensor's :class:`~pte_lab.vocabulary.Role`, which
    the encoder writes as its string), a number, a boolean or null."""
    t = type(v)
    return t in _SCALARS or issubclass(t, str)


def _is_row(members) -> bool:
    """Every member a scalar or a list of scalars: the container fits on one line."""
    for v in members:
        t = type(v)
        if _scalar(v):
            continue
        if (t is list or t is tuple) and all(map(_scalar, v)):
            continue
        return False
    return True


def _rows(items) -> list[str] | None:
    """A list of flat dicts (a table), each row's text, from one call of the C encoder; None when it is not
    one. The list's text is split between rows, at ``}, {``: exact when it holds one ``{`` and one ``}`` per
    row (none inside a nested dict or a string)."""
    if not all(type(x) is dict for x in items):
        return None
    text = json.dumps(items)
    if text.count("{") != len(items) or text.count("}") != len(items):
        return None
    return text[1:-1].split("}, {") if len(items) == 1 else _rejoin(text[1:-1].split("}, {"))


def _rejoin(parts: list[str]) -> list[str]:
    parts[0] += "}"
    parts[-1] = "{" + parts[-1]
    for k in range(1, len(parts) - 1):
        parts[k] = "{" + parts[k] + "}"
    return parts


def _key(k) -> str:
    # JSON keys are strings: json.dumps turns an int, float, bool or None key into its JSON spelling
    return json.dumps(k) if isinstance(k, str) else json.dumps({k: 0})[1:-4]


def _emit(obj, depth: int, out: list[str]) -> None:
    if isinstance(obj, dict) and obj and not _is_row(obj.values()):
        pad = "\n" + " " * (depth + 1)
        sep = "{"
        for k, v in obj.items():
            out.append(f"{sep}{pad}{_key(k)}: ")
            sep = ","
            _emit(v, depth + 1, out)
        out.append("\n" + " " * depth + "}")
    elif isinstance(obj, (list, tuple)) and obj and not _is_row(obj):
        pad = "\n" + " " * (depth + 1)
        rows = _rows(obj)
        if rows is not None:
            out.append("[" + pad + ("," + pad).join(rows) + "\n" + " " * depth + "]")
            return
        sep = "["
        for v in obj:
            out.append(sep + pad)
            sep = ","
            _emit(v, depth + 1, out)
        out.append("\n" + " " * depth + "]")
    else:
        out.append(json.dumps(obj))
