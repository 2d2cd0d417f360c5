"""Opening a path from outside: regular files only, refused before anything is read.

A path may name a FIFO (whose ``open`` blocks until a writer comes), a device (``/dev/zero`` never ends,
``/dev/stdin`` waits for a terminal), a socket or a folder. Every path pte_lab reads (a program, its data
file, an ETRecord) is opened here: without blocking, checked on the opened descriptor (no window between a
check and the open), and refused with :class:`~pte_lab.errors.NotARegularFileError` unless it is a regular
file. Pure Python, standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from ..errors import FileMissingError, NotARegularFileError, UnreadableFileError
from ..printable import printable

__all__ = ["open_regular", "check_regular", "check_writable"]

#: what each kind of non-regular file is called in the message
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _refuse(path: str, mode: int, what: str) -> NotARegularFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return NotARegularFileError(f"{printable(path)} is {kind}, not {what}: pte_lab reads regular files only")


def _unreadable(path: str, exc: BaseException) -> UnreadableFileError:
    """The project's error for a path the system refused (``exc``: what ``os.open`` or ``os.stat`` raised)."""
    if isinstance(exc, ValueError):  # a NUL byte in the name
        return UnreadableFileError(errno.EINVAL, "not a path: it holds a NUL byte", path.replace("\0", "\\0"))
    cls = FileMissingError if isinstance(exc, FileNotFoundError) else UnreadableFileError
    return cls(exc.errno, exc.strerror or str(exc), path)


def check_regular(path, what: str = "a file") -> None:
    """Raise :class:`~pte_lab.errors.NotARegularFileError` unless ``path`` is a regular file (following
    links); a missing path raises :class:`~pte_lab.errors.FileMissingError` (a ``FileNotFoundError``), one the
    system refuses :class:`~pte_lab.errors.UnreadableFileError` (an ``OSError``)."""
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None
    if not stat.S_ISREG(mode):
        raise _refuse(path, mode, what)


def open_regular(path, what: str = "a file") -> BinaryIO:
    """``open(path, "rb")`` for a regular file; anything else is refused without blocking and unread."""
    path = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:  # where a folder cannot be opened at all
        raise _refuse(path, stat.S_IFDIR, what) from None
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(path, mode, what)
        # O_NONBLOCK is left set: it has no effect on a regular file's reads (two system calls saved)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_writable(path, what: str = "a file") -> None:
    """Refuse, before any work, a path to write that names something other than a regular file or nothing:
    a FIFO (writing would block), a device (``/dev/null``: pte_lab writes through a temporary file renamed into
    place, which would replace the node), a socket, a folder, or a symbolic link (replaced, not followed).
    Raises :class:`~pte_lab.errors.NotARegularFileError`."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotARegularFileError(f"{printable(path)}: cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise NotARegularFileError(f"{printable(path)} is a symbolic link, not {what}: pte_lab writes regular files "
                                   f"only (it would replace the link); give the path it points to")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise NotARegularFileError(f"{printable(path)} is {kind}, not {what}: pte_lab writes regular files only")
