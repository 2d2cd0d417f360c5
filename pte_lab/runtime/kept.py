"""Measurements kept on disk, so that a question asked again costs a file read, and never a stale answer.

A measurement (a :class:`~pte_lab.runtime.sizing.Sizes`, a what-if's learned shapes) is kept under the user's
cache folder (``pte_lab.cache.cache_dir``: ``$PTE_LAB_CACHE``, else ``$XDG_CACHE_HOME/pte_lab``, else
``~/.cache/pte_lab``), in ``measured/``, by a key made of everything that can change it:

- the bytes of every file it read (SHA-256 of the program and of its ``.ptd``), not their names or times:
  one byte changed is another key;
- pte_lab's own code (a digest of the package's sources: an edited pte_lab measures again), and the
  versions of ExecuTorch and torch;
- this machine (its architecture and processor: heap figures are this host's);
- the options that change the answer (methods, runs, verification, the bounds asked...).

Nothing else is trusted: an entry that cannot be read back whole is measured again, and a write goes
through a temporary file renamed into place. ``PTE_LAB_NO_CACHE=1`` (or the functions' ``cache=False``,
the CLI's ``--no-cache``) measures afresh and keeps nothing; ``pte-lab cache clear`` empties the folder.
What comes from here says so (its ``kept`` field: when it was measured).

The entries are pickles of pte_lab's own records, written and read only here, in a folder of the user's.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pickle
import platform
import shutil
import time
from pathlib import Path
from typing import TypeVar
from collections.abc import Callable

from ..cache import cache_dir, dist_version

__all__ = ["enabled", "file_digest", "code_digest", "key", "get", "put", "kept_or", "clear", "folder",
           "NO_CACHE_ENV"]

#: set to 1 to measure afresh and keep nothing
NO_CACHE_ENV = "PTE_LAB_NO_CACHE"
#: the sources whose bytes make pte_lab's own part of every key
_SOURCES = ("*.py", "*.cpp", "*.c", "*.h")
T = TypeVar("T")


def folder() -> Path:
    """Where measurements are kept (created when one is)."""
    return cache_dir("measured")


def enabled(cache: bool | None = None) -> bool:
    """Whether to use the kept measurements: ``cache`` when given, else unless ``$PTE_LAB_NO_CACHE`` is set."""
    if cache is not None:
        return bool(cache)
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


@functools.lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int, ino: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_digest(path) -> str:
    """SHA-256 of a file's bytes (read once per process while its size, time and inode stay the same)."""
    st = os.stat(path)
    return _digest(os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of pte_lab's sources (the package's Python and native files): edited code, another key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for pattern in _SOURCES:
        for p in sorted(root.rglob(pattern)):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(kind: str, files, options: dict) -> str:
    """The key of a measurement of ``kind`` over ``files`` (paths; None entries skipped) with ``options`` (a
    JSON-able dict of what else changes it)."""
    doc = {"kind": kind, "files": [file_digest(f) for f in files if f is not None], "options": options,
           "pte_lab": code_digest(), "executorch": dist_version("executorch"), "torch": dist_version("torch"),
           "machine": [platform.machine(), platform.processor(), platform.python_version()]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _path(kind: str, k: str) -> Path:
    return folder() / kind / f"{k}.pickle"


def get(kind: str, k: str):
    """The measurement kept under ``k``, or None (none kept, or one that cannot be read back)."""
    path = _path(kind, k)
    try:
        with open(path, "rb") as f:
            value = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - cut short, another version's records...: measured again
        return None
    return value


def put(kind: str, k: str, value) -> None:
    """Keep ``value`` under ``k`` (a temporary file renamed into place: a reader sees all of it or none)."""
    path = _path(kind, k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache folder: the answer stands, it is just not kept
        pass


def kept_or(kind: str, files, options: dict, measure: Callable[[], T], cache: bool | None = None,
            keep: Callable[[T], bool] | None = None) -> T:
    """The kept measurement of ``kind`` for ``files`` and ``options``, else ``measure()``, kept unless
    ``keep(value)`` says not (an answer that depends on more than the key: what this install lacks, say). A
    value from the folder gets ``kept``, when it was measured (seconds since the epoch), where it has such a
    field."""
    if not enabled(cache):
        return measure()
    k = key(kind, files, options)
    value = get(kind, k)
    if value is not None:
        return value
    value = measure()
    if keep is not None and not keep(value):
        return value
    if dataclasses.is_dataclass(value) and any(f.name == "kept" for f in dataclasses.fields(value)):
        put(kind, k, dataclasses.replace(value, kept=time.time()))
    else:
        put(kind, k, value)
    return value


def clear() -> tuple[int, int]:
    """Empty the folder; returns (entries, bytes) removed."""
    root = folder()
    files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
    n, size = len(files), sum(p.stat().st_size for p in files)
    shutil.rmtree(root, ignore_errors=True)
    return n, size


def summary() -> tuple[int, int]:
    """(entries, bytes) kept now."""
    root = folder()
    files = [p for p in root.rglob("*.pickle")] if root.exists() else []
    return len(files), sum(p.stat().st_size for p in files)

