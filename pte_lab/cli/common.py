"""What the commands share: the parser that says a bad value in one line, the converters of what a user types
(counts, sizes, a file to write), the options two commands take, and the error line."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import NotARegularFileError
from ..printable import printable
from ..units import human_bytes, parse_bytes, parse_whole
from ..vocabulary import DEFAULT_INPUT_LIMIT, INPUT_LIMIT_ENV

#: the largest matrix side an example is exported at (``--side``): 16,384 float32s square are 1 GiB
MOST_SIDE = 16_384


class Parser(argparse.ArgumentParser):
    """Bad values are one line naming the argument; a missing or unknown one prints the usage too."""

    def error(self, message):
        if "unrecognized arguments" in message or "required" in message or "invalid choice" in message:
            super().error(message)
        self.exit(2, f"pte-lab: error: {message}\n")


class Deprecated(argparse.Action):
    """An old flag kept as an alias of ``new``: it sets the same destination and says so, once, on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stderr.write(f"pte-lab: {option_string} is deprecated, use {self.new}\n")
        setattr(namespace, self.dest, True)


def whole(least: int | None, most: int | None = None):
    """A count (``--runs``, ``--at``...): exact, at least ``least``, at most ``most`` (where a larger one would
    only cost memory: a picture's columns, an example's matrix side), refused beyond what int64 holds."""
    def parse(text: str) -> int:
        try:
            n = parse_whole(text, least)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if most is not None and n > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:,}, not {n:,}")
        return n

    return parse


def byte_size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def max_input_bytes_option(parser, what: str) -> None:
    """``--max-input-bytes``: the most pte_lab builds at sizes the file declares (:func:`pte_lab.runtime.inputs.input_limit`)."""
    parser.add_argument("--max-input-bytes", type=byte_size, metavar="SIZE",
                        help=f"the most bytes pte_lab builds at sizes the file declares: {what}; more is refused, "
                             f"nothing built, exit 2 (default {human_bytes(DEFAULT_INPUT_LIMIT)}, or ${INPUT_LIMIT_ENV}; "
                             f"never more than the memory free)")


def no_cache_option(parser, help: str) -> None:
    """``--no-cache``: measure afresh, keep nothing (the commands whose answers :mod:`pte_lab.runtime.kept` keeps:
    ``sizes``, ``what-if``, ``diff --sizes``; ``pte-lab cache`` shows and clears them)."""
    parser.add_argument("--no-cache", action="store_true", help=help)


def new_file(text: str) -> str:
    """A file to write: its folder must exist, and the path names a regular file or nothing (checked before any
    work: a FIFO would block, a device or a link would be replaced)."""
    from ..format.regular_file import check_writable  # pte_lab.format loads the readers: not for --help

    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file to write")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"the folder {folder!r} does not exist")
    try:
        check_writable(text, "a file to write")
    except NotARegularFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


#: the longest error line the CLI prints: a name from a file can be any length, a line should be read
MOST_ERROR_CHARACTERS = 2_000


def one_line(exc: BaseException) -> str:
    """A PteLabError as one line (its first), every name from the file in it shown escaped, its middle left out
    past :data:`MOST_ERROR_CHARACTERS`."""
    text = str(exc).strip()
    line = printable(text.split("\n")[0] if text else type(exc).__name__)
    if len(line) <= MOST_ERROR_CHARACTERS:
        return line
    half = MOST_ERROR_CHARACTERS // 2
    return f"{line[:half]} ...({len(line) - 2 * half:,} characters left out)... {line[-half:]}"


def os_line(exc: OSError) -> str:
    """A file the system refused (missing, unreadable, a full disk): its type, what and where, one line."""
    text = str(exc).strip()
    return printable(f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": "))
