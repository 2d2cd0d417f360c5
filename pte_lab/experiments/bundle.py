"""The loader fix's before/after measurement as a folder that runs without Python.

``pte-lab measure --bundle DIR [--side N]`` (or :func:`write_bundle`) writes::

    DIR/run.sh                        runs both loaders and writes before_after.json (see its header)
    DIR/bin/pte_lab_placement         the native runner (runtime/native/placement_runner.cpp), built here
    DIR/lib/*.so                      the ExecuTorch libraries it needs (as ldd finds them), found through
                                      the runner's $ORIGIN/../lib; and pte_lab's allocation counter
    DIR/programs/device_sideN.pte     the example device program: forward on the host, forward2 on cuda:0
    DIR/programs/device_sideN.reference, .codes
                                      its inputs (int8 codes of multiples of 1/8) and the CRC-32 of each
                                      method's output as eager PyTorch computes it (exact: compared bit for bit)
    DIR/published.json                the fix's published figures (reference data, not measured)
    DIR/MANIFEST.txt                  every file, its size and purpose; what the runner needs of a machine

Copied to any x86-64 Linux machine it runs as is: with an NVIDIA driver the runner
measures real CUDA memory through the driver API (``cuMemAlloc``/``cuMemAllocManaged``,
``cuMemGetInfo``); without one it says so in one line and uses the emulated device, whose
figures equal ``pte-lab measure``'s (:func:`pte_lab.experiments.device_placement.disagreements`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .. import examples
from ..errors import NativeBuildError, PteLabError
from ..progress import reporter
from ..runtime import native
from ..shell_text import sh_comment, sh_word
from ..units import count, human_bytes
from .device_placement import PUBLISHED

#: the first line of a bundle's MANIFEST.txt: how a folder is known to be one (and may be replaced)
MANIFEST_HEAD = "pte_lab before/after bundle"
#: what the reference file starts with (native/placement_runner.cpp reads it)
REFERENCE_HEAD = "pte_lab.reference 1"
#: the input grid: input values are code * GRID_SCALE, codes in [-16, 16] (examples.device_reference(grid=True))
GRID_SCALE = 0.125
RUN_SH = "run.sh"


@dataclass
class Bundle:
    """A written bundle: where, what is in it (relative path, bytes, purpose), and how to run it."""

    path: Path
    side: int
    files: list[tuple[str, int, str]] = field(default_factory=list)
    #: what the runner needs of the machine it runs on (from ldd -v): glibc and libstdc++ versions
    requires: dict = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(n for _, n, _ in self.files)

    @property
    def command(self) -> str:
        return f"{self.path / RUN_SH} --json before_after.json"

    def summary(self) -> str:
        width = max(len(p) for p, _, _ in self.files)
        lines = [f"bundle {self.path}: {count(len(self.files), 'file')}, {human_bytes(self.total_bytes)} "
                 f"({self.total_bytes:,} bytes)"]
        lines += [f"  {p:<{width}}  {human_bytes(n):>10}  {what}" for p, n, what in self.files]
        if self.requires:
            lines.append("needs: " + ", ".join(f"{k} >= {v}" for k, v in self.requires.items())
                         + "; an NVIDIA driver (libcuda.so.1) for real CUDA figures, else the emulated device")
        lines.append(f"run it (no Python needed): {self.command}")
        return "\n".join(lines)


def _needed_libraries(runner: Path, lib_dir: Path) -> tuple[list[Path], dict]:
    """The libraries of ``lib_dir`` the runner loads (ldd, transitively), and the highest glibc/libstdc++
    symbol versions the runner and those libraries ask for (ldd -v)."""
    if shutil.which("ldd") is None:
        raise NativeBuildError("bundling needs ldd (glibc's libc-bin) to find the libraries the runner loads")
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib_dir))
    out = subprocess.run(["ldd", "-v", str(runner)], capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        raise NativeBuildError(f"ldd {runner} failed: {out.stderr.strip()[-300:]}")
    libs, missing = [], []
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (.*?) \(0x[0-9a-f]+\)\s*$", line)
        if m is None:
            m2 = re.match(r"\s*(\S+) => not found", line)
            if m2:
                missing.append(m2.group(1))
            continue
        path = Path(m.group(2))
        if path.parent.resolve() == lib_dir.resolve() and path not in libs:
            libs.append(path)
    if missing:
        raise NativeBuildError(f"the runner needs libraries ldd cannot find: {', '.join(sorted(set(missing)))}")
    # "Version information": a section per object ("\t<path>:"), then what it asks of each library; only
    # the runner's and the bundled libraries' sections say what the bundle needs (not the system's own)
    ours = {os.path.realpath(p) for p in (runner, *libs)}
    asked, current = [], None
    for line in out.stdout.split("Version information:", 1)[-1].splitlines():
        if re.match(r"^\t[^\t].*:$", line):
            current = os.path.realpath(line.strip()[:-1])
        elif current in ours:
            asked.append(line)
    needs = {}
    for name, pattern in (("glibc", r"\(GLIBC_([0-9.]+)\)"), ("libstdc++ GLIBCXX", r"\(GLIBCXX_([0-9.]+)\)")):
        versions = set(re.findall(pattern, "\n".join(asked)))
        if versions:
            needs[name] = max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    return sorted(libs), needs


def write_reference(folder: Path, stem: str, side: int) -> list[str]:
    """The program's inputs (int8 codes on the 1/8 grid) and each method's eager output CRC-32."""
    import numpy as np
    import torch


    (x, y), expect = examples.device_reference(side, grid=True)
    codes = [(t / GRID_SCALE).round().to(torch.int8) for t in (x, y)]
    (folder / f"{stem}.codes").write_bytes(b"".join(c.numpy().tobytes() for c in codes))
    lines = [REFERENCE_HEAD, f"codes {stem}.codes {GRID_SCALE!r}"]
    for t in (x, y):
        lines.append(f"input float32 {t.numel() * 4}")
    for method, out in expect.items():
        data = np.ascontiguousarray(out.numpy(), dtype="<f4").tobytes()
        lines.append(f"expect {method} {len(data)} {zlib.crc32(data)}")
    (folder / f"{stem}.reference").write_text("\n".join(lines) + "\n")
    return [f"{stem}.codes", f"{stem}.reference"]


def _run_sh(stem: str, side: int, device: str, et_version: str) -> str:
    return f"""#!/bin/sh
# The before/after measurement of ExecuTorch's loader fix (PR #22058), without Python.
# Written by `pte-lab measure --bundle` (executorch {sh_comment(et_version)}); MANIFEST.txt lists every file.
#
#   ./run.sh [--json FILE] [--backend auto|cuda|emulated] [--device cuda:N] [--memory auto|managed|device]
#            [--loader both|before|after] [--verbose]
#
# Runs programs/{stem}.pte (forward on the host, forward2 on {sh_comment(device)}) under the pre-1.5 loader and the
# 1.5 loader of Runtime.load_program, each in its own process, and writes the pte_lab.device_placement
# JSON to FILE (default: before_after.json in the current folder). Backend: cuda where libcuda.so.1
# opens and sees the device, else the emulated device; the first line printed says which.
here=$(cd "$(dirname "$0")" && pwd) || exit 2
LD_PRELOAD="$here/lib/libpte_lab_counter.so${{LD_PRELOAD:+ $LD_PRELOAD}}"
export LD_PRELOAD
exec "$here/bin/pte_lab_placement" --pte "$here/programs/{stem}.pte" \\
  --reference "$here/programs/{stem}.reference" --published "$here/published.json" \\
  --side {int(side)} --device {sh_word(device)} --json before_after.json "$@"
"""


def _previous_bundle(target: Path) -> bool:
    """Whether ``target`` may be written: absent, an empty folder, or a previous bundle (True: replace it)."""
    if not target.exists():
        return False
    manifest = target / "MANIFEST.txt"
    if target.is_dir() and manifest.is_file() and manifest.read_text(errors="replace").startswith(MANIFEST_HEAD):
        return True
    if not target.is_dir() or any(target.iterdir()):
        raise PteLabError(f"argument --bundle: {target} exists and is neither an empty folder nor a previous "
                          f"bundle; choose a new folder")
    return False


def write_bundle(target: str | os.PathLike, side: int = 2048, device: str = "cuda:0", progress=None) -> Bundle:
    """Write the before/after bundle into ``target`` (a new or empty folder, or a previous bundle).

    ``side`` is the example program's matrix side (2048 plans 48 MiB on the device, as the fix's
    measurement did). ``progress``: as for :func:`pte_lab.experiments.device_placement.run`.
    """
    target = Path(target)
    replace = _previous_bundle(target)  # checked before any work
    stem = f"device_side{side}"
    with reporter(progress, total=4, desc="bundling") as report:
        report.step("building the runner against the installed executorch (a minute the first time)")
        runner = native.placement_runner_path()
        counter = native.counter_path()
        lib_dir = native.executorch_dir() / "lib"
        libs, needs = _needed_libraries(runner, lib_dir)
        report.advance()
        if replace:
            shutil.rmtree(target)
        target.mkdir(parents=True, exist_ok=True)
        files: list[tuple[str, str]] = []
        (target / "bin").mkdir()
        (target / "lib").mkdir()
        (target / "programs").mkdir()
        shutil.copy2(runner, target / "bin" / native.RUNNER_NAME)
        files.append((f"bin/{native.RUNNER_NAME}", "the runner: both loaders mirrored in C++, the emulated and the "
                                                    "CUDA device allocators"))
        for lib in libs:
            shutil.copy2(lib, target / "lib" / lib.name)
            files.append((f"lib/{lib.name}", f"from executorch {native.executorch_version()}'s wheel"))
        shutil.copy2(counter, target / "lib" / "libpte_lab_counter.so")
        files.append(("lib/libpte_lab_counter.so", "pte_lab's allocation counter, preloaded: exact host bytes"))
        report.step(f"exporting the example device program (side {side}) and its eager reference")
        examples.save("device", target / "programs" / f"{stem}.pte", side=side, device=device)
        files.append((f"programs/{stem}.pte", f"forward on the host, forward2 delegated to XNNPACK on {device}"))
        ref = write_reference(target / "programs", stem, side)
        files.append((f"programs/{ref[0]}", "the inputs x and y: int8 codes of multiples of 1/8"))
        files.append((f"programs/{ref[1]}", "input sizes and each method's eager output CRC-32 (bit for bit)"))
        report.advance()
        (target / "published.json").write_text(json.dumps(PUBLISHED, indent=1) + "\n")
        files.append(("published.json", "the fix's published figures: reference data, not measured"))
        run_sh = target / RUN_SH
        run_sh.write_text(_run_sh(stem, side, device, native.executorch_version()))
        run_sh.chmod(0o755)
        files.append((RUN_SH, "runs both loaders; writes before_after.json"))
        report.advance()
        bundle = Bundle(target, side, requires=needs)
        bundle.files = [(p, (target / p).stat().st_size, what) for p, what in files]
        manifest = [MANIFEST_HEAD, "", *bundle.summary().splitlines()[1:]]
        (target / "MANIFEST.txt").write_text("\n".join(manifest) + "\n")
        bundle.files.append(("MANIFEST.txt", (target / "MANIFEST.txt").stat().st_size, "this list"))
        report.advance()
    return bundle
