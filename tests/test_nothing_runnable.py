"""pte-lab sizes --example-runner on a program none of whose methods the example can run (all measured with
stand-ins): it says nothing runnable was written, writes nothing and exits non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime")

from pte_lab.cli import main

ETHOS_U = Path(__file__).resolve().parent.parent / "pte_lab" / "data" / "ethos_u" / "u55_128_sram_only.pte"


def test_an_example_runner_that_would_run_nothing_is_not_written(tmp_path, capsys):
    folder = tmp_path / "runner"
    code = main(["sizes", str(ETHOS_U), "--example-runner", str(folder)])
    out, err = capsys.readouterr()
    assert code != 0
    assert not folder.exists()  # no kMethods[] = {} runner that exits 2
    assert "build:" not in out and "run:" not in out
    line = err.strip().splitlines()[-1]
    assert line.startswith("pte-lab: error: nothing runnable to write")
    assert "method 'forward': it was measured with pte_lab's stand-ins for EthosUBackend" in line
    assert "--c-header" in line
