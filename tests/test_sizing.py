"""Deployment sizing (pte_lab.sizes, pte-lab sizes) and exact counting, against the real runtime.

Every figure is checked against what ExecuTorch itself does: the pools are
given to ExecuTorch's own allocators and the method must load and run with
them and be refused with one byte less; the planned buffers are what
ExecuTorch's MethodMeta reads; the counted heap agrees with what the Python
loader's steps take in a counted worker. Heap, mappings and resident pages
depend on the CPU and the run: they are checked against the file's facts, the
exact pools and each other within one run, never within a band.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab.cli import main
from pte_lab.runtime import native
from pte_lab.runtime.sizing import TempShort
from pte_lab.views.runtime.sizes import c_header, c_identifiers, sizes_text


def _planned_by_reader(pte, name):
    return tuple((a.mem_id, a.device, a.size) for a in pte.methods[name].arenas)


def _heap_seen(m):
    """The heap figures over the fresh runs: the lowest never above the highest, the scalar fields the highest,
    the peak never below what is still held or what the process allocates once."""
    from dataclasses import fields

    from pte_lab.runtime.sizing import HEAP_FIELDS, HEAP_RUNS

    assert m.heap_runs == HEAP_RUNS and m.heap_low is not None and m.heap_high is not None
    for f in fields(m.heap_low):
        low, high = getattr(m.heap_low, f.name), getattr(m.heap_high, f.name)
        assert (low is None) == (high is None), f.name
        assert low is None or low <= high, (f.name, low, high)
    for name, short in HEAP_FIELDS.items():
        assert getattr(m, name) == getattr(m.heap_high, short), name
    assert m.heap_peak >= m.heap_kept and m.file_heap_peak >= m.file_heap_kept
    assert m.heap_peak >= m.heap_once and m.file_heap_peak >= m.heap_once


def _check(sizes, pte):
    """Every method sized, its planned buffers and inputs as the reader has them, its pools proven in both
    configurations (method + temp, method alone) over the sizing's executes."""
    assert not sizes.skipped
    assert set(sizes.methods) == set(pte.methods)
    for name, m in sizes.methods.items():
        _heap_seen(m)
        assert m.planned == _planned_by_reader(pte, name), name
        reader = pte.methods[name].inputs
        assert [(i.kind, i.dtype, tuple(i.shape), i.nbytes, i.planned) for i in m.inputs if i.kind == "Tensor"] == [
            (s.kind, s.dtype, tuple(s.shape), s.nbytes, s.planned) for s in reader if s.kind == "Tensor"], name
        for v, pool, temp in ((sizes.verified[name], m.method_allocator, m.temp_allocator),
                              (sizes.verified_alone[name], m.method_pool_alone, None)):
            assert (v.method_pool, v.temp_pool, v.runs) == (pool, temp, m.runs), (name, v)
            assert v.sufficient, (name, v)
            assert v.tight and "MemoryAllocationFailed" in v.smaller_error, (name, v)
        assert m.method_allocator > 0 and m.temp_allocator >= m.resolution_minimum
        # without a temp allocator, kernel resolution takes the method pool
        assert m.method_pool_alone >= m.method_allocator
    assert sizes.proven


def test_portable_pools_are_sufficient_tight_and_compile_into_a_c_header(program_path, tmp_path):
    path = str(program_path("portable"))
    s = pte_lab.sizes(path, verify=True)
    _check(s, pte_lab.open(path))
    m = s.methods["forward"]
    assert s.counted and m.heap_load_program is not None and m.file_resident > 0
    assert "forward: verified: these pools load and run it; tight: one byte less is refused" in s._repr_html_()
    # the header a bare-metal build includes: compiled as strict C, its figures read back
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "pools.h").write_text(c_header(s))
    # every size is a constant expression: static arrays in C and C++ (the old array names still work)
    source = textwrap.dedent("""
        #include <stdio.h>
        #include "pools.h"
        #include "pools.h" /* the guard makes a second inclusion harmless */
        static unsigned char method_pool[PTE_LAB_FORWARD_METHOD_POOL_BYTES]
            __attribute__((aligned(PTE_LAB_POOL_ALIGNMENT)));
        static unsigned char alone_pool[PTE_LAB_FORWARD_METHOD_POOL_ALONE_BYTES];
        static unsigned char arena0[PTE_LAB_FORWARD_PLANNED_BUFFER_0_BYTES]
            __attribute__((aligned(PTE_LAB_PLANNED_BUFFER_ALIGNMENT)));
        static unsigned char input0[PTE_LAB_FORWARD_INPUT_0_BYTES];
        int main(void) {
            printf("%u %u %u %u %lu %d %u %u %u %d %d %d %u %u %u\\n", (unsigned)sizeof method_pool,
                   PTE_LAB_FORWARD_TEMP_POOL_BYTES, PTE_LAB_FORWARD_NUM_PLANNED_BUFFERS, PTE_LAB_POOL_ALIGNMENT,
                   (unsigned long)pte_lab_forward_planned_buffer_sizes[0],
                   pte_lab_forward_planned_buffer_device_types[0], (unsigned)sizeof arena0,
                   (unsigned)sizeof alone_pool, (unsigned)sizeof input0, PTE_LAB_FORWARD_INPUT_0_SCALAR_TYPE,
                   (int)pte_lab_forward_input_0_sizes[0], (int)pte_lab_forward_input_0_sizes[1],
                   PTE_LAB_FORWARD_HEAP_PEAK_BYTES, PTE_LAB_FORWARD_HEAP_PEAK_MMAP_BYTES,
                   PTE_LAB_FILE_LOADER_ALIGNMENT);
            return 0;
        }
    """)
    (tmp_path / "main.c").write_text(source)
    (tmp_path / "main.cpp").write_text(source)
    expected = [str(m.method_allocator), str(m.temp_allocator), "1", str(m.alignment), str(m.planned[0][2]), "0",
                str(m.planned[0][2]), str(m.method_pool_alone), "512", "6", "4", "32", str(m.file_heap_peak),
                str(m.heap_peak), str(m.file_loader_alignment)]
    for compiler, std, src in ((cc, "-std=c99", "main.c"), (shutil.which("g++") or shutil.which("c++"), "-std=c++17",
                                                            "main.cpp")):
        if compiler is None:
            continue
        exe = tmp_path / f"main_{src.replace('.', '_')}"
        r = subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-Wno-unused-const-variable",
                            "-Wno-unused-variable", str(tmp_path / src), "-o", str(exe)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
        assert got == expected, src
    # names are per method, not per program: two programs' headers go in translation units of their own,
    # which link together (their arrays are static)
    (tmp_path / "other.h").write_text(c_header(s, guard="OTHER_PROGRAM_POOLS_H"))
    (tmp_path / "tu_a.c").write_text('#include "pools.h"\nunsigned a_pool(void) { return '
                                     '(unsigned)pte_lab_forward_planned_buffer_sizes[0]; }\n')
    (tmp_path / "tu_b.c").write_text('#include <stdio.h>\n#include "other.h"\nunsigned a_pool(void);\nint main(void) '
                                     '{ printf("%u %u\\n", a_pool(), (unsigned)pte_lab_forward_planned_buffer_sizes[0]);'
                                     ' return 0; }\n')
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-Wno-unused-const-variable", str(tmp_path / "tu_a.c"),
                        str(tmp_path / "tu_b.c"), "-o", str(tmp_path / "two_tus")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(tmp_path / "two_tus")], capture_output=True, text=True).stdout.split() == [
        str(m.planned[0][2])] * 2
    # the heap figures: a FileDataLoader reads the whole flatbuffer into the heap (in every run: the lowest
    # seen too); both loaders' figures hold what the process allocates once
    assert m.heap_low.file_peak >= pte_lab.open(path).header.program_size
    assert m.heap_once > 0 and m.heap_peak >= m.heap_once
    # the header's HEAP macros are the highest seen, the lowest beside them, and it says they can move
    header = c_header(s)
    assert f"#define PTE_LAB_FORWARD_HEAP_PEAK_BYTES {m.heap_high.file_peak}u /* lowest seen: " \
           f"{m.heap_low.file_peak} */" in header
    assert f"#define PTE_LAB_FORWARD_HEAP_PEAK_MMAP_BYTES {m.heap_high.peak}u /* lowest seen: {m.heap_low.peak} */" \
        in header
    flat_header = " ".join(header.replace("\n * ", " ").split())
    assert "the HEAP_* figures are the highest seen over 3 fresh runs" in flat_header
    assert "can change with the CPU" in flat_header and "the run" in flat_header
    assert "The pools are exact: ExecuTorch's own allocators, the same on every run" in flat_header
    # the text and the JSON say both ends, and which figures are exact
    text = sizes_text(s)
    assert "seen over 3 runs" in text and "the pools are exact" in text and "can change with the CPU" in text
    doc = s.to_dict()
    assert doc["heap_runs"] == 3 and "exact" in doc["pools"] and "CPU" in doc["heap_figures"]
    assert doc["methods"]["forward"]["heap_low"]["file_peak"] == m.heap_low.file_peak
    assert doc["methods"]["forward"]["heap_high"]["file_peak"] == m.file_heap_peak
    assert set(s.table().columns) >= {"bytes", "lowest"} and (s.table().lowest <= s.table().bytes).all()
    # the header says which loader each heap figure is for, and how to deal with what it left unsaid before
    flat = c_header(s).replace("\n * ", " ").replace("\n *    ", " ")
    for said in ("<M>_HEAP_PEAK_BYTES is for a FileDataLoader", "<M>_HEAP_PEAK_MMAP_BYTES is for the program mapped",
                 "in a translation unit of its own", "A pool of 0 bytes is a MemoryAllocator of size 0",
                 "an empty HierarchicalAllocator", "must stay alive and unchanged until execute returns",
                 "at most the bound's elements", "execute() may still return Error::Ok", "-Wl,-rpath"):
        assert said in " ".join(flat.split()), said
    v = s.verified["forward"]
    assert v.loader == f"FileDataLoader({m.file_loader_alignment})" and v.temp_failures == 0
    assert v.smaller_temp.outcome is TempShort.REFUSED and not v.temp_short_is_silent
    assert v.smaller_temp.error.startswith("MemoryAllocationFailed")
    assert s.to_dict()["verified"]["forward"]["smaller_temp"].startswith("refused: MemoryAllocationFailed")
    assert "#define PTE_LAB_FORWARD_TEMP_SHORT_IS_SILENT 0" in c_header(s)
    # the inputs the figures were measured with are said, in the header and the JSON
    assert "every input set before every execute (tensors: zeros" in c_header(s).replace("\n *", "")
    assert [(i.kind, i.dtype, i.shape, i.planned) for i in m.inputs] == [("Tensor", "float32", (4, 32), True)]


@pytest.mark.slow
def test_device_arenas_come_from_the_device_and_never_count_as_host(program_path):
    path = str(program_path("device"))
    s = pte_lab.sizes(path, verify=True)
    _check(s, pte_lab.open(path))
    m = s.methods["forward2"]
    device_bytes = m.planned_by_device()["cuda:0"]
    assert device_bytes > 40_000
    # the device arena came from the (emulated) device allocator: the worker's host heap never saw it, in any run
    assert m.heap_high.load_method < device_bytes
    t = s.table()
    row = t[(t.method == "forward2") & (t.part == "planned arenas") & (t.device == "cuda:0")]
    assert list(row.bytes) == [device_bytes] and list(row.source) == ["file"]


@pytest.mark.slow
def test_isolated_memory_report_is_exact_and_leaves_out_the_emulated_device(program_path):
    import torch

    pte_lab.emulate_device("cuda:0")
    x = torch.ones(64, 64)
    with pte_lab.load(program_path("device"), isolate=True) as prog:
        prog.load_method("forward2")(x, x)
        rep = prog.memory_report()
    host = rep.query("step == 'load_method' and device == 'cpu'").iloc[0]
    dev = rep.query("step == 'load_method' and device == 'cuda:0'").iloc[0]
    assert host.measured_by.startswith("exact")
    # the host arena is there; the 49 KB device arena (host memory too, here) is not
    assert host.predicted_bytes <= host.measured_bytes < host.predicted_bytes + dev.measured_bytes


@pytest.mark.slow
def test_unplanned_outputs_are_given_buffers(program_path):
    """Outputs the caller provides get buffers: without them the runtime writes through null."""
    path = str(program_path("unplanned_io"))
    _check(pte_lab.sizes(path, verify=True), pte_lab.open(path))


@pytest.mark.slow
def test_external_data_is_sized_with_its_ptd(tmp_path):
    from pte_lab import examples

    ext = examples.save("external", tmp_path / "external.pte")
    (ptd,) = tmp_path.glob("*.ptd")
    s = pte_lab.sizes(ext, data_path=ptd, verify=True)
    _check(s, pte_lab.open(ext))
    # the .ptd's pages count as the program's file
    assert s.methods["forward"].file_resident >= os.path.getsize(ptd) // 2
    without = pte_lab.sizes(ext)
    assert without.skipped["forward"].startswith("ExecuTorch refused it")


def test_the_counter_counts_heap_and_mappings_exactly(tmp_path):
    counter = native.counter_path()
    data = tmp_path / "blob.bin"
    data.write_bytes(b"\1" * (1 << 20))
    code = textwrap.dedent(f"""
        import ctypes, mmap, json
        from pte_lab.runtime import memory
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
        libc.free.argtypes = [ctypes.c_void_p]
        a = memory.counts()
        p = libc.malloc(3 << 20)
        usable = libc.malloc_usable_size(p)
        b = memory.counts()
        libc.free(p)
        c = memory.counts()
        f = open({str(data)!r}, "rb")
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        d = memory.counts()
        m[:]  # touch every page
        rss = memory.file_rss({str(data)!r})
        m.close()
        e = memory.counts()
        print(json.dumps([a, b, c, d, e, rss, usable]))
    """)
    env = dict(os.environ, LD_PRELOAD=str(counter))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    a, b, c, d, e, rss, usable = json.loads(r.stdout.strip().splitlines()[-1])
    # the block malloc gave (its usable size: a page rounding that depends on the machine) is counted, and
    # given back by its free
    assert b["heap_live"] - a["heap_live"] >= usable >= 3 << 20
    assert b["heap_peak"] >= b["heap_live"]
    assert b["heap_live"] - c["heap_live"] >= usable > c["heap_live"] - a["heap_live"]
    assert d["file_mapped"] - c["file_mapped"] == 1 << 20
    assert e["file_mapped"] == c["file_mapped"]
    assert rss == 1 << 20
    # without the counter there is nothing to read, and host figures say they are approximate
    r = subprocess.run([sys.executable, "-c", "from pte_lab.runtime import memory; "
                        "print(memory.counts(), memory.host_in_use()[1])"], capture_output=True, text=True)
    assert r.stdout.startswith("None approximate")


def test_the_heap_at_a_smaller_shape_runs_the_dynamic_input_there_and_is_kept(program_path, tmp_path, monkeypatch):
    """``heap_at``: the sizing's heap peak with a dynamic input set at a smaller shape, as an app's shorter input
    (what what-if's whole-app budget counts at each bound): ExecuTorch runs the method there; a shape beyond the
    bound is refused by ExecuTorch's set_input, one line naming the step; the figure is kept by the file's bytes
    and the shapes, and read back at once."""
    from pte_lab.runtime import kept
    from pte_lab.runtime.sizing import SizingError, heap_at

    monkeypatch.setattr(kept, "folder", lambda: tmp_path)  # kept here; the native builds where they are
    path = str(program_path("dynamic"))  # input 0 is [32, 16], its batch dynamic up to 32
    got = heap_at(path, "forward", {0: (8, 16)}, cache=True)
    assert got.file_heap_peak >= os.path.getsize(path)  # it holds the FileDataLoader's copy of the program
    assert (got.kept, got.xnnpack_resized, got.shapes) == (None, 0, ((0, (8, 16)),))
    again = heap_at(path, "forward", {0: (8, 16)}, cache=True)
    assert again.kept is not None and again.file_heap_peak == got.file_heap_peak
    with pytest.raises(SizingError) as e:
        heap_at(path, "forward", {0: (64, 16)}, cache=False)
    assert "set_inputs before first_execute" in str(e.value) and len(str(e.value).splitlines()) == 1


def test_c_identifiers_are_unique_and_valid():
    ids = c_identifiers(["forward", "a-b", "a_b", "9lives", "", "décode"])
    assert len(set(ids.values())) == 6
    assert all(re.fullmatch(r"[a-z0-9_]+", i) for i in ids.values())
    assert ids["forward"] == "forward" and ids["a-b"] == "a_b" and ids["a_b"] == "a_b_2"


def test_cli_sizes(program_path, capsys):
    path = str(program_path("portable"))
    assert main(["sizes", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pte_lab.sizes" and doc["version"] == 2
    fwd = doc["methods"]["forward"]
    assert fwd["parts"]["method allocator"] == fwd["method_allocator"] > 0
    assert main(["sizes", path, "--method", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pte-lab: error: {path}: no method 'nope' (methods: forward)"]
    with pytest.raises(SystemExit) as exc:
        main(["sizes", path, "--json", "--c-header"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("rows", [2 ** 25, 2 ** 31 - 1])
def test_inputs_a_file_declares_are_checked_before_any_worker_starts(program_path, tmp_path, monkeypatch, capsys,
                                                                      rows):
    """The dynamic example declaring its input [2**25, 16] (2 GiB) or [2**31 - 1, 16] (128 GiB), a 2.4 KB file:
    the runner would build the input at that shape (and did, 19 s and 4.4 GB); refused at once, the exact bytes
    in one line, no worker started. Raised, the limit lets the file on to the reader's checks."""
    from crafting import with_sizes

    import pte_lab.runtime.inputs as inputs
    import pte_lab.runtime.sizing.results as results
    from pte_lab.errors import DeclaredSizeError, PteFormatError
    from pte_lab.runtime.inputs import INPUT_LIMIT_ENV

    path = tmp_path / "declared.pte"
    path.write_bytes(with_sizes(program_path("dynamic").read_bytes(), [32, 16], [rows, 16]))
    monkeypatch.setattr(results, "Session", lambda *a, **k: pytest.fail("a worker started"))
    monkeypatch.setattr(inputs, "host_available", lambda: 1 << 50)  # not this host's: the limit decides
    n = rows * 16 * 4
    with pytest.raises(DeclaredSizeError) as e:
        pte_lab.sizes(str(path))
    assert e.value.needed == n and e.value.available == 1 << 30 and e.value.method == "forward"
    assert f"the sizing runner's inputs and unplanned outputs at the shapes the file declares would build {n:,} B" \
        in str(e.value) and f"input 0 float32[{rows}, 16]: {n:,} B" in str(e.value)
    assert main(["sizes", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"input 0 float32[{rows}, 16]: {n:,} B" in err[0] and "nothing was built" in err[0]
    assert "(the default: raise it with --max-input-bytes" in err[0] and e.value.limit_source == "default"
    # raised past it, the check passes and the reader refuses this file (its input overflows its arena)
    assert main(["sizes", str(path), "--max-input-bytes", "128GiB"]) == 2
    assert "past the end of arena 1" in capsys.readouterr().err
    monkeypatch.setenv(INPUT_LIMIT_ENV, "128GiB")
    with pytest.raises(PteFormatError, match="past the end of arena 1"):
        pte_lab.sizes(str(path))
    # never more than this machine has free
    monkeypatch.setattr(inputs, "host_available", lambda: 1 << 20)
    with pytest.raises(DeclaredSizeError, match=r"more than the 1,048,576 B \(1.0 MiB\) free on this machine"):
        pte_lab.sizes(str(path))


def test_sample_inputs_are_checked_before_torch_builds_them(program_path, tmp_path, monkeypatch):
    """example_inputs and call_sequence (run_all's, replan --verify's) build at the file's shapes: checked first,
    all calls together; torch is never asked for the declared 2 GiB."""
    import torch
    from crafting import with_sizes

    from pte_lab.errors import DeclaredSizeError
    from pte_lab.runtime import call_sequence, example_inputs
    from pte_lab.runtime.inputs import INPUT_LIMIT_ENV

    asked = []
    monkeypatch.setattr(torch, "randn", lambda size, **k: asked.append(tuple(size)) or torch.zeros(size))
    big = pte_lab.open(with_sizes(program_path("dynamic").read_bytes(), [32, 16], [2 ** 25, 16])).methods["forward"]
    with pytest.raises(DeclaredSizeError, match=r"its inputs at the shapes the file declares would build "
                                                 r"2,147,483,648 B"):
        example_inputs(big)
    assert asked == []
    m = pte_lab.open(program_path("dynamic")).methods["forward"]
    assert [tuple(x.shape) for x in example_inputs(m, shapes={0: (3, 16)})] == [(3, 16)] == asked
    monkeypatch.setenv(INPUT_LIMIT_ENV, "5KiB")  # 2 KiB a call
    assert len(call_sequence(m, 2)) == 2
    with pytest.raises(DeclaredSizeError, match=r"the inputs of 3 calls .* would build 6,144 B"):
        call_sequence(m, 3)


@pytest.mark.slow
def test_every_example_is_sized_and_proven(program_path):
    # a delegate in each of two methods, state kept between calls, control flow, two host arenas
    # (portable, device, unplanned_io and external have tests of their own)
    for name in ("xnnpack", "kv_cache", "cond", "shared_state"):
        path = str(program_path(name))
        _check(pte_lab.sizes(path, verify=True), pte_lab.open(path))


@pytest.mark.slow
def test_llm_sizes_explain_what_the_python_loader_takes(program_path):
    """On export_llm's program XNNPACK keeps memory of its own beyond the pools; the Python loader's own steps,
    counted in a worker, hold at least the file's arenas and the exact method pool."""
    path = str(program_path("llm"))
    s = pte_lab.sizes(path)
    assert s.verified is None
    s.verify()  # on its own, in a fresh worker: it registers the LLM's operators there too
    _check(s, pte_lab.open(path))
    m = s.methods["forward"]
    plan = sum(b for _, _, b in m.planned)
    assert m.heap_low.load_method > 0  # XNNPACK's packed weights, in every run: outside the pools
    assert m.alignment >= 64  # XNNPACK asks for 64-byte alignment
    from pte_lab.runtime import example_inputs

    with pte_lab.load(path, isolate=True) as prog:
        f = prog.load_method("forward")
        f(*example_inputs(prog.plan.methods["forward"]))
        rep = prog.memory_report().set_index("step")
    # the heap of that run is not the sizing's (another process: the CPU's kernels, the run), but what ExecuTorch
    # allocates is: the arenas at load_program, and at load_method every allocation of the method pool, which
    # the Python loader's MallocMemoryAllocator mallocs on its own (each at least its size and padding)
    assert rep.loc["load_program", "measured_bytes"] >= rep.loc["load_program", "predicted_bytes"] >= plan
    assert rep.loc["load_method", "measured_bytes"] >= m.method_allocator


@pytest.mark.slow
def test_a_method_that_crashes_the_runtime_is_skipped_and_the_others_sized(program_path, tmp_path, monkeypatch):
    """A native crash while sizing one method ends that worker, not the caller; a fresh worker sizes the rest."""
    import signal

    from pte_lab.runtime import sizing

    real_run = sizing.Session.run

    def run(self, name, *args, **kwargs):
        if name == "attention":  # what a file the reader cannot fault would do: crash the runtime
            os.kill(self.engine._proc.pid, signal.SIGSEGV)
            self.engine._proc.wait(timeout=30)
        return real_run(self, name, *args, **kwargs)

    monkeypatch.setattr(sizing.Session, "run", run)
    s = pte_lab.sizes(program_path("xnnpack"))
    assert s.skipped["attention"].startswith("the runtime crashed (SIG")
    assert list(s.methods) == ["forward"] and s.methods["forward"].method_allocator > 0


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def _example_runner_runs_exactly(path: str, folder, capsys) -> str:
    """pte-lab sizes --example-runner: build it against the wheel; every method runs (two executes, the same
    output bytes) at exactly the header's sizes in both configurations, and one byte less is refused. Run
    alone under pte_lab's allocation counter, each method's heap (the runner reads the program with a
    FileDataLoader) holds at least the program's flatbuffer; the header's <M>_HEAP_PEAK_BYTES is the highest
    seen while sizing, the lowest beside it (the heap depends on the CPU and the run: no band)."""
    assert main(["sizes", path, "--example-runner", str(folder)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in folder.iterdir()) == ["build.sh", "main.cpp", "pools.h"]
    r = _run([str(folder / "build.sh")])
    assert r.returncode == 0, r.stderr[-3000:]
    header = (folder / "pools.h").read_text()
    macros = dict(re.findall(r"#define (PTE_LAB_\w+) (\d+)u", header))
    methods = re.findall(r'/\* ---- method "([^"]+)" ---- \*/', header)
    assert methods
    idents = c_identifiers(methods)
    counted = dict(os.environ, LD_PRELOAD=str(native.counter_path()))
    flatbuffer = pte_lab.open(path).header.program_size
    for exe, pool in (("runner", "METHOD_POOL_BYTES"), ("runner_no_temp", "METHOD_POOL_ALONE_BYTES")):
        r = _run([str(folder / exe), path])
        assert r.returncode == 0, (exe, r.stdout, r.stderr[-2000:])
        for name in methods:
            size = macros[f"PTE_LAB_{idents[name].upper()}_{pool}"]
            assert f"{name}: loaded: method pool {size} of {size} bytes used" in r.stdout, (exe, r.stdout)
            runs = re.findall(rf"^{re.escape(name)}: execute (\d) ok(.*)$", r.stdout, re.M)
            assert [k for k, _ in runs] == ["1", "2"], r.stdout
            assert runs[0][1] == runs[1][1]  # the same inputs, the same output bytes
            smaller = _run([str(folder / exe), path, "--method", name, "--method-pool", str(int(size) - 1)])
            assert smaller.returncode == 1
            assert smaller.stdout.splitlines()[-1] == (
                f"{name}: load_method failed: Error::MemoryAllocationFailed (0x21)"), smaller.stdout
            alone = _run([str(folder / exe), path, "--method", name], env=counted)
            assert alone.returncode == 0, alone.stdout
            (heap,) = re.findall(r"^heap: peak (\d+) bytes", alone.stdout, re.M)
            highest, lowest = map(int, re.search(
                rf"#define PTE_LAB_{idents[name].upper()}_HEAP_PEAK_BYTES (\d+)u /\* lowest seen: (\d+) \*/",
                header).groups())
            assert flatbuffer <= lowest <= highest and int(heap) >= flatbuffer, (exe, name, heap, lowest, highest)
    return header


@pytest.mark.slow
def test_example_runner_of_a_portable_program(program_path, tmp_path, capsys):
    path = str(program_path("portable"))
    header = _example_runner_runs_exactly(path, tmp_path / "runner", capsys)
    # here a temp pool one byte short is refused at load_method (kernel resolution moves to the method pool)
    assert "#define PTE_LAB_FORWARD_TEMP_SHORT_IS_SILENT 0" in header
    temp = int(re.search(r"#define PTE_LAB_FORWARD_TEMP_POOL_BYTES (\d+)u", header).group(1))
    r = _run([str(tmp_path / "runner" / "runner"), path, "--temp-pool", str(temp - 1)])
    assert r.returncode == 1 and "forward: load_method failed: Error::MemoryAllocationFailed (0x21)" in r.stdout


@pytest.mark.slow
def test_planned_token_inputs_are_set_before_every_execute(program_path, tmp_path, capsys):
    """An XNNPACK GPT whose planned int64 tokens' bytes later tensors reuse: sized with default options
    (the runner sets the tokens before every execute), and its example runner runs at exactly the sizes.
    Without --no-as-needed the backend's library is dropped and load_method fails, as the header says."""
    path = str(program_path("gpt"))
    pte = pte_lab.open(path)
    for name, method in pte.methods.items():  # the file's plan gives the input's bytes to a later tensor
        t = method.tensors
        tokens = t[t.role == "input"].iloc[0]
        later = t[(t["first"] > tokens["last"]) & (t.mem_id == tokens.mem_id)
                  & (t.offset < tokens.offset + tokens.nbytes) & (t.offset + t.nbytes > tokens.offset)]
        assert len(later), name
    header = _example_runner_runs_exactly(path, tmp_path / "runner", capsys)
    assert "#define PTE_LAB_FORWARD_INPUT_0_SCALAR_TYPE 4 /* int64; shape 1x8 */" in header
    assert "#define PTE_LAB_FORWARD_INPUT_0_PLANNED 1" in header
    assert '#define PTE_LAB_FORWARD_BACKENDS "XnnpackBackend"' in header
    assert "--no-as-needed" in header
    # the same build with the linker's default --as-needed: the backend's registration is dropped silently
    build = (tmp_path / "runner" / "build.sh").read_text().replace("-Wl,--no-as-needed", "-Wl,--as-needed")
    (tmp_path / "runner" / "build.sh").write_text(build)
    assert _run([str(tmp_path / "runner" / "build.sh")]).returncode == 0
    r = _run([str(tmp_path / "runner" / "runner"), path, "--method", "forward"])
    assert r.returncode == 1 and "load_method failed" in r.stdout, r.stdout
    assert "XnnpackBackend is not registered" in r.stderr or "not found" in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
def test_example_runner_of_an_llm(program_path, tmp_path, capsys):
    """export_llm's program: its custom ops come from the wheel's libcustom_ops_aot_lib.so, which links
    ExecuTorch's Python extension: the build links libpython too."""
    path = str(program_path("llm"))
    header = _example_runner_runs_exactly(path, tmp_path / "runner", capsys)
    assert "libcustom_ops_aot_lib.so: llama::custom_sdpa.out, llama::update_cache.out" in header.replace("\n * ", " ")
    assert "libpython" in (tmp_path / "runner" / "build.sh").read_text()
    # forward's SDPA takes scratch from the temp pool at execute: one byte short is not refused, execute returns
    # Ok; the header says so (from --verify), and the runner counts the refused allocations and fails
    assert "#define PTE_LAB_FORWARD_TEMP_SHORT_IS_SILENT 1" in header
    temp = int(re.search(r"#define PTE_LAB_FORWARD_TEMP_POOL_BYTES (\d+)u", header).group(1))
    r = _run([str(tmp_path / "runner" / "runner"), path, "--method", "forward", "--temp-pool", str(temp - 1)])
    assert r.returncode == 1 and "forward: execute 2 ok" in r.stdout, r.stdout
    assert re.search(r"^forward: \d+ temp allocations refused during execute \(it returned Ok\)$", r.stdout, re.M)
    assert "Failed to allocate temp memory" in r.stderr


def test_a_part_of_a_method_s_memory_is_asked_by_its_member_or_its_words():
    """``MethodSizes.parts()`` is keyed by ``MemoryPart`` members, which are the words the documents write: a
    notebook's ``m.seen("heap kept by load_method")`` and ``m.parts()["temp allocator"]`` read what the members
    read, and the JSON keys are the words."""
    import json

    from pte_lab.runtime.sizing import HeapFigures, MethodSizes
    from pte_lab.vocabulary import MemoryPart

    m = MethodSizes("forward", ((1, "cpu", 64),), method_allocator=100, method_allocations=3, temp_allocator=50,
                    temp_peak=40, resolution_minimum=50, alignment=16, heap_load_method=7, heap_execute=None,
                    heap_execute_peak=None, anonymous_mapped=0, file_resident=None, heap_load_program=2, runs=1,
                    delegate_scratch=8, heap_low=HeapFigures(load_method=5))
    assert m.seen("heap kept by load_method") == m.seen(MemoryPart.HEAP_LOAD_METHOD) == (5, 7)
    assert m.seen("heap kept by execute") is None
    assert m.parts()["temp allocator"] == m.parts()[MemoryPart.TEMP_ALLOCATOR] == 50 - 8
    assert list(json.loads(json.dumps(m.parts()))) == [p.value for p in m.parts()] and "method allocator" in m.parts()
