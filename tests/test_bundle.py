"""The before/after measurement as a bundle that runs without Python (pte-lab measure --bundle).

The slow tests build the bundle from this checkout into a temporary folder, the way CI does from a
clean clone (the runner is compiled against the installed executorch), and run its run.sh with no
Python on PATH: on the emulated device (this machine has no GPU), with no driver, with a driver that
sees no device, and with a test double of the CUDA driver (tests/fake_libcuda.c) so the CUDA code path
runs end to end.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("executorch.runtime")

from pte_lab.errors import RunnerLinesError
from pte_lab.experiments import bundle as bundle_mod
from pte_lab.experiments import device_placement as dp
from pte_lab.experiments import placement_lines as pl

SIDE = 64
PLANNED = 3 * SIDE * SIDE * 4 + 64  # forward2's device arena: three side x side float32 tensors + XNNPACK padding
HERE = Path(__file__).parent


# --------------------------------------------------------------- fast: the Python side
def _native_doc(**changes) -> dict:
    """A document as the native runner writes it (one runtime, CUDA)."""
    steps = [{"step": s, "error": None, "correct": None, "seconds": 0.01, "device_bytes": 0, "host_bytes": 100,
              "device_events": 0, "driver_device_bytes": 0} for s in dp.STEPS]
    steps[2].update(device_bytes=PLANNED, driver_device_bytes=2 << 20, device_events=1)
    for s in steps[3:6]:
        s["correct"] = True
    steps[6].update(device_bytes=-PLANNED, driver_device_bytes=-(2 << 20), device_events=1)
    rt = {"label": "after", "python": None, "executorch_version": "1.5.1", "measured_by": "cuda device ledger",
          "host_measured_by": "exact (allocation counter)", "steps": steps, "failure": None,
          "runner": "pte_lab_placement (native): ...", "backend": "cuda",
          "arenas": [{"when": "load_method forward2", "methods": "forward2", "runtime_index": 1, "mem_id": 2,
                      "device": "cuda:0", "bytes": PLANNED, "memory": "managed memory (cuMemAllocManaged)",
                      "why": "host code touches it: delegate XnnpackBackend (runs on the host)",
                      "touched_by": ["delegate XnnpackBackend (runs on the host)"]}],
          "notes": []}
    doc = {"schema": "pte_lab.device_placement", "version": 1, "side": SIDE, "device": "cuda:0",
           "planned_device_bytes": PLANNED, "runtimes": [rt], "published": dp.PUBLISHED,
           "measurement": {"tool": "pte_lab_placement", "backend": "cuda", "backend_line": "backend cuda: GPU X",
                           "gpu": "GPU X", "driver_version": 12080,
                           "driver_figure": "driver_device_bytes is what cuMemGetInfo says"}}
    doc.update(changes)
    return doc


def test_a_native_report_reads_back_and_shows_the_driver_and_each_arena():
    doc = _native_doc()
    report = dp.Report.from_dict(doc)
    assert report.to_dict() == doc  # nothing lost, nothing added
    (r,) = report.runtimes
    df = report.table()
    assert r.tag == "after (native, on 1.5.1 libraries)"
    assert df.loc["load_method forward2", f"{r.tag} driver device bytes"] == 2 << 20
    assert df.loc["load_method forward2", f"{r.tag} device bytes"] == PLANNED
    md = report.to_markdown()
    assert "backend cuda: GPU X" in md and "what cuMemGetInfo says" in md
    assert "managed memory (cuMemAllocManaged) — host code touches it: delegate XnnpackBackend" in md
    with pytest.raises(ValueError, match="pte_lab.inspect"):
        dp.Report.from_dict({**doc, "schema": "pte_lab.inspect"})


def test_compare_names_every_difference_and_only_those():
    a, b = dp.Report.from_dict(_native_doc()), dp.Report.from_dict(_native_doc())
    assert dp.disagreements(a, b) == []
    b.runtimes[0].steps[1]["host_bytes"] += dp.HOST_TOLERANCE  # within the tolerance
    b.runtimes[0].steps[0]["seconds"] = 99.0  # never compared
    for s in (a, b):  # a large step may differ by a share of its bytes
        s.runtimes[0].steps[4]["host_bytes"] = 16 << 20
    b.runtimes[0].steps[4]["host_bytes"] += int(dp.HOST_TOLERANCE_SHARE * (16 << 20))
    assert dp.disagreements(a, b) == []
    b.runtimes[0].steps[4]["host_bytes"] += 1
    b.runtimes[0].steps[1]["host_bytes"] += 1
    b.runtimes[0].steps[2]["device_bytes"] = 0
    b.runtimes[0].steps[3]["correct"] = False
    diffs = dp.disagreements(a, b)
    assert len(diffs) == 4, diffs
    assert any("load_method forward: host bytes" in d for d in diffs)
    assert any("execute forward: host bytes" in d for d in diffs)
    assert any(f"load_method forward2: device_bytes {PLANNED} vs 0" in d for d in diffs)
    assert any("execute forward2: correct True vs False" in d for d in diffs)


def test_grid_inputs_make_every_output_exact():
    # the bundle compares outputs bit for bit: that holds only if float32 computes them exactly
    (x, y), expect = pytest.importorskip("pte_lab.examples").device_reference(SIDE, grid=True)
    assert set(np.unique(x.numpy() * 8).astype(int)) <= set(range(-16, 17))
    exact = np.maximum(x.numpy().astype(np.float64) @ y.numpy().astype(np.float64), 0) + 1
    assert np.array_equal(exact.astype(np.float32), expect["forward"].numpy())
    assert np.array_equal(x.numpy() + y.numpy(), expect["forward2"].numpy())


def test_reference_file_says_what_the_runner_checks(tmp_path):
    names = bundle_mod.write_reference(tmp_path, "p", SIDE)
    lines = (tmp_path / "p.reference").read_text().splitlines()
    assert lines[0] == bundle_mod.REFERENCE_HEAD and names == ["p.codes", "p.reference"]
    (x, y), expect = pytest.importorskip("pte_lab.examples").device_reference(SIDE, grid=True)
    codes = np.frombuffer((tmp_path / "p.codes").read_bytes(), dtype=np.int8)
    assert np.array_equal(codes.astype(np.float32) * bundle_mod.GRID_SCALE,
                          np.concatenate([x.numpy().ravel(), y.numpy().ravel()]))
    for method, out in expect.items():
        data = out.numpy().astype("<f4").tobytes()
        assert f"expect {method} {len(data)} {zlib.crc32(data)}" in lines


def test_recorded_runs_are_cuda_runs_of_the_bundle():
    for report in dp.recorded():  # empty until a GPU run is recorded (recorded/README.md)
        assert report.measurement["backend"] == "cuda" and report.measurement["gpu"]
        assert {r.label for r in report.runtimes} == {"before", "after"}


# ------------------------------------------ fast: the lines between the runner's parent and its children
#: one child's lines, as the runner writes them (a note with a tab in it, a device arena with its users)
LINES = "\n".join([
    pl.HEAD,
    "BEGIN\tload_program",
    "ARENA\tload_program\tforward\t0\tcpu\t49152\thost memory (std::vector<uint8_t>, shared by forward)\t\\N",
    "STEP\tload_program\t\\N\t\\N\t0.000228\t0\t50336\t0\t\\N",
    "BEGIN\tload_method forward2",
    (f"ARENA\tload_method forward2\tforward2\t1\tcuda:0\t{PLANNED}\thost memory (the emulated device)\ton CUDA it "
     "would get managed memory\tdelegate XnnpackBackend (runs on the host)\tmethod input 0"),
    f"STEP\tload_method forward2\t\\N\t\\N\t0.018093\t{PLANNED}\t90960\t1\t\\N",
    "BEGIN\texecute forward2",
    "STEP\texecute forward2\tRuntimeError: method->execute() failed\tfalse\t0.000171\t0\t-16752\t3\t2097152",
    "NOTE\ta note\\twith a tab and a back\\\\slash",
    ("RUNTIME\tafter\t1.5.1\temulated device ledger (exact, host memory)\texact (allocation counter)\t\\N\t"
     "pte_lab_placement (native): ...\temulated"),
    "END",
]) + "\n"
_STEP = LINES.splitlines()[3]

#: lines that are not the protocol, and the one line that says so (the runner's own reader says the same)
BAD_LINES = [
    (LINES[:-1], "line 12: cut short (no newline at its end)"),
    (LINES[: LINES.index("\nBEGIN\tload_method") - 5], "line 4: cut short (no newline at its end)"),
    ("", f"no lines (expected '{pl.HEAD}' first)"),
    (LINES.replace(pl.HEAD, "pte_lab.placement_lines 2"),
     f"line 1: expected '{pl.HEAD}', read 'pte_lab.placement_lines 2'"),
    (LINES.replace("NOTE\t", "NOPE\t"), "line 10: unknown record kind 'NOPE'"),
    (LINES.replace(_STEP, _STEP.rsplit("\t", 2)[0]), "line 4 (STEP): 6 fields, expected 8"),
    (LINES.replace(_STEP, _STEP.replace("\t50336\t", "\t50,336\t")), "line 4 (STEP): host_bytes '50,336' is not an integer"),
    (LINES.replace(_STEP, _STEP.replace("\t\\N\t\\N\t0", "\t\\N\tyes\t0")), "line 4 (STEP): correct 'yes' is not true, false or \\N"),
    (LINES.replace(_STEP, _STEP.replace("\t0.000228\t", "\t\\N\t")), "line 4 (STEP): seconds is missing (\\N)"),
    (LINES.replace("\ta note\\t", "\ta note\\x"), "line 10 (NOTE): field 1 has a bad escape '\\x'"),
    (LINES.replace("\t49152\t", "\t\\N\t"), "line 3 (ARENA): bytes is missing (\\N)"),
    (LINES + "NOTE\tlate\n", "line 13: a record after END"),
]


def test_a_child_s_lines_read_as_typed_records_that_cross_a_pipe():
    child = pl.read(LINES)
    assert [type(r) for r in child.records] == [
        pl.BeginLine, pl.ArenaLine, pl.StepLine, pl.BeginLine, pl.ArenaLine, pl.StepLine, pl.BeginLine, pl.StepLine,
        pl.NoteLine, pl.RuntimeLine, pl.EndLine]
    first, _, failed = child.of(pl.StepLine)
    assert (first.step, first.error, first.correct, first.seconds, first.host_bytes, first.driver_device_bytes) == (
        "load_program", None, None, 0.000228, 50336, None)
    assert (failed.error, failed.correct, failed.host_bytes, failed.driver_device_bytes) == (
        "RuntimeError: method->execute() failed", False, -16752, 2 << 20)
    _, device = child.of(pl.ArenaLine)
    assert (device.mem_id, device.bytes, device.why) == (2, PLANNED, "on CUDA it would get managed memory")
    assert device.touched_by == ("delegate XnnpackBackend (runs on the host)", "method input 0")
    assert child.of(pl.NoteLine)[0].text == "a note\twith a tab and a back\\slash"
    assert child.ended and child.runtime.failure is None
    assert pickle.loads(pickle.dumps(child)) == child
    rt = pl.to_runtime(child)  # what the runner's document holds for this child
    assert rt.arenas[1] == {"when": "load_method forward2", "methods": "forward2", "runtime_index": 1, "mem_id": 2,
                            "device": "cuda:0", "bytes": PLANNED, "memory": "host memory (the emulated device)",
                            "why": "on CUDA it would get managed memory",
                            "touched_by": ["delegate XnnpackBackend (runs on the host)", "method input 0"]}
    assert rt.step("execute forward2")["correct"] is False and rt.notes == [child.of(pl.NoteLine)[0].text]


@pytest.mark.parametrize("text, message", BAD_LINES, ids=[m.split(": ", 1)[-1][:40] for _, m in BAD_LINES])
def test_a_malformed_or_truncated_line_is_refused_in_one_named_line(text, message):
    with pytest.raises(RunnerLinesError) as err:
        pl.read(text)
    assert str(err.value) == message


def test_the_python_records_have_the_fields_the_runner_s_header_declares():
    from dataclasses import fields

    from pte_lab.runtime import native

    declared = native.placement_line_fields()
    assert [f.name for f in fields(pl.StepLine)] == list(declared["STEP"])
    assert [f.name for f in fields(pl.ArenaLine)] == [*declared["ARENA"], "touched_by"]
    assert [f.name for f in fields(pl.RuntimeLine)] == list(declared["RUNTIME"])


def test_bundle_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    from pte_lab.cli import main

    assert main(["measure", "--bundle", str(tmp_path), "--side", "8"]) == 2  # before any build or export
    assert (tmp_path / "notes.txt").read_text() == "mine"


# ----------------------------------------------------------- slow: the bundle itself
@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return bundle_mod.write_bundle(tmp_path_factory.mktemp("bundle") / "b", side=SIDE)


@pytest.fixture(scope="module")
def measured(tmp_path_factory, legacy_python):
    """`pte-lab measure`'s figures for the same program: executorch 1.4.1 and the installed one, emulated."""
    return dp.run(side=SIDE, runtimes={"before": legacy_python, "after": sys.executable},
                  workdir=tmp_path_factory.mktemp("dp"), emulate=True)


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    """A PATH with only what run.sh uses besides the shell's builtins (dirname): no Python on it."""
    folder = tmp_path_factory.mktemp("tools")
    os.symlink(shutil.which("dirname"), folder / "dirname")
    assert not any(shutil.which(p, path=str(folder)) for p in ("python", "python3", f"python{sys.version_info[0]}"))
    return str(folder)


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the CUDA driver's test double")
    folder = tmp_path_factory.mktemp("fake_cuda")
    subprocess.run([cc, "-O2", "-fPIC", "-shared", str(HERE / "fake_libcuda.c"), "-o", str(folder / "libcuda.so.1")],
                   check=True)
    return str(folder)


def run_bundle(bundle, tools, cwd, *args, **env):
    """run.sh in a bare environment: PATH without Python, nothing else inherited."""
    base = {"PATH": tools, "HOME": str(cwd)}
    out = subprocess.run([str(bundle.path / "run.sh"), *args], cwd=cwd, env={**base, **env}, capture_output=True,
                         text=True, timeout=300)
    doc = cwd / "before_after.json"
    return out, (dp.Report.load(doc) if doc.exists() else None)


@pytest.mark.slow
def test_bundle_holds_what_the_runner_loads_and_stays_small(bundle):
    names = {p for p, _, _ in bundle.files}
    assert {"run.sh", "bin/pte_lab_placement", "lib/libexecutorch.so", "lib/libpte_lab_counter.so",
            f"programs/device_side{SIDE}.pte", "published.json", "MANIFEST.txt"} <= names
    assert bundle.total_bytes == sum(f.stat().st_size for f in bundle.path.rglob("*") if f.is_file())
    # at the published size only the input codes grow (two side x side int8 tensors): still well under the
    # 64 MiB a device session carries
    assert bundle.total_bytes - 2 * SIDE * SIDE + 2 * 2048 * 2048 < 32 << 20
    # every library resolves inside the bundle ($ORIGIN/../lib), none is missing, none is extra
    ldd = subprocess.run(["ldd", str(bundle.path / "bin/pte_lab_placement")], capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"]}).stdout
    assert "not found" not in ldd
    loaded = {Path(line.split(" => ")[1].split(" (")[0]).name for line in ldd.splitlines()
              if " => " in line and str(bundle.path) in line}
    shipped = {p.name for p in (bundle.path / "lib").glob("*.so")} - {"libpte_lab_counter.so"}
    assert loaded == shipped, (loaded, shipped)
    assert bundle.requires["glibc"] == "2.27"  # ExecuTorch's wheel asks no more; the runner asks less
    assert "python" not in (bundle.path / "run.sh").read_text().lower().replace("without python", "")


@pytest.mark.slow
def test_run_sh_without_python_gives_the_figures_pte_lab_measure_gives(bundle, measured, tools, tmp_path):
    out, report = run_bundle(bundle, tools, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("pte_lab_placement: backend emulated: no CUDA driver: libcuda.so.1"), first
    assert report.measurement["backend"] == "emulated" and report.side == SIDE
    before, after = report.runtimes
    assert (before.label, after.label) == ("before", "after")
    assert report.planned_device_bytes == measured.planned_device_bytes == PLANNED
    assert measured.runtimes[0].executorch_version == "1.4.1"
    # the same steps, errors, correctness, device bytes and ledger events; host bytes within the tolerance.
    # One execute differs by the library, not the loader: 1.4.1's kernels take some 8 MiB more (a thread's
    # stack size, an anonymous mapping the counter sees) on forward's first run; 1.5.1's, which the runner
    # mirrors the pre-fix loader on, do not
    diffs = dp.disagreements(measured, report)
    assert all(d.startswith("before, execute forward: host bytes") for d in diffs), diffs
    assert after.measured_by == measured.runtimes[1].measured_by  # the same ledger, read the same way
    for r in (before, after):  # outputs equal eager PyTorch's bit for bit
        assert all(r.step(s)["correct"] is True for s in ("execute forward2", "execute forward",
                                                           "execute forward2 again"))
    # before: nothing on the device, both methods' arenas on the host at load_program
    assert all(s["device_bytes"] == 0 for s in before.steps)
    # the difference is the device arena, to within the runtimes' own fixed bookkeeping (no kernels run yet)
    assert before.step("load_program")["host_bytes"] - after.step("load_program")["host_bytes"] == \
        pytest.approx(PLANNED, abs=1024)
    (arena,) = [a for a in after.arenas if a["device"] == "cuda:0"]
    assert (arena["when"], arena["bytes"], arena["mem_id"]) == ("load_method forward2", PLANNED, 2)
    assert arena["memory"] == "host memory (the emulated device)"
    assert "managed memory" in arena["why"] and "XnnpackBackend" in arena["why"]


@pytest.mark.slow
def test_the_runner_reads_who_touches_each_device_arena_as_pte_lab_does(bundle, tools, tmp_path):
    from pte_lab import open as open_pte

    m = open_pte(bundle.path / f"programs/device_side{SIDE}.pte").methods["forward2"]
    in_arena = {t.value for t in m.planned if t.mem_id == 2}
    users = {i.target for i in m.instructions if set(i.args) & in_arena}
    _, report = run_bundle(bundle, tools, tmp_path, "--loader", "after")
    (arena,) = [a for a in report.runtimes[0].arenas if a["device"] == "cuda:0"]
    read = {u.split(" (")[0].replace("kernel ", "").replace("delegate ", "delegate:") for u in arena["touched_by"]}
    assert read == users == {"delegate:XnnpackBackend", "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}


@pytest.mark.slow
def test_no_driver_or_no_device_is_one_line_and_the_emulated_device(bundle, tools, fake_driver, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out, report = run_bundle(bundle, tools, tmp_path, LD_LIBRARY_PATH=str(empty))  # libcuda hidden
    assert out.returncode == 0 and report.measurement["backend"] == "emulated"
    assert [ln for ln in out.stdout.splitlines() if "backend" in ln] == [out.stdout.splitlines()[0]]
    out, report = run_bundle(bundle, tools, tmp_path, LD_LIBRARY_PATH=fake_driver, FAKE_CUDA_NO_DEVICE="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        "pte_lab_placement: backend emulated: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device "
        "is detected; device memory is host memory, counted in the emulated device's ledger")
    assert report.runtimes[1].step("load_method forward2")["device_bytes"] == PLANNED
    # asked for cuda where there is none: one line, exit 2, nothing written
    (tmp_path / "before_after.json").unlink()
    out, report = run_bundle(bundle, tools, tmp_path, "--backend", "cuda", LD_LIBRARY_PATH=str(empty))
    assert out.returncode == 2 and report is None
    assert out.stderr.strip().splitlines() == [
        "pte_lab_placement: error: --backend cuda: no CUDA driver: libcuda.so.1: cannot open shared object file: "
        "No such file or directory"]


@pytest.mark.slow
def test_cuda_path_through_a_driver_double(bundle, tools, fake_driver, tmp_path):
    out, report = run_bundle(bundle, tools, tmp_path, LD_LIBRARY_PATH=fake_driver)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[0].startswith(
        "pte_lab_placement: backend cuda: pte_lab test double of the CUDA driver (cuda:0)")
    m = report.measurement
    assert (m["backend"], m["gpu"], m["driver_version"]) == ("cuda", "pte_lab test double of the CUDA driver", 12080)
    assert "cuMemGetInfo" in m["driver_figure"]
    before, after = report.runtimes
    pages = -(-PLANNED // (2 << 20)) * (2 << 20)  # the double rounds to 2 MiB pages, as the driver does
    s = after.step("load_method forward2")
    assert (s["device_bytes"], s["driver_device_bytes"], s["device_events"]) == (PLANNED, pages, 1)
    assert after.step("release")["driver_device_bytes"] == -pages
    (arena,) = [a for a in after.arenas if a["device"] == "cuda:0"]
    assert arena["memory"] == "managed memory (cuMemAllocManaged, prefetched to cuda:0)"  # XNNPACK runs on the host
    assert all(after.step(n)["correct"] for n in ("execute forward2", "execute forward", "execute forward2 again"))
    assert after.step("execute forward2")["device_events"] == 3  # two copies in, one out, through the driver
    # before: the arena is host memory, and the driver refuses to copy into it, as it refuses a CUDA backend
    err = before.step("execute forward2")["error"]
    assert "method->execute() failed" in err and "cuMemcpyHtoD failed: CUDA_ERROR_INVALID_VALUE" in err
    assert before.step("execute forward")["correct"] is True  # the host method is unaffected
    assert all(s["device_bytes"] == 0 and s["driver_device_bytes"] == 0 for s in before.steps)
    # what notebook 04 shows of a recorded run: shares of the planned arena, runs of any side lined up
    shares = report.shares("after")
    assert list(shares.columns) == ["device bytes", "driver device bytes"] and list(shares.index) == dp.STEPS
    assert shares.loc["load_method forward2"].tolist() == [1.0, pages / PLANNED]
    assert shares.loc["release"].tolist() == [-1.0, -pages / PLANNED]
    assert report.shares("before")["device bytes"].eq(0).all()


@pytest.mark.slow
def test_a_crash_in_one_loader_is_reported_with_the_steps_done(bundle, tools, fake_driver, tmp_path):
    # device memory (cuMemAlloc) for an arena XNNPACK reads on the host: the double maps it unreadable
    out, report = run_bundle(bundle, tools, tmp_path, "--memory", "device", LD_LIBRARY_PATH=fake_driver)
    assert out.returncode == 1
    before, after = report.runtimes
    assert before.failure is None  # the other loader, in its own process, is unaffected
    assert after.failure.startswith("process killed by Segmentation fault in step 'execute forward2'")
    assert [s["step"] for s in after.steps] == dp.STEPS[:3]
    assert after.step("load_method forward2")["device_bytes"] == PLANNED
    (arena,) = [a for a in after.arenas if a["device"] == "cuda:0"]
    assert (arena["memory"], arena["why"]) == ("device memory (cuMemAlloc)", "forced by --memory device")


def run_runner(bundle, tmp_path, pte, *args):
    """The bundle's runner on any program (no reference: zero inputs), JSON read back."""
    out = subprocess.run([str(bundle.path / "bin/pte_lab_placement"), "--pte", str(pte), "--json",
                          str(tmp_path / "r.json"), *args], env={"PATH": "/nonexistent"}, capture_output=True,
                         text=True, timeout=300)
    return out, (dp.Report.load(tmp_path / "r.json") if (tmp_path / "r.json").exists() else None)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["device", "three_methods"])
def test_the_mirrored_loaders_allocate_what_pte_lab_predicts(bundle, tmp_path, name):
    from pte_lab import examples
    from pte_lab import open as open_pte

    pte = bundle.path / f"programs/device_side{SIDE}.pte"
    if name != "device":
        pte = examples.save(name, tmp_path / f"{name}.pte", side=SIDE)
    out, report = run_runner(bundle, tmp_path, pte)
    assert out.returncode == 0, out.stdout + out.stderr
    model = open_pte(pte)
    for label, loader in (("before", "legacy"), ("after", "corrected")):
        r = next(x for x in report.runtimes if x.label == label)
        ran = sorted((a["when"], a["runtime_index"], a["device"], a["bytes"]) for a in r.arenas)
        predicted = sorted((a.step + (f" {a.method}" if a.step == "load_method" else ""), a.runtime_index, a.device,
                            a.bytes) for a in model.allocations(loader))
        assert ran == predicted, label
        device_arenas = sum(a.bytes for a in model.allocations(loader) if a.device != "cpu")
        assert sum(s["device_bytes"] for s in r.steps if s["step"].startswith("load")) == device_arenas
        assert all(s["error"] is None for s in r.steps)


@pytest.mark.slow
def test_a_corrupt_program_is_refused_not_a_crash(bundle, tmp_path):
    import random

    data = (bundle.path / f"programs/device_side{SIDE}.pte").read_bytes()
    rng = random.Random(25)
    for case in range(12):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 8)):  # bytes of the flatbuffer, where the runner's own reader looks
            bad[rng.randrange(8, min(len(bad), 3000))] = rng.randrange(256)
        path = tmp_path / f"bad{case}.pte"
        path.write_bytes(bytes(bad))
        out, report = run_runner(bundle, tmp_path, path)
        # ExecuTorch refuses the file (a step's error, e.g. 0x23 at load_program) or runs it; neither
        # loader's process dies, whatever the runner's own reader of the file met
        assert out.returncode == 0, (case, out.stdout[-800:])
        for r in report.runtimes:
            assert r.failure is None and [s["step"] for s in r.steps][:1] == ["load_program"], (case, r.failure)


@pytest.mark.slow
def test_the_runner_and_python_read_a_child_s_lines_alike(bundle, tmp_path):
    import json
    from dataclasses import asdict

    runner = str(bundle.path / "bin/pte_lab_placement")
    programs = bundle.path / "programs"
    child = subprocess.run([runner, "--pte", str(programs / f"device_side{SIDE}.pte"), "--one", "after", "--backend",
                            "emulated", "--reference", str(programs / f"device_side{SIDE}.reference")],
                           env={"PATH": "/nonexistent"}, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-800:]
    (tmp_path / "child.lines").write_text(child.stdout)
    read = subprocess.run([runner, "--read-lines", str(tmp_path / "child.lines")], capture_output=True, text=True,
                          timeout=60)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == asdict(pl.to_runtime(pl.read(child.stdout)))  # both readers, one record
    ran = pl.read(child.stdout)
    assert [s.step for s in ran.of(pl.StepLine)] == dp.STEPS and all(s.error is None for s in ran.of(pl.StepLine))
    (device,) = [a for a in ran.of(pl.ArenaLine) if a.device == "cuda:0"]
    assert (device.when, device.bytes, device.mem_id) == ("load_method forward2", PLANNED, 2)
    # the parent refuses what Python refuses, with the same line, and does not crash
    for i, (text, message) in enumerate(BAD_LINES):
        path = tmp_path / f"bad{i}.lines"
        path.write_text(text)
        out = subprocess.run([runner, "--read-lines", str(path)], capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stderr) == (2, f"pte_lab_placement: error: {path}: {message}\n"), i
