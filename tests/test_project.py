"""The project's promises: CI runs the README's test command; import stays light."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    assert len(blocks) >= 2, "the quick start has two commands"
    test_cmd = next(b for b in blocks if "pytest" in b)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd.strip() in ci.splitlines()


def test_import_is_light():
    code = ("import sys, pte_lab; "
            "print(sorted(m for m in ('torch', 'executorch', 'pandas', 'numpy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_wheel_carries_every_resource_the_code_reads(tmp_path):
    """The native sources (built on first use) and the CSS must ship in the wheel, not only in a checkout."""
    import zipfile

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("pte_lab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [p.relative_to(ROOT).as_posix() for p in (ROOT / "pte_lab/runtime/native").iterdir()]
    wanted += [p.relative_to(ROOT).as_posix() for p in (ROOT / "pte_lab/views/static").iterdir()]
    assert wanted and not [w for w in wanted if w not in names]
