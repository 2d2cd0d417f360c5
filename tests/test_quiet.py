"""pte_lab.quiet: diagnostics kept out of a notebook, around code that may itself be quiet."""

from __future__ import annotations

import os
import threading

from pte_lab.quiet import NativeLog, quiet


def test_quiet_nests_and_keeps_what_each_level_wrote():
    """quiet() around examples.build (which is quiet itself) once hung forever on its own lock."""
    log = NativeLog()
    done = []

    def nested():
        with quiet(log):
            os.write(2, b"outer before\n")
            with quiet(log):
                os.write(2, b"inner\n")
            os.write(2, b"outer after\n")
        done.append(True)

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(timeout=10)
    assert done, "quiet() inside quiet() did not return"
    assert log.tail() == ["inner", "outer before", "outer after"]
