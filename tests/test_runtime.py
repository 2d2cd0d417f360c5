"""pte_lab.load and the emulated device, against the real ExecuTorch runtime.

ExecuTorch's device-allocator registry is per process and a registration
cannot be undone, so the tests that need *no* allocator run in a fresh
Python process; everything else shares the (emulated) registration.
"""

from __future__ import annotations

import gc
import json
import os
import struct
import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import (
    BackendUnavailableError,
    DeviceAllocationError,
    ExecuTorchError,
    MemoryBudgetError,
    OperatorMissingError,
    PteFormatError,
    RuntimeCrashedError,
)
from pte_lab.runtime import SharedArenasWarning

SIDE = 64


def _xy():
    g = torch.Generator().manual_seed(0)
    return torch.randn(SIDE, SIDE, generator=g), torch.randn(SIDE, SIDE, generator=g)


@pytest.fixture(scope="module")
def device():
    return pte_lab.emulate_device("cuda:0")


def _allocs(df):
    return df[df.event == "allocate"]


def test_no_allocator_names_the_arena_and_host_method_keeps_working(program_path):
    code = textwrap.dedent(f"""
        import json, torch, pte_lab
        prog = pte_lab.load({str(program_path('device'))!r})
        x, y = torch.randn(64, 64), torch.randn(64, 64)
        f = prog.load_method("forward")
        ok1 = torch.allclose(f(x, y)[0], torch.relu(x @ y) + 1)
        try:
            prog.load_method("forward2")
            err = None
        except pte_lab.DeviceAllocationError as e:
            err = dict(method=e.method, mem_id=e.mem_id, runtime_index=e.runtime_index, device=e.device,
                       nbytes=e.nbytes, message=str(e))
        ok2 = torch.allclose(f(x, y)[0], torch.relu(x @ y) + 1)
        print("RESULT" + json.dumps(dict(ok1=ok1, ok2=ok2, err=err)))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.split("RESULT", 1)[1])
    plan = pte_lab.open(program_path("device")).methods["forward2"].arena(2)
    assert res["ok1"] and res["ok2"]
    err = res["err"]
    assert err is not None
    assert (err["method"], err["mem_id"], err["runtime_index"], err["device"], err["nbytes"]) == (
        "forward2", 2, 1, "cuda:0", plan.size)
    assert "emulate_device" in err["message"]


def test_emulated_device_allocates_exactly_the_plan_at_load_method(program_path, device):
    path = program_path("device")
    plan = pte_lab.open(path)
    dev_arena = plan.methods["forward2"].arena(2)
    x, y = _xy()
    mark = device.mark()
    prog = pte_lab.load(path)
    assert _allocs(device.ledger(since=mark)).empty  # nothing at load_program
    f = prog.load_method("forward")
    assert torch.allclose(f(x, y)[0], torch.relu(x @ y) + 1)
    assert _allocs(device.ledger(since=mark)).empty  # nor for the host method
    m2 = prog.load_method("forward2")
    allocs = _allocs(device.ledger(since=mark))
    assert list(allocs.bytes) == [dev_arena.size]  # one allocation, the plan's arena, to the byte
    assert list(allocs.device) == ["cuda:0"]
    out = m2(x, y)[0]
    assert torch.equal(out, x + y)
    assert torch.allclose(f(x, y)[0], torch.relu(x @ y) + 1)  # host method in between
    assert torch.equal(m2(x, y)[0], x + y)
    led = device.ledger(since=mark)
    assert (led.event == "host_to_device").sum() == 4 and (led.event == "device_to_host").sum() == 2
    rep = prog.memory_report()
    row = rep[(rep.step == "load_method") & (rep.method == "forward2") & (rep.device == "cuda:0")].iloc[0]
    assert row.predicted_bytes == row.measured_bytes == dev_arena.size
    assert "emulated" in row.measured_by
    host_rows = rep[rep.device == "cpu"]
    assert host_rows.measured_by.str.contains("approximate").all()
    assert not ((rep.step == "load_program") & (rep.device == "cuda:0")).any()
    outstanding = device.outstanding_bytes
    del f, m2
    prog.release()
    gc.collect()
    assert device.outstanding_bytes == outstanding - dev_arena.size  # freed on release
    assert list(device.ledger(since=mark).query("event == 'free'").bytes) == [dev_arena.size]
    rel = prog.memory_report().query("step == 'release' and device == 'cuda:0'").iloc[0]
    assert rel.measured_bytes == -dev_arena.size


def test_dropping_the_last_reference_frees(program_path, device):
    start = device.outstanding_bytes
    prog = pte_lab.load(program_path("device"))
    prog.load_method("forward2")
    assert device.outstanding_bytes > start
    del prog
    gc.collect()
    assert device.outstanding_bytes == start


def test_hundred_cycles_balance(program_path, device):
    path = program_path("device")
    size = pte_lab.open(path).methods["forward2"].arena(2).size
    mark = device.mark()
    start = device.outstanding_bytes
    x, y = _xy()
    for _ in range(100):
        prog = pte_lab.load(path)
        m = prog.load_method("forward2")
        assert torch.equal(m(x, y)[0], x + y)
        prog.release()
    led = device.ledger(since=mark)
    assert (led.event == "allocate").sum() == 100 and (led.event == "free").sum() == 100
    assert set(led[led.event.isin(["allocate", "free"])].bytes) == {size}
    assert device.outstanding_bytes == start


def test_backend_unavailable(program_path, device):
    prog = pte_lab.load(program_path("device_demo"))
    mark = device.mark()
    with pytest.raises(BackendUnavailableError) as exc:
        prog.load_method("forward2")
    e = exc.value
    assert e.method == "forward2" and e.backend == "BackendWithCompilerDemo"
    assert "XnnpackBackend" in e.registered
    assert _allocs(device.ledger(since=mark)).empty  # refused before anything was allocated
    x, y = _xy()
    assert torch.allclose(prog.load_method("forward")(x, y)[0], torch.relu(x @ y) + 1)


def test_device_budget_refused_before_allocating(program_path, device):
    size = pte_lab.open(program_path("device")).methods["forward2"].arena(2).size
    prog = pte_lab.load(program_path("device"))
    mark = device.mark()
    device.set_capacity(device.outstanding_bytes + size - 1)
    try:
        with pytest.raises(MemoryBudgetError) as exc:
            prog.load_method("forward2")
        assert exc.value.device == "cuda:0" and exc.value.needed == size
        assert _allocs(device.ledger(since=mark)).empty
        # force=True tries anyway: the (emulated) device refuses, with a named error
        forced = pte_lab.load(program_path("device"), force=True)
        with pytest.raises(DeviceAllocationError) as exc2:
            forced.load_method("forward2")
        assert exc2.value.nbytes == size and exc2.value.runtime_index == 1
    finally:
        device.set_capacity(None)


def test_host_budget_refused(program_path, tmp_path):
    data = bytearray(program_path("portable").read_bytes())
    pte = pte_lab.open(bytes(data))
    size = pte.methods["forward"].arena(1).size
    pos = bytes(data).find(struct.pack("<qq", 0, size))
    data[pos + 8 : pos + 16] = struct.pack("<q", 2**50)  # a petabyte arena
    path = tmp_path / "huge.pte"
    path.write_bytes(bytes(data))
    with pytest.raises(MemoryBudgetError) as exc:
        pte_lab.load(path)
    assert exc.value.step == "load_program" and exc.value.device == "cpu" and exc.value.needed == 2**50


def test_second_host_method_warns_once(program_path, device):
    prog = pte_lab.load(program_path("three_methods"))
    x, y = _xy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        small = prog.load_method("small")
        assert torch.allclose(small(x)[0], x * 2 + 1)
        large = prog.load_method("large")
        assert torch.allclose(large(x, y)[0], torch.relu(x @ y) + 1)
        small(x), large(x, y)
        dev = prog.load_method("on_device")
        assert torch.equal(dev(x, y)[0], x + y)
    shared = [w for w in caught if issubclass(w.category, SharedArenasWarning)]
    assert len(shared) == 1
    assert "small" in str(shared[0].message) and "large" in str(shared[0].message)


def test_bad_file_never_reaches_the_runtime(program_path, tmp_path):
    # an operator name that is not UTF-8 aborts ExecuTorch 1.5.1's bindings even with full
    # verification; pte_lab's reader refuses it first
    data = bytearray(program_path("portable").read_bytes())
    pos = bytes(data).find(b"aten::")
    data[pos] = 0xFB
    path = tmp_path / "bad_name.pte"
    path.write_bytes(bytes(data))
    with pytest.raises(PteFormatError, match="UTF-8"):
        pte_lab.load(path)


def _corrupt_sizes_reference(data: bytes) -> bytes:
    """Point a planned tensor's `sizes` vector 4 GB past the end of the buffer."""
    from pte_lab.format._flat import root_table

    buf = bytearray(data)
    plan = root_table(memoryview(bytes(buf))).tables(1, "execution_plan")[0]
    for v in plan.tables(2, "values"):
        if v.scalar(0, "uint8") == 5:  # Tensor
            t = v.table(1, "val")
            at = t._pos + t._fields[2]  # the sizes field (a uoffset)
            buf[at : at + 4] = struct.pack("<I", 0xF0000000)
            return bytes(buf)
    raise AssertionError("no tensor")


@pytest.mark.parametrize("isolate", [False, True])
def test_runtime_refusal_is_named_the_same_in_both_modes(program_path, isolate):
    """ExecuTorch refuses load_method (constants live in a .ptd that was not given): step, method, cause."""
    with pte_lab.load(program_path("external"), isolate=isolate) as prog:
        with pytest.raises(ExecuTorchError) as info:
            prog.load_method("forward")
    e = info.value
    assert (e.step, e.method, e.runtime_type) == ("load_method", "forward", "RuntimeError")
    assert "Failed to load method forward" in e.runtime_message and "load_method of method 'forward'" in str(e)
    assert (e.code, e.code_name) == (0x02, "InvalidState") and "InvalidState (0x02)" in str(e)
    assert isinstance(e, RuntimeError)  # code that caught ExecuTorch's RuntimeError still does


@pytest.mark.parametrize("isolate", [False, True])
def test_missing_operator_is_named_before_loading(program_path, tmp_path, isolate):
    """An operator no library registers: a named error listing it, never ExecuTorch's bare 0x:14."""
    data = program_path("portable").read_bytes()
    assert data.count(b"aten::addmm") == 1
    path = tmp_path / "unknown_op.pte"
    path.write_bytes(data.replace(b"aten::addmm", b"aten::zzzmm"))  # same length: the file stays valid
    assert "aten::zzzmm.out" in pte_lab.open(path).methods["forward"].operators
    with pte_lab.load(path, isolate=isolate) as prog:
        with pytest.raises(OperatorMissingError) as info:
            prog.load_method("forward")
    assert info.value.operators == ["aten::zzzmm.out"] and info.value.method == "forward"
    assert "0x:14" not in str(info.value) and "aten::zzzmm.out" in str(info.value)


def _workers(psutil) -> set[int]:
    """This process's live pte_lab workers (other children, a notebook kernel say, are not ours to count)."""
    out = set()
    for c in psutil.Process().children():
        try:
            if "pte_lab.runtime.worker" in c.cmdline() and c.status() != psutil.STATUS_ZOMBIE:
                out.add(c.pid)
        except psutil.Error:  # gone meanwhile
            pass
    return out


def test_failed_load_program_leaves_no_worker_behind(program_path):
    psutil = pytest.importorskip("psutil")
    before = _workers(psutil)
    with pytest.raises(ExecuTorchError) as info:  # the data file is missing: the runtime refuses
        pte_lab.load(program_path("external"), data_path="/nonexistent/weights.ptd", isolate=True)
    assert info.value.step == "load_program" and info.value.method is None
    assert "weights.ptd" in info.value.runtime_message
    assert _workers(psutil) - before == set()


def test_isolation_survives_a_real_native_crash(program_path, tmp_path):
    from pte_lab.runtime.isolate import RemoteError, Worker

    bad = tmp_path / "corrupt.pte"
    bad.write_bytes(_corrupt_sizes_reference(program_path("portable").read_bytes()))
    with pytest.raises(PteFormatError):  # the reader sees it ...
        pte_lab.load(bad, isolate=True)
    # ... so drive the worker directly, the way pte_lab never does: Minimal verification
    w = Worker([], [])
    short = tmp_path / "short.pte"
    short.write_bytes(program_path("portable").read_bytes()[:200])
    with pytest.raises(RemoteError, match="0x:23"):  # refused first: ExecuTorch logs why on its stderr
        w.call("load_program", str(short), None, "minimal")
    with pytest.raises(RuntimeCrashedError) as exc:
        w.call("load_program", str(bad), None, "minimal")
        w.call("load_method", "forward")
    assert exc.value.signal in ("SIGSEGV", "SIGBUS", "SIGABRT")
    # the crash report carries the worker's native output: ExecuTorch's own line about the short file
    said = "File size is too small"
    assert any(said in line for line in exc.value.stderr) and said in str(exc.value)
    with pytest.raises(RuntimeCrashedError):  # the dead worker stays dead, loudly
        w.call("registered_backends")
    w.close()
    # and this process carries on: a good program still loads and runs, isolated or not
    x = torch.randn(4, 32)
    for isolate in (True, False):
        with pte_lab.load(program_path("portable"), isolate=isolate) as prog:
            out = prog.load_method("forward")(x)[0]
            assert out.shape == (4, 16)


def test_isolated_program_accounts_like_in_process(program_path, device):
    x, y = _xy()
    with pte_lab.load(program_path("device"), isolate=True) as prog:
        m2 = prog.load_method("forward2")
        assert torch.equal(m2(x, y)[0], x + y)
        rep = prog.memory_report()
        row = rep.query("step == 'load_method' and device == 'cuda:0'").iloc[0]
        assert row.measured_bytes == row.predicted_bytes
        assert list(_allocs(prog.ledger()).bytes) == [row.predicted_bytes]


def test_runtime_info(device):
    info = pte_lab.runtime_info()
    assert info.executorch_version.startswith("1.5")
    assert info.honours_device_plans
    assert "XnnpackBackend" in info.backends
    assert info.device_allocators["cuda"].startswith("emulated")
    assert "emulated" in repr(info) and "<table>" in info._repr_html_()


def test_emulating_twice_is_harmless_and_cpu_is_refused(device):
    again = pte_lab.emulate_device("cuda:0")
    assert again.outstanding_bytes == device.outstanding_bytes
    with pytest.raises(ValueError):
        pte_lab.emulate_device("cpu")
    with pytest.raises(ValueError):
        pte_lab.emulate_device("tpu:0")


def test_no_compiler_is_a_clear_error(tmp_path):
    code = textwrap.dedent("""
        import pte_lab
        try:
            pte_lab.emulate_device("cuda:0")
            print("RESULT built")
        except pte_lab.NativeBuildError as e:
            print("RESULT " + str(e).splitlines()[0])
    """)
    env = dict(os.environ, PTE_LAB_CACHE=str(tmp_path / "cache"), CXX="/nonexistent/c++",
               PATH=str(tmp_path))  # no compiler anywhere on PATH
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert "RESULT" in r.stdout, r.stderr[-2000:]
    msg = r.stdout.split("RESULT ", 1)[1]
    assert "C++ compiler" in msg and "g++" in msg


def test_native_helper_is_cached(tmp_path):
    import time

    from pte_lab.runtime import native

    env_before = os.environ.get("PTE_LAB_CACHE")
    os.environ["PTE_LAB_CACHE"] = str(tmp_path)
    try:
        t = time.perf_counter()
        p1 = native.library_path()
        first = time.perf_counter() - t
        t = time.perf_counter()
        p2 = native.library_path()
        second = time.perf_counter() - t
    finally:
        if env_before is None:
            os.environ.pop("PTE_LAB_CACHE")
        else:
            os.environ["PTE_LAB_CACHE"] = env_before
    assert p1 == p2 and p1.exists() and str(tmp_path) in str(p1)
    assert second < first  # built once, then found


def test_foreign_allocator_is_refused_not_aborted(tmp_path):
    """A second registration would abort the process: pte_lab asks the registry first."""
    code = textwrap.dedent(f"""
        import ctypes, shutil, pte_lab
        from pte_lab.runtime import native
        native.library()                       # ExecuTorch loaded, helper built
        other = {str(tmp_path / 'other.so')!r}
        shutil.copy(native.library_path(), other)
        foreign = ctypes.CDLL(other)           # a separate copy: its own allocator object
        assert foreign.pte_lab_register(1) == 0   # "someone else" registers CUDA first
        try:
            pte_lab.emulate_device("cuda:0")
            print("RESULT registered")
        except pte_lab.PteLabError as e:
            print("RESULT refused: " + str(e))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RESULT refused" in r.stdout and "already registered" in r.stdout
