"""Every notebook runs top to bottom from a clean state; its assertions are its claims.

Each notebook runs twice, each time in a fresh kernel, as a reader would run it. The second run measures
again (fresh sizing workers, fresh isolated runtimes, a fresh working folder) and reuses the first run's
exports (kept on disk for the test), so an assertion that holds only for the figures of one run (a heap
figure that moves between runs, as it moves between CPUs) fails here and not on someone else's machine.
The second run also sees no executorch 1.4.1 environment, as a machine where `pte-lab legacy-env` never ran:
notebooks 04 and 06 then show the 1.4.1 figures kept with pte_lab, under the same assertions. Neither run
may make that environment.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
import notebook_cache  # the documentation build renders the run this test keeps

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

#: run before each run's first cell (not part of the notebook): the examples' exports are kept on disk per
#: arguments, so the second run measures again without exporting again
REUSE_EXPORTS = """\
import hashlib as _hashlib, pathlib as _pathlib
import pte_lab.examples as _examples
_kept, _build = _pathlib.Path({folder!r}), _examples.build
def _reuse(name, **kwargs):
    key = _hashlib.sha256(repr((name, sorted(kwargs.items()))).encode()).hexdigest()[:16]
    kept = _kept / f"{{name}}-{{key}}.pte"
    if not kept.exists():
        _kept.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(_build(name, **kwargs))
    return kept.read_bytes()
_examples.build = _reuse
"""


#: run before each run's first cell too: a notebook never makes executorch 1.4.1's environment (a pip install of
#: minutes, `pte-lab legacy-env`'s job); on the second run the environment looks absent, as on a machine without
#: it, so notebooks 04 and 06 show the 1.4.1 figures pte_lab keeps, and their assertions must hold there too
NO_LEGACY_ENV = """\
from pte_lab.experiments import device_placement as _dp
def _refuse(*args, **kwargs):
    raise AssertionError("a notebook made executorch 1.4.1's environment: only `pte-lab legacy-env` does")
_dp.create_legacy_env = _refuse
if {absent}:
    _dp.find_legacy_python = lambda: None
"""


def _with_reuse(nb, folder: Path, legacy_env: bool = True):
    """The notebook, after a cell that keeps and reuses the examples' exports in ``folder`` and refuses to make
    executorch 1.4.1's environment (hides it, with ``legacy_env=False``)."""
    run = nbformat.v4.new_notebook(metadata=nb.metadata)
    first = REUSE_EXPORTS.format(folder=str(folder)) + NO_LEGACY_ENV.format(absent=not legacy_env)
    run.cells = [nbformat.v4.new_code_cell(first), *[nbformat.from_dict(dict(c)) for c in nb.cells]]
    return run


def _without_reuse(run):
    """The run as the notebook alone would have made it: the reuse cell left out, prompts counted from 1."""
    kept = nbformat.v4.new_notebook(metadata=run.metadata)
    kept.cells = [nbformat.from_dict(dict(c)) for c in run.cells[1:]]
    for c in kept.cells:
        if c.cell_type == "code" and c.get("execution_count"):
            c.execution_count -= 1
            for o in c.get("outputs", []):
                if o.get("execution_count"):
                    o["execution_count"] -= 1
    return kept


@pytest.fixture
def keep(path):
    """Keeps a run for the documentation build (``docs/_ext/notebook_cache.py``), so the site never runs
    this notebook again; without one kept, marks it failed, so a build waiting for it stops waiting."""
    yield lambda run, seconds: notebook_cache.save(path, _without_reuse(run), seconds)
    if not notebook_cache.entry(path).exists():
        notebook_cache.failed_marker(path).parent.mkdir(parents=True, exist_ok=True)
        notebook_cache.failed_marker(path).touch()


def _check_outputs(run, name: str) -> None:
    # what a reader sees: no native diagnostics ("[cpuinfo_utils.cpp:125] ..."), no glog-style log lines (torch's
    # "W1205 12:55:07.059000 12247 .../torch/utils/_pytree.py:630] ... is deprecated"), no torchao "Failed to
    # load ..._C_mxfp8...so", no tracebacks. The exercises run unanswered here (``answer = None``), so their
    # cross-checks against ExecuTorch never run: tests/test_exercises.py checks a right answer's output in a
    # fresh process
    noise = re.compile(r"\[\w+\.(?:cpp|cc|c|h):\d+\]|^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]|Traceback"
                       r"|Failed to load .*\.so", re.M)
    half_drawn = re.compile(r"\d+%\||\b0it\b|\| \d+/\d+ \[")
    for i, cell in enumerate(run.cells[1:]):
        where = f"{name} cell {i}"
        outputs = cell.get("outputs", [])
        assert not [o for o in outputs if o.get("output_type") == "error"], f"{where} raised"
        # a kernel forwards a stream in fragments ("[", "cpuinfo_utils.cpp", ":", "125", "] "): join them
        text = "".join("".join(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
        assert not noise.search(text), f"{where} shows: {text[:300]}"
        # what a saved notebook or a plain viewer shows for rich outputs: no half-drawn progress bar
        # ("sizing:   0%|  | 0/1", "verifying: 0it"), no object dumped as kilobytes of fields
        for o in outputs:
            plain = "".join(o.get("data", {}).get("text/plain", ""))
            assert not half_drawn.search(plain), f"{where} keeps a half-drawn bar: {plain[:200]}"
            assert len(plain) < 3000, f"{where} shows {len(plain)} characters of text: {plain[:200]}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_twice(path, tmp_path, keep):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # outputs are not committed
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name} has committed outputs"
    took = []
    for k, label in enumerate(("first run", "second run")):
        run = _with_reuse(nb, tmp_path / "exports", legacy_env=k == 0)
        (tmp_path / str(k)).mkdir()
        client = nbclient.NotebookClient(run, timeout=1200, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path / str(k))}})
        start = time.perf_counter()
        client.execute()
        took.append(time.perf_counter() - start)
        _check_outputs(run, f"{path.name} ({label})")
        if k == 0:
            keep(run, took[0])
    print(f"{path.name}: first run {took[0]:.1f} s, second run {took[1]:.1f} s")


def test_each_run_reuses_the_exports_of_the_first(tmp_path):
    """The cell put before each run: an export with the same arguments is made once, across kernels (runs)."""
    import pte_lab.examples as examples

    real, calls = examples.build, []
    try:
        for _ in range(2):  # two runs: two fresh namespaces over the same folder
            examples.build = lambda name, **kw: calls.append((name, kw)) or f"{name}{kw}".encode()
            exec(REUSE_EXPORTS.format(folder=str(tmp_path / "exports")), {})
            assert examples.build("portable") == examples.build("portable") == b"portable{}"
            assert examples.build("device", side=64) == b"device{'side': 64}"
        assert calls == [("portable", {}), ("device", {"side": 64})]  # nothing exported twice
    finally:
        examples.build = real
    run = _with_reuse(nbformat.read(NOTEBOOKS[0], as_version=4), tmp_path)
    assert [c.source for c in run.cells[1:]] == [c.source for c in nbformat.read(NOTEBOOKS[0], as_version=4).cells]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_an_exercise_answer_never_reuses_a_name_the_lesson_binds(path):
    """Each exercise cell starts ``answer = None``: a lesson cell that also binds ``answer`` (08 held
    ``largest_bound``'s result there) fails when run again after an exercise cell."""
    import ast
    import json

    cells = json.loads(path.read_text())["cells"]
    start = next(i for i, c in enumerate(cells)
                 if c["cell_type"] == "markdown" and "".join(c["source"]).lstrip().startswith("## Exercises"))
    bound = set()
    for c in cells[:start]:
        if c["cell_type"] != "code":
            continue
        code = "\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    assert "answer" not in bound
