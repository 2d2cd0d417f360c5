"""ExecuTorch's and torch's diagnostics captured around exports and runtime calls, kept for errors.

ExecuTorch and its kernels write diagnostics straight to file descriptor 2
(``[cpuinfo_utils.cpp] ... CPU info and manual query on # of cpus dont
match``, dozens of ``[operator_registry.cpp]`` lines when an operator is
missing). In a notebook they land in the cell as a pink block. Around each
in-process runtime call the descriptor points at a temporary file instead; the
text is kept (the last lines, bounded) and shown only with an error it may
explain. The isolated worker's stderr is kept the same way by its parent.

:func:`quiet` also keeps the warnings that importing ExecuTorch's exporter
logs through Python's logging (torchao's "Failed to load ..._C_mxfp8...so",
torch's pytree "KernelPreference is an Enum subclass" deprecation) instead of
printing them into the cell.
"""

from __future__ import annotations

import importlib
import io
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections import deque
from contextlib import contextmanager

__all__ = ["native_output", "NativeLog", "quiet", "quiet_import", "LOG"]

#: loggers whose import-time warnings are kept, not shown
NOISY_LOGGERS = ("torchao", "torch.utils._pytree")

_LOCK = threading.RLock()  # re-entrant: quiet() around code that calls quiet() itself (examples.build)


class NativeLog:
    """The last ``keep`` non-empty lines written to file descriptor 2 during captured calls."""

    def __init__(self, keep: int = 200):
        self.lines: deque[str] = deque(maxlen=keep)

    def add(self, text: str) -> None:
        self.lines.extend(line for line in text.splitlines() if line.strip())

    def tail(self, n: int = 20) -> list[str]:
        return list(self.lines)[-n:]


@contextmanager
def native_output(log: NativeLog):
    """Send file descriptor 2, and Python's ``sys.stderr``, elsewhere for the duration; the text goes
    to ``log``.

    Both are needed: native code writes to the descriptor, while ExecuTorch's
    Python extension routes its log (``[cpuinfo_utils.cpp:125] ...``) through
    ``sys.stderr``, which in a Jupyter kernel is not the descriptor at all.
    """
    with _LOCK:  # one redirection at a time (the explorer runs programs in a thread)
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError):
            pass
        python_stderr, sys.stderr = sys.stderr, io.StringIO()
        try:
            try:
                saved = os.dup(2)
            except OSError:  # no descriptor 2 at all: only Python's stream to capture
                yield log
                return
            with tempfile.TemporaryFile() as tmp:
                os.dup2(tmp.fileno(), 2)
                try:
                    yield log
                finally:
                    os.dup2(saved, 2)
                    os.close(saved)
                    tmp.seek(0)
                    log.add(tmp.read(1 << 20).decode("utf-8", errors="replace"))
        finally:
            captured, sys.stderr = sys.stderr, python_stderr
            log.add(captured.getvalue()[-(1 << 20):])


class _Keep(logging.Handler):
    def __init__(self, log: NativeLog):
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record):
        try:
            self.log.add(f"{record.name}: {record.getMessage()}")
        except Exception:  # noqa: BLE001 - a record that cannot format is dropped, never raised
            pass


#: what pte_lab kept from exports and imports in this process
LOG = NativeLog()


@contextmanager
def quiet(log: NativeLog | None = None):
    """:func:`native_output`, and the noisy loggers' records and Python's warnings kept in ``log``
    (default :data:`LOG`) instead of shown."""
    log = LOG if log is None else log
    keep = _Keep(log)
    saved = []
    for name in NOISY_LOGGERS:
        lg = logging.getLogger(name)
        saved.append((lg, lg.propagate))
        lg.addHandler(keep)
        lg.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught, native_output(log):
            warnings.simplefilter("always")
            try:
                yield log
            finally:
                log.add("\n".join(f"{w.category.__name__}: {w.message}" for w in caught))
    finally:
        for lg, propagate in saved:
            lg.removeHandler(keep)
            lg.propagate = propagate


def quiet_import(name: str):
    """Import module ``name`` (ExecuTorch's runtime: importing it imports torch and torchao, which log
    "Failed to load ..._C_mxfp8...so" and pytree deprecations) with that noise kept in :data:`LOG`, not
    printed into a notebook's cell. Cheap once imported."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod

    with quiet():
        return importlib.import_module(name)
