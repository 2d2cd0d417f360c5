"""Every delegate backend pte_lab knows, each ONE registration (:class:`Backend`), and what a blob of one says.

A backend is registered once, below (:data:`BACKENDS`, in the order :func:`_register` is called): its id as the
program names it (``BackendDelegate.id``; the id of a backend whose blob :mod:`pte_lab.format` reads is that
reader's ``BACKEND``), the name users know, what is known of its memory and how to measure the rest (its
:class:`BackendNote`), its blob's readers and check, what its ``init`` takes from the method allocator and from
the heap, whether it runs on a microcontroller, its stand-in, its firmware libraries... Every other module asks
the registry (:func:`registration`, a constant such as :data:`XNNPACK`, or a table derived from it, such as
``BACKEND_NOTES`` or ``pte_lab.model.method_pool.BACKEND_INIT``), never a literal id. The C++ sources under
``pte_lab/runtime/native`` keep their own literals (each says so).

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
* each backend's blob check (``pte_lab.model.delegates.BLOB_CHECKS``): why a blob is not what its runtime reads.

Read from ExecuTorch 1.5.1's wheel: ``backends/apple/coreml/compiler/coreml_preprocess.py`` (the compile
specs and their defaults), ``backends/xnnpack/serialization/xnnpack_graph_serialize.py`` (``XNNHeader``);
the Core ML file table as :mod:`pte_lab.format.coreml` reads it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING
from collections.abc import Callable, Mapping

from ..errors import PteLabError
from ..format import coreml, vela, xnnpack
from ..vocabulary import MemoryPart

if TYPE_CHECKING:  # pragma: no cover
    from .ethos_u import Blobs

__all__ = ["Backend", "StandIn", "BACKENDS", "registration", "BackendNote", "BACKEND_NOTES", "backend_note",
           "for_a_microcontroller", "MICROCONTROLLER_BACKENDS", "MICROCONTROLLER_OPERATORS", "BlobSetting", "BlobPart",
           "BlobContents", "SettingSource", "blob_contents", "HEADLINE_SETTINGS", "COREML_TARGETS",
           "COREML_COMPUTE_UNITS", "BLOB_SETTINGS", "COREML", "XNNPACK", "ETHOS_U", "ARM_LEGACY", "QNN", "VULKAN",
           "MPS", "OPENVINO"]


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


#: what a blob reader returns: (settings read from the blob, its parts, why it could not be read or None)
BlobReading = tuple[list["BlobSetting"], list["BlobPart"], "str | None"]


@dataclass(frozen=True)
class StandIn:
    """What pte_lab registers under a backend's id in the sizing worker, where the executorch wheel lacks the
    backend (:mod:`pte_lab.runtime.stand_ins`)."""

    #: the ExecuTorch versions (lowest, highest: "1.2", "1.5") whose source it follows
    versions: tuple[str, str]
    #: what the real backend takes from ExecuTorch's allocators and the heap, as the stand-in does
    takes: str
    #: the native library's function that registers it (``runtime/native/stand_ins.cpp``; 0: registered)
    symbol: str


@dataclass(frozen=True)
class Backend:
    """One delegate backend: everything pte_lab knows of it, in one registration (:func:`_register`). Each
    field is optional: a backend registered with its id alone is what pte_lab knows of any delegate."""

    #: its id in the program (``BackendDelegate.id``; ``delegate:<id>`` in a segment's kind)
    id: str
    #: the name a user knows it by ("" : its id)
    name: str = ""
    #: what the file gives and pte_lab reads, what it allocates that nothing here gives, how to measure that
    #: (:class:`BackendNote`; None: no note, :func:`backend_note` says what is true of any delegate)
    known: str | None = None
    unknown: str = ""
    measure: str = ""
    #: pte_lab runs it here (``pte-lab sizes`` measures what it allocates on this host)
    runs_here: bool = False
    #: the kinds of target it runs on (:attr:`BackendNote.targets`)
    targets: tuple[str, ...] = ("host", "bare-metal")
    #: it runs on a microcontroller and its NPU: a program calling it is built into bare-metal firmware (its
    #: budget is a board's), not loaded by an app's Module
    microcontroller: bool = False
    #: what its blob's bytes say: ``read_blob(read, offset, size)`` (:func:`blob_contents`; None: not read so)
    read_blob: Callable[[Callable[[int, int], bytes], int, int], BlobReading] | None = None
    #: the settings its compile specs (decoded) say, with the backend's defaults (:func:`blob_contents`)
    read_specs: Callable[[dict], list[BlobSetting]] | None = None
    #: why a blob is not what its runtime reads: ``check_blob(blobs, offset, size)`` (None: not checked;
    #: ``pte_lab.model.delegates.BLOB_CHECKS``)
    check_blob: Callable[[Blobs, int, int], str | None] | None = None
    #: what its init() takes from the method allocator, per target: target -> ((what, bytes, alignment), ...);
    #: a target missing: not known there (``pte_lab.model.method_pool.BACKEND_INIT``)
    init: Mapping[str, tuple[tuple[str, int, int], ...]] = field(default_factory=dict)
    #: what its init() allocates itself on the heap, outside ExecuTorch's allocators, one per delegate: (the
    #: type, how, its size in pointer-sized words) (``pte_lab.model.method_pool.BACKEND_HEAP``)
    heap: tuple[str, str, int] | None = None
    #: the ExecuTorch source ``init``, ``heap`` and ``stand_in`` follow, in words
    sources_read: str | None = None
    #: what it allocates itself with malloc, outside ExecuTorch's allocators, where a sizing measured the heap
    #: (a board's total counts it: without a heap that size it does not run)
    own_heap: str | None = None
    #: the same, as the plan's note names it (a plural noun phrase: "X's packed weights and workspaces")
    own_memory: str | None = None
    #: a heap part of ``pte-lab sizes`` (``pte_lab.runtime.sizing.PARTS``) -> what of it the backend takes
    heap_causes: Mapping[MemoryPart, str] = field(default_factory=dict)
    #: where it holds what is alive inside one of its calls (a delegate split's advice says it)
    call_workspace: str | None = None
    #: the stand-in the sizing worker registers where the wheel lacks it
    stand_in: StandIn | None = None
    #: ExecuTorch's static libraries a bare-metal build links for it: (linked whole, linked as usual)
    firmware_libraries: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    #: what a bare-metal build needs beyond its library, said in build.sh (one line a comment)
    firmware_notes: tuple[str, ...] = ()

    @property
    def user_name(self) -> str:
        """The name a user knows it by (its id where none is registered)."""
        return self.name or self.id

    @property
    def note(self) -> BackendNote:
        """What is known of its memory, and what is not (what is true of any delegate where nothing is
        registered)."""
        if self.known is None:
            return BackendNote(self.id, self.id, "the blob's bytes",
                               "everything the backend allocates inside its delegate calls",
                               "on the device: the process's memory around load_method and execute")
        return BackendNote(self.id, self.user_name, self.known, self.unknown, self.measure, self.runs_here,
                           self.targets)


_REGISTRY: dict[str, Backend] = {}
#: backend id -> its registration, in the order registered
BACKENDS: Mapping[str, Backend] = MappingProxyType(_REGISTRY)


def _register(backend: Backend) -> Backend:
    if backend.id in _REGISTRY:
        raise ValueError(f"backend {backend.id!r} is registered twice")
    _REGISTRY[backend.id] = backend
    return backend


def registration(backend_id: str) -> Backend:
    """The registration of ``backend_id`` (an id such as ``"XnnpackBackend"``); a backend pte_lab does not know
    gets a :class:`Backend` of its id alone (what is true of any delegate)."""
    return _REGISTRY.get(backend_id) or Backend(backend_id)


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
    #: ExecuTorch's debug files (Core ML's ``debug_info.json`` and ``executorch_debug_handle_mapping.json``: the
    #: profiler's map from the model's operations to the program's debug handles), not the model
    debug: bool = False


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

    @property
    def debug_bytes(self) -> int:
        """Of the blob, the bytes of ExecuTorch's debug files (:attr:`BlobPart.debug`)."""
        return sum(p.bytes for p in self.parts if p.debug)


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


def _coreml_blob(read: Callable[[int, int], bytes], offset: int, size: int
                 ) -> tuple[list[BlobSetting], list[BlobPart], str | None]:
    files, problem = coreml.read_file_table(read, offset, size)
    if files is None:
        return [], [], problem
    parts = []
    for part, names, debug in (("model", (coreml.MODEL_FILE,), False), ("weights", ("weight.bin",), False),
                               ("debug files", ("debug_info.json", "executorch_debug_handle_mapping.json"), True)):
        n = sum(files[k][1] for k in names if k in files)
        if any(k in files for k in names):
            parts.append(BlobPart(part, n, debug))
    settings = []
    if coreml.MODEL_FILE in files:
        at, n = files[coreml.MODEL_FILE]
        version = coreml.specification_version(read(offset + at, min(n, 16)))
        if version is not None:
            oldest = COREML_TARGETS.get(version)
            settings.append(BlobSetting("Core ML specification", f"{version}" + (
                f" ({oldest} and later)" if oldest else ""), str(version), SettingSource.BLOB))
    return settings, parts, None


def _xnnpack_blob(read: Callable[[int, int], bytes], offset: int, size: int
                  ) -> tuple[list[BlobSetting], list[BlobPart], str | None]:
    head = read(offset, min(size, xnnpack.HEADER_BYTES))
    h = xnnpack.read_header(head)
    if h is None:
        if xnnpack.identifier(head) in xnnpack.GRAPH_IDENTIFIERS:
            return [], [BlobPart("graph", size)], None
        return [], [], f"no XNNPACK header ({xnnpack.HEADER_MAGIC.decode()} at bytes 4..8)"
    return [], [BlobPart("graph", h.graph_bytes), BlobPart("constant data", h.constants_bytes)], None


def blob_contents(backend: str, specs: dict, read: Callable[[int, int], bytes] | None, offset: int,
                  size: int) -> BlobContents | None:
    """What ``backend``'s blob (``size`` bytes at ``offset``, read with ``read(offset, n)``; None: not
    available) and its compile specs (decoded) say; None for a backend pte_lab does not read this way (Ethos-U's
    blob is :mod:`.ethos_u`'s)."""
    reg = registration(backend)
    if reg.read_blob is None:
        return None
    settings = reg.read_specs(specs) if reg.read_specs is not None else []
    parts: list[BlobPart] = []
    problem = None
    if read is None:
        problem = "the blob was not read: the program's bytes are not available"
    elif size:
        try:
            more, parts, problem = reg.read_blob(read, offset, size)
        except (OSError, PteLabError) as exc:  # the file went away or changed since it was opened
            more, problem = [], f"the blob could not be read: {exc}"
        settings += more
    return BlobContents(backend, tuple(settings), tuple(parts), problem)


# ----------------------------------------------------------------------- whether a blob is what its runtime reads
def _xnnpack_problem(blobs: Blobs, offset: int, size: int) -> str | None:
    read = blobs.read
    if read is None:  # opened from a stream that is gone: the bytes cannot be checked
        return None
    head = read(offset, min(size, xnnpack.HEADER_BYTES))
    fb = xnnpack.header_graph_offset(head)
    if fb is not None:
        if fb + 8 > size:
            return f"its XNNPACK header puts the graph at byte {fb}, past the blob's {size} bytes"
        ident = xnnpack.identifier(read(offset + fb, 8))
        if ident in xnnpack.GRAPH_IDENTIFIERS:
            return None
        return f"its XNNPACK header points at a graph whose identifier is {ident!r}, not {xnnpack.GRAPH_IDENTIFIERS[0]!r}"
    if xnnpack.identifier(head) in xnnpack.GRAPH_IDENTIFIERS:
        return None
    return (f"it starts with {head[:8]!r}: neither XNNPACK's header ({xnnpack.HEADER_MAGIC!r} at bytes 4..8) "
            f"nor an XNNPACK graph ({xnnpack.GRAPH_IDENTIFIERS[0]!r})")


def _vela_problem(blobs: Blobs, offset: int, size: int, backend: str = vela.BACKEND) -> str | None:
    stream = blobs.vela(offset, size, backend)  # read once, for this check and for the delegate's memory
    if stream.ok:
        return None
    more = len(stream.problems) - 1
    return stream.problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


# ------------------------------------------------------------------------------------ the registrations
COREML = _register(Backend(
    coreml.BACKEND, "Core ML",
    known="the blob's bytes (model, weights, debug files) and its settings (compute units, precision, deployment "
          "target)",
    unknown="what Core ML allocates inside: the model it compiles at the first load (cached by the OS), its "
            "activations (float16 on the GPU and Neural Engine), the Neural Engine's and GPU's buffers",
    measure="on the device: Xcode Instruments (Allocations and VM Tracker; the Core ML template for each load and "
            "prediction), or os_proc_available_memory() before and after load_method and execute; Core ML does "
            "not run here (not in this ExecuTorch wheel)", targets=("host",),
    read_blob=_coreml_blob, read_specs=_coreml_settings))

XNNPACK = _register(Backend(
    xnnpack.BACKEND, "XNNPACK",
    known="the blob's graph and constants (its XH00 header); its heap at load_method (the weights it packs) and at "
          "execute (its workspace), measured here by pte-lab sizes",
    unknown="those heap figures on the device: XNNPACK picks its kernels, and so its packed weights and "
            "workspace, per CPU",
    measure="on the device: the same runner's heap (iOS: Instruments' Allocations or os_proc_available_memory(); "
            "Android: dumpsys meminfo, or Android Studio's memory profiler)", runs_here=True,
    read_blob=_xnnpack_blob, check_blob=_xnnpack_problem,
    # allocateInstance<XNNExecutor> (backends/xnnpack/runtime/XNNPACKBackend.cpp); XNNExecutor's header is not in
    # the wheel, so its x86-64 size is the one the sizing runner measured (xnnpack.pte; the other XNNPACK programs
    # check it); XNNPACK has no Cortex-M build
    init={"host": (("XNNExecutor", 272, 8),)},
    own_heap="XNNPACK allocates itself (packed weights at load_method, workspaces at execute)",
    own_memory="XNNPACK's packed weights and workspaces (made at load_method and the first execute)",
    heap_causes={MemoryPart.HEAP_LOAD_METHOD: "XNNPACK's packed weights",
                 MemoryPart.HEAP_EXECUTE: "XNNPACK's workspace"},
    call_workspace="its own workspace on the heap (`pte-lab sizes FILE` measures it)"))

#: EthosUBackend's handle: ``new (std::nothrow) ExecutionHandle()`` (a PlatformState pointer and VelaHandles'
#: eight pointer-sized fields), freed by destroy(); init fails with MemoryAllocationFailed where new returns null
#: (a heap-less board)
_ETHOS_U_HANDLE = ("ExecutionHandle", "operator new", 9)

#: what a Vela stream (Ethos-U's blob, under either id) gives and pte_lab reads
_VELA_KNOWN = ("the command stream, weights and scratch the blob declares (the scratch from the temp allocator at "
               "every execute) and where the memory mode needs each")

ETHOS_U = _register(Backend(
    vela.BACKEND, "Arm Ethos-U",
    known=f"{_VELA_KNOWN}; the backend's own handle, one per delegate call "
          f"({_ETHOS_U_HANDLE[0]}, {_ETHOS_U_HANDLE[2]} pointer-sized words: {_ETHOS_U_HANDLE[2] * 4} B on a 32-bit "
          f"Cortex-M, with {_ETHOS_U_HANDLE[1]} at load_method, as ExecuTorch's source reads; pte-lab sizes --target "
          "cortex-m counts it in the board's heap)",
    unknown="the fast scratch the firmware provides under Dedicated_Sram (its size is not in the file)",
    measure="on the board: the pools' used bytes after a run (MemoryAllocator::used_size()) and Vela's SRAM figure "
            "for the fast scratch", targets=("bare-metal",), microcontroller=True,
    check_blob=_vela_problem,
    # its handle comes from new and platform_init returns nullptr on Cortex-M: nothing from the method allocator;
    # pte_lab's host stand-in takes the same (ExecuTorch 1.0 took the handle from the method allocator,
    # allocateInstance<ExecutionHandle>: a program run by 1.0 needs it there instead)
    init={"host": (), "cortex-m": ()}, heap=_ETHOS_U_HANDLE,
    # backends/arm/runtime/EthosUBackend.cpp, EthosUBackend_Cortex_M.cpp, VelaBinStream.h. The 1.5.1 wheel ships
    # no Arm runtime source and names its commit (3b60683923...), which no mirror read here holds; the newest
    # source read is main of 2026-08-22 (cff6f4dd32, version 1.5.0, a day after the 2026-08-21 nightly), the same
    # in every line read since 1.2.0
    sources_read="ExecuTorch v1.2.0 to v1.4.1 and main of 2026-08-22 (cff6f4dd32, version 1.5.0: the nearest to "
                 "the 1.5.1 wheel, whose commit 3b60683923 no mirror read here holds)",
    call_workspace="the scratch it takes from the temp allocator at every execute (the blob's scratch_size: "
                   "`pte-lab inspect FILE` shows it)",
    stand_in=StandIn(("1.2", "1.5"),
                     f"init: its {_ETHOS_U_HANDLE[0]} with new (the heap: {_ETHOS_U_HANDLE[2]} words, "
                     f"{_ETHOS_U_HANDLE[2] * 8} bytes here, {_ETHOS_U_HANDLE[2] * 4} on a 32-bit Cortex-M), nothing "
                     "from the method allocator; execute: scratch_size bytes, 16-byte aligned, from the temp "
                     "allocator", "pte_lab_stand_in_ethos_u"),
    firmware_libraries=(("libexecutorch_delegate_ethos_u.a",), ()),
    firmware_notes=(
        f"{vela.BACKEND}: link Arm's Ethos-U core driver too (libethosu_core_driver.a, ethos-u-core-driver: the",
        "backend reserves the driver with ethosu_reserve_driver and runs the command stream with ethosu_invoke_v3),",
        "and initialise the NPU before main() loads a method: ethosu_init() with the NPU's base address, your",
        "board's startup (Arm's core-platform does it in its Corstone targets) and an IRQ handler that calls",
        "ethosu_irq_handler; add those libraries to LDFLAGS.",
    )))

QNN = _register(Backend(
    "QnnBackend", "Qualcomm QNN",
    known="the blob's bytes (the QNN context binary)",
    unknown="what the HTP (DSP) allocates: its spill-fill and shared (rpcmem) buffers and the context's own memory",
    measure="on the device: QNN's profiling (qnn_executor_runner with a profile level), Snapdragon Profiler, or "
            "dumpsys meminfo around load_method and execute", targets=("host",)))

VULKAN = _register(Backend(
    "VulkanBackend", "Vulkan",
    known="the blob's bytes (its graph and shaders)",
    unknown="the GPU memory of its tensors and staging buffers",
    measure="on the device: Android GPU Inspector, or dumpsys meminfo's Graphics line around load_method and "
            "execute", targets=("host",)))

MPS = _register(Backend(
    "MPSBackend", "Metal (MPS)",
    known="the blob's bytes (its MPSGraph)",
    unknown="the Metal buffers MPSGraph allocates for its tensors (unified memory on Apple silicon)",
    measure="on the device: Xcode Instruments (Metal System Trace, Allocations), or os_proc_available_memory() "
            "around load_method and execute", targets=("host",)))

OPENVINO = _register(Backend(
    "OpenvinoBackend", "OpenVINO",
    known="the blob's bytes (the compiled model)",
    unknown="what the OpenVINO plugin allocates on its device (CPU, GPU or NPU): the compiled network and its "
            "intermediate buffers",
    measure="on the target: OpenVINO's benchmark_app (-pc, memory reports) or the process's memory around "
            "load_method and execute", targets=("host",)))

#: Ethos-U under its ExecuTorch 0.2 to 0.5 id: its blob checked as that runtime's reader checks it; a board's
#: backend like Ethos-U's (its advice is a microcontroller's), whose handle and stand-in are not modelled for it
ARM_LEGACY = _register(Backend(
    vela.LEGACY_BACKEND, "Arm Ethos-U (ExecuTorch 0.2 to 0.5's id)",
    known=_VELA_KNOWN,
    unknown=f"the backend's own allocations in the runtime that wrote this id (ExecuTorch 1.x registers the backend "
            f"as {vela.BACKEND}, and does not load a program that names {vela.LEGACY_BACKEND}: export it again), and "
            "the fast scratch the firmware provides under Dedicated_Sram",
    measure=ETHOS_U.measure,
    targets=("bare-metal",), microcontroller=True,
    check_blob=partial(_vela_problem, backend=vela.LEGACY_BACKEND)))


# ------------------------------------------------------------------------- tables derived from the registrations
BACKEND_NOTES: Mapping[str, BackendNote] = MappingProxyType(
    {b.id: b.note for b in BACKENDS.values() if b.known is not None})

#: backends that run on a microcontroller and its NPU, and the operator namespaces of microcontroller kernels: a
#: program calling them is built into bare-metal firmware, not loaded by an app's Module
MICROCONTROLLER_BACKENDS = frozenset(b.id for b in BACKENDS.values() if b.microcontroller)
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
    return registration(backend).note
