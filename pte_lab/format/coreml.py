"""Core ML's delegate blob, as ExecuTorch's Core ML backend writes it: a flattened ``.mlpackage`` (its files one after
the other) whose file table is JSON written backwards at the blob's end (``backends/apple/coreml/runtime/
inmemoryfs/inmemory_filesystem.cpp``, main of 2026-08-22, the nearest source read here): ``{"nodes": [{"name",
"kind" (0: a file), "dataRegion": {"offset", "size"}}, ...]}``. The model file (``model.mlmodel``, a protobuf) starts
with its specification version (field 1, a varint). What the files mean for memory is
:mod:`pte_lab.model.backends`'."""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["BACKEND", "MODEL_FILE", "TABLE_TAIL", "read_file_table", "specification_version"]

#: the backend id whose blobs these are (what pte_lab knows of the backend is its registration,
#: ``pte_lab.model.backends.COREML``)
BACKEND = "CoreMLBackend"
#: the model's file in the package
MODEL_FILE = "model.mlmodel"
#: the most bytes of a blob's end read for its file table
TABLE_TAIL = 1 << 20
#: the first tail read (a file table of a few files is a few hundred bytes): doubled while the table runs past it
_FIRST_TAIL = 4096


def read_file_table(read: Callable[[int, int], bytes], offset: int, size: int
                    ) -> tuple[dict[str, tuple[int, int]] | None, str | None]:
    """(file name -> (offset in the blob, bytes), None), or (None, why) where the table cannot be read or puts a
    file outside the blob's ``size`` bytes (at ``offset`` of the program, read with ``read(offset, n)``). The blob's
    end is read a few KiB at a time, doubling up to :data:`TABLE_TAIL`, until the table parses: its work is the
    table's size, not the blob's."""
    most = min(size, TABLE_TAIL)
    n = min(most, _FIRST_TAIL)
    while True:
        tail = read(offset + size - n, n)
        try:
            table, _ = json.JSONDecoder().raw_decode(tail[::-1].decode("utf-8", "replace"))
            files = {node["name"]: (int(node["dataRegion"]["offset"]), int(node["dataRegion"]["size"]))
                     for node in table["nodes"] if node.get("kind") == 0}
            break
        except ValueError:  # cut short (or not JSON): a longer tail, while there is one
            if n >= most:
                return None, "its file table (reversed JSON at the blob's end) could not be read"
            n = min(most, 2 * n)
        except (KeyError, TypeError, AttributeError):
            return None, "its file table (reversed JSON at the blob's end) could not be read"
    outside = [k for k, (at, k_n) in files.items() if at < 0 or k_n < 0 or at + k_n > size]
    if outside:
        return None, f"its file table puts {outside[0]!r} outside the blob's {size:,} bytes"
    return files, None


def specification_version(head: bytes) -> int | None:
    """The Core ML specification version a model file's first bytes give (``Model.specificationVersion``, field 1,
    a varint); None where they do not start with it."""
    if head[:1] != b"\x08":
        return None
    n = shift = 0
    for c in head[1:]:
        n |= (c & 0x7F) << shift
        if not c & 0x80:
            return n
        shift += 7
    return None
