"""An ETRecord (ExecuTorch's devtools record of an export), read without running anything from it.

An ETRecord is a ZIP archive (``to_edge_transform_and_lower(..., generate_etrecord=True)`` then
``get_etrecord().save(path)``). What is read here is JSON:

``debug_handle_map``                 per method, instruction index -> debug handle(s)
``delegate_map``                     per method, delegate-call instruction -> backend name
``instruction_id_to_num_outs_map``   per method, delegate-call instruction -> number of outputs
``edge_dialect_exported_program/M``  torch.export's serialized graph (JSON) of method ``M``'s edge
                                     program: each node's name, target and metadata (``debug_handle``,
                                     ``nn_module_stack``, ``stack_trace``)

Never read: ``*_state_dict``, ``*_constants`` and ``*_example_inputs`` (torch-serialized, i.e.
pickled; listed in :attr:`ETRecord.unread`), and the pre-edge ``exported_program`` (not needed).
Nothing is unpickled, torch and executorch are not imported.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from ..errors import ETRecordError, NotARegularFileError
from .regular_file import check_regular

__all__ = ["ETRecord", "MethodRecord", "NodeInfo", "SourceLine", "read_etrecord", "EDGE_PROGRAM", "innermost_user"]

MARKER = "ETRECORD_V0"
EDGE_PROGRAM = "edge_dialect_exported_program/"
_JSON_MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
_PICKLED_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: an entry may not declare more bytes than this many times what it stores (deflate's ratio is ~1000 at
#: most on real data; ETRecords are written uncompressed) plus this slack
_MAX_RATIO, _SLACK = 100, 1 << 20
#: the JSON nesting an argument walk follows (torch.export's arguments nest two or three deep)
_MAX_DEPTH = 32
_EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
#: frames of the frameworks, skipped to find the user's innermost line
_FRAMEWORK = re.compile(r"[/\\](site|dist)-packages[/\\](torch|executorch|torchao)[/\\]")
_BRACKETS = frozenset("[()]")
_FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>\S+)')


@dataclass(frozen=True)
class SourceLine:
    """One frame of a stack trace: ``file:line`` in ``function``, and the line's code."""

    file: str
    line: int
    function: str
    code: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.code}".rstrip()


@dataclass(frozen=True)
class NodeInfo:
    """An FX node of a method's edge program, as the ETRecord records it."""

    name: str
    #: the operator, shortened (``aten.addmm.default``; torch.export's full target when not an edge op)
    target: str
    debug_handle: int | None
    #: ``(path, type)`` from the outermost module to the innermost (``("blocks.0.fc1",
    #: "torch.nn.modules.linear.Linear")``); empty when the node records none
    module_stack: tuple[tuple[str, str], ...]
    #: the user's innermost frame (frameworks' frames skipped); None without a stack trace
    source: SourceLine | None
    stack_trace: str | None
    #: the tensors the node reads and writes (names in the graph)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: each output tensor's shape as the edge graph records it, a symbolic dimension as None
    output_shapes: tuple[tuple[int | None, ...], ...] = ()

    @property
    def module(self) -> str | None:
        """The innermost module's path (``blocks.0.fc1``); ``""`` is the root module."""
        return self.module_stack[-1][0] if self.module_stack else None

    @property
    def module_type(self) -> str | None:
        """The innermost module's class name (``Linear``)."""
        return self.module_stack[-1][1].rpartition(".")[2] if self.module_stack else None

    @property
    def op(self) -> str:
        """The operator's base name (``addmm``), to compare with an instruction's ``aten::addmm.out``."""
        return op_base(self.target)


def op_base(name: str) -> str:
    """``aten.addmm.default``, ``aten::addmm.out``, ``llama::update_cache.out`` -> the base name."""
    name = name.replace("::", ".")
    parts = name.split(".")
    return parts[1] if len(parts) >= 2 else name


@dataclass(frozen=True)
class MethodRecord:
    """What an ETRecord says about one method."""

    name: str
    #: instruction index -> the debug handles it carries (a delegate call carries several)
    handles: Mapping[int, tuple[int, ...]]
    #: delegate-call instruction -> backend name (``XnnpackBackend``)
    delegates: Mapping[int, str]
    #: delegate-call instruction -> number of outputs
    num_outs: Mapping[int, int]
    #: the edge program's call nodes in graph order; empty when the ETRecord has no edge program for it
    nodes: tuple[NodeInfo, ...]
    #: debug handle -> its nodes, in graph order
    by_handle: Mapping[int, tuple[NodeInfo, ...]]
    #: the names of the graph's outputs
    graph_outputs: tuple[str, ...]
    has_graph: bool
    #: graph name of a buffer (its placeholder, or the value a mutation writes back) -> the buffer's fully
    #: qualified name (``layers.0.attention.kv_cache.k_cache``), from the edge program's graph signature
    buffers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def nodes_of(self, instruction: int) -> tuple[NodeInfo, ...]:
        """The nodes an instruction came from (all the swallowed nodes for a delegate call)."""
        out: list[NodeInfo] = []
        for h in dict.fromkeys(self.handles.get(instruction, ())):  # a handle may be listed twice
            out.extend(self.by_handle.get(h, ()))
        return tuple(out)


@dataclass(frozen=True)
class ETRecord:
    """An ETRecord's graph metadata, by method."""

    path: str | None
    methods: Mapping[str, MethodRecord]
    #: entries present but not read because they are pickled (state dicts, constants, example inputs)
    unread: tuple[str, ...]

    def __getitem__(self, name: str) -> MethodRecord:
        return self.methods[name]


def _fail(where: str, what: str) -> ETRecordError:
    return ETRecordError(f"{where}: not a readable ETRecord: {what}")


def _read_entry(z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, size: int) -> bytes:
    if info.header_offset + info.compress_size > size:
        raise _fail(where, f"entry {info.filename!r} declares {info.compress_size:,} stored bytes at offset "
                           f"{info.header_offset:,}, past the end of the {size:,}-byte file (truncated or crafted)")
    if info.file_size > _MAX_RATIO * max(info.compress_size, 1) + _SLACK:
        raise _fail(where, f"entry {info.filename!r} declares {info.file_size:,} bytes from "
                           f"{info.compress_size:,} stored (a ZIP bomb or a crafted file)")
    with z.open(info) as f:
        data = f.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise _fail(where, f"entry {info.filename!r} holds {len(data):,} bytes, not the "
                           f"{info.file_size:,} it declares")
    return data


def _json(z, info, where, size):
    data = _read_entry(z, info, where, size)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise _fail(where, f"entry {info.filename!r} is not JSON ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:120] if str(e) else ''})") from None


def _int(v, what: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _fail(where, f"{what} is {type(v).__name__}, not an integer")
    try:
        return int(v)
    except ValueError:
        raise _fail(where, f"{what} is {str(v)[:40]!r}, not an integer") from None


def _per_method(raw, name: str, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise _fail(where, f"{name} is not a map of methods to maps")
    return raw


def _handles(v, what, where) -> tuple[int, ...]:
    if isinstance(v, list):
        return tuple(_int(x, what, where) for x in v)
    return (_int(v, what, where),)


def _split_meta(item: str) -> list[str]:
    """``key,path,type`` split at commas outside brackets (a path may hold ``[...]`` or ``(...)``)."""
    if not _BRACKETS.intersection(item):
        return item.split(",")
    parts, depth, start = [], 0, 0
    for i, c in enumerate(item):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(item[start:i])
            start = i + 1
    parts.append(item[start:])
    return parts


def _module_stack(text) -> tuple[tuple[str, str], ...]:
    if not isinstance(text, str) or not text:
        return ()
    out = []
    for item in text.split(";"):
        parts = _split_meta(item)
        if len(parts) >= 3:
            out.append((",".join(parts[1:-1]), parts[-1]))
    return tuple(out)


def user_frame(trace) -> SourceLine | None:
    """The innermost frame of a stack trace outside torch/executorch (the innermost one if all are)."""
    if not isinstance(trace, str) or not trace:
        return None
    lines = trace.splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
            frames.append(SourceLine(m["file"], int(m["line"]), m["function"], code))
    return innermost_user(frames)


def innermost_user(frames) -> SourceLine | None:
    """The innermost of ``frames`` (outermost first) outside torch/executorch (the innermost one if all are)."""
    if not frames:
        return None
    users = [f for f in frames if not _FRAMEWORK.search(f.file) and not f.file.startswith("<")]
    return (users or frames)[-1]


def _names(arg, out: list[str]) -> None:
    """The tensor names an argument of torch.export's JSON graph mentions (bounded depth)."""
    _walk(arg, out, 0)


def _walk(a, out: list[str], depth: int) -> None:
    """:func:`_names` below ``depth`` (in order: each container's items first to last)."""
    if depth > _MAX_DEPTH:
        return
    if type(a) is dict:
        t = a.get("as_tensor")
        if type(t) is dict and type(t.get("name")) is str:
            out.append(t["name"])
            return
        a = a.values()
    elif type(a) is not list:
        return
    for v in a:
        if type(v) is dict or type(v) is list:
            _walk(v, out, depth + 1)


def _shape(meta: dict) -> tuple[int | None, ...]:
    """A tensor's sizes from torch.export's JSON (``{"as_int": 8}``; a symbolic size is None)."""
    sizes = meta.get("sizes")
    if not isinstance(sizes, list):
        return ()
    return tuple(d["as_int"] if isinstance(d, dict) and type(d.get("as_int")) is int else None for d in sizes)


def _graph(doc, where: str) -> tuple[tuple[NodeInfo, ...], tuple[str, ...]]:
    try:
        graph = doc["graph_module"]["graph"]
        nodes = graph["nodes"]
        if not isinstance(nodes, list):
            raise TypeError
    except (KeyError, TypeError):
        raise _fail(where, "the edge program has no graph_module.graph.nodes") from None
    values = graph.get("tensor_values") if isinstance(graph.get("tensor_values"), dict) else {}
    out = []
    # nodes of one module, or of one line, repeat its stack: each distinct one is read once
    stacks: dict[str, tuple] = {}
    frames: dict[str, SourceLine | None] = {}
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not isinstance(n.get("name"), str):
            raise _fail(where, f"node {i} of the edge program has no name")
        md = n.get("metadata") or {}
        if not isinstance(md, dict):
            raise _fail(where, f"node {n['name']!r} has metadata that is not a map")
        h = md.get("debug_handle")
        handle = None if h in (None, "") else _int(h, f"node {n['name']!r}'s debug_handle", where)
        target = n.get("target") if isinstance(n.get("target"), str) else ""
        ins: list[str] = []
        outs: list[str] = []
        _names(n.get("inputs"), ins)
        _names(n.get("outputs"), outs)
        trace = md.get("stack_trace") if isinstance(md.get("stack_trace"), str) else None
        stack = md.get("nn_module_stack")
        if isinstance(stack, str):
            modules = stacks.get(stack)
            if modules is None:
                modules = stacks[stack] = _module_stack(stack)
        else:
            modules = _module_stack(stack)
        if trace is not None:
            if trace in frames:
                frame = frames[trace]
            else:
                frame = frames[trace] = user_frame(trace)
        else:
            frame = None
        out.append(NodeInfo(n["name"], target.removeprefix(_EDGE_PREFIX), handle, modules,
                            frame, trace, tuple(ins), tuple(outs),
                            tuple(_shape(values.get(o)) for o in outs if isinstance(values.get(o), dict))))
    graph_out: list[str] = []
    _names(graph.get("outputs") if isinstance(graph, dict) else None, graph_out)
    return tuple(out), tuple(graph_out)


def _buffer_names(doc) -> dict[str, str]:
    """Graph name -> buffer name, from the graph signature's buffer inputs and buffer mutations (an
    ETRecord without a signature, or with one of another shape, names none)."""
    sig = doc.get("graph_module", {}).get("signature") if isinstance(doc, dict) else None
    out: dict[str, str] = {}
    if not isinstance(sig, dict):
        return out
    for key, kind in (("input_specs", "buffer"), ("output_specs", "buffer_mutation")):
        for spec in sig.get(key) or ():
            entry = spec.get(kind) if isinstance(spec, dict) else None
            arg = entry.get("arg") if isinstance(entry, dict) else None
            if isinstance(arg, dict) and isinstance(arg.get("name"), str) and isinstance(entry.get("buffer_name"), str):
                out[arg["name"]] = entry["buffer_name"]
    return out


#: the ETRecords last read from files, by (path, inode, size, mtime): a notebook re-opening a program with its
#: ETRecord parses it once (the records are immutable); a file written again is read again
_READ: "OrderedDict[tuple, ETRecord]" = OrderedDict()
_KEEP = 4


def read_etrecord(source) -> ETRecord:
    """Read an ETRecord (a path, or its bytes) into records, unpickling nothing; a file read before and
    unchanged since (same inode, size and modification time) gives the records it gave then.

    Raises :class:`~pte_lab.errors.ETRecordError` (one line) for anything that is not a readable ETRecord.
    """
    key = None
    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            where, opened, size = "ETRecord", io.BytesIO(bytes(source)), len(source)
        else:
            where = opened = os.fspath(source)
            check_regular(where, "an ETRecord")  # a FIFO or a device: refused before it is opened
            st = os.stat(where)
            size = st.st_size
            key = (where, os.path.abspath(where), st.st_ino, size, st.st_mtime_ns)
            known = _READ.get(key)
            if known is not None:
                return known
        with zipfile.ZipFile(opened) as z:
            record = _read(z, where if isinstance(opened, str) else None, where, size)
    except (ETRecordError, NotARegularFileError):
        raise
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
            ValueError) as e:
        raise _fail(where, f"not a complete ZIP archive ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:160] if str(e) else 'cut short'}); truncated, or not an "
                           f"ETRecord? Save it again with get_etrecord().save(path)") from None
    if key is not None:
        _READ[key] = record
        while len(_READ) > _KEEP:  # the oldest read goes first
            _READ.popitem(last=False)
    return record


def _read(z: zipfile.ZipFile, path: str | None, where: str, size: int) -> ETRecord:
    infos = {i.filename: i for i in z.infolist()}
    if "debug_handle_map" not in infos:
        kind = f"{MARKER} but" if MARKER in infos else "a ZIP archive without ETRecord entries:"
        raise _fail(where, f"{kind} no debug_handle_map entry (entries: "
                           f"{', '.join(sorted(infos)[:6])}{', ...' if len(infos) > 6 else ''}); if the file was "
                           f"cut short, save it again with get_etrecord().save(path)")
    maps = {k: _per_method(_json(z, infos[k], where, size) if k in infos else None, k, where) for k in _JSON_MAPS}
    edge = {n[len(EDGE_PROGRAM):]: info for n, info in infos.items()
            if n.startswith(EDGE_PROGRAM) and not n.endswith(_PICKLED_SUFFIXES)}
    unread = tuple(sorted(n for n in infos if n.endswith(_PICKLED_SUFFIXES)))
    names = list(dict.fromkeys([*maps["debug_handle_map"], *edge]))
    methods = {}
    for name in names:
        raw = maps["debug_handle_map"].get(name, {})
        handles = {_int(k, f"{name}'s instruction {k!r}", where): _handles(v, f"{name}'s handle of {k!r}", where)
                   for k, v in raw.items()}
        delegates = {}
        for k, v in maps["delegate_map"].get(name, {}).items():
            backend = v.get("name") if isinstance(v, dict) else None
            delegates[_int(k, f"{name}'s delegate {k!r}", where)] = backend if isinstance(backend, str) else "?"
        num_outs = {_int(k, f"{name}'s instruction {k!r}", where): _int(v, f"{name}'s output count", where)
                    for k, v in maps["instruction_id_to_num_outs_map"].get(name, {}).items()}
        doc = _json(z, edge[name], where, size) if name in edge else None
        nodes, graph_out = _graph(doc, where) if doc is not None else ((), ())
        by_handle: dict[int, list[NodeInfo]] = {}
        for n in nodes:
            if n.debug_handle is not None:
                by_handle.setdefault(n.debug_handle, []).append(n)
        methods[name] = MethodRecord(
            name, MappingProxyType(handles), MappingProxyType(delegates), MappingProxyType(num_outs), nodes,
            MappingProxyType({h: tuple(v) for h, v in by_handle.items()}), graph_out, name in edge,
            MappingProxyType(_buffer_names(doc)))
    return ETRecord(path, MappingProxyType(methods), unread)
