"""Files often given where a ``.pte`` is expected, recognised from their first bytes: what each is, and
what to do instead. The one home of that wording.

Only the failure path comes here (a file whose bytes 4..8 are not a ``.pte``'s ``ET12``), so a real
program is never misnamed. What is read: the first :data:`HEAD_BYTES` bytes and, for a ZIP archive,
its central directory (member names, through :mod:`zipfile`; nothing is unpickled or decompressed).

- ZIP archives (``PK\\x03\\x04``), told apart by their member names: TorchScript / PyTorch Mobile
  (``*/code/``, ``*/bytecode.pkl``, ``*/constants.pkl``), ExecuTorch's ETRecord (``ETRECORD_V0``),
  ``torch.export.save`` (``*/archive_format``, ``*/models/``), ``torch.save`` (``*/data.pkl``), ExecuTorch's
  native program package (``.ptn``: ``program.ptg``; named from its first member's local header where the
  directory cannot be read, so that a truncated one is read as a package and said to be truncated).
- Flatbuffers by identifier: ``FT01`` (ExecuTorch's FlatTensor ``.ptd``), ``ED00`` (an ETDump, written
  by flatcc with a size prefix: the identifier at bytes 8..12, or 4..8 without the prefix),
  ``TFL3`` (TensorFlow Lite).
- ONNX (a protobuf ``ModelProto``): ``ir_version`` (field 1, a small varint) first, then valid
  ModelProto fields, and a printable ``producer_name`` or ``onnx`` in the first bytes.
- A Git LFS pointer, an HTML page (a download that saved the page), GGUF (llama.cpp).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import NotAProgramError
from ..vocabulary import Word

#: bytes of the start of a file read to recognise it
HEAD_BYTES = 4096

#: what a .ptn is called, wherever pte_lab names it
PTN_NAME = "an ExecuTorch native program package (.ptn, written by executorch.exir.native.to_native(...).save)"
#: why a .ptn has no arenas, offsets or peak
NO_PLAN = ("carries no memory plan: ExecuTorch's native runtime plans memory when it loads the package, from each "
           "dimension's upper bound")
#: what to do with a .ptn where a planned program is needed
_PTN_ADVICE = ("pte-lab inspect FILE (pte_lab.open) shows what it holds: its methods, each tensor's bytes at its "
               "bound, its constants and state; for a plan to size, what-if, replan or diff, export a .pte: "
               "to_edge_transform_and_lower(exported_program).to_executorch(), then save its buffer")
_EXPORT = "export the PyTorch model with torch.export + ExecuTorch (to_edge_transform_and_lower, to_executorch)"


class MixupKind(Word):
    """What a file taken for a program is (the ``kind`` of a ``Mixup`` and of the
    :class:`~pte_lab.NotAProgramError` it raises): a ``str`` enum that compares, prints and reprs as the short
    name it had. Compare a kind with a member, never a literal."""

    TORCHSCRIPT = "torchscript"
    ETRECORD = "etrecord"
    PT2 = "pt2"
    CHECKPOINT = "checkpoint"
    ZIP = "zip"
    PTD = "ptd"
    ETDUMP = "etdump"
    TFLITE = "tflite"
    ONNX = "onnx"
    LFS_POINTER = "lfs_pointer"
    HTML = "html"
    GGUF = "gguf"
    #: 1.5.1's native program package (``.ptn``), and its graph (``program.ptg``)
    PTN = "ptn"
    PTG = "ptg"
    #: not a program, and none of the above (bytes 4..8 are not a ``.pte``'s)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Mixup:
    #: a short name (:class:`MixupKind`)
    kind: MixupKind
    #: what the file is
    what: str
    #: what to do instead
    advice: str

    def message(self, expected: str = ".pte") -> str:
        return f"not a {expected} file: this is {self.what}; {self.advice}"

    def error(self, expected: str = ".pte") -> NotAProgramError:
        """The error to raise where an ``expected`` file (".pte", ".ptd") was given this one."""
        return NotAProgramError(self.message(expected), kind=self.kind)


#: each kind of file taken for a program (its ``kind``) -> what it is and what to do instead
MIXUPS = {m.kind: m for m in (
    Mixup(MixupKind.TORCHSCRIPT, "a ZIP archive: a TorchScript or PyTorch Mobile model, which ExecuTorch cannot load",
          "export with torch.export + ExecuTorch (to_edge_transform_and_lower, to_executorch)"),
    Mixup(MixupKind.ETRECORD, "a ZIP archive written by ExecuTorch's ETRecord (the exported graphs and debug maps "
          "the devtools Inspector reads), not a program",
          "open the .pte it was made with; read this file with executorch.devtools.Inspector(etrecord=...)"),
    Mixup(MixupKind.PT2, "a ZIP archive written by torch.export.save (an ExportedProgram, .pt2), not an ExecuTorch program",
          "lower it with ExecuTorch: to_edge_transform_and_lower(torch.export.load(path)).to_executorch(), "
          "then save its buffer as a .pte"),
    Mixup(MixupKind.CHECKPOINT, "a ZIP archive written by torch.save (weights or a pickled PyTorch object), "
          "not an ExecuTorch program", f"load it in PyTorch, then {_EXPORT}"),
    Mixup(MixupKind.PTN, f"{PTN_NAME}, which {NO_PLAN}", _PTN_ADVICE),
    Mixup(MixupKind.PTG, f"the native program of {PTN_NAME} (program.ptg, flatbuffer b'NPTG'), which {NO_PLAN}",
          _PTN_ADVICE),
    Mixup(MixupKind.ZIP, "a ZIP archive, not an ExecuTorch program (a .pte is a flatbuffer with b'ET12' at bytes 4..8)",
          "unpack it and open the .pte inside, if it holds one"),
    Mixup(MixupKind.PTD, "a .ptd data file (ExecuTorch's FlatTensor, b'FT01'): named tensors for a program, not a program",
          "open it with pte_lab.open, or pass it as data= with its program"),
    Mixup(MixupKind.ETDUMP, "an ETDump (ExecuTorch's profiling and debug trace, flatbuffer b'ED00'), not a program",
          "read it with executorch.devtools.Inspector(etdump_path=...), with the .pte that wrote it"),
    Mixup(MixupKind.TFLITE, "a TensorFlow Lite model (flatbuffer b'TFL3'), which ExecuTorch cannot load",
          f"run it with TensorFlow Lite (LiteRT), or {_EXPORT}"),
    Mixup(MixupKind.ONNX, "an ONNX model (a protobuf ModelProto), which ExecuTorch cannot load",
          f"run it with ONNX Runtime, or {_EXPORT}"),
    Mixup(MixupKind.LFS_POINTER, "a Git LFS pointer (a small text file standing in for the real one), not the program",
          "fetch the file itself (git lfs pull, or the download link of the file, not of the page)"),
    Mixup(MixupKind.HTML, "an HTML page (the download saved a web page, not the file)",
          "download the file itself (a raw or resolve link)"),
    Mixup(MixupKind.GGUF, "a GGUF model (llama.cpp), which ExecuTorch cannot load",
          "export the model with ExecuTorch's LLM flow (executorch.extension.llm.export, export_llm)"),
)}

_FLATBUFFER_IDS = {b"FT01": MixupKind.PTD, b"ED00": MixupKind.ETDUMP, b"TFL3": MixupKind.TFLITE, b"NPTG": MixupKind.PTG}


def _zip_kind(names: list[str]) -> MixupKind:
    """What a ZIP archive is, from its member names."""
    if "ETRECORD_V0" in names:
        return MixupKind.ETRECORD
    tails = {n.split("/", 1)[1] if "/" in n else n for n in names}
    if any(t.startswith("code/") for t in tails) or {"bytecode.pkl", "constants.pkl"} & tails:
        return MixupKind.TORCHSCRIPT
    if "archive_format" in tails or any(t.startswith("models/") for t in tails):
        return MixupKind.PT2
    if "data.pkl" in tails:
        return MixupKind.CHECKPOINT
    if "program.ptg" in tails:
        return MixupKind.PTN
    return MixupKind.ZIP


def _varint(b: bytes, i: int) -> tuple[int | None, int]:
    v = shift = 0
    while i < len(b) and shift < 64:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
    return None, i


#: ModelProto's fields (onnx.proto): number -> wire type (0 varint, 2 length-delimited)
_ONNX_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}


def _is_onnx(head: bytes, file_size: int) -> bool:
    """A ModelProto, conservatively: ir_version first, then only ModelProto fields that fit the file."""
    if not head or head[0] != 0x08:
        return False
    ir, i = _varint(head, 1)
    if ir is None or not 1 <= ir <= 64:
        return False
    fields, producer = 1, None
    while i < len(head):
        tag, j = _varint(head, i)
        if tag is None or _ONNX_FIELDS.get(tag >> 3) != (tag & 7):
            return False
        if tag & 7 == 0:
            v, i = _varint(head, j)
            if v is None:
                return False
        else:
            n, j = _varint(head, j)
            if n is None or j + n > file_size:
                return False
            if tag >> 3 == 2:
                producer = head[j : j + n]
            i = j + n
        fields += 1
    readable = producer is not None and 0 < len(producer) <= 128 and all(32 <= c < 127 for c in producer)
    return fields >= 2 and (readable or b"onnx" in head.lower())


def recognise(head: bytes, file_size: int, zip_source: "str | BinaryIO | None" = None) -> Mixup | None:
    """The :class:`Mixup` ``head`` (a file's first bytes) starts, or None when it is none of them.

    ``zip_source`` (a path or a seekable binary file) gives a ZIP archive's member names; without it a
    ZIP is named as a ZIP only.
    """
    if head[:4] == b"PK\x03\x04":
        kind = None
        if zip_source is not None:
            try:
                with zipfile.ZipFile(zip_source) as z:
                    kind = _zip_kind(z.namelist())
            except Exception:  # noqa: BLE001 - an archive zipfile cannot list is a ZIP all the same
                pass
        if kind is None:  # no directory to read (cut short?): the first member's name, from its local header
            n = int.from_bytes(head[26:28], "little")
            kind = MixupKind.PTN if head[30 : 30 + n] == b"program.ptg" else MixupKind.ZIP
        return MIXUPS[kind]
    kind = _FLATBUFFER_IDS.get(head[4:8])
    if kind is None and head[8:12] == b"ED00":
        kind = MixupKind.ETDUMP  # flatcc's size-prefixed buffer: the identifier follows the size and the root offset
    if kind is not None:
        return MIXUPS[kind]
    if head[:4] == b"GGUF":
        return MIXUPS[MixupKind.GGUF]
    if head.startswith(b"version https://git-lfs.github.com/spec/"):
        return MIXUPS[MixupKind.LFS_POINTER]
    text = head[:512].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")):
        return MIXUPS[MixupKind.HTML]
    if _is_onnx(head, file_size):
        return MIXUPS[MixupKind.ONNX]
    return None


def zip_source(path: str | None, data: "bytes | memoryview | None", f: "BinaryIO | None") -> "str | BinaryIO | None":
    """Where :func:`recognise` reads a ZIP's central directory: the path, the bytes, or a seekable file."""
    if path is not None:
        return path
    if data is not None:
        return io.BytesIO(data)
    if f is not None and getattr(f, "seekable", lambda: False)():
        return f
    return None
