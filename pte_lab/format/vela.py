"""Arm's Vela bin stream: the blob of ExecuTorch's ``EthosUBackend``, read with ExecuTorch's rules and checks.

Vela compiles a TOSA graph for an Ethos-U NPU; ExecuTorch's Arm flow
(``backends/arm/arm_vela.py``) packs the result into named blocks, and the
runtime (``backends/arm/runtime/VelaBinStream.cpp``) reads them back at
``init``. Each block is a 32-byte header (a 16-byte name, NUL padded; a
``uint32`` payload size, unpadded; one ``external`` byte; 11 reserved bytes)
and its payload padded to 16 bytes::

    vela_bin_stream   (empty)             must come first
    cmd_data          the command stream  starts with "COP1" or "COP2"
    weight_data       weights and biases  read by the NPU in place
    scratch_size      uint32              bytes the backend takes from the temp allocator at every execute
    inputs, outputs   int32 count, then per tensor int32 shape[6], elem_size, offset, region
    vela_end_stream   (empty)             must end the blob exactly

An ``external`` block's payload is a 64-character key into the program's named
data (ExecuTorch 1.5: ``VelaExternalBlockPlacements``).

Older Arm flows wrote other layouts (read from ExecuTorch's history; see
``docs/ethos-u-layouts.md``), and each runtime reads only its own:

* ExecuTorch 0.2 to 0.5 name the backend ``ArmBackend``; ExecuTorch 0.6 and later ``EthosUBackend``.
* Before 0.7 the scratch itself is a ``scratch_data`` block of zeros, and the NPU works in it, in the
  program's bytes; 0.7 and later write ``scratch_size`` and refuse ``scratch_data``.
* Before 1.0 a descriptor's shape has 4 dimensions (28 bytes a descriptor), from 1.0 on 6 (40 bytes).
* ``ArmBackend``'s reader takes only ``COP1`` command streams, and no ``external`` byte (12 zero bytes).

:func:`read_vela` reads a stream with the rules of the runtime its backend id names
(:data:`READERS`): an ``ArmBackend`` stream as ExecuTorch 0.5 reads it, an ``EthosUBackend`` stream as
ExecuTorch 1.5 does. Descriptors are read at the width their block's size shows, so an older stream's
inputs and outputs are read right even where the runtime named would misread them (a problem says so).

:func:`read_vela` never raises on a malformed stream: what ExecuTorch's
reader would refuse, or read outside the blob for, is listed in
:attr:`VelaStream.problems`, the first being what stops the runtime. It reads
block headers and the small blocks only (never the weights or the command
stream beyond its magic), at most :data:`MAX_BLOCKS` of them, so its work is
bounded whatever the blob claims, and its memory by the blob's size.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from collections.abc import Callable

from ..units import align_up

__all__ = ["read_vela", "VelaStream", "VelaBlock", "VelaIO", "VelaReader", "READERS", "BACKEND", "LEGACY_BACKEND",
           "BACKENDS", "BLOCK_HEADER_BYTES", "STREAM_ALIGNMENT", "SHAPE_DIMS", "LEGACY_SHAPE_DIMS", "IO_BYTES",
           "EXTERNAL_KEY_BYTES", "MAX_BLOCKS"]

#: the backend id whose blobs are Vela bin streams (ExecuTorch 0.6 and later); what pte_lab knows of the backend
#: is its registration, ``pte_lab.model.backends.ETHOS_U``
BACKEND = "EthosUBackend"
#: the same backend's id in ExecuTorch 0.2 to 0.5 (``ArmBackendEthosU.cpp``; registered as
#: ``pte_lab.model.backends.ARM_LEGACY``)
LEGACY_BACKEND = "ArmBackend"
#: every backend id whose blobs are Vela bin streams
BACKENDS = (BACKEND, LEGACY_BACKEND)
#: name (16), size (uint32), external (uint8), reserved (11)
_HEADER = struct.Struct("<16sIB11s")
BLOCK_HEADER_BYTES = _HEADER.size
#: blocks start, and the blob must start and end, on 16-byte boundaries (the runtime checks the pointers)
STREAM_ALIGNMENT = 16
#: a Vela I/O descriptor: shape[6], elem_size, offset, region (int32 each)
SHAPE_DIMS = 6
_IO = struct.Struct(f"<{SHAPE_DIMS}iiii")
IO_BYTES = _IO.size
#: dimensions of a descriptor's shape before ExecuTorch 1.0
LEGACY_SHAPE_DIMS = 4
_IOS = {SHAPE_DIMS: _IO, LEGACY_SHAPE_DIMS: struct.Struct(f"<{LEGACY_SHAPE_DIMS}iiii")}
_COUNT = struct.Struct("<i")
_U32 = struct.Struct("<I")
#: an external block's payload: the hex SHA-256 key of its named data
EXTERNAL_KEY_BYTES = 64
EXTERNAL_REFERENCE = 1
START, END = "vela_bin_stream", "vela_end_stream"
#: the names ExecuTorch's reader takes, in the order it tries them (a name matches by prefix, as strncmp does)
READ_BLOCKS = (START, "cmd_data", "weight_data", "scratch_size", "inputs", "outputs", END)
#: what Vela's command stream starts with (the driver's magic)
COMMAND_MAGICS = (b"COP1", b"COP2")
#: the scratch as a block of zeros: streams written before ExecuTorch 0.7 (#10714); later runtimes refuse it
LEGACY_SCRATCH = "scratch_data"
#: pte_lab stops walking after this many blocks (Vela writes seven)
MAX_BLOCKS = 256


@dataclass(frozen=True)
class VelaReader:
    """What one runtime's ``vela_bin_read`` takes: the rules :func:`read_vela` checks a stream with."""

    backend: str
    #: the ExecuTorch releases whose reader this is, in words
    executorch: str
    #: block names it takes, in the order it tries them (a name matches by prefix, as strncmp does)
    blocks: tuple[str, ...]
    #: the scratch's block: "scratch_size" (a uint32) or "scratch_data" (the scratch itself)
    scratch_block: str
    #: dimensions of a descriptor's shape it reads
    shape_dims: int
    command_magics: tuple[bytes, ...]
    #: it reads the header's ``external`` byte (older readers ignore those 12 bytes)
    external: bool


#: backend id -> the reader of the ExecuTorch runtime that registers it (the newest of each)
READERS = {
    BACKEND: VelaReader(BACKEND, "ExecuTorch 1.5", READ_BLOCKS, "scratch_size", SHAPE_DIMS, COMMAND_MAGICS, True),
    LEGACY_BACKEND: VelaReader(LEGACY_BACKEND, f"ExecuTorch 0.5 ({LEGACY_BACKEND}, 0.2 to 0.5)",
                               (START, "cmd_data", "weight_data", LEGACY_SCRATCH, "inputs", "outputs", END),
                               LEGACY_SCRATCH, LEGACY_SHAPE_DIMS, (b"COP1",), False),
}


@dataclass(frozen=True)
class VelaBlock:
    """One block of an Ethos-U (Vela) delegate blob: its name, offset and declared bytes, or the named-data key
    it points to."""
    #: the name as stored, up to its first NUL
    name: str
    #: where its header starts in the blob
    offset: int
    #: the payload's declared (unpadded) bytes
    size: int
    #: the payload is a key into the program's named data, not the data
    external: bool = False
    key: str | None = None


@dataclass(frozen=True)
class VelaIO:
    """One input or output of the NPU's graph, as Vela describes it (``VelaIO`` in VelaBinStream.h)."""

    shape: tuple[int, ...]
    #: bytes per element the NPU reads or writes
    elem_size: int
    #: where it sits in the scratch
    offset: int
    #: the NPU memory region it belongs to (1: the scratch)
    region: int

    @property
    def count(self) -> int:
        """Elements, as the runtime counts them: the product of all six dimensions."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.count * self.elem_size


@dataclass(frozen=True)
class VelaStream:
    """What a Vela bin stream declares, and what ExecuTorch's reader would refuse in it."""

    #: the blob's bytes
    size: int
    blocks: tuple[VelaBlock, ...]
    #: the command stream's and the weights' bytes (None: no such block)
    command_bytes: int | None = None
    weight_bytes: int | None = None
    #: bytes the backend takes from the temp allocator at every execute (None: no scratch_size block)
    scratch_bytes: int | None = None
    #: bytes of scratch stored in the blob itself (the pre-0.7 ``scratch_data`` block; None without one)
    legacy_scratch_bytes: int | None = None
    inputs: tuple[VelaIO, ...] | None = None
    outputs: tuple[VelaIO, ...] | None = None
    #: block name -> named-data key, for blocks stored outside the blob
    external: dict = field(default_factory=dict)
    #: what ExecuTorch's reader refuses or would read outside the blob for, in the order it meets them
    problems: tuple[str, ...] = ()
    #: the backend whose runtime's rules the stream was checked with (:data:`READERS`)
    backend: str = BACKEND
    #: dimensions of the descriptors' shapes, as their blocks' sizes show (None: no descriptor read)
    shape_dims: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def scratch_in_blob(self) -> bool:
        """The scratch is a block of the blob (before ExecuTorch 0.7): the NPU works in the program's bytes."""
        return self.scratch_bytes is None and self.legacy_scratch_bytes is not None

    @property
    def written_by(self) -> str:
        """Which Arm flow wrote this layout, from what it holds."""
        if self.backend == LEGACY_BACKEND:
            return "ExecuTorch 0.2 to 0.5"
        if self.scratch_in_blob:
            return "ExecuTorch 0.6"
        if self.shape_dims == LEGACY_SHAPE_DIMS:
            return "ExecuTorch 0.7"
        return "ExecuTorch 1.0 or later"


def _name(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def _padded(n: int) -> int:
    return align_up(n, STREAM_ALIGNMENT)


def _ios(payload: bytes, what: str, problems: list[str], reader: VelaReader) -> tuple[tuple[VelaIO, ...] | None,
                                                                                   int | None]:
    """(descriptors, their shapes' dimensions): at the width the block's size shows when it fits the other
    layout's exactly and not the reader's, else at the reader's."""
    if len(payload) < _COUNT.size:
        problems.append(f"the {what} block holds {len(payload)} bytes, less than its 4-byte count")
        return None, None
    (count,) = _COUNT.unpack_from(payload, 0)
    dims = reader.shape_dims
    exact = {d: _COUNT.size + count * st.size for d, st in _IOS.items()}
    if count > 0 and len(payload) != exact[dims]:
        other = next((d for d in _IOS if d != dims and len(payload) == exact[d]), None)
        if other is not None:
            problems.append(f"the {what} block holds {count} descriptors of {other} dimensions "
                            f"({_IOS[other].size} bytes each, as ExecuTorch "
                            f"{'before 1.0' if other == LEGACY_SHAPE_DIMS else '1.0 and later'} writes them), but "
                            f"{reader.executorch}'s {reader.backend} reads {dims} ({_IOS[dims].size} bytes): it "
                            f"would misread the shapes and offsets")
            dims = other
    st = _IOS[dims]
    room = (len(payload) - _COUNT.size) // st.size
    if not 0 <= count <= room:
        problems.append(f"the {what} block claims {count} descriptors but holds room for {room} "
                        f"({len(payload)} bytes): the runtime would read past it")
        count = max(0, min(count, room))
    out = []
    for i in range(count):
        vals = st.unpack_from(payload, _COUNT.size + i * st.size)
        out.append(VelaIO(tuple(vals[:dims]), *vals[dims:]))
    return tuple(out), dims


def read_vela(read: Callable[[int, int], bytes], size: int, file_offset: int | None = None,
              backend: str = BACKEND) -> VelaStream:
    """Read a Vela bin stream of ``size`` bytes through ``read(offset, n)`` (offsets within the blob).

    ``file_offset`` is where the blob starts in the program's bytes: ExecuTorch
    refuses a blob whose address is not 16-byte aligned, and a program loaded at
    an aligned address puts it at that offset. ``backend``: the delegate's id,
    whose runtime's rules the stream is checked with (:data:`READERS`; an unknown
    id is checked as ``EthosUBackend``). Never raises for what the stream holds:
    problems are listed in the result.
    """
    reader = READERS.get(backend, READERS[BACKEND])
    problems: list[str] = []

    def get(off: int, n: int) -> bytes:
        n = max(0, min(n, size - off))
        got = read(off, n) if n else b""
        return got if len(got) == n else got + b"\0" * (n - len(got))

    # what vela_bin_validate checks (all of it, as the runtime logs each)
    if file_offset is not None and file_offset % STREAM_ALIGNMENT:
        problems.append(f"the blob starts at byte {file_offset} of the program, not on a 16-byte boundary: "
                        f"the runtime refuses a stream whose address is not 16-byte aligned")
    if size < BLOCK_HEADER_BYTES:
        problems.append(f"the blob is {size} bytes, shorter than one {BLOCK_HEADER_BYTES}-byte block header: "
                        f"the runtime would read before its start looking for the footer")
        return VelaStream(size, (), problems=tuple(problems), backend=reader.backend)
    if size % STREAM_ALIGNMENT:
        problems.append(f"the blob is {size} bytes, not a multiple of 16: its last block is not 16-byte aligned")
    if not _name(get(0, 16)).startswith(START):
        problems.append(f"the blob does not start with {START!r} (it starts with {_name(get(0, 16))!r})")
    foot = size - BLOCK_HEADER_BYTES
    if not _name(get(foot, 16)).startswith(END):
        problems.append(f"the blob's last {BLOCK_HEADER_BYTES} bytes are not the {END!r} footer")

    blocks: list[VelaBlock] = []
    facts: dict = {"inputs": None, "outputs": None, "dims": None}
    external: dict[str, str] = {}
    pos = 0
    while pos < size:
        if len(blocks) >= MAX_BLOCKS:
            problems.append(f"more than {MAX_BLOCKS} blocks (Vela writes 7): pte_lab stopped reading at byte {pos}")
            break
        if pos + BLOCK_HEADER_BYTES > size:
            problems.append(f"a block header at byte {pos} runs past the end of the {size}-byte blob")
            break
        raw_name, bsize, ext, _ = _HEADER.unpack(get(pos, BLOCK_HEADER_BYTES))
        if not reader.external:
            ext = 0  # the older reader ignores the 12 bytes after the size
        name = _name(raw_name)
        data_at = pos + BLOCK_HEADER_BYTES
        nxt = data_at + _padded(bsize)
        if data_at + bsize > size:
            problems.append(f"block {name!r} at byte {pos} declares {bsize:,} bytes, past the end of the "
                            f"{size:,}-byte blob: the runtime would read outside it")
            blocks.append(VelaBlock(name, pos, bsize, ext == EXTERNAL_REFERENCE))
            break
        key = None
        if ext == EXTERNAL_REFERENCE:
            key = get(data_at, bsize).decode("ascii", "replace")
            if bsize != EXTERNAL_KEY_BYTES:
                problems.append(f"external block {name!r} at byte {pos} holds a {bsize}-byte key, not "
                                f"{EXTERNAL_KEY_BYTES}: the runtime refuses it")
        blocks.append(VelaBlock(name, pos, bsize, ext == EXTERNAL_REFERENCE, key))
        # a name the reader takes exactly is that block (no name it takes starts another), else the first it starts
        kind = name if name in reader.blocks else next((k for k in reader.blocks if name.startswith(k)), None)
        if key is not None and kind is not None:
            external[kind] = key
        if kind == START:
            if pos != 0:
                problems.append(f"{START!r} appears again at byte {pos}: the runtime expects it first only")
        elif kind == "cmd_data":
            facts["command_bytes"] = bsize
            if key is None and bsize < 4:
                problems.append(f"the command stream is {bsize} bytes, too short for its 4-byte magic")
            elif key is None and get(data_at, 4) not in reader.command_magics:
                problems.append(f"the command stream starts with {get(data_at, 4)!r}, not "
                                f"{' or '.join(m.decode() for m in reader.command_magics)}: the runtime refuses it")
        elif kind == "weight_data":
            facts["weight_bytes"] = bsize
        elif kind == "scratch_size":
            if key is not None or bsize < _U32.size:
                problems.append(f"the scratch_size block holds {bsize} bytes"
                                + (" stored outside the blob" if key is not None else "")
                                + ", not a 4-byte size: the runtime would read past it")
            else:
                facts["scratch_bytes"] = _U32.unpack(get(data_at, 4))[0]
        elif kind in ("inputs", "outputs"):
            if key is not None:
                problems.append(f"the {kind} block is stored outside the blob: Vela never does that")
            else:
                facts[kind], dims = _ios(get(data_at, bsize), kind, problems, reader)
                facts["dims"] = facts["dims"] or dims
        elif kind == END:
            if nxt != size:
                problems.append(f"{END!r} at byte {pos} is followed by {size - nxt:,} more bytes: the runtime "
                                f"expects it to end the blob")
            break
        elif kind == LEGACY_SCRATCH:  # the scratch itself: what ArmBackend's reader takes
            facts["legacy_scratch_bytes"] = bsize
        elif name.startswith(LEGACY_SCRATCH):
            facts["legacy_scratch_bytes"] = bsize
            problems.append(f"a {LEGACY_SCRATCH!r} block of {bsize:,} bytes: the scratch stored in the program, "
                            f"as ExecuTorch wrote it before 0.7; ExecuTorch 0.7 and later refuse the block "
                            f"(they read 'scratch_size' and take the scratch from the temp allocator)")
        else:
            problems.append(f"unknown block {name!r} at byte {pos}: the runtime refuses it"
                            + (f" ({reader.executorch}'s {reader.backend} reads {reader.scratch_block}, "
                               f"not {name})" if name.startswith("scratch_") else ""))
            break
        pos = nxt
    else:
        problems.append(f"the stream ends without a {END!r} block")
    return VelaStream(size, tuple(blocks), facts.get("command_bytes"), facts.get("weight_bytes"),
                      facts.get("scratch_bytes"), facts.get("legacy_scratch_bytes"), facts["inputs"],
                      facts["outputs"], external, tuple(problems), reader.backend, facts["dims"])
