"""The tools that hold the rules: ruff, mypy and import-linter, configured in pyproject.toml.

Run here so that the README's test command (and so CI) runs them. A tool that is not installed skips its
test with the reason, but under CI (``CI=true``), where the ``test`` extra installs them all, it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    """The tool beside this Python (the virtual environment's), else on PATH."""
    found = str(BIN / name) if (BIN / name).exists() else shutil.which(name)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed: the test extra installs it (pip install -e '.[test]')")
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


@pytest.mark.parametrize("tool, args", [
    ("ruff", ["check", "pte_lab", "tests", "benchmarks"]),
    ("mypy", []),  # files = ["pte_lab"] in pyproject.toml
    ("lint-imports", []),
])
def test_the_tool_passes(tool, args):
    r = subprocess.run([_tool(tool), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{tool} {' '.join(args)}:\n{r.stdout}{r.stderr}"
