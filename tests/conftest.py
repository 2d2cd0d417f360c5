"""Shared fixtures: real programs exported once per machine and kept on disk.

Programs are exported with torch.export + executorch (pte_lab.examples) the
first time and kept in pte_lab's cache folder (``examples.kept_path``), keyed
per builder (its code, examples.py's shared code, the arguments, the
torch/executorch versions): the notebooks and the docs share them, and
editing one builder exports only its programs again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock  # installed with torch

import pte_lab.examples as examples

# Each test measures afresh: a kept measurement (pte_lab.runtime.kept) would answer a test that changes how
# pte_lab measures with the figures of another. tests/test_kept.py turns them on where it tests them.
os.environ["PTE_LAB_NO_CACHE"] = "1"

# name -> (builder, kwargs)
PROGRAMS = {
    "portable": ("portable", {}),
    "xnnpack": ("xnnpack", {}),
    "device": ("device", {"side": 64}),  # XNNPACK with target_device: runs with an allocator
    "device_demo": ("device", {"side": 64, "backend": "demo"}),  # ExecuTorch's test partitioner
    "device_hostplanned": ("device", {"side": 64, "backend": "demo", "non_cpu_planning": False}),
    "three_methods": ("three_methods", {"side": 64}),
    "kv_cache": ("kv_cache", {}),
    "dynamic": ("dynamic", {}),
    "cond": ("cond", {}),
    "unplanned_io": ("unplanned_io", {}),
    "external": ("external", {}),
    "transformer": ("transformer", {"layers": 2}),
    "shared_state": ("shared_state", {}),
    # a tiny XNNPACK GPT: its planned int64 token input's bytes are reused by later tensors
    "gpt": ("gpt", {}),
    # ExecuTorch's own LLM flow (export_llm), small: 2 layers of dim 64, 4 query heads over 2 KV heads
    # (grouped-query attention), 32 positions. Custom-op caches + XNNPACK + 8da4w; index_put_ caches + portable.
    "llm": ("llm", {"quantize": "8da4w"}),
    "llm_fp32": ("llm", {}),  # the same llama, linear layers left in float32 (XNNPACK)
    "llm_index_put": ("llm", {"custom_sdpa": False, "xnnpack": False}),
}


def _key() -> str:
    h = hashlib.sha256(Path(examples.__file__).read_bytes())
    for dist in ("torch", "executorch"):
        h.update(md.version(dist).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def program_dir(request) -> Path:
    """A folder of pytest's cache for what tests derive from the programs (keyed by examples.py's bytes)."""
    return Path(request.config.cache.mkdir(f"pte_lab_programs_{_key()}"))


@pytest.fixture(scope="session")
def program_path():
    """program_path(name) -> path of the exported program, exporting it once."""

    def get(name: str) -> Path:
        builder, kwargs = PROGRAMS[name]
        # one exporter per program across parallel workers and processes; read back only whole
        return examples.kept_path(builder, **kwargs)

    return get


@pytest.fixture(scope="session")
def program_bytes(program_path):
    return lambda name: program_path(name).read_bytes()


@pytest.fixture(scope="session")
def legacy_python():
    """executorch 1.4.1 in its own venv (cached in the pte_lab cache; ~1 minute the first time; one
    process builds it while the others wait)."""
    from pte_lab.experiments import device_placement as dp

    return str(dp.create_legacy_env())  # one creator across workers (and notebooks): it locks


@pytest.fixture(scope="session")
def legacy_programs(legacy_python, request):
    """The programs of ``legacy_export.py`` exported by executorch 1.4.1 (with eager reference outputs),
    once across parallel workers and runs (cached like the programs above, keyed by the script)."""
    script = Path(__file__).with_name("legacy_export.py")
    out = Path(request.config.cache.mkdir(f"pte_lab_legacy_{hashlib.sha256(script.read_bytes()).hexdigest()[:16]}"))
    version = out / "executorch-version"
    with FileLock(str(out) + ".lock"):
        if not version.exists():
            r = subprocess.run([legacy_python, str(script), str(out)], capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, r.stderr[-2000:]
            version.write_text(r.stdout.strip().splitlines()[-1])
    assert version.read_text() == "1.4.1"
    return out


@pytest.fixture(scope="session")
def quick_site(tmp_path_factory) -> Path:
    """The documentation's quick build (``-D pte_lab_notebooks=0``, under ``-W -n``) from a clean copy of this
    tree, once per session: its HTML folder (``test_site.quick_build``)."""
    from test_site import quick_build

    return quick_build(tmp_path_factory.mktemp("quick-site"))


@pytest.fixture(autouse=True)
def _no_figure_left_open():
    """Each test starts with no matplotlib figure open: axes-level plots draw on ``plt.gca()`` when a
    figure is open (seaborn's convention), so one test's figure must not receive the next one's drawing."""
    yield
    import sys

    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")
