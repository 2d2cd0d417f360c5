"""Build and load pte_lab's native code.

Two libraries and a program, compiled on first use with the system C++ compiler and cached:

- the helper (``native/emulated_device.cpp``, ``native/sizing.cpp``,
  ``native/stand_ins.cpp`` and ``native/shape_recorder.cpp``: the emulated device, the sizing runner, the
  stand-ins it registers for a backend or kernels the wheel lacks, and what-if's shape recorder), built against the headers and
  ``libexecutorch.so`` that the executorch wheel ships, cached per executorch
  install (keyed by the library's path, size and mtime and the sources), so
  the first use costs about two seconds and later ones nothing. Loading it
  with ctypes makes it share ExecuTorch's registries (device allocators,
  kernels, backends) with the Python extension;
- the allocation counter (``native/alloc_counter.c``, glibc only), preloaded
  into the isolated worker to count every heap allocation and mapping;
- the standalone before/after runner (``native/placement_runner.cpp``: the
  loader fix's measurement without Python, on the emulated device or on CUDA
  through the driver API, ``native/cuda_device.cpp``; its loaders, its report and
  the line protocol between its processes in ``native/placement_*``), an executable that finds
  ExecuTorch's libraries in ``../lib`` beside it: ``pte-lab measure --bundle``
  puts them there (:mod:`pte_lab.experiments.bundle`).

And one program more, the registry probe (``native/registry_probe.cpp``): which
library of the install registers which kernels and backends
(:mod:`pte_lab.runtime.libraries` runs it).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import NamedTuple

from ..cache import cache_dir
from ..errors import NativeBuildError
from ..progress import tell
from ..quiet import quiet_import

_LOCK = threading.Lock()


class Event(ctypes.Structure):
    """One ledger record; layout mirrors ``PteLabEvent`` in native/device_ledger.h."""

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("bytes", ctypes.c_uint64),
        ("alignment", ctypes.c_uint64),
        ("address", ctypes.c_uint64),
        ("time_ns", ctypes.c_int64),
    ]


EVENT_KINDS = {0: "allocate", 1: "free", 2: "host_to_device", 3: "device_to_host", 4: "refused"}


#: One ledger record as plain data (picklable: it crosses the isolated worker's pipe): the
#: fields of :class:`Event` but its padding.
LedgerEvent = NamedTuple("LedgerEvent", [(name, int) for name, _ in Event._fields_ if name != "reserved"])
LedgerEvent.__module__ = __name__


def executorch_dir() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise NativeBuildError("executorch is not installed: the lab extra installs it (pip install -e \".[lab]\" in a clone; executorch==1.5.1)")
    return Path(list(spec.submodule_search_locations)[0])


#: the helper's sources, compiled into one library
HELPER_SOURCES = ("emulated_device.cpp", "sizing.cpp", "stand_ins.cpp", "shape_recorder.cpp")
#: headers the sources include, copied beside them for every build
HEADERS = ("pte_lab_counts.h", "device_ledger.h", "arena_users.h", "cuda_device.h", "glibc_compat.h")
#: the standalone before/after runner's sources, compiled into one executable
RUNNER_SOURCES = ("placement_runner.cpp", "placement_loaders.cpp", "placement_report.cpp", "placement_lines.cpp",
                  "arena_users.cpp", "cuda_device.cpp", "emulated_device.cpp", "portable_start.cpp")
#: the runner's own headers (its loaders, its report, the line protocol between its processes), with HEADERS
RUNNER_HEADERS = (*HEADERS, "placement_lines.h", "placement_loaders.h", "placement_report.h")
#: the ExecuTorch libraries the runner links, as ExecuTorch's Python extension does (the runtime, the
#: optimized and portable kernels, XNNPACK); what they need in turn is found with ldd when bundling
RUNNER_LINKS = ("executorch", "executorch_kernels_optimized", "executorch_backend_xnnpack")
#: the runner's name, and where it looks for its libraries: ../lib beside it (a bundle's layout)
RUNNER_NAME = "pte_lab_placement"
RUNNER_RPATH = "$ORIGIN/../lib"


def _compiler() -> str:
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    raise NativeBuildError(
        "the emulated device and the sizing runner need a C++ compiler and none was found (tried $CXX, "
        "g++, c++, clang++). Install one (Debian/Ubuntu: apt-get install g++; conda: conda install "
        "gxx_linux-64) or set CXX. Everything else in pte_lab works without it.")


def _source(name: str) -> bytes:
    return files("pte_lab.runtime").joinpath(f"native/{name}").read_bytes()


def counts_fields() -> tuple[str, ...]:
    """The allocation counter's record fields, in order, as ``native/pte_lab_counts.h`` declares them."""
    text = _source("pte_lab_counts.h").decode()
    body = text[text.index("#define PTE_LAB_COUNTS_FIELDS(X)"):].split("\n\n", 1)[0]
    return tuple(re.findall(r"X\((\w+)\)", body))


def placement_line_fields() -> dict[str, tuple[str, ...]]:
    """The before/after runner's line kinds and their fields, in order, as ``native/placement_lines.h``
    declares them (STEP, ARENA and RUNTIME; ARENA's touched_by follows its fields)."""
    text = _source("placement_lines.h").decode()
    return {kind: tuple(re.findall(r"X\((\w+)\)", text[text.index(f"#define PTE_LAB_{kind}_FIELDS(X)"):]
                                   .split("\n#define", 1)[0].split("\n\n", 1)[0]))
            for kind in ("STEP", "ARENA", "RUNTIME")}


def _registry_library(et: Path) -> Path | None:
    """The shared object that holds ExecuTorch's DeviceAllocatorRegistry in this install.

    executorch >= 1.5 ships lib/libexecutorch.so; 1.4 links the runtime into the
    Python extension itself, which exports the registry's symbols.
    """
    lib = et / "lib" / "libexecutorch.so"
    if lib.exists():
        return lib
    found = sorted((et / "extension" / "pybindings").glob("_portable_lib*.so"))
    return found[0] if found else None


def library_path(et: Path | None = None) -> Path:
    """Where the helper for an executorch install lives (built if missing).

    ``et`` is the install's ``executorch`` package folder (default: this
    interpreter's); another interpreter's install gets its own build.
    """
    et = Path(et) if et is not None else executorch_dir()
    lib = _registry_library(et)
    include = et / "include"
    if lib is None or not (include / "executorch" / "runtime" / "core" / "device_allocator.h").exists():
        raise NativeBuildError(
            f"this executorch install ({et}) lacks the device-allocator registry or its header "
            f"(runtime/core/device_allocator.h); the emulated device needs an executorch wheel that has them")
    # another interpreter's install (the legacy loader's) gets the emulated device only: older
    # wheels lack the headers the sizing runner needs
    names = HELPER_SOURCES if et == executorch_dir() else HELPER_SOURCES[:1]
    sources = {name: _source(name) for name in names}
    headers = {name: _source(name) for name in HEADERS}
    st = lib.stat()
    key = hashlib.sha256(b"\0".join([
        *sources.values(), *headers.values(), str(lib).encode(), str(st.st_size).encode(),
        str(st.st_mtime_ns).encode(),
    ])).hexdigest()[:20]
    out = cache_dir("native", key, "libpte_lab_native.so")
    if out.exists():
        return out
    include = et / "include"
    flags = ["-std=c++17", "-O2", "-fPIC", "-shared", "-DC10_USING_CUSTOM_GENERATED_MACROS",
             f"-I{include}", f"-I{include / 'executorch/runtime/core/portable_type/c10'}"]
    # link the registry's own file by path (and find it again by rpath), so that the
    # dynamic loader binds to the copy ExecuTorch's extension already loaded
    libs = [f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}", "-ldl"]
    _build("pte_lab's native helper", sources, flags, libs, out, headers)
    return out


def wheel_build_flags(et: Path | None = None) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) that build C++ against an executorch wheel's headers and
    ``libexecutorch.so`` (found again at run time by rpath)."""
    et = Path(et) if et is not None else executorch_dir()
    include = et / "include"
    lib = et / "lib"
    return ([f"-I{include}", f"-I{include / 'executorch/runtime/core/portable_type/c10'}",
             "-DC10_USING_CUSTOM_GENERATED_MACROS"],
            [f"-L{lib}", "-Wl,--no-as-needed", "-lexecutorch", "-Wl,--as-needed", f"-Wl,-rpath,{lib}", "-ldl"])


def probe_path() -> Path:
    """The registry probe for this interpreter's executorch install (built if missing)."""
    et = executorch_dir()
    lib = et / "lib" / "libexecutorch.so"
    if not lib.exists():
        raise NativeBuildError(f"this executorch install ({et}) has no lib/libexecutorch.so to probe")
    source = _source("registry_probe.cpp")
    st = lib.stat()
    key = hashlib.sha256(b"\0".join([source, str(lib).encode(), str(st.st_size).encode(),
                                      str(st.st_mtime_ns).encode()])).hexdigest()[:20]
    out = cache_dir("native", key, "pte_lab_registry_probe")
    if not out.exists():
        cflags, libs = wheel_build_flags(et)
        _build("pte_lab's registry probe", {"registry_probe.cpp": source}, ["-std=c++17", "-O1", *cflags], libs, out)
    return out


def once_probe_path() -> Path:
    """The thread-pool probe (``native/once_probe.cpp``) for this interpreter's executorch (built if
    missing); :class:`NativeBuildError` where the install has no libexecutorch_threadpool.so."""
    et = executorch_dir()
    lib = et / "lib" / "libexecutorch_threadpool.so"
    if not lib.exists():
        raise NativeBuildError(f"this executorch install ({et}) has no lib/libexecutorch_threadpool.so")
    source = _source("once_probe.cpp")
    headers = {"pte_lab_counts.h": _source("pte_lab_counts.h")}
    st = lib.stat()
    key = hashlib.sha256(b"\0".join([source, *headers.values(), str(lib).encode(), str(st.st_size).encode(),
                                      str(st.st_mtime_ns).encode()])).hexdigest()[:20]
    out = cache_dir("native", key, "pte_lab_once_probe")
    if not out.exists():
        cflags, libs = wheel_build_flags(et)
        libs = [*libs[:2], "-lexecutorch_threadpool", *libs[2:]]
        _build("pte_lab's thread-pool probe", {"once_probe.cpp": source}, ["-std=c++17", "-O1", *cflags], libs,
               out, headers)
    return out


@lru_cache(maxsize=1)
def once_heap() -> int | None:
    """Heap (peak, bytes) a fresh process allocates the first time a kernel asks for ExecuTorch's thread pool,
    measured by the probe under the allocation counter; None where it cannot be built or run here."""
    try:
        probe, counter = once_probe_path(), counter_path()
        r = subprocess.run([str(probe)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, LD_PRELOAD=str(counter)))
        return int(json.loads(r.stdout.strip().splitlines()[-1])["peak"])
    except (NativeBuildError, OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return None


def counter_path() -> Path:
    """The allocation counter (built if missing); :class:`NativeBuildError` where it cannot be built."""
    source = _source("alloc_counter.c")
    headers = {name: _source(name) for name in HEADERS}
    cxx = _compiler()
    key = hashlib.sha256(b"\0".join([source, *headers.values(), cxx.encode()])).hexdigest()[:20]
    out = cache_dir("native", key, "libpte_lab_counter.so")
    if not out.exists():
        # compiled as C (-x c): it must not pull the C++ runtime into every process it is preloaded in
        _build("pte_lab's allocation counter", {"alloc_counter.c": source},
               ["-x", "c", "-std=gnu11", "-O2", "-fPIC", "-shared"], [], out, headers)
    return out


def _glibc_x86_64() -> bool:
    """Whether the runner can bind to old glibc symbol versions (see native/glibc_compat.h)."""
    return platform.machine() in ("x86_64", "AMD64") and platform.libc_ver()[0] == "glibc"


@lru_cache(maxsize=1)
def executorch_version() -> str:
    """The installed executorch's version ("unknown" where it is not installed): what a sizing reports, what
    the native helpers are built against and the runner says it was built with."""
    try:
        from importlib.metadata import PackageNotFoundError, version  # imported when asked: 14 ms a worker

        return version("executorch")
    except PackageNotFoundError:
        return "unknown"


def placement_runner_path() -> Path:
    """The standalone before/after runner, built against this interpreter's executorch (cached).

    It runs only where ExecuTorch's libraries sit in ``../lib`` beside it, as in a
    bundle (:func:`pte_lab.experiments.bundle.write_bundle`).
    """
    et = executorch_dir()
    lib = et / "lib"
    include = et / "include"
    header = include / "executorch/runtime/core/device_memory_buffer.h"
    if not (lib / "libexecutorch.so").exists() or not header.exists():
        raise NativeBuildError(f"this executorch install ({et}) lacks lib/libexecutorch.so or the device memory "
                               f"headers the runner is built against (executorch >= 1.5 has them)")
    sources = {name: _source(name) for name in RUNNER_SOURCES}
    headers = {name: _source(name) for name in RUNNER_HEADERS}
    compat = _glibc_x86_64()
    st = (lib / "libexecutorch.so").stat()
    key = hashlib.sha256(b"\0".join([
        *sources.values(), *headers.values(), str(lib).encode(), str(st.st_size).encode(),
        str(st.st_mtime_ns).encode(), executorch_version().encode(), str(compat).encode(),
    ])).hexdigest()[:20]
    out = cache_dir("native", key, "bin", RUNNER_NAME)
    if out.exists():
        return out
    flags = ["-std=c++17", "-O2", "-DC10_USING_CUSTOM_GENERATED_MACROS",
             f"-DPTE_LAB_EXECUTORCH_VERSION=\"{executorch_version()}\"",
             f"-I{include}", f"-I{include / 'executorch/runtime/core/portable_type/c10'}"]
    # kernels and backends register through static initializers: keep every library linked
    libs = [f"-L{lib}", "-Wl,--no-as-needed", *(f"-l{n}" for n in RUNNER_LINKS), "-Wl,--as-needed",
            "-ldl", "-pthread", f"-Wl,-rpath,{RUNNER_RPATH}"]
    if compat:
        flags.append("-DPTE_LAB_GLIBC_COMPAT")
        libs.append("-Wl,--wrap=__libc_start_main")
    _build("pte_lab's before/after runner", sources, flags, libs, out, headers)
    return out


def builds_folder() -> Path:
    """Where the native parts are built and kept, one folder per build (keyed by its sources and the ExecuTorch
    install it is built against): the cache folder's ``native`` (``pte_lab.cache.cache_dir``). A new cache
    folder, another install or an edited source builds again; an old build is never reused, nor removed."""
    return cache_dir("native")


def builds() -> tuple[int, int]:
    """(builds, bytes) kept now in :func:`builds_folder` (each built file: a library, a probe, the runner)."""
    root = builds_folder()
    files = [p for p in root.glob("*/**/*") if p.is_file() and not p.parent.name.startswith("tmp")] \
        if root.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def clear_builds() -> tuple[int, int]:
    """Forget every native build (the next use builds what it needs again: seconds each); returns (builds,
    bytes) removed."""
    n, size = builds()
    shutil.rmtree(builds_folder(), ignore_errors=True)
    return n, size


def _build(what: str, sources: dict[str, bytes], flags: list[str], libs: list[str], out: Path,
           headers: dict[str, bytes] | None = None) -> None:
    with _LOCK:
        if out.exists():
            return
        tell(f"building {what} (seconds; once per ExecuTorch install and cache folder: kept in "
             f"{builds_folder()})")
        cxx = _compiler()
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            for name, text in (headers or {}).items():  # included as "name" from beside the sources
                (Path(tmp) / name).write_bytes(text)
            paths = []
            for name, text in sources.items():
                paths.append(Path(tmp) / name)
                paths[-1].write_bytes(text)
            tmp_out = Path(tmp) / out.name
            cmd = [cxx, *flags, *map(str, paths), "-o", str(tmp_out), *libs]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise NativeBuildError(f"building {what} failed to run {cxx}: {exc}") from exc
            if r.returncode != 0:
                tail = "\n".join(r.stderr.strip().splitlines()[-15:])
                raise NativeBuildError(f"building {what} failed ({cxx} ...):\n{tail}")
            os.replace(tmp_out, out)  # atomic: concurrent builders agree


#: False in a process that never imports ExecuTorch's Python extension (the native engine's worker): the helper
#: is loaded on its own, and ExecuTorch's libraries with it (:func:`without_python_extension`)
_WITH_EXTENSION = True


def without_python_extension() -> None:
    """Load the helper without ExecuTorch's Python extension in this process from now on: for a worker that runs
    programs through the native runner alone (:mod:`pte_lab.runtime.native_engine`), where importing the
    extension (torch with it) would cost seconds and measure nothing. Call it before anything loads the helper."""
    global _WITH_EXTENSION
    if library.cache_info().currsize and _WITH_EXTENSION:
        raise NativeBuildError("the native helper was loaded with ExecuTorch's Python extension already")
    _WITH_EXTENSION = False


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The loaded helper, sharing ExecuTorch's device-allocator registry."""
    # Load ExecuTorch's own extension first so that the helper binds to the same libexecutorch.so (a process that
    # never imports it loads libexecutorch.so through the helper's own link).
    if _WITH_EXTENSION:
        quiet_import("executorch.extension.pybindings.portable_lib")

    lib = ctypes.CDLL(str(library_path()))
    lib.pte_lab_event_size.restype = ctypes.c_int32
    if lib.pte_lab_event_size() != ctypes.sizeof(Event):
        raise NativeBuildError("the native helper's ledger layout does not match this pte_lab")
    for name in ("pte_lab_has_allocator", "pte_lab_is_emulated", "pte_lab_register"):
        getattr(lib, name).argtypes = [ctypes.c_int32]
        getattr(lib, name).restype = ctypes.c_int32
    for name in ("pte_lab_outstanding", "pte_lab_capacity"):
        getattr(lib, name).argtypes = [ctypes.c_int32]
        getattr(lib, name).restype = ctypes.c_uint64
    lib.pte_lab_set_capacity.argtypes = [ctypes.c_int32, ctypes.c_uint64]
    lib.pte_lab_set_capacity.restype = None
    lib.pte_lab_event_count.restype = ctypes.c_uint64
    lib.pte_lab_events.argtypes = [ctypes.c_uint64, ctypes.POINTER(Event), ctypes.c_uint64]
    lib.pte_lab_events.restype = ctypes.c_uint64
    lib.pte_lab_num_device_types.restype = ctypes.c_int32
    return lib


def read_events(start: int = 0) -> list[LedgerEvent]:
    """The ledger from position ``start`` on."""
    lib = library()
    n = lib.pte_lab_event_count()
    if n <= start:
        return []
    buf = (Event * (n - start))()
    got = lib.pte_lab_events(start, buf, n - start)
    return [LedgerEvent(*(getattr(e, f) for f in LedgerEvent._fields)) for e in buf[:got]]
