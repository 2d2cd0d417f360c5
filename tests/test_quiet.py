"""pte_lab.quiet: diagnostics kept out of a notebook, around code that may itself be quiet."""

from __future__ import annotations

import pytest

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


def test_the_first_runtime_call_in_a_fresh_process_prints_nothing(tmp_path):
    """Opening a saved .pte in a fresh kernel and reaching ExecuTorch's runtime (emulate_device, load) must
    not print torchao's "Failed to load ..._C_mxfp8...so" or torch's pytree warnings into the cell:
    notebook 01's second run, which reuses exports, showed them (the exporter had hidden them the first time)."""
    import subprocess
    import sys

    pytest.importorskip("executorch.runtime")
    code = ("import pte_lab, pte_lab.runtime as rt; pte_lab.emulate_device('cuda:0'); "
            "print(sorted(rt.runtime_info().backends)[:1])")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stderr.strip() == "", got.stderr[-2000:]
