"""The step before ExecuTorch sees a file: pte_lab's reader checks every table the runtime reads.

:func:`checked` opens a ``.pte`` (or ``.bpte``) with pte_lab's reader, decodes
every table the runtime will read, refuses what would make the runtime read
or write outside memory (:data:`~pte_lab.model.findings.UNSAFE_TO_LOAD`) and
returns the program with the errors it found that do not stop a load (reasons
to run the runtime in a worker). Every front of the runtime (``load``,
``sizes``) starts here.

The decoded records of an unchanged file are checked once: they are cached by
path, device, inode, size and modification time. Records never change after
decoding; each call builds its own :class:`~pte_lab.model.Pte` over them, so
nothing mutable is shared between callers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from ..errors import PteFormatError
from ..format import RawProgram
from ..model import Pte, open_data, open_pte
from ..model.findings import REFUSED_BY_RUNTIME, UNSAFE_TO_LOAD
from .schemas import refuse_argument_mismatches

__all__ = ["Checked", "checked"]


@dataclass(frozen=True)
class Checked:
    """A program pte_lab's reader has fully checked."""

    #: the reader's model of the file
    pte: Pte
    #: errors found that do not stop a load, but are reasons to run the runtime in a worker
    suspicious: tuple[str, ...]


def checked(path, data_path=None) -> Checked:
    """The reader's model of ``path`` with every table the runtime reads checked; ``data_path``, the
    program's external data (``.ptd``) where it has one, is read by pte_lab's reader too (its header and
    flatbuffer), so that what the runtime opens is a regular file of the right kind.

    Raises :class:`~pte_lab.PteFormatError` for what the runtime must never see.
    """
    path = os.fspath(path)
    if data_path is not None and os.path.exists(data_path):  # a missing one is the runtime's to refuse
        open_data(data_path)
    st = os.stat(path)
    raw, suspicious = _checked_records(os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return Checked(Pte(raw, path), suspicious)


@lru_cache(maxsize=16)
def _checked_records(path: str, dev: int, ino: int, size: int, mtime_ns: int) -> tuple[RawProgram, tuple[str, ...]]:
    # the file's identity is the cache key; only the path is read
    pte = open_pte(path)
    return pte.raw, _validate_everything(pte)


def _validate_everything(pte: Pte) -> tuple[str, ...]:
    """Decode every table the runtime will read, so a bad file fails here and not in native code.

    Returns the errors found that do not stop a load.
    """
    suspicious = []
    for f in pte.warnings():  # every method's findings, and the program's
        if f.kind in UNSAFE_TO_LOAD:
            where = f"method {f.method!r}: " if f.method else ""
            raise PteFormatError(f"{where}{f.message}")
        if f.severity == "error" and f.kind not in REFUSED_BY_RUNTIME:
            suspicious.append(f.message)
    for m in pte.methods.values():
        m.instructions, m.delegates, m.inputs, m.outputs  # noqa: B018 - reading each table decodes and checks it

    refuse_argument_mismatches(pte)  # a kernel unboxing a value of the wrong kind aborts the process
    return tuple(suspicious)
