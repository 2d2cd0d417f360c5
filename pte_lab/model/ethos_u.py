"""What a delegate's blob declares about memory (Ethos-U's, read the way ExecuTorch reads them).

A program delegated to an NPU carries what the NPU needs in its blob, outside
the memory plan: ExecuTorch's ``EthosUBackend`` (``backends/arm/runtime``)
reads the command stream and the weights in place from the program's bytes,
and at every ``execute`` takes ``scratch_size`` bytes (16-byte aligned) from
the *temp* allocator, copies the inputs into that scratch, runs the NPU and
copies the outputs out. With ``Dedicated_Sram`` the NPU also uses a fast
scratch the firmware provides (``ethosu_fast_scratch``, ``_size``); the blob
does not say how much.

``delegate_memory`` gives, per delegate, a :class:`DelegateMemory`: the
blob's bytes, the command stream, weights and scratch and where each comes
from, the memory mode Vela compiled for (from the compile specs), where each
part must live in that mode (:data:`MEMORY_MODES`), and Vela's input/output
descriptors. ``io_checks`` pairs the descriptors with the tensors each
delegate call passes, with what ExecuTorch's backend refuses at execute
(``io_refusal``). Blobs of other backends are sized, not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Callable

from ..errors import PteLabError
from ..format import RawPlan, RawProgram, ScalarType
from ..format.blobs import blob_reader, delegate_span, held_open, named_data_span, program_reader
from ..format.vela import BACKENDS, VelaIO, VelaStream, read_vela
from ..units import count as plural
from ..vocabulary import InstructionKind, MemoryPart
from .analysis import tensor_meta
from .backends import HEADLINE_SETTINGS, BlobContents, SettingSource, blob_contents
from .dtypes import SCALAR_TYPES

if TYPE_CHECKING:  # pragma: no cover
    from .data_file import DataFile

__all__ = ["DelegateMemory", "DelegatePart", "Blobs", "delegate_memory", "MemoryMode", "MEMORY_MODES",
           "DELEGATE_COLUMNS", "IOCheck", "io_checks", "io_refusal", "memory_mode_of", "describe_io",
           "IO_TYPES", "SCRATCH_ALIGNMENT", "TEMP_ALLOCATOR", "IN_BLOB", "NOT_RECORDED"]


# ------------------------------------------------------------ what the blobs declare
#: the temp allocator's alignment for the scratch (``temp_allocator->allocate(scratch_data_size, 16)``)
SCRATCH_ALIGNMENT = 16
#: the allocator the runtime takes the scratch from, as every view names it
TEMP_ALLOCATOR = MemoryPart.TEMP_ALLOCATOR
#: where the scratch is when the blob carries it (a ``scratch_data`` block, before ExecuTorch 0.7)
IN_BLOB = "the program's bytes (a scratch_data block)"
#: what is said of a target or memory mode the program does not carry
NOT_RECORDED = "not recorded by this flow"

@dataclass(frozen=True)
class MemoryMode:
    """One of Vela's memory modes: where each part of what the NPU needs must live in it."""

    name: str
    #: where the command stream and weights are (the NPU reads them in place from the program's bytes)
    program: str
    #: where the scratch must be
    scratch: str
    #: where the fast scratch is (None: the mode has none), and who provides it
    fast_scratch: str | None = None
    fast_scratch_from: str | None = None

    @property
    def fast_scratch_text(self) -> str | None:
        """Where the fast scratch is and who provides it, in one phrase (None: the mode has none)."""
        return None if self.fast_scratch is None else f"{self.fast_scratch}, {self.fast_scratch_from}"


#: Vela's memory modes (its ``vela.ini``; ``Dedicated_Sram_384KB`` and the like inherit ``Dedicated_Sram``). No
#: mode puts the program's bytes in SRAM: ExecuTorch's own Corstone build (``backends/arm/scripts/
#: corstone_utils.cmake``) keeps the model in DRAM under every mode ("Model in DRAM, scratch in SRAM" for
#: ``Shared_Sram`` and ``Sram_Only``, both in DRAM for ``Dedicated_Sram``). ``Sram_Only`` decides the NPU's port,
#: not the program's place: the weights' traffic (region 0) goes through the SRAM port (``NPU_REGIONCFG_0=1``)
#: and Vela times it as SRAM; that build sets the second timing adapter to SRAM's latency to match.
MEMORY_MODES = {mode.name: mode for mode in (
    MemoryMode("Sram_Only", "DRAM in ExecuTorch's Corstone build, read through the NPU's SRAM port: Vela times "
               "those reads as SRAM (and reports them as on-chip flash); the program's bytes need not be in SRAM "
               "where that port reaches DRAM or flash, as on Corstone, and must be where it reaches only SRAM",
               "SRAM"),
    MemoryMode("Shared_Sram", "flash or DRAM on the NPU's second port, read only: the program's bytes can stay in "
               "flash", "SRAM, shared with the CPU"),
    MemoryMode("Dedicated_Sram", "flash or DRAM on the NPU's second port: the program's bytes can stay there",
               "DRAM on the NPU's second port", "SRAM dedicated to the NPU",
               "provided by the firmware (ethosu_fast_scratch, ethosu_fast_scratch_size)"),
)}

#: columns of ``Pte.delegates``: one row per delegate of every method
DELEGATE_COLUMNS = ("method", "delegate", "backend", "stored", "blob_bytes", "target", "memory_mode",
                    "command_bytes", "weight_bytes", "scratch_bytes", "scratch_from", "scratch_lives",
                    "inputs", "outputs", "problem")


@dataclass(frozen=True)
class DelegatePart:
    """One part of what a delegate needs at run time."""

    part: str
    #: None: the file does not say
    bytes: int | None
    #: what says so: "delegate blob", "named data", or why nothing does
    source: str
    #: how the runtime gets it
    allocator: str
    #: where the memory mode needs it (None: the file does not say which mode)
    lives: str | None


@dataclass(frozen=True)
class DelegateMemory:
    """What one delegate's blob declares about memory (Ethos-U: a Vela bin stream)."""

    method: str
    index: int
    backend: str
    location: str  # "inline" | "segment"
    #: where the blob starts in the program's bytes, and its bytes
    offset: int
    blob_bytes: int
    #: from the compile specs (``target``, Vela's ``--accelerator-config``, ``--system-config``,
    #: ``--memory-mode``); None where they do not say
    target: str | None = None
    system_config: str | None = None
    memory_mode: str | None = None
    #: the stream, when pte_lab reads this backend's blobs and could read this one
    stream: VelaStream | None = None
    #: why the blob was not read (None: read, or a backend pte_lab does not read)
    unread: str | None = None
    #: named data of external blocks: block -> (key, bytes or None where the key is nowhere given)
    external: tuple[tuple[str, str, int | None], ...] = ()
    #: what another backend's blob and compile specs say (Core ML, XNNPACK: ``pte_lab.model.backends``); None: not read
    contents: BlobContents | None = None

    @property
    def reads_blob(self) -> bool:
        """pte_lab knows this backend's blob format."""
        return self.backend in BACKENDS

    @property
    def settings(self) -> str:
        """What Vela compiled for, as the views say it: ``ethos-u55-128, Shared_Sram``; for an Ethos-U delegate
        whose compile specs lack one, that it is not recorded (other backends: what they say, or "")."""
        if not self.reads_blob:
            said = [x for x in (self.target, self.memory_mode) if x]
            if self.contents is not None:
                said += [f"{s.what} {s.value}" + (" (the backend's default)" if s.source is SettingSource.DEFAULT
                                                   else "")
                         for s in self.contents.settings if s.what in HEADLINE_SETTINGS]
            return ", ".join(said)
        return (f"{self.target or 'target ' + NOT_RECORDED}, "
                f"{self.memory_mode or 'memory mode ' + NOT_RECORDED}")

    def _block_bytes(self, block: str, declared: int | None) -> int | None:
        """A block's bytes: its payload's, or for an external block its named data's (None: nowhere given)."""
        if declared is None or block not in self.stream.external:
            return declared
        return next((n for b, _, n in self.external if b == block), None)

    @property
    def command_bytes(self) -> int | None:
        return None if self.stream is None else self._block_bytes("cmd_data", self.stream.command_bytes)

    @property
    def weight_bytes(self) -> int | None:
        return None if self.stream is None else self._block_bytes("weight_data", self.stream.weight_bytes)

    @property
    def scratch_bytes(self) -> int | None:
        """Bytes of scratch the backend needs at every execute (from the temp allocator since ExecuTorch 0.7)."""
        s = self.stream
        if s is None:
            return None
        return s.scratch_bytes if s.scratch_bytes is not None else s.legacy_scratch_bytes

    @property
    def scratch_from(self) -> str | None:
        """The allocator the scratch comes from: the temp allocator, or the program's bytes (before 0.7)."""
        s = self.stream
        if s is None:
            return None
        if s.scratch_bytes is not None:
            return TEMP_ALLOCATOR
        if s.legacy_scratch_bytes is not None:
            return IN_BLOB
        return TEMP_ALLOCATOR  # no scratch_size block: the runtime asks the temp allocator for 0 bytes

    @property
    def temp_bytes(self) -> int:
        """What this delegate takes from the temp allocator at an execute (0 with no scratch_size block)."""
        s = self.stream
        return (s.scratch_bytes or 0) if s is not None else 0

    @property
    def placement(self) -> MemoryMode | None:
        """The memory mode Vela compiled for (its family: ``Dedicated_Sram_384KB`` is ``Dedicated_Sram``)
        with where each part lives in it; None when the mode is not known."""
        return MEMORY_MODES.get(_mode_family(self.memory_mode))

    @property
    def scratch_lives(self) -> str | None:
        """Where the memory mode needs the scratch (None: the blob was not read, or the mode is not known)."""
        mode = self.placement
        return mode.scratch if self.stream is not None and mode is not None else None

    @property
    def places(self) -> tuple[str | None, str | None, str | None]:
        """(program bytes, scratch, fast scratch) places of :attr:`placement`, to unpack; Nones when it is not
        known."""
        mode = self.placement
        return (None, None, None) if mode is None else (mode.program, mode.scratch, mode.fast_scratch_text)

    @property
    def program_in_ram(self) -> bool | None:
        """The program's bytes must be in writable RAM, not flash: the NPU works in a scratch block of the blob
        (before ExecuTorch 0.7); False when the blob is read and the mode is known (no memory mode needs them in
        RAM: see :data:`MEMORY_MODES`); None when neither is known."""
        if self.scratch_from == IN_BLOB:
            return True
        return None if self.placement is None else False

    @property
    def program_in_ram_why(self) -> str | None:
        """Why the program's bytes must be in RAM (not flash) for this delegate to run (see :attr:`program_in_ram`);
        None: they may stay in flash, or the blob or the memory mode is not known."""
        return "the NPU writes its scratch inside the program's bytes" if self.scratch_from == IN_BLOB else None

    @property
    def fast_scratch_limit(self) -> int | None:
        """The fast scratch Vela may use, from the mode's name (``Dedicated_Sram_384KB``: 384 KiB)."""
        m = re.fullmatch(r"Dedicated_Sram_(\d+)KB", self.memory_mode or "")
        return int(m.group(1)) * 1024 if m else None

    def parts(self) -> tuple[DelegatePart, ...]:
        """Command stream, weights, scratch and (Dedicated_Sram) fast scratch: bytes, source, allocator, place."""
        s = self.stream
        if s is None:
            return ()
        program, scratch, fast = self.places
        out = []
        for part, block, declared, n in (("command stream", "cmd_data", s.command_bytes, self.command_bytes),
                                         ("weights", "weight_data", s.weight_bytes, self.weight_bytes)):
            if declared is None:
                continue
            if block in s.external:
                out.append(DelegatePart(part, n, "named data" if n is not None else "named data (not given)",
                                        f"read in place from named data {s.external[block][:12]}...", program))
            else:
                out.append(DelegatePart(part, n, "delegate blob", "read in place from the program's bytes", program))
        if s.scratch_bytes is not None:
            out.append(DelegatePart("scratch", s.scratch_bytes, "delegate blob",
                                    f"{TEMP_ALLOCATOR}, at every execute ({SCRATCH_ALIGNMENT}-byte aligned); "
                                    f"the inputs are copied in, the outputs out", scratch))
        elif s.legacy_scratch_bytes is not None:
            out.append(DelegatePart("scratch", s.legacy_scratch_bytes, "delegate blob",
                                    f"{IN_BLOB}, which the NPU works in at every execute: the program must be in "
                                    f"memory the NPU can write ({s.written_by}'s layout)", scratch))
        if fast is not None:
            limit = self.fast_scratch_limit
            out.append(DelegatePart("fast scratch", limit,
                                    "memory mode's name (the most Vela may use)" if limit else
                                    "size not in the file (Vela prints it as its SRAM use)",
                                    "the firmware's ethosu_fast_scratch", fast))
        return tuple(out)

    @property
    def problem(self) -> str | None:
        """What stops ExecuTorch's reader first (None: nothing), or why the blob was not read."""
        if self.unread:
            return self.unread
        return self.stream.problems[0] if self.stream is not None and self.stream.problems else None


def _mode_family(mode: str | None) -> str | None:
    if mode is None:
        return None
    return next((k for k in MEMORY_MODES if mode == k or mode.startswith(k + "_")), mode)


_FLAG = re.compile(r"--(accelerator-config|system-config|memory-mode)=(\S+)")


def memory_mode_of(compile_specs: dict) -> tuple[str | None, str | None, str | None]:
    """(target, system config, memory mode) from an Arm delegate's compile specs (Vela's flags in
    ``compile_flags``, the target also in ``target``); Nones where they do not say."""
    flags = compile_specs.get("compile_flags")
    found = dict(_FLAG.findall(flags)) if isinstance(flags, str) else {}
    target = compile_specs.get("target")
    target = target if isinstance(target, str) else found.get("accelerator-config")
    return target, found.get("system-config"), found.get("memory-mode")


class Blobs:
    """Reads a program's delegate blobs and named data on demand (see ``pte_lab.format.blobs``); each Vela
    stream is read once (:meth:`vela`), for the check of its format and for what it declares about memory alike."""

    def __init__(self, raw: RawProgram, path: str | None, data: "DataFile | None" = None):
        self.raw, self.path, self.data = raw, path, data
        self._read: Callable[[int, int], bytes] | None = program_reader(raw, path)
        #: (offset, bytes, backend) -> the stream read there: one read per distinct blob, however many ask
        self._streams: dict[tuple[int, int, str], VelaStream] = {}

    @property
    def read(self) -> Callable[[int, int], bytes] | None:
        """``read(offset, n)`` of the program's bytes (``pte_lab.format.blobs.program_reader``); None when
        they are not available (opened from a stream that is gone)."""
        return self._read

    def held(self):
        """A block inside which the program's file is opened once, at its first read (see
        ``pte_lab.format.blobs.held_open``)."""
        return held_open(self._read)

    def vela(self, offset: int, size: int, backend: str) -> VelaStream:
        """The Vela stream of the ``size``-byte blob at ``offset`` (checked with ``backend``'s rules), read the
        first time it is asked for (a small blob in one read). Raises :class:`~pte_lab.errors.PteLabError` when the
        bytes cannot be read (nothing is kept then), and when the program's bytes are not available."""
        key = (offset, size, backend)
        stream = self._streams.get(key)
        if stream is None:
            if self._read is None:
                raise PteLabError("the program's bytes are not available: open it from a path or bytes")
            stream = self._streams[key] = read_vela(blob_reader(self._read, offset, size), size, offset, backend)
        return stream

    def named_bytes(self, key: str) -> int | None:
        """Bytes of named data ``key``: the program's own, else the attached ``.ptd``'s (None: nowhere)."""
        span = named_data_span(self.raw, key)
        if span is not None:
            return span[1]
        if self.data is not None:
            t = self.data.tensor(key)
            return None if t is None else t.nbytes
        return None

    def delegate(self, plan: RawPlan, i: int, specs: dict) -> DelegateMemory:
        d = plan.delegates[i]
        offset, size = delegate_span(self.raw, d)
        if d.id not in BACKENDS:  # made once (dataclasses.replace costs more than the record)
            return DelegateMemory(plan.name, i, d.id, d.location, offset, size, None, None, None,
                                  contents=blob_contents(d.id, specs, self._read, offset, size))
        said = (plan.name, i, d.id, d.location, offset, size, *memory_mode_of(specs))
        if self._read is None:
            return DelegateMemory(*said, unread="the blob was not read: the program was opened from a stream "
                                                "that is gone (open it from a path or bytes)")
        try:
            stream = self.vela(offset, size, d.id)
        except PteLabError as exc:
            return DelegateMemory(*said, unread=f"the blob was not read: {exc}")
        ext = tuple((block, key, self.named_bytes(key)) for block, key in stream.external.items())
        return DelegateMemory(*said, stream=stream, external=ext)


def delegate_memory(plan: RawPlan, blobs: Blobs | None, specs: list[dict]) -> list[DelegateMemory]:
    """One :class:`DelegateMemory` per delegate of ``plan`` (``specs``: each delegate's decoded compile specs)."""
    if blobs is not None:
        with blobs.held():  # one open for every blob read here
            return [blobs.delegate(plan, i, specs[i]) for i in range(len(plan.delegates))]
    out = []
    for i, d in enumerate(plan.delegates):
        target, system, mode = memory_mode_of(specs[i]) if d.id in BACKENDS else (None, None, None)
        out.append(DelegateMemory(plan.name, i, d.id, d.location, -1, d.size, target, system, mode,
                                  unread=None if d.id not in BACKENDS else "the blob was not read: no program "
                                  "bytes were given"))
    return out


# ---------------------------------------------------------------- descriptors against the plan's tensors
#: the tensor types EthosUBackend copies for each element size (EthosUBackend.cpp, execute)
IO_TYPES = {ScalarType.INT: 4, ScalarType.CHAR: 1, ScalarType.BYTE: 1, ScalarType.SHORT: 2, ScalarType.BOOL: 1}


@dataclass(frozen=True)
class IOCheck:
    """One delegate call's argument against Vela's descriptor for it."""

    delegate: int
    instruction: int
    direction: str  # "input" | "output"
    position: int
    value: int | None
    dtype: str | None
    count: int | None
    nbytes: int | None
    io: VelaIO | None
    #: what ExecuTorch's backend does wrong or refuses with this pairing (None: it takes it)
    refusal: str | None


def io_refusal(direction: str, scalar_type: int | None, count: int, nbytes: int, io: VelaIO,
               scratch: int) -> str | None:
    """What ``EthosUBackend::execute`` (ExecuTorch 1.5) does with a tensor against its descriptor: None when it
    copies it, else why it refuses (InvalidProgram) or reads/writes outside the scratch."""
    name = SCALAR_TYPES.get(scalar_type, (f"type {scalar_type}", 0))[0]
    if direction == "input":
        if IO_TYPES.get(scalar_type) != io.elem_size:
            return (f"the tensor is {name} but Vela expects {io.elem_size}-byte elements: the backend takes "
                    f"int8/uint8/bool for 1, int16 for 2, int32 for 4 and refuses the rest")
        if io.offset < 0 or io.offset + nbytes > scratch:
            return (f"its {nbytes:,} bytes copied to scratch offset {io.offset:,} end past the {scratch:,}-byte "
                    f"scratch: the backend would write outside it")
        if count != io.count:
            return (f"the tensor has {plural(count, 'element')} but Vela's descriptor {list(io.shape)} has "
                    f"{io.count:,}")
        return None
    if io.offset < 0 or io.offset + io.nbytes > scratch:
        return (f"Vela's {io.nbytes:,} bytes at scratch offset {io.offset:,} end past the {scratch:,}-byte scratch: "
                f"the backend would read outside it")
    if nbytes == io.nbytes:
        return None
    # copy_with_layout_adjustment: rows of the last dimension, padded by Vela or packed 4-bit
    if io.elem_size == 0:
        return "Vela's descriptor has a zero element size"
    chunks = 1
    for d in io.shape[:-1]:
        chunks *= d or 1
    vela_chunk = (io.shape[-1] or 1) * io.elem_size
    if chunks == 0 or nbytes % chunks:
        return f"the tensor's {plural(nbytes, 'byte')} do not split into Vela's {plural(chunks, 'row')}"
    chunk = nbytes // chunks
    if vela_chunk < chunk and not (chunk == 2 * vela_chunk and io.elem_size == 1 and scalar_type == ScalarType.CHAR):
        return (f"the tensor's rows of {chunk:,} bytes are larger than Vela's {vela_chunk:,} and are not packed "
                f"int4 unpacked to int8")
    return None


_CALLS: list = [None, None]  # the last plan asked about, and its calls by delegate (asked delegate by delegate)


def _delegate_calls(plan: RawPlan) -> dict[int, list[int]]:
    """delegate index -> the instructions calling it, in one pass over the plan."""
    if _CALLS[0] is not plan:
        calls: dict[int, list[int]] = {}
        for k, ins in enumerate(plan.instructions):
            if ins.kind == InstructionKind.DELEGATE_CALL:
                calls.setdefault(ins.target, []).append(k)
        _CALLS[:] = [plan, calls]
    return _CALLS[1]


def io_checks(plan: RawPlan, d: DelegateMemory) -> list[IOCheck]:
    """Every distinct call of delegate ``d`` (calls with the same arguments are checked once, at the first):
    each argument against its Vela descriptor (empty: no descriptors). A call with fewer arguments than
    descriptors is one check, at the first descriptor it lacks."""
    s = d.stream
    if s is None or s.inputs is None or s.outputs is None:
        return []
    scratch = d.scratch_bytes or 0
    out = []
    done: set[tuple[int, ...]] = set()  # each distinct call (its arguments) checked once, where first made
    meta: dict[int, tuple] = {}  # per distinct value record: (tensor, dtype, bytes, elements)
    for k in _delegate_calls(plan).get(d.index, ()):
        args = plan.instructions[k].args
        if args in done:
            continue
        done.add(args)
        for direction, ios, base in (("input", s.inputs, 0), ("output", s.outputs, len(s.inputs))):
            for pos, io in enumerate(ios):
                at = base + pos
                if at >= len(args):  # said once per call, at the first descriptor without its argument
                    out.append(IOCheck(d.index, k, direction, pos, None, None, None, None, io,
                                       f"the call passes {plural(len(args), 'argument')}, but Vela describes "
                                       f"{plural(len(s.inputs), 'input')} and {plural(len(s.outputs), 'output')}"))
                    break
                v = args[at]
                val = plan.values[v]
                if val.tensor is None:
                    out.append(IOCheck(d.index, k, direction, pos, v, None, None, None, io,
                                       f"argument v{v} is a {val.kind}, not a tensor: the backend aborts"))
                    continue
                r = int(plan.record_of[v])
                got = meta.get(r)
                if got is None:
                    t, dtype, nb = tensor_meta(plan, v)
                    count = 1
                    for n in t.sizes:
                        count *= n
                    got = meta[r] = (t, dtype, nb, count)
                t, dtype, nb, count = got
                out.append(IOCheck(d.index, k, direction, pos, v, dtype, count, nb, io,
                                   io_refusal(direction, t.scalar_type, count, nb, io, scratch)))
            else:
                continue
            break
    return out


def describe_io(io: VelaIO) -> str:
    """``[1, 3, 16, 16] x1 B @768`` (the shape with leading 1s dropped, element size, scratch offset)."""
    shape = list(io.shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return f"{shape} x{io.elem_size} B @{io.offset:,}"


