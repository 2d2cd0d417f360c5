"""Length-prefixed pickle messages between pte_lab and its isolated worker."""

from __future__ import annotations

import pickle
import struct

_LEN = struct.Struct("<Q")


def read_msg(f):
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    data = f.read(n)
    if len(data) < n:  # the other side died mid-message
        return None
    return pickle.loads(data)


def write_msg(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()
