"""Reproduce ExecuTorch's loader fix (PR #22058): where a device method's planned arena lives.

The program: ``forward`` on the host, ``forward2`` delegated to a device
(``pte_lab.examples.device``; ``side=2048`` plans 48 MiB on the device). For
each runtime — the installed one (executorch >= 1.5, "after") and the
pre-fix one (executorch 1.4.1, "before") — the steps run in a fresh process
(a native failure in one cannot take the others down): load_program,
load_method of each method, execute each and compare with eager PyTorch, the
host method between two device runs, release. Device bytes are read from
``torch.cuda.mem_get_info`` where a CUDA device and a CUDA-enabled ExecuTorch
are present, and from the emulated device's ledger otherwise; every row says
which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import cache_dir
from ..units import human_bytes

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

STEPS = ["load_program", "load_method forward", "load_method forward2", "execute forward2",
         "execute forward", "execute forward2 again", "release"]

#: The published measurements of PR #22058, as its description states them. Only what the
#: description says is here; nothing is filled in.
PUBLISHED = {
    "source": "pytorch/executorch#22058, 'Fix device placement for memory-planned buffers in "
              "Runtime.load_program' (the pull request's description), "
              "https://github.com/pytorch/executorch/pull/22058",
    "machine": "Linux x86_64, NVIDIA A100 80GB, compute capability 8.0, CUDA 13.0, Python 3.12, torch 2.13.0",
    "program": "two methods, forward on the host and forward2 lowered to the CUDA backend",
    "planned_device_bytes": 50_331_648,
    "before": {
        "load_method forward2": "arena placed in host memory; the device took nothing",
        "execute forward2": "error at execute: the CUDA backend refused the pointer "
                            "('not backed by CUDA device memory')",
    },
    "after": {
        "load_method forward": "takes no device memory",
        "load_method forward2": "takes at least 90 % of the planned device bytes",
        "execute forward": "correct",
        "execute forward2": "correct",
        "execute forward2 again": "correct after the host method ran in between",
        "release": "the device memory comes back",
    },
}


@dataclass
class RuntimeResult:
    label: str  # "after" / "before"
    python: str
    executorch_version: str | None = None
    measured_by: str | None = None
    #: how host bytes were measured: exact (allocation counter) or approximate (glibc)
    host_measured_by: str | None = None
    steps: list[dict] = field(default_factory=list)
    #: set when the process died or could not run: the reason, verbatim
    failure: str | None = None

    def step(self, name: str) -> dict | None:
        return next((s for s in self.steps if s["step"] == name), None)

    def __repr__(self) -> str:
        what = f"failed: {self.failure}" if self.failure else f"{len(self.steps)} steps"
        return f"<RuntimeResult {self.label}: executorch {self.executorch_version or '?'}, {what}>"


@dataclass
class Report:
    side: int
    device: str
    planned_device_bytes: int
    runtimes: list[RuntimeResult]
    published: dict = field(default_factory=lambda: PUBLISHED)

    # ------------------------------------------------------------------ table
    def table(self) -> "pd.DataFrame":
        """Rows = steps; per runtime: device bytes, host bytes (``~``: approximate), result; then the published."""
        import pandas as pd

        rows = []
        for name in STEPS:
            row = {"step": name}
            for r in self.runtimes:
                s = r.step(name)
                tag = f"{r.label} ({r.executorch_version or '?'})"
                host = f"{tag} host bytes" + ("" if (r.host_measured_by or "").startswith("exact") else " ~")
                if s is None:
                    row[f"{tag} device bytes"] = None
                    row[host] = None
                    row[f"{tag} result"] = r.failure and "not reached" or "not run"
                    continue
                row[f"{tag} device bytes"] = s["device_bytes"]
                row[host] = s["host_bytes"]
                row[f"{tag} result"] = _result(s)
            for side in ("before", "after"):
                row[f"published {side} (A100)"] = self.published[side].get(name, "")
            rows.append(row)
        df = pd.DataFrame(rows).set_index("step")
        df.attrs["measured_by"] = {r.label: r.measured_by for r in self.runtimes}
        return df

    def to_dict(self) -> dict:
        return {"schema": "pte_lab.device_placement", "version": 1, "side": self.side, "device": self.device,
                "planned_device_bytes": self.planned_device_bytes,
                "runtimes": [asdict(r) for r in self.runtimes], "published": self.published}

    def to_json(self, path: str | os.PathLike | None = None, **kw) -> str:
        text = json.dumps(self.to_dict(), indent=1, **kw)
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_markdown(self) -> str:
        df = self.table()
        cols = [c for c in df.columns if not c.startswith("published")]
        head = "| step | " + " | ".join(cols) + " |"
        lines = [f"Device placement of planned arenas, side {self.side}: "
                 f"{self.planned_device_bytes:,} planned device bytes ({human_bytes(self.planned_device_bytes)}).",
                 "", head, "|" + "---|" * (len(cols) + 1)]
        for step, row in df.iterrows():
            cells = [_md(row[c]) for c in cols]
            lines.append(f"| {step} | " + " | ".join(cells) + " |")
        lines.append("")
        for r in self.runtimes:
            lines.append(f"- {r.label}: executorch {r.executorch_version}, device bytes measured by "
                         f"{r.measured_by}, host bytes {r.host_measured_by}"
                         + (f"; failed: {r.failure}" if r.failure else ""))
        if any(r.label == "before" and r.measured_by and "emulated" in r.measured_by for r in self.runtimes):
            lines.append("- On the emulated device, device memory *is* host memory, so the pre-fix loader's "
                         "forward2 still computes correctly: what shows the bug is that its arena took no "
                         "device bytes. On a real CUDA device that host pointer is refused at execute.")
        lines.append(f"- Published reference ({self.published['machine']}): before — "
                     + "; ".join(f"{k}: {v}" for k, v in self.published["before"].items())
                     + ". After — " + "; ".join(f"{k}: {v}" for k, v in self.published["after"].items())
                     + f". Source: {self.published['source']}. Not measured here.")
        return "\n".join(lines)

    # ----------------------------------------------------------------- figure
    def plot(self, axes=None):
        """Device and host bytes per step, before vs after (two panels); returns the axes."""
        import matplotlib.pyplot as plt
        import numpy as np

        from ..plot import _bytes_axis

        if axes is None:
            _, axes = plt.subplots(1, 2, figsize=(9.5, 4.2), layout="constrained")
        colors = {"before": "#E69F00", "after": "#0072B2"}
        x = np.arange(len(STEPS))
        width = 0.8 / max(1, len(self.runtimes))
        hosts = {r.host_measured_by or "approximate" for r in self.runtimes}
        host_how = "exact" if all(h.startswith("exact") for h in hosts) else "approximate"
        dev_how = "; ".join(sorted({str(r.measured_by) for r in self.runtimes}))
        for ax, key, title in ((axes[0], "device_bytes", f"device bytes taken (+) / returned (−)\n{dev_how}"),
                               (axes[1], "host_bytes", f"host bytes taken (+) / returned (−), {host_how}")):
            lo, hi = 0, 0
            bars = []
            for i, r in enumerate(self.runtimes):
                vals = [((r.step(s) or {}).get(key) or 0) for s in STEPS]
                xs = x + (i - (len(self.runtimes) - 1) / 2) * width
                ax.bar(xs, vals, width, color=colors.get(r.label, "#999999"),
                       label=f"{r.label} (executorch {r.executorch_version})")
                bars += [(bx, v) for bx, v in zip(xs, vals)]
                lo, hi = min([lo] + vals), max([hi] + vals)
                if key == "device_bytes" and r.steps and not any(vals):  # say it: nothing on the device
                    ax.annotate(f"{r.label}: 0 B on the device at every step", (0.02, 0.04),
                                xycoords="axes fraction", fontsize=8, color=colors.get(r.label, "#333333"),
                                fontweight="bold")
            if key == "device_bytes":
                ax.axhline(self.planned_device_bytes, color="#333333", ls="--", lw=1,
                           label=f"planned device bytes {human_bytes(self.planned_device_bytes)}")
                hi = max(hi, self.planned_device_bytes)
            ax.axhline(0, color="#333333", lw=0.6)
            ax.set_xticks(x, STEPS, rotation=30, ha="right", fontsize=8)
            ax.set_title(title, fontsize=9)
            # one bar far above all the others (a kernel library's own buffers, say) would squash the
            # comparison: the axis stops above the others and the cut bar carries its value
            ups = sorted((v for _, v in bars if v > 0), reverse=True)
            cut = len(ups) > 1 and ups[0] > 4 * max(ups[1], self.planned_device_bytes if key == "device_bytes" else 0)
            if cut:
                hi = 1.3 * max(ups[1], self.planned_device_bytes if key == "device_bytes" else 0)
            span = max(hi - lo, 1)
            ax.set_ylim(lo - 0.08 * span, hi + 0.08 * span)
            if cut:
                top = hi + 0.08 * span
                for bx, v in bars:
                    if v > top:  # a break across the bar, and its value beside it
                        for dy in (0.10, 0.14):
                            ax.plot([bx - width / 2, bx + width / 2], [top - dy * span, top - (dy - 0.03) * span],
                                    color="white", lw=1.6, solid_capstyle="butt")
                        ax.annotate(f"{human_bytes(v)}, axis cut", (bx + width * 0.6, top - 0.02 * span),
                                    ha="left", va="top", fontsize=7, color="#333333")
            _bytes_axis(ax.yaxis, span, signed=True)
        handles, labels = axes[0].get_legend_handles_labels()
        axes[0].figure.legend(handles, labels, fontsize=8, frameon=False, loc="outside lower center", ncol=3)
        axes[0].figure.suptitle(f"forward2's {human_bytes(self.planned_device_bytes)} device arena, "
                                f"before vs after the loader fix", fontsize=10)
        return axes

    def __repr__(self) -> str:
        runs = "; ".join(f"{r.label}: executorch {r.executorch_version or '?'}, device bytes by {r.measured_by}"
                         + (f", failed: {r.failure}" if r.failure else "") for r in self.runtimes)
        return (f"<Report: device placement before vs after the loader fix, side {self.side}, "
                f"{human_bytes(self.planned_device_bytes)} planned on {self.device}; {runs or 'no runtimes'}; "
                f".table() for the steps>")

    def _repr_html_(self) -> str:
        from html import escape

        how = "".join(f"<li>{escape(r.label)}: executorch {escape(str(r.executorch_version))}, device bytes by "
                      f"<b>{escape(str(r.measured_by))}</b>"
                      + (f" — failed: {escape(r.failure)}" if r.failure else "") + "</li>" for r in self.runtimes)
        return (f"<div><b>Device placement, before vs after ExecuTorch's loader fix</b> · side {self.side}, "
                f"{human_bytes(self.planned_device_bytes)} planned on {escape(self.device)}<ul>{how}</ul>"
                + self.table().to_html(na_rep="–")
                + f"<div style='font-size:11px'>Published columns: {escape(self.published['source'])}; "
                  f"{escape(self.published['machine'])}. Reference data, not measured here.</div></div>")


def _result(s: dict) -> str:
    if s.get("error"):
        return "error: " + s["error"]
    if s.get("correct") is True:
        return "correct"
    if s.get("correct") is False:
        return "WRONG output"
    return "ok"


def _md(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, (int, float)):
        return f"{int(v):,}"
    return str(v).replace("|", "\\|")


# ------------------------------------------------------------------ runtimes
def legacy_env_dir() -> Path:
    return cache_dir("legacy-executorch-1.4.1")


def find_legacy_python() -> str | None:
    """The cached pre-fix interpreter, if :func:`create_legacy_env` made one."""
    py = legacy_env_dir() / "bin" / "python"
    return str(py) if (py.exists() and (legacy_env_dir() / ".complete").exists()) else None


def create_legacy_env(target: str | os.PathLike | None = None, *, progress=None) -> Path:
    """Create a venv with torch 2.13.0 and executorch 1.4.1 (the pre-fix loader); returns its python.

    ``progress(line)`` receives pip's output as it comes (the CLI prints it). One process at a time
    builds it (a file lock beside it: two pips in one venv break each other); a folder left
    unfinished by a process that died is made again from scratch.
    """
    from filelock import FileLock  # installed with torch

    target = Path(target) if target else legacy_env_dir()
    py = target / "bin" / "python"
    if (target / ".complete").exists() and py.exists():
        return py
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f"{target.name}.lock")):
        if (target / ".complete").exists() and py.exists():  # another process made it while we waited
            return py
        return _create_legacy_env(target, progress)


def _create_legacy_env(target: Path, progress) -> Path:
    import shutil

    py = target / "bin" / "python"
    emit = progress or (lambda line: None)
    if target.exists():
        emit(f"removing {target}: an earlier attempt did not finish")
        shutil.rmtree(target)
    emit(f"creating {target}")
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    cmd = [str(py), "-m", "pip", "install", "--progress-bar", "off", "--no-color", "torch==2.13.0",
           "executorch==1.4.1"]
    emit("$ " + " ".join(cmd[2:]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        line = line.rstrip()
        if line and not line.startswith("WARNING: Location"):
            emit(line)
    if proc.wait() != 0:
        raise RuntimeError(f"installing executorch 1.4.1 into {target} failed (exit {proc.returncode})")
    (target / ".complete").write_text("torch==2.13.0 executorch==1.4.1\n")
    return py


def _executorch_dir(python: str) -> Path:
    code = "import importlib.util as u; print(list(u.find_spec('executorch').submodule_search_locations)[0])"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"{python} has no executorch: {out.stderr.strip()[-500:]}")
    return Path(out.stdout.strip())


def _device_probe(python: str) -> bool:
    code = "import torch; print(torch.cuda.is_available())"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    return out.stdout.strip() == "True"


def run_runtime(label: str, python: str, pte: str, reference: str, device: str = "cuda:0",
                emulate: bool | None = None, timeout: float = 900) -> RuntimeResult:
    """Run the steps under ``python`` in a fresh process.

    ``reference`` is the ``torch.save`` file of inputs and expected outputs
    (see :func:`write_reference`).
    """
    from ..runtime import native

    res = RuntimeResult(label, python)
    if emulate is None:  # a real CUDA device and build measure themselves; otherwise emulate
        emulate = not _device_probe(python)
    helper = None
    if emulate:
        try:
            helper = str(native.library_path(_executorch_dir(python)))
        except Exception as exc:  # noqa: BLE001 - reported in the row
            res.failure = f"emulated device unavailable for {python}: {exc}"
            return res
    script = files("pte_lab.experiments").joinpath("_placement_steps.py")
    args = json.dumps({"pte": pte, "reference": reference, "device": device, "helper": helper})
    env = dict(os.environ)
    try:  # exact host bytes: the allocation counter preloaded (it needs no executorch, any version)
        env["LD_PRELOAD"] = " ".join(filter(None, [str(native.counter_path()), env.get("LD_PRELOAD")]))
    except Exception:  # noqa: BLE001 - no compiler or no glibc: host bytes stay approximate
        pass
    try:
        out = subprocess.run([python, str(script), args], capture_output=True, text=True, timeout=timeout,
                             env=env)
    except subprocess.TimeoutExpired:
        res.failure = f"timed out after {timeout} s"
        return res
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        import signal

        sig = f"killed by {signal.Signals(-out.returncode).name}" if out.returncode < 0 else f"exit {out.returncode}"
        tail = " | ".join(out.stderr.strip().splitlines()[-5:])
        res.failure = f"process {sig}: {tail}"
        return res
    data = json.loads(line[len("RESULT "):])
    if "fatal" in data:
        res.failure = data["fatal"].strip().splitlines()[-1]
        return res
    res.executorch_version = data["executorch_version"]
    res.measured_by = data["measured_by"]
    res.host_measured_by = data.get("host_measured_by")
    res.steps = data["steps"]
    return res


def write_reference(path: str | os.PathLike, side: int) -> str:
    """Save the program's inputs and eager expected outputs (``examples.device_reference``) for the steps."""
    import torch

    from .. import examples

    inputs, expect = examples.device_reference(side)
    torch.save({"inputs": list(inputs), "expect": expect}, os.fspath(path))
    return os.fspath(path)


def run(side: int = 2048, runtimes: dict[str, str] | None = None, device: str = "cuda:0",
        legacy_python: str | None = None, workdir: str | os.PathLike | None = None,
        emulate: bool | None = None, progress=None) -> Report:
    """Build the fix's program and measure it under each runtime.

    ``runtimes`` maps a label to an interpreter; by default ``after`` is this
    interpreter and ``before`` is ``legacy_python`` (or the cached pre-fix
    environment, if one was created; see ``pte-lab legacy-env``). ``progress``:
    None, True (a bar over the runtimes) or a callable taking a line per step
    (see :mod:`pte_lab.progress`).
    """
    from .. import examples
    from ..model import open_pte
    from ..progress import reporter

    if runtimes is None:
        runtimes = {"after": sys.executable}
        legacy = legacy_python or find_legacy_python()
        if legacy:
            runtimes = {"before": str(legacy), **runtimes}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(workdir) if workdir is not None else Path(tmp)
        path = str(folder / f"device_side{side}.pte")
        with reporter(progress, total=len(runtimes), desc="measuring") as report:
            report.step(f"exporting the program (side {side}) and its eager reference")
            examples.save("device", path, side=side, device=device)
            reference = write_reference(folder / f"device_side{side}.reference.pt", side)
            planned = open_pte(path).methods["forward2"].planned_bytes_by_device().get(device, 0)
            results = []
            for label, py in runtimes.items():
                report.step(f"running the steps under '{label}' ({py}) in a fresh process")
                results.append(run_runtime(label, py, path, reference, device, emulate))
                report.advance()
        return Report(side, device, planned, results)
