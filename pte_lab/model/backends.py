"""What pte_lab knows of each delegate backend, and what a blob of one says (Core ML, XNNPACK).

Two things, both records the views render:

* :data:`BACKEND_NOTES`, one :class:`BackendNote` per backend: which of its bytes the file gives (planned
  arenas, the blob, what the blob declares), which pte_lab measures here, what the backend allocates inside
  that nothing here knows, and how to measure that on the device. ``backend_note(backend_id)`` gives one (a
  backend not listed gets what is true of any delegate).
* ``blob_contents``: what a blob's bytes and its compile specs say, beyond its size, as
  :class:`BlobSetting` and :class:`BlobPart` records. Core ML: compute units, compute precision, minimum
  deployment target (stored as coremltools' ``ct.target`` number: ``"6"`` is iOS 15), model type, and from
  the blob (a flattened ``.mlpackage`` with its file table, reversed JSON, at the end) the Core ML
  specification version and the bytes of the model, its weights and ExecuTorch's debug files. XNNPACK: its
  30-byte ``XH00`` header's graph (flatbuffer) and constant-data spans.

Read from ExecuTorch 1.5.1's wheel: ``backends/apple/coreml/compiler/coreml_preprocess.py`` (the compile
specs and their defaults), ``backends/xnnpack/serialization/xnnpack_graph_serialize.py`` (``XNNHeader``);
the Core ML file table from ``backends/apple/coreml/runtime/inmemoryfs/inmemory_filesystem.cpp`` (main of
2026-08-22, the nearest source read here).
"""

from __future__ import annotations

import enum
import json
import struct
from dataclasses import dataclass
from types import MappingProxyType
from collections.abc import Callable, Mapping

from ..errors import PteLabError
from .method_pool import BACKEND_HEAP

__all__ = ["BackendNote", "BACKEND_NOTES", "backend_note", "for_a_microcontroller", "MICROCONTROLLER_BACKENDS",
           "MICROCONTROLLER_OPERATORS", "BlobSetting", "BlobPart", "BlobContents",
           "SettingSource", "blob_contents", "HEADLINE_SETTINGS", "COREML_TARGETS", "COREML_COMPUTE_UNITS", "BLOB_SETTINGS",
           "COREML", "XNNPACK"]

COREML = "CoreMLBackend"
XNNPACK = "XnnpackBackend"


# ------------------------------------------------------------------------------- what each backend leaves out
@dataclass(frozen=True)
class BackendNote:
    """One backend: what is known of its memory, and what is not (one line in ``inspect`` and ``sizes``)."""

    backend: str
    #: the name a user knows it by
    name: str
    #: what the file gives and pte_lab reads (the planned arenas are every backend's: not repeated)
    known: str
    #: what the backend allocates that neither the file nor pte_lab's measurement gives
    unknown: str
    #: how to measure ``unknown``, and where
    measure: str
    #: pte_lab runs it here (``pte-lab sizes`` measures what it allocates on this host)
    runs_here: bool = False
    #: the kinds of target it runs on (``pte_lab.sizes``' target kinds: "host", an OS process, this host or an
    #: app on a phone; "bare-metal", a board with no OS): a total for another kind is no one's
    targets: tuple[str, ...] = ("host", "bare-metal")


#: EthosUBackend's handle, as method_pool reads the backend's source (one home for the figure)
_ETHOS_U_HANDLE = BACKEND_HEAP["EthosUBackend"]

BACKEND_NOTES: Mapping[str, BackendNote] = MappingProxyType({n.backend: n for n in (
    BackendNote(COREML, "Core ML",
                "the blob's bytes (model, weights, debug files) and its settings (compute units, precision, "
                "deployment target)",
                "what Core ML allocates inside: the model it compiles at the first load (cached by the OS), "
                "its activations (float16 on the GPU and Neural Engine), the Neural Engine's and GPU's buffers",
                "on the device: Xcode Instruments (Allocations and VM Tracker; the Core ML template for each "
                "load and prediction), or os_proc_available_memory() before and after load_method and "
                "execute; Core ML does not run here (not in this ExecuTorch wheel)", targets=("host",)),
    BackendNote(XNNPACK, "XNNPACK",
                "the blob's graph and constants (its XH00 header); its heap at load_method (the weights it "
                "packs) and at execute (its workspace), measured here by pte-lab sizes",
                "those heap figures on the device: XNNPACK picks its kernels, and so its packed weights and "
                "workspace, per CPU",
                "on the device: the same runner's heap (iOS: Instruments' Allocations or "
                "os_proc_available_memory(); Android: dumpsys meminfo, or Android Studio's memory profiler)",
                runs_here=True),
    BackendNote("EthosUBackend", "Arm Ethos-U",
                "the command stream, weights and scratch the blob declares (the scratch from the temp "
                "allocator at every execute) and where the memory mode needs each; the backend's own handle, "
                f"one per delegate call ({_ETHOS_U_HANDLE[0]}, {_ETHOS_U_HANDLE[2]} pointer-sized words: "
                f"{_ETHOS_U_HANDLE[2] * 4} B on a 32-bit Cortex-M, with {_ETHOS_U_HANDLE[1]} at load_method, as "
                "ExecuTorch's source reads; pte-lab sizes --target cortex-m counts it in the board's heap)",
                "the fast scratch the firmware provides under Dedicated_Sram (its size is not in the file)",
                "on the board: the pools' used bytes after a run (MemoryAllocator::used_size()) and Vela's "
                "SRAM figure for the fast scratch", targets=("bare-metal",)),
    BackendNote("QnnBackend", "Qualcomm QNN",
                "the blob's bytes (the QNN context binary)",
                "what the HTP (DSP) allocates: its spill-fill and shared (rpcmem) buffers and the context's "
                "own memory",
                "on the device: QNN's profiling (qnn_executor_runner with a profile level), Snapdragon "
                "Profiler, or dumpsys meminfo around load_method and execute", targets=("host",)),
    BackendNote("VulkanBackend", "Vulkan",
                "the blob's bytes (its graph and shaders)",
                "the GPU memory of its tensors and staging buffers",
                "on the device: Android GPU Inspector, or dumpsys meminfo's Graphics line around load_method "
                "and execute", targets=("host",)),
    BackendNote("MPSBackend", "Metal (MPS)",
                "the blob's bytes (its MPSGraph)",
                "the Metal buffers MPSGraph allocates for its tensors (unified memory on Apple silicon)",
                "on the device: Xcode Instruments (Metal System Trace, Allocations), or "
                "os_proc_available_memory() around load_method and execute", targets=("host",)),
    BackendNote("OpenvinoBackend", "OpenVINO",
                "the blob's bytes (the compiled model)",
                "what the OpenVINO plugin allocates on its device (CPU, GPU or NPU): the compiled network and "
                "its intermediate buffers",
                "on the target: OpenVINO's benchmark_app (-pc, memory reports) or the process's memory around "
                "load_method and execute", targets=("host",)),
)})


#: backends that run on a microcontroller and its NPU, and the operator namespaces of microcontroller kernels: a
#: program calling them is built into bare-metal firmware, not loaded by an app's Module
MICROCONTROLLER_BACKENDS = frozenset({"EthosUBackend"})
MICROCONTROLLER_OPERATORS = ("cortex_m::",)


def for_a_microcontroller(pte) -> bool:
    """``pte`` (a :class:`~pte_lab.model.Pte`) calls a microcontroller or NPU backend (EthosUBackend) or
    microcontroller kernels (``cortex_m::``): it runs in bare-metal firmware, where an app's ``Module`` and its
    load modes (Android, iOS, desktop) do not apply."""
    for m in pte.methods.values():
        if any(d.backend in MICROCONTROLLER_BACKENDS for d in m.delegates) or any(
                o.startswith(MICROCONTROLLER_OPERATORS) for o in m.operators):
            return True
    return False


def backend_note(backend: str) -> BackendNote:
    """The :class:`BackendNote` of ``backend`` (an id such as ``CoreMLBackend``); a backend pte_lab has no
    note of gets what is true of any delegate."""
    note = BACKEND_NOTES.get(backend)
    if note is not None:
        return note
    return BackendNote(backend, backend, "the blob's bytes",
                       "everything the backend allocates inside its delegate calls",
                       "on the device: the process's memory around load_method and execute")


# -------------------------------------------------------------------------------------- what a blob says
class SettingSource(enum.Enum):
    """Where a :class:`BlobSetting` comes from."""

    COMPILE_SPEC = "compile spec"
    BLOB = "delegate blob"
    #: the compile spec is absent: the backend's default (read from ExecuTorch's preprocess)
    DEFAULT = "backend's default"


@dataclass(frozen=True)
class BlobSetting:
    """One setting of a delegate: its name, its value in words, the value as stored (``"6"``), and its source."""

    what: str
    value: str
    stored: str | None
    source: SettingSource


@dataclass(frozen=True)
class BlobPart:
    """Bytes of one part of a blob (XNNPACK's graph; Core ML's model file)."""

    part: str
    bytes: int


@dataclass(frozen=True)
class BlobContents:
    """What a blob and its compile specs say (``blob_contents``)."""

    backend: str
    settings: tuple[BlobSetting, ...]
    parts: tuple[BlobPart, ...]
    #: why the blob's bytes could not be read (None: read, or nothing to read)
    problem: str | None = None

    def setting(self, what: str) -> BlobSetting | None:
        return next((s for s in self.settings if s.what == what), None)


#: coremltools' ``ct.target`` numbers (``AvailableTarget``; also the Core ML specification version each OS
#: release reads first) -> the OS releases
COREML_TARGETS: Mapping[int, str] = MappingProxyType({
    4: "iOS 13 / macOS 10.15", 5: "iOS 14 / macOS 11", 6: "iOS 15 / macOS 12", 7: "iOS 16 / macOS 13",
    8: "iOS 17 / macOS 14", 9: "iOS 18 / macOS 15", 10: "iOS 26 / macOS 26"})
#: ``ct.ComputeUnit`` names as the compile spec stores them -> words
COREML_COMPUTE_UNITS: Mapping[str, str] = MappingProxyType({
    "all": "all (CPU, GPU and Neural Engine)", "cpu_and_gpu": "CPU and GPU", "cpu_only": "CPU only",
    "cpu_and_ne": "CPU and Neural Engine"})
#: the settings ``blob_contents`` gives, in the order a diff compares them
BLOB_SETTINGS = ("compute units", "precision", "deployment target", "model type", "Core ML specification")
#: the settings a delegate's one-line summary names (the others are on a line of their own)
HEADLINE_SETTINGS = BLOB_SETTINGS[:3]

#: the most bytes of a Core ML blob's end read for its file table
_TABLE_TAIL = 1 << 20


def _coreml_settings(specs: dict) -> list[BlobSetting]:
    out = []

    def add(what, key, words, default):
        raw = specs.get(key)
        if raw is None:
            out.append(BlobSetting(what, default, None, SettingSource.DEFAULT))
        else:
            raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            out.append(BlobSetting(what, words(raw), raw, SettingSource.COMPILE_SPEC))

    add("compute units", "compute_units", lambda v: COREML_COMPUTE_UNITS.get(v, v), COREML_COMPUTE_UNITS["all"])
    add("precision", "model_compute_precision", str, "float16")

    def target(v: str) -> str:
        if v == "":
            return "coremltools' choice (the Core ML specification says)"
        return COREML_TARGETS.get(int(v), f"ct.target {v}") if v.isdigit() else v

    add("deployment target", "min_deployment_target", target,
        "coremltools' choice (the Core ML specification says)")
    add("model type", "model_type", lambda v: {"model": "model (the device compiles it at the first load)",
                                                "compiled_model": "compiled model (compiled at export)"}.get(v, v),
        "model (the device compiles it at the first load)")
    return out


def _varint(b: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while at < len(b):
        c = b[at]
        n |= (c & 0x7F) << shift
        at += 1
        if not c & 0x80:
            return n, at
        shift += 7
    raise ValueError("truncated varint")


def _coreml_blob(read: Callable[[int, int], bytes], offset: int, size: int
                 ) -> tuple[list[BlobSetting], list[BlobPart], str | None]:
    tail = read(offset + size - min(size, _TABLE_TAIL), min(size, _TABLE_TAIL))
    try:
        table, _ = json.JSONDecoder().raw_decode(tail[::-1].decode("utf-8", "replace"))
        nodes = table["nodes"]
        files = {n["name"]: (int(n["dataRegion"]["offset"]), int(n["dataRegion"]["size"]))
                 for n in nodes if n.get("kind") == 0}
    except (ValueError, KeyError, TypeError, AttributeError):
        return [], [], "its file table (reversed JSON at the blob's end) could not be read"
    outside = [k for k, (at, n) in files.items() if at < 0 or n < 0 or at + n > size]
    if outside:
        return [], [], f"its file table puts {outside[0]!r} outside the blob's {size:,} bytes"
    parts = []
    for part, names in (("model", ("model.mlmodel",)), ("weights", ("weight.bin",)),
                        ("debug files", ("debug_info.json", "executorch_debug_handle_mapping.json"))):
        n = sum(files[k][1] for k in names if k in files)
        if any(k in files for k in names):
            parts.append(BlobPart(part, n))
    settings = []
    if "model.mlmodel" in files:
        at, n = files["model.mlmodel"]
        head = read(offset + at, min(n, 16))
        if head[:1] == b"\x08":  # Model.specificationVersion, field 1, a varint
            try:
                version, _ = _varint(head, 1)
            except ValueError:
                version = None
            if version is not None:
                oldest = COREML_TARGETS.get(version)
                settings.append(BlobSetting("Core ML specification", f"{version}" + (
                    f" ({oldest} and later)" if oldest else ""), str(version), SettingSource.BLOB))
    return settings, parts, None


def _xnnpack_blob(read: Callable[[int, int], bytes], offset: int, size: int
                  ) -> tuple[list[BlobSetting], list[BlobPart], str | None]:
    head = read(offset, min(size, 30))
    if head[4:8] != b"XH00" or len(head) < 30:
        if head[4:8] == b"XN01":
            return [], [BlobPart("graph", size)], None
        return [], [], "no XNNPACK header (XH00 at bytes 4..8)"
    _, fb_at, fb_size, const_at, const_size = struct.unpack_from("<HIIIQ", head, 8)
    return [], [BlobPart("graph", fb_size), BlobPart("constant data", const_size)], None


_READERS = {COREML: _coreml_blob, XNNPACK: _xnnpack_blob}


def blob_contents(backend: str, specs: dict, read: Callable[[int, int], bytes] | None, offset: int,
                  size: int) -> BlobContents | None:
    """What ``backend``'s blob (``size`` bytes at ``offset``, read with ``read(offset, n)``; None: not
    available) and its compile specs (decoded) say; None for a backend pte_lab does not read this way (Ethos-U's
    blob is :mod:`.ethos_u`'s)."""
    if backend not in _READERS:
        return None
    settings = _coreml_settings(specs) if backend == COREML else []
    parts: list[BlobPart] = []
    problem = None
    if read is None:
        problem = "the blob was not read: the program's bytes are not available"
    elif size:
        try:
            more, parts, problem = _READERS[backend](read, offset, size)
        except (OSError, PteLabError) as exc:  # the file went away or changed since it was opened
            more, problem = [], f"the blob could not be read: {exc}"
        settings += more
    return BlobContents(backend, tuple(settings), tuple(parts), problem)
