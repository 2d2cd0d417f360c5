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

The same steps travel without Python: ``pte-lab measure --bundle DIR``
(:mod:`pte_lab.experiments.bundle`) writes a native runner that mirrors both
loaders in C++ and measures real CUDA memory through the driver API where a
GPU is present. Its JSON is this module's document; :meth:`Report.load` reads
it, :func:`disagreements` checks two reports agree, :func:`recorded` gives the runs
recorded on real GPUs that ship with pte_lab.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from .. import examples
from ..cache import cache_dir
from ..devices import parse_device
from ..model import open_pte
from ..plot import bytes_axis
from ..progress import reporter
from ..runtime import native
from ..units import count, human_bytes

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
    #: the interpreter that ran the steps; None for the native runner (``runner`` says which loader it mirrors)
    python: str | None
    executorch_version: str | None = None
    measured_by: str | None = None
    #: how host bytes were measured: exact (allocation counter) or approximate (glibc)
    host_measured_by: str | None = None
    steps: list[dict] = field(default_factory=list)
    #: set when the process died or could not run: the reason, verbatim
    failure: str | None = None
    #: the native runner only: which loader it mirrors, the backend (cuda / emulated), each arena it
    #: allocated (when, device, bytes, which memory and why) and its notes
    runner: str | None = None
    backend: str | None = None
    arenas: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def step(self, name: str) -> dict | None:
        return next((s for s in self.steps if s["step"] == name), None)

    @property
    def tag(self) -> str:
        """How its columns are headed: the label and the runtime (the native runner mirrors a loader)."""
        if self.runner is not None:
            return f"{self.label} (native, on {self.executorch_version or '?'} libraries)"
        return f"{self.label} ({self.executorch_version or '?'})"

    def __repr__(self) -> str:
        what = f"failed: {self.failure}" if self.failure else count(len(self.steps), "step")
        return f"<RuntimeResult {self.label}: executorch {self.executorch_version or '?'}, {what}>"


@dataclass
class Report:
    side: int | None
    device: str
    planned_device_bytes: int
    runtimes: list[RuntimeResult]
    published: dict = field(default_factory=lambda: PUBLISHED)
    #: the native runner's run: tool, backend and its one line; on CUDA the GPU, the driver version and what
    #: the driver's figure (``driver_device_bytes``) includes
    measurement: dict | None = None

    @classmethod
    def from_dict(cls, doc: dict) -> "Report":
        """A report from its JSON document (``to_dict``, ``pte-lab measure --json`` or a bundle's run)."""
        if doc.get("schema") != "pte_lab.device_placement" or doc.get("version") != 1:
            raise ValueError(f"not a pte_lab.device_placement version 1 document "
                             f"(schema {doc.get('schema')!r}, version {doc.get('version')!r})")
        known = set(RuntimeResult.__dataclass_fields__)
        runtimes = [RuntimeResult(**{k: v for k, v in r.items() if k in known}) for r in doc["runtimes"]]
        return cls(doc.get("side"), doc["device"], doc.get("planned_device_bytes") or 0, runtimes,
                   doc.get("published") or PUBLISHED, doc.get("measurement"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Report":
        """Read a report's JSON file."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    # ------------------------------------------------------------------ table
    def table(self) -> "pd.DataFrame":
        """Rows = steps; per runtime: device bytes, host bytes (``~``: approximate), result; then the published."""
        import pandas as pd

        rows = []
        for name in STEPS:
            row = {"step": name}
            for r in self.runtimes:
                s = r.step(name)
                tag = r.tag
                host = f"{tag} host bytes" + ("" if (r.host_measured_by or "").startswith("exact") else " ~")
                if s is None:
                    row[f"{tag} device bytes"] = None
                    row[host] = None
                    row[f"{tag} result"] = r.failure and "not reached" or "not run"
                    continue
                row[f"{tag} device bytes"] = s["device_bytes"]
                if self._driver_measured(r):
                    row[f"{tag} driver device bytes"] = s.get("driver_device_bytes")
                row[host] = s["host_bytes"]
                row[f"{tag} result"] = _result(s)
            for side in ("before", "after"):
                row[f"published {side} (A100)"] = self.published[side].get(name, "")
            rows.append(row)
        df = pd.DataFrame(rows).set_index("step")
        df.attrs["measured_by"] = {r.label: r.measured_by for r in self.runtimes}
        return df

    def shares(self, label: str = "after") -> "pd.DataFrame":
        """Device bytes per step as a share of the planned device bytes, for one runtime: runs of different
        sides (an emulated one, a recorded CUDA one) line up. Columns: ``device bytes`` (the allocator's
        ledger) and, where the driver was read, ``driver device bytes``; None where a step did not run."""
        import pandas as pd

        r = next(x for x in self.runtimes if x.label == label)
        keys = ["device_bytes"] + (["driver_device_bytes"] if self._driver_measured(r) else [])
        planned = self.planned_device_bytes or 1
        data = {k.replace("_", " "): [None if (s := r.step(n)) is None or s.get(k) is None else s[k] / planned
                                      for n in STEPS] for k in keys}
        return pd.DataFrame(data, index=pd.Index(STEPS, name="step"))

    @staticmethod
    def _driver_measured(r: RuntimeResult) -> bool:
        return any(s.get("driver_device_bytes") is not None for s in r.steps)

    def to_dict(self) -> dict:
        doc = {"schema": "pte_lab.device_placement", "version": 1, "side": self.side, "device": self.device,
               "planned_device_bytes": self.planned_device_bytes,
               "runtimes": [asdict(r) for r in self.runtimes], "published": self.published}
        if self.measurement is not None:
            doc["measurement"] = self.measurement
        return doc

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
        m = self.measurement or {}
        if m:
            lines.append(f"- Measured by {m.get('tool')}: {m.get('backend_line')}")
            for key in ("driver_figure", "host_figure"):
                if m.get(key):
                    lines.append(f"- {m[key]}.")
        for r in self.runtimes:
            lines.append(f"- {r.label}: executorch {r.executorch_version}, device bytes measured by "
                         f"{r.measured_by}, host bytes {r.host_measured_by}"
                         + (f"; loader: {r.runner}" if r.runner else "")
                         + (f"; failed: {r.failure}" if r.failure else ""))
            for a in r.arenas:
                if a.get("device") != "cpu":
                    lines.append(f"  - {a['when']}: runtime buffer {a['runtime_index']} (mem_id {a['mem_id']}) on "
                                 f"{a['device']}, {a['bytes']:,} bytes: {a['memory']}"
                                 + (f" — {a['why']}" if a.get("why") else ""))
            for note in r.notes:
                lines.append(f"  - {note}")
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
                       label=r.tag if r.runner else f"{r.label} (executorch {r.executorch_version})")
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
            bytes_axis(ax.yaxis, span, signed=True)
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
        how = "".join(f"<li>{escape(r.label)}: executorch {escape(str(r.executorch_version))}, device bytes by "
                      f"<b>{escape(str(r.measured_by))}</b>"
                      + (f" — failed: {escape(r.failure)}" if r.failure else "") + "</li>" for r in self.runtimes)
        m = self.measurement or {}
        if m.get("backend_line"):
            how += f"<li>measured by {escape(str(m.get('tool')))}: {escape(m['backend_line'])}</li>"
        return (f"<div><b>Device placement, before vs after ExecuTorch's loader fix</b> · side {self.side}, "
                f"{human_bytes(self.planned_device_bytes)} planned on {escape(self.device)}<ul>{how}</ul>"
                + self.table().to_html(na_rep="–")
                + f"<div style='font-size:11px'>Published columns: {escape(self.published['source'])}; "
                  f"{escape(self.published['machine'])}. Reference data, not measured here.</div></div>")


#: How far the native runner's host bytes may stray from ``pte-lab measure``'s in a step: both count the
#: same arenas, ExecuTorch's own allocations and output copies (exactly, with the allocation counter); what
#: differs is what Python adds around them: the bindings' objects (under 1 KiB a step) and torch's first use
#: of a tensor that size (seen: 35 KiB on the first execute at side 2048, 0.2 % of the step). So: 8 KiB or
#: 0.25 % of the step's bytes, whichever is more; an arena the loaders disagree on is far more.
HOST_TOLERANCE = 8 * 1024
HOST_TOLERANCE_SHARE = 0.0025


def disagreements(a: Report, b: Report, host_tolerance: int = HOST_TOLERANCE,
                  host_share: float = HOST_TOLERANCE_SHARE) -> list[str]:
    """Where two reports of the same program disagree, one sentence each (empty: they agree).

    For each runtime label both have ("before", "after"): the steps (names, in order) and, per step, the
    error, whether the output was correct, the device bytes and the number of device ledger events must be
    equal; host bytes may differ by ``host_tolerance`` bytes or ``host_share`` of the step's bytes, whichever
    is more. Seconds, executorch versions (the native runner mirrors the pre-1.5 loader on 1.5's libraries)
    and the driver's figure (CUDA only) are not compared.
    """
    out = []
    if (a.device, a.planned_device_bytes) != (b.device, b.planned_device_bytes):
        out.append(f"program: {a.planned_device_bytes:,} planned bytes on {a.device} vs "
                   f"{b.planned_device_bytes:,} on {b.device}")
    theirs = {r.label: r for r in b.runtimes}
    for ra in a.runtimes:
        rb = theirs.get(ra.label)
        if rb is None:
            continue
        if (ra.failure is None) != (rb.failure is None):
            out.append(f"{ra.label}: failure {ra.failure!r} vs {rb.failure!r}")
        names = ([s["step"] for s in ra.steps], [s["step"] for s in rb.steps])
        if names[0] != names[1]:
            out.append(f"{ra.label}: steps {names[0]} vs {names[1]}")
            continue
        for sa, sb in zip(ra.steps, rb.steps):
            for key in ("error", "correct", "device_bytes", "device_events"):
                if sa.get(key) != sb.get(key):
                    out.append(f"{ra.label}, {sa['step']}: {key} {sa.get(key)!r} vs {sb.get(key)!r}")
            ha, hb = sa.get("host_bytes"), sb.get("host_bytes")
            if (ha is None) != (hb is None):
                out.append(f"{ra.label}, {sa['step']}: host bytes {ha!r} vs {hb!r}")
            elif ha is not None:
                bound = max(host_tolerance, host_share * min(abs(ha), abs(hb)))
                if abs(ha - hb) > bound:
                    out.append(f"{ra.label}, {sa['step']}: host bytes {ha:,} vs {hb:,} (more than "
                               f"{int(bound):,} apart)")
    return out


#: Runs recorded on real GPUs with the bundle, shipped with pte_lab (``pte_lab/experiments/recorded``).
RECORDED_DIR = "recorded"


def recorded() -> list[Report]:
    """The before/after runs recorded on real CUDA devices (``pte-lab measure --bundle``), by file name.

    Empty until a run on a GPU has been recorded; ``recorded/README.md`` says how to add one.
    """
    folder = files("pte_lab.experiments").joinpath(RECORDED_DIR)
    if not folder.is_dir():
        return []
    return [Report.from_dict(json.loads(f.read_text())) for f in sorted(folder.iterdir(), key=lambda f: f.name)
            if f.name.endswith(".json")]


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


#: What executorch 1.4.1 gave on pte_lab's own machine, kept with pte_lab (``pte_lab/data/legacy/``, written by
#: ``benchmarks/record_legacy.py`` with the very calls notebooks 04 and 06 make): where no legacy environment
#: exists, they show these and say so, rather than make one (a pip install of minutes) unasked.
KEPT_LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy"
KEPT_LEGACY_FILE = "executorch-1.4.1.json"


def _kept_legacy() -> dict:
    return json.loads((KEPT_LEGACY / KEPT_LEGACY_FILE).read_text())


def kept_basis(made: str = "measured") -> str:
    """Where, when and with what the kept executorch 1.4.1 figures were made, one phrase ending ``not here``
    (``"measured on <machine> on <date> with executorch 1.4.1 (torch ..., Python ...), not here"``; ``made``
    is its first word: ``"exported"`` for :func:`kept_legacy_export`)."""
    b = _kept_legacy()["basis"]
    return (f"{made} on {b['machine']} on {b['date']} with executorch {b['executorch']} (torch {b['torch']}, "
            f"Python {b['python']}), not here")


def kept_before(side: int = 256) -> RuntimeResult:
    """The "before" column of :func:`run` at ``side``: executorch 1.4.1's runtime on the same program, measured
    once on pte_lab's machine and kept with pte_lab, for a machine without the legacy environment. Its
    ``notes`` say where and when (:func:`kept_basis`) and the command that measures it here instead. Host
    bytes beyond the arenas are that machine's. Raises ``ValueError`` for a side none was kept for."""
    runs = _kept_legacy()["before"]
    if str(side) not in runs:
        raise ValueError(f"no kept executorch 1.4.1 run at side {side} (kept: {', '.join(sorted(runs))}); "
                         f"`pte-lab legacy-env` makes the environment that measures any side here")
    known = set(RuntimeResult.__dataclass_fields__)
    r = RuntimeResult(**{k: v for k, v in runs[str(side)].items() if k in known})
    r.python = None
    r.notes = [f"{kept_basis()}: kept with pte_lab (pte_lab/data/legacy/{KEPT_LEGACY_FILE}); `pte-lab legacy-env` "
               f"makes executorch 1.4.1's environment (a pip install: minutes, once per machine), then it is "
               f"measured here"]
    return r


def kept_legacy_export(side: int = 64) -> Path:
    """The device program (``examples.build("device", side=side)``) as executorch 1.4.1's exporter wrote it on
    pte_lab's machine (:func:`kept_basis`), kept with pte_lab. Raises ``ValueError`` for a side none was kept
    for."""
    exports = _kept_legacy()["exports"]
    key = f"device side={side}"
    if key not in exports:
        raise ValueError(f"no kept executorch 1.4.1 export of {key} (kept: {', '.join(sorted(exports))})")
    return KEPT_LEGACY / exports[key]["file"]


def _create_legacy_env(target: Path, progress) -> Path:
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
    args = json.dumps({"pte": pte, "reference": reference, "device": device,
                       "device_index": parse_device(device).device_index, "helper": helper})
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
