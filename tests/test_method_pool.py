"""Pools for a 32-bit Arm target (issue 33.3-4): the ABI probe, the method-pool model checked against this
host's measurement on every example, ``pte-lab sizes --target cortex-m``, and the bare-metal runner compiled for
Cortex-M55."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab.cli import main
from pte_lab.model.method_pool import BACKEND_INIT, abis, method_pool
from pte_lab.runtime import abi_probe

ETHOS_U = Path(pte_lab.__file__).parent / "data" / "ethos_u"

_NO_ARM = "arm-none-eabi-g++ is not installed (Debian's gcc-arm-none-eabi; .ci/run installs it)"
needs_arm = pytest.mark.skipif(abi_probe.compiler_for("cortex-m") is None, reason=_NO_ARM)


@pytest.mark.parametrize("target", list(abi_probe.TARGETS))
def test_the_stored_abi_is_what_the_target_compiler_lays_out(target):
    """pte_lab/data/abi.json is the probe's reading of this wheel's headers, compiled (not run) for the target."""
    if abi_probe.compiler_for(target) is None:
        pytest.skip(_NO_ARM if target == "cortex-m" else "no g++")
    assert abi_probe.probe(target) == abis()[target].types


def test_the_32_bit_abi_is_ilp32_with_8_byte_64_bit_scalars():
    host, arm = abis()["host"], abis()["cortex-m"]
    assert arm.types["EValuePointer"] == (4, 4) and host.types["EValuePointer"] == (8, 8)
    # AAPCS: 64-bit scalars are 8-aligned, so an EValue (a tag and an int64/double payload) stays 16 bytes
    assert arm.types["EValue"] == (16, 8) == host.types["EValue"]
    assert arm.size("TensorImpl") < host.size("TensorImpl")


def test_a_broken_object_file_is_a_named_error():
    with pytest.raises(abi_probe.AbiProbeError, match="not a little-endian ELF"):
        abi_probe.read_object(b"not an object file")


def _sized(path, **kw):
    return pte_lab.sizes(str(path), runs=1, heap_runs=1, **kw)


def _reproduces(path, data=None, opened=None):
    """Every sized method: the model with this host's ABI (on ``opened``, else ``path``) gives the sizing runner's
    method pool exactly, in both configurations, and the model's cortex-m pool is smaller."""
    s = _sized(path, data_path=data)
    assert s.methods, s.skipped
    pte = pte_lab.open(str(opened or path))
    for name, m in s.methods.items():
        host = method_pool(pte, name, "host", external_data=data is not None)
        assert (host.bytes, host.alone) == (m.method_allocator, m.method_pool_alone), name
        arm = method_pool(pte, name, "cortex-m", external_data=data is not None)
        if all("cortex-m" in BACKEND_INIT.get(d.id, {}) for d in pte.methods[name].raw.delegates):
            assert 0 < arm.bytes < host.bytes and arm.alone < host.alone
        else:
            assert arm.bytes is None and "XnnpackBackend" in arm.unknown
    return s


@pytest.fixture(scope="module")
def portable_sizes(program_path):
    return _sized(program_path("portable"))


def test_the_model_reproduces_the_measured_method_pool_of_a_portable_program(program_path, portable_sizes):
    pte = pte_lab.open(str(program_path("portable")))
    m = portable_sizes.methods["forward"]
    host = method_pool(pte, "forward")
    assert (host.bytes, host.alone) == (m.method_allocator, m.method_pool_alone)
    assert sum(p.bytes + p.padding for p in host.parts) == host.bytes


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xnnpack", "transformer", "kv_cache", "dynamic", "cond", "three_methods",
                                  "unplanned_io", "shared_state", "gpt", "llm"])
def test_the_model_reproduces_the_measured_method_pool(program_path, name):
    _reproduces(program_path(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in ETHOS_U.glob("*.pte")))
def test_the_model_reproduces_the_measured_method_pool_of_ethos_u_programs(name):
    _reproduces(ETHOS_U / name)


@pytest.mark.slow
def test_the_model_reproduces_the_measured_method_pool_of_bundled_and_external_programs(program_dir, tmp_path):
    from pte_lab import examples

    bundled = program_dir / "bundled.bpte"
    if not bundled.exists():
        bundled.write_bytes(examples.build("bundled"))
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    carried = tmp_path / "carried.pte"  # the runtime sizes the program a .bpte carries; the model reads the .bpte
    carried.write_bytes(bytes(deserialize_from_flatbuffer_to_bundled_program(bundled.read_bytes()).program))
    _reproduces(carried, opened=bundled)
    ext = examples.save("external", tmp_path / "external.pte")
    (ptd,) = tmp_path.glob("*.ptd")
    _reproduces(ext, data=ptd)


def test_sizes_for_cortex_m_labels_every_figure_with_its_target(program_path, portable_sizes, capsys, monkeypatch):
    from pte_lab.runtime import sizing

    monkeypatch.setattr(sizing, "sizes", lambda *a, **k: portable_sizes)
    path = str(program_path("portable"))
    assert main(["sizes", path, "--target", "cortex-m"]) == 0
    text = capsys.readouterr().out
    arm = method_pool(pte_lab.open(path), "forward", "cortex-m")
    row = next(line.split() for line in text.splitlines() if line.lstrip().startswith("method pool "))
    assert row[2:4] == [f"{arm.bytes:,}", "modelled"]  # the set-these block's row: bytes, basis
    # this host's figures sit apart, under "this host", never in the target's block
    block, here = text.split("\nthis host (")
    assert f"method pool {portable_sizes.methods['forward'].method_allocator:,} B measured" in here
    assert "measured" not in block.split("\nbasis:")[0]
    assert "Arm AAPCS (ILP32)" in text
    assert main(["sizes", path, "--target", "cortex-m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the JSON's block says what the text says: the same pools, bytes and basis words, one total and its basis
    cells = [re.split(r"\s{2,}", line.strip()) for line in block.splitlines() if line.startswith("  ")]
    shown = {c[0]: c[1:3] for c in cells if len(c) >= 3 and c[1].replace(",", "").isdigit()}
    got = doc["set_these"]["forward"]
    for pool in (p for p in got["pools"] if p["in_total"]):
        assert shown[pool["pool"]] == [f"{pool['bytes']:,}", pool["basis"]]
    assert shown["total"] == [f"{got['total']:,}", got["basis"]]
    assert got["total"] == doc["totals"]["forward"]["bare-metal"]["bytes"]
    assert got["basis"] == doc["totals"]["forward"]["bare-metal"]["basis"] == "modelled"
    assert all("exact" not in run for run in doc["methods"]["forward"]["targets"])  # one word: pools
    assert {run["pools"] for run in doc["methods"]["forward"]["targets"]} == {"counting"}
    assert doc["target"] == "cortex-m" and doc["target_pools"]["forward"]["method_pool"] == arm.bytes
    assert doc["methods"]["forward"]["method_allocator"] == arm.bytes  # the host document's keys, cortex-m's pools
    assert main(["sizes", path, "--target", "cortex-m", "--c-header"]) == 0
    assert f"#define PTE_LAB_FORWARD_METHOD_POOL_BYTES {arm.bytes}u" in capsys.readouterr().out


def test_the_cortex_m_temp_pool_is_exact_where_run_time_use_is_measured_apart(program_path, portable_sizes):
    """The sizing runner measures the temp allocator from the first execute on: the portable kernels take
    nothing there, so the target's temp pool is its kernel resolution's, exact (it was a range when only the
    peak over init and the runs was known); a method that did not run keeps the range."""
    from dataclasses import replace

    from pte_lab.views.runtime.target_pools import target_pools

    pte = pte_lab.open(str(program_path("portable")))
    m = portable_sizes.methods["forward"]
    assert m.temp_run_peak == 0 and m.temp_run_padded == 0 and m.temp_peak > 0  # resolution's, at init
    arm = method_pool(pte, "forward", "cortex-m")
    p = target_pools(portable_sizes, pte, "cortex-m")["forward"]
    assert p.temp_exact and p.temp_pool == max(arm.resolution_temp, arm.resolution_minimum) < m.temp_allocator
    not_run = replace(portable_sizes, methods={"forward": replace(m, temp_run_peak=None)})
    q = target_pools(not_run, pte, "cortex-m")["forward"]
    assert not q.temp_exact and (q.temp_low, q.temp_pool) == (p.temp_pool, m.temp_allocator)


@needs_arm
def test_the_bare_metal_runner_compiles_for_cortex_m55(program_path, portable_sizes, tmp_path):
    from pte_lab.views.runtime.bare_metal_runner import BARE_METAL_FILES, write_bare_metal_runner

    path = program_path("portable")
    out = tmp_path / "runner"
    written = write_bare_metal_runner(portable_sizes, pte_lab.open(str(path)), out, "cortex-m")
    assert [Path(p).name for p in written] == list(BARE_METAL_FILES)
    main_cpp = (out / "main.cpp").read_text()
    assert "BufferDataLoader" in main_cpp and "malloc" not in main_cpp and "fopen" not in main_cpp
    # a planned input is copied into its planned buffer: no caller buffer of its own, one staging buffer for all
    planned = [io for io in portable_sizes.methods["forward"].inputs if io.kind == "Tensor" and io.planned]
    assert planned and all(f"uint8_t forward_input_{io.index}[" not in main_cpp for io in planned)
    assert f"pte_lab_input_staging[{max(io.nbytes for io in planned)}]" in main_cpp
    arm = method_pool(pte_lab.open(str(path)), "forward", "cortex-m")
    assert f"METHOD_POOL_BYTES {arm.bytes}u" in (out / "pools.h").read_text()
    build = (out / "build.sh").read_text()
    # the target's libraries are built with only the program's operators (all of them overflow a board's flash)
    ops = sorted(portable_sizes.methods["forward"].operators)
    assert f"-DEXECUTORCH_SELECT_OPS_LIST={shlex.quote(','.join(ops))}" in build and "libportable_kernels.a" in build
    # pools.h says what sets the temp pool: kernel resolution's threshold, not bytes held
    assert "a threshold, not bytes held at once" in (out / "pools.h").read_text()
    r = subprocess.run(["sh", str(out / "build.sh"), "--compile-only"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    head = (out / "main.o").read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[4] == 1 and int.from_bytes(head[18:20], "little") == 40  # ELF32, EM_ARM
    # "method alone" (no temp allocator) runs on a heap-less board here: its pool is given and main.cpp builds it
    assert f"METHOD_POOL_ALONE_BYTES {arm.alone}u" in (out / "pools.h").read_text()
    r = subprocess.run(["sh", str(out / "build.sh"), "--compile-only"], capture_output=True, text=True,
                       env={**os.environ, "CXXFLAGS_EXTRA": "-DPTE_LAB_NO_TEMP_POOL"})
    assert r.returncode == 0, r.stderr[-2000:]


_QEMU_LIBS = os.environ.get("PTE_LAB_CORTEX_M_QEMU_LIBS")


@needs_arm
@pytest.mark.skipif(not _QEMU_LIBS or shutil.which("qemu-system-arm") is None,
                    reason="no ExecuTorch libraries built for the Cortex-M55 (benchmarks/cortex_m_qemu/"
                           "build_executorch.sh; PTE_LAB_CORTEX_M_QEMU_LIBS names its OUT) or no qemu-system-arm")
def test_the_bare_metal_runner_runs_under_qemu_in_exactly_its_pools(program_path, portable_sizes, tmp_path):
    from pte_lab.views.runtime.bare_metal_runner import write_bare_metal_runner

    out = tmp_path / "runner"
    write_bare_metal_runner(portable_sizes, pte_lab.open(str(program_path("portable"))), out, "cortex-m")
    pools = (out / "pools.h").read_text()
    method = int(pools.split("_METHOD_POOL_BYTES ")[1].split("u")[0])
    script = Path(__file__).parents[1] / "benchmarks" / "cortex_m_qemu" / "run_runner.sh"

    def run(pools_h: str) -> str:
        (tmp_path / "pools.h").write_text(pools_h)
        r = subprocess.run(["bash", str(script), str(out)], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "ET": _QEMU_LIBS, "POOLS_H": str(tmp_path / "pools.h"),
                                "WORK": str(tmp_path / "work"), "PY": sys.executable})
        return r.stdout + r.stderr

    log = run(pools)
    assert f"method pool {method} B used of {method}" in log and "every method loaded and executed" in log, log[-3000:]
    short = run(pools.replace(f"_METHOD_POOL_BYTES {method}u", f"_METHOD_POOL_BYTES {method - 1}u"))
    assert "method forward: error 0x21" in short, short[-3000:]
