"""Record what executorch 1.4.1 gives, once, to ship with pte_lab (``pte_lab/data/legacy/``).

Notebooks 04 and 06 compare executorch 1.4.1 (the loader before PR #22058's fix) with the installed 1.5.1.
Measuring 1.4.1 needs its own virtual environment (`pte-lab legacy-env`: a pip install of torch and
executorch, minutes and 1.5 GB, once per machine). Where that environment does not exist, the notebooks show
what this script kept instead, printed as "measured on ... with executorch 1.4.1, not here", and never make
the environment unasked. Kept, with the machine, the date and the versions (``basis``):

- ``before["256"]``: the "before" column of ``device_placement.run(side=256, legacy_python=...)``, the very
  call notebook 04 makes (1.4.1's runtime on the two-method device program, each step's device and host
  bytes, counted exactly by pte_lab's allocation counter);
- ``exports["device side=64"]``: the device program as 1.4.1's exporter writes it
  (``examples.save("device", ..., side=64, python=legacy)``, notebook 06's section 4), with its SHA-256.

Rerun from the repository root (a few minutes with the environment made; its output replaces the kept files,
review the diff before committing):

    pte-lab legacy-env                       # once per machine: executorch 1.4.1's environment
    python benchmarks/record_legacy.py
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pte_lab import examples
from pte_lab.cache import dist_version
from pte_lab.experiments import device_placement as dp

#: notebook 04's side (its SIDE), notebook 06's side
SIDES = (256,)
EXPORT_SIDE = 64


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions(python: str) -> dict:
    code = ("import importlib.metadata as m, platform, json; "
            "print(json.dumps({'executorch': m.version('executorch'), 'torch': m.version('torch'), "
            "'python': platform.python_version()}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def _commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "-"


def main() -> int:
    legacy = dp.find_legacy_python()
    if legacy is None:
        print("record_legacy: no executorch 1.4.1 environment: run `pte-lab legacy-env` first", file=sys.stderr)
        return 2
    versions = _versions(legacy)
    if versions["executorch"] != "1.4.1":
        print(f"record_legacy: {legacy} has executorch {versions['executorch']}, not 1.4.1", file=sys.stderr)
        return 2
    out = dp.KEPT_LEGACY
    out.mkdir(parents=True, exist_ok=True)
    before = {}
    for side in SIDES:
        report = dp.run(side=side, legacy_python=legacy)
        (run,) = [r for r in report.runtimes if r.label == "before"]
        if run.failure:
            print(f"record_legacy: executorch 1.4.1 failed at side {side}: {run.failure}", file=sys.stderr)
            return 1
        before[str(side)] = {**asdict(run), "python": None, "planned_device_bytes": report.planned_device_bytes}
        print(f"side {side}: " + ", ".join(f"{s['step']} {s['host_bytes']:,}" for s in run.steps))
    with tempfile.TemporaryDirectory() as tmp:
        path = examples.save("device", Path(tmp) / "device.pte", side=EXPORT_SIDE, python=legacy)
        data = Path(path).read_bytes()
    name = f"device-side{EXPORT_SIDE}.pte"
    (out / name).write_bytes(data)
    doc = {
        "schema": "pte_lab.legacy_kept", "version": 1,
        "basis": {
            "machine": f"{platform.system()} {platform.machine()}, {_cpu()}, {os.cpu_count()} cores",
            "date": datetime.date.today().isoformat(),
            **versions,
            "after": f"executorch {dist_version('executorch')}, torch {dist_version('torch')}",
            "pte_lab": _commit(),
            "command": "python benchmarks/record_legacy.py",
        },
        "before": before,
        "exports": {f"device side={EXPORT_SIDE}": {"file": name, "bytes": len(data),
                                                    "sha256": hashlib.sha256(data).hexdigest()}},
    }
    (out / dp.KEPT_LEGACY_FILE).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"kept in {out}: {dp.KEPT_LEGACY_FILE}, {name} ({len(data):,} bytes); {dp.kept_basis()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
