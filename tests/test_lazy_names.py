"""Packages that load their names on first use (pte_lab.lazy_names) give the same objects the eager imports gave."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("package, name", [("pte_lab.runtime", "run_all"), ("pte_lab.planning", "replan"),
                                           ("pte_lab.planning", "verify")])
def test_a_name_shared_with_its_submodule_stays_the_function(package, name):
    """Importing the submodule first (as pte_lab's own modules do) must not turn ``pte_lab.runtime.run_all`` into
    the module: the docs call it."""
    code = (f"import importlib, {package}.{name} as _; p = importlib.import_module({package!r}); "
            f"print(callable(getattr(p, {name!r})), type(importlib.import_module('{package}.{name}')).__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "module"]


def test_importing_a_package_loads_none_of_its_modules():
    code = ("import sys, pte_lab.model, pte_lab.runtime, pte_lab.planning, pte_lab.format; "
            "print(sorted(m for m in sys.modules if m.count('.') >= 2 and m.startswith(('pte_lab.model.', "
            "'pte_lab.runtime.', 'pte_lab.planning.', 'pte_lab.format.'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
