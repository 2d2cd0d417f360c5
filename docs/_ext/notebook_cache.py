"""Executed notebooks, kept by their content, so that each notebook runs once per build of the site.

The notebook test (``tests/test_notebooks.py``) runs every notebook in fresh kernels; it saves its first run
here. The documentation build (``docs/conf.py``) renders the saved run and executes only a notebook it does
not find (a clean clone builds the site alone: :func:`execute_missing`, two at a time on two cores). An entry
is keyed by the notebook's cells (type and source) and by pte_lab's sources, so an edited notebook, or an edited
pte_lab, is run again and an unchanged pair never is: a page never shows what older code printed. The cache
lives in the build folder (``docs/_build/executed/``; ``PTE_LAB_NOTEBOOK_CACHE`` names another); deleting
``docs/_build`` runs everything again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: how long one notebook may run (the LLM notebook exports a small llama: minutes on two cores)
TIMEOUT_S = 1200


def cache_dir() -> Path:
    """The folder of executed notebooks: ``$PTE_LAB_NOTEBOOK_CACHE``, else ``docs/_build/executed``."""
    return Path(os.environ.get("PTE_LAB_NOTEBOOK_CACHE") or ROOT / "docs" / "_build" / "executed")


def key(nb: dict) -> str:
    """A notebook's content key: a hash of its cells' types and sources (outputs and metadata left out) and of
    pte_lab's own sources (``pte_lab.runtime.kept.code_digest``: the outputs are what pte_lab's code prints, so
    an edited pte_lab runs the notebooks again rather than show what the old code printed)."""
    from pte_lab.runtime.kept import code_digest  # the pte_lab of this tree: conf.py and the tests put it first

    cells = [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
             for c in nb["cells"]]
    return hashlib.sha256(json.dumps([cells, code_digest()]).encode()).hexdigest()[:16]


def entry(path: Path) -> Path:
    """Where the executed run of the notebook at ``path``, as it is now, is kept."""
    nb = json.loads(Path(path).read_text())
    return cache_dir() / f"{Path(path).stem}-{key(nb)}.ipynb"


def failed_marker(path: Path) -> Path:
    """Written when the notebook test's run of ``path`` failed: a waiting build stops waiting for it."""
    return entry(path).with_suffix(".failed")


def save(path: Path, executed, seconds: float) -> Path:
    """Keep ``executed`` (an nbformat notebook run from ``path``'s cells) with how long it took; atomic."""
    import nbformat

    target = entry(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    executed.metadata["pte_lab_run"] = {"seconds": round(seconds, 1)}
    with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".tmp", delete=False) as f:
        nbformat.write(executed, f)
    os.replace(f.name, target)
    failed_marker(path).unlink(missing_ok=True)
    return target


def execute(path: Path) -> Path:
    """Run the notebook at ``path`` top to bottom in a fresh kernel, in a fresh folder; keep and return it."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    # the kernel imports the pte_lab of this tree (the one documented), whatever is installed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix=f"{Path(path).stem}-") as work:
        client = nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                                         resources={"metadata": {"path": work}})
        start = time.perf_counter()
        client.execute(env=env)
        return save(path, nb, time.perf_counter() - start)


def executed(path: Path, wait_s: float = 0.0, log=print) -> Path:
    """The executed run of ``path``: the kept one, else (after waiting up to ``wait_s`` for another process
    to keep it, unless that one failed) a new run. Raises what the notebook's run raised."""
    target, deadline = entry(path), time.monotonic() + wait_s
    while not target.exists() and time.monotonic() < deadline and not failed_marker(path).exists():
        time.sleep(5)
    if target.exists():
        return target
    log(f"executing {Path(path).name} (no kept run of this content in {cache_dir()})")
    return execute(path)


def exports_llm(path: Path) -> bool:
    """Whether the notebook at ``path`` exports an LLM (``examples.save("llm", ...)``: ExecuTorch's
    ``export_llm``, the longest step of a first run on a machine)."""
    nb = json.loads(Path(path).read_text())
    return any('"llm"' in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def execute_missing(paths, jobs: int | None = None, log=print) -> None:
    """Run each notebook of ``paths`` that has no kept run, ``jobs`` at a time (default: one per CPU, at most
    four), each in a process of its own (:func:`execute`: a fresh kernel in a fresh folder), and keep the runs.
    The notebooks that export an LLM start first, so that the longest runs do not come last. A notebook does
    most of its work in one process at a time: two at once keep two cores busy (CONTRIBUTING has the build's
    times). Raises ``RuntimeError`` naming each notebook whose run failed, after the others are kept."""
    import concurrent.futures
    import subprocess
    import sys

    missing = sorted((Path(p) for p in paths if not entry(p).exists()), key=lambda p: (not exports_llm(p), p.name))
    if not missing:
        return
    jobs = max(1, min(jobs or os.cpu_count() or 1, 4, len(missing)))
    log(f"executing {len(missing)} notebooks with no kept run in {cache_dir()}, {jobs} at a time: "
        + ", ".join(p.stem for p in missing))

    def one(path: Path) -> str | None:
        start = time.perf_counter()
        r = subprocess.run([sys.executable, __file__, str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            return f"{path.name}: " + " | ".join((r.stderr or r.stdout).strip().splitlines()[-8:])
        log(f"{path.name}: ran in {time.perf_counter() - start:.0f} s")
        return None

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        failed = [f for f in pool.map(one, missing) if f]
    if failed:
        raise RuntimeError("notebooks failed to run:\n" + "\n".join(failed))


if __name__ == "__main__":  # python docs/_ext/notebook_cache.py [NOTEBOOK...]: fill the cache
    import sys

    # this tree's pte_lab, as conf.py has it: the kernels run it, and the runs are kept under its sources' key
    sys.path.insert(0, str(ROOT))

    for p in [Path(a) for a in sys.argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb")):
        start = time.perf_counter()
        out = executed(p)
        print(f"{p.name}: {time.perf_counter() - start:.0f} s -> {out}", flush=True)
