"""The isolated worker: an Engine in its own process, driven over stdin/stdout.

The first request is ``init`` (the Python runtime's :class:`~pte_lab.runtime.engine.Engine`) or ``init_native``
(:class:`~pte_lab.runtime.native_engine.NativeEngine`, which never imports ExecuTorch's Python package).
Messages are length-prefixed pickles: requests ``(op, args, kwargs)``, replies
``("ok", value)`` or ``("error", type name, message)``. A native crash ends
the process; the parent sees the pipe close and reports the signal.
"""

from __future__ import annotations

import os
import sys

from ._protocol import read_msg, write_msg


def main() -> int:
    # Keep the protocol channel private: anything the runtime prints goes to stderr.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    engine = None
    while True:
        msg = read_msg(proto_in)
        if msg is None:
            return 0
        op, args, kwargs = msg
        try:
            # imported after the redirect (nothing an import prints reaches the protocol), and only the engine
            # asked for: the native one never imports ExecuTorch's Python package
            if op == "init":
                from .engine import Engine

                engine = Engine(*args, **kwargs)
                result = None
            elif op == "init_native":
                from .native_engine import NativeEngine

                engine = NativeEngine(*args, **kwargs)
                result = None
            elif op == "exit":
                write_msg(proto_out, ("ok", None))
                return 0
            else:
                result = getattr(engine, op)(*args, **kwargs)
            write_msg(proto_out, ("ok", result))
        except Exception as exc:  # noqa: BLE001 - every error goes back to the caller
            write_msg(proto_out, ("error", type(exc).__name__, str(exc)))


if __name__ == "__main__":
    sys.exit(main())
