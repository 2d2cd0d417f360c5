"""The programs pte_lab ships (pte_lab/data/examples): a first look with no torch, never a stale copy."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import pte_lab
from pte_lab import shipped
from pte_lab.cli import main


def _plan(path) -> list:
    pte = pte_lab.open(path)
    return [(name, [(a.mem_id, a.size, a.device) for a in m.arenas],
             [(t.value, t.mem_id, t.offset, t.nbytes, t.first, t.last) for t in m.planned])
            for name, m in pte.methods.items()]


@pytest.mark.parametrize("name", list(shipped.SHIPPED))
def test_each_shipped_program_plans_what_its_builder_exports_today(name):
    pytest.importorskip("executorch")
    from pte_lab import examples

    fresh = examples.kept_path(name, **shipped.SHIPPED[name])
    assert _plan(shipped.shipped_path(name)) == _plan(fresh)


def test_without_torch_the_example_command_writes_the_shipped_copy_and_says_what_else_needs(tmp_path, monkeypatch,
                                                                                          capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n in ("torch", "executorch") else real(n, *a))
    out = tmp_path / "device.pte"
    assert main(["example", "device", str(out)]) == 0
    assert out.read_bytes() == shipped.shipped_path("device").read_bytes()
    assert "not installed: writing the copy of 'device' pte_lab ships" in capsys.readouterr().err
    assert main(["example", "llm", str(tmp_path / "llm.pte")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs torch and executorch" in err and "portable, device --side 64" in err
    assert not (tmp_path / "llm.pte").exists()


def test_a_first_look_at_a_shipped_program_imports_no_torch():
    code = ("import sys; from pte_lab.cli import main; "
            f"rc = main(['inspect', {str(shipped.shipped_path('device'))!r}]); "
            "print('RESULT', rc, 'torch' in sys.modules, 'executorch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.splitlines()[-1] == "RESULT 0 False False", r.stderr[-2000:]
    assert "cuda:0" in r.stdout  # the device arena of forward2, read from the file
