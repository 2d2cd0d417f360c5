"""Sizing what cannot run here: Ethos-U programs sized with stand-ins for EthosUBackend and cortex_m:: kernels
(registered in the sizing worker only), the temp pool covering the delegates' scratch, and methods that still
cannot run reported with what the file declares. The programs are the committed ones (tests/data/ethos_u)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import examples
from pte_lab.cli import main
from pte_lab.runtime import stand_ins
from pte_lab.runtime.sizing_runner import Step, StepKind
from pte_lab.runtime.sizing import MethodSizes, Session, Sizes
from pte_lab.views.runtime.sizes import c_header, sizes_text

DATA = Path(examples.ETHOS_U_PROGRAMS)
SPLIT = DATA / "u55_128_shared_sram_split.pte"


def _compile_and_print(header: str, body: str, tmp_path) -> list[str]:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "pools.h").write_text(header)
    (tmp_path / "main.c").write_text("#include <stdio.h>\n#include \"pools.h\"\nint main(void) {\n"
                                     + textwrap.indent(body, "    ") + "\n    return 0;\n}\n")
    exe = tmp_path / "main"
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-const-variable",
                        str(tmp_path / "main.c"), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()


def test_stand_ins_follow_the_versions_whose_source_they_copy():
    assert stand_ins.follows("EthosUBackend", "1.5.1+cpu") and stand_ins.follows("cortex_m::x.out", "1.2.0")
    assert not stand_ins.follows("EthosUBackend", "1.1.0")  # 1.1 took the handle from the method allocator
    assert not stand_ins.follows("XnnpackBackend", "1.5.1")
    assert stand_ins.stand_ins_for(["EthosUBackend", "QnnBackend"], ["cortex_m::quantize_per_tensor.out",
                                                                    "vendor::op.out"], "1.5.1") == (
        ["EthosUBackend"], ["cortex_m::quantize_per_tensor.out"])


def test_an_ethos_u_program_is_sized_with_stand_ins_and_its_temp_pool_covers_the_scratch(tmp_path):
    s = pte_lab.sizes(str(SPLIT), verify=True)
    assert not s.skipped and not s.declared
    m = s.methods["forward"]
    assert m.stand_ins == ("EthosUBackend", "cortex_m::quantize_per_tensor.out", "cortex_m::dequantize_per_tensor.out")
    assert m.delegate_scratch == 4864 == max(d.scratch_bytes for d in pte_lab.open(SPLIT).delegate_memory())
    assert m.temp_allocator >= m.delegate_scratch and m.temp_peak >= m.delegate_scratch
    assert m.temp_run_peak == m.delegate_scratch  # at execute: the backend's scratch, measured apart from init
    v = s.verified["forward"]
    assert v.sufficient and v.tight and m.method_allocator > 0
    # the stand-in's handle, allocated with new as the real backend does: 9 words per delegate, on the heap, in
    # every fresh run (the lowest seen); the highest is what the parts show
    assert m.heap_low is None or m.heap_low.load_method >= 2 * 72
    assert m.heap_low is None or m.heap_high.load_method == m.parts()["heap kept by load_method"]
    table = s.table().set_index("part")
    assert table.loc["delegate scratch", "source"] == "delegate blob"
    assert table.loc["method allocator", "source"] == "runner, with stand-ins"
    text = sizes_text(s)
    assert "measured with stand-ins for EthosUBackend, cortex_m::quantize_per_tensor.out" in text
    assert "with stand-ins: verified: these pools load and run it" in text
    assert "measured with stand-ins" in s._repr_html_()
    doc = s.to_dict()
    assert tuple(doc["methods"]["forward"]["stand_ins"]) == m.stand_ins
    assert doc["methods"]["forward"]["parts"]["delegate scratch"] == 4864
    # the header: compiles, carries the pools, the scratch and the stand-ins
    header = c_header(s)
    assert "measured with stand-ins for EthosUBackend" in header
    got = _compile_and_print(header, 'printf("%u %u %u\\n", PTE_LAB_FORWARD_METHOD_POOL_BYTES, '
                                     'PTE_LAB_FORWARD_TEMP_POOL_BYTES, PTE_LAB_FORWARD_DELEGATE_SCRATCH_BYTES);',
                             tmp_path)
    assert got == [str(m.method_allocator), str(m.temp_allocator), "4864"]
    # the example runner builds against the wheel, which lacks the backend: it leaves the method out and says why
    from pte_lab.views.runtime.example_runner import main_cpp

    assert ('method "forward" is not in this example: it was measured with pte_lab\'s stand-ins for EthosUBackend'
            in main_cpp(s))


def test_a_temp_pool_smaller_than_the_scratch_is_refused_at_execute():
    """The scratch is what EthosUBackend takes at every execute: one byte less and the stand-in, like the real
    backend, gets nothing from the temp allocator (MemoryAllocationFailed at execute)."""
    pte = pte_lab.open(SPLIT)
    scratch = pte.methods["forward"].delegate_temp_bytes
    with Session(str(SPLIT), None, []) as session:
        assert session.cannot_run(pte.methods["forward"]) is None
        counted = session.run("forward", runs=1)
        assert counted.ok and counted.pools.temp_peak == scratch  # kernel resolution takes less than the scratch
        method_pool = counted.pools.method_peak
        ok = session.run("forward", method_pool=method_pool, temp_pool=scratch, alignment=16, runs=1)
        short = session.run("forward", method_pool=method_pool, temp_pool=scratch - 1, alignment=16, runs=1)
        done = session.engine.call("stand_in_stats")
    assert ok.ok, ok
    assert not short.ok and short.step == Step(StepKind.EXECUTE, 1) and short.error == 0x21  # MemoryAllocationFailed
    assert done["scratch_peak"] == 4864 and done["handle_bytes"] == 72


def _renamed(src: Path, old: bytes, new: bytes, tmp_path) -> Path:
    data = src.read_bytes()
    assert len(old) == len(new) and old in data
    out = tmp_path / src.name
    out.write_bytes(data.replace(old, new))
    return out


@pytest.mark.slow
def test_a_method_that_cannot_run_reports_what_the_file_declares(tmp_path, capsys):
    """Kernels nobody provides (renamed out of cortex_m::): the planned arenas and the delegates' scratch are
    known from the file; the method pool is reported as not measured, never guessed."""
    path = _renamed(SPLIT, b"cortex_m::", b"vendorxx::", tmp_path)
    s = pte_lab.sizes(str(path))
    assert not s.methods and "vendorxx::quantize_per_tensor.out" in s.skipped["forward"]
    d = s.declared["forward"]
    assert d.planned == ((1, "cpu", 16384),) and d.delegate_scratch == 4864 and d.temp_pool_at_least == 4864
    assert [x[2] for x in d.delegates] == [4096, 4864]
    text = sizes_text(s)
    assert "temp pool: at least 4,864 B (4.8 KiB)" in text and "method pool: not measured" in text
    header = c_header(s)
    assert not re.search(r"#define PTE_LAB_\w+_METHOD_POOL_BYTES", header)  # the preamble names <M>_METHOD_POOL_BYTES
    got = _compile_and_print(header, 'printf("%u %u %lu\\n", PTE_LAB_FORWARD_DELEGATE_SCRATCH_BYTES, '
                                     'PTE_LAB_FORWARD_NUM_PLANNED_BUFFERS, '
                                     '(unsigned long)pte_lab_forward_planned_buffer_sizes[0]);', tmp_path)
    assert got == ["4864", "1", "16384"]
    rows = s.table()
    assert set(rows.source) == {"file", "delegate blob"}
    assert main(["sizes", str(path), "--json"]) == 1  # nothing measured: the exit status says so
    doc = json.loads(capsys.readouterr().out)
    assert doc["declared"]["forward"]["delegate_scratch"] == 4864


def test_a_backend_without_a_stand_in_is_not_measured(tmp_path, monkeypatch, capsys):
    """Known from the file and this install's registry: said before any worker starts (none is started),
    with what the file declares, and the CLI's one line points to what can still be answered."""
    import pte_lab.runtime.sizing.results as results

    def no_worker(*a, **k):
        raise AssertionError("a worker was started for a program that cannot run here")

    monkeypatch.setattr(results, "Session", no_worker)
    monkeypatch.setattr(results, "checked", no_worker)  # nor torch's schema registry loaded
    path = _renamed(DATA / "u55_128_shared_sram.pte", b"EthosUBackend", b"VendorBackend", tmp_path)
    s = pte_lab.sizes(str(path))
    assert "VendorBackend is not registered in this ExecuTorch build, and pte_lab has no stand-in" in s.skipped[
        "forward"]
    assert s.declared["forward"].delegate_scratch == 0  # pte_lab reads no VendorBackend blob
    assert s.declared["forward"].planned == ((1, "cpu", 10240),)
    from pte_lab.errors import NOT_RUN_HERE

    assert main(["sizes", str(path)]) == NOT_RUN_HERE  # this host cannot run it: not a failed check
    out, err = capsys.readouterr()
    assert "no method could run here" in out.splitlines()[0] and err.startswith("pte-lab: not run here: ")
    assert err.strip().endswith(f"pte-lab inspect {path} shows the plan, where the file's bytes go and the "
                                "delegates' blobs")


def test_the_registry_knows_what_the_python_runtime_registers():
    """The check before any worker trusts the registry probe: the backends it finds, and those it finds
    unavailable here, are the Python runtime's."""
    from executorch.runtime import Runtime

    from pte_lab.runtime.libraries import registry

    py = Runtime.get().backend_registry
    names = set(py.registered_backend_names)
    assert set(registry().backends) == names
    assert registry().unavailable == {n for n in names if not py.is_available(n)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["u85_256_dedicated_sram_384kb.pte", "u55_128_sram_only.pte",
                                  "u85_256_sram_only.pte", "u55_128_shared_sram.pte"])
def test_every_committed_ethos_u_program_is_sized_and_proven(name):
    path = DATA / name
    s = pte_lab.sizes(str(path), verify=True)
    m = s.methods["forward"]
    assert s.proven and m.stand_ins[0] == "EthosUBackend"
    assert m.temp_allocator >= m.delegate_scratch == pte_lab.open(path).delegate_memory()[0].scratch_bytes


def test_run_memory_hatches_what_the_file_declares():
    """A stand-in sizing and a declared-only method: the scratch is hatched xx, the labels say how each was had."""
    import matplotlib

    matplotlib.use("Agg")
    from pte_lab import plot

    measured = MethodSizes("forward", ((1, "cpu", 16384),), 2088, 34, 4864, 4864, 320, 16, 144, 0, 0, 0, 20480, 1024,
                           2, stand_ins=("EthosUBackend",), delegate_scratch=4864)
    from pte_lab.runtime.declared import DeclaredSizes

    declared = DeclaredSizes("other", ((1, "cpu", 8192),), 2048, ((0, "EthosUBackend", 2048),), "no kernels")
    s = Sizes("x.pte", None, {"forward": measured}, {"other": "no kernels"}, True, "1.5.1",
              declared={"other": declared})
    ax = plot.run_memory(s)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["forward\n(stand-ins)", "other\n(not measured)"]
    hatched = [(p.get_width(), p.get_hatch()) for p in ax.patches if p.get_hatch()]
    assert hatched == [(4864, "xx"), (2048, "xx")]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "delegate scratch (declared in the blob)" in legend
