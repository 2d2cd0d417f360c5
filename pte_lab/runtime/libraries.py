"""Which library of the installed executorch wheel registers each kernel and backend, and how a C++
runner built against the wheel links them.

Kernels and backends register themselves from static initializers when their
library is loaded; nothing in a runner names them. A runner must therefore link
the libraries that hold what its methods call and keep them: the linker's default
``--as-needed`` drops them silently (:data:`AS_NEEDED`). The registry probe
(``native/registry_probe.cpp``) loads each library of the install in turn and
lists what it added to ExecuTorch's registries; the answer is kept per install in the cache folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..cache import cache_dir
from ..errors import NativeBuildError
from ..progress import tell
from . import native

__all__ = ["Library", "Registry", "registry", "needed", "link_flags", "compile_flags", "libpython", "AS_NEEDED",
           "KERNEL_LIBRARY_NOTES"]

#: what a kernel library of the wheel is, where a reader would expect another: a program names operators
#: (``aten::add.out``), not a kernel library, and ExecuTorch resolves each by name in whatever library registered
#: it; "exported for portable kernels" (no delegate) picks none. The wheel's one general kernel library is the
#: optimized one (``optimized_native_cpu_ops_lib``: its optimized kernels where it has them, the portable ones
#: for every other operator), and the Python runtime (_portable_lib) and the sizing worker load it
KERNEL_LIBRARY_NOTES = {
    "libexecutorch_kernels_optimized.so": (
        "the program names operators, not a kernel library: ExecuTorch resolves each by name in the library that "
        "registered it; this wheel ships no portable-only kernel library, and its optimized one, which the Python "
        "runtime and the sizing worker load, serves every aten operator (its own optimized kernels where it has "
        "them, the portable kernels for the rest); a runner or app linking portable_ops_lib instead serves the "
        "same names with the portable kernels (the planned bytes are the file's either way; the heap and speed "
        "may differ)"),
}

#: why the libraries go inside --no-as-needed (the header, the build script and the README say it so)
AS_NEEDED = ("kernels and backends register from static initializers and nothing names them, so the linker's "
             "default --as-needed drops their libraries silently; load_method then fails with \"kernel "
             "'aten::...' not found\" (OperatorMissing, 0x14) or \"Backend XnnpackBackend is not registered\" "
             "(NotFound, 0x20): link them inside -Wl,--no-as-needed ... -Wl,--as-needed")


@dataclass(frozen=True)
class Library:
    """A library of the executorch install a method needs, and what of the method it registers."""

    #: absolute path in this install
    path: str
    #: the operators and backends of the method it registers
    provides: tuple[str, ...]
    #: it links ExecuTorch's Python extension (libtorch, _C): a runner must link libpython too
    needs_python: bool = False

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def relative(self, et: str) -> str:
        """The path inside the executorch package (``lib/libexecutorch.so``)."""
        return os.path.relpath(self.path, et)


@dataclass(frozen=True)
class Registry:
    """What each library of an executorch install registers (from the registry probe)."""

    #: the install's ``executorch`` package folder
    executorch: str
    #: operator -> library; backend -> library
    kernels: dict[str, str]
    backends: dict[str, str]
    #: libraries that load only with libpython (they link ExecuTorch's Python extension)
    python: frozenset[str]
    #: libraries that could not be loaded at all: path -> dlerror
    errors: dict[str, str]
    #: backends registered but unavailable here (``is_available()`` false: their own runtime library, QNN's or
    #: OpenVINO's, is missing): ``load_method`` of a method that calls one fails with NotFound (0x20)
    unavailable: frozenset[str] = frozenset()


def libpython() -> str | None:
    """This interpreter's shared libpython (None: a statically linked interpreter)."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    path = Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("LDLIBRARY") or "")
    return str(path) if path.is_file() else None


def _candidates(et: Path) -> tuple[list[Path], list[Path]]:
    """(the runtime's own libraries in lib/, the Python extension's companion libraries elsewhere)."""
    own = sorted(p for p in (et / "lib").glob("lib*.so") if p.name != "libexecutorch.so")
    companions = sorted(p for p in et.rglob("lib*.so")
                        if p.parent != et / "lib" and ".cpython-" not in p.name and "/include/" not in str(p))
    return own, companions


def _probe(args: list[str]) -> list[list[str]]:
    try:
        r = subprocess.run([str(native.probe_path()), *args], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NativeBuildError(f"the registry probe did not run: {exc}") from exc
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise NativeBuildError(f"the registry probe failed (exit {r.returncode}): {tail}")
    return [line.split("\t") for line in r.stdout.splitlines() if line]


@lru_cache(maxsize=1)
def registry() -> Registry:
    """What each library of this interpreter's executorch install registers (probed once per install and cache
    folder: seconds, said to whoever is ``pte_lab.progress.telling``)."""
    et = native.executorch_dir()
    own, companions = _candidates(et)
    base = et / "lib" / "libexecutorch.so"
    files = [base, *own, *companions]
    # the probe's own build (its source) is in the key: a probe that says more is asked again
    key_text = "\0".join([str(native.probe_path()), *(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)])
    py = libpython()

    key = hashlib.sha256((key_text + f"\0{py}").encode()).hexdigest()[:20]
    cached = cache_dir("registry", f"{key}.json")
    if cached.exists():
        doc = json.loads(cached.read_text())
    else:
        tell("finding which library of this ExecuTorch install registers each kernel and backend (a probe loads "
             "each in turn: seconds; once per install and cache folder)")
        doc = {"kernels": {}, "backends": {}, "python": [], "errors": {}, "unavailable": []}

        def take(rows, only: str | None = None) -> None:
            for row in rows:
                lib = str(base) if row[1] == "libexecutorch.so" else row[1]
                if only is not None and lib != only:
                    continue
                if row[0] == "kernel":
                    doc["kernels"].setdefault(row[2], lib)
                elif row[0] == "backend":
                    doc["backends"].setdefault(row[2], lib)
                    if len(row) > 3 and row[3] == "unavailable" and row[2] not in doc["unavailable"]:
                        doc["unavailable"].append(row[2])
                elif row[0] == "python":
                    doc["python"].append(lib)
                elif row[0] == "error":
                    doc["errors"][lib] = row[2] if len(row) > 2 else "dlopen failed"

        take(_probe([str(p) for p in own]))
        # each companion in a fresh probe after the runtime's own libraries: what it adds is its own,
        # and whether it needs libpython is seen for each
        for c in companions:
            take(_probe([str(p) for p in own] + (["--python", py] if py else []) + [str(c)]), only=str(c))
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, cached)
    return Registry(str(et), doc["kernels"], doc["backends"], frozenset(doc["python"]), doc["errors"],
                    frozenset(doc.get("unavailable", ())))


def needed(operators, backends) -> tuple[tuple[Library, ...], tuple[str, ...]]:
    """The libraries that register ``operators`` and ``backends`` (libexecutorch.so first, always),
    and what no library of the install registers."""
    reg = registry()
    base = str(Path(reg.executorch) / "lib" / "libexecutorch.so")
    by_lib: dict[str, list[str]] = {base: []}
    missing = []
    for what, table in ((sorted(set(backends)), reg.backends), (sorted(set(operators)), reg.kernels)):
        for name in what:
            lib = table.get(name)
            if lib is None:
                missing.append(name)
            else:
                by_lib.setdefault(lib, []).append(name)
    libs = tuple(Library(p, tuple(names), p in reg.python) for p, names in by_lib.items())
    return libs, tuple(missing)


def compile_flags() -> list[str]:
    """Flags that compile C++ against the wheel's headers (include folders, the c10 define)."""
    return native.wheel_build_flags()[0]


def link_flags(libraries) -> list[str]:
    """Flags that link ``libraries`` (all kept: inside --no-as-needed), found again at run time by rpath;
    libpython where one of them needs it."""
    dirs: list[str] = []
    names: list[str] = []
    for lib in libraries:
        d = os.path.dirname(lib.path)
        if d not in dirs:
            dirs.append(d)
        names.append(f"-l:{lib.name}")
    py = libpython() if any(lib.needs_python for lib in libraries) else None
    if py:
        dirs.append(os.path.dirname(py))
        names.append(f"-l:{os.path.basename(py)}")
    return ([f"-L{d}" for d in dirs] + ["-Wl,--no-as-needed", *names, "-Wl,--as-needed"]
            + [f"-Wl,-rpath,{d}" for d in dirs] + ["-ldl", "-lpthread"])
