"""ExecuTorch's native program packages (``.ptn``, 1.5.1's ``executorch.exir.native.to_native(...).save``).

A ``.ptn`` is a ZIP archive of fixed members (``exir/_serialize/_ptn.py`` of ExecuTorch), written uncompressed:

``program.ptg``
    the native program, a flatbuffer with file identifier ``NPTG``
    (``backends/native/serialization/native_graph.fbs``): per method, its graph (nodes in topological order,
    the user inputs and outputs by name, each value's dtype and shape as a range of dimensions), its constants
    (a placeholder bound to a data key), what each output is (a result, or a write back into a buffer) and
    its mutable buffers (state with no bytes in the file, zero-initialised at load)
``program.safetensors``
    the constants' bytes (safetensors: an 8-byte header length, a JSON header, the data); byte-identical
    immutable constants are stored once; absent when the program has none
``aliases.json``
    duplicate data key -> the key whose bytes it shares, only when constants repeat

No memory plan is in the file: the native runtime plans from each dimension's upper bound when it loads one
(``Dim``'s comment in ``native_graph.fbs``).

What is read: the ZIP's central directory (through :mod:`zipfile`, nothing extracted), each member's local
header, ``program.ptg`` and ``aliases.json`` whole (their CRC checked), and the safetensors header; the
constants' bytes are located and sized, never read. Every member must be stored as it is (uncompressed, as
ExecuTorch writes it), lie inside the file and apart from the others, and be named without a path
(no ``..``, no leading ``/``, no ``\\``): a package that breaks one of these is refused with
:class:`~pte_lab.errors.PackageError`, one line. No decompression is done, so no ZIP bomb can inflate.

Slot numbers follow ``native_graph.fbs`` (a union takes two slots: its type, then its value); ``FIELDS``
lists, per table read, its fields in the schema's order (``tests/test_ptn.py`` checks them against the installed
ExecuTorch's schema)::

    Program { version: string; methods: [Method] }
    Method { name: string; graph: Graph; constants: [NamedTensorRef]; output_specs: [OutputSpec];
             mutable_buffers: [MutableBufferSpec] }
    Graph { nodes: [Node]; inputs: [string]; outputs: [string]; tensor_values: [TensorValue] }
    Node { name: string; op_kind: OpKind; target: string; inputs: [NamedArgument]; outputs: [Output]; ... }
    Output { name: string; alias_of: string; kind: OutputValueKind; names: [string] }
    TensorValue { name: string; meta: TensorMeta }
    TensorMeta { dtype: ScalarType; sizes: [Dim]; dim_order: [int]; quant: QuantSpec }
    Dim { min: long; max: long = -1 }          // max < 0: unbounded
    QuantSpec { scheme: QuantScheme }          // union: AffineGroup = 1, PackedQuant = 2
    NamedTensorRef { name: string; data_key: string; meta: TensorMeta; kind: InputKind; mutated: bool }
    OutputSpec { name: string; kind: OutputKind; target: string }
    MutableBufferSpec { name: string; fqn: string }

Node inputs (the arguments, and the subgraphs of higher-order operators they may hold) are not read. Torch and
executorch are not imported.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from enum import IntEnum
from typing import BinaryIO

from ..errors import PackageError, PteFormatError
from ..printable import printable
from ._flat import Table, root_table
from .regular_file import open_regular
from .schema import ScalarType

__all__ = ["IDENTIFIER", "FIELDS", "PTG_ENTRY", "SAFETENSORS_ENTRY", "ALIASES_ENTRY", "NativeScalarType", "InputKind",
           "OutputKind", "OpKind", "RawPackage", "RawMember", "RawNativeProgram", "RawNativeMethod", "RawMeta",
           "RawQuant", "RawNode", "RawConstantRef", "RawOutputSpec", "RawMutableBuffer", "RawStored",
           "read_package", "decode_native_program", "is_package_names", "SAFETENSORS_DTYPES",
           "executorch_scalar_type"]

IDENTIFIER = b"NPTG"
PTG_ENTRY = "program.ptg"
SAFETENSORS_ENTRY = "program.safetensors"
ALIASES_ENTRY = "aliases.json"
#: the safetensors header's reserved key (free-form string metadata, not a tensor)
_METADATA_KEY = "__metadata__"
#: the largest safetensors header read (the safetensors library's own limit)
MAX_SAFETENSORS_HEADER = 100_000_000
#: the largest aliases.json read (a million aliases take about 60 MB)
MAX_ALIASES_BYTES = 64 << 20
#: the most members a package's directory may list (ExecuTorch writes at most three)
MAX_MEMBERS = 1024
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # zipfile's local file header (30 bytes)
_ADVICE = "save it again with executorch.exir.native.to_native(...).save(path)"


class NativeScalarType(IntEnum):
    """``native_backend.ScalarType`` (``native_graph.fbs``): ExecuTorch's codes up to BFLOAT16, then its own
    (UINT16 is 16 here, 27 in a ``.pte``)."""

    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11
    BFLOAT16 = 15
    UINT16 = 16
    UINT32 = 17
    UINT64 = 18


_TO_EXECUTORCH = {NativeScalarType.UINT16: ScalarType.UINT16, NativeScalarType.UINT32: ScalarType.UINT32,
                  NativeScalarType.UINT64: ScalarType.UINT64}


def executorch_scalar_type(code: int) -> int | None:
    """The :class:`~.schema.ScalarType` a native dtype code stands for (None for a code the schema does not
    define)."""
    try:
        native = NativeScalarType(code)
    except ValueError:
        return None
    return int(_TO_EXECUTORCH.get(native, ScalarType(int(native))))


#: a safetensors dtype code -> the :class:`~.schema.ScalarType` it stores
SAFETENSORS_DTYPES = {
    "F64": ScalarType.DOUBLE, "F32": ScalarType.FLOAT, "F16": ScalarType.HALF, "BF16": ScalarType.BFLOAT16,
    "I64": ScalarType.LONG, "I32": ScalarType.INT, "I16": ScalarType.SHORT, "I8": ScalarType.CHAR,
    "U8": ScalarType.BYTE, "BOOL": ScalarType.BOOL, "C64": ScalarType.COMPLEX64, "U16": ScalarType.UINT16,
    "U32": ScalarType.UINT32, "U64": ScalarType.UINT64, "F8_E4M3": ScalarType.FLOAT8E4M3FN,
    "F8_E5M2": ScalarType.FLOAT8E5M2,
}
#: bytes per element of each safetensors dtype code
_ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
             "C64": 8, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


class OpKind(IntEnum):
    """``Node.op_kind``."""
    CALL_FUNCTION = 0
    PLACEHOLDER = 1
    OUTPUT = 2


class InputKind(IntEnum):
    """``NamedTensorRef.kind``: what a constant placeholder is."""
    USER_INPUT = 0
    PARAMETER = 1
    BUFFER = 2
    CONSTANT_TENSOR = 3


class OutputKind(IntEnum):
    """``OutputSpec.kind``: a result, or a value written back into a buffer or a user input."""
    USER_OUTPUT = 0
    BUFFER_MUTATION = 1
    USER_INPUT_MUTATION = 2


#: per table read, its fields in ``native_graph.fbs``'s order (the slots the reader uses; a union takes two)
FIELDS = {
    "Program": ("version", "methods"),
    "Method": ("name", "graph", "constants", "output_specs", "mutable_buffers"),
    "Graph": ("nodes", "inputs", "outputs", "tensor_values"),
    "Node": ("name", "op_kind", "target", "inputs", "outputs"),
    "Output": ("name", "alias_of", "kind", "names"),
    "TensorValue": ("name", "meta"),
    "TensorMeta": ("dtype", "sizes", "dim_order", "quant"),
    "Dim": ("min", "max"),
    "QuantSpec": ("scheme",),
    "AffineGroup": ("scale_data_key", "scale_dtype", "quant_min", "quant_max", "group_size", "zero_point_data_key"),
    "PackedQuant": ("codec",),
    "NamedTensorRef": ("name", "data_key", "meta", "kind", "mutated"),
    "OutputSpec": ("name", "kind", "target"),
    "MutableBufferSpec": ("name", "fqn"),
}


# -- records ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RawMember:
    """One member of the package's ZIP archive: its name, where its bytes start in the file, how many."""
    name: str
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class RawQuant:
    """``TensorMeta.quant``: ``scheme`` is ``"affine_group"``, ``"packed"`` or ``"unknown"`` (a union member
    this reader does not know)."""
    scheme: str
    codec: str | None = None
    scale_data_key: str | None = None
    zero_point_data_key: str | None = None
    quant_min: int = 0
    quant_max: int = 0
    group_size: int = 0


@dataclass(frozen=True, slots=True)
class RawMeta:
    """``TensorMeta``: the dtype (a :class:`NativeScalarType` code, as read), each dimension's range and the
    dim order."""
    dtype: int
    #: each dimension's lower bound
    mins: tuple[int, ...]
    #: each dimension's upper bound (-1: unbounded)
    maxs: tuple[int, ...]
    dim_order: tuple[int, ...]
    quant: RawQuant | None


@dataclass(frozen=True, slots=True)
class RawNode:
    """A ``Node``: its name, kind (:class:`OpKind`), operator, and what each output aliases (``""``: fresh
    storage)."""
    name: str
    op_kind: int
    target: str
    #: (output name, alias_of) per output; a list output lists each of its element names
    outputs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class RawConstantRef:
    """A ``NamedTensorRef``: a placeholder bound to a constant's data key."""
    name: str
    data_key: str
    meta: RawMeta
    #: an :class:`InputKind` code
    kind: int
    #: a persistent buffer the graph writes (its initial bytes are stored)
    mutated: bool


@dataclass(frozen=True, slots=True)
class RawOutputSpec:
    """An ``OutputSpec``: a graph output's name, its :class:`OutputKind` code and what it writes back to."""
    name: str
    kind: int
    target: str


@dataclass(frozen=True, slots=True)
class RawMutableBuffer:
    """A ``MutableBufferSpec``: a non-persistent buffer (no bytes stored; zero-initialised at load)."""
    name: str
    fqn: str


@dataclass(slots=True)
class RawNativeMethod:
    """One ``Method`` of a native program, as the file stores it."""
    name: str
    nodes: list[RawNode]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: ``Graph.tensor_values``: value name -> its meta (the first entry of a name repeated)
    tensor_values: dict[str, RawMeta]
    constants: list[RawConstantRef]
    output_specs: list[RawOutputSpec]
    mutable_buffers: list[RawMutableBuffer]


@dataclass(slots=True)
class RawNativeProgram:
    """A native program (``program.ptg``): its schema version and methods."""
    version: str
    methods: list[RawNativeMethod]


@dataclass(frozen=True, slots=True)
class RawStored:
    """A tensor ``program.safetensors`` stores: its key, dtype code (``"F32"``), shape, and where its bytes are."""
    key: str
    dtype: str
    shape: tuple[int, ...]
    #: absolute offset of its bytes in the package file
    offset: int
    nbytes: int


@dataclass(slots=True)
class RawPackage:
    """A ``.ptn`` package as it stores its members: the file's size, its members, the native program, the
    stored constants (None without ``program.safetensors``) and the aliases."""
    file_size: int
    members: list[RawMember]
    program: RawNativeProgram
    stored: list[RawStored] | None
    #: safetensors' ``__metadata__`` (string -> string)
    metadata: dict[str, str]
    #: duplicate data key -> owner key (``aliases.json``; empty without it)
    aliases: dict[str, str]
    #: True for a bare ``program.ptg`` (no archive: no constants' bytes, no aliases)
    graph_only: bool = False


# -- the ZIP archive -------------------------------------------------------------------------------------------

def is_package_names(names) -> bool:
    """Whether a ZIP archive's member names are a ``.ptn`` package's (a ``program.ptg``, at its root or in a
    folder)."""
    return any(n == PTG_ENTRY or n.endswith("/" + PTG_ENTRY) for n in names)


def _fail(where: str, what: str) -> PackageError:
    return PackageError(f"{printable(where)}: {what}")


def _path_trick(name: str) -> str | None:
    """Why a member name is not a plain relative name (None when it is one)."""
    if not name:
        return "an empty name"
    if "\x00" in name:
        return "a NUL byte"
    if "\\" in name:
        return "a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in name.split("/"):
        return "a '..' part"
    return None


def _read_at(f: BinaryIO, offset: int, n: int, where: str, what: str) -> bytes:
    f.seek(offset)
    data = f.read(n)
    if len(data) != n:
        raise _fail(where, f"{what}: the file ends after {len(data):,} of its {n:,} bytes (truncated?); {_ADVICE}")
    return data


def _members(f: BinaryIO, size: int, where: str) -> tuple[dict[str, RawMember], dict[str, int]]:
    """The archive's members, each checked: stored, inside the file, apart from the others, plainly named; and
    each one's CRC."""
    try:
        with zipfile.ZipFile(f) as z:
            infos = z.infolist()
            directory = z.start_dir
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, OverflowError, struct.error,
            RuntimeError) as e:
        said = printable(str(e).splitlines()[0][:160]) if str(e) else "cut short"
        raise _fail(where, f"not a complete ZIP archive ({type(e).__name__}: {said}); truncated? {_ADVICE}") from None
    if len(infos) > MAX_MEMBERS:
        raise _fail(where, f"its directory lists {len(infos):,} members (a .ptn has at most 3; more than "
                           f"{MAX_MEMBERS:,} is a crafted archive)")
    members: dict[str, RawMember] = {}
    spans = []
    for info in infos:
        name = info.filename
        trick = _path_trick(name)
        if trick is not None:
            raise _fail(where, f"member {printable(name)!r} is named with {trick}: refusing a package whose names "
                               f"could write outside a folder it is unpacked into")
        if name in members:
            raise _fail(where, f"member {printable(name)!r} is listed twice: which one a reader takes is undefined")
        if info.flag_bits & 0x1:
            raise _fail(where, f"member {printable(name)!r} is encrypted; ExecuTorch writes .ptn members in clear")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise _fail(where, f"member {printable(name)!r} is compressed (method {info.compress_type}, "
                               f"{info.compress_size:,} bytes for {info.file_size:,}): ExecuTorch writes .ptn "
                               f"members stored, and pte_lab inflates nothing; {_ADVICE}")
        if info.header_offset < 0 or info.header_offset + _LOCAL.size > size:
            raise _fail(where, f"member {printable(name)!r} starts at offset {info.header_offset:,}, outside the "
                               f"{size:,}-byte file (truncated or crafted)")
        local = _LOCAL.unpack(_read_at(f, info.header_offset, _LOCAL.size, where, f"member {name!r}'s header"))
        if local[0] != b"PK\x03\x04":
            raise _fail(where, f"member {printable(name)!r}: no local header at offset {info.header_offset:,} "
                               f"(truncated or crafted)")
        name_len, extra_len = local[-2], local[-1]
        raw_name = _read_at(f, info.header_offset + _LOCAL.size, name_len, where, f"member {name!r}'s name")
        if raw_name.decode("utf-8", "replace") != name and raw_name.decode("cp437", "replace") != name:
            raise _fail(where, f"member {printable(name)!r}: its local header names it "
                               f"{printable(raw_name.decode('utf-8', 'replace'))!r} (a crafted archive)")
        start = info.header_offset + _LOCAL.size + name_len + extra_len
        end = start + info.compress_size
        if end > min(size, directory):
            raise _fail(where, f"member {printable(name)!r} declares {info.file_size:,} bytes at offset {start:,}, "
                               f"past the end of its data ({min(size, directory):,}): truncated or crafted")
        spans.append((info.header_offset, end, name))
        members[name] = RawMember(name, start, info.file_size)
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise _fail(where, f"members {printable(a)!r} and {printable(b)!r} overlap (a ZIP bomb's trick)")
    return members, {i.filename: i.CRC for i in infos}


def _json(data: bytes, where: str, what: str):
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        said = printable(str(e).splitlines()[0][:120]) if str(e) else ""
        raise _fail(where, f"{what} is not JSON ({type(e).__name__}: {said})") from None


def _member_bytes(f: BinaryIO, m: RawMember, crc: int, where: str) -> bytes:
    data = _read_at(f, m.offset, m.size, where, m.name)
    if zlib.crc32(data) != crc:
        raise _fail(where, f"{m.name}'s bytes do not match their CRC (corrupt); {_ADVICE}")
    return data


def _is_count(v) -> bool:
    return type(v) is int and v >= 0


def _safetensors(f: BinaryIO, m: RawMember, where: str) -> tuple[list[RawStored], dict[str, str]]:
    what = SAFETENSORS_ENTRY
    if m.size < 8:
        raise _fail(where, f"{what} holds {m.size} bytes, too few for its header's length")
    (n,) = struct.unpack("<Q", _read_at(f, m.offset, 8, where, what))
    if n > MAX_SAFETENSORS_HEADER or 8 + n > m.size:
        raise _fail(where, f"{what}'s header claims {n:,} bytes, more than the member's {m.size - 8:,} after its "
                           f"length" + (f" or the {MAX_SAFETENSORS_HEADER:,} safetensors reads"
                                        if n > MAX_SAFETENSORS_HEADER else ""))
    header = _json(_read_at(f, m.offset + 8, n, where, f"{what}'s header"), where, f"{what}'s header")
    if not isinstance(header, dict):
        raise _fail(where, f"{what}'s header is a JSON {type(header).__name__}, not an object")
    base, room = m.offset + 8 + n, m.size - 8 - n
    metadata = header.pop(_METADATA_KEY, None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise _fail(where, f"{what}'s {_METADATA_KEY} is not an object of strings")
    stored = []
    for key, entry in header.items():
        label = f"{what}'s tensor {printable(key)!r}"
        if not isinstance(entry, dict):
            raise _fail(where, f"{label} is a JSON {type(entry).__name__}, not an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str) or not isinstance(shape, list) or not all(map(_is_count, shape)):
            raise _fail(where, f"{label} has no dtype string or no shape of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets))
                or not offsets[0] <= offsets[1] <= room):
            raise _fail(where, f"{label}: data_offsets {printable(str(offsets)[:60])} are not a range within the "
                               f"{room:,} bytes of data (truncated or crafted)")
        begin, end = offsets
        elsize = _ST_SIZES.get(dtype)
        if elsize is not None:
            count = elsize
            for d in shape:
                count *= d
            if count != end - begin:
                raise _fail(where, f"{label}: {dtype} of shape {shape} takes {count:,} bytes, its data_offsets "
                                   f"give {end - begin:,}")
        stored.append(RawStored(key, dtype, tuple(shape), base + begin, end - begin))
    spans = sorted((s.offset, s.offset + s.nbytes, s.key) for s in stored if s.nbytes)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise _fail(where, f"{what}: tensors {printable(a)!r} and {printable(b)!r} share bytes; safetensors "
                               f"stores each apart (aliases.json names repeats)")
    return stored, metadata


def _aliases(data: bytes, owners: set[str], where: str) -> dict[str, str]:
    raw = _json(data, where, ALIASES_ENTRY)
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise _fail(where, f"{ALIASES_ENTRY} is not an object of strings (data key -> owner key)")
    for key, owner in raw.items():
        if key == _METADATA_KEY:
            raise _fail(where, f"{ALIASES_ENTRY} names {_METADATA_KEY!r}, which safetensors reserves")
        if key in owners:
            raise _fail(where, f"{ALIASES_ENTRY}: {printable(key)!r} is both stored and an alias")
        if owner not in owners:
            raise _fail(where, f"{ALIASES_ENTRY}: {printable(key)!r} aliases {printable(owner)!r}, which "
                               f"{SAFETENSORS_ENTRY} does not store")
    return raw


def read_package(source, where: str | None = None) -> RawPackage:
    """Read a ``.ptn`` package (a path, its bytes or a seekable binary file), or a bare ``program.ptg``.

    Raises :class:`~pte_lab.errors.PackageError` (one line) for a package that cannot be read: not a ZIP,
    truncated, a member compressed, encrypted, outside the file, overlapping another or named with a path,
    no ``program.ptg``, a safetensors header or ``aliases.json`` that does not hold together; and
    :class:`~pte_lab.errors.PteFormatError` for a ``program.ptg`` whose tables do not.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        f: BinaryIO = io.BytesIO(bytes(source))
        where, own = where or "<bytes>", True
    elif isinstance(source, (str, os.PathLike)):
        where = where or os.fspath(source)
        f, own = open_regular(os.fspath(source), "a .ptn package"), True
    else:
        f, own = source, False
        name = getattr(source, "name", None)
        where = where or (name if isinstance(name, str) else "<file>")
    try:
        f.seek(0, io.SEEK_END)
        size = f.tell()
        f.seek(0)
        head = f.read(8)
        if head[4:8] == IDENTIFIER:  # a bare program.ptg
            f.seek(0)
            program = decode_native_program(memoryview(_read_at(f, 0, size, where, PTG_ENTRY)), where)
            return RawPackage(size, [], program, None, {}, {}, graph_only=True)
        members, crcs = _members(f, size, where)
        if PTG_ENTRY not in members:
            inside = [n for n in members if n.endswith("/" + PTG_ENTRY)]
            if inside:
                raise _fail(where, f"{printable(inside[0])} is inside a folder: ExecuTorch reads a .ptn's members "
                                   f"at its root (zip the files themselves, not their folder)")
            raise _fail(where, f"a ZIP archive without {PTG_ENTRY}: not a .ptn package")
        ptg = _member_bytes(f, members[PTG_ENTRY], crcs[PTG_ENTRY], where)
        program = decode_native_program(memoryview(ptg), where)
        stored, metadata = (_safetensors(f, members[SAFETENSORS_ENTRY], where)
                            if SAFETENSORS_ENTRY in members else (None, {}))
        aliases: dict[str, str] = {}
        if ALIASES_ENTRY in members:
            m = members[ALIASES_ENTRY]
            if m.size > MAX_ALIASES_BYTES:
                raise _fail(where, f"{ALIASES_ENTRY} holds {m.size:,} bytes, more than the {MAX_ALIASES_BYTES:,} "
                                   f"pte_lab reads")
            aliases = _aliases(_member_bytes(f, m, crcs[ALIASES_ENTRY], where),
                               {s.key for s in stored or ()}, where)
        return RawPackage(size, sorted(members.values(), key=lambda m: m.offset), program, stored, metadata,
                          aliases)
    finally:
        if own:
            f.close()


# -- the native program (NPTG) ---------------------------------------------------------------------------------

def _string(t: Table, slot: int, what: str, default: str = "") -> str:
    s = t.string(slot, what, default) or default
    t.charge(len(s), "." + what)  # a string shared by many tables costs its bytes each time it is decoded
    return s


def _meta(t: Table | None, where: str) -> RawMeta:
    if t is None:
        raise PteFormatError(f"{where}: no meta (the schema requires one)")
    dims = t.tables(1, "sizes")
    mins, maxs = [], []
    for d in dims:
        mins.append(d.scalar(0, "int64", 0))
        maxs.append(d.scalar(1, "int64", -1))
    for lo, hi in zip(mins, maxs):
        if lo < 0 or (hi >= 0 and hi < lo):
            raise PteFormatError(f"{t.where}.sizes: dimension range [{lo}, {hi}] is not a range of sizes")
    quant = None
    spec = t.table(3, "quant")
    if spec is not None:
        tag, q = spec.union(0, 1, "scheme")
        if tag == 1 and q is not None:
            quant = RawQuant("affine_group", None, _string(q, 0, "scale_data_key"), _string(q, 5, "zero_point_data_key"),
                             q.scalar(2, "int32"), q.scalar(3, "int32"), q.scalar(4, "int32"))
        elif tag == 2 and q is not None:
            quant = RawQuant("packed", _string(q, 0, "codec"))
        elif tag:
            quant = RawQuant("unknown")
    return RawMeta(t.scalar(0, "int8"), tuple(mins), tuple(maxs), t.int_tuple(2, "int32", "dim_order"), quant)


def _method(m: Table) -> RawNativeMethod:
    name = _string(m, 0, "name")
    g = m.table(1, "graph")
    if g is None:
        raise PteFormatError(f"{m.where}: no graph (the schema requires one)")
    nodes = []
    for n in g.tables(0, "nodes"):
        outs: list[tuple[str, str]] = []
        for o in n.tables(4, "outputs"):
            alias = _string(o, 1, "alias_of")
            names = o.strings(3, "names")
            outs += [(x, "") for x in names] if names else [(_string(o, 0, "name"), alias)]
        nodes.append(RawNode(_string(n, 0, "name"), n.scalar(1, "int8"), _string(n, 2, "target"), tuple(outs)))
    values: dict[str, RawMeta] = {}
    for tv in g.tables(3, "tensor_values"):
        key = _string(tv, 0, "name")
        if key not in values:
            values[key] = _meta(tv.table(1, "meta"), tv.where)
    constants = [RawConstantRef(_string(c, 0, "name"), _string(c, 1, "data_key"), _meta(c.table(2, "meta"), c.where),
                                c.scalar(3, "int8"), c.scalar(4, "bool", False))
                 for c in m.tables(2, "constants")]
    specs = [RawOutputSpec(_string(s, 0, "name"), s.scalar(1, "int8"), _string(s, 2, "target"))
             for s in m.tables(3, "output_specs")]
    buffers = [RawMutableBuffer(_string(b, 0, "name"), _string(b, 1, "fqn")) for b in m.tables(4, "mutable_buffers")]
    return RawNativeMethod(name, nodes, g.strings(1, "inputs"), g.strings(2, "outputs"), values, constants, specs,
                           buffers)


def decode_native_program(buf: memoryview, where: str = PTG_ENTRY) -> RawNativeProgram:
    """Decode a native program flatbuffer (``program.ptg``, identifier ``NPTG``) into records."""
    if len(buf) < 8 or bytes(buf[4:8]) != IDENTIFIER:
        raise _fail(where, f"{PTG_ENTRY} is not a native program (identifier {bytes(buf[4:8])!r}, not {IDENTIFIER!r})")
    root = root_table(buf, "program.ptg")
    methods = [_method(m) for m in root.tables(1, "methods")]
    seen: set[str] = set()
    for m in methods:
        if m.name in seen:
            raise _fail(where, f"{PTG_ENTRY} lists method {printable(m.name)!r} twice")
        seen.add(m.name)
    return RawNativeProgram(_string(root, 0, "version"), methods)
